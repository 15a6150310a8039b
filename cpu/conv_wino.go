package cpu

import (
	"bytes"
	"math"
	"slices"

	"github.com/vrun-go/vrun/rt"
)

// Winograd F(4,3) and F(2,3) convolution (f32, 3×3, stride 1, no
// dilation, one group, any padding), described here for F(4,3) (F(2,3)
// is the same with 2×2 tiles of 4×4 patches, 4 phases and 16 GEMMs):
// each 4×4 block of outputs (a tile) of output channel k is
//
//	Y = A^T [ sum over c of (G w[k][c] G^T) ⊙ (B^T d[c] B) ] A + bias[k]
//
// with d[c] the 6×6 input patch of the tile in channel c (Lavin and Gray,
// interpolation points 0, ±1, ±2, ∞). Per image:
//
//  1. Input transform: the input planes are copied, zero-padded, into 16
//     phase planes each (row and column mod 4), so that element (i, j) of
//     tile (th, tw) is phase (i mod 4, j mod 4) at row th + i/4, column
//     tw + j/4: for a flat tile index q = th·wq + tw (wq = tiles per row
//     + 1) each of the 36 patch elements is the phase buffer at q plus a
//     fixed offset. B^T d B is then two 6-tap "convolutions" of that
//     buffer with B^T's rows (rows of the patch, then columns), run by
//     the wide direct kernels (dcwRun, six outputs a call) over the tiles
//     of a block of channels at once, into V[ξ][c][q] (ξ = 6a+b).
//  2. 36 GEMMs, M[ξ] (K × tiles) = U[ξ] (K × C) · V[ξ] (C × tiles), one per
//     transformed position ξ, on the GEMM kernels (each on one worker,
//     the 36 split between the workers); the bias is added to M[(1,1)]
//     by the GEMM's epilogue (column 1 of A^T is all ones).
//  3. Output transform: A^T M A, again two 6-tap passes through dcwRun
//     over a block of output channels, a ReLU/Clip applied as the second
//     stores 16 phase planes, which are then interleaved into the output
//     plane (other activations after).
//
// The weights are transformed (U = (G ⊗ G) · w, one GEMM) when first
// seen and cached with a copy of the weights they came from, compared in
// full on every run (winoWeightsFor) unless they lie in a buffer marked
// constant (rt.ConstantBuffer: the engine marks its inference weights),
// whose entries are dropped on any write to it. The columns tw = tiles per row (the phase
// planes' extra column) are computed and dropped.
//
// F(4,3) multiplies the rounding errors of f32 by the transforms'
// coefficients: TestWino states the tolerance.

// winoMode forces Winograd F(4,3) (1) or F(2,3) (2) wherever it
// applies, or neither (-1); 0 lets winoPick choose (tests and benchmarks,
// VRUN_CPU_WINO).
var winoMode = 0

// winoKind is one Winograd algorithm F(m, 3): m×m output tiles from
// α×α input patches, α = m+2, with its transforms in f32, row-major: bt
// (B^T, α × α), at (A^T, m × α) and gg (G ⊗ G, α² × 9: row ξ = α·a+b,
// column tap 3i+j).
type winoKind struct {
	m, a       int
	bt, at, gg []float32
}

