//go:build cgo

package vulkan

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/vrun-go/vrun/rt"
)

// Winograd F(4x4, 3x3) convolution (shaders/wino.comp): a 3x3 f32
// convolution with unit stride and dilation and one group runs as four
// dispatches through the stream's scratch buffer,
//
//  1. winow: U[xi] = G w G^T, the 36 transformed kernels [36][K][C];
//  2. winox: V[xi] = B^T d B, the transformed 6x6 input patches of the
//     4x4 output tiles, [36][C][TP] (TP: the tiles, padded to 4);
//  3. matmul.comp: M[xi] = U[xi] V[xi], 36 GEMMs K x TP x C in one batch;
//  4. winoy: Y = A^T M A per tile, with the bias, the residual (rt.Conv's
//     Res) and the activation.
//
// The GEMMs do 36 multiply-adds per tile and channel pair where the
// implicit GEMM does 16*9 = 144, at the price of the transforms' memory
// traffic (V and M are 2.25 times X and Y) and of a weight transform on
// every run (the stream has no place that outlives a run). That pays where
// the GEMMs are large, at larger batches, not at batch 1 (winoPick). On
// an H100 at batch 32, resnet18 went from 7.53 to 4.04 ms with every 3x3
// stride-1 layer on this path, resnet50 from 17.4 to 14.1 ms (vrun
// -bench 50 -resident, VRUN_VK_WINO=0 against 1).

// winoMinMACsDefault is the least number of multiply-adds of the direct
// convolution (N*OH*OW*K*C*9) from which a GPU device takes the Winograd
// path. BenchmarkConvWino on an H100 (2026-12-06, GPU µs for eight ops,
// implicit GEMM → Winograd): resnet18's four 3x3 stride-1 shapes at batch
// 1 (2^26.8 multiply-adds) 170-238 → 230-578, the first a tie; at batch
// 8 (2^29.8) 838-1081 → 489-596; at batch 32 3068-3880 → 1224-1621;
// squeezenet1_1's 64→256 on 13×13 at batch 8 (2^27.6) 243 → 265, at
// batch 32 1049 → 731.
const winoMinMACsDefault = 1 << 28

// winoMinMACs is VRUN_VK_WINO as an integer, the least number of
// multiply-adds from which a convolution takes the Winograd path ("0":
// never), else winoMinMACsDefault; read once.
var winoMinMACs = sync.OnceValue(func() int64 {
	v := strings.TrimSpace(os.Getenv("VRUN_VK_WINO"))
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		if n == 0 {
			return -1
		}
		return n
	}
	return winoMinMACsDefault
})

// winoMinC is the least number of input and output channels of a
// Winograd convolution by default: with 16 (squeezenet1_1's 16→64 on
// 55×55) the GEMMs are too shallow for the transforms to pay
// (BenchmarkConvWino on an H100, GPU µs at batch 8 329 → 342, at batch 32
// 1056 → 1102).
const winoMinC = 32

// winoApplies reports whether o's shape is one wino.comp computes: an f32
// (or f32 with f16 weights) 3x3 convolution with unit stride and dilation
// and one group.
func winoApplies(o *rt.Conv, dt rt.DType) bool {
	return dt == rt.F32 && o.KH == 3 && o.KW == 3 && o.StrideH == 1 && o.StrideW == 1 &&
		o.DilH == 1 && o.DilW == 1 && o.Groups == 1 && o.PadT >= 0 && o.PadL >= 0
}

// winoTiles returns the 4x4 output tiles per column and row and in all.
func winoTiles(o *rt.Conv) (th, tw int, t int64) {
	th, tw = (o.OH+3)/4, (o.OW+3)/4
	return th, tw, int64(o.N) * int64(th) * int64(tw)
}

// winoPick reports whether Conv o, on the implicit-GEMM path, takes the
// Winograd path: where it applies, when forced by tests (forceConvPath
// "wino"), or on a GPU (not cpu) for at least winoMinMACs multiply-adds
// with at least winoMinC channels in and out. A CPU device (lavapipe)
// keeps the implicit GEMM unless forced.
func winoPick(o *rt.Conv, dt rt.DType, cpu bool) bool {
	if !winoApplies(o, dt) {
		return false
	}
	switch forceConvPath {
	case "wino":
		return true
	case "gemm", "direct", "dw":
		return false
	}
	macs := int64(o.N) * int64(o.OH) * int64(o.OW) * int64(o.K) * int64(o.C) * 9
	min := winoMinMACs()
	return !cpu && min > 0 && macs >= min && o.C >= winoMinC && o.K >= winoMinC
}

