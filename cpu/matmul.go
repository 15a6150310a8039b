package cpu

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// GEMM: C = Act(alpha * op(A) @ op(B) + beta * Bias), BLIS-style.
//
// The N dimension is cut into blocks of gemmNC columns and K into blocks of
// gemmKC. For each (NC, KC) block, B is packed once into column panels of
// nr columns (shared by all workers); then the MC×NC macro tiles are shared
// out to the workers, each of which packs its MC×KC block of A (times
// alpha) into row panels of mr rows and runs the mr×nr micro-kernel over
// the panels. The first K block stores into C, later ones accumulate, and
// the last applies bias and activation to the tile while it is in cache.

// Blocking of the portable kernel; the assembly ones carry their own.
const (
	gemmKC = 256
	gemmMC = 96
	gemmNC = 3072
)

// microKernel computes the mr×nr tile C(i, j) = c[i*ldc+j] as the sum over
// kc of the packed A panel (kc × mr) times the packed B panel (kc × nr),
// storing it, or adding it to C when acc.
type microKernel[T floatT] func(kc int, a, b []T, c []T, ldc int, acc bool)

// kernelInfo is a micro-kernel with its tile shape and blocking.
type kernelInfo[T floatT] struct {
	fn     microKernel[T]
	mr, nr int
	kc, mc int
	name   string
}

// Micro-kernel levels, best last.
const (
	levelGo = iota
	levelAVX2
	levelAVX512
)

// maxKernelLevel caps the micro-kernel level, so that tests can force each
// kernel path; useAsm = false is the same as levelGo.
var maxKernelLevel = levelAVX512

func kernelLevel() int {
	if !useAsm {
		return levelGo
	}
	return min(maxKernelLevel, hwKernelLevel())
}

type gemm[T floatT] struct {
	m, n, k int
	a       []T // A(i,p) = a[i*lda+p], or a[p*lda+i] when ta
	lda     int
	ta      bool
	b       []T // B(p,j) = b[p*ldb+j], or b[j*ldb+p] when tb
	ldb     int
	tb      bool
	c       []T // C(i,j) = c[i*ldc+j]
	ldc     int
	alpha   T
	bias    []T // Bias(i,j) = bias[boff+i*brs+j*bcs]; nil if none
	boff    int
	brs     int
	bcs     int
	beta    T
	act     rt.Activation
	threads int
	// bpack, if set, replaces packB (b and ldb are then unused): it packs
	// B(p0:p0+kc, j0:j0+nr) as kc groups of nr values, zero beyond N.
	bpack func(dst []T, p0, kc, j0, nr int)
}

// kernelFor returns the micro-kernel for T.
func kernelFor[T floatT]() kernelInfo[T] {
	var z T
	lv := kernelLevel()
	switch any(z).(type) {
	case float32:
		if k, ok := asmKernel32(lv); ok {
			return any(k).(kernelInfo[T])
		}
	case float64:
		if k, ok := asmKernel64(lv); ok {
			return any(k).(kernelInfo[T])
		}
	}
	return kernelInfo[T]{kern4x4[T], 4, 4, gemmKC, gemmMC, "pure Go 4x4"}
}

func gemmKernelName() string {
	k32, k64 := kernelFor[float32](), kernelFor[float64]()
	if k32.name == k64.name {
		return k32.name
	}
	return k32.name + " (f32) / " + k64.name + " (f64)"
}

func (g *gemm[T]) run() {
	if g.m <= 0 || g.n <= 0 {
		return
	}
	if g.threads < 1 {
		g.threads = workers()
	}
	if g.serial() {
		g.runOne()
		return
	}
	if g.k == 0 || ((g.m == 1 || g.n == 1) && g.bpack == nil) {
		g.runOne() // the GEMV paths split large products themselves
		return
	}
	if npSmall(g) && (g.k >= 32 || g.bpack == nil) && npParallel(g) {
		return
	}
	ki := kernelFor[T]()
	mr, nr := ki.mr, ki.nr
	if g.m <= max(ki.mc/mr, 1)*mr && g.n >= 4*g.threads*nr {
		g.runSmallM(ki)
		return
	}
	g.runPacked(ki)
}