// winoF4 is F(4,3) (Lavin and Gray, points 0, ±1, ±2, ∞); winoF2 is
// F(2,3) (points 0, ±1, ∞): 2.25× fewer multiplications than a direct
// convolution instead of 4×, but 16 GEMMs and 16/9 of the weights
// instead of 36 and 4×, and more tiles per plane.
var (
	winoF4 = newWinoKind(4, [][]float64{
		{4, 0, -5, 0, 1, 0},
		{0, -4, -4, 1, 1, 0},
		{0, 4, -4, -1, 1, 0},
		{0, -2, -1, 2, 1, 0},
		{0, 2, -1, -2, 1, 0},
		{0, 4, 0, -5, 0, 1},
	}, [][]float64{
		{1.0 / 4, 0, 0},
		{-1.0 / 6, -1.0 / 6, -1.0 / 6},
		{-1.0 / 6, 1.0 / 6, -1.0 / 6},
		{1.0 / 24, 1.0 / 12, 1.0 / 6},
		{1.0 / 24, -1.0 / 12, 1.0 / 6},
		{0, 0, 1},
	}, [][]float64{
		{1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 0},
		{0, 1, 1, 4, 4, 0},
		{0, 1, -1, 8, -8, 1},
	})
	winoF2 = newWinoKind(2, [][]float64{
		{1, 0, -1, 0},
		{0, 1, 1, 0},
		{0, -1, 1, 0},
		{0, 1, 0, -1},
	}, [][]float64{
		{1, 0, 0},
		{0.5, 0.5, 0.5},
		{0.5, -0.5, 0.5},
		{0, 0, 1},
	}, [][]float64{
		{1, 1, 1, 0},
		{0, 1, -1, -1},
	})
)

func newWinoKind(m int, bt, g, at [][]float64) *winoKind {
	k := &winoKind{m: m, a: m + 2}
	for _, r := range bt {
		for _, v := range r {
			k.bt = append(k.bt, float32(v))
		}
	}
	for _, r := range at {
		for _, v := range r {
			k.at = append(k.at, float32(v))
		}
	}
	for a := range g {
		for b := range g {
			for i := 0; i < 3; i++ {
				for j := 0; j < 3; j++ {
					k.gg = append(k.gg, float32(g[a][i]*g[b][j]))
				}
			}
		}
	}
	return k
}

// winoApplies reports whether o's shape is one winoConv runs.
func winoApplies(o *rt.Conv) bool {
	return o.X.DType == rt.F32 && o.KH == 3 && o.KW == 3 && o.StrideH == 1 && o.StrideW == 1 &&
		o.DilH == 1 && o.DilW == 1 && o.Groups == 1 && o.C > 0 && o.K > 0 && o.OH > 0 && o.OW > 0 &&
		o.H > 0 && o.Width > 0
}

// useWino returns the Winograd algorithm o runs with, or nil.
func useWino(o *rt.Conv) *winoKind {
	switch {
	case winoMode < 0 || !winoApplies(o):
		return nil
	case winoMode == 2:
		return winoF2
	case winoMode > 0:
		return winoF4
	}
	if max(dcwMaxKB(4), dcwMaxKB(2)) < 6 {
		return nil
	}
	return winoPick(o, winoRatesAt(kernelLevel()))
}

