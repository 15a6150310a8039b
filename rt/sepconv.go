package rt

import "fmt"

// SepConv is a depthwise-separable convolution, the block of MobileNets:
// the depthwise convolution DW (one filter per channel) followed by the
// pointwise (1×1) convolution PW, as one op so that a backend can compute
// each depthwise output where the pointwise GEMM loads it, and the
// intermediate [N, C, OH, OW] tensor never reaches memory:
//
//	T = DW.Act(DW.Bias + depthwise(DW.X, DW.W))
//	PW.Y = PW.Act(PW.Bias + PW.W · T + PW.Res)
//
// DW has Groups == C == K; PW has a 1×1 kernel, unit strides and
// dilations, no padding, one group, PW.C == DW.K and PW's input size is
// DW's output size. DW.Y and PW.X are not used (zero Refs), nor DW.Res.
// Every operand has DW.X's dtype.
//
// It is an optional op, like [Attention]: the engine emits it only where
// Device.Supports accepts it, and keeps the two convolutions elsewhere.
type SepConv struct {
	DW, PW Conv
}

// OpName implements Op.
func (o *SepConv) OpName() string { return "SepConv" }

func (*SepConv) isOp() {}

// sepConvOperands lists the operands of a SepConv: DW's input, weight and
// bias, then PW's weight, bias, output and residual.
func sepConvOperands(o *SepConv) []Operand {
	d, p := &o.DW, &o.PW
	in := func(name string, r *Ref, need int64) Operand { return Operand{Name: name, Ref: r, Need: need} }
	optional := func(o Operand) Operand { o.Optional = true; return o }
	return []Operand{
		in("X", &d.X, Extent(d.N, d.C, d.H, d.Width)),
		in("DW.W", &d.W, Extent(d.K, perGroup(d.C, d.Groups), d.KH, d.KW)),
		optional(in("DW.Bias", &d.Bias, Extent(d.K))),
		in("W", &p.W, Extent(p.K, perGroup(p.C, p.Groups), p.KH, p.KW)),
		optional(in("Bias", &p.Bias, Extent(p.K))),
		{Name: "Y", Ref: &p.Y, Need: Extent(p.N, p.K, p.OH, p.OW), Output: true},
		optional(in("Res", &p.Res, Extent(p.N, p.K, p.OH, p.OW))),
	}
}

// checkSepConv checks that DW is depthwise, PW pointwise over DW's
// output, and that the unused operands are absent.
func checkSepConv(o *SepConv) error {
	d, p := &o.DW, &o.PW
	if !goodConvParams(d.C, d.K, d.Groups, d.StrideH, d.StrideW, d.DilH, d.DilW) || d.Groups != d.C || d.K != d.C {
		return fmt.Errorf("SepConv: DW is not depthwise: C=%d K=%d groups=%d stride=%dx%d dil=%dx%d", d.C, d.K, d.Groups, d.StrideH, d.StrideW, d.DilH, d.DilW)
	}
	if p.KH != 1 || p.KW != 1 || p.StrideH != 1 || p.StrideW != 1 || p.DilH != 1 || p.DilW != 1 || p.PadT != 0 || p.PadL != 0 || p.Groups != 1 {
		return fmt.Errorf("SepConv: PW is not pointwise: kernel %dx%d stride %dx%d dil %dx%d pad %d,%d groups %d", p.KH, p.KW, p.StrideH, p.StrideW, p.DilH, p.DilW, p.PadT, p.PadL, p.Groups)
	}
	if p.N != d.N || p.C != d.K || p.H != d.OH || p.Width != d.OW || p.OH != p.H || p.OW != p.Width {
		return fmt.Errorf("SepConv: PW input [%d %d %d %d] -> [%d %d %d %d] does not follow DW output [%d %d %d %d]",
			p.N, p.C, p.H, p.Width, p.N, p.K, p.OH, p.OW, d.N, d.K, d.OH, d.OW)
	}
	if d.Y.Buf != nil || p.X.Buf != nil || d.Res.Buf != nil {
		return fmt.Errorf("SepConv: DW.Y, PW.X and DW.Res must be empty (the intermediate is never stored)")
	}
	if d.StrideY != 0 || p.StrideY != 0 {
		return fmt.Errorf("SepConv: DW.StrideY and PW.StrideY must be 0 (PW.Y is contiguous)")
	}
	if int(d.Act.Fn) >= NumUnaryFns || int(p.Act.Fn) >= NumUnaryFns {
		return fmt.Errorf("SepConv: unknown activation")
	}
	dt := d.X.DType
	for _, r := range []struct {
		n string
		r Ref
	}{{"DW.W", d.W}, {"DW.Bias", d.Bias}, {"W", p.W}, {"Bias", p.Bias}, {"Y", p.Y}, {"Res", p.Res}} {
		if r.r.Buf != nil && r.r.DType != dt {
			return fmt.Errorf("SepConv: %s is %s, want %s", r.n, r.r.DType, dt)
		}
	}
	return nil
}