// runPacked runs the GEMM with packed panels of A and B, split between
// g.threads workers. Each K block (of even sizes) of each block of N
// columns is one parallel job: the workers share out its MC×NC macro
// tiles, each packing its block of A and multiplying it by the packed B
// panels, and then pack the next K block's B panels into the other of two
// buffers, so that the workers meet once a K block rather than twice
// (a pack and a compute phase).
func (g *gemm[T]) runPacked(ki kernelInfo[T]) {
	mr, nr, kcMax := ki.mr, ki.nr, ki.kc
	nkb := (g.k + kcMax - 1) / kcMax
	kcb := (g.k + nkb - 1) / nkb
	nc0 := min(gemmNC, roundUp(g.n, nr))
	var bps [2]*[]T
	var bp [2][]T
	for i := range bps {
		if i == 1 && nkb == 1 {
			break
		}
		bps[i] = getScratch[T](kcb * nc0)
		bp[i] = *bps[i]
	}
	defer func() {
		for _, b := range bps {
			if b != nil {
				putScratch(b)
			}
		}
	}()
	mc0 := min(max(ki.mc/mr, 1)*mr, roundUp(g.m, mr))
	if mb := (g.m + mc0 - 1) / mc0; g.threads > 1 && mb < 8*g.threads {
		// Not many row blocks: make their number a multiple of the workers
		// and their sizes even, so that no worker waits for the last one
		// (1024 rows, 2 workers: 12 blocks of 90 rows, rather than 11 of
		// 96 each cut in two, which packed A twice).
		mb = roundUp(mb, g.threads)
		mc0 = roundUp((g.m+mb-1)/mb, mr)
	}
	aps := make([]*[]T, g.threads)
	defer func() {
		for _, ap := range aps {
			if ap != nil {
				putScratch(ap)
			}
		}
	}()
	for jc := 0; jc < g.n; jc += nc0 {
		nc := min(nc0, g.n-jc)
		npan := (nc + nr - 1) / nr
		// B packing tasks of pg panels (about 64 KiB each).
		pg := max(1, 64<<10/(kcb*nr*8))
		npk := (npan + pg - 1) / pg
		packTask := func(buf []T, kb, t int) {
			pc, kc := kBlock(g.k, nkb, kb)
			for q := t * pg; q < min(npan, (t+1)*pg); q++ {
				g.packPanelB(buf[q*kc*nr:(q+1)*kc*nr], pc, kc, jc+q*nr, nr)
			}
		}
		g.parallel(npk, 1, func(_, lo, hi int) {
			for t := lo; t < hi; t++ {
				packTask(bp[0], 0, t)
			}
		})
		mb := (g.m + mc0 - 1) / mc0
		parts := 1
		if g.threads > 1 && mb%g.threads != 0 {
			// Enough tasks that the last round leaves few workers idle.
			parts = max(1, min(npan/8, (8*g.threads+mb-1)/mb))
		}
		ncomp := mb * parts
		for kb := range nkb {
			pc, kc := kBlock(g.k, nkb, kb)
			first, last := kb == 0, kb == nkb-1
			cur, next := bp[kb%2], bp[(kb+1)%2]
			ntask := ncomp
			if !last {
				ntask += npk
			}
			g.parallel(ntask, 1, func(w, lo, hi int) {
				var tile [12 * 32]T
				for t := lo; t < hi; t++ {
					if t >= ncomp {
						packTask(next, kb+1, t-ncomp)
						continue
					}
					if aps[w] == nil {
						aps[w] = getScratch[T](mc0 * kcb)
					}
					ap := *aps[w]
					ib, part := t/parts, t%parts
					ic := ib * mc0
					mc := min(mc0, g.m-ic)
					p0, p1 := part*npan/parts, (part+1)*npan/parts
					if p0 == p1 {
						continue
					}
					mpan := (mc + mr - 1) / mr
					for r := 0; r < mpan; r++ {
						g.packA(ap[r*kc*mr:(r+1)*kc*mr], ic+r*mr, mr, pc, kc)
					}
					for q := p0; q < p1; q++ {
						g.panels(ki, kc, ap, cur[q*kc*nr:(q+1)*kc*nr], ic, mpan, jc+q*nr, first, tile[:])
					}
					if last {
						g.epilogue(ic, ic+mc, jc+p0*nr, min(jc+p1*nr, g.n))
					}
				}
			})
		}
	}
}

// scratchPools holds GEMM scratch slices by element type and size class
// (a power of two), so that requests of different sizes do not evict each
// other's buffers.
var scratchPools [2][48]sync.Pool

