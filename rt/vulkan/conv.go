//go:build cgo

package vulkan

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/vrun-go/vrun/rt"
	"github.com/x448/float16"
)

// Conv runs one of three kernels (convPath), or, for a large enough 3x3
// stride-1 convolution on a GPU, Winograd F(4,3) (winoPick, wino.go):
//
//   - convgemm.comp, an implicit GEMM with matmul.comp's register-blocked
//     two-stage tiling: per group, W viewed as [K/G, C/G*KH*KW] times the
//     im2col matrix [C/G*KH*KW, N*OH*OW], whose elements the B loader
//     computes from X on the fly; bias and the activation are applied in
//     the epilogue. 1x1 convolutions with unit stride and no padding read
//     X directly (flag 2). The tile (convTiles) is picked like MatMul's by
//     pickTile over the Kg x N*OH*OW output and G groups. Where the tiles
//     give too few workgroups, the GEMM depth is split (pickConvSplit): a
//     convgemmk_* partial pass into the stream's scratch buffer, then
//     splitk.comp applies the bias, the residual (rt.Conv.Res, flag 4 of
//     convgemm.comp) and the activation.
//   - dwconv.comp for depthwise convolutions (C/G == 1), one invocation
//     per output with an unrolled 3x3.
//   - conv.comp, the direct kernel, where the GEMM tile would be mostly
//     empty: fewer than 8 output channels per group or a GEMM depth below
//     4.

// convTiles mirrors shaders/gen's convTiles: gemmTiles plus "w".
var convTiles = []gemmTile{
	{"l", 128, 128, 16, 8, 8, false, false},
	{"w", 64, 128, 16, 8, 4, false, false},
	{"m", 128, 64, 16, 8, 4, false, false},
	{"s", 64, 64, 16, 8, 4, false, false},
	{"t", 32, 32, 16, 4, 4, false, false},
	{"n", 128, 32, 16, 4, 4, false, false},
	{"u", 64, 32, 16, 4, 4, false, false},
}

// narrowConvTile reports whether t is one of the narrow tiles ("n", "u")
// that pickConvTile keeps for convolutions with too few output tiles.
func narrowConvTile(t gemmTile) bool { return t.bn == 32 && t.bm >= 64 }

// convSplitMinK and convSplitMax bound the split-K slices of a
// convolution on a narrow tile: the batch-1 sweep on an H200
// (BenchmarkConvSweep, docs/benchmarks.md) ran fastest with slices of
// 32-300, far shallower than MatMul's splitMinK, and measured up to 16
// slices. Slices of 16 (one tile depth) rather than 32 let the shallow
// 1×1 expands of squeezenet1_1 and mobilenet_v2 (GEMM depth 32-64)
// split too: on an H100, per-node GPU time of those layers 2-3 µs
// lower, the ResNets level; whole models (VRUN_VK_CONVSPLIT A/B, five
// alternating rounds of 1000 runs) squeezenet1_1 0.283-0.292 → 0.271-0.282
// ms, mobilenet_v2 0.468-0.484 → 0.467-0.472 (one round 0.504).
const (
	convSplitMinK = 16
	convSplitMax  = 16
)

// forceConvPath, when set (tests), selects "gemm", "dw" or "direct"
// wherever that kernel can run the op, "wino" (winoPick) for every
// convolution on the implicit-GEMM path that Winograd F(4,3) can run, or
// "coop" (convcm.comp, coopConv) for every f16-weight convolution on
// that path where the device has cooperative matrices.
var forceConvPath string

// convPath picks the kernel for a convolution with cg input and kg output
// channels per group and kernel area khw.
func convPath(cg, kg, khw int) string {
	dw := cg == 1
	switch forceConvPath {
	case "gemm", "direct":
		return forceConvPath
	case "dw":
		if dw {
			return "dw"
		}
	}
	switch {
	case dw:
		return "dw"
	case kg < 8 || cg*khw < 4:
		return "direct"
	}
	return "gemm"
}

