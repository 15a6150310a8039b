package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// TestConstantHint checks the constant-buffer hint (rt.ConstantBuffer)
// on the two convolution paths with cached weight transforms (Winograd
// and the channels-in-lanes kernels): while the weight buffer is marked,
// the cached transform is used without comparing the weights (a write
// through a host view, which the hint does not see, leaves the output
// unchanged: proof that the comparison is skipped), and each kind of
// write through the backend (Device.Write, Stream.Write, Copy, an op's
// output) drops the hint and the cached entries, so that the next run
// sees the new weights. Without that invalidation the runs after a write
// would use the stale transform and fail against the float64 reference.
func TestConstantHint(t *testing.T) {
	type path struct {
		name       string
		wino, ocw  int
		applicable func() bool
	}
	paths := []path{
		{"wino F(4,3)", 1, -1, func() bool { return true }},
		{"wino F(2,3)", 2, -1, func() bool { return true }},
		{"channels-in-lanes", -1, 1, func() bool { return ocwMaxP(1) > 0 }},
	}
	writes := []string{"Device.Write", "Stream.Write", "Copy", "op output", "view + MarkConstant"}
	saveW, saveO := winoMode, ocwMode
	defer func() { winoMode, ocwMode = saveW, saveO }()
	c := convCase{n: 1, c: 9, h: 11, w: 10, k: 20, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true,
		act: rt.Activation{Fn: rt.Relu}}
	oh, ow := c.out()
	nw, nb := c.k*c.c*9, c.k
	for _, p := range paths {
		if !p.applicable() {
			t.Logf("%s: no kernels here, skipped", p.name)
			continue
		}
		winoMode, ocwMode = p.wino, p.ocw
		for _, wr := range writes {
			t.Run(p.name+"/"+wr, func(t *testing.T) {
				e := newEnv(t)
				rng := rand.New(rand.NewPCG(5, uint64(len(wr))))
				xv := randVals(rng, c.n*c.c*c.h*c.w, -1, 1)
				w1 := stored(rt.F32, randVals(rng, nw+nb, -1, 1))
				w2 := stored(rt.F32, randVals(rng, nw+nb, -1, 1))
				x := e.region(rt.F32, len(xv), xv)
				wb := e.region(rt.F32, nw+nb, w1)
				src := e.region(rt.F32, nw+nb, w2) // the new weights, for Copy and the op
				y := e.region(rt.F32, c.n*c.k*oh*ow, nil)
				o := &rt.Conv{X: x.ref(c.n, c.c, c.h, c.w), W: wb.ref(c.k, c.c, 3, 3), Bias: wb.view(nw, []int{nb}, nil),
					Y: y.ref(c.n, c.k, oh, ow), N: c.n, C: c.c, H: c.h, Width: c.w, K: c.k, OH: oh, OW: ow, KH: 3, KW: 3,
					StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1, Act: c.act}
				switch {
				case p.wino > 0 && useWino(o) == nil, p.ocw > 0 && (useWino(o) != nil || !useOcw(o)):
					t.Fatalf("the convolution does not take the %s path", p.name)
				}
				buf := wb.buf.(*Buffer)
				check := func(what string, wv []float64) {
					t.Helper()
					e.run(o)
					want, scale := convRef(c, xv, wv[:nw], wv[nw:])
					got := e.values(y)
					for i := range want {
						w := max(want[i], 0)
						if math.Abs(got[i]-w) > 1e-4*scale[i] {
							t.Fatalf("%s: y[%d] = %v, want %v", what, i, got[i], w)
						}
					}
				}
				rt.MarkConstant(wb.buf)
				if !buf.Constant() {
					t.Fatal("MarkConstant did not set the hint")
				}
				check("first run", w1)
				check("cached", w1)
				// A write through the host view is not seen: the cached
				// transform of w1 is still used, so the output is w1's.
				view := buf.Bytes()
				f32 := asF32Bytes(view[guard:])
				old := f32[3]
				f32[3] += 5
				check("after an unseen view write", w1)
				f32[3] = old
				if !buf.Constant() {
					t.Fatal("the hint was dropped by a run that only read the buffer")
				}
				raw := make([]byte, 4*(nw+nb))
				copy(asF32Bytes(raw), toF32(w2))
				switch wr {
				case "Device.Write":
					if err := e.dev.Write(wb.buf, guard, raw); err != nil {
						t.Fatal(err)
					}
				case "Stream.Write":
					e.st.Reset()
					if err := e.st.Write(wb.buf, guard, raw); err != nil {
						t.Fatal(err)
					}
					if !buf.Constant() {
						t.Fatal("recording a Stream.Write dropped the hint before its Submit")
					}
					if err := e.st.Submit(); err != nil {
						t.Fatal(err)
					}
				case "Copy":
					if err := rt.CopyBuffer(e.dev, wb.buf, guard, src.buf, guard, int64(4*(nw+nb))); err != nil {
						t.Fatal(err)
					}
				case "op output":
					e.run(&rt.Unary{Fn: rt.Copy, X: src.ref(nw + nb), Y: wb.ref(nw + nb)})
				case "view + MarkConstant":
					copy(f32, toF32(w2))
					rt.MarkConstant(wb.buf)
				}
				if wr != "view + MarkConstant" && buf.Constant() {
					t.Fatalf("%s left the hint set", wr)
				}
				check("after "+wr, w2)
				check("after "+wr+", cached", w2)
				rt.MarkConstant(wb.buf)
				check("marked again", w2)
			})
		}
	}
}

// asF32Bytes views b (4-byte aligned, as buffers are) as float32s.
func asF32Bytes(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// toF32 converts vals to float32.
func toF32(vals []float64) []float32 {
	out := make([]float32, len(vals))
	for i, v := range vals {
		out[i] = float32(v)
	}
	return out
}