// winoPick is the shape heuristic: the Winograd algorithm whose estimated
// CPU time is below the wide direct kernels' (and the other's), or nil.
// The direct kernels run at about winoDirectRate; Winograd F(m,3) costs
// its α² GEMMs (K × C × tiles, at winoGemmRate, less for C below 64:
// short reductions over C),
// reading the transformed weights (α²·K·C floats per image, from memory
// once they outgrow the caches) and comparing the weights with the
// cached copy, and its transforms (a fixed time per input phase-plane
// element and per output tile element: per input and output element
// about the same for both). Fitted to BenchmarkConvShapes (CPU µs per
// op, load 16, two runs each, F(4,3) / F(2,3) / direct): ResNet 64 on
// 56×56 918-1059 / 1090-1110 / 1313-1433, 128 on 28×28 822-889 /
// 943-969 / 1293-1299, 256 on 14×14 1625-1719 / 1079-1083 / 1415-1476,
// 512 on 7×7 5104-5165 / 2682-2934 / 1703; squeezenet 64→256 on 13×13
// 511-516 / 338-404 / 367-390, 32→128 on 27×27 423-614 / 369-396 /
// 355-368, 48→192 on 13×13 379-400 / 258-269 / 232-250, 16→64 on 55×55
// (F(4,3)) 424-657 / - / 367-371. The model puts these within about 15 %
// and picks F(4,3) for ResNet's 64 and 128 layers, F(2,3) for its 256
// layers and the direct kernels for the rest: on small planes F(4,3)'s
// GEMMs are narrow (tiles, plus the junk column, in 32-wide panels) and
// its transformed weights, 4× the weights, come from memory; F(2,3) has
// four times the tiles and 16/9 of the weights.
//
// With AVX2 (8-lane kernels, 6 output channels a direct call) the
// rates are refitted (winoRatesAt) to BenchmarkConvShapes' single-thread
// CPU µs, best of six at load 6-7, F(4,3) / F(2,3) / direct: ResNet 64 on
// 56×56 1780 / 2298 / 3552, 128 on 28×28 1914 / 1978 / 2923, 256 on
// 14×14 3285 / 2228 / 3797, 512 on 7×7 6754 / 4558 / 3375; squeezenet
// 64→256 on 13×13 818 / 622 / 817, 32→128 on 27×27 701 / 643 / 697,
// 48→192 on 13×13 579 / 419 / 422, 16→64 on 55×55 858 / 942 / 727: the
// same picks for ResNet, and F(2,3) for squeezenet's 64→256 too.
func winoPick(o *rt.Conv, r winoRates) *winoKind {
	C, K, N := float64(o.C), float64(o.K), float64(o.N)
	best := N * 2 * 9 * C * K * float64(o.OH*o.OW) / r.direct
	var pick *winoKind
	for _, wk := range []*winoKind{winoF4, winoF2} {
		p := newWinoPlan(o, wk)
		a2 := float64(wk.a * wk.a)
		gemm := 2 * a2 * C * K * float64(p.l) / (r.gemm * min(1, C/64))
		weights := a2 * 4 * C * K / r.mem
		trans := (C*float64(p.pl) + K*float64(p.l)) * float64(wk.m*wk.m) / 16 * r.trans
		compare := 2 * 9 * 4 * C * K / r.mem
		if t := N*(gemm+weights+trans) + compare; t < best {
			best, pick = t, wk
		}
	}
	return pick
}

// winoRates are winoPick's rates and costs: the direct kernels' and
// the GEMMs' flops per second, bytes per second from memory, and seconds
// per transformed element.
type winoRates struct{ direct, gemm, mem, trans float64 }

// winoRatesAt returns the rates fitted at kernel level lv: with AVX-512
// or with AVX2 (see winoPick).
func winoRatesAt(lv int) winoRates {
	if lv < levelAVX512 {
		return winoRates{direct: 70e9, gemm: 125e9, mem: 10e9, trans: 40e-9}
	}
	return winoRates{direct: 170e9, gemm: 150e9, mem: 25e9, trans: 15e-9}
}

// winoPlan is the tile layout of a Winograd convolution.
type winoPlan struct {
	wk     *winoKind
	th, tw int // tiles per column and row
	hq, wq int // a phase plane's rows and columns
	pl     int // a phase plane's elements (a channel's stride in V)
	l      int // flat tile range per plane: th·wq (a channel's stride in M)
	cb, kb int // input and output channels per transform block
}

// winoBlock is about the flat length that one transform call covers
// (channel blocks of about this many elements), so that the kernels run
// long rows on small planes and the block's buffers stay in L2.
const winoBlock = 1024

func newWinoPlan(o *rt.Conv, wk *winoKind) winoPlan {
	p := winoPlan{wk: wk}
	m := wk.m
	p.th, p.tw = (o.OH+m-1)/m, (o.OW+m-1)/m
	// Patch rows reach phase row th + (α-1)/m = th + 1 (m = 2 or 4).
	p.hq, p.wq = p.th+1, p.tw+1
	p.pl = p.hq * p.wq
	p.l = p.th * p.wq
	p.cb = max(1, min(o.C, winoBlock/p.pl))
	p.kb = max(1, min(o.K, winoBlock/p.l))
	return p
}

