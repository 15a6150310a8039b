package cpu

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/vrun-go/vrun/rt"
)

// Direct convolution (f32, AVX-512 or AVX2 + FMA): each image's input planes of one
// group are copied, zero-padded, into a scratch buffer, split into stride
// phases: phase (a, b) of a channel holds the padded plane's rows a, a+sh,
// a+2sh... and, of those, the columns b, b+sw, ... So that output (oh, ow)
// of tap (c, kh, kw) reads phase ((kh·dh) mod sh, (kw·dw) mod sw) of
// channel c at row oh + kh·dh/sh and column ow + kw·dw/sw: with the
// outputs numbered q = oh·Wq + ow (Wq the phase width, at least OW), the
// tap reads x[q + offs[tap]] whatever the stride. The convolution of a
// block of output channels is then one sum over taps of weight times a
// shifted run of the buffer (dconvRun), over the flat range of q; the
// columns ow >= OW of that range are computed and dropped.
//
// It replaces im2col + GEMM where the GEMM is poor: depthwise
// convolutions (one tap set per channel, no reduction over channels) and
// convolutions with few input channels per group, whose im2col matrix is
// large for the work (LeNet's 1→6 and 6→16 5×5, first layers on RGB).
//
// With several input channels per group the wide kernels (dcwRun) run it
// instead: they read the weights where they are, [K, Cg·KH·KW], 12 output
// channels × 32 outputs (or 6 × 64 on planes of at most 64 outputs) per
// call, and apply bias and a ReLU/Clip as they store, so that no im2col
// matrix is written and no weights are packed per run. A stride-1
// convolution without padding (every 1×1 one) reads the input planes in
// place. BenchmarkConvShapes, CPU time per op, at load 5-9 (wall times
// were noise): ResNet's 64→64 3×3 on 56×56 1806 → 1312 µs, 128 on 28×28
// 1566 → 1252, 256 on 14×14 1734 → 1384; 1×1 24→144 on 56×56 204 → 161,
// 576→96 on 14×14 193 → 156, 128→16 on 55×55 108 → 137 (worse: 16
// output channels read the input twice either way).

// directConvTaps bounds Cg·KH·KW for non-depthwise direct convolutions,
// and directConvMaxKg their output channels per group unless they have
// at least directConvManyTaps taps (measured with BenchmarkConvShapes, CPU
// time: beyond them im2col + GEMM is faster; 3→64 3×3 stride 2 is 10 %
// faster through the GEMM, 3→64 7×7 stride 2 16 % faster direct, 16→64
// 3×3 even; 64→64 3×3 is 4-24 % faster direct, but 128→128 and
// 256→256 are 1.4-1.7× slower).
const (
	directConvTaps     = 160
	directConvMaxKg    = 32
	directConvManyTaps = 128
)

// dcwOn routes every convolution with a kernel larger than 1×1 and
// several input channels per group through the wide direct kernels
// (dcwRun) where they exist; tests and benchmarks switch it off to compare.
var dcwOn = true

// dcwAll runs the direct convolutions with one input channel per group
// (LeNet's first layer, depthwise ones other than dw3Conv's) through the
// wide kernels too, for their fused clamp.
var dcwAll = true

// dcwPointwise routes 1×1 convolutions through the wide direct kernels too.
var dcwPointwise = true

// useDirectConv reports whether o runs as a direct convolution.
func useDirectConv(o *rt.Conv) bool {
	if dconvMaxKB() == 0 || o.X.DType != rt.F32 {
		return false
	}
	Cg, Kg := o.C/o.Groups, o.K/o.Groups
	taps := Cg * o.KH * o.KW
	if taps == 0 || o.OH <= 0 || o.OW <= 0 {
		return false
	}
	if Cg == 1 {
		return true
	}
	if dcwOn && dcwMaxKB(2) > 0 && (o.KH*o.KW > 1 || dcwPointwise) {
		return true
	}
	return taps <= directConvTaps && (Kg <= directConvMaxKg || taps >= directConvManyTaps) && o.KH*o.KW > 1
}

// dconvPlan is the layout of a direct convolution.
type dconvPlan struct {
	o      *rt.Conv
	cg, kg int
	hq, wq int   // phase plane
	ps     int   // a channel's phases, elements
	buf    int   // buffer length per group
	offs   []int // per tap
	hiOff  int   // the largest of offs (all >= 0)
	// band: the layout of a band of output rows, whose phase rows a
	// worker fills into its own buffer (directConv with few images and
	// groups); band.rows == 0 until setBands sets it.
	band dconvBand
	// wbufs: each worker's filled input planes in a split (workerInput).
	wbufs      []*[]float32
	wp         []float32
	bias       []float32
	kb0        []int // output-channel blocks within a group: [kb0[i], kb0[i+1])
	rows       int   // output rows per chunk
	nchunk     int
	taps, nout int
	// wide: the kernels read the weights w in place ([K, taps]) with
	// blocks of u vectors (dcwRun); else they read wp (dconvRun).
	wide bool
	u    int
	w    []float32
	mk   int // the most channels of a block
	// byRows: the wide kernels compute each output row's OW outputs
	// straight into y, rather than the flat range (phase-width rows) into
	// scratch that is then copied.
	byRows bool
	// gap: where the wide kernels store a flat range compressed
	// straight into y (dcwRunGap, AVX-512), their table for all the
	// plane's rows (shared, read-only); nil where the range goes through
	// scratch.
	gap []uint64
	// inPlace: the phase layout is x's own (stride 1, no padding), so
	// that the kernels read the input planes where they are.
	inPlace bool
	// vec: flat runs into scratch are rounded up to multiples of vec
	// outputs (the vector with AVX2, else 1), which the buffer's and
	// scratch's lengths allow for.
	vec int
	// rowPh, colPh: bit a (b) set when some tap reads row (column) phase
	// a (b); fill skips the others (1×1 stride-2 convolutions read one
	// phase in four). All set for strides of 64 or more.
	rowPh, colPh uint64
	// res is the residual (o.Res) of the whole output, or nil: chunk adds
	// it to the rows it computed (see conv_res.go).
	res []float32
}

