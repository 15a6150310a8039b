//go:build cgo

package vulkan

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// gemmTile is a matmul.comp configuration (shaders/gen's gemmTiles): a
// bm x bn block per workgroup of (bm/tm)*(bn/tn) invocations, each with a
// tm x tn register micro-tile, walking K in bk slices through two
// shared-memory stages.
type gemmTile struct {
	name               string
	bm, bn, bk, tm, tn int
	// alt tiles are left out of pickFrom's rule: they run when forced
	// (forceGemmTile: the tile sweeps) or when named (pickTile's
	// smallTiles).
	alt bool
	// padA: built with matmul.comp's PADA (A's shared-memory rows padded
	// by 4 elements; shaders/gen's tile.padA).
	padA bool
}

// gemmTiles, largest first. Shared memory is 2*bk*(bm+bn) elements of the
// compute type, 2*bk*(bm+4+bn) with padA: 32.5 KiB for "l" in f32/f16,
// which fits the 48 KiB of NVIDIA but not the 32 KiB of lavapipe (which
// then takes "m"); f64 has only "s" and "t" (shaders/gen compiles no
// larger f64 tile).
var gemmTiles = []gemmTile{
	{"l", 128, 128, 16, 8, 8, false, true},
	{"m", 128, 64, 16, 8, 4, false, false},
	{"s", 64, 64, 16, 8, 4, false, false},
	{"t", 32, 32, 16, 4, 4, false, false},
	{"l8", 128, 128, 8, 8, 8, true, false},
	{"w", 64, 128, 16, 8, 4, true, false},
	{"n", 128, 32, 32, 4, 4, true, false},
	{"u", 64, 32, 16, 4, 4, true, false},
	{"v", 32, 128, 32, 4, 4, true, false},
}

func (t gemmTile) threads() int { return (t.bm / t.tm) * (t.bn / t.tn) }

func (t gemmTile) shared(dt rt.DType) int {
	es := 4
	if dt == rt.F64 {
		es = 8
	}
	pad := 0
	if t.padA {
		pad = 4
	}
	// the two stages, or the epilogue's row group of 4*(bm/tm) x bn
	return max(2*t.bk*(t.bm+pad+t.bn), 4*(t.bm/t.tm)*t.bn) * es
}

// fits reports whether the device can run t in dtype dt: shaders/gen
// builds no f64 tile larger than 64x64, and the tile's shared memory and
// invocations must fit the device's limits.
func (t gemmTile) fits(dt rt.DType, sharedLim, maxInv uint32) bool {
	return !(dt == rt.F64 && t.bm*t.bn > 64*64) && t.shared(dt) <= int(sharedLim) && t.threads() <= int(maxInv)
}

func (t gemmTile) grid(m, n, batch int) int64 {
	return int64((m+t.bm-1)/t.bm) * int64((n+t.bn-1)/t.bn) * int64(batch)
}

// gemmSpec returns matmul.comp's specialization constants for tile t:
// the workgroup size and, with fixed (a tuned choice, see tune.go),
// FIXED, which fixes the load path (TransA, TransB, vec4 loads) to that
// of the push-constant flags, so that the driver compiles the K loop for
// that path alone. Without it FIXED is 0 and the flags choose at run
// time. Fixing it in every pipeline, not only the tuner's picks, made
// the f32 GEMMs slower on an H100 (2026-12-07, n = 4096: 3.59 → 4.33
// ms; BERT at batch 8 7.25 → 7.55 ms).
func gemmSpec(t gemmTile, flags uint32, fixed bool) []uint32 {
	if !fixed && !forceFixed {
		return []uint32{uint32(t.threads())}
	}
	return []uint32{uint32(t.threads()), 1<<31 | flags&(1|2|256)}
}

// forceFixed, when set (tests), fixes the load path of every
// matmul.comp pipeline of MatMul (gemmSpec).
var forceFixed bool

// forceGemmTile, when set (tests), selects that tile whenever it fits.
var forceGemmTile string

// gemmVec4 enables matmul.comp's vec4 load path for aligned f32 GEMMs
// (tests turn it off to compare).
var gemmVec4 = true

// vec4Loads reports whether an f32 MatMul may use matmul.comp's vec4
// loads (flag 256): M, N, K, the operands' element offsets in their
// bindings and, with a batch, their batch strides are multiples of 4.
func vec4Loads(o *rt.MatMul, offA, offB uint32) bool {
	if !gemmVec4 || o.A.DType != rt.F32 {
		return false
	}
	m4 := func(vs ...int) bool {
		for _, v := range vs {
			if v%4 != 0 {
				return false
			}
		}
		return true
	}
	if o.Batch > 1 && !m4(o.StrideA, o.StrideB) {
		return false
	}
	return m4(o.M, o.N, o.K, int(offA), int(offB))
}

