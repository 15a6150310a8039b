//go:build cgo

package cudashim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// TestConvSKPlan checks the small-grid rule, tiles and splits on batch-1
// ResNet layers and a batch-32 one (no GPU needed).
func TestConvSKPlan(t *testing.T) {
	conv := func(n, c, h, k, kh, stride, pad, groups int) *rt.Conv {
		oh := (h+2*pad-kh)/stride + 1
		return &rt.Conv{N: n, C: c, H: h, Width: h, K: k, OH: oh, OW: oh, KH: kh, KW: kh, StrideH: stride, StrideW: stride,
			PadT: pad, PadL: pad, DilH: 1, DilW: 1, Groups: groups, X: rt.Ref{DType: rt.F32}}
	}
	for _, c := range []struct {
		name  string
		o     *rt.Conv
		small bool
		tile  string
		s, ks int
	}{
		// 512 channels x 49 columns: 4 x 2 "n" tiles, 16 slices of 288.
		{"r18l4", conv(1, 512, 7, 512, 3, 1, 1, 1), true, "n", 16, 288},
		// 256 x 196: 2 x 7 "n" tiles; 2304 deep: 16 slices of 144.
		{"r18l3", conv(1, 256, 14, 256, 3, 1, 1, 1), true, "n", 16, 144},
		// 64 x 3136 outputs: more than convSKMaxOut, cuDNN.
		{"r18l1", conv(1, 64, 56, 64, 3, 1, 1, 1), false, "", 0, 0},
		// 1x1 over 192 channels: shallower than convSKMinDepth, cuDNN.
		{"mbpw28", conv(1, 192, 28, 32, 1, 1, 0, 1), false, "", 0, 0},
		// 160 x 49 at 1x1 over 960 channels: 2 x 2 "n" tiles -> 15 slices of 64.
		{"mbpw7b", conv(1, 960, 7, 160, 1, 1, 0, 1), true, "n", 15, 64},
		// squeezenet's classifier, 1000 x 169 outputs: cuDNN.
		{"sqcls", conv(1, 512, 13, 1000, 1, 1, 0, 1), false, "", 0, 0},
		// depthwise: cuDNN.
		{"dw", conv(1, 96, 14, 96, 3, 1, 1, 96), false, "", 0, 0},
		// batch 32 fills the GPU: cuDNN.
		{"b32", conv(32, 64, 56, 64, 3, 1, 1, 1), false, "", 0, 0},
		// a single input channel counts as depthwise: cuDNN.
		{"c1", conv(1, 1, 28, 16, 3, 1, 1, 1), false, "", 0, 0},
		// shallow: cuDNN.
		{"shallow", conv(1, 2, 28, 16, 3, 1, 1, 1), false, "", 0, 0},
		// conv1 of resnet18 (147 deep): cuDNN.
		{"r18conv1", conv(1, 3, 224, 64, 7, 2, 3, 1), false, "", 0, 0},
	} {
		if got := skSmallGrid(c.o); got != c.small {
			t.Errorf("%s: skSmallGrid = %v, want %v", c.name, got, c.small)
			continue
		}
		if !c.small {
			continue
		}
		p := pickSK(c.o)
		if p.tile.name != c.tile || p.s != c.s || p.ks != c.ks {
			t.Errorf("%s: plan %s s=%d ks=%d, want %s s=%d ks=%d", c.name, p.tile.name, p.s, p.ks, c.tile, c.s, c.ks)
		}
		kd := c.o.C / c.o.Groups * c.o.KH * c.o.KW
		if p.s > 1 {
			if p.ks%convSKBK != 0 || (p.s-1)*p.ks >= kd || p.s*p.ks < kd {
				t.Errorf("%s: %d slices of %d do not cover depth %d exactly", c.name, p.s, p.ks, kd)
			}
			if want := int64(p.s) * int64(c.o.K) * rt.Extent(c.o.N, c.o.OH, c.o.OW) * 4; p.bytes != want {
				t.Errorf("%s: scratch %d bytes, want %d", c.name, p.bytes, want)
			}
		}
	}
}