// dcwSharedPad lets stride-1 plans of the wide kernels share the right
// padding columns of a phase-plane row with the left ones of the next
// (dcwSharedPadWq); tests and benchmarks switch it off to compare.
var dcwSharedPad = true

// dcwSharedPadWq returns the phase width of a stride-1 convolution o run
// on the wide kernels as one flat range (outputs of one vector a row or
// less; wq the width with all its padding, wpd the padded row that the
// outputs read): the narrowest width at which every tap of a real output
// still reads the right element, since a read past a row's last column
// lands in the next row's left padding, zeros, when the columns past wq
// are all right padding and fewer than PadL. It is taken where it needs
// fewer vectors over the flat range of outputs, (OH-1)·wq + OW. With
// AVX2, where a 7×7 plane takes 8 vectors a channel at wq = 9 and 7 at 8:
// ResNet's 512 3×3 on 7×7, wall µs, best of 200 runs alternating with the
// sharing off (dcwSharedPad), 2 threads given the cores (chrt -f), 1462
// against 1589, one thread 2896 against 3185 (BenchmarkConvShapes'
// /direct-noshare compares the same). With AVX-512, a 13×13 plane takes
// 12 vectors at wq = 14 and 13 at 15: single-thread µs on a Zen 5, best
// of 5 alternating, squeezenet's 48→192 3×3 171 → 158 and 64→256 299 →
// 277.
func dcwSharedPadWq(o *rt.Conv, wq, wpd int) int {
	lanes := dcwLanes()
	if !dcwSharedPad || o.OW > lanes || o.PadL <= 0 {
		return wq
	}
	w2 := max(o.OW, wpd-o.PadL, min(wpd, o.PadL+o.Width))
	if w2 >= wq {
		return wq
	}
	vecs := func(w int) int { return ((o.OH-1)*w + o.OW + lanes - 1) / lanes }
	if vecs(w2) < vecs(wq) {
		return w2
	}
	return wq
}

// phases is where a buffer holds the padded phase planes: hq phase rows
// a plane, from phase row r0 on, channels ps elements apart.
type phases struct{ hq, ps, r0 int }

// phases is the layout of the whole planes.
func (p *dconvPlan) phases() phases { return phases{p.hq, p.ps, 0} }

// tapOffsets appends to offs each tap's offset from an output in a
// buffer of layout l, and returns it with the largest.
func (p *dconvPlan) tapOffsets(offs []int, l phases) ([]int, int) {
	o := p.o
	sh, sw := o.StrideH, o.StrideW
	// The window's offsets within a channel's phases, once; then each
	// channel's at l.ps further (the divisions per tap took 2 % of
	// MobileNetV2's CPU time at batch 1).
	kk := o.KH * o.KW
	win := 0
	for kh := 0; kh < o.KH; kh++ {
		dh := kh * o.DilH
		for kw := 0; kw < o.KW; kw++ {
			dw := kw * o.DilW
			off := ((dh%sh)*sw+dw%sw)*l.hq*p.wq + dh/sh*p.wq + dw/sw
			offs = append(offs, off)
			win = max(win, off)
		}
	}
	base := len(offs) - kk
	for c := 1; c < p.cg; c++ {
		for t := range kk {
			offs = append(offs, c*l.ps+offs[base+t])
		}
	}
	return offs, (p.cg-1)*l.ps + win
}

// dconvPlans recycles plans (and their slices) between runs.
var dconvPlans sync.Pool