// fill writes the zero-padded phase planes of cb input planes xs (H × W
// each, HW apart) into dst: phase (a, b) (row and column mod m) of
// channel c at ((m·a+b)·cb + c)·pl holds padded element (m·u+a, m·v+b)
// at u·wq + v.
func (p *winoPlan) fill(o *rt.Conv, xs, dst []float32, cb int) {
	H, W, m := o.H, o.Width, p.wk.m
	if p.fillRows(o, xs, dst, cb) {
		return
	}
	for c := 0; c < cb; c++ {
		xc := xs[c*H*W : (c+1)*H*W]
		for a := 0; a < m; a++ {
			for b := 0; b < m; b++ {
				ph := dst[((a*m+b)*cb+c)*p.pl : ((a*m+b)*cb+c+1)*p.pl]
				// Columns v read input column m·v + b - PadL.
				lo, hi, iw0 := phaseSpan(W, p.wq, o.PadL, b, m)
				for u := 0; u < p.hq; u++ {
					ih := m*u + a - o.PadT
					d := phaseRow(ph[u*p.wq:(u+1)*p.wq], ih, H, lo, hi)
					if d == nil {
						continue
					}
					xr := xc[ih*W+iw0:]
					_ = xr[m*(len(d)-1)]
					for v := range d {
						d[v] = xr[m*v]
					}
				}
			}
		}
	}
}

// fillRows is fill with the deinterleave kernels: each input row is
// copied, zero-padded, into a scratch row whose elements are then split
// by 2 (and, for m = 4, by 2 again) into the m column phases. It reports
// false where the kernel is missing.
func (p *winoPlan) fillRows(o *rt.Conv, xs, dst []float32, cb int) bool {
	if !deinterleave2(nil, nil, nil) {
		return false
	}
	H, W, wq, m := o.H, o.Width, p.wq, p.wk.m
	ts := getScratch[float32](8 * wq)
	defer putScratch(ts)
	prow, e, od := (*ts)[:m*wq], (*ts)[4*wq:6*wq], (*ts)[6*wq:8*wq]
	// prow[s] = x[ih][s-PadL] for s in [lo, hi), else 0.
	lo := min(o.PadL, m*wq)
	hi := max(lo, min(m*wq, o.PadL+W))
	clear(prow[:lo])
	clear(prow[hi:])
	step := cb * p.pl // from phase (a, b) to (a, b+1)
	for c := 0; c < cb; c++ {
		xc := xs[c*H*W : (c+1)*H*W]
		for r := 0; r < m*p.hq; r++ {
			a, u := r%m, r/m
			base := (a*m*cb+c)*p.pl + u*wq
			ih := r - o.PadT
			if ih < 0 || ih >= H || hi == lo {
				for b := 0; b < m; b++ {
					clear(dst[base+b*step : base+b*step+wq])
				}
				continue
			}
			copy(prow[lo:hi], xc[ih*W+lo-o.PadL:])
			d0, d1 := dst[base:base+wq], dst[base+step:base+step+wq]
			if m == 2 {
				if !deinterleave2(d0, d1, prow) {
					return false
				}
				continue
			}
			d2, d3 := dst[base+2*step:base+2*step+wq], dst[base+3*step:base+3*step+wq]
			if !deinterleave2(e, od, prow) || !deinterleave2(d0, d2, e) || !deinterleave2(d1, d3, od) {
				return false
			}
		}
	}
	return true
}