// gemmTarget is the number of workgroups a tile should produce before the
// next smaller one is preferred: enough to fill a large GPU (132 SMs of
// an H100/H200 with two 256-invocation workgroups each). A CPU device
// (lavapipe) has few cores and prefers the largest tile.
func gemmTarget(cpu bool) int64 {
	if cpu {
		return 1
	}
	return 256
}

// pickTile chooses the matmul.comp tile for an m x n (x batch) output and
// the rule of its K split. A GEMM whose "l" tiles fill the GPU (at least
// gemmTarget workgroups), and any GEMM on a CPU device, takes pickFrom's
// rule: the largest tile that fits the device (shared memory,
// invocations), is not more than twice the output in either dimension,
// and gives at least gemmTarget workgroups; failing that, the smallest
// that fits, with wideSplit. A smaller GEMM on a GPU (BERT's at batch 1
// and 8) takes the first of smallTiles ("w" 64x128, "s" 64x64, "u"
// 64x32) whose tiles, times at most smallSplit.maxS K slices, reach
// smallSplit.target workgroups, else "u"; on an H200 this took the eight
// GEMMs of a BERT-base layer at batch 1 and 8 from 780 to 638 us in sum
// (BenchmarkGEMMSmallM; the best of 36 forced choices per GEMM gave 633).
//
// Between the two, a GEMM deep enough for two K slices of at least
// pairSplit.minK whose "l" tiles number from half of pairSplit.target
// up to it (n = 1024: 64 tiles) takes "l" in two slices, about one
// workgroup per SM: on an H100 (BenchmarkGEMMSplit, 2026-12-06) 1024³
// went from 25.3 gpu-TFLOP/s ("w", 3 slices) to 28.6, where "l" unsplit
// gave 17.3, in 3 or 4 slices 21.1 / 24.7, and "m" and "w" at most 26.2
// in any split; cuBLAS 37.9.
func pickTile(dt rt.DType, m, n, k, batch int, sharedLim, maxInv uint32, cpu bool) (gemmTile, splitRule, bool) {
	t, ok := pickFrom(gemmTiles, dt, m, n, batch, sharedLim, maxInv, cpu)
	if !ok || cpu || forceGemmTile != "" || t.name == "l" {
		return t, wideSplit, ok
	}
	if l, found := tileNamed(gemmTiles, "l"); found && l.fits(dt, sharedLim, maxInv) && l.bm < 2*m && l.bn < 2*n {
		if g := l.grid(m, n, batch); 2*g >= pairSplit.target && g < pairSplit.target && k >= 2*pairSplit.minK {
			return l, pairSplit, true
		}
	}
	var last gemmTile
	for _, name := range smallTiles {
		c, found := tileNamed(gemmTiles, name)
		if !found || !c.fits(dt, sharedLim, maxInv) {
			continue
		}
		last = c
		if c.bm >= 2*m || c.bn >= 2*n {
			continue
		}
		if c.grid(m, n, batch)*int64(smallSplit.maxS) >= smallSplit.target {
			return c, smallSplit, true
		}
	}
	if last.name == "" || last.bm >= 2*m || last.bn >= 2*n {
		return t, wideSplit, true
	}
	return last, smallSplit, true
}

// smallTiles are pickTile's candidates for GEMMs too small for "l".
var smallTiles = []string{"w", "s", "u"}

// tileNamed returns the tile of ts called name.
func tileNamed(ts []gemmTile, name string) (gemmTile, bool) {
	for _, t := range ts {
		if t.name == name {
			return t, true
		}
	}
	return gemmTile{}, false
}

// pickFrom is pickTile over a tile table (largest first).
func pickFrom(tiles []gemmTile, dt rt.DType, m, n, batch int, sharedLim, maxInv uint32, cpu bool) (gemmTile, bool) {
	var fit []gemmTile
	for _, t := range tiles {
		if t.alt && t.name != forceGemmTile {
			continue
		}
		if t.fits(dt, sharedLim, maxInv) {
			fit = append(fit, t)
		}
	}
	if len(fit) == 0 {
		return gemmTile{}, false
	}
	if forceGemmTile != "" {
		for _, t := range fit {
			if t.name == forceGemmTile {
				return t, true
			}
		}
	}
	for _, t := range fit {
		if t.bm >= 2*m || t.bn >= 2*n {
			continue
		}
		if t.grid(m, n, batch) >= gemmTarget(cpu) {
			return t, true
		}
	}
	return fit[len(fit)-1], true
}

