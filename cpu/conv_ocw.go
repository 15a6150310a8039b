package cpu

import (
	"bytes"
	"slices"

	"github.com/vrun-go/vrun/rt"
)

// Channels-in-lanes direct convolution (f32, AVX-512; ocw_amd64.s, and
// AVX2, ocw_avx2_amd64.s, which ocwPick leaves unused): the
// lanes of a vector are 16 output channels, as in onnxruntime's NCHWc
// kernels, but the input and output stay NCHW. The input planes are laid
// out as the direct convolutions lay them out (dconvPlan: padded, split
// into stride phases, so that tap t of output (oh, ow) reads the buffer
// at oh·wq + ow + offs[t]); a kernel call computes one tile of up to 6
// outputs of one output row for 64 output channels (8 for 48, 12 for 32,
// 16 for 16), broadcasting each input value once for all channels and
// reading the weights as vectors, packed [tap][64] per block of channels.
// Taps are summed in chunks of about 96 (24 KiB of packed weights, kept
// in L1 across the tiles of a task's rows; partial sums in a per-task
// NHWC scratch between chunks, where the last chunk leaves the finished
// tile with bias and a ReLU/Clip applied), and the finished rows of a
// task go into the NCHW output by 16 × 16 transposes (ocwStore).
//
// Where the wide direct kernels (dcwRun, outputs in lanes) compute whole
// blocks of 32 outputs along the phase-plane rows, so that a 13-wide
// plane uses 169 of 224 lanes, these use every lane whatever the plane's
// width; but their tiles go out through transposes, and the packed
// weights are a cached copy compared with the weights in full on every run
// (unless they lie in a buffer marked constant), so they pay only on
// short rows with many taps (ocwPick).

// ocwMode forces the channels-in-lanes kernels on (1) or off (-1) for
// every convolution they can run; 0 lets ocwPick choose (tests and
// benchmarks, VRUN_CPU_OCW).
var ocwMode = 0

// ocwCan reports whether the channels-in-lanes kernels can run o.
func ocwCan(o *rt.Conv) bool {
	return ocwMaxP(1) > 0 && o.X.DType == rt.F32 && o.Groups == 1 && o.C > 1 && o.K >= 1 && o.OH > 0 && o.OW > 0
}

// useOcw reports whether o runs on the channels-in-lanes kernels.
func useOcw(o *rt.Conv) bool {
	if ocwMode < 0 || !ocwCan(o) {
		return false
	}
	return ocwMode > 0 || ocwPick(o)
}

// ocwPick is the shape heuristic, from BenchmarkConvShapes (single-thread
// CPU time against the wide direct kernels, three alternating rounds at
// load 12-16): the channels-in-lanes kernels win only on windows larger
// than 1×1 over short rows (at most 16 outputs, where dcwRun's 32-output
// blocks waste a quarter of their lanes or more) with many taps and
// output channels in whole blocks of 64: squeezenet's 64→256 3×3 on 13×13
// 374-419 → 328-356 µs, 48→192 202-211 → 190-217. They lose on wider
// planes (16→64 3×3 on 55×55 370-383 → 412-474, 32→128 on 27×27 338-354
// → 355-379) and on 1×1 convolutions (128→16 on 55×55 106-163 → 140-223,
// 512→1000 on 13×13 1134-1436 → 1624-2047: the scatters of the stores
// and the weights compared every run outweigh the lanes saved), and the
// weights are packed into a cached copy compared in full on every run,
// so large ones (ResNet's 512-channel 3×3, 2.4 M weights) are left to
// the other paths unless they lie in a buffer marked constant (as the
// engine's are: no comparison and no copy; ResNet's 512 3×3 on 7×7,
// single-thread CPU µs at load 1-1.4, three alternating rounds: 1250-1458
// against 1426-1556 on the wide direct kernels, whose 64-output blocks
// use 49 of 64 lanes). Those figures were taken when the kernels stored
// each vector with a scatter. Storing the tiles through ocwStore's
// transposes instead (2026-12-06, 2-vCPU Xeon, single thread, five
// alternating rounds, µs) took 16→64 3×3 on 55×55 from 346-360 to
// 330-344 (the direct kernels 301-335), 32→128 on 27×27 301-322 →
// 289-300 (285-325) and 128→16 1×1 on 55×55 126-157 → 115-128 (93-103);
// at two threads they still lose there (16→64 3×3 on 55×55 202-229
// against 162-177), so the pick is unchanged.
//
// With AVX2 the kernels take 16 channels (two vectors) and up to 6
// positions a call, their tiles copied out in Go; they lose or tie
// wherever the other paths are picked
// (single-thread CPU µs, best of four at load 4-5, against the wide
// direct kernels: ResNet's 512 3×3 on 7×7 3522 against 3290, 64→128
// 3×3 stride 2 1841 against 1703, 1×1 960→320 on 7×7 651 against 485;
// they beat the direct kernels on ResNet's 256 3×3 on 14×14, 2792
// against 3477, and squeezenet's 48→192 on 13×13, 358 against 396, but
// not Winograd F(2,3), 2069-2233 and 358-419), so they run only when
// forced (ocwMode).
//
// With several workers the direct kernels split a few images by bands or
// give each worker its own input planes (bandConv, workerInput), while
// these kernels share one: on two threads (Zen 5, µs, two rounds) the
// direct kernels win on 13×13 and 14×14 (squeezenet's 48→192 105-120
// against 131-133, 64→256 191-267 against 235, ResNet's 256 3×3 on 14×14
// 745-785 against 819-952) and lose only on 7×7 (ResNet's 512 3×3
// 830-860 against 776-790), so there the rows must be at most 8 long.
func ocwPick(o *rt.Conv) bool {
	if ocwMaxV() < 4 {
		return false
	}
	taps := o.C * o.KH * o.KW
	maxOW := 16
	if workers() > 1 {
		maxOW = 8
	}
	return o.KH*o.KW > 1 && o.StrideH == 1 && o.StrideW == 1 && o.OW <= maxOW &&
		taps >= 432 && o.K >= 128 && o.K%64 == 0 && (o.K*taps <= 1<<20 || constRef(o.W))
}