// winoMix sets y[k*ldy+q] = bias[k] + sum over t of w[k*ldw+t] *
// x[q+offs[t]] for k < kb and q < n, clamped to [lo, hi] when clamp: with
// the wide direct kernels or in Go.
func winoMix(kb, n int, x []float32, offs []int, w []float32, ldw int, bias, y []float32, ldy int, clamp bool, lo, hi float32) {
	if kb <= dcwMaxKB(4) {
		dcwRun(4, kb, n, x, offs, w, ldw, bias, y, ldy, clamp, false, lo, hi, 1, 0, 0)
		return
	}
	if mk := dcwMaxKB(2); mk > 0 {
		for k0 := 0; k0 < kb; k0 += mk {
			k1 := min(kb, k0+mk)
			dcwRun(2, k1-k0, n, x, offs, w[k0*ldw:], ldw, bias[k0:], y[k0*ldy:], ldy, clamp, false, lo, hi, 1, 0, 0)
		}
		return
	}
	for k := 0; k < kb; k++ {
		yr := y[k*ldy : k*ldy+n]
		for i := range yr {
			yr[i] = bias[k]
		}
		for t, off := range offs {
			wv := w[k*ldw+t]
			if wv == 0 {
				continue
			}
			xs := x[off : off+n]
			for i := range yr {
				yr[i] += wv * xs[i]
			}
		}
		if clamp {
			for i, v := range yr {
				if v < lo {
					yr[i] = lo
				} else if v > hi {
					yr[i] = hi
				}
			}
		}
	}
}

// winoZeros is a bias of zeros for the transforms.
var winoZeros [6]float32

