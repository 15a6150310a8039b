//go:build cgo

package clshim

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// convRef is a naive float64 convolution (NCHW, OIHW weights, groups),
// bias and activation included.
func convRef(o *rt.Conv, x, w, b []float64) []float64 {
	cg, kg := o.C/o.Groups, o.K/o.Groups
	y := make([]float64, o.N*o.K*o.OH*o.OW)
	for n := 0; n < o.N; n++ {
		for k := 0; k < o.K; k++ {
			g := k / kg
			for oh := 0; oh < o.OH; oh++ {
				for ow := 0; ow < o.OW; ow++ {
					s := 0.0
					if b != nil {
						s = b[k]
					}
					for c := 0; c < cg; c++ {
						for kh := 0; kh < o.KH; kh++ {
							ih := oh*o.StrideH - o.PadT + kh*o.DilH
							if ih < 0 || ih >= o.H {
								continue
							}
							for kw := 0; kw < o.KW; kw++ {
								iw := ow*o.StrideW - o.PadL + kw*o.DilW
								if iw < 0 || iw >= o.Width {
									continue
								}
								s += x[((n*o.C+g*cg+c)*o.H+ih)*o.Width+iw] * w[((k*cg+c)*o.KH+kh)*o.KW+kw]
							}
						}
					}
					y[((n*o.K+k)*o.OH+oh)*o.OW+ow] = o.Act.Fn.Apply(s, o.Act.Alpha, o.Act.Beta)
				}
			}
		}
	}
	return y
}

