package cpu

import (
	"sync"

	"github.com/vrun-go/vrun/rt"
)

// rt.Fused: the operands (inputs, then outputs) are walked together as
// rows of their innermost coalesced dim, in chunks of fusedChunk elements;
// rows of at most fusedShortRow elements are gathered up to fusedMaxGroup
// at a time into the registers, so that each instruction runs once per
// group (an LSTM step's [2, 48] gates: 0.8 µs instead of 1.1 µs as seven
// ops, BenchmarkFused).
// Per chunk, each input register is the input's memory itself when its
// elements are contiguous, else a scratch row it is gathered (or
// broadcast) into; each instruction writes its own scratch row with the
// vectorised row kernels (unaryF32, binaryF32, actApply); then the
// outputs are stored. A chunk reads all its inputs before it stores, so an
// output may alias an input exactly.

const fusedChunk = 2048

// Rows of at most fusedShortRow elements are processed fusedMaxGroup (at
// most) at a time.
const (
	fusedShortRow = 64
	fusedMaxGroup = 64
)

// fusedPlan is a Fused op made ready to run: buffers resolved and the
// loop nest coalesced.
type fusedPlan[T floatT] struct {
	o    *rt.Fused
	nIn  int
	data [][]T // per operand: the whole buffer
	off  []int // per operand: element offset of element 0
	rowNest
	cpr       int    // chunks per row
	stage     []bool // per input: copy into scratch even when contiguous (it is also a result)
	direct    int    // the output the last instruction writes directly, or -1
	group     int    // rows per chunk when rows are short (> 1), else 1
	pool      sync.Pool
	parRun    func(lo, hi int)
	parGroups func(lo, hi int)
}

// fusedScratch holds a chunk's registers.
type fusedScratch[T floatT] struct {
	buf  []T
	regs [][]T
}

func fusedKernel(o *rt.Fused) kernel {
	if o.Out[0].DType == rt.F64 {
		return newFusedPlan[float64](o)
	}
	return newFusedPlan[float32](o)
}

func fusedOp(o *rt.Fused) {
	_ = fusedKernel(o).run()
}

func newFusedPlan[T floatT](o *rt.Fused) *fusedPlan[T] {
	refs := append(append([]rt.Ref(nil), o.In...), o.Out...)
	p := &fusedPlan[T]{o: o, nIn: len(o.In)}
	strides := make([][]int, len(refs))
	for k, r := range refs {
		p.data = append(p.data, elems[T](data(r)))
		p.off = append(p.off, int(r.Off/int64(r.DType.Size())))
		strides[k] = r.StridesOrContiguous()
	}
	p.rowNest = newRowNest(o.Out[0].Shape, strides...)
	p.cpr = max(1, (p.inner+fusedChunk-1)/fusedChunk)
	p.group = 1
	if p.rows > 1 && p.inner > 0 && p.inner <= fusedShortRow {
		// Short rows: gather several into each chunk, so that every
		// instruction runs once per chunk, not once per row.
		p.group = min(p.rows, fusedChunk/p.inner, fusedMaxGroup)
	}
	p.stage = make([]bool, p.nIn)
	for _, r := range o.Result {
		if r < p.nIn {
			p.stage[r] = true
		}
	}
	// The last instruction writes straight into a contiguous output that
	// it alone produces.
	p.direct = -1
	if last := o.Regs() - 1; len(o.Code) > 0 {
		for k, r := range o.Result {
			if r == last && p.inc[p.nIn+k] == 1 {
				if p.direct >= 0 {
					p.direct = -1
					break
				}
				p.direct = k
			}
		}
	}
	nreg := o.Regs()
	p.pool.New = func() any {
		return &fusedScratch[T]{buf: make([]T, nreg*fusedChunk), regs: make([][]T, nreg)}
	}
	p.parRun = p.runRange
	p.parGroups = p.runGroups
	return p
}

func (p *fusedPlan[T]) run() error {
	units := p.rows * p.cpr
	if units == 0 {
		return nil
	}
	if p.group > 1 {
		groups := (p.rows + p.group - 1) / p.group
		if p.rows*p.inner < ewParallel || workers() == 1 {
			p.runGroups(0, groups)
			return nil
		}
		parallelFor(groups, max(1, ewUnit/(p.group*p.inner)), p.parGroups)
		return nil
	}
	if p.rows*p.inner < ewParallel || workers() == 1 {
		p.runRange(0, units)
		return nil
	}
	parallelFor(units, max(1, ewUnit/fusedChunk), p.parRun)
	return nil
}

// runRange runs chunks [u0, u1) (row-major: row u/cpr, chunk u%cpr).
func (p *fusedPlan[T]) runRange(u0, u1 int) {
	w := p.pool.Get().(*fusedScratch[T])
	defer p.pool.Put(w)
	nops := len(p.data)
	var basea [2 * rt.MaxFusedOperands]int
	var idxa [maxFastDims]int
	base := basea[:nops]
	idx := idxa[:]
	if len(p.outer) > maxFastDims {
		idx = make([]int, len(p.outer))
	}
	for u := u0; u < u1; u++ {
		row, c := u/p.cpr, u%p.cpr
		if u == u0 || c == 0 {
			// Offsets of the row's first element.
			r := row
			for k := range base {
				base[k] = p.off[k]
			}
			for d := len(p.outer) - 1; d >= 0; d-- {
				idx[d] = r % p.outer[d]
				r /= p.outer[d]
				for k := range base {
					base[k] += idx[d] * p.ost[k][d]
				}
			}
		}
		s := c * fusedChunk
		p.chunk(w, base, s, min(fusedChunk, p.inner-s))
	}
}

