//go:build cgo

package cudashim

import (
	"fmt"
	"math"
	"os"

	"github.com/vrun-go/vrun/rt"
)

// The small-grid convolution path (kernels/convsk.cu), ported from the
// Vulkan backend's batch-1 rule (rt/vulkan/conv.go: pickConvTile,
// convSplit). A Conv whose output, cut into 64x64 tiles (output channels
// per group x N*OH*OW), gives fewer than convSKTarget blocks leaves most
// of the GPU idle in cuDNN's kernels (batch 1 from 28x28 down). It runs
// instead as an implicit GEMM on a narrow tile, "n" (128 x 32) for at
// least 128 output channels per group and "u" (64 x 32) below, with the
// GEMM depth C/G*KH*KW split into up to convSKMaxSplits slices of at
// least convSKMinK (split-K) until the blocks reach convSKTarget. The
// slices write partial sums to the stream's scratch buffer, sized when
// the op is recorded and allocated by Stream.prepare before any graph
// capture; a reduction kernel adds them in slice order (deterministic),
// then the bias, the residual and the activation. Depthwise convolutions
// and those with fewer than 8 output channels per group or a GEMM depth
// below 4 stay on cuDNN.
//
// This path also computes rt.Conv.Res (the residual the engine folds into
// a Conv): a Conv with Res and a grid that fills the GPU runs through
// cuDNN (bias and residual in the fused call where it takes them, see
// cudnn.go), or, without cuDNN, on this path's kernel without a split.
//
// VRUN_CUDA_SPLITK=0 turns the path off: every Conv goes to cuDNN (or the
// built-in 64x64 kernel) as before, and a Conv with Res is unsupported
// (the engine keeps the Add). The variable is read when a Conv is
// recorded (and by Supports).

// splitKEnv is the environment variable that, set to 0, turns the
// small-grid convolution path off.
const splitKEnv = "VRUN_CUDA_SPLITK"

// useSplitK reports whether the small-grid path is on (unless
// VRUN_CUDA_SPLITK=0).
func useSplitK() bool { return os.Getenv(splitKEnv) != "0" }

const (
	// convSKTarget is the block count that fills the GPU (about two
	// 256-thread blocks per SM of an H200's 132; Vulkan's gemmTarget).
	convSKTarget = 256
	// convSKMinK and convSKMaxSplits bound the split-K slices: at least
	// convSKMinK deep, at most convSKMaxSplits of them (Vulkan's
	// convSplitMinK and convSplitMax).
	convSKMinK      = 32
	convSKMaxSplits = 16
	// convSKBK is the depth of one tile step (SKBK in convsk.cu); slices
	// are multiples of it.
	convSKBK = 16
	// convSKScratchAt is the byte offset of ConvSKArgs.scratch.
	convSKScratchAt = 5 * 8
)

// skTile is a convsk.cu tile: bm output channels x bn output columns.
type skTile struct {
	name   string
	bm, bn int
}

var (
	skTileN = skTile{"n", 128, 32}
	skTileU = skTile{"u", 64, 32}
)

// forceSK, when on (tests and benchmarks), sends every Conv to this path,
// on the named tile ("" keeps the rule's) and with splits slices (0 keeps
// the rule's; fewer where the depth has fewer tile steps).
var forceSK struct {
	on     bool
	tile   string
	splits int
}

// skPlan is a Conv's tile and split: s slices of ks (the GEMM depth when
// s is 1), needing bytes of scratch.
type skPlan struct {
	tile  skTile
	s, ks int
	bytes int64
}

// convSKMinDepth and convSKMaxOut bound the convolutions the small-grid
// path takes from cuDNN: a GEMM depth of at least convSKMinDepth and at
// most convSKMaxOut outputs per group. In the batch-1 sweep on an H200
// (BenchmarkConvSweepCUDA, docs/benchmarks.md) the path won on every
// layer with depth >= 512 and <= 100K outputs (resnet18's 3x3 layers
// from 28x28 down: 2.0-2.8x; resnet50's 1x1 layers of depth 1024-2048:
// 1.8-2.7x; mobilenet_v2's projections from 576-960 channels: 1.7-1.9x)
// and lost where the depth is shallow (1x1 convolutions from 64-256
// channels, squeezenet's 3x3 from 32: cuDNN 1.1-1.9x faster) or the
// output large (resnet18's first layer, 56x56x64: cuDNN 1.9x; squeezenet's
// 1000-class 1x1: 1.3x).
const (
	convSKMinDepth = 512
	convSKMaxOut   = 1 << 17
)

// skSmallGrid reports whether o's output tiles are too few to fill the
// GPU, o is GEMM-shaped (not depthwise, at least 8 output channels per
// group, a GEMM depth of at least 4) and deep and small enough that the
// path beats cuDNN: the small-grid path's rule.
func skSmallGrid(o *rt.Conv) bool {
	cg, kg := o.C/o.Groups, o.K/o.Groups
	if cg == 1 || kg < 8 || cg*o.KH*o.KW < convSKMinDepth {
		return false
	}
	cols := int(rt.Extent(o.N, o.OH, o.OW))
	if int64(kg)*int64(cols) > convSKMaxOut {
		return false
	}
	return int64(tiles(kg, 64))*int64(tiles(cols, 64))*int64(o.Groups) < convSKTarget
}