// getScratch returns a slice of n elements of T, not zeroed, from a pool;
// putScratch gives it back.
func getScratch[T floatT](n int) *[]T {
	var z T
	t := 0
	if _, ok := any(z).(float64); ok {
		t = 1
	}
	c := bits.Len(uint(max(n, 1) - 1))
	if v, ok := scratchPools[t][c].Get().(*[]T); ok {
		*v = (*v)[:n]
		return v
	}
	s := make([]T, n, 1<<c)
	return &s
}

func putScratch[T floatT](s *[]T) {
	var z T
	t := 0
	if _, ok := any(z).(float64); ok {
		t = 1
	}
	c := bits.Len(uint(cap(*s)) - 1)
	if cap(*s) == 1<<c {
		scratchPools[t][c].Put(s)
	}
}

// serial reports whether the GEMM runs on the calling goroutine: one
// thread asked for, or too little work to split.
func (g *gemm[T]) serial() bool {
	return g.threads == 1 || workers() == 1 || int64(g.m)*int64(g.n)*int64(g.k) < gemmParallelWork
}

// gemvSerial is serial for the GEMV path: a matrix-vector product reads
// each matrix element once, so it is split from gemvParallelBytes of
// matrix on.
func (g *gemm[T]) gemvSerial() bool {
	var z T
	return g.threads == 1 || workers() == 1 || int64(g.m)*int64(g.n)*int64(g.k)*int64(unsafe.Sizeof(z)) < gemvParallelBytes
}

// gemvParallelBytes is the least matrix that the GEMV path splits between
// workers: 512 KiB, 256×512 f32 (about 10 µs from L3 on one core).
const gemvParallelBytes = 1 << 19

// runOne runs the GEMM on the calling goroutine, except that the GEMV
// path splits a large matrix-vector product. It neither allocates nor
// lets g escape, so that callers can keep g on the stack.
func (g *gemm[T]) runOne() {
	if g.m <= 0 || g.n <= 0 {
		return
	}
	if g.k == 0 {
		for i := 0; i < g.m; i++ {
			clear(g.c[i*g.ldc : i*g.ldc+g.n])
		}
		g.epilogue(0, g.m, 0, g.n)
		return
	}
	if (g.m == 1 || g.n == 1) && g.bpack == nil && !(g.m == 1 && !g.tb && g.n >= 16 && npApplies(g) && !gemvAxpyFast()) {
		// gemv reads B directly; x·B with B not transposed is the no-pack
		// kernels' one-row case, below, unless the row-streaming kernels
		// are there.
		g.gemv(!g.gemvSerial())
		return
	}
	if !g.serial() && g.m == 1 && npApplies(g) {
		gp := new(gemm[T]) // the workers' closures capture it, not g
		*gp = *g
		npParallel(gp)
		return
	}
	if (npSmall(g) || kernelLevel() >= levelAVX512) && npGEMM(g) {
		// (The AVX-512 drivers keep their Zen 5 tuning: no-pack serially.)
		return
	}
	g.runSerial(kernelFor[T]())
}

// npSmall reports whether M or N is small enough for the no-pack kernels
// to beat packing: npMaxN for f32, the same bytes for f64 (rows of 2 KiB).
// Beyond it each B panel meets so many row panels, and each A row so many
// column panels, that packing both pays (on Zen 3, one thread: f32 n=1024
// 34-39 against 64-71 GFLOP per CPU second packed, f64 n=512 18-22
// against 25-35). With AVX-512 too: on an Intel Xeon (2 threads, GFLOP/s,
// no-pack against packed), f64 n=512 89-98 against 117-125 (NumPy with
// OpenBLAS 120), 500 109-111 against 118-122 and M 300, N and K 512
// 88-95 against 111-114, where rows of 4 KiB put a tile's rows of A, B
// and C into the same cache sets; n=384 lost 135-141 → 120-124, n=448
// was level.
func npSmall[T floatT](g *gemm[T]) bool {
	var z T
	lim := npMaxN * 4 / int(unsafe.Sizeof(z))
	return g.n <= lim || g.m <= lim
}

// npMaxN: a GEMM with M or N up to this (f32; half for f64, see npSmall)
// runs with the no-pack kernels (in parallel when B comes through bpack,
// with K at least 32), where packing would cost as much as it saves
// (measured with BenchmarkGEMM and BenchmarkConvShapes, VRUN_CPU_NPMAXN).
var npMaxN = 512

