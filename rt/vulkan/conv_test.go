//go:build cgo

package vulkan

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
	"github.com/x448/float16"
)

type convCase struct {
	N, C, H, W, K, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, G int
	bias                                                     bool
	act                                                      rt.UnaryFn
}

func (c convCase) out() (int, int) {
	return (c.H+c.pt+c.pb-c.dh*(c.KH-1)-1)/c.sh + 1, (c.W+c.pl+c.pr-c.dw*(c.KW-1)-1)/c.sw + 1
}

// checkConv runs c and compares it (and the sentinels around Y) with convRef.
func checkConv(t *testing.T, d rt.Device, r *rand.Rand, dt rt.DType, c convCase, what string) {
	t.Helper()
	checkConvW(t, d, r, dt, dt, c, what)
}

// checkConvW is checkConv with W of dtype wdt: f16 with dt f32 is an
// rt.HalfWeights op, held to f32's tolerance (W's values are f16's).
func checkConvW(t *testing.T, d rt.Device, r *rand.Rand, dt, wdt rt.DType, c convCase, what string) {
	t.Helper()
	OH, OW := c.out()
	x := randVals(r, dt, c.N*c.C*c.H*c.W, -1, 1)
	w := randVals(r, wdt, c.K*(c.C/c.G)*c.KH*c.KW, -1, 1)
	ny := c.N * c.K * OH * OW
	yb := newBuf(t, d, dt, ny, nil)
	op := &rt.Conv{X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), W: newBuf(t, d, wdt, len(w), w).ref([]int{len(w)}, nil),
		Y: yb.ref([]int{ny}, nil), N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: c.KH, KW: c.KW,
		StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.G,
		Act: rt.Activation{Fn: c.act, Alpha: 0.1}}
	var bias []float64
	if c.bias {
		bias = randVals(r, dt, c.K, -1, 1)
		op.Bias = newBuf(t, d, dt, c.K, bias).ref([]int{c.K}, nil)
	}
	if !supported(t, d, op) {
		return
	}
	backendtest.Run(t, d, op)
	got := yb.read(t, d)
	xr := x
	if d.(*device).coopConv(op) {
		// convcm.comp rounds X to f16 for its products: the reference
		// takes the same rounding, and its f32 sums keep f32's tolerance
		xr = make([]float64, len(x))
		for i, v := range x {
			xr[i] = float64(float16.Fromfloat32(float32(v)).Float32())
		}
		what += " (cooperative matrices)"
	}
	want, ab := convRef(xr, w, bias, c.N, c.C, c.H, c.W, c.K, OH, OW, c.KH, c.KW, c.sh, c.sw, c.pt, c.pl, c.dh, c.dw, c.G)
	for i := range want {
		v := c.act.Apply(want[i], 0.1, 0)
		if math.Abs(got[i]-v) > convTol(dt)*(ab[i]+1) {
			t.Fatalf("%s %s (W %s) %+v: Y[%d] = %v, want %v", what, dt, wdt, c, i, got[i], v)
		}
	}
}

// TestConvPaths forces each Conv kernel (implicit GEMM with every tile,
// depthwise, direct) on odd channel counts, asymmetric pads, dilation,
// stride 2, groups 2 and 4, batch 3, 1x1 convolutions, with and without
// bias, with fused activations.
func TestConvPaths(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(21))
	cases := []convCase{
		{3, 5, 11, 9, 7, 3, 3, 2, 2, 1, 0, 2, 1, 1, 1, 1, true, rt.Relu},        // odd, stride 2, asymmetric pads, batch 3
		{1, 6, 10, 12, 10, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1, 2, true, rt.LeakyRelu}, // dilation, groups 2
		{2, 12, 9, 8, 36, 2, 3, 2, 1, 0, 1, 1, 1, 1, 2, 4, false, rt.Tanh},      // groups 4, no bias
		{3, 13, 5, 7, 17, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, 0},             // pointwise 1x1
		{1, 9, 9, 11, 33, 1, 1, 2, 2, 0, 0, 0, 1, 1, 1, 1, true, rt.Sigmoid},    // 1x1 stride 2, pad
		{2, 20, 13, 17, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},     // several tiles
		{3, 7, 10, 9, 7, 3, 3, 2, 2, 1, 0, 1, 2, 1, 1, 7, true, rt.Relu},        // depthwise 3x3, stride 2
		{1, 5, 9, 11, 10, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 5, false, 0},            // depthwise x2, dilation 2
		{2, 6, 8, 8, 6, 5, 4, 1, 2, 2, 1, 2, 2, 1, 1, 6, true, rt.Gelu},         // depthwise 5x4
		{2, 4, 1, 33, 9, 1, 5, 1, 3, 0, 2, 0, 2, 1, 1, 1, true, 0},              // 1-D
		{1, 3, 6, 6, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},         // tiny K
	}
	defer func() { forceConvPath, forceGemmTile = "", "" }()
	for _, dt := range floatDTypes {
		for _, c := range cases {
			for _, path := range []string{"", "direct", "dw"} {
				if path == "dw" && c.C != c.G {
					continue
				}
				forceConvPath = path
				checkConv(t, d, r, dt, c, "path "+path)
			}
			forceConvPath = "gemm"
			for _, tile := range convTiles {
				forceGemmTile = tile.name
				checkConv(t, d, r, dt, c, "gemm tile "+tile.name)
			}
			forceGemmTile = ""
			forceConvPath = ""
		}
	}
}

