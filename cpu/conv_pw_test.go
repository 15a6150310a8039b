package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// pwCases are pointwise convolutions for the column panels (conv_pw.go):
// planes of 1 to 17 columns over (one panel, a panel and a tail of 1, 8
// or 9 columns), 7×7 and 14×14 (MobileNetV2's), input channels across the
// tap chunk of 256, output channels below, at and past the kernel
// heights, a batch, with a bias or not and with a fused clamp or other
// activations.
var pwCases = func() []convCase {
	relu6 := rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}
	acts := []rt.Activation{{}, {Fn: rt.Relu}, relu6, {Fn: rt.Sigmoid}, {Fn: rt.Clip, Alpha: -0.25, Beta: 0.5}}
	var cs []convCase
	for i, hw := range [][2]int{{1, 1}, {1, 5}, {2, 4}, {2, 9}, {1, 9}, {3, 5}, {4, 4}, {1, 17}, {5, 5}, {4, 6}, {7, 7}, {14, 14}, {13, 11}, {6, 9}} {
		c := []int{1, 3, 37, 255, 256, 257, 300, 64, 96, 520, 160, 33, 70, 21}[i]
		k := []int{1, 5, 7, 12, 13, 29, 100, 6, 25, 11, 96, 40, 18, 61}[i]
		cs = append(cs, convCase{n: 1 + i%3/2, c: c, h: hw[0], w: hw[1], k: k, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1,
			bias: i%4 != 1, act: acts[i%len(acts)]})
	}
	return cs
}()

// TestConvPw runs pwCases (and, with a residual, TestConvRes's shapes)
// against a float64 reference with the panels forced on (reading X in
// place and packed), forced off and left to the heuristic, at every kernel level this CPU has (below
// levelAVX2 and at AVX-512 the panels do not apply: the other paths are
// checked instead).
func TestConvPw(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(103, 104))
	save := convCases
	defer func() { convCases, pwMode, pwInPlace = save, 0, 0 }()
	convCases = pwCases
	for _, lv := range ewLevels() {
		for _, mode := range [][2]int{{1, 1}, {1, -1}, {-1, 0}, {0, 0}} {
			withLevel(lv, func() {
				pwMode, pwInPlace = mode[0], mode[1]
				runConvCases(t, e, rng, []rt.DType{rt.F32}, false)
			})
		}
	}
}

// TestConvPwRes is TestConvRes's check of the residual for pwCases with
// the panels forced on, at every kernel level.
func TestConvPwRes(t *testing.T) {
	save := convCases
	defer func() { convCases, pwMode = save, 0 }()
	convCases = append(append([]convCase{}, pwCases...), convResCases...)
	pwMode = 1
	defer func() { pwInPlace = 0 }()
	for _, lv := range ewLevels() {
		for _, ip := range []int{1, -1} {
			pwInPlace = ip
			withLevel(lv, func() { testConvRes(t, []rt.DType{rt.F32}, convCases) })
		}
	}
}