// ocwBlocks returns the output-channel blocks of K channels: block i is
// channels [16·start[i], 16·start[i+1]) clipped to K, at most mv
// vectors (ocwMaxV).
func ocwBlocks(K, mv int) (nb int, vecs func(i int) (k0, nv int)) {
	nvec := (K + 15) / 16
	nb = (nvec + mv - 1) / mv
	return nb, func(i int) (int, int) {
		v0 := mv * i
		return 16 * v0, min(mv, nvec-v0)
	}
}

// ocwPacked is the packed weights and bias of one weight tensor.
type ocwPacked struct {
	key     *float32
	bkey    *float32  // the bias's address (nil: none)
	src     []float32 // the weights it was packed from
	bias    []float32 // the bias it was packed with (nil: none)
	w, b    []float32
	taps, k int
	mv      int // vectors a block (ocwBlocks)
}

// ocwCache keeps the packed weights of recent convolutions, at most
// 64 MiB, oldest dropped first.
var ocwCache = weightCache[ocwPacked]{limit: 64 << 20, size: func(e *ocwPacked) int { return 4 * (len(e.src) + len(e.w)) }}

// ocwPack packs w ([K, taps]) and bias (nil: none) into blocks of 16·nv
// channels (at most mv vectors), [tap][16·nv] each, zero past K.
func ocwPack(w, bias []float32, K, taps, mv int, pw, pb []float32) {
	nb, vecs := ocwBlocks(K, mv)
	for i := 0; i < nb; i++ {
		k0, nv := vecs(i)
		kb := min(16*nv, K-k0)
		dst := pw[k0*taps : k0*taps+16*nv*taps]
		for t := 0; t < taps; t++ {
			d := dst[t*16*nv : (t+1)*16*nv]
			for k := 0; k < kb; k++ {
				d[k] = w[(k0+k)*taps+t]
			}
			clear(d[kb:])
		}
	}
	clear(pb)
	copy(pb, bias)
}

// ocwWeights returns the packed weights and bias of w and bias, from the
// cache when they are unchanged: compared with the entry's copy, except
// where they lie in a buffer marked constant (wConst, bConst), whose
// entries are dropped on any write.
func ocwWeights(w, bias []float32, K, taps int, wConst, bConst bool) (*ocwPacked, func()) {
	w = w[:K*taps]
	var bkey *float32
	if bias != nil {
		bias = bias[:K]
		bkey = &bias[0]
	}
	key := &w[0]
	kp := (K + 15) / 16 * 16
	mv := ocwMaxV()
	e := ocwCache.find(func(c *ocwPacked) bool {
		return c.key == key && c.bkey == bkey && c.taps == taps && c.k == K && c.mv == mv
	})
	if e != nil && (wConst || (e.src != nil && bytes.Equal(asBytes(e.src), asBytes(w)))) &&
		(bConst || (e.bias != nil && bytes.Equal(asBytes(e.bias), asBytes(bias))) || bias == nil) {
		return e, func() {}
	}
	// Weights in a constant buffer are not copied: the entry is dropped
	// when the buffer is written or freed, and an entry without a copy
	// matches only constant weights.
	ne := &ocwPacked{key: key, bkey: bkey, taps: taps, k: K, mv: mv, w: make([]float32, kp*taps), b: make([]float32, kp)}
	if !wConst {
		ne.src = slices.Clone(w)
	}
	if bias != nil && !bConst {
		ne.bias = slices.Clone(bias)
	}
	ocwPack(w, bias, K, taps, mv, ne.w, ne.b)
	ocwCache.replace(e, ne)
	return ne, func() {}
}