// pickConvTile chooses the convgemm.comp tile. On a GPU it is the largest
// of "l", "w", "m", "s" not more than twice the output in either dimension
// that still yields gemmTarget workgroups; a convolution with fewer output
// tiles than that (batch 1 from 56x56 down) runs on a narrow tile, "n"
// (128 x 32) for at least 128 output channels per group and "u" (64 x 32)
// below, and splits K (pickConvSplit). On an H200 this halved the batch-1
// layers of resnet18/50, squeezenet and mobilenet_v2 against the former
// fallback to "t" with MatMul's split rule (BenchmarkConvSweep). The
// pointwise half of a SepConv (sep) takes "n" from 33 output channels:
// its B loader computes the depthwise outputs anew for each row of tiles,
// so one 128-row tile beats two of 64 (BenchmarkSepConvSweep on an H100,
// mobilenet_v2's 384→64 on 14×14 12.1 against 13.8 µs, 192→64 stride 2
// 10.4 against 11.4, 576→96 14.0 against 16.6). A CPU device (lavapipe)
// keeps pickTile's rule over every tile.
//
// A GEMM depth kd of at most convShallowK (the 1x1 expansions of resnet50
// and mobilenet_v2) skips "l": with 64 accumulators an invocation it runs
// fewer workgroups at once, and the few K slices leave their latency
// exposed. BenchmarkConvSweep at batch 32 on an H100 (GPU µs for 16 ops,
// "l" → "w", the next in line; "m" 2-3 % faster still): resnet50's 64→256
// on 56×56 4301 → 3306 (3237), 128→512 on 28×28 3110 → 2573 (2493),
// 256→1024 on 14×14 2413 → 2208 (2143).
func pickConvTile(dt rt.DType, kg, cols, kd, groups int, sharedLim, maxInv uint32, sep, cpu bool) (gemmTile, bool) {
	if cpu || forceGemmTile != "" {
		return pickFrom(convTiles, dt, kg, cols, groups, sharedLim, maxInv, cpu)
	}
	for _, t := range convTiles {
		if narrowConvTile(t) || t.name == "t" || !t.fits(dt, sharedLim, maxInv) || t.bm >= 2*kg || t.bn >= 2*cols {
			continue
		}
		if t.name == "l" && kd <= convShallowK && !convLargeEnv() {
			continue
		}
		if t.grid(kg, cols, groups) >= gemmTarget(false) {
			return t, true
		}
	}
	want := "u"
	if kg >= 128 || (sep && kg > 32 && !sepPickOff()) {
		want = "n"
	}
	if t, ok := tileNamed(convTiles, want); ok && t.fits(dt, sharedLim, maxInv) {
		return t, true
	}
	return pickFrom(convTiles, dt, kg, cols, groups, sharedLim, maxInv, cpu)
}

// convShallowK is the deepest GEMM depth for which pickConvTile skips
// "l".
const convShallowK = 256

// convLargeEnv reports whether VRUN_VK_CONVL=1 lets shallow convolutions
// take "l" again (to measure pickConvTile's rule); read once.
var convLargeEnv = sync.OnceValue(func() bool { return strings.TrimSpace(os.Getenv("VRUN_VK_CONVL")) == "1" })

// pickConvSplit is pickSplitK for a convolution: on a narrow tile the K
// slices may be as shallow as convSplitMinK, in at most convSplitMax
// slices.
//
// The pointwise half of a SepConv (sep) on a narrow tile, when it splits
// at all (fewer than gemmTarget workgroups), splits deeper: toward twice
// as many workgroups, in slices as shallow as one tile depth (sepSplit).
// BenchmarkSepConvSweep on an H100, µs per op, mobilenet_v2's pairs: 96→24
// stride 2 on 112×112 22.7 → 15.4, 144→24 on 56×56 17.7 → 15.2, 144→32
// stride 2 15.3 → 11.2, 192→32 on 28×28 13.4 → 12.1.
func (l *lowering) pickConvSplit(t gemmTile, dt rt.DType, kg, cols, kd, groups int, sep bool) splitPlan {
	if sep && narrowConvTile(t) && !sepPickOff() {
		if forceSplitK == 0 && t.grid(kg, cols, groups) >= gemmTarget(false) {
			return splitPlan{s: 1, ks: kd}
		}
		return l.pickSplitK(t, dt, kg, cols, kd, groups, splitRule{2 * gemmTarget(false), t.bk, convSplitMax})
	}
	return l.pickSplitK(t, dt, kg, cols, kd, groups, convSplit(t))
}

