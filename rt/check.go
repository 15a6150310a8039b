package rt

import (
	"fmt"
	"math"
	"slices"
)

// CheckOp validates the operands of op: every present ref is in bounds,
// operands read linearly are contiguous and hold the elements the op's
// sizes address, and the elementwise shapes agree. Backends call it from
// Launch, so a bad op is an error, never an out-of-bounds write.
//
// The operand rules come from the table of [Operands]; CheckOp adds the
// checks of each op's own parameters.
func CheckOp(op Op) error {
	if op == nil {
		return fmt.Errorf("rt: nil op")
	}
	ops := Operands(op)
	if ops == nil {
		return fmt.Errorf("rt: nil or unknown op %T", op)
	}
	if err := checkRequired(op, ops); err != nil {
		return err
	}
	if err := checkRefs(op, ops); err != nil {
		return err
	}
	if err := checkSizes(op); err != nil {
		return err
	}
	if err := checkParams(op); err != nil {
		return err
	}
	return checkExtents(op, ops)
}

// checkRequired rejects ops whose mandatory operands have no buffer.
func checkRequired(op Op, ops []Operand) error {
	var missing []string
	for _, o := range ops {
		if !o.Optional && o.Ref.Buf == nil {
			missing = append(missing, o.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: operand %v has no buffer", op.OpName(), missing)
	}
	return nil
}

// checkRefs checks every present operand on its own: in bounds, and
// contiguous unless the table allows a strided view.
func checkRefs(op Op, ops []Operand) error {
	for _, o := range ops {
		r := o.Ref
		if r.Buf == nil {
			continue
		}
		if err := r.Check(); err != nil {
			return fmt.Errorf("%s: operand %s: %w", op.OpName(), o.Name, err)
		}
		if !o.Strided && !r.Contiguous() {
			return fmt.Errorf("%s: operand %s must be contiguous (shape %v, strides %v)", op.OpName(), o.Name, r.Shape, r.Strides)
		}
	}
	return nil
}

// checkExtents checks the table's shapes and linear extents of every
// present operand.
func checkExtents(op Op, ops []Operand) error {
	for _, o := range ops {
		r := o.Ref
		if r.Buf == nil {
			continue
		}
		if o.Shape != nil && !slices.Equal(r.Shape, o.Shape) {
			return fmt.Errorf("%s: %s shape %v, want %v", op.OpName(), o.Name, r.Shape, o.Shape)
		}
		if !o.Strided && (o.Need < 0 || r.Len() < o.Need) {
			return fmt.Errorf("%s: %s has %d elements, needs %d", op.OpName(), o.Name, r.Len(), o.Need)
		}
	}
	return nil
}

// checkSizes rejects negative sizes and strides, and any beyond int32
// (kernels index with 32-bit integers; products then fit in int64).
func checkSizes(op Op) error {
	sizes := opSizes(op)
	for _, v := range sizes {
		if v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("%s: size or stride out of range in %v", op.OpName(), sizes)
		}
	}
	return nil
}

// opSizes lists the size and stride parameters of op.
func opSizes(op Op) []int {
	switch o := op.(type) {
	case *Reduce:
		return []int{o.Outer, o.N, o.Inner}
	case *Softmax:
		return []int{o.Outer, o.N, o.Inner}
	case *MatMul:
		return []int{o.Batch, o.M, o.N, o.K, o.StrideA, o.StrideB, o.StrideY}
	case *Conv:
		return []int{o.N, o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.PadT, o.PadL, o.StrideY}
	case *ConvTranspose:
		return []int{o.N, o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.PadT, o.PadL}
	case *Pool:
		return []int{o.NC, o.H, o.W, o.OH, o.OW, o.PadT, o.PadL, o.PadB, o.PadR}
	case *Normalize:
		return []int{o.Outer, o.N}
	case *Gather:
		return []int{o.Outer, o.Axis, o.Inner}
	case *GatherElements:
		return []int{o.Outer, o.Axis, o.N, o.Inner}
	case *ScatterElements:
		return []int{o.Outer, o.Axis, o.N, o.Inner}
	case *TopK:
		return []int{o.Outer, o.N, o.Inner, o.K}
	case *OptimStep:
		return []int{o.N}
	case *Attention:
		return []int{o.B, o.H, o.Lq, o.Lk, o.D, o.Dv}
	case *SepConv:
		d, p := &o.DW, &o.PW
		return []int{d.N, d.C, d.H, d.Width, d.K, d.OH, d.OW, d.KH, d.KW, d.PadT, d.PadL, p.K}
	}
	return nil
}

// checkParams checks the parameters of op that are not operand extents:
// group counts, strides and dilations, index and output dtypes.
func checkParams(op Op) error {
	switch o := op.(type) {
	case *MatMul:
		if o.Batch < 1 {
			return fmt.Errorf("MatMul: bad sizes batch=%d M=%d N=%d K=%d", o.Batch, o.M, o.N, o.K)
		}
		if o.Res.Buf != nil {
			if o.Res.DType != o.Y.DType {
				return fmt.Errorf("MatMul: Res dtype %s != Y dtype %s", o.Res.DType, o.Y.DType)
			}
			if o.Res.Buf == o.Y.Buf && o.Res.Off != o.Y.Off {
				lo, hi := o.Res.Span()
				ylo, yhi := o.Y.Span()
				if lo < yhi && ylo < hi {
					return fmt.Errorf("MatMul: Res overlaps Y at another offset")
				}
			}
		}
	case *Conv:
		if !goodConvParams(o.C, o.K, o.Groups, o.StrideH, o.StrideW, o.DilH, o.DilW) {
			return fmt.Errorf("Conv: bad params C=%d K=%d groups=%d stride=%dx%d dil=%dx%d", o.C, o.K, o.Groups, o.StrideH, o.StrideW, o.DilH, o.DilW)
		}
		if o.StrideY != 0 && int64(o.StrideY) < Extent(o.K, o.OH, o.OW) {
			return fmt.Errorf("Conv: StrideY %d is less than an image of Y (%d×%d×%d)", o.StrideY, o.K, o.OH, o.OW)
		}
	case *ConvTranspose:
		if !goodConvParams(o.C, o.K, o.Groups, o.StrideH, o.StrideW, o.DilH, o.DilW) {
			return fmt.Errorf("ConvTranspose: bad params C=%d K=%d groups=%d stride=%dx%d dil=%dx%d", o.C, o.K, o.Groups, o.StrideH, o.StrideW, o.DilH, o.DilW)
		}
	case *Pool:
		if o.StrideH < 1 || o.StrideW < 1 || o.DilH < 1 || o.DilW < 1 || o.KH < 1 || o.KW < 1 {
			return fmt.Errorf("Pool: bad params kernel=%dx%d stride=%dx%d dil=%dx%d", o.KH, o.KW, o.StrideH, o.StrideW, o.DilH, o.DilW)
		}
		if o.Fn == LpPool && o.P < 1 {
			return fmt.Errorf("Pool.Lp: P = %d, want >= 1", o.P)
		}
	case *Gather:
		return checkIndexDType(op, o.Idx)
	case *GatherElements:
		return checkIndexDType(op, o.Idx)
	case *ScatterElements:
		if o.Upd.DType != o.Y.DType {
			return fmt.Errorf("ScatterElements: Upd dtype %s != Y dtype %s", o.Upd.DType, o.Y.DType)
		}
		return checkIndexDType(op, o.Idx)
	case *TopK:
		if o.K > o.N {
			return fmt.Errorf("TopK: bad sizes outer=%d N=%d inner=%d K=%d", o.Outer, o.N, o.Inner, o.K)
		}
		if o.Indices.DType != I64 || o.Values.DType != o.X.DType {
			return fmt.Errorf("TopK: Values %s and Indices %s, want %s and i64", o.Values.DType, o.Indices.DType, o.X.DType)
		}
	case *OptimStep:
		return checkOptim(o)
	case *Fused:
		return checkFused(o)
	case *Attention:
		return checkAttention(o)
	case *SepConv:
		return checkSepConv(o)
	}
	return nil
}

// goodConvParams reports whether the groups divide both channel counts
// and the strides and dilations are positive.
func goodConvParams(c, k, groups, strideH, strideW, dilH, dilW int) bool {
	return groups >= 1 && c%groups == 0 && k%groups == 0 && strideH >= 1 && strideW >= 1 && dilH >= 1 && dilW >= 1
}

// checkIndexDType rejects index operands that are neither I32 nor I64.
func checkIndexDType(op Op, idx Ref) error {
	if idx.DType != I32 && idx.DType != I64 {
		return fmt.Errorf("%s: index dtype %s, want i32 or i64", op.OpName(), idx.DType)
	}
	return nil
}