// TestConvPick checks the kernel and tile choice.
func TestConvPick(t *testing.T) {
	for _, c := range []struct {
		cg, kg, khw int
		want        string
	}{
		{1, 1, 9, "dw"}, {1, 2, 9, "dw"}, {64, 64, 9, "gemm"}, {512, 2048, 1, "gemm"}, {3, 4, 9, "direct"}, {2, 16, 1, "direct"}, {3, 64, 49, "gemm"},
	} {
		if got := convPath(c.cg, c.kg, c.khw); got != c.want {
			t.Errorf("convPath(%d, %d, %d) = %s, want %s", c.cg, c.kg, c.khw, got, c.want)
		}
	}
	for _, c := range []struct {
		kg, cols, kd, g int
		sep, cpu        bool
		want            string
	}{
		{64, 56 * 56, 576, 1, false, false, "u"},  // resnet layer1 at batch 1: narrow tile, split K
		{64, 224 * 224, 27, 1, false, false, "w"}, // few channels, many pixels
		{256, 32 * 3136, 576, 1, false, false, "l"},
		{256, 32 * 3136, 64, 1, false, false, "w"}, // resnet50's 1x1 expansion at batch 32: shallow, no "l"
		{1024, 32 * 196, 256, 1, false, false, "w"},
		{2048, 49, 512, 1, false, false, "n"},
		{512, 8 * 49, 4608, 1, false, false, "n"}, // 56 "s" workgroups: still too few
		{128, 64 * 784, 1152, 1, false, false, "l"},
		{96, 196, 16, 1, false, false, "u"},
		{96, 196, 96, 1, true, false, "n"}, // a SepConv's projection: one row of tiles
		{32, 784, 96, 1, true, false, "u"},
		{16, 112 * 112, 32, 1, true, false, "u"},
		{64, 56 * 56, 576, 1, false, true, "w"},
		{2048, 49, 512, 1, false, true, "m"},
	} {
		got, ok := pickConvTile(rt.F32, c.kg, c.cols, c.kd, c.g, 49152, 1024, c.sep, c.cpu)
		if !ok || got.name != c.want {
			t.Errorf("pickConvTile(%d, %d, kd %d, %d, sep %v, cpu %v) = %s, want %s", c.kg, c.cols, c.kd, c.g, c.sep, c.cpu, got.name, c.want)
		}
	}
	t.Setenv("VRUN_VK_SEPPICK", "0")
	if got, _ := pickConvTile(rt.F32, 96, 196, 96, 1, 49152, 1024, true, false); got.name != "u" {
		t.Errorf("VRUN_VK_SEPPICK=0: pickConvTile(96, 196, 1, sep) = %s, want u", got.name)
	}
}