// sepPickOff reports whether VRUN_VK_SEPPICK=0 gives a SepConv's
// pointwise half the tile and split of any other convolution (to measure
// what pickConvTile's and pickConvSplit's SepConv rules gain).
func sepPickOff() bool { return strings.TrimSpace(os.Getenv("VRUN_VK_SEPPICK")) == "0" }

// convSplit is the split-K rule of a convolution on tile t.
func convSplit(t gemmTile) splitRule {
	if !narrowConvTile(t) {
		return wideSplit
	}
	if r, ok := convSplitEnv(); ok {
		return r
	}
	return splitRule{gemmTarget(false), convSplitMinK, convSplitMax}
}

// convSplitEnv is the narrow tiles' split rule given by
// VRUN_VK_CONVSPLIT as "TARGET/MINK" (workgroups aimed at, shallowest
// slice; at most convSplitMax slices), to time rules against each other
// in one binary; read once.
var convSplitEnv = sync.OnceValues(func() (splitRule, bool) { return parseSplitRule(os.Getenv("VRUN_VK_CONVSPLIT")) })

// parseSplitRule reads a split rule given as "TARGET/MINK" (workgroups
// aimed at, shallowest slice; at most convSplitMax slices).
func parseSplitRule(v string) (splitRule, bool) {
	a, b, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok {
		return splitRule{}, false
	}
	target, err1 := strconv.Atoi(a)
	minK, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || target < 1 || minK < 1 {
		return splitRule{}, false
	}
	return splitRule{int64(target), minK, convSplitMax}, true
}

func (l *lowering) Conv(o *rt.Conv) {
	dt := o.X.DType
	kdt, half, ok := l.weightKernel(dt, o)
	if !ok {
		return
	}
	if l.d.halfConvSlower(o) {
		l.err = l.unsupported(rt.F16, "f16 weights: this Conv runs faster with f32 weights on this device (its cooperative-matrix kernel takes only the deeper convolutions)")
		return
	}
	cg, kg := o.C/o.Groups, o.K/o.Groups
	nw := int64(o.K) * int64(cg) * int64(o.KH) * int64(o.KW)
	shader := "conv_" + kdt
	path := convPath(cg, kg, o.KH*o.KW)
	if path != "dw" && !l.d.coopConv(o) {
		wino, tile := winoPick(o, dt, l.d.phys.info.Kind == rt.KindCPU), ""
		if winoApplies(o, dt) {
			if p, ok := l.tunedPick(convKey(kdt, o), l.convCands(o, dt)); ok {
				wino, tile = p.Path == "wino", p.Tile
			}
		}
		if wino && l.winoConv(o, dt, kdt, tile) {
			return
		}
	}
	if o.Res.Buf != nil && path != "gemm" {
		// Only convgemm.comp (and splitk.comp) add a residual; the engine
		// then keeps the Add.
		l.err = l.unsupported(dt, "Conv with a residual (Res) on the %s kernel", path)
		return
	}
	if !o.DenseY() && path != "gemm" {
		// Only convgemm.comp, splitk.comp and winoy write images apart;
		// the engine then keeps the Concat's copy.
		l.err = l.unsupported(dt, "Conv with its images StrideY apart on the %s kernel", path)
		return
	}
	switch path {
	case "dw":
		shader = "dwconv_" + kdt
	case "gemm":
		l.convGEMM(o, nil, dt, kdt, half, nw)
		return
	}
	l.convCommon(shader, dt, half, o.X, o.W, o.Bias, o.Y, o.N, o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW,
		o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, nw, &o.Act)
}