// gemmParallelWork is the smallest M·N·K worth splitting between
// workers: below it (about 10 µs on one core) waking a helper costs more
// than it saves.
const gemmParallelWork = 1 << 19

// runSerial runs the GEMM on the calling goroutine without closures or
// allocations (scratch comes from pools), blocked like the parallel
// driver: for each K block (of even sizes) B is packed once, a block of
// N columns at a time, and each block of mc rows of A is packed (it stays
// in L2) and multiplied by every B panel (each stays in L1 while the row
// panels pass over it).
func (g *gemm[T]) runSerial(ki kernelInfo[T]) {
	mr, nr, kcMax := ki.mr, ki.nr, ki.kc
	nkb := (g.k + kcMax - 1) / kcMax
	kcb := (g.k + nkb - 1) / nkb
	nc0 := min(gemmNC, roundUp(g.n, nr))
	mc0 := min(max(ki.mc/mr, 1)*mr, roundUp(g.m, mr))
	aps := getScratch[T](mc0 * kcb)
	bps := getScratch[T](kcb * nc0)
	tps := getScratch[T](mr * nr)
	ap, bp, tile := *aps, *bps, *tps
	for jc := 0; jc < g.n; jc += nc0 {
		nc := min(nc0, g.n-jc)
		npan := (nc + nr - 1) / nr
		for kb := range nkb {
			pc, kc := kBlock(g.k, nkb, kb)
			for q := range npan {
				g.packPanelB(bp[q*kc*nr:(q+1)*kc*nr], pc, kc, jc+q*nr, nr)
			}
			for ic := 0; ic < g.m; ic += mc0 {
				mc := min(mc0, g.m-ic)
				mpan := (mc + mr - 1) / mr
				for r := range mpan {
					g.packA(ap[r*kc*mr:(r+1)*kc*mr], ic+r*mr, mr, pc, kc)
				}
				for q := range npan {
					g.panels(ki, kc, ap[:mpan*kc*mr], bp[q*kc*nr:(q+1)*kc*nr], ic, mpan, jc+q*nr, kb == 0, tile)
				}
				if kb == nkb-1 {
					g.epilogue(ic, ic+mc, jc, jc+nc)
				}
			}
		}
	}
	putScratch(aps)
	putScratch(bps)
	putScratch(tps)
}

// kBlock returns the start and size of K block kb of nkb: the blocks
// split k evenly (sizes differ by at most one), so that none is tiny.
func kBlock(k, nkb, kb int) (pc, kc int) {
	pc = kb * k / nkb
	return pc, (kb+1)*k/nkb - pc
}

// runSmallM handles M within one row block: the workers split N, and each
// packs all of A and then, one at a time, the B panels it multiplies, so
// that every B panel is packed right before use and stays in L1.
func (g *gemm[T]) runSmallM(ki kernelInfo[T]) {
	mr, nr, kcMax := ki.mr, ki.nr, ki.kc
	npan := (g.n + nr - 1) / nr
	mpan := (g.m + mr - 1) / mr
	kcb := min(kcMax, g.k)
	// Chunks of panels: several per worker for balance, but not so small
	// that A is packed too often.
	grain := max(1, min(npan/(4*g.threads), 4096/max(g.m, 1)))
	// All of A, packed once: K block pc is at pc*mpan*mr, its row panel r
	// at r*kc*mr from there.
	aps := getScratch[T](mpan * mr * g.k)
	defer putScratch(aps)
	apAll := *aps
	g.parallel(mpan*((g.k+kcMax-1)/kcMax), 1, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			pc, r := t/mpan*kcMax, t%mpan
			kc := min(kcMax, g.k-pc)
			g.packA(apAll[pc*mpan*mr+r*kc*mr:pc*mpan*mr+(r+1)*kc*mr], r*mr, mr, pc, kc)
		}
	})
	g.parallel(npan, grain, func(_, lo, hi int) {
		bps := getScratch[T](kcb * nr)
		defer putScratch(bps)
		bq := *bps
		var tile [12 * 32]T
		for pc := 0; pc < g.k; pc += kcMax {
			kc := min(kcMax, g.k-pc)
			first := pc == 0
			ap := apAll[pc*mpan*mr : (pc+kc)*mpan*mr]
			for q := lo; q < hi; q++ {
				g.packPanelB(bq[:kc*nr], pc, kc, q*nr, nr)
				g.panels(ki, kc, ap, bq[:kc*nr], 0, mpan, q*nr, first, tile[:])
			}
		}
		g.epilogue(0, g.m, lo*nr, min(hi*nr, g.n))
	})
}