// winoConv runs o (winoApplies) with algorithm wk on x, w, bias (nil:
// none) and y.
func winoConv(o *rt.Conv, wk *winoKind, x, w, bias, y []float32) {
	p := newWinoPlan(o, wk)
	m, al := wk.m, wk.a
	a2 := al * al
	N, C, K := o.N, o.C, o.K
	HW, P, L, pl := o.H*o.Width, o.OH*o.OW, p.l, p.pl
	U, release := winoWeightsFor(wk, w, K, C, constRef(o.W))
	defer release()
	vs, ms := getScratch[float32](a2*C*pl), getScratch[float32](a2*K*L)
	V, M := *vs, *ms
	lo, hi, clamp := clampAct(o.Act)
	if !clamp {
		lo, hi = float32(math.Inf(-1)), float32(math.Inf(1))
	}
	ncb, nkb := (C+p.cb-1)/p.cb, (K+p.kb-1)/p.kb
	// Each step's blocks are dealt from the workers' home ranges
	// (homesFor), so that a worker writes the same parts of V and M run
	// after run, which it holds from the last: two threads, in-process
	// A/B on resnet18 (60 alternating rounds of 10 runs), median 16.06 →
	// 15.36 and 16.64 → 15.84 ms. Still, the steps each write what the
	// other worker read in the step before, and two threads gain little
	// over one here (ResNet's 64 3×3 on 56×56 on a 2-vCPU Zen 5: 0.87-0.90
	// ms on one, 0.64-0.72 on two, where the direct kernels scale 1.75×).
	// Splitting each image into bands of tile rows, each worker running
	// all three steps on its own bands, cost more than it saved (band
	// halos and narrow GEMMs: 0.81-0.99 ms on two threads).
	pf := parallelFor
	if homesMode >= 0 {
		pf = homesFor
	}
	for n := 0; n < N; n++ {
		// Input transform, a block of cb channels at a time: V[α·a+b][c]
		// (channel stride pl) = sum over i, j of BT[a][i] BT[b][j] d[i][j],
		// as tmp[α·i+b] = sum over j of BT[b][j] d[i][j], then V[α·a+b] =
		// sum over i of BT[a][i] tmp[α·i+b].
		pf(ncb, 1, func(b0, b1 int) {
			// The junk column of the last tile row reads wq+1 past the
			// last phase (m = 2): zeros.
			nb := m * m * p.cb * pl
			bs, ts := getScratch[float32](nb+p.wq+1), getScratch[float32](a2*p.cb*pl)
			buf, tmp := *bs, *ts
			clear(buf[nb:])
			var offs [6]int
			for blk := b0; blk < b1; blk++ {
				c0 := blk * p.cb
				cb := min(p.cb, C-c0)
				S := cb * pl // a phase's (and a tmp row's) stride
				nq := (cb-1)*pl + L
				p.fill(o, x[(n*C+c0)*HW:(n*C+c0+cb)*HW], buf, cb)
				for i := 0; i < al; i++ {
					for j := 0; j < al; j++ {
						offs[j] = ((i%m)*m+j%m)*S + i/m*p.wq + j/m
					}
					winoMix(al, nq, buf, offs[:al], wk.bt, al, winoZeros[:], tmp[al*i*S:], S, false, 0, 0)
				}
				for b := 0; b < al; b++ {
					for i := 0; i < al; i++ {
						offs[i] = (al*i + b) * S
					}
					winoMix(al, nq, tmp, offs[:al], wk.bt, al, winoZeros[:], V[(b*C+c0)*pl:], al*C*pl, false, 0, 0)
				}
			}
			putScratch(bs)
			putScratch(ts)
		})
		// M[ξ] (K × tiles) = U[ξ] (K × C) · V[ξ] (C × tiles).
		pf(a2, 1, func(x0, x1 int) {
			for xi := x0; xi < x1; xi++ {
				g := gemm[float32]{m: K, n: L, k: C, a: U[xi*K*C:], lda: C, b: V[xi*C*pl:], ldb: pl,
					c: M[xi*K*L:], ldc: L, alpha: 1, threads: 1}
				if xi == al+1 && bias != nil {
					// Column 1 of A^T is all ones: the bias added to
					// M[(1,1)] adds it to all the outputs of the tile.
					g.bias, g.brs, g.beta = bias, 1, 1
				}
				g.run()
			}
		})
		// Output transform, a block of kb channels at a time: tmp[m·a+j]
		// = sum over b of AT[j][b] M[α·a+b], then out[m·i+j] = sum over
		// a of AT[i][a] tmp[m·a+j], interleaved into Y.
		pf(nkb, 1, func(b0, b1 int) {
			os, ts, is := getScratch[float32](m*m*p.kb*L), getScratch[float32](al*m*p.kb*L), getScratch[float32](8*p.tw)
			out, tmp := *os, *ts
			var offs [6]int
			for blk := b0; blk < b1; blk++ {
				k0 := blk * p.kb
				kb := min(p.kb, K-k0)
				S := kb * L
				for a := 0; a < al; a++ {
					for b := 0; b < al; b++ {
						offs[b] = (al*a + b) * K * L
					}
					winoMix(m, S, M[k0*L:], offs[:al], wk.at, al, winoZeros[:], tmp[m*a*S:], S, false, 0, 0)
				}
				for j := 0; j < m; j++ {
					for a := 0; a < al; a++ {
						offs[a] = (m*a + j) * S
					}
					winoMix(m, S, tmp, offs[:al], wk.at, al, winoZeros[:], out[j*S:], m*S, clamp, lo, hi)
				}
				for k := k0; k < k0+kb; k++ {
					yk := y[(n*K+k)*P : (n*K+k+1)*P]
					p.interleave(o, out[(k-k0)*L:], S, yk, *is)
					if o.Act.Fn != rt.Copy && !clamp {
						actApply(o.Act.Fn, o.Act.Alpha, o.Act.Beta, yk)
					}
				}
			}
			putScratch(os)
			putScratch(ts)
			putScratch(is)
		})
	}
	putScratch(vs)
	putScratch(ms)
}