// convKey names a convolution's shape in the tuner's cache (tune.go).
func convKey(kdt string, o *rt.Conv) string {
	return fmt.Sprintf("conv %s n%d c%d h%d w%d k%d r%dx%d s%dx%d p%dx%d d%dx%d g%d", kdt, o.N, o.C, o.H, o.Width,
		o.K, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups)
}

// convCands returns the tuner's candidates for convolution o: the tiled
// GEMM's tiles and splits where o takes convgemm.comp, and where the
// Winograd kernels apply, those with winoTile's tile and with each other
// tile for their 36 GEMMs (unsplit; gemmCandidates' tiles).
func (l *lowering) convCands(o *rt.Conv, dt rt.DType) func() []gemmPick {
	return func() []gemmPick {
		cg, kg := o.C/o.Groups, o.K/o.Groups
		var out []gemmPick
		if convPath(cg, kg, o.KH*o.KW) == "gemm" {
			out = l.gemmCands(convTiles, dt, kg, o.N*o.OH*o.OW, cg*o.KH*o.KW, o.Groups)()
		}
		if winoApplies(o, dt) {
			out = append(out, gemmPick{Path: "wino"})
			_, _, T := winoTiles(o)
			for _, p := range l.gemmCands(gemmTiles, dt, o.K, int((T+3)/4*4), o.C, 36)() {
				if p.Split == 1 {
					out = append(out, gemmPick{Path: "wino", Tile: p.Tile})
				}
			}
		}
		return out
	}
}

// sepConvEnv turns rt.SepConv off when "0" (the engine then keeps the two
// convolutions), to compare.
const sepConvEnv = "VRUN_VK_SEPCONV"

// SepConv lowers a depthwise-separable pair to convgemm.comp's SEPDW
// variants: the pointwise GEMM, whose B loader computes the depthwise
// outputs (f32 and f16, one dtype throughout, a 3x3 undilated depthwise
// kernel).
func (l *lowering) SepConv(o *rt.SepConv) {
	dt := o.DW.X.DType
	if dt != rt.F32 && dt != rt.F16 {
		l.err = l.unsupported(dt, "SepConv runs in f32 and f16")
		return
	}
	if os.Getenv(sepConvEnv) == "0" {
		l.err = l.unsupported(dt, "SepConv turned off by %s=0", sepConvEnv)
		return
	}
	d := &o.DW
	if d.DilH != 1 || d.DilW != 1 || d.KH != 3 || d.KW != 3 {
		l.err = l.unsupported(dt, "SepConv with a %dx%d depthwise kernel of dilation %dx%d (3x3, undilated only)", d.KH, d.KW, d.DilH, d.DilW)
		return
	}
	if d.Act.Fn != rt.Copy && (!halfExact(d.Act.Alpha) || !halfExact(d.Act.Beta)) {
		l.err = l.unsupported(dt, "SepConv: depthwise activation parameters %v, %v are not exact in f16", d.Act.Alpha, d.Act.Beta)
		return
	}
	l.convGEMM(&o.PW, d, dt, dt.String(), false, int64(o.PW.K)*int64(o.PW.C))
}

// halfExact reports whether v survives a round trip through f16 (the
// SepConv shader reads the depthwise activation's parameters as halves).
func halfExact(v float64) bool {
	return float64(float16.Fromfloat32(float32(v)).Float32()) == v
}

