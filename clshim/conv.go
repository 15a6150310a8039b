//go:build cgo

package clshim

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

func (d *device) lowerConvT(o *rt.ConvTranspose) (*launchSpec, error) {
	total := int64(o.N) * int64(o.K) * int64(o.OH) * int64(o.OW)
	if total == 0 {
		return &launchSpec{}, nil
	}
	dt := o.X.DType
	a, err := d.kernel(o, "conv.cl", typeDefs(dt), "convt")
	if err != nil {
		return nil, err
	}
	a.i64(total)
	a.ref(d, o.X, o.W, o.Bias, o.Y)
	for _, v := range []int{o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, b01(o.Bias.Buf != nil)} {
		a.i32(v)
	}
	return d.finish1D(a, total, d.cfg.ewLocal)
}

func (d *device) lowerConv(o *rt.Conv) (*launchSpec, error) {
	total := int64(o.N) * int64(o.K) * int64(o.OH) * int64(o.OW)
	if total == 0 {
		return &launchSpec{}, nil
	}
	dt := o.X.DType
	kg := o.K / o.Groups
	direct := kg < 8
	var a *args
	var err error
	P := o.OH * o.OW
	R := o.C / o.Groups * o.KH * o.KW
	sh, S := d.pickConv(dt, kg, P, o.N*o.Groups, R)
	if direct {
		a, err = d.kernel(o, "conv.cl", typeDefs(dt)+halfWeightDefs(o), "conv_direct")
	} else {
		a, err = d.kernel(o, "gemm.cl", d.gemmDefs(sh, dt, o.Act.Fn)+halfWeightDefs(o), "conv_gemm")
	}
	if err != nil {
		return nil, err
	}
	a.ref(d, o.X, o.W, o.Bias, o.Y)
	for _, v := range []int{o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, b01(o.Bias.Buf != nil), int(o.Act.Fn)} {
		a.i32(v)
	}
	a.acc(dt, o.Act.Alpha)
	a.acc(dt, o.Act.Beta)
	a.ref(d, o.Res)
	a.i32(b01(o.Res.Buf != nil))
	// SY: the elements between the images of Y and Res (rt.Conv.StrideY).
	a.i64(int64(o.ImageStrideY()))
	if direct {
		lx := 1
		for lx < o.OW && lx < 32 {
			lx *= 2
		}
		ly := max(1, min(d.cfg.ewLocal/lx, 8))
		gws := [3]int{roundUp(int64(o.OW), lx), roundUp(int64(o.OH), ly), o.N * o.K}
		return d.finishND(a, gws, [3]int{lx, ly, 1})
	}
	tiles := sh.groups(kg, P, o.N*o.Groups)
	rn, rm := sh.local()
	gws := [3]int{(P + sh.tn - 1) / sh.tn * rn, (kg + sh.tm - 1) / sh.tm * rm, o.N * o.Groups * S}
	return d.finishSplit(a, dt, S, tiles, sh.tm*sh.tn, gws, [3]int{rn, rm, 1})
}

// finishSplit completes a split-K kernel (conv_gemm, gemv): it passes S
// and the partials and counters (part, pao, cnt, cno) to a, and launches
// it over gws in work-groups of lws. With S > 1 these are buffers for
// tiles output tiles of per partial sums in each of S splits, and a
// zeroed counter per tile (the kernel leaves it zero again), owned by
// the launch; else none. It releases a's kernel when it fails.
func (d *device) finishSplit(a *args, dt rt.DType, S, tiles, per int, gws, lws [3]int) (*launchSpec, error) {
	a.i32(S)
	if S <= 1 {
		a.mem(nil)
		a.i64(0)
		a.mem(nil)
		a.i64(0)
		return d.finishND(a, gws, lws)
	}
	accSize := int64(4)
	if dt == rt.F64 {
		accSize = 8
	}
	part, err := d.Alloc(int64(tiles) * int64(S) * int64(per) * accSize)
	if err != nil {
		releaseKernel(a.k)
		return nil, fmt.Errorf("opencl: %s: split-K partials: %w", a.op.OpName(), err)
	}
	cnt, err := d.Alloc(int64(4 * tiles))
	if err == nil {
		err = d.Write(cnt, 0, make([]byte, 4*tiles))
	}
	if err != nil {
		part.Free()
		if cnt != nil {
			cnt.Free()
		}
		releaseKernel(a.k)
		return nil, fmt.Errorf("opencl: %s: split-K counters: %w", a.op.OpName(), err)
	}
	scratch := []rt.Buffer{part, cnt}
	for _, b := range scratch {
		m, _ := d.memOf(b)
		a.mem(m)
		a.i64(0)
	}
	l, err := d.finishND(a, gws, lws)
	if err != nil {
		for _, b := range scratch {
			b.Free()
		}
		return nil, err
	}
	l.scratch = scratch
	return l, nil
}

