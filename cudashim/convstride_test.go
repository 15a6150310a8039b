//go:build cgo

package cudashim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/realmodels"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// strideCase is a Conv whose images are written StrideY apart into a
// wider tensor (a channel Concat's output at batch > 1): each image of Y
// (and of Res, laid out like Y) has pre elements before it and post after
// it, so StrideY is pre + K*OH*OW + post and Y starts pre elements into
// its buffer.
type strideCase struct {
	skCase
	pre, post int
}

// strideCases reach cuDNN (dnnEligible, not a small grid, pre keeps Y
// 16-byte aligned in every dtype): 1x1 and 3x3, groups, stride 2,
// dilation, depthwise, with and without bias, residual and activations,
// image strides that keep each image 16-byte aligned and ones that do not.
var strideCases = []strideCase{
	{skCase{convCase{name: "1x1/bias+relu", n: 3, c: 16, h: 8, w: 8, k: 24, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1,
		bias: true, act: rt.Activation{Fn: rt.Relu}}, false}, 8, 0},
	{skCase{convCase{name: "3x3/pad1/leakyrelu", n: 2, c: 8, h: 10, w: 10, k: 12, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 1,
		padT: 1, padL: 1, padB: 1, padR: 1, act: rt.Activation{Fn: rt.LeakyRelu, Alpha: 0.1}}, false}, 8, 3},
	{skCase{convCase{name: "3x3/stride2/groups2/bias+res+sigmoid", n: 2, c: 8, h: 11, w: 9, k: 10, kh: 3, kw: 3, sh: 2, sw: 2,
		dh: 1, dw: 1, g: 2, padT: 1, padL: 1, padB: 1, padR: 1, bias: true, act: rt.Activation{Fn: rt.Sigmoid}}, true}, 16, 5},
	{skCase{convCase{name: "1x1/bias+res+relu", n: 4, c: 32, h: 7, w: 7, k: 16, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1,
		bias: true, act: rt.Activation{Fn: rt.Relu}}, true}, 8, 8},
	{skCase{convCase{name: "3x3/dil2/bias", n: 2, c: 6, h: 15, w: 12, k: 8, kh: 3, kw: 3, sh: 1, sw: 1, dh: 2, dw: 2, g: 1,
		padT: 2, padL: 2, padB: 2, padR: 2, bias: true}, false}, 24, 2},
	{skCase{convCase{name: "depthwise/bias+relu6", n: 2, c: 12, h: 9, w: 9, k: 12, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 12,
		padT: 1, padL: 1, padB: 1, padR: 1, bias: true, act: rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}}, false}, 8, 1},
}

// strided is a strided Conv set up on a device with its host operands.
type strided struct {
	o            *rt.Conv
	x, w, bias   *rt.Tensor
	res          *rt.Tensor // dense [N, K, OH, OW], or nil
	fill         *rt.Tensor // Y's buffer before the Conv: N images StrideY apart
	yAll         rt.Ref     // the whole of Y's buffer (Y's images and the gaps)
	wide, imgLen int
}

// newStrided uploads sc's operands in dt: X, W, Bias, and Y (and Res) as
// N images StrideY apart, the gaps between them filled with values the
// Conv must keep.
func newStrided(t *testing.T, d *Device, sc strideCase, dt rt.DType) *strided {
	t.Helper()
	rng := rand.New(rand.NewSource(int64(len(sc.name)*7919 + sc.c*31 + sc.k)))
	o := sc.op()
	s := &strided{o: o}
	s.imgLen = o.K * o.OH * o.OW
	s.wide = sc.pre + s.imgLen + sc.post
	ext := (o.N-1)*s.wide + s.imgLen
	es := int64(dt.Size())
	s.x = randTensor(rng, dt, o.N*o.C*o.H*o.Width)
	s.w = randTensor(rng, dt, o.K*(o.C/o.Groups)*o.KH*o.KW)
	_, o.X = devTensor(t, d, s.x)
	_, o.W = devTensor(t, d, s.w)
	if sc.bias {
		s.bias = randTensor(rng, dt, o.K)
		_, o.Bias = devTensor(t, d, s.bias)
	}
	s.fill = randTensor(rng, dt, o.N*s.wide)
	_, s.yAll = devTensor(t, d, s.fill)
	o.Y = s.yAll
	o.Y.Off += int64(sc.pre) * es
	o.Y.Shape = []int{ext}
	o.StrideY = s.wide
	if sc.res {
		resAll := randTensor(rng, dt, o.N*s.wide)
		_, o.Res = devTensor(t, d, resAll)
		o.Res.Off += int64(sc.pre) * es
		o.Res.Shape = []int{ext}
		s.res, _ = rt.NewTensor(dt, o.N*s.imgLen)
		for n := 0; n < o.N; n++ {
			for e := 0; e < s.imgLen; e++ {
				s.res.SetFloat64(n*s.imgLen+e, resAll.Float64(n*s.wide+sc.pre+e))
			}
		}
	}
	return s
}