// resize returns s with length n, reusing its array when large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// newDconvPlan lays out o with weights w and bias (nil: none); the plan
// goes back to dconvPlans after use.
func newDconvPlan(o *rt.Conv, w, bias []float32) *dconvPlan {
	p, _ := dconvPlans.Get().(*dconvPlan)
	if p == nil {
		p = new(dconvPlan)
	}
	*p = dconvPlan{o: o, cg: o.C / o.Groups, kg: o.K / o.Groups, offs: p.offs[:0], kb0: p.kb0[:0], wp: p.wp, bias: p.bias, band: dconvBand{offs: p.band.offs[:0]}, wbufs: p.wbufs[:0]}
	if o.Res.Buf != nil {
		p.res = lin[float32](o.Res, o.N*o.K*o.OH*o.OW)
	}
	sh, sw := o.StrideH, o.StrideW
	hp := (o.OH-1)*sh + (o.KH-1)*o.DilH + 1
	wpd := (o.OW-1)*sw + (o.KW-1)*o.DilW + 1
	p.hq, p.wq = ceilDiv(hp, sh), ceilDiv(wpd, sw)
	p.taps = p.cg * o.KH * o.KW
	if sw == 1 && dcwMaxKB(2) > 0 && (p.cg > 1 || dcwAll) {
		p.wq = dcwSharedPadWq(o, p.wq, wpd)
	}
	p.ps = sh * sw * p.hq * p.wq
	p.rowPh, p.colPh = 0, 0
	if sh >= 64 {
		p.rowPh = ^uint64(0)
	}
	if sw >= 64 {
		p.colPh = ^uint64(0)
	}
	for kh := 0; kh < o.KH && sh < 64; kh++ {
		p.rowPh |= 1 << ((kh * o.DilH) % sh)
	}
	for kw := 0; kw < o.KW && sw < 64; kw++ {
		p.colPh |= 1 << ((kw * o.DilW) % sw)
	}
	p.offs, p.hiOff = p.tapOffsets(p.offs, p.phases())
	p.nout = (o.OH-1)*p.wq + o.OW
	p.buf = max(p.cg*p.ps, p.hiOff+p.nout)
	p.inPlace = sh == 1 && sw == 1 && o.PadT == 0 && o.PadL == 0 && p.hq == o.H && p.wq == o.Width && p.buf == p.cg*p.ps
	p.vec = 1
	if !p.inPlace && dcwLanes() < 16 {
		// With AVX2, flat runs into scratch compute whole vectors
		// (chunk): the buffer reaches the last one's lanes.
		p.vec = dcwLanes()
		p.buf = max(p.cg*p.ps, p.hiOff+p.nout+p.vec-1)
	}
	// Output-channel blocks of at most dconvMaxKB (dcwMaxKB), of even sizes.
	mk := dconvMaxKB()
	if dcwMaxKB(2) > 0 && (p.cg > 1 || dcwAll) {
		p.wide, p.u, p.w = true, dcwVectors(p), w
		mk = dcwMaxKB(p.u)
	}
	p.mk = mk
	if p.wide && p.wq != o.OW {
		// By rows when each row has at least two vectors (a single one
		// takes a kernel body of one vector per weight broadcast) and
		// their lanes are used at least as well as in the flat range,
		// OW of 16·ceil(OW/16) against OW of wq; with few taps, where
		// the flat range's copy weighs more, at three quarters as well
		// (single-thread CPU µs, BenchmarkConvShapes: LeNet's 1→6 5×5
		// 180 → 112, 3→64 3×3 stride 2 on 224×224 315 → 256; ResNet's
		// 256 3×3 on 14×14 by rows 1289 → 1571 and 64 on 56×56 1176 →
		// 1263, hence flat).
		lanes := dcwLanes()
		vecs := (o.OW + lanes - 1) / lanes
		rowLanes, flatLanes := lanes*vecs, p.wq
		p.byRows = vecs >= 2 && (rowLanes <= flatLanes || (p.taps <= 64 && 3*rowLanes <= 4*flatLanes))
		if !p.byRows && lanes == 16 && dcwGap {
			p.gap = gapTableFor(o.OH*p.wq, p.wq, o.OW)
		}
	}
	nb := (p.kg + mk - 1) / mk
	for i := 0; i <= nb; i++ {
		p.kb0 = append(p.kb0, i*p.kg/nb)
	}
	p.bias = resize(p.bias, o.K)
	clear(p.bias[copy(p.bias, bias):])
	p.rows = max(1, min(o.OH, 2048/p.wq))
	p.nchunk = (o.OH + p.rows - 1) / p.rows
	if p.wide {
		return p
	}
	// Weights packed per block: block of channels [k0, k1) (of all K) at
	// k0·taps, as [tap][k].
	p.wp = resize(p.wp, o.K*p.taps)
	for g := 0; g < o.Groups; g++ {
		for i := 0; i+1 < len(p.kb0); i++ {
			k0, k1 := g*p.kg+p.kb0[i], g*p.kg+p.kb0[i+1]
			kb := k1 - k0
			dst := p.wp[k0*p.taps : k1*p.taps]
			for k := k0; k < k1; k++ {
				src := w[k*p.taps : (k+1)*p.taps]
				for t, v := range src {
					dst[t*kb+k-k0] = v
				}
			}
		}
	}
	return p
}

// dcwU, when 2 or 4, forces the wide kernels' vectors per block (tests
// and benchmarks, VRUN_CPU_DCWU).
var dcwU = 0

// dcwVectors picks the wide kernels' vectors per block for p: with
// AVX-512, 4 (at most
// 6 output channels a call, each tap's weights read once per 64 outputs)
// for few taps (3→64 3×3 stride 2 on 224×224, CPU µs per op at load 2-4:
// 545-598 with 4 vectors, 563-569 with 2, 793 through the GEMM), else 2
// (12 channels a call, half the input read per weight: single-thread
// 1608 against 1813 µs for ResNet's 512 3×3 on 7×7, 325 against 344 for
// 64→256 3×3 on 13×13).
func dcwVectors(p *dconvPlan) int {
	if dcwU == 2 || dcwU == 4 {
		return dcwU
	}
	if dcwLanes() < 16 {
		// AVX2: 4 vectors a block take at most 2 channels a call (16
		// registers), which reads the input three times as often as 6
		// channels of 2 vectors: BenchmarkConvShapes, best of four at
		// load 4-5, GFLOP/s with 2 / 4 vectors: LeNet's 1→6 5×5 53 / 30,
		// 3→64 3×3 stride 2 on 224×224 64 / 46, 1×1 16→96 on 112×112
		// 44 / 30.
		return 2
	}
	if p.taps <= 32 {
		return 4
	}
	return 2
}

// clampAct reports whether act is a clamp the wide kernels apply as they
// store (ReLU, Clip), and its bounds.
func clampAct(act rt.Activation) (lo, hi float32, ok bool) {
	switch act.Fn {
	case rt.Relu:
		return 0, float32(math.Inf(1)), true
	case rt.Clip:
		if math.IsNaN(act.Alpha) || math.IsNaN(act.Beta) {
			return 0, 0, false
		}
		return float32(act.Alpha), float32(act.Beta), true
	}
	return 0, 0, false
}

// input returns the padded phase planes of image n, group g: filled into
// buf, or, in place, x's own planes.
func (p *dconvPlan) input(x, buf []float32, n, g int) []float32 {
	if p.inPlace {
		o := p.o
		base := (n*o.C + g*p.cg) * o.H * o.Width
		return x[base : base+p.buf]
	}
	p.fillRange(x, buf, p.phases(), n, g, 0, p.cg, 0, p.hq)
	clear(buf[p.cg*p.ps:])
	return buf
}