// TestConvSKArgs checks that skArgs packs as many 8-byte words as
// convsk.cu's ConvSKArgs has fields, with the scratch address at
// convSKScratchAt (no GPU needed).
func TestConvSKArgs(t *testing.T) {
	src, err := os.ReadFile("kernels/convsk.cu")
	if err != nil {
		t.Skip(err)
	}
	m := regexp.MustCompile(`(?s)struct ConvSKArgs \{(.*?)\};`).FindSubmatch(src)
	if m == nil {
		t.Fatal("struct ConvSKArgs not found in convsk.cu")
	}
	var fields []string
	for _, line := range strings.Split(string(m[1]), "\n") {
		line, _, _ = strings.Cut(line, "//")
		line = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), ";"))
		if line == "" {
			continue
		}
		typ, names, ok := strings.Cut(line, " ")
		if !ok || (typ != "u64" && typ != "i64" && typ != "double") {
			t.Fatalf("unexpected ConvSKArgs line %q", line)
		}
		for _, n := range strings.Split(names, ",") {
			fields = append(fields, strings.TrimSpace(n))
		}
	}
	o := skCases[0].op()
	args := skArgs(o, skPlan{s: 3, ks: 32}, 1, 2, 3, 4, 5)
	if len(args) != 8*len(fields) {
		t.Fatalf("skArgs packs %d bytes, ConvSKArgs has %d fields %v", len(args), len(fields), fields)
	}
	if got := fields[convSKScratchAt/8]; got != "scratch" {
		t.Errorf("field at convSKScratchAt is %q, want scratch", got)
	}
	word := func(name string) uint64 {
		for i, f := range fields {
			if f == name {
				return binary.LittleEndian.Uint64(args[8*i:])
			}
		}
		t.Fatalf("no field %s", name)
		return 0
	}
	for name, want := range map[string]uint64{"res": 5, "y": 4, "splits": 3, "ks": 32, "groups": uint64(o.Groups),
		"k": uint64(o.K), "ow": uint64(o.OW), "actfn": uint64(o.Act.Fn)} {
		if got := word(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// skCase is a convCase with an optional residual.
type skCase struct {
	convCase
	res bool
}

// skCases are odd shapes for the split-K kernels: groups, strides,
// dilations, asymmetric pads, 1x1, channels not a multiple of any tile,
// with bias, residual and activations.
var skCases = []skCase{
	{convCase{name: "3x3/bias+relu+res", n: 1, c: 37, h: 13, w: 11, k: 70, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 1,
		padT: 1, padL: 1, padB: 1, padR: 1, bias: true, act: rt.Activation{Fn: rt.Relu}}, true},
	{convCase{name: "1x1/k130/res", n: 1, c: 96, h: 7, w: 7, k: 130, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1}, true},
	{convCase{name: "1x1/n2/bias", n: 2, c: 40, h: 9, w: 5, k: 24, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true}, false},
	{convCase{name: "groups3/leakyrelu+res", n: 1, c: 48, h: 10, w: 9, k: 27, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 3,
		padT: 1, padL: 1, padB: 1, padR: 1, bias: true, act: rt.Activation{Fn: rt.LeakyRelu, Alpha: 0.1}}, true},
	{convCase{name: "stride2/dil2/asym", n: 2, c: 19, h: 17, w: 14, k: 33, kh: 3, kw: 3, sh: 2, sw: 2, dh: 2, dw: 2, g: 1,
		padT: 1, padL: 2, padB: 2, padR: 1, bias: true, act: rt.Activation{Fn: rt.Sigmoid}}, false},
	{convCase{name: "7x5/stride2x1/clip+res", n: 1, c: 3, h: 23, w: 20, k: 16, kh: 7, kw: 5, sh: 2, sw: 1, dh: 1, dw: 1, g: 1,
		padT: 3, padL: 2, padB: 3, padR: 2, act: rt.Activation{Fn: rt.Clip, Alpha: -0.5, Beta: 0.5}}, true},
	{convCase{name: "depthwise/res", n: 1, c: 16, h: 9, w: 9, k: 16, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 16,
		padT: 1, padL: 1, padB: 1, padR: 1, bias: true}, true},
}

// refConvRes is refConv plus a residual added before the activation.
func refConvRes(o *rt.Conv, x, w, bias, res *rt.Tensor) (want, mag []float64) {
	act := o.Act
	o.Act = rt.Activation{}
	want, mag = refConv(o, x, w, bias)
	o.Act = act
	for i := range want {
		if res != nil {
			r := res.Float64(i)
			want[i] += r
			mag[i] += math.Abs(r)
		}
		want[i] = act.Fn.Apply(want[i], act.Alpha, act.Beta)
	}
	return want, mag
}

// runSK records o once on a new stream, submits it twice (graph capture,
// then replay; with profile, issued twice) and returns Y's bytes.
func runSK(t *testing.T, d *Device, o *rt.Conv, ny int, profile bool) []byte {
	t.Helper()
	s, err := d.NewStream(rt.StreamOptions{Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Launch(o); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 2; r++ {
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	return readBack(t, d, o.Y, ny)
}

// checkSK runs cc in dt with the path forced to tile and splits (0: the
// rule's) and compares with refConvRes. It returns Y's bytes.
func checkSK(t *testing.T, d *Device, cc skCase, dt rt.DType, tile string, splits int, profile bool) []byte {
	t.Helper()
	rng := rand.New(rand.NewSource(int64(len(cc.name)*7919 + cc.c*31 + cc.k)))
	o := cc.op()
	x := randTensor(rng, dt, o.N*o.C*o.H*o.Width)
	w := randTensor(rng, dt, o.K*(o.C/o.Groups)*o.KH*o.KW)
	_, o.X = devTensor(t, d, x)
	_, o.W = devTensor(t, d, w)
	var bias, res *rt.Tensor
	if cc.bias {
		bias = randTensor(rng, dt, o.K)
		_, o.Bias = devTensor(t, d, bias)
	}
	ny := o.N * o.K * o.OH * o.OW
	if cc.res {
		res = randTensor(rng, dt, ny)
		_, o.Res = devTensor(t, d, res)
	}
	y0, _ := rt.NewTensor(dt, ny)
	_, o.Y = devTensor(t, d, y0)
	forceSK.on, forceSK.tile, forceSK.splits = true, tile, splits
	defer func() { forceSK.on, forceSK.tile, forceSK.splits = false, "", 0 }()
	used := d.skUsed.Load()
	raw := runSK(t, d, o, len(y0.Data), profile)
	if d.skUsed.Load() == used {
		t.Fatalf("not recorded on the split-K path")
	}
	got := &rt.Tensor{DType: dt, Shape: []int{ny}, Data: raw}
	want, mag := refConvRes(o, x, w, bias, res)
	tol := convTol(dt)
	if dt == rt.F16 {
		tol = 4e-3 // f16 residual and output roundings on top of f32 sums
	}
	for i := range want {
		g := got.Float64(i)
		if e := math.Abs(g - want[i]); e > tol*(mag[i]+math.Abs(want[i]))+1e-30 || math.IsNaN(g) {
			t.Fatalf("Y[%d] = %.10g, want %.10g (|err| %.3g > %.3g)", i, g, want[i], e, tol*(mag[i]+math.Abs(want[i])))
		}
	}
	return raw
}

// TestConvSplitK checks the small-grid kernels against a float64
// reference for every case, both tiles and forced splits (1, 2, 3, 16
// and the rule's), in f32, f64 and f16, with bias, residual and
// activations; that a split result is bitwise reproducible; and the
// profiled (uncaptured) path.
func TestConvSplitK(t *testing.T) {
	d := openTest(t, true)
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for _, cc := range skCases {
			for _, tile := range []string{"n", "u"} {
				for _, s := range []int{0, 1, 2, 3, 16} {
					t.Run(fmt.Sprintf("%s/%s/%s/s%d", dt, cc.name, tile, s), func(t *testing.T) {
						checkSK(t, d, cc, dt, tile, s, false)
					})
				}
			}
		}
	}
	t.Run("deterministic", func(t *testing.T) {
		a := checkSK(t, d, skCases[0], rt.F32, "n", 5, false)
		b := checkSK(t, d, skCases[0], rt.F32, "n", 5, false)
		if !bytes.Equal(a, b) {
			t.Errorf("two split-K runs differ")
		}
	})
	t.Run("profile", func(t *testing.T) {
		checkSK(t, d, skCases[0], rt.F32, "", 4, true)
	})
}

// TestConvSplitKStream records several split Convs on one stream (one
// reading another's output; the scratch shared), replays it, Resets and
// records a Conv needing more scratch (regrown before the new capture).
func TestConvSplitKStream(t *testing.T) {
	d := openTest(t, true)
	rng := rand.New(rand.NewSource(3))
	dt := rt.F32
	rs, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	s := rs.(*Stream)
	// a: 64 -> 64 channels, 3x3 on 14x14; b: 64 -> 128, 3x3 on a's output
	// (576 deep: the small-grid rule's).
	mk := func(c, k int, xr rt.Ref, x *rt.Tensor) (*rt.Conv, *rt.Tensor) {
		o := &rt.Conv{N: 1, C: c, H: 14, Width: 14, K: k, OH: 14, OW: 14, KH: 3, KW: 3, StrideH: 1, StrideW: 1,
			PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1, Act: rt.Activation{Fn: rt.Relu}}
		w := randTensor(rng, dt, k*c*9)
		_, o.W = devTensor(t, d, w)
		o.X = xr
		y0, _ := rt.NewTensor(dt, k*14*14)
		_, o.Y = devTensor(t, d, y0)
		return o, w
	}
	x := randTensor(rng, dt, 64*14*14)
	_, xr := devTensor(t, d, x)
	a, wa := mk(64, 64, xr, x)
	b, wb := mk(64, 128, a.Y, nil)
	used := d.skUsed.Load()
	for _, o := range []*rt.Conv{a, b} {
		if err := s.Launch(o); err != nil {
			t.Fatal(err)
		}
	}
	if d.skUsed.Load()-used != 2 {
		t.Fatalf("%d of 2 Convs on the split-K path", d.skUsed.Load()-used)
	}
	for r := 0; r < 3; r++ {
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(o *rt.Conv, x, w *rt.Tensor, got []byte) {
		t.Helper()
		want, mag := refConv(o, x, w, nil)
		gt := &rt.Tensor{DType: dt, Shape: []int{len(want)}, Data: got}
		for i := range want {
			if e := math.Abs(gt.Float64(i) - want[i]); e > 2e-5*(mag[i]+math.Abs(want[i]))+1e-30 {
				t.Fatalf("Y[%d] = %g, want %g", i, gt.Float64(i), want[i])
			}
		}
	}
	ya := readBack(t, d, a.Y, 64*14*14*4)
	yat := &rt.Tensor{DType: dt, Shape: []int{64 * 14 * 14}, Data: append([]byte(nil), ya...)}
	check(a, x, wa, ya)
	check(b, yat, wb, readBack(t, d, b.Y, 128*14*14*4))
	small := s.scratchSize
	// Reset, then a Conv with a larger scratch need: 1024 -> 1024 on 7x7
	// (16 slices of 1024 x 49 floats: 3.2 MB, past the first buffer's
	// 1 MiB rounding).
	s.Reset()
	x2 := randTensor(rng, dt, 1024*7*7)
	_, x2r := devTensor(t, d, x2)
	c := &rt.Conv{N: 1, C: 1024, H: 7, Width: 7, K: 1024, OH: 7, OW: 7, KH: 3, KW: 3, StrideH: 1, StrideW: 1,
		PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1, X: x2r}
	w2 := randTensor(rng, dt, 1024*1024*9)
	_, c.W = devTensor(t, d, w2)
	y2, _ := rt.NewTensor(dt, 1024*49)
	_, c.Y = devTensor(t, d, y2)
	if err := s.Launch(c); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 2; r++ {
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if s.scratchSize <= small {
		t.Errorf("scratch %d bytes after a larger need, was %d", s.scratchSize, small)
	}
	check(c, x2, w2, readBack(t, d, c.Y, 1024*49*4))
}

// TestConvRes checks a Conv with a residual taking every route: the
// split-K path (small grid); on a large grid cuDNN's fused call with the
// bias only (then the Add and the activation), cuDNN's fused call with
// the bias and the residual (VRUN_CUDA_CUDNN_FUSE=all: then a ReLU there
// too, or another activation after it), cuDNN unfused, and the unsplit
// kernel without cuDNN; and that Supports rejects it with
// VRUN_CUDA_SPLITK=0.
func TestConvRes(t *testing.T) {
	d := openTest(t, true)
	big := skCase{convCase{name: "big/res", n: 4, c: 8, h: 64, w: 64, k: 64, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, g: 1,
		padT: 1, padL: 1, padB: 1, padR: 1, bias: true, act: rt.Activation{Fn: rt.Relu}}, true}
	if skSmallGrid(big.op()) {
		t.Fatalf("%s is a small grid", big.name)
	}
	clip := big
	clip.name, clip.kh, clip.kw, clip.padT, clip.padL, clip.padB, clip.padR = "big/1x1/res+relu6", 1, 1, 0, 0, 0, 0
	clip.act = rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}
	for _, dt := range []rt.DType{rt.F32, rt.F16} {
		for _, route := range []string{"cudnn", "cudnn-basic", "cudnn-unfused", "builtin"} {
			for _, cc := range []skCase{big, clip} {
				t.Run(dt.String()+"/"+route+"/"+cc.name, func(t *testing.T) {
					switch {
					case route == "builtin":
						t.Setenv(dnnEnv, "0")
					case !cudnnPresent(t):
						t.Skip("cuDNN not in use")
					case route == "cudnn-basic":
						t.Setenv(dnnFuseEnv, "1")
					case route == "cudnn-unfused":
						t.Setenv(dnnFuseEnv, "0")
					}
					fused := d.dnn.fused.Load()
					checkSKAuto(t, d, cc, dt)
					fused = d.dnn.fused.Load() - fused
					t.Logf("fused cuDNN calls: %d", fused)
					if route == "cudnn" && cc.act.Fn == rt.Relu && dnnCanFuse() && fused != 1 {
						t.Errorf("conv + bias + residual + ReLU not fused into the cuDNN call")
					}
					if route == "cudnn-unfused" && fused != 0 {
						t.Errorf("%s=0: fused anyway", dnnFuseEnv)
					}
				})
			}
		}
		small := skCases[0]
		small.name, small.c = "3x3/c64/bias+relu+res", 64 // 576 deep: the small-grid rule's
		if !skSmallGrid(small.op()) {
			t.Fatalf("%s is not a small grid", small.name)
		}
		t.Run(dt.String()+"/small", func(t *testing.T) { checkSKAuto(t, d, small, dt) })
	}
	o := skCases[0].op()
	o.X.DType, o.W.DType, o.Y.DType = rt.F32, rt.F32, rt.F32
	o.Res = rt.Ref{Buf: placeholderBuf{}, DType: rt.F32}
	if err := d.Supports(o); err != nil {
		t.Errorf("Supports(Conv with Res) = %v", err)
	}
	t.Setenv(splitKEnv, "0")
	var ue *rt.UnsupportedError
	if err := d.Supports(o); !errors.As(err, &ue) {
		t.Errorf("Supports(Conv with Res) with %s=0 = %v, want an *rt.UnsupportedError", splitKEnv, err)
	}
}

// placeholderBuf stands for a buffer in Supports calls.
type placeholderBuf struct{ rt.Buffer }

// checkSKAuto runs cc in dt on the route the rule picks (nothing forced)
// against refConvRes.
func checkSKAuto(t *testing.T, d *Device, cc skCase, dt rt.DType) {
	t.Helper()
	rng := rand.New(rand.NewSource(11))
	o := cc.op()
	x := randTensor(rng, dt, o.N*o.C*o.H*o.Width)
	w := randTensor(rng, dt, o.K*(o.C/o.Groups)*o.KH*o.KW)
	_, o.X = devTensor(t, d, x)
	_, o.W = devTensor(t, d, w)
	var bias, res *rt.Tensor
	if cc.bias {
		bias = randTensor(rng, dt, o.K)
		_, o.Bias = devTensor(t, d, bias)
	}
	ny := o.N * o.K * o.OH * o.OW
	if cc.res {
		res = randTensor(rng, dt, ny)
		_, o.Res = devTensor(t, d, res)
	}
	y0, _ := rt.NewTensor(dt, ny)
	_, o.Y = devTensor(t, d, y0)
	sk, dnn := d.skUsed.Load(), d.dnn.used.Load()
	raw := runSK(t, d, o, len(y0.Data), false)
	t.Logf("split-K path: %d, cuDNN: %d", d.skUsed.Load()-sk, d.dnn.used.Load()-dnn)
	got := &rt.Tensor{DType: dt, Shape: []int{ny}, Data: raw}
	want, mag := refConvRes(o, x, w, bias, res)
	tol := convTol(dt)
	if dt == rt.F16 {
		tol = 4e-3
	}
	for i := range want {
		g := got.Float64(i)
		if e := math.Abs(g - want[i]); e > tol*(mag[i]+math.Abs(want[i]))+1e-30 || math.IsNaN(g) {
			t.Fatalf("Y[%d] = %.10g, want %.10g (|err| %.3g > %.3g)", i, g, want[i], e, tol*(mag[i]+math.Abs(want[i])))
		}
	}
}

// convSweepShapes are batch-1 convolutions of resnet18/50, squeezenet1_1
// and mobilenet_v2 (rt/vulkan's BenchmarkConvSweep list).
var convSweepShapes = []struct {
	name                     string
	C, H, K, KH, stride, pad int
}{
	{"r18conv1", 3, 224, 64, 7, 2, 3},
	{"r18l1", 64, 56, 64, 3, 1, 1},
	{"r18l2a", 64, 56, 128, 3, 2, 1},
	{"r18l2", 128, 28, 128, 3, 1, 1},
	{"r18l2ds", 64, 56, 128, 1, 2, 0},
	{"r18l3a", 128, 28, 256, 3, 2, 1},
	{"r18l3", 256, 14, 256, 3, 1, 1},
	{"r18l4a", 256, 14, 512, 3, 2, 1},
	{"r18l4", 512, 7, 512, 3, 1, 1},
	{"r50l4a", 2048, 7, 512, 1, 1, 0},
	{"r50l4b", 512, 7, 2048, 1, 1, 0},
	{"r50l3a", 1024, 14, 256, 1, 1, 0},
	{"r50l3b", 256, 14, 1024, 1, 1, 0},
	{"sqexp3", 64, 13, 256, 3, 1, 1},
	{"sqexp1", 64, 13, 256, 1, 1, 0},
	{"sqsq13", 512, 13, 64, 1, 1, 0},
	{"sqcls", 512, 13, 1000, 1, 1, 0},
	{"sqexp3b", 32, 27, 128, 3, 1, 1},
	{"mbpw7a", 160, 7, 960, 1, 1, 0},
	{"mbpw7b", 960, 7, 160, 1, 1, 0},
	{"mbpw14a", 96, 14, 576, 1, 1, 0},
	{"mbpw14b", 576, 14, 96, 1, 1, 0},
	{"mbpw28", 192, 28, 32, 1, 1, 0},
}

// BenchmarkConvSweepCUDA times each convSweepShapes layer (f32, batch 1,
// bias and ReLU) through cuDNN (VRUN_CUDA_SPLITK=0), the rule's choice
// ("auto") and every tile and split. Each op is recorded 16 times into one
// stream (one CUDA graph), so the GPU stays busy as inside a model;
// us/op is the wall time of one (graph launch and sync amortized):
// go test -run XXX -bench ConvSweepCUDA -benchtime 200x ./cudashim.
func BenchmarkConvSweepCUDA(b *testing.B) {
	d := openTest(b, true)
	const reps = 16
	dt := rt.F32
	alloc := func(n int) rt.Ref {
		buf, err := d.Alloc(int64(n * dt.Size()))
		if err != nil {
			b.Fatal(err)
		}
		r := rt.Ref{Buf: buf, DType: dt, Shape: []int{n}}
		backendtest.Run(b, d, &rt.Fill{Y: r, Value: 0.01})
		return r
	}
	type cfg struct {
		name string
		tile string
		s    int
	}
	cfgs := []cfg{{"cudnn", "", -1}, {"auto", "", 0}}
	for _, t := range []string{"n", "u"} {
		for _, s := range []int{1, 2, 4, 8, 16} {
			cfgs = append(cfgs, cfg{fmt.Sprintf("%s/s%d", t, s), t, s})
		}
	}
	for _, c := range convSweepShapes {
		oh := (c.H+2*c.pad-c.KH)/c.stride + 1
		nx, nw, ny := c.C*c.H*c.H, c.K*c.C*c.KH*c.KH, c.K*oh*oh
		o := &rt.Conv{X: alloc(nx), W: alloc(nw), Bias: alloc(c.K), Y: alloc(ny),
			N: 1, C: c.C, H: c.H, Width: c.H, K: c.K, OH: oh, OW: oh, KH: c.KH, KW: c.KH, StrideH: c.stride, StrideW: c.stride,
			PadT: c.pad, PadL: c.pad, DilH: 1, DilW: 1, Groups: 1, Act: rt.Activation{Fn: rt.Relu}}
		flop := 2 * float64(ny) * float64(c.C*c.KH*c.KH)
		for _, k := range cfgs {
			b.Run(c.name+"/"+k.name, func(b *testing.B) {
				switch {
				case k.s < 0:
					b.Setenv(splitKEnv, "0")
				case k.tile != "":
					forceSK.on, forceSK.tile, forceSK.splits = true, k.tile, k.s
					defer func() { forceSK.on, forceSK.tile, forceSK.splits = false, "", 0 }()
				}
				s, err := d.NewStream(rt.StreamOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				sk := d.skUsed.Load()
				for i := 0; i < reps; i++ {
					if err := s.Launch(o); err != nil {
						b.Fatal(err)
					}
				}
				path := "cudnn/builtin"
				if d.skUsed.Load() > sk {
					p := pickSK(o)
					path = fmt.Sprintf("splitk %s s%d", p.tile.name, p.s)
				}
				for r := 0; r < 2; r++ { // capture, warm up
					if err := s.Submit(); err != nil {
						b.Fatal(err)
					}
					if err := s.Wait(); err != nil {
						b.Fatal(err)
					}
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
				b.ReportMetric(el/float64(b.N*reps)*1e6, "us/op")
				b.ReportMetric(flop*reps*float64(b.N)/el/1e12, "TFLOP/s")
				if b.N > 1 {
					b.Logf("%s", path)
				}
			})
		}
	}
}