// TestConvKernels checks Conv (implicit GEMM on every tile variant, with
// and without split-K, and the direct kernel for few output channels per
// group) against a float64 reference: odd shapes, strides, padding,
// dilation, groups, batch, bias and fused activations, each without and
// with a residual (rt.Conv.Res, added before the activation). Tolerance
// relative to the sum of |x*w| (+ |res|): 1e-5 for f32, f64 (f32
// accumulation) and f32 with f16 weights (against the f16-rounded
// weights), 4e-3 for f16 (f16 inputs and outputs, f32 accumulation).
func TestConvKernels(t *testing.T) {
	type cc struct {
		n, c, h, w, k, kh, kw, sh, sw, pt, pl, dh, dw, g int
		bias                                             bool
		act                                              rt.UnaryFn
	}
	cases := []cc{
		{1, 3, 11, 13, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},
		{2, 5, 9, 7, 33, 3, 2, 2, 1, 1, 0, 1, 2, 1, false, rt.Copy},
		{1, 16, 8, 8, 65, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, rt.Sigmoid}, // pointwise
		{2, 8, 10, 9, 16, 3, 3, 2, 2, 1, 1, 1, 1, 2, true, rt.HardSwish},
		{1, 6, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, true, rt.Relu},     // depthwise (direct)
		{3, 4, 12, 5, 8, 5, 3, 3, 1, 2, 1, 2, 1, 4, false, rt.Silu},   // grouped, 2 out per group (direct)
		{1, 64, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},   // deep reduction
		{1, 20, 9, 11, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu}, // more channels than a 128 tile
		{2, 12, 9, 9, 20, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, rt.Relu},   // 1x1 stride 2 (downsample)
	}
	forEachDevice(t, func(t *testing.T, dev *device) {
		defer func() { dev.gemmForce = nil }()
		rng := rand.New(rand.NewSource(3))
		for ci, c := range cases {
			oh := (c.h+2*c.pt-c.dh*(c.kh-1)-1)/c.sh + 1
			ow := (c.w+2*c.pl-c.dw*(c.kw-1)-1)/c.sw + 1
			o := &rt.Conv{N: c.n, C: c.c, H: c.h, Width: c.w, K: c.k, OH: oh, OW: ow, KH: c.kh, KW: c.kw,
				StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.g,
				Act: rt.Activation{Fn: c.act}}
			gen := func(n int) []float64 {
				v := make([]float64, n)
				for i := range v {
					v[i] = rng.Float64()*2 - 1
				}
				return v
			}
			x, w := gen(c.n*c.c*c.h*c.w), gen(c.k*c.c/c.g*c.kh*c.kw)
			res := gen(c.n * c.k * oh * ow)
			var b []float64
			if c.bias {
				b = gen(c.k)
			}
			// f32w16: f32 activations with f16 weights (rt.HalfWeights,
			// -precision f16).
			for _, kind := range []struct {
				dt   rt.DType
				half bool
			}{{rt.F32, false}, {rt.F32, true}, {rt.F16, false}, {rt.F64, false}} {
				dt, wdt, label := kind.dt, kind.dt, kind.dt.String()
				if kind.half {
					wdt, label = rt.F16, "f32w16"
				}
				if dt == rt.F16 && !dev.Info().FP16 || dt == rt.F64 && !dev.Info().FP64 {
					continue
				}
				// Round the inputs to their dtype so that the reference sees what the device sees.
				upAs := func(dt rt.DType, v []float64) ([]float64, rt.Buffer) {
					tt, _ := rt.NewTensor(dt, len(v))
					r := make([]float64, len(v))
					for i, f := range v {
						tt.SetFloat64(i, f)
						r[i] = tt.Float64(i)
					}
					return r, backendtest.Upload(t, dev, tt.Data)
				}
				up := func(v []float64) ([]float64, rt.Buffer) { return upAs(dt, v) }
				xr, xb := up(x)
				wr, wb := upAs(wdt, w)
				o.X = rt.Ref{Buf: xb, DType: dt, Shape: []int{c.n, c.c, c.h, c.w}}
				o.W = rt.Ref{Buf: wb, DType: wdt, Shape: []int{c.k, c.c / c.g, c.kh, c.kw}}
				var br []float64
				o.Bias = rt.Ref{}
				if b != nil {
					var bb rt.Buffer
					br, bb = up(b)
					o.Bias = rt.Ref{Buf: bb, DType: dt, Shape: []int{c.k}}
				}
				resr, resb := up(res)
				act := o.Act
				o.Act = rt.Activation{Fn: rt.Copy}
				pre := convRef(o, xr, wr, br)
				o.Act = act
				mag := convRef(&rt.Conv{N: o.N, C: o.C, H: o.H, Width: o.Width, K: o.K, OH: oh, OW: ow, KH: o.KH, KW: o.KW,
					StrideH: o.StrideH, StrideW: o.StrideW, PadT: o.PadT, PadL: o.PadL, DilH: o.DilH, DilW: o.DilW, Groups: o.Groups,
					Act: rt.Activation{Fn: rt.Copy}}, abs(xr), abs(wr), abs(br))
				for i := range mag {
					mag[i] += math.Abs(resr[i])
				}
				tol := 1e-5
				if dt == rt.F16 {
					tol = 4e-3
				}
				shapes := append(append([]gemmShape{}, allGEMMShapes...), convNarrow[:]...)
				if dt != rt.F32 || kind.half { // fewer programs to build
					shapes = []gemmShape{{64, 64, 16, 4, 4}, {32, 32, 16, 4, 4}, convNarrow[1]}
				}
				type variant struct {
					s      gemmShape
					splits int
				}
				var vs []variant
				for _, s := range shapes {
					vs = append(vs, variant{s, 1})
				}
				vs = append(vs, variant{shapes[0], 3}, variant{shapes[len(shapes)-2], 5}, variant{shapes[len(shapes)-1], 16})
				for _, v := range vs {
					for _, withRes := range []bool{false, true} {
						s := v.s
						dev.gemmForce, dev.splitForce = &s, v.splits
						name := fmt.Sprintf("case%d/%s/%dx%d_%dx%d/split%d/res%v", ci, label, s.tm, s.tn, s.wm, s.wn, v.splits, withRes)
						want := make([]float64, len(pre))
						for i, p := range pre {
							if withRes {
								p += resr[i]
							}
							want[i] = act.Fn.Apply(p, act.Alpha, act.Beta)
						}
						o.Res = rt.Ref{}
						if withRes {
							o.Res = rt.Ref{Buf: resb, DType: dt, Shape: []int{c.n, c.k, oh, ow}}
						}
						t.Run(name, func(t *testing.T) {
							defer func() { dev.splitForce = 0 }()
							y := newGuarded(t, dev, dt, len(want))
							defer y.buf.Free()
							o.Y = y.ref(dt, c.n, c.k, oh, ow)
							if err := dev.Supports(o); err != nil {
								t.Fatal(err)
							}
							// Two submits of one recording: split-K must leave its
							// tile counters ready for the next run.
							st, err := dev.NewStream(rt.StreamOptions{})
							if err != nil {
								t.Fatal(err)
							}
							defer st.Close()
							if err := st.Launch(o); err != nil {
								t.Fatal(err)
							}
							for r := 0; r < 2; r++ {
								if err := st.Submit(); err != nil {
									t.Fatal(err)
								}
								if err := st.Wait(); err != nil {
									t.Fatal(err)
								}
							}
							got := &rt.Tensor{DType: dt, Shape: []int{len(want)}, Data: y.read(t, dev)}
							for i := range want {
								g := got.Float64(i)
								if !(math.Abs(g-want[i]) <= tol*(mag[i]+1)) {
									t.Fatalf("Y[%d] = %v, want %v (tolerance %g)", i, g, want[i], tol*(mag[i]+1))
								}
							}
						})
					}
				}
				o.Res = rt.Ref{}
				resb.Free()
				xb.Free()
				wb.Free()
				if o.Bias.Buf != nil {
					o.Bias.Buf.Free()
				}
			}
		}
	})
}

