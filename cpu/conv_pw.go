package cpu

// Pointwise (1×1, stride 1, unpadded, ungrouped) f32 convolutions with
// AVX2 by column panels: Y[K, P] = W[K, C] · X[C, P] with P = OH·OW, a
// GEMM whose N (P) is small in MobileNetV2's late layers (49, 196). The
// wide direct path (directConv) calls its kernels once per block of 6
// output channels over all P outputs, reading X in place: every block
// streams all of X from L2 again (C rows of P floats, 196 bytes apart on
// 7×7 planes, so that most 16-float reads span two cache lines), and the
// P mod 16 columns left over take a masked pass of a whole vector (on 7×7
// planes, one column of 49 cost a fifth of the time in a CPU profile).
//
// Here X is first packed into panels of 16 columns (two vectors), each C
// rows of contiguous floats; then each panel, in chunks of at most pwKC
// taps (16 KiB, L1), meets the blocks of output channels in turn, whose
// weights are read in place (a broadcast a row and tap) from L2, by the
// kernels of pw_amd64.s (pw_amd64_gen.py): 6 rows of 16 columns, or, for
// a tail of 3 to 8 columns, 12 rows of 8, the kernels looping over the
// blocks themselves. A tail of 1 or 2 columns runs as dot products of
// the weight rows with the packed columns (gemvDotAsm), whose every lane
// is used. Bias and a ReLU/Clip are applied by the kernels as they store;
// a residual and other activations once a task's outputs are done, while
// they are in cache.
//
// The workers share tasks of a chunk of output channels (their weights at
// most about pwChunkBytes, so that they stay in L2 across the panels) and,
// where the chunks are too few, a group of panels, one task at a time.