// sharedInput is input with the fill split between the workers when
// the planes are large: by channels when they are many, else by blocks
// of phase rows.
func (p *dconvPlan) sharedInput(x, buf []float32, n, g int) []float32 {
	switch {
	case p.inPlace:
		return p.input(x, buf, n, g)
	case p.cg >= 8 && p.cg*p.ps >= 1<<15:
		parallelFor(p.cg, max(1, (1<<13)/p.ps), func(c0, c1 int) { p.fillRange(x, buf, p.phases(), n, g, c0, c1, 0, p.hq) })
	case p.cg*p.ps >= 1<<15 && workers() > 1:
		nrb := min(p.hq, (8+p.cg-1)/p.cg)
		parallelFor(p.cg*nrb, 1, func(u0, u1 int) {
			for u := u0; u < u1; u++ {
				c, j := u/nrb, u%nrb
				p.fillRange(x, buf, p.phases(), n, g, c, c+1, j*p.hq/nrb, (j+1)*p.hq/nrb)
			}
		})
	default:
		return p.input(x, buf, n, g)
	}
	clear(buf[p.cg*p.ps:])
	return buf
}

// splitInputs readies workerInput for a split between nw workers.
func (p *dconvPlan) splitInputs(nw int) {
	p.wbufs = resize(p.wbufs, nw)
	clear(p.wbufs)
}

// workerInput returns the padded phase planes of image n, group g for
// worker w of a split (splitInputs): filled into a buffer of the worker's
// own at its first call, so that no worker reads planes that another
// core has just written (or x's own planes, in place). Against one
// buffer filled by the workers together and read whole by each, on a
// 2-vCPU Zen 5 at 2 threads, BenchmarkConvShapes µs, best / median of 5
// rounds alternating: squeezenet's 48→192 3×3 on 13×13 117 / 134 → 91 /
// 104, ResNet's 256 3×3 on 14×14 748 / 844 → 636 / 722 and 256→512
// stride 2 516 / 550 → 397 / 427.
func (p *dconvPlan) workerInput(x []float32, n, g, w int) []float32 {
	if p.inPlace {
		return p.input(x, nil, n, g)
	}
	if p.wbufs[w] == nil {
		b := getScratch[float32](p.buf)
		p.input(x, *b, n, g)
		p.wbufs[w] = b
	}
	return *p.wbufs[w]
}

// releaseInputs returns the buffers of workerInput.
func (p *dconvPlan) releaseInputs() {
	for i, b := range p.wbufs {
		if b != nil {
			putScratch(b)
			p.wbufs[i] = nil
		}
	}
}

// fillRange writes phase rows [r0, r1) of the padded phase planes of
// channels [c0, c1) of image n, group g into buf, laid out as l.
func (p *dconvPlan) fillRange(x, buf []float32, l phases, n, g, c0, c1, r0, r1 int) {
	o := p.o
	H, W, sh, sw := o.H, o.Width, o.StrideH, o.StrideW
	hq, wq := l.hq, p.wq
	// fill2 writes both column phases; where the taps read one (1×1
	// stride 2) the loop below gathers just it.
	if sw == 2 && p.colPh&3 == 3 && p.fill2(x, buf, l, n, g, c0, c1, r0, r1) {
		return
	}
	for c := c0; c < c1; c++ {
		xc := x[(n*o.C+g*p.cg+c)*H*W : (n*o.C+g*p.cg+c+1)*H*W]
		xoff := (n*o.C + g*p.cg + c) * H * W
		for a := 0; a < sh; a++ {
			if p.rowPh&(1<<min(a, 63)) == 0 {
				continue
			}
			for b := 0; b < sw; b++ {
				if p.colPh&(1<<min(b, 63)) == 0 {
					continue
				}
				ph := buf[c*l.ps+(a*sw+b)*hq*wq : c*l.ps+(a*sw+b+1)*hq*wq]
				// Columns cc of the phase read input column cc·sw + b - PadL.
				lo, hi, iw0 := phaseSpan(W, wq, o.PadL, b, sw)
				for r := r0; r < r1; r++ {
					ih := r*sh + a - o.PadT
					d := phaseRow(ph[(r-l.r0)*wq:(r-l.r0+1)*wq], ih, H, lo, hi)
					if d == nil {
						continue
					}
					xr := xc[ih*W+iw0:]
					switch {
					case sw == 1:
						copy(d, xr[:len(d)])
					case sw == 2 && len(x)-(xoff+ih*W+iw0) >= 2*len(d)+65 && hmaxF32(d, x[xoff+ih*W+iw0:], 1, 2):
					default:
						for i := range d {
							d[i] = xr[i*sw]
						}
					}
				}
			}
		}
	}
}

// fill2 is fillRange for StrideW == 2: each input row is copied, padded, into
// a scratch row, whose even and odd elements go to the two column phases
// in one pass. It reports false where the kernel is missing.
func (p *dconvPlan) fill2(x, buf []float32, l phases, n, g, c0, c1, rlo, rhi int) bool {
	o := p.o
	H, W, sh := o.H, o.Width, o.StrideH
	hq, wq := l.hq, p.wq
	ts := getScratch[float32](2 * wq)
	defer putScratch(ts)
	tmp := *ts
	lo, hi := min(o.PadL, 2*wq), max(min(o.PadL, 2*wq), min(2*wq, o.PadL+W))
	clear(tmp[:lo])
	clear(tmp[hi:])
	for c := c0; c < c1; c++ {
		xc := x[(n*o.C+g*p.cg+c)*H*W : (n*o.C+g*p.cg+c+1)*H*W]
		for a := 0; a < sh; a++ {
			if p.rowPh&(1<<min(a, 63)) == 0 {
				continue
			}
			ph0 := buf[c*l.ps+(a*2)*hq*wq : c*l.ps+(a*2+1)*hq*wq]
			ph1 := buf[c*l.ps+(a*2+1)*hq*wq : c*l.ps+(a*2+2)*hq*wq]
			for r := rlo; r < rhi; r++ {
				r0, r1 := ph0[(r-l.r0)*wq:(r-l.r0+1)*wq], ph1[(r-l.r0)*wq:(r-l.r0+1)*wq]
				ih := r*sh + a - o.PadT
				if ih < 0 || ih >= H || hi == lo {
					clear(r0)
					clear(r1)
					continue
				}
				copy(tmp[lo:hi], xc[ih*W+lo-o.PadL:])
				if !deinterleave2(r0, r1, tmp) {
					return false
				}
			}
		}
	}
	return true
}

