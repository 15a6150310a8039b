//go:build cgo

package vulkan

import (
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// f16 weights with f32 activations (rt.HalfWeights): the *_f32w16 kernels
// against a float64 reference computed from the same f16 weight values,
// at f32's tolerance (1e-5 of sum |a*b| + 1 for MatMul, 1e-4 for Conv):
// the weights' rounding is the caller's, the arithmetic is f32's.

// TestHalfWeightsGEMM runs every matmul.comp tile (vec4 and scalar
// loads), forced split-K, and the GEMV geometries with f16 B.
func TestHalfWeightsGEMM(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(16))
	cases := []gemmCase{
		{1, 1, 1, 1, false, false, -1, -1, [2]int{}, false, 0},
		{1, 129, 131, 33, false, false, -1, -1, [2]int{0, 1}, true, rt.Relu},
		{2, 67, 45, 17, true, false, -1, 0, [2]int{1, 0}, true, 0},
		{3, 45, 67, 40, false, true, 2900, -1, [2]int{67, 1}, true, rt.Gelu},
		{2, 130, 70, 31, true, true, -1, -1, [2]int{0, 0}, true, rt.LeakyRelu},
		{2, 132, 68, 36, false, false, -1, -1, [2]int{0, 1}, true, rt.Relu},
		{2, 36, 100, 44, false, true, 3700, 4404, [2]int{}, false, 0},
		{1, 40, 96, 600, false, true, -1, -1, [2]int{0, 1}, true, 0},
	}
	defer func() { forceGemmTile, gemmVec4, forceSplitK, gemvForce = "", true, 0, nil }()
	for _, vec := range []bool{true, false} {
		gemmVec4 = vec
		for _, tile := range gemmTiles {
			forceGemmTile = tile.name
			for _, c := range cases {
				checkGEMMW(t, d, r, rt.F32, rt.F16, c, 0, 0)
			}
		}
	}
	forceGemmTile, gemmVec4 = "", true
	forceSplitK = 3
	for _, c := range cases[1:] {
		checkGEMMW(t, d, r, rt.F32, rt.F16, c, 0, 0)
	}
	forceSplitK = 0
	for _, cfg := range []gemvConfig{gemvRowDefault, gemvColumnDefault, gemvConfigs[2], gemvConfigs[3], gemvConfigs[6]} {
		cfg := cfg
		gemvForce = &cfg
		for _, c := range gemvCases {
			checkGEMMW(t, d, r, rt.F32, rt.F16, c, 0, 0)
			checkGEMMW(t, d, r, rt.F32, rt.F16, c, 1, 3)
			checkGEMMW(t, d, r, rt.F32, rt.F16, c, 4, 8)
		}
	}
}

// TestHalfWeightsConv runs every Conv kernel (implicit GEMM with every
// tile and forced split-K, depthwise, direct) with f16 W.
func TestHalfWeightsConv(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(17))
	cases := []convCase{
		{3, 5, 11, 9, 7, 3, 3, 2, 2, 1, 0, 2, 1, 1, 1, 1, true, rt.Relu},
		{1, 6, 10, 12, 10, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1, 2, true, rt.LeakyRelu},
		{2, 12, 9, 8, 36, 2, 3, 2, 1, 0, 1, 1, 1, 1, 2, 4, false, rt.Tanh},
		{3, 13, 5, 7, 17, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, 0},
		{2, 20, 13, 17, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},
		{3, 7, 10, 9, 7, 3, 3, 2, 2, 1, 0, 1, 2, 1, 1, 7, true, rt.Relu},
		{2, 6, 8, 8, 6, 5, 4, 1, 2, 2, 1, 2, 2, 1, 1, 6, true, rt.Gelu},
		{1, 3, 6, 6, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},
	}
	defer func() { forceConvPath, forceGemmTile, forceSplitK = "", "", 0 }()
	for _, c := range cases {
		for _, path := range []string{"", "direct", "dw"} {
			if path == "dw" && c.C != c.G {
				continue
			}
			forceConvPath = path
			checkConvW(t, d, r, rt.F32, rt.F16, c, "path "+path)
		}
		forceConvPath = "gemm"
		for _, tile := range convTiles {
			forceGemmTile = tile.name
			checkConvW(t, d, r, rt.F32, rt.F16, c, "gemm tile "+tile.name)
		}
		forceGemmTile, forceSplitK = "", 2
		checkConvW(t, d, r, rt.F32, rt.F16, c, "gemm split-K")
		forceConvPath, forceSplitK = "", 0
	}
}

