//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// winoTol bounds the Winograd F(4,3) path's f32 error per output as a
// fraction of sum |x||w| + 1 (the transforms' coefficients, up to 8 in A^T
// and 5 in B^T, scale f32's rounding errors; the largest seen on lavapipe
// is about 2e-6).
const winoTol = 2e-5

// TestConvWino runs 3x3 convolutions through the Winograd path (forced)
// against a float64 reference: odd channel counts (matmul.comp's scalar
// loads) and multiples of 4 (vec4 loads), output planes that are not
// multiples of the 4x4 tile, padding 0, 1, 2 and asymmetric, batch 3, no
// bias, residuals, fused activations, f16 weights, and several GEMM tiles.
func TestConvWino(t *testing.T) {
	d := testDevice(t)
	dev := d.(*device)
	r := rand.New(rand.NewSource(73))
	cases := []convCase{
		{3, 5, 11, 9, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},
		{1, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, 0},
		{2, 12, 13, 7, 20, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, rt.Tanh},
		{1, 8, 6, 10, 12, 3, 3, 1, 1, 2, 0, 1, 2, 1, 1, 1, true, rt.LeakyRelu},
		{2, 20, 14, 14, 36, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, rt.Relu},
		{1, 33, 7, 7, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Sigmoid},
		{1, 3, 2, 3, 9, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 1, true, 0}, // input smaller than one tile's patch
	}
	defer func() { forceConvPath, forceGemmTile = "", "" }()
	for _, c := range cases {
		for _, tile := range []string{"", "s", "t"} {
			forceConvPath, forceGemmTile = "wino", tile
			op, check := newWinoCase(t, d, r, rt.F32, rt.F32, c, false)
			ds, err := dev.lower(op)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(ds, func(x dispatch) bool { return x.shader == "winox_f32" }) {
				t.Fatalf("%+v: not lowered to the Winograd path", c)
			}
			backendtest.Run(t, d, op)
			check("tile " + tile)
		}
		forceConvPath, forceGemmTile = "wino", ""
		for _, half := range []bool{false, true} {
			wdt := rt.F32
			if half {
				wdt = rt.F16
			}
			for _, res := range []bool{false, true} {
				op, check := newWinoCase(t, d, r, rt.F32, wdt, c, res)
				if !supported(t, d, op) {
					continue
				}
				backendtest.Run(t, d, op)
				check("W " + wdt.String())
			}
		}
	}
}

// newWinoCase builds Conv c with random X, W (of dtype wdt), bias and,
// with res, a residual, and returns it with a function that checks Y
// against convRef within winoTol.
func newWinoCase(t *testing.T, d rt.Device, r *rand.Rand, dt, wdt rt.DType, c convCase, res bool) (*rt.Conv, func(string)) {
	t.Helper()
	OH, OW := c.out()
	x := randVals(r, dt, c.N*c.C*c.H*c.W, -1, 1)
	w := randVals(r, wdt, c.K*c.C*9, -1, 1)
	ny := c.N * c.K * OH * OW
	yb := newBuf(t, d, dt, ny, nil)
	op := &rt.Conv{X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), W: newBuf(t, d, wdt, len(w), w).ref([]int{len(w)}, nil),
		Y: yb.ref([]int{ny}, nil), N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: 3, KW: 3,
		StrideH: 1, StrideW: 1, PadT: c.pt, PadL: c.pl, DilH: 1, DilW: 1, Groups: 1,
		Act: rt.Activation{Fn: c.act, Alpha: 0.1}}
	var bias, rv []float64
	if c.bias {
		bias = randVals(r, dt, c.K, -1, 1)
		op.Bias = newBuf(t, d, dt, c.K, bias).ref([]int{c.K}, nil)
	}
	if res {
		rv = randVals(r, dt, ny, -2, 2)
		op.Res = newBuf(t, d, dt, ny, rv).ref([]int{ny}, nil)
	}
	return op, func(what string) {
		t.Helper()
		got := yb.read(t, d)
		want, ab := convRef(x, w, bias, c.N, c.C, c.H, c.W, c.K, OH, OW, 3, 3, 1, 1, c.pt, c.pl, 1, 1, 1)
		worst := 0.0
		for i := range want {
			v, a := want[i], ab[i]+1
			if rv != nil {
				v += rv[i]
				a += math.Abs(rv[i])
			}
			v = c.act.Apply(v, 0.1, 0)
			e := math.Abs(got[i]-v) / a
			if !(e <= winoTol) {
				t.Fatalf("%s %+v: Y[%d] = %v, want %v (error %.3g of sum |x||w|+1, tolerance %g)", what, c, i, got[i], v, e, winoTol)
			}
			worst = max(worst, e)
		}
		t.Logf("%s %+v: largest error %.3g of sum |x||w|+1", what, c, worst)
	}
}