// ocwTiles splits a row of n outputs into the fewest tiles of at most
// pm, of sizes differing by at most one; tile i is [start(i), start(i+1)).
func ocwTiles(n, pm int) (nt int, start func(i int) int) {
	nt = (n + pm - 1) / pm
	return nt, func(i int) int { return i * n / nt }
}

// ocwChunkBytes bounds the packed weights of one chunk of taps, which
// the tiles of a task's rows all read (so that they stay in L1).
var ocwChunkBytes = 24 << 10

// ocwConv runs o (useOcw) on x, w, bias (nil: none) and y.
func ocwConv(o *rt.Conv, x, w, bias, y []float32) {
	p := newDconvPlan(o, w, bias)
	defer func() {
		p.o = nil
		dconvPlans.Put(p)
	}()
	pk, done := ocwWeights(w, bias, o.K, p.taps, constRef(o.W), constRef(o.Bias))
	defer done()
	lo, hi, clamp := clampAct(o.Act)
	nb, vecs := ocwBlocks(o.K, pk.mv)
	P := o.OH * o.OW
	bufLen := p.buf
	if p.inPlace {
		bufLen = 0
	}
	bs := getScratch[float32](bufLen)
	defer putScratch(bs)
	hiOff := maxOffset("ocwConv", p.offs)
	// Tasks: (block, group of rows), block-major so that a worker's
	// tasks of one block reuse its weights; about 128 outputs a task,
	// more groups where that leaves the workers under two tasks each or
	// a count of tasks that parallelFor's chunks (two a worker) do not
	// split evenly; groups of rows differ by at most one row.
	ngr := (o.OH + max(1, (128+o.OW-1)/o.OW) - 1) / max(1, (128+o.OW-1)/o.OW)
	if w := workers(); w > 1 {
		for ngr < o.OH && (nb*ngr < 2*w || (nb*ngr)%(2*w) != 0) && nb*ngr < 16*w {
			ngr++
		}
	}
	rows := (o.OH + ngr - 1) / ngr
	tasks := nb * ngr
	// Taps in chunks of at most ocwChunkBytes of weights (whole windows).
	tc := p.taps
	if lim := max(1, ocwChunkBytes/(64*pk.mv)); p.taps > lim+lim/4 {
		nch := (p.taps + lim - 1) / lim
		tc = (p.taps + nch - 1) / nch
		if kk := o.KH * o.KW; tc > kk {
			tc = (tc + kk - 1) / kk * kk
		}
	}
	for n := 0; n < o.N; n++ {
		in := p.sharedInput(x, *bs, n, 0)
		yn := y[n*o.K*P : (n+1)*o.K*P]
		parallelFor(tasks, 1, func(t0, t1 int) {
			as := getScratch[float32](rows*o.OW*64 + ocwStoreSlack(pk.mv))
			acc := *as
			for t := t0; t < t1; t++ {
				i, gr := t/ngr, t%ngr
				k0, nv := vecs(i)
				wb := pk.w[k0*p.taps : (k0+16*nv)*p.taps]
				bb := pk.b[k0 : k0+16*nv]
				nt, start := ocwTiles(o.OW, ocwMaxP(nv))
				oh0, oh1 := gr*o.OH/ngr, (gr+1)*o.OH/ngr
				for c0 := 0; c0 < p.taps; c0 += tc {
					c1 := min(p.taps, c0+tc)
					offs, wc := p.offs[c0:c1], wb[c0*16*nv:]
					for oh := oh0; oh < oh1; oh++ {
						for j := 0; j < nt; j++ {
							ow0, ow1 := start(j), start(j+1)
							a := acc[((oh-oh0)*o.OW+ow0)*16*nv:]
							ocwRun(nv, ow1-ow0, in[oh*p.wq+ow0:], offs, hiOff, wc, bb, a, c0 == 0, c1 == p.taps, clamp, lo, hi)
						}
					}
				}
				// The rows oh0..oh1 are one run of positions in each
				// output plane.
				ocwStore(nv, min(16*nv, o.K-k0), (oh1-oh0)*o.OW, acc, yn[k0*P+oh0*o.OW:], P)
			}
			putScratch(as)
		})
		if o.Act.Fn != rt.Copy && !clamp {
			actApply(o.Act.Fn, o.Act.Alpha, o.Act.Beta, yn)
		}
	}
}

// ocwStoreGo is ocwStore in Go: y[k*ldy + j] = acc[j*ld + k] for k < kb
// and j < npos.
func ocwStoreGo(ld, kb, npos int, acc, y []float32, ldy int) {
	_ = acc[(npos-1)*ld+kb-1]
	for k := 0; k < kb; k++ {
		yr := y[k*ldy : k*ldy+npos]
		for j := range yr {
			yr[j] = acc[j*ld+k]
		}
	}
}