// winoTileOrder and winoTarget are winoTile's rule.
var (
	winoTileOrder = []string{"m", "w", "s"}
	winoTarget    = int64(192)
)

// winoTile picks the matmul.comp tile of the 36 Winograd GEMMs (m x n x
// k, m output channels, n tiles): the first of "m" (128x64), "w"
// (64x128), "s" (64x64) that is less than twice the output in each
// dimension and gives at least winoTarget workgroups, else pickTile's
// choice. These GEMMs are shallow (k = C) and batched: more workgroups
// beat larger tiles. BenchmarkConvWino on an H100 (2026-12-06), GPU µs
// for eight of resnet18's 3x3 layers, pickTile's tile → this rule's (the
// fastest forced tile): at batch 32, 64 channels on 56×56 1621 → "w" 1621
// (1621), 128 on 28×28 1350 → "m" 1160 (1160), 256 on 14×14 1276 → "m"
// 1125 (1114), 512 on 7×7 1224 → "m" 1231 (1174); at batch 8, 64 on 56×56
// "w" 509 (509), 128 on 28×28 489 → "m" 383 (383), 256 on 14×14 519 →
// "s" 475 (475), 512 on 7×7 pickTile's "u" 596 (596).
func winoTile(dt rt.DType, m, n, k int, sharedLim, maxInv uint32, cpu bool) (gemmTile, bool) {
	if !cpu && forceGemmTile == "" {
		for _, name := range winoTileOrder {
			t, ok := tileNamed(gemmTiles, name)
			if ok && t.fits(dt, sharedLim, maxInv) && t.bm < 2*m && t.bn < 2*n && t.grid(m, n, 36) >= winoTarget {
				return t, true
			}
		}
	}
	t, _, ok := pickTile(dt, m, n, k, 36, sharedLim, maxInv, cpu)
	return t, ok
}

// winoMaxScratch bounds the scratch (U, V and M) of one Winograd
// convolution; the stream keeps two slots of the largest, so a larger
// one (batch 256 of a 56×56 layer) takes the implicit GEMM, which needs
// none.
var winoMaxScratch int64 = 1 << 30 // a var for tests

