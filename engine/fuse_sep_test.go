package engine_test

import (
	"context"
	"math"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// TestFuseSepConv checks the depthwise-separable fold (a depthwise Conv
// and the 1×1 Conv that alone reads its result become one rt.SepConv):
// where it happens (the SepConv and Conv counts) and that fused and
// NoFusion runs agree within 1e-5 relative to max(|y|, 1) in f32. The
// graphs are MobileNet blocks with BatchNormalization and ReLU6 on odd
// sizes (13 channels on 11×9). Only Vulkan runs SepConv; on the other
// backends the counts show the two Convs kept.
func TestFuseSepConv(t *testing.T) {
	forEachBackend(t, testFuseSepConv)
}

func testFuseSepConv(t *testing.T, spec string) {
	const c, e, h, w = 9, 13, 11, 9
	runs := spec == "vulkan:0"
	cases := []struct {
		name     string
		stride   int64
		dil      int64
		pwKernel int64 // the second Conv's kernel: 1 makes it pointwise
		residual bool
		dwOutput bool // the depthwise result is also a graph output
		dwShared bool // the depthwise result is also read by another node
		fuses    bool
	}{
		{"mbv2_residual", 1, 1, 1, true, false, false, true},
		{"mbv2_stride2", 2, 1, 1, false, false, false, true},
		{"dw_output", 1, 1, 1, false, true, false, false},
		{"dw_shared", 1, 1, 1, false, false, true, false},
		{"dilated", 1, 2, 1, false, false, false, false},
		{"not_pointwise", 1, 1, 3, false, false, false, false},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			b := model.NewBuilder()
			x := b.Input("x", rt.F32, 1, c, h, w)
			wt := func(name string, shape ...int64) string { return b.Weight(name, rt.F32, shape, randT(shape).Data) }
			bn := func(name, in string, ch int64) string {
				v := make([]float32, ch)
				for i := range v {
					v[i] = 0.5 + 0.13*float32(i)
				}
				return b.Op("BatchNormalization", []string{in, wt(name+"s", ch), wt(name+"b", ch), wt(name+"m", ch),
					b.Weight(name+"v", rt.F32, []int64{ch}, v)}, nil)
			}
			lo, hi := b.Weight("lo", rt.F32, nil, []float32{0}), b.Weight("hi", rt.F32, nil, []float32{6})
			clip := func(in string) string { return b.Op("Clip", []string{in, lo, hi}, nil) }
			h1 := clip(bn("bn1", b.Op("Conv", []string{x, wt("w1", e, c, 1, 1)}, nil), e))
			pad := cs.dil
			h2 := clip(bn("bn2", b.Op("Conv", []string{h1, wt("w2", e, 1, 3, 3)}, model.Attrs{"group": int64(e),
				"pads": []int64{pad, pad, pad, pad}, "strides": []int64{cs.stride, cs.stride}, "dilations": []int64{cs.dil, cs.dil}}), e))
			pp := (cs.pwKernel - 1) / 2
			y := bn("bn3", b.Op("Conv", []string{h2, wt("w3", c, e, cs.pwKernel, cs.pwKernel), wt("b3", c)},
				model.Attrs{"pads": []int64{pp, pp, pp, pp}}), c)
			if cs.residual {
				y = b.Op("Add", []string{y, x}, nil)
			}
			b.Output(y)
			if cs.dwOutput {
				b.Output(h2)
			}
			if cs.dwShared {
				b.Output(b.Op("Sigmoid", []string{h2}, nil))
			}
			mdl, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			feeds := map[string]*rt.Tensor{"x": randT([]int64{1, c, h, w})}
			var got [2][]float64
			dev := dpDevices(t, spec)[0]
			for i, noFusion := range []bool{false, true} {
				s, err := engine.New(mdl, dev, engine.Options{NoFusion: noFusion})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				counts := s.Info().OpCounts
				seps := 0
				if cs.fuses && runs && !noFusion {
					seps = 1
				}
				if counts["SepConv"] != seps || counts["Conv"] != 3-2*seps {
					t.Fatalf("NoFusion %v: %d SepConv and %d Conv, want %d and %d (ops %v)", noFusion, counts["SepConv"], counts["Conv"], seps, 3-2*seps, counts)
				}
				out, err := s.Run(context.Background(), feeds)
				if err != nil {
					t.Fatal(err)
				}
				got[i] = out[y].Float64s()
			}
			for j := range got[0] {
				if math.Abs(got[0][j]-got[1][j]) > 1e-5*math.Max(math.Abs(got[1][j]), 1) {
					t.Fatalf("y[%d]: fused %v, unfused %v", j, got[0][j], got[1][j])
				}
			}
		})
	}
}