// run records s.o on a new stream, runs it twice (graph capture, then
// replay) and checks Y's images against refConvRes and that every other
// byte of Y's buffer kept its value. It returns the Convs recorded
// through cuDNN, or the error of Launch.
func (s *strided) run(t *testing.T, d *Device, pre int) (int64, error) {
	t.Helper()
	o, dt := s.o, s.o.X.DType
	st, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	used := d.dnn.used.Load()
	if err := st.Launch(o); err != nil {
		return 0, err
	}
	used = d.dnn.used.Load() - used
	for r := 0; r < 2; r++ {
		if err := st.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := st.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	raw := readBack(t, d, s.yAll, len(s.fill.Data))
	got := &rt.Tensor{DType: dt, Shape: []int{o.N * s.wide}, Data: raw}
	want, mag := refConvRes(o, s.x, s.w, s.bias, s.res)
	tol := convTol(dt)
	if dt == rt.F16 {
		tol = 4e-3 // f16 residual and output roundings on top of f32 sums
	}
	es := dt.Size()
	for n := 0; n < o.N; n++ {
		at := n * s.wide
		gaps := [][2]int{{at, at + pre}, {at + pre + s.imgLen, min(at+s.wide, o.N*s.wide)}}
		for _, g := range gaps {
			if !bytes.Equal(raw[g[0]*es:g[1]*es], s.fill.Data[g[0]*es:g[1]*es]) {
				t.Fatalf("image %d: elements [%d, %d) outside Y changed", n, g[0], g[1])
			}
		}
		for e := 0; e < s.imgLen; e++ {
			i := n*s.imgLen + e
			g := got.Float64(at + pre + e)
			if diff := math.Abs(g - want[i]); diff > tol*(mag[i]+math.Abs(want[i]))+1e-30 || math.IsNaN(g) {
				t.Fatalf("image %d: Y[%d] = %.10g, want %.10g (|err| %.3g > %.3g; cuDNN used: %v)", n, e, g, want[i], diff,
					tol*(mag[i]+math.Abs(want[i])), used > 0)
			}
		}
	}
	return used, nil
}

// TestConvStrideYCudnn checks Convs with their images StrideY apart
// through cuDNN, in f32, f16 and f64, with the bias, residual and
// activation in the fused call where it takes them
// (VRUN_CUDA_CUDNN_FUSE unset), in the basic fused call
// (VRUN_CUDA_CUDNN_FUSE=1) and unfused (=0: the bias copied into the
// strided Y first, the residual and activation after): Y's images against
// a float64 reference, the gaps between them untouched, Supports and
// Launch agreeing, and each Conv recorded through cuDNN. Without cuDNN
// (or its cudnnSetTensor4dDescriptorEx) every case must be refused, by
// Supports and by Launch, with an *rt.UnsupportedError.
func TestConvStrideYCudnn(t *testing.T) {
	d := openTest(t, true)
	present := cudnnPresent(t)
	if present && !dnnCanStride() {
		t.Logf("cuDNN lacks cudnnSetTensor4dDescriptorEx: strided Convs are refused")
		present = false
	}
	for _, sc := range strideCases {
		if skSmallGrid(sc.op()) {
			t.Fatalf("%s is a small grid (the split-K path)", sc.name)
		}
		for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64} {
			for _, route := range []string{"fused", "basic", "unfused"} {
				t.Run(fmt.Sprintf("%s/%s/%s", dt, route, sc.name), func(t *testing.T) {
					switch route {
					case "basic":
						t.Setenv(dnnFuseEnv, "1")
					case "unfused":
						t.Setenv(dnnFuseEnv, "0")
					}
					if sc.g == sc.c {
						t.Setenv(dwEnv, "0") // depthwise on cuDNN
					}
					s := newStrided(t, d, sc, dt)
					serr := d.Supports(s.o)
					fused := d.dnn.fused.Load()
					used, lerr := s.run(t, d, sc.pre)
					fused = d.dnn.fused.Load() - fused
					if (serr == nil) != (lerr == nil) {
						t.Fatalf("Supports = %v but Launch = %v", serr, lerr)
					}
					var ue *rt.UnsupportedError
					if serr != nil {
						if !errors.As(serr, &ue) || !errors.As(lerr, &ue) {
							t.Fatalf("refused with Supports = %v, Launch = %v: want *rt.UnsupportedError", serr, lerr)
						}
						if present {
							t.Fatalf("cuDNN present but the strided Conv refused: %v", serr)
						}
						t.Logf("refused: %v", serr)
						return
					}
					if !present {
						t.Fatalf("strided Conv ran without cuDNN")
					}
					if used != 1 {
						t.Fatalf("recorded through cuDNN: %d, want 1", used)
					}
					t.Logf("fused cuDNN calls: %d", fused)
					if route == "fused" && sc.bias && !sc.res && sc.act.Fn == rt.Relu && dnnCanFuse() && fused != 1 {
						t.Errorf("conv + bias + ReLU not fused into the cuDNN call")
					}
					if route == "unfused" && fused != 0 {
						t.Errorf("%s=0: fused anyway", dnnFuseEnv)
					}
				})
			}
		}
	}
}