// convGEMM lowers o to convgemm.comp (push constants in the shader's
// order). With dw set, o is the pointwise half of a SepConv whose X is
// dw's input, computed through dw on the fly (the SEPDW variants: dw's
// geometry in place of o's unit kernel, stride, padding and dilation).
func (l *lowering) convGEMM(o, dw *rt.Conv, dt rt.DType, kdt string, half bool, nw int64) {
	for _, p := range []struct {
		n string
		r rt.Ref
	}{{"W", o.W}, {"Y", o.Y}, {"Bias", o.Bias}, {"Res", o.Res}} {
		if p.r.Buf != nil && p.r.DType != dt && !(half && p.n == "W") {
			l.err = fmt.Errorf("Conv: %s is %s, want %s", p.n, p.r.DType, dt)
			return
		}
	}
	if o.Act.Fn >= rt.UnaryFn(rt.NumUnaryFns) {
		l.err = l.unsupported(dt, "unknown activation %d", o.Act.Fn)
		return
	}
	geo := o // the convolution whose input, kernel, stride and padding the B loader walks
	if dw != nil {
		geo = dw
	}
	if geo.PadT < 0 || geo.PadL < 0 {
		l.err = fmt.Errorf("Conv: negative padding")
		return
	}
	ohw := int64(o.OH) * int64(o.OW)
	cols := int64(o.N) * ohw
	ny := cols * int64(o.K)
	nx := int64(geo.N) * int64(geo.C) * int64(geo.H) * int64(geo.Width)
	if ny == 0 {
		return
	}
	sy := int64(o.ImageStrideY())
	ey := (int64(o.N)-1)*sy + int64(o.K)*ohw // Y's and Res's extent
	if !fits32(ey) || !fits32(nx) || !fits32(nw) {
		l.err = fmt.Errorf("Conv: operands exceed 2^32 elements")
		return
	}
	cg, kg := o.C/o.Groups, o.K/o.Groups
	kd := cg * o.KH * o.KW
	// The tuner (tune.go) times plain convolutions, not SepConv's.
	var t gemmTile
	var sk splitPlan
	coop := dw == nil && half && l.coopConvPlan(o)
	tuned := false
	if coop {
		t, tuned = coopConvTile, true
		sk = l.pickSplitK(t, dt, kg, int(cols), kd, o.Groups, coopConvSplitRule())
	} else if dw == nil {
		t, sk, _, tuned = l.tunedGEMM(convKey(kdt, o), l.convCands(o, dt), convTiles, dt, kg, int(cols), kd, o.Groups)
	}
	if !tuned {
		lim := l.d.phys.limits
		var ok bool
		t, ok = pickConvTile(dt, kg, int(cols), kd, o.Groups, lim.MaxComputeSharedMemorySize, lim.MaxComputeWorkGroupInvocations, dw != nil, l.d.phys.info.Kind == rt.KindCPU)
		if !ok {
			l.err = l.unsupported(dt, "no convolution GEMM tile fits maxComputeSharedMemorySize %d", lim.MaxComputeSharedMemorySize)
			return
		}
		sk = l.pickConvSplit(t, dt, kg, int(cols), kd, o.Groups, dw != nil)
	}
	gx, gy := (cols+int64(t.bn)-1)/int64(t.bn), (int64(kg)+int64(t.bm)-1)/int64(t.bm)
	if gx > int64(l.d.maxGroups[0]) || gy > int64(l.d.maxGroups[1]) {
		l.err = fmt.Errorf("Conv: %dx%d GEMM output needs more workgroups than the device allows", kg, cols)
		return
	}
	flags := uint32(0)
	b, nb := o.Bias, int64(o.K)
	if o.Bias.Buf != nil {
		flags |= 1
	} else {
		b, nb = o.Y, 1
	}
	if dw == nil && o.KH == 1 && o.KW == 1 && o.StrideH == 1 && o.StrideW == 1 && o.PadT == 0 && o.PadL == 0 && o.OH == o.H && o.OW == o.Width {
		flags |= 2
	}
	res := o.Y // bound, never read, without Res
	if o.Res.Buf != nil {
		flags |= 4
		res = o.Res
	}
	names := []string{"X", "W", "Bias", "Y", "Res"}
	refs := []rt.Ref{geo.X, o.W, b, o.Y, res}
	elems := []int64{max(nx, 1), max(nw, 1), nb, ey, ey}
	sep := ""
	if dw != nil {
		// bindings 5 and 6: the depthwise weight and bias
		db, ndb := dw.Bias, int64(dw.K)
		if dw.Bias.Buf != nil {
			flags |= 8
		} else {
			db, ndb = dw.W, 1
		}
		names = append(names, "DW.W", "DW.Bias")
		refs = append(refs, dw.W, db)
		elems = append(elems, int64(dw.K)*int64(dw.KH)*int64(dw.KW), ndb)
		sep = "sep"
	}
	binds, offs, reads, writes, ok := l.bindsOf(names, refs, elems, 3)
	if !ok {
		return
	}
	// reads: X, W, Bias, Res, DW.W, DW.Bias; the absent ones are not
	// read. The split-K partial pass reads the inputs of the GEMM (in),
	// its reduction the bias and the residual (epi).
	in := []span{reads[0], reads[1]}
	var epi []span
	if o.Bias.Buf != nil {
		epi = append(epi, reads[2])
	}
	if o.Res.Buf != nil {
		epi = append(epi, reads[3])
	}
	if dw != nil {
		in = append(in, reads[4])
		if dw.Bias.Buf != nil {
			in = append(in, reads[5])
		}
	}
	shader, kshader := "convgemm"+sep+"_"+kdt+"_"+t.name, "convgemmk"+sep+"_"+kdt+"_"+t.name
	if coop {
		shader, kshader = l.d.phys.coopConvVariant(false), l.d.phys.coopConvVariant(true)
		if kd%8 == 0 && offs[1]%8 == 0 && sk.ks%8 == 0 {
			flags |= 16 // convcm.comp: W's rows in 16-byte chunks
		}
		if flags&2 != 0 && offs[0]%4 == 0 && (o.H*o.Width)%4 == 0 {
			flags |= 32 // convcm.comp: X's channel planes 16-byte aligned
		}
	}
	aa, ab := realBits(dt, o.Act.Alpha), realBits(dt, o.Act.Beta)
	push := []uint32{uint32(cols), uint32(geo.C), uint32(geo.H), uint32(geo.Width),
		uint32(o.K), uint32(kg), uint32(cg), uint32(kd),
		uint32(ohw), uint32(o.OW), uint32(geo.KH), uint32(geo.KW),
		uint32(geo.StrideH), uint32(geo.StrideW), uint32(geo.PadT), uint32(geo.PadL),
		uint32(o.DilH), uint32(o.DilW), uint32(o.Groups), flags,
		offs[0], offs[1], offs[2], offs[3],
		uint32(o.Act.Fn), offs[4], aa[0], aa[1], ab[0], ab[1]}
	if dw != nil {
		// the SEPDW aliases: Cg = offDW, dh = offDB, dw = dwAct, G = dwActAB
		push[6], push[16], push[17] = offs[5], offs[6], uint32(dw.Act.Fn)
		push[18] = uint32(float16.Fromfloat32(float32(dw.Act.Alpha)).Bits()) | uint32(float16.Fromfloat32(float32(dw.Act.Beta)).Bits())<<16
	}
	if sk.s > 1 {
		// partial pass: X, W -> scratch; reduction: scratch, Bias -> Y
		pp := append(push[:len(push):len(push)], uint32(sk.s), uint32(sk.ks))
		sb, ss := sk.scratch()
		pbinds := []bind{binds[0], binds[1], binds[2], sb}
		if dw != nil {
			pbinds = append(pbinds, binds[4:]...)
		}
		l.add(dispatch{shader: kshader, spec: []uint32{uint32(t.threads())},
			binds: pbinds, reads: in, writes: []span{ss}, push: pp,
			groups: [3]uint32{uint32(gx), uint32(gy), uint32(min(int64(o.Groups)*int64(sk.s), int64(l.d.maxGroups[2])))}, scratch: sk.bytes})
		rreads := append([]span{ss}, epi...)
		one := realBits(dt, 1)
		rflags := flags & 1
		if o.Res.Buf != nil {
			rflags |= 2
		}
		rp := []uint32{uint32(kg), uint32(cols), uint32(sk.s), uint32(o.Groups),
			uint32(ohw), uint32(sy), uint32(ohw), uint32(int64(kg) * ohw),
			offs[3], offs[2], uint32(kg), rflags, 1, 0, uint32(o.Act.Fn), offs[4],
			one[0], one[1], one[0], one[1], aa[0], aa[1], ab[0], ab[1]}
		l.add(dispatch{shader: "splitk_" + dt.String(), spec: []uint32{wgSize}, binds: []bind{sb, binds[2], binds[3], binds[4]},
			reads: rreads, writes: writes, push: rp, groups: groups1D(l.d, ny, wgSize), scratch: sk.bytes})
		return
	}
	gz := uint32(min(int64(o.Groups), int64(l.d.maxGroups[2])))
	l.add(dispatch{shader: shader, spec: []uint32{uint32(t.threads())},
		binds: binds, reads: append(in, epi...), writes: writes, push: append(push, uint32(sy)), groups: [3]uint32{uint32(gx), uint32(gy), gz}})
}

