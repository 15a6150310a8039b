package engine_test

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// TestFuseResidual checks the residual fold (an Add of a Conv's result
// and a tensor computed before the Conv becomes the Conv's Res): on which
// graphs it happens (the number of Binary Adds left), and that fused and
// NoFusion runs agree within 1e-5 relative to max(|y|, 1) in f32. The
// graphs are MobileNetV2's and ResNet's blocks: 1×1 expand, depthwise 3×3
// and 1×1 project with BatchNormalization, then Add and (ResNet) a ReLU
// after it; odd sizes (9 channels on 9×7, 13 expanded). It runs on the
// CPU and on each GPU backend present; all of them fold.
func TestFuseResidual(t *testing.T) {
	forEachBackend(t, testFuseResidual)
}

func testFuseResidual(t *testing.T, spec string) {
	const c, e, h, w = 9, 13, 9, 7 // 9 output channels: the GEMM conv on Vulkan (8 or more)
	// Every backend folds: CUDA's through its small-grid convolution path
	// (unless VRUN_CUDA_SPLITK=0).
	folds := spec != "cuda:0" || os.Getenv("VRUN_CUDA_SPLITK") != "0"
	cases := []struct {
		name     string
		left     bool   // Add(residual, conv) rather than Add(conv, residual)
		after    string // "relu": a Relu after the Add; "bn": a BatchNormalization
		late     bool   // the residual is computed after the Conv: no fold
		output   bool   // the Conv's result is also a graph output: no fold
		wantAdds int
	}{
		{"mbv2", false, "", false, false, 0},
		{"mbv2_left", true, "", false, false, 0},
		{"resnet_relu", false, "relu", false, false, 0},
		{"bn_after", false, "bn", false, false, 0},
		{"late_residual", false, "", true, false, 1},
		{"conv_output", false, "", false, true, 1},
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
			h2 := clip(bn("bn2", b.Op("Conv", []string{h1, wt("w2", e, 1, 3, 3)}, model.Attrs{"group": int64(e), "pads": []int64{1, 1, 1, 1}}), e))
			h3 := bn("bn3", b.Op("Conv", []string{h2, wt("w3", c, e, 1, 1), wt("b3", c)}, nil), c)
			res := x
			if cs.late {
				res = b.Op("Relu", []string{x}, nil)
			}
			in := []string{h3, res}
			if cs.left {
				in = []string{res, h3}
			}
			y := b.Op("Add", in, nil)
			switch cs.after {
			case "relu":
				y = b.Op("Relu", []string{y}, nil)
			case "bn":
				y = bn("bn4", y, c)
			}
			b.Output(y)
			if cs.output {
				b.Output(h3)
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
				adds := s.Info().OpCounts["Binary.Add"]
				want := map[bool]int{false: cs.wantAdds, true: 1}[noFusion]
				if !folds {
					want = 1
				}
				if cs.after == "bn" {
					want++ // the BatchNormalization's own Mul and Add
				}
				if adds != want {
					t.Fatalf("NoFusion %v: %d Adds, want %d (ops %v)", noFusion, adds, want, s.Info().OpCounts)
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
