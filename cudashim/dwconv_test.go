//go:build cgo

package cudashim

import (
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestDWConv checks depthwise convolutions on dwconv (nn.cu) against the
// float64 reference in f32, f64 and f16: channel multipliers 1 and 2, 3x3
// (unrolled) and other windows, strides, dilations, asymmetric pads,
// bias, activations, and an X one element off its 16-byte alignment; and
// that cuDNN runs none of them (VRUN_CUDA_DW=0 gives them back to it,
// which TestConvCudnn covers).
func TestDWConv(t *testing.T) {
	d := openTest(t, true)
	relu6 := rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}
	cases := []convCase{
		{name: "3x3/bias+relu6", n: 1, c: 13, h: 11, w: 9, k: 13, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 13,
			padT: 1, padL: 1, padB: 1, padR: 1, bias: true, act: relu6},
		{name: "3x3/stride2", n: 2, c: 7, h: 12, w: 15, k: 7, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, g: 7,
			padT: 1, padL: 1, padB: 1, padR: 1, act: rt.Activation{Fn: rt.Relu}},
		{name: "x2/3x3", n: 2, c: 6, h: 9, w: 10, k: 12, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 6,
			padT: 1, padL: 1, padB: 1, padR: 1, bias: true},
		{name: "5x5/dil2/asym", n: 1, c: 5, h: 17, w: 13, k: 5, kh: 5, kw: 5, sh: 1, sw: 2, dh: 2, dw: 2, g: 5,
			padT: 3, padL: 4, padB: 5, padR: 4, bias: true, act: rt.Activation{Fn: rt.Sigmoid}},
		{name: "1x3/x3", n: 1, c: 4, h: 6, w: 7, k: 12, kh: 1, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 4,
			padT: 0, padL: 1, padB: 0, padR: 1},
	}
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for _, cc := range cases {
			for _, shift := range []bool{false, true} {
				if used := checkConv(t, d, cc, dt, shift, false); used != 0 {
					t.Errorf("%s %s: %d convolutions through cuDNN, want dwconv", dt, cc.name, used)
				}
			}
		}
	}
}