// TestWinoPick checks which convolutions take the Winograd path by
// default: 3x3, unit stride and dilation, one group, f32, on a GPU, with
// enough tiles and channels.
func TestWinoPick(t *testing.T) {
	base := rt.Conv{N: 32, C: 64, K: 64, H: 56, Width: 56, OH: 56, OW: 56, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1}
	for _, c := range []struct {
		name string
		edit func(*rt.Conv)
		dt   rt.DType
		cpu  bool
		want bool
	}{
		{"resnet18 layer1 batch 32", func(*rt.Conv) {}, rt.F32, false, true},
		{"on lavapipe", func(*rt.Conv) {}, rt.F32, true, false},
		{"f16", func(*rt.Conv) {}, rt.F16, false, false},
		{"batch 1", func(o *rt.Conv) { o.N = 1 }, rt.F32, false, false},
		{"stride 2", func(o *rt.Conv) { o.StrideH, o.StrideW, o.OH, o.OW = 2, 2, 28, 28 }, rt.F32, false, false},
		{"dilation 2", func(o *rt.Conv) { o.DilH, o.DilW = 2, 2 }, rt.F32, false, false},
		{"groups 2", func(o *rt.Conv) { o.Groups = 2 }, rt.F32, false, false},
		{"5x5", func(o *rt.Conv) { o.KH, o.KW = 5, 5 }, rt.F32, false, false},
		{"16 input channels", func(o *rt.Conv) { o.C = 16 }, rt.F32, false, false},
		{"16 output channels", func(o *rt.Conv) { o.K = 16 }, rt.F32, false, false},
		{"resnet18 layer4 batch 8", func(o *rt.Conv) { o.N, o.C, o.K, o.H, o.Width, o.OH, o.OW = 8, 512, 512, 7, 7, 7, 7 }, rt.F32, false, true},
		{"squeezenet 64→256 on 13×13 batch 8", func(o *rt.Conv) { o.N, o.C, o.K, o.H, o.Width, o.OH, o.OW = 8, 64, 256, 13, 13, 13, 13 }, rt.F32, false, false},
	} {
		o := base
		c.edit(&o)
		if got := winoPick(&o, c.dt, c.cpu); got != c.want {
			t.Errorf("%s: winoPick = %v, want %v", c.name, got, c.want)
		}
	}
}

