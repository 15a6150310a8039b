//go:build cgo

package cudashim

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// convCase is one Conv shape; pads B and R are the implied bottom/right
// pads, from which OH and OW follow. dnn is whether cuDNN computes it
// exactly (and so must run it when present).
type convCase struct {
	name                   string
	n, c, h, w, k, kh, kw  int
	sh, sw, dh, dw, g      int
	padT, padL, padB, padR int
	bias                   bool
	act                    rt.Activation
	dnn                    bool
}

func (cc convCase) op() *rt.Conv {
	oh := (cc.h+cc.padT+cc.padB-cc.dh*(cc.kh-1)-1)/cc.sh + 1
	ow := (cc.w+cc.padL+cc.padR-cc.dw*(cc.kw-1)-1)/cc.sw + 1
	return &rt.Conv{N: cc.n, C: cc.c, H: cc.h, Width: cc.w, K: cc.k, OH: oh, OW: ow, KH: cc.kh, KW: cc.kw,
		StrideH: cc.sh, StrideW: cc.sw, PadT: cc.padT, PadL: cc.padL, DilH: cc.dh, DilW: cc.dw, Groups: cc.g, Act: cc.act}
}

var convCases = []convCase{
	{name: "3x3/pad1/bias+relu", n: 2, c: 8, h: 13, w: 11, k: 16, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 1,
		padT: 1, padL: 1, padB: 1, padR: 1, bias: true, act: rt.Activation{Fn: rt.Relu}, dnn: true},
	{name: "1x1", n: 2, c: 16, h: 7, w: 9, k: 8, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, dnn: true},
	{name: "groups2/bias+leakyrelu", n: 1, c: 8, h: 10, w: 10, k: 12, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 2,
		padT: 1, padL: 1, padB: 1, padR: 1, bias: true, act: rt.Activation{Fn: rt.LeakyRelu, Alpha: 0.1}, dnn: true},
	{name: "depthwise/x2/bias", n: 2, c: 12, h: 9, w: 12, k: 24, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 12,
		padT: 1, padL: 1, padB: 1, padR: 1, bias: true, dnn: true},
	{name: "dilation2", n: 1, c: 6, h: 15, w: 12, k: 8, kh: 3, kw: 3, sh: 1, sw: 1, dh: 2, dw: 2, g: 1,
		padT: 2, padL: 2, padB: 2, padR: 2, dnn: true},
	{name: "stride2/pad1", n: 2, c: 8, h: 14, w: 15, k: 8, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, g: 1,
		padT: 1, padL: 1, padB: 1, padR: 1, bias: true, dnn: true},
	// Implied bottom/right pad 0 against top/left 1, but stride 2 over an
	// even size: the same OH/OW as symmetric 1/1, so cuDNN is exact.
	{name: "stride2/pads1-0", n: 1, c: 4, h: 14, w: 14, k: 6, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, g: 1,
		padT: 1, padL: 1, padB: 0, padR: 0, dnn: true},
	{name: "5x3/stride2x1/bias+sigmoid", n: 1, c: 5, h: 17, w: 10, k: 7, kh: 5, kw: 3, sh: 2, sw: 1, dh: 1, dw: 1, g: 1,
		padT: 2, padL: 1, padB: 2, padR: 1, bias: true, act: rt.Activation{Fn: rt.Sigmoid}, dnn: true},
	// Truly asymmetric pads: the built-in kernel.
	{name: "asym/pads0-1", n: 2, c: 4, h: 9, w: 9, k: 5, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 1,
		padT: 0, padL: 1, padB: 1, padR: 0, bias: true, act: rt.Activation{Fn: rt.Relu}},
	{name: "asym/same_upper/stride2", n: 1, c: 4, h: 14, w: 14, k: 4, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, g: 1,
		padT: 0, padL: 0, padB: 1, padR: 1},
	{name: "asym/groups2/dil2", n: 1, c: 4, h: 11, w: 11, k: 4, kh: 3, kw: 3, sh: 1, sw: 1, dh: 2, dw: 2, g: 2,
		padT: 1, padL: 2, padB: 3, padR: 2, bias: true},
}

// TestConvCudnnEligible checks the cuDNN eligibility rule (no GPU needed).
func TestConvCudnnEligible(t *testing.T) {
	for _, cc := range convCases {
		for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
			o := cc.op()
			o.X.DType = dt
			if got := dnnEligible(o); got != cc.dnn {
				t.Errorf("%s/%s: dnnEligible = %v, want %v", cc.name, dt, got, cc.dnn)
			}
		}
	}
	o := convCases[0].op()
	o.X.DType = rt.I32
	if dnnEligible(o) {
		t.Errorf("i32 conv eligible")
	}
	if got := dnnOutDim(5, 7, 0, 1, 1); got != -1 {
		t.Errorf("dnnOutDim of a kernel longer than the input = %d, want -1", got)
	}
}