// kernelDType returns the variant suffix of an op's float kernels: its
// dtype, or "f32w16" for f16 weights with f32 activations (rt.HalfWeights),
// which needs storageBuffer16BitAccess (16-bit storage).
func (l *lowering) kernelDType(dt rt.DType, half bool) (string, bool) {
	if !half {
		return dt.String(), true
	}
	if !l.d.phys.caps.storage16 {
		l.err = l.unsupported(rt.F16, "f16 weights need storageBuffer16BitAccess, which %s lacks", l.d.phys.info.Name)
		return "", false
	}
	return "f32w16", true
}

// weightKernel is the start of MatMul and Conv: op's dtype dt must be a
// float one, and kdt names the kernel variant (kernelDType; half when op
// takes f16 weights).
func (l *lowering) weightKernel(dt rt.DType, op rt.Op) (kdt string, half, ok bool) {
	if !l.floatOnly(dt) {
		return "", false, false
	}
	half = rt.HalfWeights(op)
	kdt, ok = l.kernelDType(dt, half)
	return kdt, half, ok
}

func (l *lowering) MatMul(o *rt.MatMul) {
	dt := o.A.DType
	kdt, half, ok := l.weightKernel(dt, o)
	if !ok {
		return
	}
	for _, p := range []struct {
		n string
		r rt.Ref
	}{{"B", o.B}, {"Y", o.Y}, {"Bias", o.Bias}, {"Res", o.Res}} {
		if p.r.Buf != nil && p.r.DType != dt && !(half && p.n == "B") {
			l.err = fmt.Errorf("MatMul: %s is %s, want %s", p.n, p.r.DType, dt)
			return
		}
	}
	if o.StrideA < 0 || o.StrideB < 0 || o.StrideY < 0 {
		l.err = fmt.Errorf("MatMul: negative batch strides are not supported")
		return
	}
	if o.Act.Fn >= rt.UnaryFn(rt.NumUnaryFns) {
		l.err = l.unsupported(dt, "unknown activation %d", o.Act.Fn)
		return
	}
	M, N, K, B := int64(o.M), int64(o.N), int64(o.K), int64(o.Batch)
	if M == 0 || N == 0 {
		return
	}
	ea := (B-1)*int64(o.StrideA) + M*K
	eb := (B-1)*int64(o.StrideB) + K*N
	ey := (B-1)*int64(o.StrideY) + M*N
	if !fits32(ea) || !fits32(eb) || !fits32(ey) {
		l.err = fmt.Errorf("MatMul: operands exceed 2^32 elements")
		return
	}
	names := []string{"A", "B", "Bias", "Y"}
	refs := []rt.Ref{o.A, o.B, o.Y, o.Y}
	elems := []int64{max(ea, 1), max(eb, 1), 1, ey}
	var binds []bind
	var offs []uint32
	var reads, writes []span
	for i := range refs {
		var bd bind
		var off uint32
		var sp span
		var err error
		if i == 2 && o.Bias.Buf != nil {
			bd, off, sp, err = l.bindRef("Bias", o.Bias)
		} else {
			bd, off, sp, err = l.bindElems(names[i], refs[i], elems[i])
		}
		if err != nil {
			l.err = err
			return
		}
		binds, offs = append(binds, bd), append(offs, off)
		switch {
		case i == 3:
			writes = append(writes, sp)
		case i == 2 && o.Bias.Buf == nil:
		default:
			reads = append(reads, sp)
		}
	}
	flags := uint32(0)
	if o.TransA {
		flags |= 1
	}
	if o.TransB {
		flags |= 2
	}
	var bs0, bs1 int
	if o.Bias.Buf != nil {
		flags |= 4
		st := o.Bias.StridesOrContiguous()
		bs0, bs1 = st[0], st[1]
	}
	al, be := realBits(dt, o.Alpha), realBits(dt, o.Beta)
	aa, ab := realBits(dt, o.Act.Alpha), realBits(dt, o.Act.Beta)
	push := []uint32{uint32(M), uint32(N), uint32(K), flags,
		uint32(o.StrideA), uint32(o.StrideB), uint32(o.StrideY), uint32(o.Act.Fn),
		offs[0], offs[1], offs[3], offs[2], uint32(int32(bs0)), uint32(int32(bs1)), uint32(B), 0,
		al[0], al[1], be[0], be[1], aa[0], aa[1], ab[0], ab[1]}
	bz := uint32(min(B, int64(l.d.maxGroups[2])))
	// The residual (Res) is added by matmul.comp's epilogue or by the
	// split-K reduction: a MatMul with one takes neither the GEMV nor the
	// cooperative-matrix kernels. Without one, the tiled kernel's Res
	// binding is a dummy (Y's; flags bit 16 unset).
	resBind, rreads := binds[3], []span(nil)
	if o.Res.Buf != nil {
		bd, off, sp, err := l.bindElems("Res", o.Res, ey)
		if err != nil {
			l.err = err
			return
		}
		resBind, rreads = bd, []span{sp}
		push[3] |= 16
		push[15] = off
	} else {
		if (M == 1 || N == 1) && K >= 128 {
			l.gemv(o, dt, kdt, binds, reads, writes, push, offs)
			return
		}
		if l.coopMatMul(o, dt, binds, reads, writes, push, bz) {
			return
		}
	}
	if vec4Loads(o, offs[0], offs[1]) {
		push[3] |= 256
	}
	key := fmt.Sprintf("matmul %s m%d n%d k%d b%d f%d", kdt, M, N, K, B, push[3]&(1|2|256))
	t, sk, fixed, tuned := l.tunedGEMM(key, nil, gemmTiles, dt, o.M, o.N, o.K, o.Batch)
	if !tuned {
		lim := l.d.phys.limits
		var rule splitRule
		t, rule, ok = pickTile(dt, o.M, o.N, o.K, o.Batch, lim.MaxComputeSharedMemorySize, lim.MaxComputeWorkGroupInvocations, l.d.phys.info.Kind == rt.KindCPU)
		if !ok {
			l.err = l.unsupported(dt, "no GEMM tile fits maxComputeSharedMemorySize %d", lim.MaxComputeSharedMemorySize)
			return
		}
		sk = l.pickSplitK(t, dt, o.M, o.N, o.K, o.Batch, rule)
	}
	bm, bn := int64(t.bm), int64(t.bn)
	gx, gy := (N+bn-1)/bn, (M+bm-1)/bm
	if gx > int64(l.d.maxGroups[0]) || gy > int64(l.d.maxGroups[1]) {
		l.err = fmt.Errorf("MatMul: %dx%d output needs more workgroups than the device allows", M, N)
		return
	}
	spec := gemmSpec(t, push[3], fixed)
	if sk.s > 1 {
		// partial pass: A, B -> scratch; reduction: scratch, Bias -> Y
		pp := append(append([]uint32(nil), push...), uint32(sk.s), uint32(sk.ks))
		sb, ss := sk.scratch()
		l.add(dispatch{shader: "matmulk_" + kdt + "_" + t.name, spec: spec,
			binds: []bind{binds[0], binds[1], binds[2], sb}, reads: reads[:2], writes: []span{ss}, push: pp,
			groups: [3]uint32{uint32(gx), uint32(gy), uint32(min(B*int64(sk.s), int64(l.d.maxGroups[2])))}, scratch: sk.bytes})
		rflags := uint32(0)
		sreads := []span{ss}
		if o.Bias.Buf != nil {
			rflags = 1
			sreads = append(sreads, reads[2])
		}
		rbind := sb // Res: a dummy without one
		if o.Res.Buf != nil {
			rflags |= 2
			rbind = resBind
			sreads = append(sreads, rreads...)
		}
		rp := []uint32{uint32(M), uint32(N), uint32(sk.s), uint32(B),
			uint32(N), 0, uint32(N), uint32(o.StrideY),
			offs[3], offs[2], 0, rflags, uint32(int32(bs0)), uint32(int32(bs1)), uint32(o.Act.Fn), push[15],
			al[0], al[1], be[0], be[1], aa[0], aa[1], ab[0], ab[1]}
		l.add(dispatch{shader: "splitk_" + dt.String(), spec: []uint32{wgSize}, binds: []bind{sb, binds[2], binds[3], rbind},
			reads: sreads, writes: writes, push: rp, groups: groups1D(l.d, B*M*N, wgSize), scratch: sk.bytes})
		return
	}
	l.add(dispatch{shader: "matmul_" + kdt + "_" + t.name, spec: spec,
		binds: append(binds, resBind), reads: append(reads, rreads...), writes: writes, push: push, groups: [3]uint32{uint32(gx), uint32(gy), bz}})
}