// chunk computes output rows [oh0, oh1) of channel block i of image n,
// group g, from xb, the filled phase planes from phase row oh0 on, whose
// taps lie at offs (the largest hiOff); out is scratch of
// mk·outLd(rows).
func (p *dconvPlan) chunk(xb []float32, offs []int, hiOff int, out, y []float32, n, g, i, oh0, oh1 int) {
	o := p.o
	P := o.OH * o.OW
	k0, k1 := g*p.kg+p.kb0[i], g*p.kg+p.kb0[i+1]
	kb := k1 - k0
	nq := (oh1-oh0-1)*p.wq + o.OW
	yb := y[(n*o.K+k0)*P:]
	lo, hi, clamp := clampAct(o.Act)
	if p.res != nil {
		clamp = false
	}
	switch {
	case p.wide && (p.wq == o.OW || !p.byRows):
		// One flat run of nq outputs, straight into y when the phase
		// width is the output width, else into out and copied: then
		// rounded up to whole vectors where the input lies in the
		// buffer (its padding past nout), so that the kernels' last
		// vector goes without the mask (the masked loads and stores of
		// AVX2 cost several plain ones: with the shared padding,
		// ResNet's 512 3×3 on 7×7 went from 1952-2109 to 1468-1523 µs,
		// 2 threads, best of 300 given the cores).
		// With AVX-512 the kernels store each vector's real outputs
		// compressed, straight into y (p.gap): where the copy took 8 %
		// of the time of squeezenet's 16→64 3×3 on 55×55 on one thread
		// and 17 % on two.
		dst, ld, n := yb[oh0*o.OW:], P, nq
		copied := p.wq != o.OW && p.gap == nil
		if copied {
			dst, ld, n = out, p.outLd(oh1-oh0), roundUp(nq, p.vec)
		}
		p.dcw(kb, n, xb, offs, hiOff, k0, dst, ld, clamp, lo, hi, 1, 0, 0)
		if copied {
			p.copyOut(out, yb, kb, ld, oh0, oh1)
		}
	case p.wide:
		// Row by row, OW outputs each, straight into y.
		p.dcw(kb, o.OW, xb, offs, hiOff, k0, yb[oh0*o.OW:], P, clamp, lo, hi, oh1-oh0, p.wq, o.OW)
	default:
		clamp = false
		wb := p.wp[k0*p.taps : k1*p.taps]
		if p.wq == o.OW {
			dconvRun(kb, nq, xb, offs, wb, p.bias[k0:k1], yb[oh0*o.OW:], P)
		} else {
			ldo := (oh1 - oh0) * p.wq
			dconvRun(kb, nq, xb, offs, wb, p.bias[k0:k1], out, ldo)
			p.copyOut(out, yb, kb, ldo, oh0, oh1)
		}
	}
	if p.res != nil {
		rb := p.res[(n*o.K+k0)*P:]
		if oh0 == 0 && oh1 == o.OH {
			// Whole planes: the block's channels are one run.
			addAct(o.Act, yb[:kb*P], rb[:kb*P])
			return
		}
		for k := 0; k < kb; k++ {
			r0, r1 := k*P+oh0*o.OW, k*P+oh1*o.OW
			addAct(o.Act, yb[r0:r1], rb[r0:r1])
		}
		return
	}
	if o.Act.Fn != rt.Copy && !clamp {
		for k := 0; k < kb; k++ {
			actApply(o.Act.Fn, o.Act.Alpha, o.Act.Beta, yb[k*P+oh0*o.OW:k*P+oh1*o.OW])
		}
	}
}

// dcwTapChunk is the most taps one wide kernel call sums (0: all) for
// windows larger than 1×1 over at least 128 outputs: a convolution with
// more runs its taps in chunks, each over all the outputs of the call,
// the later ones adding to y, so that a chunk's weights and input rows
// stay in L1 across the outputs. BenchmarkConvShapes at load 0.7, best of
// two, µs without chunks / 72 / 96 taps: ResNet 3×3 64 on 56×56 1183 /
// 1003 / 1029, 128 on 28×28 951 / 893 / 929, 256 on 14×14 1020 / 963 /
// 975, 64→128 stride 2 942 / 830 / 880, 512 on 7×7 1050 / 1066 / 1059
// (61 outputs: not chunked); 1×1 576→96 on 14×14 123 / 131 / 130 (not
// chunked). That was an AMD EPYC, 1 MiB of L2 a core. On an Intel Xeon
// with 2 MiB of L2 a core the chunks cost more than they save: one
// thread, µs with chunks of 72 / 144 / none, squeezenet's 16→64 3×3 on
// 55×55 394 / 348 / 351, ResNet 64 on 56×56 1536 / 1428 / 1584, 256 on
// 14×14 1711 / 1613 / 1525; whole models at 2 threads, medians of 300
// runs in three alternating rounds, squeezenet1_1 3.58-3.68 / 3.45-3.57
// / 3.41-3.51 ms, resnet18 13.1-13.8 / 13.0-13.5 / 12.6-13.1. So where
// the L2 holds at least 2 MiB (tapChunkFor) there are none. -1 takes
// that default (tapChunkDefault); tests and benchmarks set it
// (VRUN_CPU_DCWTC).
var dcwTapChunk = -1

// tapChunkDefault is tapChunkFor this machine's L2, read once, on the
// first convolution that needs it rather than at start-up.
var tapChunkDefault = sync.OnceValue(func() int { return tapChunkFor(l2Bytes()) })