func (l *lowering) ConvTranspose(o *rt.ConvTranspose) {
	dt := o.X.DType
	if !l.floatOnly(dt) {
		return
	}
	l.convCommon("convt_"+dt.String(), dt, false, o.X, o.W, o.Bias, o.Y, o.N, o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW,
		o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, int64(o.C)*int64(o.K/o.Groups)*int64(o.KH)*int64(o.KW), nil)
}

// convCommon lowers the direct kernels (conv, dwconv, convt); half says
// that W is f16 while the other operands are dt (the *_f32w16 variants).
func (l *lowering) convCommon(shader string, dt rt.DType, half bool, x, w, bias, y rt.Ref, N, C, H, W, K, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw, groups int, nw int64, act *rt.Activation) {
	for _, p := range []struct {
		n string
		r rt.Ref
	}{{"W", w}, {"Y", y}, {"Bias", bias}} {
		if p.r.Buf != nil && p.r.DType != dt && !(half && p.n == "W") {
			l.err = fmt.Errorf("%s: %s is %s, want %s", l.op.OpName(), p.n, p.r.DType, dt)
			return
		}
	}
	ny := int64(N) * int64(K) * int64(OH) * int64(OW)
	nx := int64(N) * int64(C) * int64(H) * int64(W)
	if ny == 0 {
		return
	}
	if !fits32(ny) || !fits32(nx) || !fits32(nw) {
		l.err = fmt.Errorf("%s: operands exceed 2^32 elements", l.op.OpName())
		return
	}
	if pt < 0 || pl < 0 {
		l.err = fmt.Errorf("%s: negative padding", l.op.OpName())
		return
	}
	flags := uint32(0)
	b := bias
	nb := int64(K)
	if bias.Buf != nil {
		flags = 1
	} else {
		b, nb = y, 1
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "W", "Bias", "Y"}, []rt.Ref{x, w, b, y}, []int64{max(nx, 1), max(nw, 1), nb, ny}, 3)
	if !ok {
		return
	}
	if bias.Buf == nil {
		reads = reads[:2]
	}
	push := []uint32{uint32(N), uint32(C), uint32(H), uint32(W), uint32(K), uint32(OH), uint32(OW), uint32(KH),
		uint32(KW), uint32(sh), uint32(sw), uint32(pt), uint32(pl), uint32(dh), uint32(dw), uint32(groups),
		offs[0], offs[1], offs[2], offs[3], flags}
	if act != nil {
		if act.Fn >= rt.UnaryFn(rt.NumUnaryFns) {
			l.err = l.unsupported(dt, "unknown activation %d", act.Fn)
			return
		}
		aa, ab := realBits(dt, act.Alpha), realBits(dt, act.Beta)
		push = append(push, uint32(act.Fn), 0, 0, aa[0], aa[1], ab[0], ab[1])
	}
	l.add(dispatch{shader: shader, spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes, push: push, groups: groups1D(l.d, ny, wgSize)})
}