// pickSK chooses o's tile and split.
func pickSK(o *rt.Conv) skPlan {
	cg, kg := o.C/o.Groups, o.K/o.Groups
	cols := rt.Extent(o.N, o.OH, o.OW)
	kd := cg * o.KH * o.KW
	t := skTileU
	if kg >= 128 {
		t = skTileN
	}
	switch forceSK.tile {
	case "n":
		t = skTileN
	case "u":
		t = skTileU
	}
	one := skPlan{tile: t, s: 1, ks: kd}
	if kd <= convSKBK {
		return one
	}
	grid := int64(tiles(kg, t.bm)) * int64(tiles(int(cols), t.bn)) * int64(o.Groups)
	s := 1
	switch {
	case forceSK.splits > 0:
		s = forceSK.splits
	case grid < convSKTarget:
		s = int(min((convSKTarget+grid-1)/grid, int64(kd/convSKMinK), convSKMaxSplits))
	}
	es := int64(4)
	if o.X.DType == rt.F64 {
		es = 8
	}
	for ; s > 1; s-- {
		ks := (kd + s - 1) / s
		ks = (ks + convSKBK - 1) / convSKBK * convSKBK
		n := (kd + ks - 1) / ks
		if n <= 1 {
			break
		}
		elems := int64(n) * int64(o.K) * cols
		if elems > math.MaxInt32 || int64(o.Groups)*int64(n) > 65535 {
			continue
		}
		return skPlan{tile: t, s: n, ks: ks, bytes: elems * es}
	}
	return one
}

// skKernel is the convsk.cu kernel of dtype dt on tile t.
func skKernel(dt rt.DType, t skTile) int {
	if t.name == "n" {
		return byFloat(dt, kConvSKHN, kConvSKFN, kConvSKDN)
	}
	return byFloat(dt, kConvSKHU, kConvSKFU, kConvSKDU)
}

// convResSupported is Supports for a Conv with a residual: the reference
// rules for the Conv without it, the residual of Y's dtype, and the
// small-grid path on.
func convResSupported(o *rt.Conv) error {
	dt := o.X.DType
	if !useSplitK() {
		return unsupported(o, dt, "Conv with a residual (Res): turned off by "+splitKEnv+"=0")
	}
	c := *o
	c.Res = rt.Ref{}
	if err := rt.ReferenceSupport(BackendName, &c); err != nil {
		return err
	}
	if o.Res.DType != o.Y.DType {
		return unsupported(o, dt, fmt.Sprintf("Conv residual (Res) of dtype %s with Y %s", o.Res.DType, o.Y.DType))
	}
	return nil
}

// convSK records o on the small-grid path with plan pl: one convsk launch
// (epilogue included) without a split, else the partial pass and the
// reduction, both bound to the stream's scratch buffer.
func (l *lowering) convSK(o *rt.Conv, pl skPlan) {
	dt := o.X.DType
	kg := o.K / o.Groups
	cols := int(rt.Extent(o.N, o.OH, o.OW))
	gz := int64(o.Groups) * int64(pl.s)
	gy := int64(tiles(kg, pl.tile.bm))
	if gz > 65535 || gy > 65535 {
		l.err = unsupported(o, dt, fmt.Sprintf("%d groups x %d slices, %d channel tiles: grid too large", o.Groups, pl.s, gy))
		return
	}
	args := skArgs(o, pl, l.ptr(o.X), l.ptr(o.W), l.ptr(o.Bias), l.ptr(o.Y), l.ptr(o.Res))
	grid := [3]uint32{tiles(cols, pl.tile.bn), uint32(gy), uint32(gz)}
	k := skKernel(dt, pl.tile)
	l.d.skUsed.Add(1)
	if pl.s == 1 {
		l.kernel(k, grid, args)
		return
	}
	l.out = append(l.out, launch{kernel: k, grid: grid, args: args, scratchAt: convSKScratchAt, scratch: pl.bytes})
	rargs := append([]byte(nil), args...)
	l.out = append(l.out, launch{kernel: byFloat(dt, kConvSKRH, kConvSKRF, kConvSKRD),
		grid: [3]uint32{grid1(rt.Extent(o.N, o.K, o.OH, o.OW)), 1, 1}, args: rargs,
		scratchAt: convSKScratchAt, scratch: pl.bytes})
}

// skArgs packs convsk.cu's ConvSKArgs for o with plan pl and the
// operands' device addresses (0 for absent ones); the scratch address,
// at convSKScratchAt, is left 0 for Stream.prepare.
func skArgs(o *rt.Conv, pl skPlan, x, w, bias, y, res uint64) []byte {
	return (&argw{}).u(x).u(w).u(bias).u(y).u(res).u(0).
		ints(o.N, o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL,
			o.DilH, o.DilW, o.Groups, int(o.Act.Fn), pl.s, pl.ks).f(o.Act.Alpha).f(o.Act.Beta).b
}
