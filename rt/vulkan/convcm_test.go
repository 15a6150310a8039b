//go:build cgo

package vulkan

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
	"github.com/x448/float16"
)

// TestConvCoop runs convcm.comp (f16 weights on cooperative matrices,
// X rounded to f16 for the products) against a float64 reference that
// takes the same rounding of X, at f32's tolerance: the products of two
// f16 are exact in f32 and the sums are f32. The cases cover several
// blocks in both dimensions with partial edges, the vector and the
// half-by-half loads of W (GEMM depths of a multiple of 8 or not, W at an
// offset of 3 halves), pointwise convolutions with the vec4 loads of X
// and with runs of 8 columns across images, strided, padded, dilated and grouped
// convolutions, the split-K partial pass (picked and forced), the residual
// and images written StrideY apart; the kernel is forced (forceConvPath
// "coop"), whatever coopConvWins says of the shape. It needs a device
// with the f16 cooperative-matrix GEMM.
func TestConvCoop(t *testing.T) {
	d := testDevice(t)
	needCoop(t, d, "convcm.comp")
	r := rand.New(rand.NewSource(83))
	cases := []convCase{
		{1, 64, 14, 14, 160, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},   // resnet's 3x3, partial blocks, split
		{2, 24, 9, 11, 72, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, 0},           // pointwise, batch 2
		{1, 40, 8, 12, 96, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, rt.Relu},     // pointwise, vec4 loads of X
		{2, 16, 6, 6, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, 0},           // pointwise, 8-column runs across images
		{1, 3, 31, 29, 20, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, true, rt.Relu},     // conv1: depth 147
		{2, 32, 8, 8, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, true, rt.LeakyRelu}, // groups 2
		{1, 40, 9, 7, 130, 3, 3, 2, 1, 2, 1, 2, 0, 2, 1, 1, false, rt.Sigmoid}, // dilated, strided, asymmetric pads
		{3, 96, 5, 5, 33, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, true, rt.Gelu},      // 1x1 stride 2
		{1, 512, 7, 7, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},    // resnet's layer4 3x3, deep split
	}
	defer func() { forceConvPath, forceSplitK = "", 0 }()
	forceConvPath = "coop"
	for _, sh := range coopTestShapes(t, d) {
		d.(*device).phys.coop = sh
		for _, c := range cases {
			for _, v := range []struct {
				split, woff, strideY int
				res                  bool
			}{{0, 0, 0, false}, {3, 0, 0, true}, {0, 3, 0, true}, {0, 0, 2, false}, {2, 3, 2, true}} {
				forceSplitK = v.split
				checkConvCoop(t, d, r, c, v.woff, v.strideY, v.res)
			}
		}
		t.Logf("%v: passed", sh)
	}
}

// coopTestShapes returns the cooperative-matrix shapes the tests of
// mmcm.comp and convcm.comp run on d: the device's own, and KHR's
// 16x16x16 too where the device picked NV's but lists that KHR shape and
// has VK_KHR_cooperative_matrix enabled (for VK_NV_cooperative_matrix2),
// so that an NVIDIA GPU checks the KHR variants as well. The caller makes
// each the device's shape (phys.coop) in turn; the device's own is
// restored when the test ends.
func coopTestShapes(t *testing.T, d rt.Device) []coopShape {
	p := d.(*device).phys
	own := p.coop
	shapes := []coopShape{own}
	khr := coopShape{16, 16, 16, true, 32}
	if !own.KHR && len(p.coop2) > 0 && p.caps.subgroupSize == khr.SGS {
		for _, q := range p.khrProps {
			if q.M == khr.M && q.N == khr.N && q.K == khr.K && q.A == coopF16 && q.B == coopF16 && q.C == coopF32 && q.Scope == coopSubgroup {
				shapes = append(shapes, khr)
				break
			}
		}
	}
	t.Cleanup(func() { p.coop = own })
	return shapes
}