// Conv tile rule (pickConv). The narrow tiles and the shallow split-K
// are rt/vulkan's pickConvTile and convSplit, which halved the batch-1
// layers of resnet18/50, squeezenet and mobilenet_v2 on an H200 there
// (BenchmarkConvSweep, docs/benchmarks.md).
var (
	// convNarrow are the narrow tiles (128 x 32 for at least 128 output
	// channels per group, else 64 x 32; 4 x 4 outputs per work-item) of
	// a convolution whose wide tiles give too few work-groups.
	convNarrow = [2]gemmShape{{128, 32, 16, 4, 4}, {64, 32, 16, 4, 4}}
)

const (
	// convSplitMinK and convSplitMax bound the split-K slices of a
	// convolution on a narrow tile: slices of at least 32 of the GEMM
	// depth (two TK steps), at most 16 of them.
	convSplitMinK = 32
	convSplitMax  = 16
	// convGroupsPerCU is the work-groups per compute unit a GPU
	// convolution aims at (rt/vulkan's 256 on the H200's 132 SMs).
	convGroupsPerCU = 2
)

// ConvRuleEnv names the environment variable that selects the GPU
// convolutions' tile rule: "wide" is the former rule (pickGEMM's tiles,
// split-K only with slices of at least 8 TK steps), for measuring one
// against the other; anything else, or unset, is pickConv's.
const ConvRuleEnv = "VRUN_CL_CONV"

// pickConv chooses the gemm.cl tile and the split-K factor S of an
// implicit-GEMM Conv with kg output channels per group, p output pixels,
// batch images x groups and GEMM depth r. On a GPU with the large tile
// (tuning tm 128) it is the largest wide tile (128 x 128, 64 x 64) not
// more than twice the output in either dimension that gives at least
// convGroupsPerCU work-groups per compute unit, unsplit; failing that (batch
// 1 from 56 x 56 down) a narrow tile (convNarrow) with the GEMM depth
// split into S slices, enough to reach that count of work-groups, each at
// least convSplitMinK deep, at most convSplitMax. CPU devices, small-tile
// devices and ConvRuleEnv=wide keep the former rule (pickGEMM,
// convSplits).
func (d *device) pickConv(dt rt.DType, kg, p, batch, r int) (gemmShape, int) {
	if d.gemmForce != nil || d.ent.caps.cpu || d.cfg.tm < 128 || d.convRule == "wide" {
		sh := d.pickGEMM(dt, kg, p, batch)
		return sh, d.convSplits(sh.groups(kg, p, batch), r, sh.tk)
	}
	target := convGroupsPerCU * max(1, d.ent.caps.computeUnits)
	for _, sh := range d.gemmShapes(dt) {
		if sh.tm < 64 || sh.tm >= 2*kg || sh.tn >= 2*p {
			continue
		}
		if sh.groups(kg, p, batch) >= target {
			return sh, 1
		}
	}
	sh := convNarrow[1]
	if kg >= 128 {
		sh = convNarrow[0]
	}
	if d.splitForce > 0 {
		return sh, evenSplits(d.splitForce, r, sh.tk)
	}
	tiles := sh.groups(kg, p, batch)
	s := 1
	if tiles < target {
		s = max(1, min((target+tiles-1)/tiles, r/convSplitMinK, convSplitMax))
	}
	return sh, evenSplits(s, r, sh.tk)
}

// evenSplits is the number of non-empty slices when a GEMM depth r is cut
// into s slices of whole tk steps, as conv_gemm cuts it: ceil(steps/s)
// steps each.
func evenSplits(s, r, tk int) int {
	steps := (r + tk - 1) / tk
	if s <= 1 || steps <= 1 {
		return 1
	}
	per := (steps + s - 1) / s
	return (steps + per - 1) / per
}

// convSplits is the split-K factor of an implicit-GEMM Conv of tiles
// output tiles and reduction depth r: enough splits to give every
// compute unit a work-group, each split at least 8 steps of tk deep, at
// most 16.
func (d *device) convSplits(tiles, r, tk int) int {
	if d.splitForce > 0 {
		return evenSplits(d.splitForce, r, tk)
	}
	cus := d.ent.caps.computeUnits
	if d.ent.caps.cpu || tiles >= cus {
		return 1
	}
	return evenSplits(max(1, min((cus+tiles-1)/tiles, r/(8*tk), 16)), r, tk)
}