// tapChunkFor is dcwTapChunk's default for a level-2 cache of l2 bytes
// (0: unknown).
func tapChunkFor(l2 int) int {
	if l2 >= 2<<20 {
		return 0
	}
	return 72
}

// dcw runs the wide kernels for kb output channels from k0 (see dcwRun)
// on x with taps at offs (the largest hiOff), in chunks of at most
// dcwTapChunk taps.
func (p *dconvPlan) dcw(kb, n int, x []float32, offs []int, hiOff, k0 int, y []float32, ldy int, clamp bool, lo, hi float32, rows, ldxr, ldyr int) {
	w, b := p.w[k0*p.taps:(k0+kb)*p.taps], p.bias[k0:k0+kb]
	var tab []uint64
	if p.gap != nil && rows == 1 && p.wq != p.o.OW {
		tab = p.gap
	}
	tc, most := p.taps, dcwTapChunk
	if most < 0 {
		most = tapChunkDefault()
	}
	if most > 0 && p.taps > most && n*rows >= 128 && p.o.KH*p.o.KW > 1 {
		// Chunks of even sizes, whole kernel windows where they can be.
		nch := (p.taps + most - 1) / most
		tc = (p.taps + nch - 1) / nch
		if kk := p.o.KH * p.o.KW; tc > kk {
			tc = (tc + kk - 1) / kk * kk
		}
	}
	for t0 := 0; t0 < p.taps; t0 += tc {
		t1 := min(p.taps, t0+tc)
		dcwRunGap(p.u, kb, n, x, offs[t0:t1], hiOff, w[t0:], p.taps, b, y, ldy, clamp && t1 == p.taps, t0 > 0, lo, hi, rows, ldxr, ldyr, tab)
	}
}

// dcwGap lets the wide kernels store flat ranges compressed, straight
// into y (gapTable); tests and benchmarks switch it off to compare
// (VRUN_CPU_DCWGAP=0).
var dcwGap = true

// gapTables caches gapTable's tables by shape (gapKey), at most
// gapTablesMax of them: a plan is made on every run of a convolution,
// and a table costs a division per output of the plane to fill.
var (
	gapTables      sync.Map
	gapTablesCount atomic.Int64
)

const gapTablesMax = 256

type gapKey struct{ n, wq, ow int }

// gapTableFor returns the gap table of (n, wq, ow) (gapTable), cached.
func gapTableFor(n, wq, ow int) []uint64 {
	k := gapKey{n, wq, ow}
	if t, ok := gapTables.Load(k); ok {
		return t.([]uint64)
	}
	t := gapTable(n, wq, ow)
	if gapTablesCount.Add(1) <= gapTablesMax {
		gapTables.Store(k, t)
	}
	return t
}

// gapTable returns the table for dcwRunGap over a flat range
// of n outputs, rows of wq of which the first ow are real: entry j, for
// the outputs q in [16j, 16j+16), holds the mask of the real ones (q <
// n, q mod wq < ow) in bits 0-15, the mask of their count in bits 16-31,
// and in bits 32-63 the offset in y, (q/wq)·ow + q mod wq, of the first.
// A range that starts on a row and ends sooner uses its first entries:
// the kernels drop the lanes past their n from the last vector.
func gapTable(n, wq, ow int) []uint64 {
	tab := make([]uint64, (n+15)/16)
	for j := range tab {
		var m uint16
		first := 0
		for l := 15; l >= 0; l-- {
			if q := 16*j + l; q < n && q%wq < ow {
				m |= 1 << l
				first = q/wq*ow + q%wq
			}
		}
		cnt := uint64(1)<<bits.OnesCount16(m) - 1
		tab[j] = uint64(m) | cnt<<16 | uint64(uint32(first))<<32
	}
	return tab
}

// outLd is the channel stride of a chunk of rows output rows computed
// into scratch: rows phase-width rows, or the flat range rounded up to
// whole vectors (vec) when more.
func (p *dconvPlan) outLd(rows int) int {
	return max(rows*p.wq, roundUp((rows-1)*p.wq+p.o.OW, p.vec))
}

// copyOut copies output rows [oh0, oh1) of kb channels, computed phase
// width apart into out (channel stride ldo), to yb.
func (p *dconvPlan) copyOut(out, yb []float32, kb, ldo, oh0, oh1 int) {
	o := p.o
	P := o.OH * o.OW
	for k := 0; k < kb; k++ {
		for oh := oh0; oh < oh1; oh++ {
			copy(yb[k*P+oh*o.OW:k*P+(oh+1)*o.OW], out[k*ldo+(oh-oh0)*p.wq:])
		}
	}
}

