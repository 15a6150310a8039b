//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// convSweepShapes are batch-1 convolutions of resnet18/50, squeezenet1_1
// and mobilenet_v2 that run on convgemm.comp.
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
	{"r50l1a", 64, 56, 256, 1, 1, 0},
	{"r50l1b", 256, 56, 64, 1, 1, 0},
	{"r50l2a", 128, 28, 512, 1, 1, 0},
	{"r50l2b", 512, 28, 128, 1, 1, 0},
	{"r50l4a", 2048, 7, 512, 1, 1, 0},
	{"r50l4b", 512, 7, 2048, 1, 1, 0},
	{"r50l3a", 1024, 14, 256, 1, 1, 0},
	{"r50l3b", 256, 14, 1024, 1, 1, 0},
	{"sqconv1", 3, 224, 64, 3, 2, 0},
	{"sqexp3a", 16, 55, 64, 3, 1, 1},
	{"sqexp1a", 16, 55, 64, 1, 1, 0},
	{"sqsq55", 128, 55, 16, 1, 1, 0},
	{"sqsq27", 256, 27, 32, 1, 1, 0},
	{"sqexp1b", 32, 27, 128, 1, 1, 0},
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
	{"mbex112", 16, 112, 96, 1, 1, 0},
	{"mbex56", 24, 56, 144, 1, 1, 0},
	{"mbex28", 32, 28, 192, 1, 1, 0},
	{"mbex14", 64, 14, 384, 1, 1, 0},
}

// BenchmarkConvSweep times each convSweepShapes layer (f32, bias and
// ReLU; batch 1, or VRUN_SWEEP_BATCH) for every convgemm tile, narrow
// alternatives included, and K split, against the default choice
// ("auto"). Each op is recorded 16 times into one stream so that the GPU
// stays busy as it does inside a model; gpu-us/op is the GPU time of one:
// go test -run XXX -bench ConvSweep ./rt/vulkan.
func BenchmarkConvSweep(b *testing.B) {
	d := testDevice(b)
	if isCPU(d) {
		b.Skip("a GPU sweep")
	}
	n := 1
	if v, err := strconv.Atoi(os.Getenv("VRUN_SWEEP_BATCH")); err == nil && v > 0 {
		n = v
	}
	defer func() { forceGemmTile, forceSplitK = "", 0 }()
	for _, c := range convSweepShapes {
		oh := (c.H+2*c.pad-c.KH)/c.stride + 1
		nx, nw, ny := n*c.C*c.H*c.H, c.K*c.C*c.KH*c.KH, n*c.K*oh*oh
		vals := func(k int) []float64 {
			v := make([]float64, k)
			for i := range v {
				v[i] = math.Sin(float64(i))
			}
			return v
		}
		dt := rt.F32
		op := &rt.Conv{X: newBuf(b, d, dt, nx, vals(nx)).ref([]int{nx}, nil), W: newBuf(b, d, dt, nw, vals(nw)).ref([]int{nw}, nil),
			Bias: newBuf(b, d, dt, c.K, vals(c.K)).ref([]int{c.K}, nil), Y: newBuf(b, d, dt, ny, nil).ref([]int{ny}, nil),
			N: n, C: c.C, H: c.H, Width: c.H, K: c.K, OH: oh, OW: oh, KH: c.KH, KW: c.KH, StrideH: c.stride, StrideW: c.stride,
			PadT: c.pad, PadL: c.pad, DilH: 1, DilW: 1, Groups: 1, Act: rt.Activation{Fn: rt.Relu}}
		flop := 2 * float64(ny) * float64(c.C*c.KH*c.KH)
		sweepTiles(b, d, c.name, flop, op)
	}
}

// sepSweepShapes are mobilenet_v2's depthwise-separable pairs at batch 1
// (a 3×3 depthwise convolution of C channels on an H×H plane with stride
// s, then the 1×1 projection to K channels), which run as rt.SepConv.
var sepSweepShapes = []struct {
	name       string
	C, H, K, s int
}{
	{"mb1", 32, 112, 16, 1},
	{"mb2", 96, 112, 24, 2},
	{"mb3", 144, 56, 24, 1},
	{"mb4", 144, 56, 32, 2},
	{"mb5", 192, 28, 32, 1},
	{"mb7", 192, 28, 64, 2},
	{"mb8", 384, 14, 64, 1},
	{"mb11", 384, 14, 96, 1},
	{"mb12", 576, 14, 96, 1},
	{"mb14", 576, 14, 160, 2},
	{"mb15", 960, 7, 160, 1},
	{"mb17", 960, 7, 320, 1},
}

// BenchmarkSepConvSweep is BenchmarkConvSweep for sepSweepShapes (f32,
// ReLU6 after the depthwise convolution, biases, no activation after
// the projection), every convgemm tile and K split against the default
// choice ("auto").
func BenchmarkSepConvSweep(b *testing.B) {
	d := testDevice(b)
	if isCPU(d) {
		b.Skip("a GPU sweep")
	}
	defer func() { forceGemmTile, forceSplitK = "", 0 }()
	r := rand.New(rand.NewSource(1))
	for _, c := range sepSweepShapes {
		sc := sepCase{1, c.C, c.H, c.H, c.K, 3, 3, c.s, 1, true, true, false, rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}, rt.Activation{}}
		op, sd := newSepConv(b, d, r, rt.F32, sc)
		flop := 2 * float64(sd.oh*sd.ow) * float64(c.C) * float64(9+c.K)
		sweepTiles(b, d, c.name, flop, op)
	}
}

// sweepTiles runs op (of flop operations) as sub-benchmarks of name: the
// default choice ("auto"), then every convgemm tile with K split 1, 2,
// 4, 8 and 16 ways. Each records op 16 times into one stream, so that
// the GPU stays busy as it does inside a model.
func sweepTiles(b *testing.B, d rt.Device, name string, flop float64, op rt.Op) {
	const reps = 16
	ops := make([]rt.Op, reps)
	for i := range ops {
		ops[i] = op
	}
	type cfg struct {
		tile string
		s    int
	}
	cfgs := []cfg{{"", 0}}
	for _, t := range convTiles {
		for _, s := range []int{1, 2, 4, 8, 16} {
			cfgs = append(cfgs, cfg{t.name, s})
		}
	}
	for _, k := range cfgs {
		sub := name + "/auto"
		if k.tile != "" {
			sub = fmt.Sprintf("%s/%s/s%d", name, k.tile, k.s)
		}
		b.Run(sub, func(b *testing.B) {
			forceGemmTile, forceSplitK = k.tile, k.s
			benchOps(b, d, flop*reps, ops...)
		})
	}
}