// needCoop skips the test of kernel unless d has an f16
// cooperative-matrix shape (coopOK); with VRUN_VK_WANT_COOP=1 (CI's run
// on Mesa 26's lavapipe, .ci/lavapipe26.sh) it fails instead.
func needCoop(t *testing.T, d rt.Device, kernel string) {
	t.Helper()
	if d.(*device).phys.coopOK {
		return
	}
	msg := fmt.Sprintf("%s: %s has no f16 cooperative-matrix shape (VK_NV_cooperative_matrix, VK_KHR_cooperative_matrix; on CPU devices only with VRUN_VK_COOPMAT=1)", kernel, d.Info().Name)
	if os.Getenv("VRUN_VK_WANT_COOP") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// checkConvCoop runs c with f16 weights at element offset woff of their
// buffer, its images strideY channels' worth apart beyond dense (0:
// dense), with a residual if res, and checks that it ran on convcm.comp.
func checkConvCoop(t *testing.T, d rt.Device, r *rand.Rand, c convCase, woff, strideY int, res bool) {
	t.Helper()
	what := fmt.Sprintf("%+v split %d woff %d strideY %d res %v", c, forceSplitK, woff, strideY, res)
	OH, OW := c.out()
	ohw := OH * OW
	wide := (c.K + strideY) * ohw
	total := c.N * wide
	x := randVals(r, rt.F32, c.N*c.C*c.H*c.W, -1, 1)
	nw := c.K * (c.C / c.G) * c.KH * c.KW
	w := randVals(r, rt.F16, nw+woff, -1, 1)
	fill := randVals(r, rt.F32, total, -3, 3)
	yb := newBuf(t, d, rt.F32, total, fill)
	wr := newBuf(t, d, rt.F16, len(w), w).ref([]int{nw}, nil)
	wr.Off += int64(2 * woff)
	op := &rt.Conv{X: newBuf(t, d, rt.F32, len(x), x).ref([]int{len(x)}, nil), W: wr,
		Y: yb.ref([]int{total}, nil), N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: c.KH, KW: c.KW,
		StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.G,
		Act: rt.Activation{Fn: c.act, Alpha: 0.1}}
	if strideY > 0 {
		op.StrideY = wide
	}
	var bias, rv []float64
	if c.bias {
		bias = randVals(r, rt.F32, c.K, -1, 1)
		op.Bias = newBuf(t, d, rt.F32, c.K, bias).ref([]int{c.K}, nil)
	}
	if res {
		rv = randVals(r, rt.F32, total, -2, 2)
		op.Res = newBuf(t, d, rt.F32, total, rv).ref([]int{total}, nil)
	}
	ds, err := d.(*device).lowerOp(op, true)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !strings.HasPrefix(ds[0].shader, "convcm") {
		t.Fatalf("%s: runs %s, want convcm.comp", what, ds[0].shader)
	}
	backendtest.Run(t, d, op)
	got := yb.read(t, d)
	xr := make([]float64, len(x))
	for i, v := range x {
		xr[i] = float64(float16.Fromfloat32(float32(v)).Float32())
	}
	want, ab := convRef(xr, w[woff:], bias, c.N, c.C, c.H, c.W, c.K, OH, OW, c.KH, c.KW, c.sh, c.sw, c.pt, c.pl, c.dh, c.dw, c.G)
	checkWideY(t, what, c, convTol(rt.F32), got, fill, want, ab, rv, wide, 0)
}

// TestCoopConvRule checks which convolutions convcm.comp takes
// (coopConvWins) on the shapes of the batch-1 profiles it was drawn from.
func TestCoopConvRule(t *testing.T) {
	conv := func(c, k, kh, s int) *rt.Conv {
		return &rt.Conv{C: c, K: k, KH: kh, KW: kh, StrideH: s, StrideW: s, DilH: 1, DilW: 1, Groups: 1}
	}
	for _, x := range []struct {
		what string
		o    *rt.Conv
		want bool
	}{
		{"resnet50 conv1", conv(3, 64, 7, 2), false},
		{"resnet 3x3 64 (Winograd, depth 576)", conv(64, 64, 3, 1), true},
		{"resnet 3x3 512 stride 2", conv(512, 512, 3, 2), true},
		{"resnet50 1x1 256->64", conv(256, 64, 1, 1), true},
		{"resnet50 1x1 64->256 (depth 64)", conv(64, 256, 1, 1), false},
		{"mobilenet_v2 expansion 160->960", conv(160, 960, 1, 1), false},
		{"mobilenet_v2 projection 960->160", conv(960, 160, 1, 1), true},
		{"squeezenet1_1 squeeze 384->48", conv(384, 48, 1, 1), false},
		{"squeezenet1_1 expand 3x3 48->192 (Winograd, depth 432)", conv(48, 192, 3, 1), false},
		{"squeezenet1_1 expand 3x3 64->256 (Winograd, depth 576)", conv(64, 256, 3, 1), true},
	} {
		if got := coopConvWins(x.o); got != x.want {
			t.Errorf("%s: coopConvWins = %v, want %v", x.what, got, x.want)
		}
	}
}

// TestHalfConvPolicy checks, on a device made to report cooperative
// matrices, that an f16-weight Conv on the implicit-GEMM path is refused
// its f16 weights where coopConvWins rejects it (with an
// *rt.UnsupportedError that the engine turns into f32 weights and a
// note) and accepted where it takes convcm.comp, that depthwise Convs and
// tests forcing a kernel keep the f32w16 kernels, and that
// VRUN_VK_CONVCM=0's switch (coopConvOff) keeps them everywhere. Lowering
// only probes, so no cooperative-matrix pipeline is built.
func TestHalfConvPolicy(t *testing.T) {
	d := testDevice(t)
	dev := d.(*device)
	if !dev.phys.caps.storage16 {
		t.Skip("device lacks storageBuffer16BitAccess")
	}
	defer func(ok bool) { dev.phys.coopOK, forceConvPath = ok, "" }(dev.phys.coopOK)
	dev.phys.coopOK = true
	if dev.coopFailed.Load() || coopConvOff() {
		t.Skip("convcm.comp is off on this device (a failed pipeline, or VRUN_VK_CONVCM=0)")
	}
	conv := func(c, k, g int) *rt.Conv {
		n := 8
		return &rt.Conv{X: newBuf(t, d, rt.F32, c*n*n, nil).ref([]int{c * n * n}, nil),
			W: newBuf(t, d, rt.F16, k*c/g*9, nil).ref([]int{k * c / g * 9}, nil), Y: newBuf(t, d, rt.F32, k*n*n, nil).ref([]int{k * n * n}, nil),
			N: 1, C: c, H: n, Width: n, K: k, OH: n, OW: n, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: g}
	}
	for _, x := range []struct {
		what   string
		o      *rt.Conv
		force  string
		refuse bool
	}{
		{"3x3 16->32 (depth 144)", conv(16, 32, 1), "", true},
		{"3x3 64->64 (depth 576)", conv(64, 64, 1), "", false},
		{"depthwise", conv(16, 16, 16), "", false},
		{"3x3 16->32, the implicit GEMM forced", conv(16, 32, 1), "gemm", false},
	} {
		forceConvPath = x.force
		err := d.Supports(x.o)
		var ue *rt.UnsupportedError
		refused := errors.As(err, &ue) && strings.Contains(err.Error(), "faster with f32 weights")
		if refused != x.refuse || (!x.refuse && err != nil) {
			t.Errorf("%s: Supports = %v, want refused %v", x.what, err, x.refuse)
		}
	}
}