// TestConvStrideYRefused checks that a strided Conv that Conv's rule
// sends to a built-in kernel (the small-grid split-K path, the depthwise
// kernel, the implicit-GEMM kernel for asymmetric pads, a misaligned Y,
// cuDNN turned off) is refused by both Supports and Launch with an
// *rt.UnsupportedError (Launch recording nothing).
func TestConvStrideYRefused(t *testing.T) {
	d := openTest(t, true)
	base := strideCases[0]
	asym := strideCase{skCase{convCase{name: "asym/pads0-1", n: 2, c: 4, h: 9, w: 9, k: 5, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1,
		dw: 1, g: 1, padT: 0, padL: 1, padB: 1, padR: 0, bias: true, act: rt.Activation{Fn: rt.Relu}}, false}, 8, 4}
	misaligned := base
	misaligned.pre = 1
	cases := []struct {
		name string
		sc   strideCase
		env  map[string]string
		sk   bool
	}{
		{"splitk", base, nil, true},
		{"splitk/res", strideCases[3], nil, true},
		{"depthwise-kernel", strideCases[5], map[string]string{dwEnv: "1"}, false},
		{"asymmetric-pads", asym, nil, false},
		{"misaligned-y", misaligned, nil, false},
		{"cudnn-off", base, map[string]string{dnnEnv: "0"}, false},
		{"cudnn-off/res", strideCases[3], map[string]string{dnnEnv: "0"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if c.sk {
				forceSK.on = true
				defer func() { forceSK.on = false }()
			}
			s := newStrided(t, d, c.sc, rt.F32)
			var ue *rt.UnsupportedError
			if err := d.Supports(s.o); !errors.As(err, &ue) {
				t.Fatalf("Supports = %v, want an *rt.UnsupportedError", err)
			}
			st, err := d.NewStream(rt.StreamOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Launch(s.o); !errors.As(err, &ue) {
				t.Fatalf("Launch = %v, want an *rt.UnsupportedError", err)
			}
			t.Logf("refused: %v", ue)
			if n := len(st.(*Stream).cmds); n != 0 {
				t.Fatalf("a refused Conv recorded %d commands", n)
			}
		})
	}
}

// TestConvStrideYRule checks, without a GPU, that the strided-Conv rule
// refuses with an *rt.UnsupportedError every Conv that Conv's rule sends
// to a built-in kernel, whatever cuDNN's presence, and yImageStride.
func TestConvStrideYRule(t *testing.T) {
	t.Setenv(splitKEnv, "")
	t.Setenv(dwEnv, "")
	var d *Device // the rule reads no device state without the cuDNN probe
	strided := func(cc convCase) *rt.Conv {
		o := cc.op()
		o.X.DType, o.W.DType, o.Y.DType = rt.F32, rt.F32, rt.F32
		o.StrideY = o.K*o.OH*o.OW + 16
		return o
	}
	var ue *rt.UnsupportedError
	refuse := func(name string, o *rt.Conv) {
		t.Helper()
		if err := d.convStrideSupported(o, false); !errors.As(err, &ue) {
			t.Errorf("%s: %v, want an *rt.UnsupportedError", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	refuse("depthwise kernel", strided(strideCases[5].convCase))
	refuse("asymmetric pads", strided(convCases[8]))
	o := strided(strideCases[0].convCase)
	o.Y.Off = 4
	refuse("misaligned Y", o)
	o = strided(strideCases[0].convCase)
	o.StrideY = -1
	refuse("negative StrideY", o)
	forceSK.on = true
	refuse("split-K", strided(strideCases[0].convCase))
	forceSK.on = false
	small := skCases[0].convCase
	small.n, small.c = 2, 64 // 576 deep: the small-grid rule's
	if o := small.op(); !skSmallGrid(o) {
		t.Fatalf("%s at batch 2 with 64 channels is not a small grid", small.name)
	}
	refuse("small grid", strided(small))
	t.Setenv(dnnEnv, "0")
	refuse("cuDNN off", strided(strideCases[0].convCase))

	o = strideCases[0].op()
	if got, want := yImageStride(o), o.K*o.OH*o.OW; got != want {
		t.Errorf("yImageStride(dense) = %d, want %d", got, want)
	}
	o.N, o.StrideY = 1, o.K*o.OH*o.OW+7
	if got, want := yImageStride(o), o.K*o.OH*o.OW; got != want {
		t.Errorf("yImageStride(one image, StrideY %d) = %d, want %d", o.StrideY, got, want)
	}
	o.N = 2
	if got := yImageStride(o); got != o.StrideY {
		t.Errorf("yImageStride(strided) = %d, want %d", got, o.StrideY)
	}
}

// TestConvStrideYModel runs squeezenet1_1 (testdata/models) at batch 4,
// where the engine points its fire modules' expand Convs into their
// Concat's output (rt.Conv.StrideY), and with VRUN_CONCAT_ELIDE=0 (the
// Convs dense, the Concat's copies kept): the plan with the strided Convs
// must launch fewer ops, and the outputs must agree, each image also with
// PyTorch's output for the committed input (the images are that input
// scaled by 1, 0.5, 0.25 and -1: squeezenet is not scale-invariant, so
// only image 0 has a reference; the others are checked between the two
// plans).
func TestConvStrideYModel(t *testing.T) {
	d := openTest(t, true)
	if !cudnnPresent(t) || !dnnCanStride() {
		t.Skip("cuDNN not in use: strided Convs are refused")
	}
	dir := realmodels.Dir()
	if dir == "" {
		t.Skip("testdata/models not found: run from the source tree")
	}
	base := filepath.Join(dir, "squeezenet1_1")
	m, err := onnx.ImportFile(base+".onnx", onnx.Options{Supported: engine.SupportedOps})
	if err != nil {
		t.Fatal(err)
	}
	x1, err := npy.ReadFile(base + ".x.npy")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := npy.ReadFile(base + ".torch.npy")
	if err != nil {
		t.Fatal(err)
	}
	if len(x1.Shape) != 4 || x1.Shape[0] != 1 || x1.DType != rt.F32 {
		t.Fatalf("input %v %v, want [1, C, H, W] f32", x1.DType, x1.Shape)
	}
	scales := []float64{1, 0.5, 0.25, -1}
	img := x1.Len()
	x, _ := rt.NewTensor(rt.F32, len(scales), x1.Shape[1], x1.Shape[2], x1.Shape[3])
	for b, sc := range scales {
		for i := 0; i < img; i++ {
			x.SetFloat64(b*img+i, sc*x1.Float64(i))
		}
	}
	in, out := m.Tensors[m.Inputs()[0]].Name, m.Tensors[m.Outputs()[0]].Name
	run := func(elide string) (*rt.Tensor, int) {
		t.Helper()
		t.Setenv("VRUN_CONCAT_ELIDE", elide)
		s, err := engine.New(m, d, engine.Options{Shapes: map[string][]int{in: x.Shape}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		used := d.dnn.used.Load()
		res, err := s.Run(context.Background(), map[string]*rt.Tensor{in: x})
		if err != nil {
			t.Fatalf("VRUN_CONCAT_ELIDE=%q: %v", elide, err)
		}
		info := s.Info()
		t.Logf("VRUN_CONCAT_ELIDE=%q: %d ops, %d Convs recorded through cuDNN", elide, info.Ops, d.dnn.used.Load()-used)
		return res[out], info.Ops
	}
	on, opsOn := run("")
	off, opsOff := run("0")
	if opsOn >= opsOff {
		t.Errorf("%d ops with the Convs into the Concats, %d without: no copy elided", opsOn, opsOff)
	}
	per := on.Len() / len(scales)
	if per != ref.Len() {
		t.Fatalf("output of %d elements per image, reference %d", per, ref.Len())
	}
	for b := range scales {
		slice := func(y *rt.Tensor) *rt.Tensor {
			return &rt.Tensor{DType: y.DType, Shape: []int{per}, Data: y.Data[b*per*y.DType.Size() : (b+1)*per*y.DType.Size()]}
		}
		rel, i, err := realmodels.MaxError(slice(on), slice(off))
		if err != nil || !(rel <= realmodels.Tol) {
			t.Errorf("image %d: strided against dense plan: max error %.3g at %d (%v)", b, rel, i, err)
		}
		if b == 0 {
			if rel, i, err := realmodels.MaxError(slice(on), ref); err != nil || !(rel <= realmodels.Tol) {
				t.Errorf("image 0 against PyTorch: max error %.3g at %d (%v)", rel, i, err)
			}
		}
	}
}