// BenchmarkConv measures f32 convolutions at batch 1 (resnet 3x3 layers
// incl. layer3 and layer4, which split K on GPUs, a
// 1x1 expansion, a mobilenet depthwise 3x3) on the kernel Conv picks and,
// as "/direct", on the direct kernel, reporting wall-clock and
// GPU-timestamp TFLOP/s. The large cases are skipped on CPU devices.
func BenchmarkConv(b *testing.B) {
	d := testDevice(b)
	for _, c := range []struct {
		name                  string
		C, H, K, KH, pad, grp int
		large                 bool
	}{
		{"3x3_64x56x56_64", 64, 56, 64, 3, 1, 1, true},
		{"3x3_256x14x14_256", 256, 14, 256, 3, 1, 1, false}, // resnet layer3
		{"3x3_512x7x7_512", 512, 7, 512, 3, 1, 1, false},    // resnet layer4
		{"1x1_512x7x7_2048", 512, 7, 2048, 1, 0, 1, false},
		{"dw3x3_96x112x112", 96, 112, 96, 3, 1, 96, true},
	} {
		for _, path := range []string{"", "direct"} {
			name := c.name
			if path != "" {
				name += "/" + path
			}
			b.Run(name, func(b *testing.B) {
				if c.large && isCPU(d) {
					b.Skip("large convolution skipped on a CPU device")
				}
				forceConvPath = path
				defer func() { forceConvPath = "" }()
				dt := rt.F32
				oh := c.H + 2*c.pad - c.KH + 1
				cg := c.C / c.grp
				vals := func(n int) []float64 {
					v := make([]float64, n)
					for i := range v {
						v[i] = math.Sin(float64(i))
					}
					return v
				}
				nx, nw, ny := c.C*c.H*c.H, c.K*cg*c.KH*c.KH, c.K*oh*oh
				op := &rt.Conv{X: newBuf(b, d, dt, nx, vals(nx)).ref([]int{nx}, nil), W: newBuf(b, d, dt, nw, vals(nw)).ref([]int{nw}, nil),
					Bias: newBuf(b, d, dt, c.K, vals(c.K)).ref([]int{c.K}, nil), Y: newBuf(b, d, dt, ny, nil).ref([]int{ny}, nil),
					N: 1, C: c.C, H: c.H, Width: c.H, K: c.K, OH: oh, OW: oh, KH: c.KH, KW: c.KH, StrideH: 1, StrideW: 1,
					PadT: c.pad, PadL: c.pad, DilH: 1, DilW: 1, Groups: c.grp, Act: rt.Activation{Fn: rt.Relu}}
				benchOp(b, d, op, 2*float64(ny)*float64(cg*c.KH*c.KH), 0)
			})
		}
	}
}

func convRef(x, w, bias []float64, N, C, H, W, K, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw, G int) ([]float64, []float64) {
	y := make([]float64, N*K*OH*OW)
	ab := make([]float64, len(y))
	cg, kg := C/G, K/G
	for n := 0; n < N; n++ {
		for k := 0; k < K; k++ {
			g := k / kg
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					s, sa := 0.0, 0.0
					if bias != nil {
						s, sa = bias[k], math.Abs(bias[k])
					}
					for c := 0; c < cg; c++ {
						for kh := 0; kh < KH; kh++ {
							ih := oh*sh - pt + kh*dh
							if ih < 0 || ih >= H {
								continue
							}
							for kw := 0; kw < KW; kw++ {
								iw := ow*sw - pl + kw*dw
								if iw < 0 || iw >= W {
									continue
								}
								p := x[((n*C+g*cg+c)*H+ih)*W+iw] * w[((k*cg+c)*KH+kh)*KW+kw]
								s += p
								sa += math.Abs(p)
							}
						}
					}
					i := ((n*K+k)*OH+oh)*OW + ow
					y[i], ab[i] = s, sa
				}
			}
		}
	}
	return y, ab
}

func convTol(dt rt.DType) float64 {
	switch dt {
	case rt.F16:
		return 2e-3
	case rt.F64:
		return 1e-12
	}
	return 1e-4
}