// rowBase sets base to the operands' offsets of the first element of row.
func (p *fusedPlan[T]) rowBase(base []int, row int) {
	for k := range base {
		base[k] = p.off[k]
	}
	for d := len(p.outer) - 1; d >= 0; d-- {
		i := row % p.outer[d]
		row /= p.outer[d]
		for k := range base {
			base[k] += i * p.ost[k][d]
		}
	}
}

// runGroups runs row groups [g0, g1): each gathers its rows' inputs into
// the registers, runs the program once over all of them and scatters the
// outputs.
func (p *fusedPlan[T]) runGroups(g0, g1 int) {
	w := p.pool.Get().(*fusedScratch[T])
	defer p.pool.Put(w)
	o := p.o
	nops, inner := len(p.data), p.inner
	var basea [2 * rt.MaxFusedOperands]int
	var obase [fusedMaxGroup][rt.MaxFusedOperands]int
	base := basea[:nops]
	for g := g0; g < g1; g++ {
		row0 := g * p.group
		nr := min(p.group, p.rows-row0)
		n := nr * inner
		for j := range nr {
			p.rowBase(base, row0+j)
			for k := 0; k < p.nIn; k++ {
				src, inc, at := p.data[k], p.inc[k], base[k]
				gatherRun(w.buf[k*fusedChunk+j*inner:k*fusedChunk+(j+1)*inner], src, at, inc)
			}
			copy(obase[j][:len(o.Out)], base[p.nIn:])
		}
		regs := w.regs
		for k := 0; k < p.nIn; k++ {
			regs[k] = w.buf[k*fusedChunk : k*fusedChunk+n]
		}
		for i, in := range o.Code {
			r := p.nIn + i
			dst := w.buf[r*fusedChunk : r*fusedChunk+n]
			if in.Binary {
				fusedBinary(in.Fn, dst, regs[in.A], regs[in.B])
			} else {
				fusedUnary(in.Unary, in.Alpha, in.Beta, dst, regs[in.A])
			}
			regs[r] = dst
		}
		for q, r := range o.Result {
			dst, inc := p.data[p.nIn+q], p.inc[p.nIn+q]
			for j := range nr {
				src := regs[r][j*inner : (j+1)*inner]
				at := obase[j][q]
				if inc == 1 {
					copy(dst[at:at+inner], src)
					continue
				}
				for i, v := range src {
					dst[at+i*inc] = v
				}
			}
		}
	}
}

// chunk computes n elements from position s of the row whose operands
// start at base.
func (p *fusedPlan[T]) chunk(w *fusedScratch[T], base []int, s, n int) {
	o := p.o
	regs := w.regs
	for k := 0; k < p.nIn; k++ {
		src, inc := p.data[k], p.inc[k]
		at := base[k] + s*inc
		if inc == 1 && !p.stage[k] {
			regs[k] = src[at : at+n]
			continue
		}
		buf := w.buf[k*fusedChunk : k*fusedChunk+n]
		gatherRun(buf, src, at, inc)
		regs[k] = buf
	}
	last := len(o.Code) - 1
	for i, in := range o.Code {
		r := p.nIn + i
		dst := w.buf[r*fusedChunk : r*fusedChunk+n]
		if i == last && p.direct >= 0 {
			// The last instruction writes its output in place: every input
			// has been read (an output may alias one exactly).
			q := p.nIn + p.direct
			at := base[q] + s
			dst = p.data[q][at : at+n]
		}
		a := regs[in.A]
		if in.Binary {
			fusedBinary(in.Fn, dst, a, regs[in.B])
		} else {
			fusedUnary(in.Unary, in.Alpha, in.Beta, dst, a)
		}
		regs[r] = dst
	}
	for k, r := range o.Result {
		if k == p.direct {
			continue
		}
		q := p.nIn + k
		dst, inc := p.data[q], p.inc[q]
		at := base[q] + s*inc
		src := regs[r]
		if inc == 1 {
			copy(dst[at:at+n], src)
			continue
		}
		for i, v := range src {
			dst[at+i*inc] = v
		}
	}
}

// fusedUnary computes dst = fn(src) on disjoint rows.
func fusedUnary[T floatT](fn rt.UnaryFn, alpha, beta float64, dst, src []T) {
	if d32, ok := asF32(dst); ok {
		if s32, _ := asF32(src); unaryF32(fn, alpha, beta, d32, s32) {
			return
		}
	}
	copy(dst, src)
	actApply(fn, alpha, beta, dst)
}

// fusedBinary computes dst = fn(a, b) on rows of one length.
func fusedBinary[T floatT](fn rt.BinaryFn, dst, a, b []T) {
	if !fastBinary(fn) {
		for i := range dst {
			dst[i] = T(fn.Apply(float64(a[i]), float64(b[i])))
		}
		return
	}
	if d32, ok := asF32(dst); ok {
		a32, _ := asF32(a)
		b32, _ := asF32(b)
		if binaryF32(fn, formVV, d32, a32, b32) {
			return
		}
	}
	binVecVec(fn, a, b, dst)
}

// gatherRun fills buf with the operand elements src[at], src[at+inc], ...:
// one copy when they are contiguous, the one value when inc is 0
// (broadcast).
func gatherRun[T floatT](buf, src []T, at, inc int) {
	switch inc {
	case 1:
		copy(buf, src[at:at+len(buf)])
	case 0:
		v := src[at]
		for i := range buf {
			buf[i] = v
		}
	default:
		for i := range buf {
			buf[i] = src[at+i*inc]
		}
	}
}