import (
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// pwPanel is the width of the column panels: two AVX2 vectors.
const pwPanel = 16

// pwKC is the most taps (input channels) of one kernel call: a panel
// chunk of 16 KiB stays in L1 while the channel blocks pass.
const pwKC = 256

// pwChunkBytes bounds the weights of one task's channels, which stay in
// L2 while the task's panels pass.
const pwChunkBytes = 96 << 10

// pwInPlace forces the full panels to read X in place (1) or packed (-1)
// for tests and benchmarks; 0 leaves the choice to pwConv.
var pwInPlace = 0

// pwMode forces the panel path on (1) or off (-1) for tests and
// benchmarks; 0 leaves the choice to pwPick.
var pwMode = 0

// pwApplies reports whether the plan p (a wide direct convolution) runs
// by column panels: an f32 pointwise convolution that reads X in place,
// where the panel kernels exist (levelAVX2: the AVX-512 kernels keep
// their Zen 5 tuning), picked by pwPick unless forced.
func pwApplies(p *dconvPlan) bool {
	o := p.o
	if pwMode < 0 || pwMaxKB(pwPanel) == 0 || !p.inPlace || o.KH != 1 || o.KW != 1 || o.Groups != 1 ||
		o.DilH != 1 || o.DilW != 1 || p.nout != o.OH*o.OW {
		return false
	}
	return pwMode > 0 || pwPick(o)
}

// pwPick is the shape heuristic: planes of at most 256 outputs (14×14,
// 7×7), at least 96 output channels (the panels cost a copy of X, which
// fewer channels do not repay), at least 96 input channels (with two
// threads, 64→384 on 14×14 took 100 µs direct and 120 by panels, best
// of 150 rounds at load 7: the copy is a parallel job of its own, whose
// wait the direct path does not have) and an X of at least 4096 floats.
// Minimum single-thread wall µs of 60 alternating rounds at load 6-8, the wide
// direct kernels against the panels, ReLU6: 1×1 320→1280 on 7×7 635 →
// 438, 960→320 468 → 347, 160→960 219 → 166, 960→160 235 → 185,
// 576→160 142 → 110; 576→96 on 14×14 325 → 285, 96→576 249 → 236,
// 64→384 112 → 108, but 384→64 132 → 136, 192→64 56 → 68; on 28×28
// 192→32 125 → 156, 32→192 108 → 113, 64→384 450 → 420; SqueezeNet's
// on 13×13 512→1000 2423 → 1922, 64→256 66 → 65, 48→192 38 → 38.
func pwPick(o *rt.Conv) bool {
	P := o.OH * o.OW
	return P <= 256 && o.K >= 96 && o.C >= 96 && o.C*P >= 4096
}

// pwDotMax is the widest tail of columns that runs as dot products: the
// 8-column kernels compute 8 lanes for each of its r.
const pwDotMax = 2

// pwDots computes channels [k0, k1) of the r tail columns at y (the
// output's first tail column; channel k at k·P), each column packed as
// C floats at cols[i·C:]: dot products with the weight rows, then the
// bias and, when clamp, the clamp to [lo, hi] (NaN kept, as the kernels
// do).
func pwDots(p *dconvPlan, cols, y []float32, k0, k1, r int, clamp bool, lo, hi float32) {
	C, P := p.cg, p.o.OH*p.o.OW
	for i := range r {
		gemvDotAsm(cols[i*C:(i+1)*C], p.w[k0*C:k1*C], C, C, y[k0*P+i:], P, 1, 0, k1-k0)
		for k := k0; k < k1; k++ {
			v := y[k*P+i] + p.bias[k]
			if clamp {
				if v < lo {
					v = lo
				}
				if v > hi {
					v = hi
				}
			}
			y[k*P+i] = v
		}
	}
}

// pwConv runs the pointwise convolution of plan p (pwApplies) on x and
// y, image by image.
func pwConv(p *dconvPlan, x, y []float32) {
	o := p.o
	C, K := p.cg, o.K
	P := o.OH * o.OW
	// Full panels of 16 columns, then the r left over in a panel of 8
	// (r <= 8) or 16 columns, zero-padded; or, when r <= pwDotMax, as r
	// columns of C floats each, which multiply the weight rows as dot
	// products (gemvDotAsm: every lane of each FMA useful, where the 8
	// lanes of a vector would carry r).
	nfull, r := P/pwPanel, P%pwPanel
	tw := 0
	dots := r > 0 && r <= pwDotMax && gemvDotAsm[float32](nil, nil, 0, 1, nil, 0, 0, 0, 0)
	switch {
	case dots:
		tw = r
	case r > 8:
		tw = pwPanel
	case r > 0:
		tw = 8
	}
	npan := nfull + min(r, 1)
	// Tasks: chunks of channels, at least 4 a worker where there are 12
	// channels to each, by groups of panels where there are not.
	w := workers()
	work := int64(K) * int64(C) * int64(P)
	par := w > 1 && work >= 1<<18
	mc := max(12, pwChunkBytes/(4*C))
	if par {
		mc = min(mc, max(12, (K+4*w-1)/(4*w)))
	}
	nmc := (K + mc - 1) / mc
	mc = (K + nmc - 1) / nmc
	npg := 1
	if par && nmc < 4*w {
		npg = min(npan, (4*w+nmc-1)/nmc)
	}
	ntask := nmc * npg
	// Full panels read X in place (rows P floats apart) with fewer than
	// 128 output channels, in tap chunks of at most pwKC/2 (each row of 16
	// floats spans two cache lines), else packed, in chunks of at most
	// pwKC; a tail is packed either way. Tap chunks of even sizes. The
	// copy costs as much as the split loads save with few output channels
	// (single-thread µs, best of 100, packed → in place: 576→96 on 14×14
	// 278 → 268, 384→96 193 → 175; but 96→576 301 → 313, 960→160 on 7×7
	// 233 → 261, 960→320 348 → 384, 512→1000 on 13×13 1978 → 2182).
	inPlace := pwInPlace > 0 || (pwInPlace == 0 && K < 128)
	kcMax, tailOff := pwKC, nfull*pwPanel*C
	if inPlace {
		kcMax, tailOff = pwKC/2, 0
	}
	nch := (C + kcMax - 1) / kcMax
	npacked := nfull // full panels packed
	if inPlace {
		npacked = 0
	}
	lo, hi, clamp := clampAct(o.Act)
	if p.res != nil {
		clamp = false
	}
	xs := getScratch[float32](tailOff + tw*C)
	defer putScratch(xs)
	xp := *xs
	for n := 0; n < o.N; n++ {
		xn := x[n*C*P : (n+1)*C*P]
		yn := y[n*K*P : (n+1)*K*P]
		// Panel j at j·16·C: row c (its input channel) at c·width. Packed
		// by input channels, each read whole (a row of X, in order) and
		// dealt to the panels: by panels, the reads of 64 bytes P floats
		// apart took a fifth of 576→96 on 14×14.
		pack := func(c0, c1 int) {
			for c := c0; c < c1; c++ {
				xr := xn[c*P : (c+1)*P]
				for j := range npacked {
					// Rows of 64 bytes moved as such (an array copy calls
					// memmove).
					d := (*[8]uint64)(unsafe.Pointer(&xp[j*pwPanel*C+c*pwPanel]))
					s := (*[8]uint64)(unsafe.Pointer(&xr[j*pwPanel]))
					d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
				}
				if r == 0 {
					continue
				}
				q0 := nfull * pwPanel
				tail := xp[tailOff : tailOff+tw*C]
				if dots {
					// Column-major: column q0+i at i·C.
					for i := range r {
						tail[i*C+c] = xr[q0+i]
					}
					continue
				}
				d := tail[c*tw : (c+1)*tw]
				copy(d, xr[q0:])
				clear(d[r:])
			}
		}
		switch {
		case inPlace && r == 0:
		case par && C >= 16 && !inPlace:
			parallelFor(C, 8, pack)
		default:
			pack(0, C)
		}
		task := func(t int) {
			k0, k1 := t/npg*mc, min(K, (t/npg+1)*mc)
			j0, j1 := t%npg*npan/npg, (t%npg+1)*npan/npg
			if k0 >= k1 || j0 >= j1 {
				return
			}
			for j := j0; j < j1; j++ {
				q0 := j * pwPanel
				width, nq, mk := pwPanel, pwPanel, pwMaxKB(pwPanel)
				var panel []float32
				ldx := width
				switch {
				case j == nfull:
					width, nq, ldx = tw, r, tw
					mk = pwMaxKB(tw)
					panel = xp[tailOff : tailOff+tw*C]
				case inPlace:
					panel, ldx = xn[q0:], P
				default:
					panel = xp[j*pwPanel*C : (j+1)*pwPanel*C]
				}
				if j == nfull && dots {
					pwDots(p, panel, yn[q0:], k0, k1, r, clamp, lo, hi)
					continue
				}
				// Blocks of sizes differing by at most one: nbig of s+1
				// rows, then the rest of s.
				nb := (k1 - k0 + mk - 1) / mk
				s, nbig := (k1-k0)/nb, (k1-k0)%nb
				for ch := range nch {
					pc, kc := kBlock(C, nch, ch)
					last := ch == nch-1
					if nbig > 0 {
						pwRun(width, s+1, nbig, nq, kc, panel[pc*ldx:], ldx, p.w[k0*C+pc:], C, p.bias[k0:k1],
							yn[k0*P+q0:], P, clamp && last, pc > 0, lo, hi)
					}
					if b0 := k0 + nbig*(s+1); b0 < k1 {
						pwRun(width, s, nb-nbig, nq, kc, panel[pc*ldx:], ldx, p.w[b0*C+pc:], C, p.bias[b0:k1],
							yn[b0*P+q0:], P, clamp && last, pc > 0, lo, hi)
					}
				}
			}
			if p.res == nil && (clamp || o.Act.Fn == rt.Copy) {
				return
			}
			q0, q1 := j0*pwPanel, min(P, j1*pwPanel)
			for k := k0; k < k1; k++ {
				yr := yn[k*P+q0 : k*P+q1]
				if p.res != nil {
					addAct(o.Act, yr, p.res[(n*K+k)*P+q0:(n*K+k)*P+q1])
				} else {
					actApply(o.Act.Fn, o.Act.Alpha, o.Act.Beta, yr)
				}
			}
		}
		if par && ntask > 1 {
			// One task at a time: they are few and of uneven sizes.
			runJob(ntask, 1, min(w, ntask), func(t0, t1 int) {
				for t := t0; t < t1; t++ {
					task(t)
				}
			}, nil)
		} else {
			for t := range ntask {
				task(t)
			}
		}
	}
}