// TestHalfWeightsLowering checks that f16-weight ops take the *_f32w16
// kernels, that a device without 16-bit storage refuses them with an
// *rt.UnsupportedError, and that mixed dtypes other than rt.HalfWeights
// stay refused.
func TestHalfWeightsLowering(t *testing.T) {
	d := testDevice(t)
	dev := d.(*device)
	if !dev.phys.caps.storage16 {
		t.Skip("device lacks storageBuffer16BitAccess")
	}
	f32 := func(n int) rt.Ref { return newBuf(t, d, rt.F32, n, nil).ref([]int{n}, nil) }
	f16 := func(n int) rt.Ref { return newBuf(t, d, rt.F16, n, nil).ref([]int{n}, nil) }
	mm := func(m, n, k int) *rt.MatMul {
		return &rt.MatMul{A: f32(m * k), B: f16(k * n), Y: f32(m * n), Batch: 1, M: m, N: n, K: k, TransB: true, Alpha: 1}
	}
	conv := func(c, k, g int) *rt.Conv {
		return &rt.Conv{X: f32(c * 64), W: f16(k * c / g * 9), Bias: f32(k), Y: f32(k * 64), N: 1, C: c, H: 8, Width: 8,
			K: k, OH: 8, OW: 8, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: g}
	}
	for _, x := range []struct {
		op   rt.Op
		want string
	}{
		{mm(64, 64, 64), "matmul_f32w16_"},
		{mm(1, 300, 256), "gemv"},
		// convgemm_f32w16_*, convgemmk_f32w16_* (split), or on cooperative
		// matrices convcm_f32w16_* (64 channels) or refused (16)
		{conv(16, 32, 1), "conv"},
		{conv(64, 64, 1), "conv"},
		{conv(16, 16, 16), "dwconv_f32w16"},
		{conv(16, 4, 1), "conv_f32w16"},
	} {
		if !rt.HalfWeights(x.op) {
			t.Fatalf("%s: not a HalfWeights op", x.op.OpName())
		}
		want := x.want
		if c, ok := x.op.(*rt.Conv); ok && want == "conv" {
			want = "convgemm"
			if dev.coopConv(c) {
				want = "convcm"
			}
			if dev.halfConvSlower(c) {
				// a device with convcm.comp keeps f32 weights where it
				// would not take them
				var ue *rt.UnsupportedError
				if err := d.Supports(c); !errors.As(err, &ue) || !strings.Contains(err.Error(), "faster with f32 weights") {
					t.Errorf("Conv %d->%d: %v, want an *rt.UnsupportedError (faster with f32 weights)", c.C, c.K, err)
				}
				continue
			}
		}
		ds, err := dev.lower(x.op)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ds[0].shader, want) || !strings.Contains(ds[0].shader, "f32w16") {
			t.Errorf("%s: shader %s, want %s*", x.op.OpName(), ds[0].shader, want)
		}
		dev.phys.caps.storage16 = false
		err = d.Supports(x.op)
		dev.phys.caps.storage16 = true
		var ue *rt.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "storageBuffer16BitAccess") {
			t.Errorf("%s without 16-bit storage: %v, want an *rt.UnsupportedError naming storageBuffer16BitAccess", x.op.OpName(), err)
		}
	}
	bad := mm(4, 4, 4)
	bad.A, bad.B = bad.B, bad.A // f16 A with f32 B
	if err := d.Supports(bad); err == nil {
		t.Error("MatMul with f16 A and f32 B: supported")
	}
	ct := &rt.ConvTranspose{X: f32(64), W: f16(9), Y: f32(100), N: 1, C: 1, H: 8, Width: 8, K: 1, OH: 10, OW: 10,
		KH: 3, KW: 3, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	if err := d.Supports(ct); err == nil {
		t.Error("ConvTranspose with f16 W: supported")
	}
}