func TestConv(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(10))
	type cc struct{ N, C, H, W, K, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, G int }
	cases := []cc{
		{1, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		{2, 4, 13, 11, 6, 3, 2, 2, 1, 0, 1, 2, 0, 2, 1, 2},
		{1, 6, 9, 9, 6, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 6},  // depthwise
		{1, 5, 1, 33, 7, 1, 5, 1, 3, 0, 2, 0, 2, 1, 1, 1}, // 1-D
	}
	for _, dt := range floatDTypes {
		for _, c := range cases {
			OH := (c.H+c.pt+c.pb-c.dh*(c.KH-1)-1)/c.sh + 1
			OW := (c.W+c.pl+c.pr-c.dw*(c.KW-1)-1)/c.sw + 1
			x := randVals(r, dt, c.N*c.C*c.H*c.W, -1, 1)
			w := randVals(r, dt, c.K*(c.C/c.G)*c.KH*c.KW, -1, 1)
			bias := randVals(r, dt, c.K, -1, 1)
			yb := newBuf(t, d, dt, c.N*c.K*OH*OW, nil)
			op := &rt.Conv{X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), W: newBuf(t, d, dt, len(w), w).ref([]int{len(w)}, nil),
				Bias: newBuf(t, d, dt, c.K, bias).ref([]int{c.K}, nil), Y: yb.ref([]int{c.N * c.K * OH * OW}, nil),
				N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: c.KH, KW: c.KW, StrideH: c.sh, StrideW: c.sw,
				PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.G, Act: rt.Activation{Fn: rt.LeakyRelu, Alpha: 0.1}}
			if !supported(t, d, op) {
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			want, ab := convRef(x, w, bias, c.N, c.C, c.H, c.W, c.K, OH, OW, c.KH, c.KW, c.sh, c.sw, c.pt, c.pl, c.dh, c.dw, c.G)
			for i := range want {
				want[i] = rt.LeakyRelu.Apply(want[i], 0.1, 0)
				if math.Abs(got[i]-want[i]) > convTol(dt)*(ab[i]+1) {
					t.Fatalf("conv %s %+v: [%d] = %v, want %v", dt, c, i, got[i], want[i])
				}
			}
		}
	}
}

func TestConvTranspose(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(11))
	type cc struct{ N, C, H, W, K, KH, KW, sh, sw, pt, pl, dh, dw, G, oph, opw int }
	cases := []cc{
		{1, 3, 5, 7, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
		{2, 4, 3, 3, 6, 2, 3, 1, 2, 0, 1, 2, 1, 2, 0, 1},
	}
	for _, dt := range floatDTypes {
		for _, c := range cases {
			OH := (c.H-1)*c.sh - 2*c.pt + c.dh*(c.KH-1) + c.oph + 1
			OW := (c.W-1)*c.sw - 2*c.pl + c.dw*(c.KW-1) + c.opw + 1
			x := randVals(r, dt, c.N*c.C*c.H*c.W, -1, 1)
			w := randVals(r, dt, c.C*(c.K/c.G)*c.KH*c.KW, -1, 1)
			bias := randVals(r, dt, c.K, -1, 1)
			yb := newBuf(t, d, dt, c.N*c.K*OH*OW, nil)
			op := &rt.ConvTranspose{X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), W: newBuf(t, d, dt, len(w), w).ref([]int{len(w)}, nil),
				Bias: newBuf(t, d, dt, c.K, bias).ref([]int{c.K}, nil), Y: yb.ref([]int{c.N * c.K * OH * OW}, nil),
				N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: c.KH, KW: c.KW, StrideH: c.sh, StrideW: c.sw,
				PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.G}
			if !supported(t, d, op) {
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			// scatter reference
			want := make([]float64, len(got))
			ab := make([]float64, len(got))
			cg, kg := c.C/c.G, c.K/c.G
			for n := 0; n < c.N; n++ {
				for k := 0; k < c.K; k++ {
					for i := 0; i < OH*OW; i++ {
						want[(n*c.K+k)*OH*OW+i] = bias[k]
						ab[(n*c.K+k)*OH*OW+i] = math.Abs(bias[k])
					}
				}
				for ci := 0; ci < c.C; ci++ {
					g := ci / cg
					for kk := 0; kk < kg; kk++ {
						k := g*kg + kk
						for ih := 0; ih < c.H; ih++ {
							for iw := 0; iw < c.W; iw++ {
								for kh := 0; kh < c.KH; kh++ {
									oh := ih*c.sh - c.pt + kh*c.dh
									if oh < 0 || oh >= OH {
										continue
									}
									for kw := 0; kw < c.KW; kw++ {
										ow := iw*c.sw - c.pl + kw*c.dw
										if ow < 0 || ow >= OW {
											continue
										}
										p := x[((n*c.C+ci)*c.H+ih)*c.W+iw] * w[((ci*kg+kk)*c.KH+kh)*c.KW+kw]
										want[((n*c.K+k)*OH+oh)*OW+ow] += p
										ab[((n*c.K+k)*OH+oh)*OW+ow] += math.Abs(p)
									}
								}
							}
						}
					}
				}
			}
			for i := range want {
				if math.Abs(got[i]-want[i]) > convTol(dt)*(ab[i]+1) {
					t.Fatalf("convT %s %+v: [%d] = %v, want %v", dt, c, i, got[i], want[i])
				}
			}
		}
	}
}
