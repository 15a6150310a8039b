package engine

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// Precision f16 (Options.Precision): after lowering, folding and fusion,
// the constant weights of MatMul (B) and Conv (W) ops are rounded once to
// f16 and stored so on the device, where the device runs the op in that
// form (rt.HalfWeights: activations, bias and output stay f32, products
// accumulate in f32). BatchNorm folding, bias folding and every other
// constant fold happen in f32 before the rounding. An op whose device
// lacks the form, or whose weight does not fit the f16 range, keeps its
// f32 weight; Info.HalfWeightOps and Info.PrecisionNotes say which.
// Planning fails when the plan has such weights and the device takes
// none of them in f16, so that nobody believes a run was f16 when it was
// not.

// f16Max is the largest finite f16.
const f16Max = 65504

// halfStats records what the precision pass did to one plan.
type halfStats struct {
	ops   int      // ops whose weight is now f16
	kept  int      // candidate ops left with f32 weights
	notes []string // why, one line per distinct reason
}

// checkPrecision validates Options.Precision.
func checkPrecision(dt rt.DType) error {
	switch dt {
	case rt.InvalidDType, rt.F32, rt.F16:
		return nil
	}
	return fmt.Errorf("engine: Options.Precision %s: want f32 or f16", dt)
}

// halfWeights stores the constant weights of the plan's MatMul and Conv
// ops in f16 where the device (mode.half, its Supports) runs them so.
func (p *plan) halfWeights() error {
	check := p.mode.half
	if check == nil || p.mode.train || p.mode.grad != nil {
		return nil
	}
	halves := map[*tensor]*tensor{}
	seen := map[string]bool{}
	note := func(s string) {
		if !seen[s] {
			seen[s] = true
			p.half.notes = append(p.half.notes, s)
		}
	}
	var firstErr error
	for si := range p.steps {
		for i, op := range p.steps[si].ops {
			w := halfCandidate(op)
			if w == nil {
				continue
			}
			sl, ok := w.Buf.(slot)
			if !ok {
				continue
			}
			t := sl.t
			if t.root != t || t.where != inWeights || t.value == nil || t.block != nil || t.dtype != rt.F32 {
				continue // not a constant: an activation or a trained weight
			}
			h, ok := halves[t]
			if !ok {
				h = p.halfTensor(t)
				halves[t] = h
			}
			if h == nil {
				p.half.kept++
				note(fmt.Sprintf("%s: weight %q has values beyond the f16 range (±%d): kept in f32", op.OpName(), t.name, f16Max))
				continue
			}
			c := rt.CloneOp(op)
			r := halfCandidate(c)
			r.Buf, r.DType, r.Off = slot{h}, rt.F16, r.Off/2
			if err := check(c); err != nil {
				p.half.kept++
				if firstErr == nil {
					firstErr = err
				}
				note(fmt.Sprintf("%s: kept f32 weights: %v", op.OpName(), err))
				continue
			}
			p.steps[si].ops[i] = c
			h.used = true
			p.half.ops++
		}
	}
	if p.half.ops == 0 && firstErr != nil {
		return fmt.Errorf("engine: precision f16: the device runs none of the plan's %d MatMul and Conv ops with f16 weights: %w", p.half.kept, firstErr)
	}
	return nil
}

// halfCandidate returns the weight operand of an all-f32 MatMul (B) or
// Conv (W), or nil for any other op.
func halfCandidate(op rt.Op) *rt.Ref {
	switch o := op.(type) {
	case *rt.MatMul:
		if o.A.DType == rt.F32 && o.B.DType == rt.F32 && o.Y.DType == rt.F32 {
			return &o.B
		}
	case *rt.Conv:
		if o.X.DType == rt.F32 && o.W.DType == rt.F32 && o.Y.DType == rt.F32 {
			return &o.W
		}
	}
	return nil
}

// halfTensor returns a new weight-buffer constant holding t's f32 values
// rounded to f16 (nearest even), or nil when a value is beyond the f16
// range.
func (p *plan) halfTensor(t *tensor) *tensor {
	n := len(t.value.Data) / 4
	data := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		f := math.Float32frombits(binary.LittleEndian.Uint32(t.value.Data[4*i:]))
		if math.Abs(float64(f)) > f16Max && !math.IsInf(float64(f), 0) {
			return nil
		}
		binary.LittleEndian.PutUint16(data[2*i:], rt.F16Bits(f))
	}
	h := &tensor{id: len(p.tensors), name: t.name + ".f16", dtype: rt.F16, shape: t.shape,
		value: &rt.Tensor{DType: rt.F16, Shape: t.shape, Data: data}, where: inWeights, defined: true,
		halfOf: t, lastUse: t.lastUse}
	h.root = h
	p.tensors = append(p.tensors, h)
	return h
}