// interleave copies the m² output phase planes out (phase (i, j) at
// (m·i+j)·ld, tile (th, tw) at th·wq + tw) into the output plane yk.
func (p *winoPlan) interleave(o *rt.Conv, out []float32, ld int, yk []float32, scratch []float32) {
	OH, OW, m := o.OH, o.OW, p.wk.m
	if tw := p.tw; len(scratch) >= 8*tw && interleave2(nil, nil, nil) {
		// Rows of m·tw: for m = 4, even = (phase 0, phase 2), odd = (1,
		// 3), then (even, odd); for m = 2, (phase 0, phase 1).
		e, od, row := scratch[:2*tw], scratch[2*tw:4*tw], scratch[4*tw:4*tw+m*tw]
		for th := 0; th < p.th; th++ {
			for i := 0; i < m && m*th+i < OH; i++ {
				oh := m*th + i
				src := func(j int) []float32 { return out[(m*i+j)*ld+th*p.wq : (m*i+j)*ld+th*p.wq+tw] }
				yr := yk[oh*OW : (oh+1)*OW]
				dst := row
				if OW == m*tw {
					dst = yr
				}
				ok := true
				if m == 2 {
					ok = interleave2(dst, src(0), src(1))
				} else {
					ok = interleave2(e, src(0), src(2)) && interleave2(od, src(1), src(3)) && interleave2(dst, e, od)
				}
				if !ok {
					panic("cpu: Winograd: no interleave kernel")
				}
				if OW != m*tw {
					copy(yr, row)
				}
			}
		}
		return
	}
	for th := 0; th < p.th; th++ {
		for i := 0; i < m; i++ {
			oh := m*th + i
			if oh >= OH {
				break
			}
			yr := yk[oh*OW : (oh+1)*OW]
			for j := 0; j < m; j++ {
				src := out[(m*i+j)*ld+th*p.wq : (m*i+j)*ld+th*p.wq+p.tw]
				nv := (OW - j + m - 1) / m // columns m·tw+j < OW
				src = src[:nv]
				for tw, v := range src {
					yr[m*tw+j] = v
				}
			}
		}
	}
}

// winoCached is a transformed weight tensor: u = (G ⊗ G) · src, kept
// with a copy of the weights it was made from.
type winoCached struct {
	wk     *winoKind
	k      int      // output channels
	key    *float32 // the weights' address
	src, u []float32
	misses int // times the weights at key were found changed
}

// winoCache keeps the transformed weights of recent Winograd
// convolutions, at most 256 MiB of them, oldest dropped first. An
// entry is used only when the weights at its address still equal its
// copy (compared in full on every run: a read of the weights, where the
// transform reads them and writes four times as much); weights found
// changed twice (trained ones) are transformed into scratch every run.
var winoCache = weightCache[winoCached]{limit: 256 << 20, size: func(e *winoCached) int { return 4 * (len(e.src) + len(e.u)) }}

// winoWeightsFor returns U[ξ][k][c] = sum over taps of GG[ξ][tap]
// w[k][c][tap] for the K × C kernels w, and a function to call when done
// with it. The cached U is used when w equals its copy, or without the
// comparison when w lies in a buffer marked constant (wConst).
func winoWeightsFor(wk *winoKind, w []float32, K, C int, wConst bool) ([]float32, func()) {
	w = w[:K*C*9]
	key := &w[0]
	e := winoCache.find(func(c *winoCached) bool { return c.key == key && c.wk == wk && c.k == K && len(c.src) == len(w) })
	if e != nil && (wConst || bytes.Equal(asBytes(e.src), asBytes(w))) {
		return e.u, func() {}
	}
	if e != nil && e.misses >= 1 {
		e.misses++
		us := getScratch[float32](wk.a * wk.a * K * C)
		winoTransformWeights(wk, w, *us, K, C)
		return *us, func() { putScratch(us) }
	}
	ne := &winoCached{wk: wk, k: K, key: key, src: slices.Clone(w), u: make([]float32, wk.a*wk.a*K*C)}
	if e != nil {
		ne.misses = e.misses + 1
	}
	winoTransformWeights(wk, w, ne.u, K, C)
	winoCache.replace(e, ne)
	return ne.u, func() {}
}

// winoTransformWeights sets u[ξ][k][c] = sum over taps of GG[ξ][tap]
// w[k][c][tap] (one GEMM).
func winoTransformWeights(wk *winoKind, w, u []float32, K, C int) {
	g := gemm[float32]{m: wk.a * wk.a, n: K * C, k: 9, a: wk.gg, lda: 9, b: w, ldb: 9, tb: true, c: u, ldc: K * C, alpha: 1}
	g.run()
}