// BenchmarkConvWino times the 3x3 stride-1 convolutions of resnet18/50
// and squeezenet1_1 (f32, bias and ReLU) at batch 1, 8 and 32 on the
// implicit GEMM ("gemm") and on the Winograd path with its default GEMM
// tile ("wino") and with each of "l", "w", "m", "s" ("wino/l", ...), eight
// to a stream. gpu-TFLOP/s counts the direct convolution's operations, so
// the paths compare: go test -run XXX -bench ConvWino ./rt/vulkan.
func BenchmarkConvWino(b *testing.B) {
	d := testDevice(b)
	if isCPU(d) {
		b.Skip("a GPU benchmark")
	}
	defer func() { forceConvPath, forceGemmTile = "", "" }()
	for _, c := range []struct {
		name    string
		C, H, K int
	}{
		{"r18l1", 64, 56, 64}, {"r18l2", 128, 28, 128}, {"r18l3", 256, 14, 256}, {"r18l4", 512, 7, 512},
		{"sqexp3a", 16, 55, 64}, {"sqexp3", 64, 13, 256},
	} {
		for _, n := range []int{1, 8, 32} {
			nx, nw, ny := n*c.C*c.H*c.H, c.K*c.C*9, n*c.K*c.H*c.H
			vals := func(k int) []float64 {
				v := make([]float64, k)
				for i := range v {
					v[i] = math.Sin(float64(i))
				}
				return v
			}
			op := &rt.Conv{X: newBuf(b, d, rt.F32, nx, vals(nx)).ref([]int{nx}, nil), W: newBuf(b, d, rt.F32, nw, vals(nw)).ref([]int{nw}, nil),
				Bias: newBuf(b, d, rt.F32, c.K, vals(c.K)).ref([]int{c.K}, nil), Y: newBuf(b, d, rt.F32, ny, nil).ref([]int{ny}, nil),
				N: n, C: c.C, H: c.H, Width: c.H, K: c.K, OH: c.H, OW: c.H, KH: 3, KW: 3, StrideH: 1, StrideW: 1,
				PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1, Act: rt.Activation{Fn: rt.Relu}}
			const reps = 8
			ops := make([]rt.Op, reps)
			for i := range ops {
				ops[i] = op
			}
			flop := 2 * float64(ny) * float64(c.C*9) * reps
			for _, k := range []struct{ path, tile string }{{"gemm", ""}, {"wino", ""}, {"wino", "l"}, {"wino", "w"}, {"wino", "m"}, {"wino", "s"}} {
				name := fmt.Sprintf("%s/b%d/%s", c.name, n, k.path)
				if k.tile != "" {
					name += "/" + k.tile
				}
				b.Run(name, func(b *testing.B) {
					forceConvPath, forceGemmTile = k.path, k.tile
					benchOps(b, d, flop, ops...)
				})
			}
		}
	}
}

// TestWinoTile checks the Winograd GEMM tile of resnet18's 3x3 layers at
// batch 8 and 32 (the H100 sweep's best or near-best, see winoTile).
func TestWinoTile(t *testing.T) {
	for _, c := range []struct {
		k, plane, n int
		want        string
	}{
		{64, 56, 8, "w"}, {128, 28, 8, "m"}, {256, 14, 8, "s"}, {512, 7, 8, "u"},
		{64, 56, 32, "w"}, {128, 28, 32, "m"}, {256, 14, 32, "m"}, {512, 7, 32, "m"},
	} {
		tiles := c.n * ((c.plane + 3) / 4) * ((c.plane + 3) / 4)
		tp := (tiles + 3) / 4 * 4
		got, ok := winoTile(rt.F32, c.k, tp, c.k, 48<<10, 1024, false)
		if !ok || got.name != c.want {
			t.Errorf("K = C = %d on %d×%d, batch %d: tile %q, want %q", c.k, c.plane, c.plane, c.n, got.name, c.want)
		}
	}
}

// TestWinoScratchBound checks that a Winograd convolution whose scratch
// would pass winoMaxScratch falls back to the implicit GEMM.
func TestWinoScratchBound(t *testing.T) {
	d := testDevice(t)
	defer func(m int64) { forceConvPath, winoMaxScratch = "", m }(winoMaxScratch)
	forceConvPath = "wino"
	const n, c, h = 8, 64, 56
	nx := n * c * h * h
	op := &rt.Conv{X: rt.Ref{Buf: newBuf(t, d, rt.F32, 1, nil).buf, DType: rt.F32, Shape: []int{nx}},
		W: newBuf(t, d, rt.F32, c*c*9, nil).ref([]int{c * c * 9}, nil), Y: rt.Ref{Buf: newBuf(t, d, rt.F32, 1, nil).buf, DType: rt.F32, Shape: []int{nx}},
		N: n, C: c, H: h, Width: h, K: c, OH: h, OW: h, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1}
	// U, then V and M of 36*64*(8*14*14) floats each, at 256-byte offsets
	need := int64(36*4*c*c) + 2*int64(36*4*c*n*14*14)
	for _, c := range []struct {
		limit int64
		want  bool
	}{{need, true}, {need - 1, false}} {
		winoMaxScratch = c.limit
		l := &lowering{d: d.(*device), op: op, probe: true}
		if got := l.winoConv(op, rt.F32, "f32", ""); got != c.want || (len(l.outs) == 4) != c.want || l.err != nil {
			t.Errorf("scratch %d bytes, bound %d: winoConv %v with %d dispatches (err %v), want %v", need, c.limit, got, len(l.outs), l.err, c.want)
		}
	}
}