// Split-K: where a GEMM's output tiles give fewer than gemmTarget
// workgroups, matmul.comp / convgemm.comp built with SPLITK (variants
// matmulk_*, convgemmk_*) compute S partial tiles per output tile, each
// over one slice of K (a multiple of the tile's BK, at least splitMinK
// deep), into the stream's scratch buffer; splitk.comp then sums the S
// partials in a fixed order and applies alpha, beta*Bias and the
// activation. The scratch buffer is bound through the scratchBuf sentinel,
// which the stream replaces with the buffer it owns (see stream.Launch).

// splitMinK is the least K depth of one split-K slice by default.
const splitMinK = 256

// splitRule bounds a split-K: S slices so that tiles*S reaches target
// workgroups, each slice at least minK deep, and at most maxS slices
// (0: no bound).
type splitRule struct {
	target     int64
	minK, maxS int
}

var (
	// wideSplit is the default rule.
	wideSplit = splitRule{gemmTarget(false), splitMinK, 0}
	// smallSplit is the rule of pickTile's small-GEMM tiles (measured
	// with BenchmarkGEMMSmallM on an H200).
	smallSplit = splitRule{384, 128, 8}
	// pairSplit is the rule of pickTile's "l" in two K slices.
	pairSplit = splitRule{128, 512, 2}
)