// cudnnPresent reports whether cuDNN will be used, logging why not.
func cudnnPresent(t testing.TB) bool {
	t.Helper()
	if !useCudnn() {
		t.Logf("cuDNN disabled (%s=0): checking the built-in kernel only", dnnEnv)
		return false
	}
	if err := loadCudnn(); err != nil {
		t.Logf("cuDNN %v: checking the built-in kernel only", err)
		return false
	}
	return true
}

// refConv computes o in float64; mag is the sum of |terms| per element.
func refConv(o *rt.Conv, x, w, bias *rt.Tensor) (want, mag []float64) {
	cg, kg := o.C/o.Groups, o.K/o.Groups
	want = make([]float64, o.N*o.K*o.OH*o.OW)
	mag = make([]float64, len(want))
	for n := 0; n < o.N; n++ {
		for k := 0; k < o.K; k++ {
			g := k / kg
			for oh := 0; oh < o.OH; oh++ {
				for ow := 0; ow < o.OW; ow++ {
					var s, m float64
					for c := 0; c < cg; c++ {
						for i := 0; i < o.KH; i++ {
							ih := oh*o.StrideH - o.PadT + i*o.DilH
							if ih < 0 || ih >= o.H {
								continue
							}
							for j := 0; j < o.KW; j++ {
								iw := ow*o.StrideW - o.PadL + j*o.DilW
								if iw < 0 || iw >= o.Width {
									continue
								}
								v := x.Float64(((n*o.C+g*cg+c)*o.H+ih)*o.Width+iw) * w.Float64(((k*cg+c)*o.KH+i)*o.KW+j)
								s += v
								m += math.Abs(v)
							}
						}
					}
					if bias != nil {
						s += bias.Float64(k)
						m += math.Abs(bias.Float64(k))
					}
					idx := ((n*o.K+k)*o.OH+oh)*o.OW + ow
					want[idx] = o.Act.Fn.Apply(s, o.Act.Alpha, o.Act.Beta)
					mag[idx] = m
				}
			}
		}
	}
	return want, mag
}

func convTol(dt rt.DType) float64 {
	switch dt {
	case rt.F64:
		return 1e-12
	case rt.F16:
		return 3e-3
	}
	if useTF32() {
		return 2e-3
	}
	return 2e-5
}