// directConv runs o (see useDirectConv) on x, w, bias (nil: none) and y.
func directConv(o *rt.Conv, x, w, bias, y []float32) {
	p := newDconvPlan(o, w, bias)
	defer func() {
		p.o, p.res = nil, nil
		dconvPlans.Put(p)
	}()
	if pwApplies(p) {
		pwConv(p, x, y)
		return
	}
	units := o.N * o.Groups
	nkb := len(p.kb0) - 1
	outLen := p.mk * p.outLd(p.rows)
	unit := func(buf, out []float32, u int) {
		n, g := u/o.Groups, u%o.Groups
		in := p.input(x, buf, n, g)
		for i := 0; i < nkb; i++ {
			for oh0 := 0; oh0 < o.OH; oh0 += p.rows {
				p.chunk(in[oh0*p.wq:], p.offs, p.hiOff, out, y, n, g, i, oh0, min(o.OH, oh0+p.rows))
			}
		}
	}
	work := int64(o.N) * int64(o.K) * int64(p.taps) * int64(o.OH*o.OW)
	if workers() == 1 || work < 1<<18 || units >= 2*workers() {
		grain := 1
		if work < 1<<18 {
			grain = units
		}
		bufLen := p.buf
		if p.inPlace {
			bufLen = 0
		}
		parallelFor(units, grain, func(lo, hi int) {
			bs, os := getScratch[float32](bufLen), getScratch[float32](outLen)
			for u := lo; u < hi; u++ {
				unit(*bs, *os, u)
			}
			putScratch(bs)
			putScratch(os)
		})
		return
	}
	if nb := p.bands(workers()); !p.inPlace && nb > 0 {
		p.bandConv(x, y, nb, outLen)
		return
	}
	// Few images and groups: split each group's channel blocks and row
	// chunks between the workers, each with its own input planes.
	// Where the input is read in place, the weights are small and the
	// planes large enough for two chunks of at least 128 outputs a
	// worker, the tasks go row chunk by row chunk and each worker starts
	// on its own rows (runHomes): it reads only its rows of the input,
	// which the op before, split likewise, has left in its core's cache.
	rows, nch := p.rows, p.nchunk
	rowMajor := p.inPlace && p.smallWeights() && homesMode >= 0 && o.OH/(2*workers())*o.OW >= 128
	if rowMajor {
		rows = min(rows, ceilDiv(o.OH, 2*workers()))
		nch = ceilDiv(o.OH, rows)
	}
	nt := nkb * nch
	nw := min(workers(), nt)
	for u := 0; u < units; u++ {
		n, g := u/o.Groups, u%o.Groups
		p.splitInputs(nw)
		run := func(w, lo, hi int) {
			in := p.workerInput(x, n, g, w)
			os := getScratch[float32](outLen)
			for t := lo; t < hi; t++ {
				i, c := t/nch, t%nch
				if rowMajor {
					i, c = t%nkb, t/nkb
				}
				oh0 := c * rows
				p.chunk(in[oh0*p.wq:], p.offs, p.hiOff, *os, y, n, g, i, oh0, min(o.OH, oh0+rows))
			}
			putScratch(os)
		}
		if rowMajor {
			runHomes(nt, 1, nw, run)
		} else {
			runGuided(nt, 1, 2*nw, nw, nil, run)
		}
		p.releaseInputs()
	}
}

// smallWeights reports whether the weights of a group are small against
// its activations (at most 4 times the input and output planes), so
// that splitting the rows between the workers, each reading all of the
// weights, beats splitting the channels, each reading all of the input.
func (p *dconvPlan) smallWeights() bool {
	o := p.o
	return p.kg*p.taps <= 4*(p.cg*o.H*o.Width+p.kg*o.OH*o.OW)
}

// dconvBand is the layout of the bands of output rows that bandConv
// splits a plane into.
type dconvBand struct {
	rows, n int    // the most output rows a band has (the last one's), bands
	l       phases // phase rows a band's buffer holds (its rows and the halo below)
	buf     int    // the buffer's length
	offs    []int  // per tap, in the band's buffer
	hiOff   int    // the largest of offs
}

// dcwBands forces the band split of directConv off (-1) or on, with
// that many bands a worker (> 0), where it applies (tests and
// benchmarks, VRUN_CPU_DCWBAND); 0 chooses (bands).
var dcwBands = 0

// bands returns the number of bands of output rows that directConv
// splits its few images and groups into between nw workers (bandConv),
// or 0 to split channel blocks and row chunks instead (each worker with
// all of the input planes: workerInput).
func (p *dconvPlan) bands(nw int) int {
	if dcwBands != 0 {
		return max(0, dcwBands*nw)
	}
	o := p.o
	if !p.smallWeights() {
		return 0
	}
	for nb := 2 * nw; nb >= nw; nb -= nw {
		if o.OH/nb*o.OW >= 128 {
			return nb
		}
	}
	return 0
}

// setBands lays out nb bands of output rows, band j rows
// [j·OH/nb, (j+1)·OH/nb).
func (p *dconvPlan) setBands(nb int) {
	o, b := p.o, &p.band
	b.n = min(nb, o.OH)
	b.rows = ceilDiv(o.OH, b.n)
	hq := b.rows + p.hq - o.OH
	b.l = phases{hq: hq, ps: o.StrideH * o.StrideW * hq * p.wq}
	b.offs, b.hiOff = p.tapOffsets(b.offs[:0], b.l)
	b.buf = max(p.cg*b.l.ps, b.hiOff+(b.rows-1)*p.wq+o.OW+p.vec-1)
}

// bandConv runs the convolution of directConv for few images and groups
// in bands of output rows: each worker fills a band's phase rows (its
// rows and the halo the taps read below them) into a buffer of its own,
// then computes every channel block of the band. Each worker reads only
// its own rows of the input and writes only its own rows of the output,
// where the channel-block split reads all of the input on each worker
// and sends y's rows to whichever worker took their chunk. (The figures
// below were taken when that split still shared one input buffer.)
//
// On a 2-vCPU AMD Zen 5 (AVX-512), 2 threads, BenchmarkConvShapes µs,
// best / median of 3 rounds alternating with the bands off: 16→64 3×3
// on 55×55 217 / 269 → 183 / 191, 3→32 3×3 stride 2 on 224×224 158 /
// 170 → 90 / 103, 64→128 3×3 stride 2 on 56×56 536 / 557 → 364 / 381,
// 64 3×3 on 56×56 760 / 780 → 621 / 682, 64→128 1×1 stride 2 106 / 126
// → 59 / 71. With large weights (ResNet's 512 3×3 on 7×7: 756 / 804 →
// 975 / 1171, each band reads all of them) or short bands (256→512 1×1
// stride 2 on 14×14, 7 output rows: a model's node 0.11 → 0.23 ms)
// they lose, hence bands.
func (p *dconvPlan) bandConv(x, y []float32, nb, outLen int) {
	o := p.o
	nkb := len(p.kb0) - 1
	p.setBands(nb)
	b := &p.band
	for u := 0; u < o.N*o.Groups; u++ {
		n, g := u/o.Groups, u%o.Groups
		runHomes(b.n, 1, min(workers(), b.n), func(_, b0, b1 int) {
			bs, os := getScratch[float32](b.buf), getScratch[float32](outLen)
			buf := *bs
			for j := b0; j < b1; j++ {
				oh0, oh1 := j*o.OH/b.n, (j+1)*o.OH/b.n
				l := b.l
				l.r0 = oh0
				// The last band is a tallest one, so that the rows
				// filled lie within the planes.
				p.fillRange(x, buf, l, n, g, 0, p.cg, oh0, oh0+l.hq)
				clear(buf[p.cg*l.ps:])
				for i := 0; i < nkb; i++ {
					for r0 := oh0; r0 < oh1; r0 += p.rows {
						p.chunk(buf[(r0-oh0)*p.wq:], b.offs, b.hiOff, *os, y, n, g, i, r0, min(oh1, r0+p.rows))
					}
				}
			}
			putScratch(bs)
			putScratch(os)
		})
	}
}