// forceSplitK, when > 0 (tests), splits every tiled GEMM (MatMul and
// Conv) into that many K slices, fewer where K has fewer BK slices, on
// any device.
var forceSplitK int

// scratchBuf stands for the stream's scratch buffer in binds and spans.
var scratchBuf = &buffer{}

type splitPlan struct {
	s, ks int   // slices, K per slice
	bytes int64 // scratch size
}

func (p splitPlan) scratch() (bind, span) {
	return bind{b: scratchBuf, off: 0, rng: p.bytes}, span{scratchBuf, 0, p.bytes}
}

// pickSplitK chooses the K split of a batch x m x n x k GEMM run with tile
// t under rule r: S slices so that tiles*S reaches r.target (at most
// k/r.minK and r.maxS; no split on CPU devices or where K is short), each
// a multiple of t.bk. S = 1 means no split.
func (l *lowering) pickSplitK(t gemmTile, dt rt.DType, m, n, k, batch int, r splitRule) splitPlan {
	return splitFor(t, dt, m, n, k, batch, l.d.phys.info.Kind == rt.KindCPU, l.d.maxRange, r)
}

// splitFor is pickSplitK for a device kind and maxStorageBufferRange (the
// scratch binding must fit it).
func splitFor(t gemmTile, dt rt.DType, m, n, k, batch int, cpu bool, maxRange int64, r splitRule) splitPlan {
	if k <= t.bk {
		return splitPlan{s: 1, ks: k}
	}
	grid := t.grid(m, n, batch)
	s := 1
	switch {
	case forceSplitK > 0:
		s = forceSplitK
	case !cpu && grid < r.target:
		s = int(min((r.target+grid-1)/grid, int64(k/r.minK)))
		if r.maxS > 0 {
			s = min(s, r.maxS)
		}
	}
	for ; s > 1; s-- {
		if p := splitExact(t, dt, m, n, k, batch, s, maxRange); p.s > 1 {
			return p
		}
	}
	return splitPlan{s: 1, ks: k}
}

// splitExact is the plan of about s K slices, each a multiple of t.bk
// deep: (k + ks - 1) / ks slices of ks = ceil(k/s) rounded up to t.bk,
// which may be fewer than s. It is no split (s = 1) where that leaves
// one slice, or where the partials would not fit the scratch binding
// (maxRange) or 2^32 elements.
func splitExact(t gemmTile, dt rt.DType, m, n, k, batch, s int, maxRange int64) splitPlan {
	if s <= 1 || k <= t.bk {
		return splitPlan{s: 1, ks: k}
	}
	es := int64(4)
	if dt == rt.F64 {
		es = 8
	}
	ks := (k + s - 1) / s
	ks = (ks + t.bk - 1) / t.bk * t.bk
	s = (k + ks - 1) / ks
	elems := int64(batch) * int64(s) * int64(m) * int64(n)
	if s <= 1 || !fits32(elems) || elems*es > maxRange || int64(batch)*int64(s) > int64(^uint32(0)>>1) {
		return splitPlan{s: 1, ks: k}
	}
	return splitPlan{s: s, ks: ks, bytes: elems * es}
}