// checkConv runs cc in dt on d (shift moves X by one element, breaking the
// 16-byte alignment cuDNN needs) and compares with refConv. It returns how
// many Convs were recorded through cuDNN.
func checkConv(t *testing.T, d *Device, cc convCase, dt rt.DType, shift, profile bool) int64 {
	t.Helper()
	rng := rand.New(rand.NewSource(int64(len(cc.name)*7919 + cc.c*31 + cc.k)))
	o := cc.op()
	x := randTensor(rng, dt, o.N*o.C*o.H*o.Width)
	w := randTensor(rng, dt, o.K*(o.C/o.Groups)*o.KH*o.KW)
	var bias *rt.Tensor
	if cc.bias {
		bias = randTensor(rng, dt, o.K)
		_, o.Bias = devTensor(t, d, bias)
	}
	if shift {
		xs := randTensor(rng, dt, len(x.Data)/dt.Size()+1)
		copy(xs.Data[dt.Size():], x.Data)
		_, o.X = devTensor(t, d, xs)
		o.X.Off += int64(dt.Size())
		o.X.Shape = []int{o.N * o.C * o.H * o.Width}
	} else {
		_, o.X = devTensor(t, d, x)
	}
	_, o.W = devTensor(t, d, w)
	y0, _ := rt.NewTensor(dt, o.N*o.K*o.OH*o.OW)
	_, o.Y = devTensor(t, d, y0)
	used := d.dnn.used.Load()
	s, err := d.NewStream(rt.StreamOptions{Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Launch(o); err != nil {
		t.Fatal(err)
	}
	used = d.dnn.used.Load() - used
	for r := 0; r < 2; r++ { // capture, then replay (profile: issue twice)
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	got := &rt.Tensor{DType: dt, Shape: []int{len(y0.Data) / dt.Size()}, Data: readBack(t, d, o.Y, len(y0.Data))}
	want, mag := refConv(o, x, w, bias)
	tol := convTol(dt)
	for i := range want {
		g := got.Float64(i)
		if e := math.Abs(g - want[i]); e > tol*(mag[i]+math.Abs(want[i]))+1e-30 || math.IsNaN(g) {
			t.Fatalf("Y[%d] = %.10g, want %.10g (|err| %.3g > %.3g; cuDNN used: %v)", i, g, want[i], e,
				tol*(mag[i]+math.Abs(want[i])), used > 0)
		}
	}
	return used
}

// TestConvCudnn checks Conv against a float64 reference in f32, f64 and
// f16 for every case, and that cuDNN, when present, runs exactly the
// eligible cases.
func TestConvCudnn(t *testing.T) {
	// These small convolutions would take the split-K path (convsk.go,
	// checked by TestConvSplitK): keep them on cuDNN here.
	t.Setenv(splitKEnv, "0")
	t.Setenv(dwEnv, "0") // depthwise cases on cuDNN too
	d := openTest(t, true)
	present := cudnnPresent(t)
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for _, cc := range convCases {
			t.Run(fmt.Sprintf("%s/%s", dt, cc.name), func(t *testing.T) {
				refused := d.dnn.refused.Load()
				used := checkConv(t, d, cc, dt, false, false)
				if refused := d.dnn.refused.Load() - refused; refused != 0 {
					d.dnn.mu.Lock()
					why := d.dnn.last
					d.dnn.mu.Unlock()
					t.Errorf("cuDNN refused an eligible conv: %s", why)
				}
				if want := b2i(present && cc.dnn); used != want {
					t.Errorf("recorded through cuDNN: %d, want %d", used, want)
				}
			})
		}
	}
	t.Run("f32/profile", func(t *testing.T) {
		if used := checkConv(t, d, convCases[0], rt.F32, false, true); used != b2i(present) {
			t.Errorf("recorded through cuDNN: %d, want %d", used, b2i(present))
		}
	})
	t.Run("f32/misaligned", func(t *testing.T) {
		if used := checkConv(t, d, convCases[0], rt.F32, true, false); used != 0 {
			t.Errorf("misaligned X recorded through cuDNN")
		}
	})
	t.Run("f16/misaligned", func(t *testing.T) {
		if used := checkConv(t, d, convCases[2], rt.F16, true, false); used != 0 {
			t.Errorf("misaligned X recorded through cuDNN")
		}
	})
	t.Run("fused", func(t *testing.T) {
		// 3x3/pad1/bias+relu: conv, bias and ReLU in one cuDNN call where
		// the library has it; with VRUN_CUDA_CUDNN_FUSE=0 the same result
		// from the three-step path.
		fused := d.dnn.fused.Load()
		checkConv(t, d, convCases[0], rt.F32, false, false)
		got := d.dnn.fused.Load() - fused
		t.Logf("bias+relu fused into the cuDNN call: %d", got)
		if present && dnnCanFuse() && got != 1 {
			t.Errorf("bias+relu not fused although cudnnConvolutionBiasActivationForward is present")
		}
		t.Setenv("VRUN_CUDA_CUDNN_FUSE", "0")
		fused = d.dnn.fused.Load()
		checkConv(t, d, convCases[0], rt.F32, false, false)
		if d.dnn.fused.Load() != fused {
			t.Errorf("VRUN_CUDA_CUDNN_FUSE=0: fused anyway")
		}
	})
	t.Run("disabled", func(t *testing.T) {
		t.Setenv(dnnEnv, "0")
		if used := checkConv(t, d, convCases[0], rt.F32, false, false); used != 0 {
			t.Errorf("%s=0: recorded through cuDNN", dnnEnv)
		}
	})
	for _, e := range d.info.Details {
		if e[0] == "cudnn" || e[0] == "conv" {
			t.Logf("%s: %s", e[0], e[1])
		}
	}
}

// TestConvCudnnReset records Convs, replays, Resets and records others on
// the same stream (descriptors freed, workspace regrown), then Closes.
func TestConvCudnnReset(t *testing.T) {
	t.Setenv(splitKEnv, "0") // keep the small convolutions on cuDNN
	t.Setenv(dwEnv, "0")     // and the depthwise ones
	d := openTest(t, true)
	if !cudnnPresent(t) {
		t.Skip("cuDNN not in use")
	}
	s, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewSource(1))
	for round, cc := range []convCase{convCases[1], convCases[0], convCases[4]} {
		s.Reset()
		o := cc.op()
		_, o.X = devTensor(t, d, randTensor(rng, rt.F32, o.N*o.C*o.H*o.Width))
		_, o.W = devTensor(t, d, randTensor(rng, rt.F32, o.K*(o.C/o.Groups)*o.KH*o.KW))
		if cc.bias {
			_, o.Bias = devTensor(t, d, randTensor(rng, rt.F32, o.K))
		}
		y0, _ := rt.NewTensor(rt.F32, o.N*o.K*o.OH*o.OW)
		_, o.Y = devTensor(t, d, y0)
		for i := 0; i < 3; i++ {
			if err := s.Launch(o); err != nil {
				t.Fatal(err)
			}
		}
		for r := 0; r < 3; r++ {
			if err := s.Submit(); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if err := s.Wait(); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// BenchmarkConv times graph replay + sync of one ResNet-like Conv (batch
// 32, 64 channels, 56x56, 3x3 pad 1 and 1x1) through cuDNN and through
// the built-in kernel (VRUN_CUDA_CUDNN=0 for the whole run also works).
func BenchmarkConv(b *testing.B) {
	shapes := []struct {
		name   string
		kh, pd int
	}{{"3x3", 3, 1}, {"1x1", 1, 0}}
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64} {
		for _, sh := range shapes {
			for _, impl := range []string{"cudnn", "builtin"} {
				b.Run(fmt.Sprintf("%s/%s/%s", dt, sh.name, impl), func(b *testing.B) {
					d := openTest(b, true)
					if impl == "builtin" {
						b.Setenv(dnnEnv, "0")
					} else if !cudnnPresent(b) {
						b.Skip("cuDNN not in use")
					}
					o := &rt.Conv{N: 32, C: 64, H: 56, Width: 56, K: 64, OH: 56, OW: 56, KH: sh.kh, KW: sh.kh,
						StrideH: 1, StrideW: 1, PadT: sh.pd, PadL: sh.pd, DilH: 1, DilW: 1, Groups: 1}
					alloc := func(n int) rt.Ref {
						buf, err := d.Alloc(int64(n * dt.Size()))
						if err != nil {
							b.Skip(err)
						}
						r := rt.Ref{Buf: buf, DType: dt, Shape: []int{n}}
						backendtest.Run(b, d, &rt.Fill{Y: r, Value: 0.01})
						return r
					}
					o.X, o.W, o.Y = alloc(o.N*o.C*o.H*o.Width), alloc(o.K*o.C*o.KH*o.KW), alloc(o.N*o.K*o.OH*o.OW)
					s, err := d.NewStream(rt.StreamOptions{})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					used := d.dnn.used.Load()
					if err := s.Launch(o); err != nil {
						b.Fatal(err)
					}
					if got := d.dnn.used.Load() - used; got != b2i(impl == "cudnn") {
						b.Fatalf("recorded through cuDNN: %d, want %d", got, b2i(impl == "cudnn"))
					}
					if err := s.Submit(); err != nil { // captures the graph
						b.Fatal(err)
					}
					if err := s.Wait(); err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					t0 := time.Now()
					for i := 0; i < b.N; i++ {
						if err := s.Submit(); err != nil {
							b.Fatal(err)
						}
						if err := s.Wait(); err != nil {
							b.Fatal(err)
						}
					}
					el := time.Since(t0).Seconds()
					flop := 2 * float64(o.N*o.K*o.OH*o.OW) * float64(o.C*o.KH*o.KW)
					b.ReportMetric(flop*float64(b.N)/el/1e12, "TFLOP/s")
				})
			}
		}
	}
}

// TestCudnnDetail checks the Details entries (no GPU needed: loading
// cuDNN only opens the library).
func TestCudnnDetail(t *testing.T) {
	got := dnnDetail()
	switch {
	case !useCudnn():
		if got != "disabled ("+dnnEnv+"=0)" {
			t.Errorf("cudnn detail %q with %s=0", got, dnnEnv)
		}
	case loadCudnn() != nil:
		if got != loadCudnn().Error() || convDetail() != "built-in implicit-GEMM kernel" {
			t.Errorf("cudnn detail %q, conv %q, load error %v", got, convDetail(), loadCudnn())
		}
	default:
		if got == "" || got[0] != '9' {
			t.Errorf("cudnn detail %q, want a 9.x.y version", got)
		}
	}
	t.Logf("cudnn: %s; conv: %s", got, convDetail())
	t.Setenv(dnnEnv, "0")
	if got := dnnDetail(); got != "disabled ("+dnnEnv+"=0)" {
		t.Errorf("cudnn detail %q with %s=0", got, dnnEnv)
	}
}