// dw3Applies reports whether o is a depthwise 3×3 convolution that
// dw3Conv runs: f32, one output channel per input channel, no dilation,
// one row and column of padding at the top and left (any at the bottom
// and right), stride 1 or 2, with the row kernels here (AVX-512 or AVX2).
func dw3Applies(o *rt.Conv) bool {
	if !dw3Plane(1, nil, nil, nil, nil, 0, 0, 0, 0, 0, 0) || o.X.DType != rt.F32 || o.Groups != o.C || o.K != o.C || o.KH != 3 || o.KW != 3 {
		return false
	}
	if o.DilH != 1 || o.DilW != 1 || o.PadT != 1 || o.PadL != 1 || o.StrideH != o.StrideW {
		return false
	}
	if (o.StrideH != 1 && o.StrideH != 2) || o.H < 1 || o.Width < 1 {
		return false
	}
	// Every output row and column reads at least one input one.
	return (o.OH-1)*o.StrideH-1 < o.H && (o.OW-1)*o.StrideW-1 < o.Width
}

// dw3Conv runs a depthwise 3×3 convolution (dw3Applies) a plane per
// kernel call, an output row at a time, straight from the input planes:
// rows above or below the input read a zero row, columns outside it are
// masked off, and bias and a ReLU/Clip are applied as each row is
// stored. Each plane is read once
// and written once, where the direct path of dconvPlan copied it into
// padded phase planes, computed rows one padding column wide, and copied
// them out again.
func dw3Conv(o *rt.Conv, x, w, bias, y []float32) {
	H, W, OH, OW, s := o.H, o.Width, o.OH, o.OW, o.StrideH
	lo, hi, clamp := clampAct(o.Act)
	if !clamp {
		lo, hi = float32(math.Inf(-1)), float32(math.Inf(1))
	}
	zs := getScratch[float32](W)
	zero := *zs
	clear(zero)
	// Narrow planes of the same size as their input run whole on the flat
	// kernel (dw3Flat), where rows of one or two vectors, each masked,
	// cost the row kernels most of their time.
	var cm []float32
	if s == 1 && OH == H && OW == W && W <= dw3FlatMaxW && H*W <= dw3FlatMaxHW && dw3Flat(nil, nil, nil, nil, 0, 0, 0, 0) {
		cs := getScratch[float32](72 * ((H*W + 7) / 8))
		defer putScratch(cs)
		cm = dw3FlatMasks(*cs, W, H*W)
	}
	planes := o.N * o.C
	grain := max(1, 8192/max(1, OH*OW))
	parallelFor(planes, grain, func(p0, p1 int) {
		for pl := p0; pl < p1; pl++ {
			c := pl % o.C
			xp := x[pl*H*W : (pl+1)*H*W]
			yp := y[pl*OH*OW : (pl+1)*OH*OW]
			var b float32
			if bias != nil {
				b = bias[c]
			}
			if cm != nil {
				dw3Flat(yp, xp, w[c*9:c*9+9], cm, W, b, lo, hi)
			} else {
				dw3Plane(s, yp, xp, zero, w[c*9:c*9+9], W, H, OH, b, lo, hi)
			}
			if !clamp {
				actApply(o.Act.Fn, o.Act.Alpha, o.Act.Beta, yp)
			}
		}
	})
	putScratch(zs)
}

// dw3FlatMaxW is the widest plane dw3Conv runs on the flat kernel, and
// dw3FlatMaxHW the largest (its masks take 288 bytes a vector of 8).
// BenchmarkConvShapes, single-thread CPU µs at load 5-6, row kernels
// against flat: 960 planes of 7×7 90-128 → 50-77, 384 of 14×14 106-127
// → 51-83, 192 of 28×28 167-196 → 94-159.
var dw3FlatMaxW, dw3FlatMaxHW = 32, 1024

// dw3FlatMasks fills cm with the masks of the flat kernel for planes of
// hw elements in rows of width and returns it: for the vector of outputs
// [8v, 8v+8) and tap (r, k), 8 lanes at cm[72v + 8(3r+k):], set (all-ones
// bit patterns) where the tap's element, q + (r-1)·width + k-1 for
// output q, is inside the plane and its column inside q's row.
func dw3FlatMasks(cm []float32, width, hw int) []float32 {
	nv := (hw + 7) / 8
	cm = cm[:72*nv]
	ones := math.Float32frombits(^uint32(0))
	for q := 0; q < 8*nv; q++ {
		v, j, col := q/8, q%8, q%width
		for r := 0; r < 3; r++ {
			for k := 0; k < 3; k++ {
				i := q + (r-1)*width + k - 1
				c := col + k - 1
				m := float32(0)
				if i >= 0 && i < hw && c >= 0 && c < width {
					m = ones
				}
				cm[72*v+8*(3*r+k)+j] = m
			}
		}
	}
	return cm
}