// packPanelB packs the B panel (pc:pc+kc, j0:j0+nr) into dst, through
// bpack where it is set.
func (g *gemm[T]) packPanelB(dst []T, pc, kc, j0, nr int) {
	if g.bpack != nil {
		g.bpack(dst, pc, kc, j0, nr)
	} else {
		g.packB(dst, pc, kc, j0, nr)
	}
}

// panels multiplies mpan packed row panels of A (ap, from row i0) by the
// packed B panel bq of columns j0..j0+nr, writing C (first) or adding to
// it. Edge tiles go through tile, mr*nr elements of scratch.
func (g *gemm[T]) panels(ki kernelInfo[T], kc int, ap, bq []T, i0, mpan, j0 int, first bool, tile []T) {
	kern, mr, nr := ki.fn, ki.mr, ki.nr
	nv := min(nr, g.n-j0)
	for r := 0; r < mpan; r++ {
		i := i0 + r*mr
		mv := min(mr, g.m-i)
		apr := ap[r*kc*mr : (r+1)*kc*mr]
		if mv == mr && nv == nr {
			kern(kc, apr, bq, g.c[i*g.ldc+j0:], g.ldc, !first)
			continue
		}
		kern(kc, apr, bq, tile[:mr*nr], nr, false)
		for ii := 0; ii < mv; ii++ {
			crow := g.c[(i+ii)*g.ldc+j0 : (i+ii)*g.ldc+j0+nv]
			trow := tile[ii*nr : ii*nr+nv]
			if first {
				copy(crow, trow)
			} else {
				for jj, v := range trow {
					crow[jj] += v
				}
			}
		}
	}
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// parallel runs f over [0,n) split between up to g.threads workers, which
// take chunks of grain items dynamically; w is the worker number.
func (g *gemm[T]) parallel(n, grain int, f func(w, lo, hi int)) {
	nw := min(g.threads, (n+grain-1)/grain)
	if nw <= 1 {
		f(0, 0, n)
		return
	}
	runJob(n, grain, nw, nil, f)
}

// packA packs alpha*A(i0:i0+mr, p0:p0+kc) as kc groups of mr values, zero
// beyond M.
func (g *gemm[T]) packA(dst []T, i0, mr, p0, kc int) {
	mv := min(mr, g.m-i0)
	al := g.alpha
	if g.ta {
		for p := 0; p < kc; p++ {
			src := g.a[(p0+p)*g.lda+i0:]
			d := dst[p*mr : p*mr+mr]
			for r := 0; r < mv; r++ {
				d[r] = al * src[r]
			}
			for r := mv; r < mr; r++ {
				d[r] = 0
			}
		}
		return
	}
	if mv == 6 && mr == 6 {
		packA6(dst, g.a[i0*g.lda+p0:], g.lda, kc, al)
		return
	}
	for r := 0; r < mv; r++ {
		src := g.a[(i0+r)*g.lda+p0 : (i0+r)*g.lda+p0+kc]
		for p, v := range src {
			dst[p*mr+r] = al * v
		}
	}
	for r := mv; r < mr; r++ {
		for p := 0; p < kc; p++ {
			dst[p*mr+r] = 0
		}
	}
}

// packA6 packs al times six rows of kc values of a (row stride lda) as
// kc groups of 6, reading the rows side by side (the AVX2 kernels' panels:
// the row-by-row loop's strided stores took a tenth of a 1024³ GEMM).
func packA6[T floatT](dst, a []T, lda, kc int, al T) {
	r0 := a[:kc]
	r1 := a[lda : lda+kc]
	r2 := a[2*lda : 2*lda+kc]
	r3 := a[3*lda : 3*lda+kc]
	r4 := a[4*lda : 4*lda+kc]
	r5 := a[5*lda : 5*lda+kc]
	dst = dst[:6*kc]
	if al == 1 {
		for p := range r0 {
			d := (*[6]T)(dst[6*p:])
			d[0], d[1], d[2], d[3], d[4], d[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
		}
		return
	}
	for p := range r0 {
		d := (*[6]T)(dst[6*p:])
		d[0], d[1], d[2], d[3], d[4], d[5] = al*r0[p], al*r1[p], al*r2[p], al*r3[p], al*r4[p], al*r5[p]
	}
}

// packB packs B(p0:p0+kc, j0:j0+nr) as kc groups of nr values, zero beyond N.
func (g *gemm[T]) packB(dst []T, p0, kc, j0, nr int) {
	nv := min(nr, g.n-j0)
	if !g.tb {
		var z T
		if nv == nr && nr*int(unsafe.Sizeof(z)) == 64 && kc > 0 {
			// Full panels of 64 bytes a row (the AVX2 kernels'): copied as
			// such, without a call to memmove per row (that took 5 % of
			// a 1024³ f32 GEMM).
			_ = dst[kc*nr-1]
			_ = g.b[(p0+kc-1)*g.ldb+j0+nr-1]
			for p := 0; p < kc; p++ {
				d := (*[8]uint64)(unsafe.Pointer(&dst[p*nr]))
				s := (*[8]uint64)(unsafe.Pointer(&g.b[(p0+p)*g.ldb+j0]))
				d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
			}
			return
		}
		for p := 0; p < kc; p++ {
			src := g.b[(p0+p)*g.ldb+j0 : (p0+p)*g.ldb+j0+nv]
			d := dst[p*nr : p*nr+nr]
			copy(d, src)
			for c := nv; c < nr; c++ {
				d[c] = 0
			}
		}
		return
	}
	if nv == nr && packBTAsm(dst, g.b[j0*g.ldb+p0:], kc, g.ldb, nr) {
		return
	}
	// Row by row of the panel: contiguous stores, and the nv source rows
	// stay in L1 while p advances.
	b := g.b[j0*g.ldb+p0:]
	ldb := g.ldb
	_ = b[(nv-1)*ldb+kc-1]
	for p := 0; p < kc; p++ {
		d := dst[p*nr : p*nr+nr]
		for c := range nv {
			d[c] = b[c*ldb+p]
		}
		clear(d[nv:])
	}
}

// epilogue adds beta*Bias and applies the activation to C(i0:i1, j0:j1).
func (g *gemm[T]) epilogue(i0, i1, j0, j1 int) {
	if j0 >= j1 {
		return
	}
	for i := i0; i < i1; i++ {
		row := g.c[i*g.ldc+j0 : i*g.ldc+j1]
		if g.bias != nil {
			bo := g.boff + i*g.brs + j0*g.bcs
			r32, f32 := asF32(row)
			if g.bcs == 0 {
				v := g.beta * g.bias[bo]
				if !f32 || !unaryF32(rt.Affine, 1, float64(v), r32, r32) {
					for j := range row {
						row[j] += v
					}
				}
			} else if b32, _ := asF32(g.bias[bo:]); f32 && g.bcs == 1 && g.beta == 1 && binaryF32(rt.Add, formVV, r32, r32, b32) {
				// row += bias, vectorised
			} else {
				for j := range row {
					row[j] += g.beta * g.bias[bo+j*g.bcs]
				}
			}
		}
		actApply(g.act.Fn, g.act.Alpha, g.act.Beta, row)
	}
}

// gemv handles M == 1 or N == 1: a matrix-vector product that streams the
// matrix once, in parallel when par (its closures capture locals only, so
// that the serial path keeps g off the heap).
func (g *gemm[T]) gemv(par bool) {
	k := g.k
	var x []T        // the vector, length k
	var mat []T      // the matrix
	var ld int       // its leading dimension
	var dot bool     // out[t] = dot(x, mat[t*ld:t*ld+k]); else out = sum_p x[p]*mat[p*ld:]
	var nout, os int // outputs, and their stride in c
	var xs *[]T
	gather := func(src []T, st int) []T {
		xs = getScratch[T](k)
		for p := range *xs {
			(*xs)[p] = src[p*st]
		}
		return *xs
	}
	if g.m == 1 && g.n != 1 {
		nout, os = g.n, 1
		if g.ta && g.lda != 1 {
			x = gather(g.a, g.lda)
		} else {
			x = g.a[:k]
		}
		mat, ld, dot = g.b, g.ldb, g.tb
	} else { // N == 1 (a dot product when M == 1 too)
		nout, os = g.m, g.ldc
		if g.tb || g.ldb == 1 {
			x = g.b[:k]
		} else {
			x = gather(g.b, g.ldb)
		}
		mat, ld, dot = g.a, g.lda, !g.ta
	}
	c, alpha := g.c, g.alpha
	if dot {
		if par && nout == 1 && k >= 2*longRowChunk {
			gemvDotSplit(x, mat, c, alpha)
		} else if par {
			// chunks of about 256 KiB of rows (f32), at least one a worker
			grain := min(max(16, 4096/max(k/64, 1)), max(16, (nout+workers()-1)/workers()))
			parallelFor(nout, grain, func(lo, hi int) {
				gemvDot(x, mat, ld, c, os, alpha, lo, hi)
			})
		} else {
			gemvDot(x, mat, ld, c, os, alpha, 0, nout)
		}
	} else {
		// The outputs accumulate in a contiguous vector: c itself when its
		// stride is 1.
		var accs *[]T
		acc := c
		if os != 1 {
			accs = getScratch[T](nout)
			acc = *accs
		}
		acc = acc[:nout]
		if nw := min(workers(), nout/64); par && nw > 1 {
			parallelFor(nw, 1, func(lo, hi int) {
				for w := lo; w < hi; w++ {
					j0, j1 := w*nout/nw, (w+1)*nout/nw
					gemvAxpy(x, mat, ld, acc, alpha, j0, j1)
				}
			})
		} else {
			gemvAxpy(x, mat, ld, acc, alpha, 0, nout)
		}
		if accs != nil {
			for t, v := range acc {
				c[t*os] = v
			}
			putScratch(accs)
		}
	}
	if xs != nil {
		putScratch(xs)
	}
	g.epilogue(0, g.m, 0, g.n)
}

// gemvDot sets c[t*os] = alpha * dot(x, mat[t*ld:]) for t in [lo, hi).
func gemvDot[T floatT](x, mat []T, ld int, c []T, os int, alpha T, lo, hi int) {
	k := len(x)
	if gemvDotAsm(x, mat, ld, k, c, os, alpha, lo, hi) {
		return
	}
	for t := lo; t < hi; t++ {
		c[t*os] = alpha * dotT(x, mat[t*ld:t*ld+k])
	}
}

// gemvDotSplit sets c[0] = alpha * dot(x, mat[:len(x)]) for one long dot
// product (DOT, or a GEMV with one output), whose rows the parallel GEMV
// path cannot split: the dots of each longRowChunk elements in parallel,
// added in order, so that the result is the same whatever the number of
// workers (the serial path, one thread, sums in its own order).
func gemvDotSplit[T floatT](x, mat, c []T, alpha T) {
	s := chunkedSum(len(x), func(lo, hi int) float64 {
		var d [1]T
		gemvDot(x[lo:hi], mat[lo:hi], 0, d[:], 1, 1, 0, 1)
		return float64(d[0])
	})
	c[0] = alpha * T(s)
}

// gemvAxpy sets acc[j] = alpha * sum_p x[p]*mat[p*ld+j] for j in [j0, j1),
// four matrix rows at a time.
func gemvAxpy[T floatT](x, mat []T, ld int, acc []T, alpha T, j0, j1 int) {
	k := len(x)
	o := acc[j0:j1]
	clear(o)
	p := 0
	if gemvAxpyAsm(x, mat, ld, acc, j0, j1) {
		p = k
	}
	for ; p+4 <= k; p += 4 {
		axpy4T(x[p:p+4], mat[p*ld+j0:p*ld+j1], mat[(p+1)*ld+j0:(p+1)*ld+j1],
			mat[(p+2)*ld+j0:(p+2)*ld+j1], mat[(p+3)*ld+j0:(p+3)*ld+j1], o)
	}
	for ; p < k; p++ {
		axpyT(x[p], mat[p*ld+j0:p*ld+j1], o)
	}
	if alpha != 1 {
		for j := range o {
			o[j] *= alpha
		}
	}
}

func dotT[T floatT](x, y []T) T {
	y = y[:len(x)]
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy4T computes y += a[0]*r0 + a[1]*r1 + a[2]*r2 + a[3]*r3.
func axpy4T[T floatT](a []T, r0, r1, r2, r3, y []T) {
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	r0, r1, r2, r3 = r0[:len(y)], r1[:len(y)], r2[:len(y)], r3[:len(y)]
	for j := range y {
		y[j] += a0*r0[j] + a1*r1[j] + a2*r2[j] + a3*r3[j]
	}
}

func axpyT[T floatT](a T, x, y []T) {
	if a == 0 {
		return
	}
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += a * x[i]
		y[i+1] += a * x[i+1]
		y[i+2] += a * x[i+2]
		y[i+3] += a * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

// kern4x4 is the portable micro-kernel: a 4×4 tile in 16 local
// accumulators.
func kern4x4[T floatT](kc int, a, b []T, c []T, ldc int, acc bool) {
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 T
	a = a[:kc*4]
	b = b[:kc*4]
	for len(a) >= 4 && len(b) >= 4 {
		a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
		b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
		a = a[4:]
		b = b[4:]
	}
	c0, c1, c2, c3 := c[:4], c[ldc:ldc+4], c[2*ldc:2*ldc+4], c[3*ldc:3*ldc+4]
	if acc {
		c00, c01, c02, c03 = c00+c0[0], c01+c0[1], c02+c0[2], c03+c0[3]
		c10, c11, c12, c13 = c10+c1[0], c11+c1[1], c12+c1[2], c13+c1[3]
		c20, c21, c22, c23 = c20+c2[0], c21+c2[1], c22+c2[2], c23+c2[3]
		c30, c31, c32, c33 = c30+c3[0], c31+c3[1], c32+c3[2], c33+c3[3]
	}
	c0[0], c0[1], c0[2], c0[3] = c00, c01, c02, c03
	c1[0], c1[1], c1[2], c1[3] = c10, c11, c12, c13
	c2[0], c2[1], c2[2], c2[3] = c20, c21, c22, c23
	c3[0], c3[1], c3[2], c3[3] = c30, c31, c32, c33
}

// matmulOp runs rt.MatMul for f32 or f64.
func matmulOp(o *rt.MatMul) { byFloat(o.A.DType, o, matmulT[float64], matmulT[float32]) }

func matmulT[T floatT](o *rt.MatMul) {
	M, N, K, batch := o.M, o.N, o.K, o.Batch
	A := lin[T](o.A, int(rt.BatchExtent(o.Batch, o.StrideA, M, K)))
	B := lin[T](o.B, int(rt.BatchExtent(o.Batch, o.StrideB, K, N)))
	Y := lin[T](o.Y, int(rt.BatchExtent(o.Batch, o.StrideY, M, N)))
	base := gemm[T]{m: M, n: N, k: K, ta: o.TransA, tb: o.TransB, ldc: N,
		alpha: T(o.Alpha), beta: T(o.Beta), act: o.Act}
	base.lda, base.ldb = K, N
	if o.TransA {
		base.lda = M
	}
	if o.TransB {
		base.ldb = K
	}
	if o.Bias.Buf != nil {
		st := o.Bias.StridesOrContiguous()
		base.bias = elems[T](data(o.Bias))
		base.boff = int(o.Bias.Off) / o.Bias.DType.Size()
		base.brs, base.bcs = st[0], st[1]
	}
	// Batches that share B, with A and Y packed one after another, are one
	// GEMM of batch·M rows (a linear layer applied to a [batch, M, K]
	// input), when the bias does not differ by row.
	if batch > 1 && o.StrideB == 0 && !o.TransA && o.StrideA == M*K && o.StrideY == M*N && (base.bias == nil || base.brs == 0) {
		base.m, batch = M*batch, 1
	}
	w := workers()
	if batch >= 2 && w > 1 && int64(M)*int64(N)*int64(K) < 1<<21 && int64(batch)*int64(M)*int64(N)*int64(K) >= gemmParallelWork {
		pb := base // captured by the closure (only on this path)
		parallelFor(batch, 1, func(lo, hi int) {
			for b := lo; b < hi; b++ {
				g := pb
				g.a, g.b, g.c, g.threads = A[b*o.StrideA:], B[b*o.StrideB:], Y[b*o.StrideY:], 1
				g.runOne()
			}
		})
		return
	}
	for b := 0; b < batch; b++ {
		g := base
		g.a, g.b, g.c, g.threads = A[b*o.StrideA:], B[b*o.StrideB:], Y[b*o.StrideY:], w
		if g.serial() || g.m == 1 || g.n == 1 {
			g.runOne()
			continue
		}
		gp := new(gemm[T]) // the parallel driver's closures capture it
		*gp = g
		gp.run()
	}
}

// useAsm lets tests switch the assembly micro-kernels off to exercise the
// portable one.
var useAsm = true
