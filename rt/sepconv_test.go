package rt

import (
	"strings"
	"testing"
)

// sepConvOp returns a valid SepConv: depthwise 3×3 stride 2 pad 1 over
// [2, 6, 9, 7], then 1×1 to 5 channels.
func sepConvOp() *SepConv {
	b := &fakeBuf{n: 1 << 22}
	ref := func(n int) Ref { return Ref{Buf: b, DType: F32, Shape: []int{n}} }
	return &SepConv{
		DW: Conv{X: ref(2 * 6 * 9 * 7), W: ref(6 * 9), Bias: ref(6), N: 2, C: 6, H: 9, Width: 7, K: 6, OH: 5, OW: 4,
			KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 6, Act: Activation{Fn: Clip, Alpha: 0, Beta: 6}},
		PW: Conv{W: ref(5 * 6), Bias: ref(5), Y: ref(2 * 5 * 5 * 4), N: 2, C: 6, H: 5, Width: 4, K: 5, OH: 5, OW: 4,
			KH: 1, KW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
	}
}

func TestSepConvOperands(t *testing.T) {
	o := sepConvOp()
	want := []struct {
		name string
		ref  *Ref
		need int64
		opt  bool
	}{
		{"X", &o.DW.X, 2 * 6 * 9 * 7, false}, {"DW.W", &o.DW.W, 6 * 9, false}, {"DW.Bias", &o.DW.Bias, 6, true},
		{"W", &o.PW.W, 5 * 6, false}, {"Bias", &o.PW.Bias, 5, true}, {"Y", &o.PW.Y, 2 * 5 * 5 * 4, false}, {"Res", &o.PW.Res, 2 * 5 * 5 * 4, true},
	}
	ops := Operands(o)
	if len(ops) != len(want) {
		t.Fatalf("%d operands, want %d", len(ops), len(want))
	}
	for i, w := range want {
		g := ops[i]
		if g.Name != w.name || g.Ref != w.ref || g.Need != w.need || g.Optional != w.opt || g.Output != (w.name == "Y") {
			t.Errorf("operand %d = %s need %d optional %v output %v, want %s need %d optional %v", i, g.Name, g.Need, g.Optional, g.Output, w.name, w.need, w.opt)
		}
	}
	if err := CheckOp(o); err != nil {
		t.Fatalf("valid SepConv: %v", err)
	}
	if OpDType(o) != F32 || o.OpName() != "SepConv" {
		t.Errorf("dtype %s name %s", OpDType(o), o.OpName())
	}
	if err := ReferenceSupport("test", o); err == nil {
		t.Error("ReferenceSupport accepts an optional op")
	}
}

func TestCheckSepConv(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(o *SepConv)
		want string
	}{
		{"dw groups", func(o *SepConv) { o.DW.Groups = 3; o.DW.W.Shape = []int{6 * 2 * 9} }, "not depthwise"},
		{"dw channel multiplier", func(o *SepConv) { o.DW.K = 12; o.PW.C = 12 }, "not depthwise"},
		{"pw kernel", func(o *SepConv) { o.PW.KH = 3 }, "not pointwise"},
		{"pw stride", func(o *SepConv) { o.PW.StrideW = 2 }, "not pointwise"},
		{"pw groups", func(o *SepConv) { o.PW.Groups = 2 }, "not pointwise"},
		{"pw size", func(o *SepConv) { o.PW.H, o.PW.OH = 6, 6 }, "does not follow"},
		{"pw channels", func(o *SepConv) { o.PW.C = 5 }, "does not follow"},
		{"intermediate", func(o *SepConv) { o.DW.Y = o.PW.Y }, "must be empty"},
		{"dtype", func(o *SepConv) { o.PW.Bias.DType = F16 }, "Bias is f16"},
	} {
		o := sepConvOp()
		tc.edit(o)
		if err := CheckOp(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}