func abs(v []float64) []float64 {
	if v == nil {
		return nil
	}
	r := make([]float64, len(v))
	for i, f := range v {
		r[i] = math.Abs(f)
	}
	return r
}

// TestPickConv checks pickConv's tiles and split-K factors on an
// H200-like device (132 compute units, the large tile) for resnet18's
// layers at batch 1 and 32, and that a CPU device and ConvRuleEnv=wide
// keep the former rule.
func TestPickConv(t *testing.T) {
	gpu := caps{maxWG: 1024, computeUnits: 132, localMem: 48 << 10}
	newDev := func(c caps, rule string) *device {
		return &device{ent: devEntry{caps: c}, cfg: tuningFor(c), convRule: rule}
	}
	wide := gemmShape{128, 128, 16, 8, 8}
	mid := gemmShape{64, 64, 16, 4, 4}
	cases := []struct {
		name              string
		kg, p, batch, r   int
		want              gemmShape
		wantS             int
		wideRule, wideRuS int
	}{
		{"conv1", 64, 112 * 112, 1, 3 * 49, convNarrow[1], 1, 64, 1},
		{"layer1", 64, 56 * 56, 1, 64 * 9, convNarrow[1], 3, 32, 1},
		{"layer2", 128, 28 * 28, 1, 128 * 9, convNarrow[0], 11, 32, 2},
		{"layer2_down", 128, 28 * 28, 1, 64, convNarrow[0], 2, 32, 1},
		{"layer3", 256, 14 * 14, 1, 256 * 9, convNarrow[0], 16, 32, 3},
		{"layer4", 512, 7 * 7, 1, 512 * 9, convNarrow[0], 16, 32, 5},
		{"layer1_b32", 64, 56 * 56, 32, 64 * 9, mid, 1, 0, 1},
		{"layer2_b32", 128, 28 * 28, 32, 128 * 9, mid, 1, 0, 1},
		{"256_56x56_b8", 256, 56 * 56, 8, 128 * 9, wide, 1, 0, 1},
	}
	for _, c := range cases {
		d := newDev(gpu, "")
		sh, s := d.pickConv(rt.F32, c.kg, c.p, c.batch, c.r)
		if sh != c.want || s != c.wantS {
			t.Errorf("%s: pickConv = %v split %d, want %v split %d", c.name, sh, s, c.want, c.wantS)
		}
		if got := sh.groups(c.kg, c.p, c.batch) * s; got < 2*132 && s < convSplitMax && s < c.r/convSplitMinK {
			t.Errorf("%s: %d work-groups, want at least %d", c.name, got, 2*132)
		}
		// the former rule, for comparison runs
		d = newDev(gpu, "wide")
		sh, s = d.pickConv(rt.F32, c.kg, c.p, c.batch, c.r)
		if want := d.pickGEMM(rt.F32, c.kg, c.p, c.batch); sh != want {
			t.Errorf("%s, rule wide: tile %v, want pickGEMM's %v", c.name, sh, want)
		}
		if c.wideRule != 0 && (sh.tm != c.wideRule || s != c.wideRuS) {
			t.Errorf("%s, rule wide: %v split %d, want %dx%d split %d", c.name, sh, s, c.wideRule, c.wideRule, c.wideRuS)
		}
	}
	cpu := caps{cpu: true, maxWG: 4096, computeUnits: 2, localMem: 512 << 10}
	d := newDev(cpu, "")
	if sh, s := d.pickConv(rt.F32, 512, 49, 1, 4608); sh != d.pickGEMM(rt.F32, 512, 49, 1) || s != 1 {
		t.Errorf("cpu: pickConv = %v split %d, want pickGEMM's tile unsplit", sh, s)
	}
	for _, c := range []struct{ s, r, tk, want int }{{3, 576, 16, 3}, {11, 1152, 16, 11}, {16, 64, 16, 4}, {5, 17, 16, 2}, {4, 16, 16, 1}, {0, 100, 16, 1}} {
		if got := evenSplits(c.s, c.r, c.tk); got != c.want {
			t.Errorf("evenSplits(%d, %d, %d) = %d, want %d", c.s, c.r, c.tk, got, c.want)
		}
	}
}
