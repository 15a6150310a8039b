package engine_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// conv3dRef is a naive float64 3-D convolution (ONNX Conv, group 1,
// dilation 1) of x [N, C, D, H, W] with w [K, C, KD, KH, KW].
func conv3dRef(x, w []float64, xs, ws, st, pads []int) ([]float64, []int) {
	n, c, d, h, wd := xs[0], xs[1], xs[2], xs[3], xs[4]
	k, kd, kh, kw := ws[0], ws[2], ws[3], ws[4]
	out := []int{n, k, 0, 0, 0}
	for i, sz := range []int{d, h, wd} {
		out[2+i] = (sz+pads[i]+pads[3+i]-ws[2+i])/st[i] + 1
	}
	od, oh, ow := out[2], out[3], out[4]
	y := make([]float64, n*k*od*oh*ow)
	for b := 0; b < n; b++ {
		for m := 0; m < k; m++ {
			for z := 0; z < od; z++ {
				for i := 0; i < oh; i++ {
					for j := 0; j < ow; j++ {
						s := 0.0
						for ci := 0; ci < c; ci++ {
							for a := 0; a < kd; a++ {
								for p := 0; p < kh; p++ {
									for q := 0; q < kw; q++ {
										zz, ii, jj := z*st[0]-pads[0]+a, i*st[1]-pads[1]+p, j*st[2]-pads[2]+q
										if zz < 0 || zz >= d || ii < 0 || ii >= h || jj < 0 || jj >= wd {
											continue
										}
										s += x[(((b*c+ci)*d+zz)*h+ii)*wd+jj] * w[(((m*c+ci)*kd+a)*kh+p)*kw+q]
									}
								}
							}
						}
						y[(((b*k+m)*od+z)*oh+i)*ow+j] = s
					}
				}
			}
		}
	}
	return y, out
}

// A 3-D Conv followed by BatchNormalization and Relu: the BatchNorm folds
// into the weights of the 2-D Conv the 3-D Conv lowers to, and the Relu
// becomes its epilogue (no elementwise ops remain), with the right values.
func TestConv3DBatchNormReluFuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	xs, ws := []int{2, 2, 3, 4, 5}, []int{3, 2, 2, 3, 3}
	st, pads := []int{1, 2, 1}, []int{1, 1, 0, 1, 0, 1}
	xt, wt := randTensor(rng, xs...), randTensor(rng, ws...)
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, int64(xs[0]), int64(xs[1]), int64(xs[2]), int64(xs[3]), int64(xs[4]))
	w := b.Weight("w", rt.F32, []int64{3, 2, 2, 3, 3}, wt.Data)
	h := b.Op("Conv", []string{x, w}, model.Attrs{"strides": []int64{1, 2, 1}, "pads": []int64{1, 1, 0, 1, 0, 1}})
	scale, bias, mean, vr := []float32{0.5, -2, 1.5}, []float32{0.25, 1, -0.5}, []float32{0.1, -0.2, 0.3}, []float32{1, 0.5, 2}
	vec := func(name string, v []float32) string { return b.Weight(name, rt.F32, []int64{3}, v) }
	h = b.Op("BatchNormalization", []string{h, vec("s", scale), vec("b", bias), vec("m", mean), vec("v", vr)},
		model.Attrs{"epsilon": 0.0})
	h = b.Op("Relu", []string{h}, nil)
	b.Output(h)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, m, engine.Options{})
	info := s.Info()
	for name, n := range info.OpCounts {
		if name != "Conv" && name != "Unary.Copy" && name != "Fill" {
			t.Errorf("%d %s ops: want only the depth gather (Fill, Unary.Copy), one Conv and the transposing copy; ops %v", n, name, info.OpCounts)
		}
	}
	if info.OpCounts["Conv"] != 1 {
		t.Errorf("%d Conv ops, want 1", info.OpCounts["Conv"])
	}
	out, err := s.Run(context.Background(), map[string]*rt.Tensor{x: xt})
	if err != nil {
		t.Fatal(err)
	}
	want, shape := conv3dRef(xt.Float64s(), wt.Float64s(), xs, ws, st, pads)
	per := len(want) / (shape[0] * shape[1])
	for i := range want {
		ch := (i / per) % shape[1]
		v := (want[i]-float64(mean[ch]))/math.Sqrt(float64(vr[ch]))*float64(scale[ch]) + float64(bias[ch])
		want[i] = math.Max(v, 0)
	}
	got := out[h]
	if !slices.Equal(got.Shape, shape) {
		t.Fatalf("output shape %v, want %v", got.Shape, shape)
	}
	for i, g := range got.Float64s() {
		if math.Abs(g-want[i]) > 1e-5+1e-4*math.Abs(want[i]) {
			t.Fatalf("element %d = %v, want %v", i, g, want[i])
		}
	}
}