// winoConv lowers o (winoPick) to the four Winograd dispatches; kdt is the
// kernel variant of W ("f32", or "f32w16" for f16 weights), tile the
// tuner's tile for the GEMMs ("": winoTile's, as for one that does not
// fit the device). It reports
// false, having added nothing, where the scratch would exceed
// winoMaxScratch, a region the device's binding range, or an operand 2^32
// elements (the caller then takes the implicit GEMM).
func (l *lowering) winoConv(o *rt.Conv, dt rt.DType, kdt, tile string) bool {
	th, tw, T := winoTiles(o)
	tp := (T + 3) / 4 * 4
	C, K := int64(o.C), int64(o.K)
	nu, nv, nm := 36*K*C, 36*C*tp, 36*K*tp
	if !fits32(nu) || !fits32(nv) || !fits32(nm) || !fits32((int64(o.N)-1)*int64(o.ImageStrideY())+K*int64(o.OH)*int64(o.OW)) ||
		!fits32(int64(o.N)*C*int64(o.H)*int64(o.Width)) {
		return false
	}
	align := max(l.d.minAlign, 256)
	up := func(n int64) int64 { return (n + align - 1) / align * align }
	ub, vb, mb := 4*nu, 4*nv, 4*nm
	if max(ub, vb, mb) > l.d.maxRange {
		return false
	}
	vo, mo := up(ub), up(ub)+up(vb)
	total := mo + mb
	if total > winoMaxScratch {
		return false
	}
	lim := l.d.phys.limits
	t, ok := winoTile(dt, o.K, int(tp), o.C, lim.MaxComputeSharedMemorySize, lim.MaxComputeWorkGroupInvocations, l.d.phys.info.Kind == rt.KindCPU)
	if tt, found := tileNamed(gemmTiles, tile); found && tt.fits(dt, lim.MaxComputeSharedMemorySize, lim.MaxComputeWorkGroupInvocations) {
		t, ok = tt, true
	}
	if !ok {
		return false
	}
	gx, gy := (tp+int64(t.bn)-1)/int64(t.bn), (K+int64(t.bm)-1)/int64(t.bm)
	if gx > int64(l.d.maxGroups[0]) || gy > int64(l.d.maxGroups[1]) {
		return false
	}

	flags := uint32(0)
	b, nb := o.Bias, K
	if o.Bias.Buf != nil {
		flags |= 1
	} else {
		b, nb = o.Y, 1
	}
	res := o.Y // bound, never read, without Res
	if o.Res.Buf != nil {
		flags |= 4
		res = o.Res
	}
	sy := int64(o.ImageStrideY())
	ny := (int64(o.N)-1)*sy + K*int64(o.OH)*int64(o.OW) // Y's and Res's extent
	nx := int64(o.N) * C * int64(o.H) * int64(o.Width)
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "W", "Bias", "Y", "Res"},
		[]rt.Ref{o.X, o.W, b, o.Y, res}, []int64{max(nx, 1), K * C * 9, nb, ny, ny}, 3)
	if !ok {
		return true // l.err is set
	}
	uB, uS := bind{b: scratchBuf, off: 0, rng: ub}, span{scratchBuf, 0, ub}
	vB, vS := bind{b: scratchBuf, off: vo, rng: vb}, span{scratchBuf, vo, vo + vb}
	mB, mS := bind{b: scratchBuf, off: mo, rng: mb}, span{scratchBuf, mo, mo + mb}
	aa, ab := realBits(dt, o.Act.Alpha), realBits(dt, o.Act.Beta)
	push := []uint32{uint32(C), uint32(K), uint32(o.H), uint32(o.Width),
		uint32(o.OH), uint32(o.OW), uint32(th), uint32(tw),
		uint32(T), uint32(tp), uint32(o.PadT), uint32(o.PadL),
		offs[0], offs[1], offs[2], offs[3],
		flags, uint32(o.Act.Fn), offs[4], uint32(sy), aa[0], aa[1], ab[0], ab[1]}
	spec := []uint32{wgSize}
	l.add(dispatch{shader: "winow_" + kdt, spec: spec, binds: []bind{binds[1], uB}, reads: []span{reads[1]}, writes: []span{uS},
		push: push, groups: groups1D(l.d, K*C, wgSize), scratch: total})
	l.add(dispatch{shader: "winox_" + dt.String(), spec: spec, binds: []bind{binds[0], vB}, reads: []span{reads[0]}, writes: []span{vS},
		push: push, groups: groups1D(l.d, C*tp, wgSize), scratch: total})
	one := realBits(dt, 1)
	mflags := uint32(0)
	if C%4 == 0 && K%4 == 0 && gemmVec4 {
		mflags |= 256 // matmul.comp's vec4 loads: M, N, K, offsets and batch strides multiples of 4
	}
	mp := []uint32{uint32(K), uint32(tp), uint32(C), mflags,
		uint32(K * C), uint32(C * tp), uint32(K * tp), 0,
		0, 0, 0, 0, 0, 0, 36, 0,
		one[0], one[1], 0, 0, 0, 0, 0, 0}
	// A, B, Bias (a dummy), Y, Res (a dummy)
	l.add(dispatch{shader: "matmul_" + dt.String() + "_" + t.name, spec: []uint32{uint32(t.threads())},
		binds: []bind{uB, vB, uB, mB, uB}, reads: []span{uS, vS}, writes: []span{mS}, push: mp,
		groups: [3]uint32{uint32(gx), uint32(gy), uint32(min(36, int64(l.d.maxGroups[2])))}, scratch: total})
	yreads := []span{mS}
	if o.Bias.Buf != nil {
		yreads = append(yreads, reads[2])
	}
	if o.Res.Buf != nil {
		yreads = append(yreads, reads[3])
	}
	l.add(dispatch{shader: "winoy_" + dt.String(), spec: spec, binds: []bind{mB, binds[2], binds[4], binds[3]}, reads: yreads, writes: writes,
		push: push, groups: groups1D(l.d, K*T, wgSize), scratch: total})
	return true
}
