package cpu

import (
	"sync"

	"github.com/vrun-go/vrun/rt"
)

// Elementwise engine: a strided N-d iterator over up to four operands of
// one shape, with dims of size 1 dropped and mergeable dims coalesced. The
// iteration space is cut into rows of the innermost (coalesced) dim, and
// rows into chunks, which are spread over worker goroutines.

const (
	maxOps     = 4
	ewChunk    = 512     // elements per scratch chunk in the general path
	ewUnit     = 16384   // elements per unit of parallel work
	ewParallel = 1 << 15 // smallest element count worth parallelising
)

type operand struct {
	data []byte   // the whole buffer
	dt   rt.DType //
	off  int      // element offset of element [0, 0, ...]
	st   []int    // element strides
}

func operandOf(r rt.Ref, data []byte) operand {
	return operand{data: data, dt: r.DType, off: int(r.Off / int64(r.DType.Size())), st: r.StridesOrContiguous()}
}

type ewPlan struct {
	nop   int
	op    [maxOps]operand
	outer []int // coalesced outer dims
	ost   [maxOps][]int
	inner int
	inc   [maxOps]int
	rows  int
	total int
	// Set by the op's planner: the row body, and whether it needs an
	// ewScratch.
	body    rowFunc
	scratch bool
	cpr     int              // chunks per row
	par     func(lo, hi int) // runRange, bound once
}

// rowNest is the loop nest of an elementwise iteration over operands of
// one shape, coalesced (rt.Coalesce) and cut into rows of the innermost
// dim.
type rowNest struct {
	outer []int   // the outer dims
	ost   [][]int // per operand: the element strides of the outer dims
	inc   []int   // per operand: the element stride of the inner dim
	inner int     // the inner dim (0 when there are no elements)
	rows  int     // the product of the outer dims (0 when there are no elements)
}

// newRowNest coalesces shape over operands with element strides st.
func newRowNest(shape []int, st ...[]int) rowNest {
	cs, cst := rt.Coalesce(shape, st...)
	r := rowNest{inner: 1, rows: 1, inc: make([]int, len(st)), ost: make([][]int, len(st))}
	if n := len(cs); n > 0 {
		r.inner = cs[n-1]
		for k := range st {
			r.inc[k] = cst[k][n-1]
			r.ost[k] = cst[k][:n-1]
		}
		r.outer = cs[:n-1]
	}
	for _, s := range r.outer {
		r.rows *= s
	}
	if r.rows*r.inner == 0 {
		r.rows, r.inner = 0, 0
	}
	return r
}

func newPlan(shape []int, ops ...operand) *ewPlan {
	p := &ewPlan{nop: len(ops)}
	copy(p.op[:], ops)
	strides := make([][]int, len(ops))
	for k := range ops {
		strides[k] = ops[k].st
	}
	r := newRowNest(shape, strides...)
	p.outer, p.inner, p.rows = r.outer, r.inner, r.rows
	copy(p.inc[:], r.inc)
	copy(p.ost[:], r.ost)
	p.total = p.rows * p.inner
	p.cpr = (p.inner + ewUnit - 1) / ewUnit
	p.par = p.runRange
	return p
}

// allInc reports whether every operand's inner increment equals v[k].
func (p *ewPlan) incIs(v ...int) bool {
	for k := range v {
		if p.inc[k] != v[k] {
			return false
		}
	}
	return true
}

type ewScratch struct {
	f [3][ewChunk]float64
	i [3][ewChunk]int64
}

var ewScratchPool = sync.Pool{New: func() any { return new(ewScratch) }}

// rowFunc computes n elements of a row chunk whose operands start at
// element offsets offs; w is nil unless the plan asked for scratch.
type rowFunc func(w *ewScratch, offs [maxOps]int, n int)

// run calls the plan's body on every row chunk (see exec); it is the
// plan as a prepared kernel.
func (p *ewPlan) run() error {
	p.exec()
	return nil
}

// exec calls the plan's body on every row chunk, in parallel when the work
// is large. It allocates nothing.
func (p *ewPlan) exec() {
	if p.total == 0 || p.body == nil {
		return
	}
	units := p.rows * p.cpr
	if p.total < ewParallel || workers() == 1 {
		p.runRange(0, units)
		return
	}
	grain := 1
	if p.inner < ewUnit {
		grain = (ewUnit + p.inner - 1) / p.inner
	}
	parallelFor(units, grain, p.par)
}

// maxFastDims is the outer rank runRange indexes without allocating.
const maxFastDims = 8

func (p *ewPlan) runRange(u0, u1 int) {
	var w *ewScratch
	if p.scratch {
		w = ewScratchPool.Get().(*ewScratch)
		defer ewScratchPool.Put(w)
	}
	cpr := p.cpr
	row, c := u0/cpr, u0%cpr
	nd := len(p.outer)
	var idxa [maxFastDims]int
	idx := idxa[:]
	if nd > maxFastDims {
		idx = make([]int, nd)
	}
	var base [maxOps]int
	for k := 0; k < p.nop; k++ {
		base[k] = p.op[k].off
	}
	r := row
	for d := nd - 1; d >= 0; d-- {
		idx[d] = r % p.outer[d]
		r /= p.outer[d]
		for k := 0; k < p.nop; k++ {
			base[k] += idx[d] * p.ost[k][d]
		}
	}
	var offs [maxOps]int
	for u := u0; u < u1; u++ {
		start := c * ewUnit
		n := min(ewUnit, p.inner-start)
		for k := 0; k < p.nop; k++ {
			offs[k] = base[k] + start*p.inc[k]
		}
		p.body(w, offs, n)
		c++
		if c == cpr {
			c = 0
			for d := nd - 1; d >= 0; d-- {
				idx[d]++
				for k := 0; k < p.nop; k++ {
					base[k] += p.ost[k][d]
				}
				if idx[d] < p.outer[d] {
					break
				}
				for k := 0; k < p.nop; k++ {
					base[k] -= idx[d] * p.ost[k][d]
				}
				idx[d] = 0
			}
		}
	}
}

// ---- loads and stores between typed strided memory and f64/i64 scratch ----

type number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint8 | ~int8
}

// scratch is the type of a row's values while an op computes on them:
// float64 for float math, int64 for integer math.
type scratch interface{ float64 | int64 }

func loadG[S scratch, T number](dst []S, s []T, off, inc int) {
	if inc == 1 {
		s = s[off : off+len(dst)]
		for i, v := range s {
			dst[i] = S(v)
		}
		return
	}
	for i := range dst {
		dst[i] = S(s[off+i*inc])
	}
}

// load converts len(dst) elements of o, from element off with stride inc,
// to scratch values.
func load[S scratch](dst []S, o operand, off, inc int) {
	switch o.dt {
	case rt.F32:
		loadG(dst, elems[float32](o.data), off, inc)
	case rt.F64:
		loadG(dst, elems[float64](o.data), off, inc)
	case rt.F16:
		s := elems[uint16](o.data)
		for i := range dst {
			dst[i] = S(rt.F16Float(s[off+i*inc]))
		}
	case rt.I32:
		loadG(dst, elems[int32](o.data), off, inc)
	case rt.I64:
		loadG(dst, elems[int64](o.data), off, inc)
	case rt.U8, rt.Bool:
		loadG(dst, o.data, off, inc)
	case rt.I8:
		loadG(dst, elems[int8](o.data), off, inc)
	}
}

func storeGF[S scratch, T ~float32 | ~float64](src []S, s []T, off, inc int) {
	if inc == 1 {
		s = s[off : off+len(src)]
		for i, v := range src {
			s[i] = T(v)
		}
		return
	}
	for i, v := range src {
		s[off+i*inc] = T(v)
	}
}

// storeGI stores to an integer dtype: float64 values through
// rt.FloatToInt, int64 values wrapping.
func storeGI[S scratch, T ~int32 | ~int64 | ~uint8 | ~int8](src []S, s []T, off, inc int) {
	if f, ok := any(src).([]float64); ok {
		for i, v := range f {
			s[off+i*inc] = T(rt.FloatToInt(v))
		}
		return
	}
	for i, v := range src {
		s[off+i*inc] = T(v)
	}
}

// store converts scratch values to o's dtype and writes them from element
// off with stride inc.
func store[S scratch](src []S, o operand, off, inc int) {
	switch o.dt {
	case rt.F32:
		storeGF(src, elems[float32](o.data), off, inc)
	case rt.F64:
		storeGF(src, elems[float64](o.data), off, inc)
	case rt.F16:
		s := elems[uint16](o.data)
		for i, v := range src {
			s[off+i*inc] = rt.F16Bits(float32(v))
		}
	case rt.I32:
		storeGI(src, elems[int32](o.data), off, inc)
	case rt.I64:
		storeGI(src, elems[int64](o.data), off, inc)
	case rt.U8:
		storeGI(src, o.data, off, inc)
	case rt.I8:
		storeGI(src, elems[int8](o.data), off, inc)
	case rt.Bool:
		for i, v := range src {
			o.data[off+i*inc] = b2u(v != 0)
		}
	}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ---- raw moves (same dtype, no conversion) ----

type raw interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

func moveRow[T raw](d []T, doff, dinc int, s []T, soff, sinc, n int) {
	switch {
	case dinc == 1 && sinc == 1:
		copy(d[doff:doff+n], s[soff:soff+n])
	case dinc == 1 && sinc == 0:
		v := s[soff]
		dd := d[doff : doff+n]
		for i := range dd {
			dd[i] = v
		}
	default:
		for i := 0; i < n; i++ {
			d[doff+i*dinc] = s[soff+i*sinc]
		}
	}
}

func moveBody[T raw](p *ewPlan) rowFunc {
	s := elems[T](p.op[0].data)
	d := elems[T](p.op[1].data)
	si, di := p.inc[0], p.inc[1]
	return func(_ *ewScratch, offs [maxOps]int, n int) {
		moveRow(d, offs[1], di, s, offs[0], si, n)
	}
}

// sizedMove returns the raw move body for element size sz.
func sizedMove(p *ewPlan, sz int) rowFunc {
	switch sz {
	case 1:
		return moveBody[uint8](p)
	case 2:
		return moveBody[uint16](p)
	case 4:
		return moveBody[uint32](p)
	}
	return moveBody[uint64](p)
}

// ---- Unary ----

func unaryPlan(o *rt.Unary, x, y []byte) *ewPlan {
	p := newPlan(o.Y.Shape, operandOf(o.X, x), operandOf(o.Y, y))
	xd, yd := o.X.DType, o.Y.DType
	if o.Fn == rt.Copy && xd == yd {
		p.body = sizedMove(p, xd.Size())
		return p
	}
	if xd == yd && p.incIs(1, 1) {
		switch xd {
		case rt.F32:
			p.body = unaryFast[float32](p, o.Fn, o.Alpha, o.Beta)
			return p
		case rt.F64:
			p.body = unaryFast[float64](p, o.Fn, o.Alpha, o.Beta)
			return p
		}
	}
	X, Y := p.op[0], p.op[1]
	xi, yi := p.inc[0], p.inc[1]
	intDomain := !xd.IsFloat() && !(o.Fn == rt.Copy && yd.IsFloat())
	fn, a, b := o.Fn, o.Alpha, o.Beta
	if intDomain {
		p.scratch = true
		p.body = func(w *ewScratch, offs [maxOps]int, n int) {
			for s := 0; s < n; s += ewChunk {
				m := min(ewChunk, n-s)
				xs, ys := w.i[0][:m], w.i[1][:m]
				load(xs, X, offs[0]+s*xi, xi)
				unaryI64(fn, xs, ys)
				store(ys, Y, offs[1]+s*yi, yi)
			}
		}
		return p
	}
	p.scratch = true
	p.body = func(w *ewScratch, offs [maxOps]int, n int) {
		for s := 0; s < n; s += ewChunk {
			m := min(ewChunk, n-s)
			ys := w.f[1][:m]
			load(ys, X, offs[0]+s*xi, xi)
			actApply(fn, a, b, ys)
			store(ys, Y, offs[1]+s*yi, yi)
		}
	}
	return p
}

func unaryFast[T floatT](p *ewPlan, fn rt.UnaryFn, a, b float64) rowFunc {
	xs := elems[T](p.op[0].data)
	ys := elems[T](p.op[1].data)
	return func(_ *ewScratch, offs [maxOps]int, n int) {
		y := ys[offs[1] : offs[1]+n]
		x := xs[offs[0] : offs[0]+n]
		if y32, ok := asF32(y); ok {
			if x32, _ := asF32(x); unaryF32(fn, a, b, y32, x32) {
				return
			}
		}
		if y64, ok := asF64(y); ok && fn == rt.Affine {
			if x64, _ := asF64(x); affineF64(y64, x64, a, b) {
				return
			}
		}
		if &x[0] != &y[0] {
			copy(y, x)
		}
		actApply(fn, a, b, y)
	}
}

// unaryI64 computes the integer unary functions, y = fn(x).
func unaryI64(fn rt.UnaryFn, x, y []int64) {
	y = y[:len(x)]
	copy(y, x)
	if signedInPlace(fn, y) {
		return
	}
	switch fn {
	case rt.Sign:
		for i, v := range y {
			switch {
			case v > 0:
				y[i] = 1
			case v < 0:
				y[i] = -1
			}
		}
	case rt.Not:
		for i, v := range y {
			y[i] = int64(b2u(v == 0))
		}
	}
}

// signedInPlace applies Neg, Abs, Relu or Square in place to y, the
// functions that are the same for integers and floats, and reports
// whether fn is one of them. Abs and Relu keep -0.
func signedInPlace[T ~int64 | floatT](fn rt.UnaryFn, y []T) bool {
	switch fn {
	case rt.Neg:
		for i, v := range y {
			y[i] = -v
		}
	case rt.Abs:
		for i, v := range y {
			if v < 0 {
				y[i] = -v
			}
		}
	case rt.Relu:
		for i, v := range y {
			if v < 0 {
				y[i] = 0
			}
		}
	case rt.Square:
		for i, v := range y {
			y[i] = v * v
		}
	default:
		return false
	}
	return true
}

// ---- Binary ----

func binaryPlan(o *rt.Binary, a, b, y []byte) *ewPlan {
	p := newPlan(o.Y.Shape, operandOf(o.A, a), operandOf(o.B, b), operandOf(o.Y, y))
	ad := o.A.DType
	if ad == o.Y.DType && fastBinary(o.Fn) && (p.incIs(1, 1, 1) || p.incIs(0, 1, 1) || p.incIs(1, 0, 1)) {
		switch ad {
		case rt.F32:
			p.body = binaryFast[float32](p, o.Fn)
			return p
		case rt.F64:
			p.body = binaryFast[float64](p, o.Fn)
			return p
		}
	}
	p.scratch = true
	if ad.IsFloat() {
		p.body = binaryScratch(p, o.Fn, binaryF64, func(w *ewScratch) *[3][ewChunk]float64 { return &w.f })
	} else {
		p.body = binaryScratch(p, o.Fn, binaryI64, func(w *ewScratch) *[3][ewChunk]int64 { return &w.i })
	}
	return p
}

// binaryScratch is the general binary body: chunk by chunk, it loads A
// and B into the scratch rows buf picks (float64 or int64), computes
// f(fn, a, b, y) there and stores Y.
func binaryScratch[S scratch](p *ewPlan, fn rt.BinaryFn, f func(fn rt.BinaryFn, a, b, y []S), buf func(*ewScratch) *[3][ewChunk]S) rowFunc {
	A, B, Y := p.op[0], p.op[1], p.op[2]
	ai, bi, yi := p.inc[0], p.inc[1], p.inc[2]
	return func(w *ewScratch, offs [maxOps]int, n int) {
		sc := buf(w)
		for s := 0; s < n; s += ewChunk {
			m := min(ewChunk, n-s)
			as, bs, ys := sc[0][:m], sc[1][:m], sc[2][:m]
			load(as, A, offs[0]+s*ai, ai)
			load(bs, B, offs[1]+s*bi, bi)
			f(fn, as, bs, ys)
			store(ys, Y, offs[2]+s*yi, yi)
		}
	}
}

func fastBinary(fn rt.BinaryFn) bool {
	switch fn {
	case rt.Add, rt.Sub, rt.Mul, rt.Div, rt.Max, rt.Min:
		return true
	}
	return false
}

func binaryFast[T floatT](p *ewPlan, fn rt.BinaryFn) rowFunc {
	as := elems[T](p.op[0].data)
	bs := elems[T](p.op[1].data)
	ys := elems[T](p.op[2].data)
	ai, bi := p.inc[0], p.inc[1]
	return func(_ *ewScratch, offs [maxOps]int, n int) {
		y := ys[offs[2] : offs[2]+n]
		form := formVV
		switch {
		case ai == 0:
			form = formSV
		case bi == 0:
			form = formVS
		}
		if y32, ok := asF32(y); ok {
			a32, _ := asF32(as[offs[0]:])
			b32, _ := asF32(bs[offs[1]:])
			if binaryF32(fn, form, y32, a32, b32) {
				return
			}
		}
		if y64, ok := asF64(y); ok {
			a64, _ := asF64(as[offs[0]:])
			b64, _ := asF64(bs[offs[1]:])
			if binaryVecF64(fn, form, y64, a64, b64) {
				return
			}
		}
		switch form {
		case formSV:
			binScalarVec(fn, as[offs[0]], bs[offs[1]:offs[1]+n], y)
		case formVS:
			binVecScalar(fn, as[offs[0]:offs[0]+n], bs[offs[1]], y)
		default:
			binVecVec(fn, as[offs[0]:offs[0]+n], bs[offs[1]:offs[1]+n], y)
		}
	}
}

func binVecVec[T floatT](fn rt.BinaryFn, a, b, y []T) {
	if sameForIntFloat(fn, a, b, y) {
		return
	}
	a = a[:len(y)]
	b = b[:len(y)]
	if fn == rt.Div {
		for i := range y {
			y[i] = a[i] / b[i]
		}
	}
}

// sameForIntFloat computes y = a fn b for Add, Sub, Mul, Max and Min, the
// functions that are the same for integers and floats (the builtin max
// and min: NaN wins, and max(-0, +0) is +0), and reports whether fn is
// one of them.
func sameForIntFloat[T ~int64 | floatT](fn rt.BinaryFn, a, b, y []T) bool {
	a = a[:len(y)]
	b = b[:len(y)]
	switch fn {
	case rt.Add:
		for i := range y {
			y[i] = a[i] + b[i]
		}
	case rt.Sub:
		for i := range y {
			y[i] = a[i] - b[i]
		}
	case rt.Mul:
		for i := range y {
			y[i] = a[i] * b[i]
		}
	case rt.Max:
		for i := range y {
			y[i] = max(a[i], b[i])
		}
	case rt.Min:
		for i := range y {
			y[i] = min(a[i], b[i])
		}
	default:
		return false
	}
	return true
}

func binScalarVec[T floatT](fn rt.BinaryFn, a T, b, y []T) {
	b = b[:len(y)]
	switch fn {
	case rt.Add:
		for i := range y {
			y[i] = a + b[i]
		}
	case rt.Sub:
		for i := range y {
			y[i] = a - b[i]
		}
	case rt.Mul:
		for i := range y {
			y[i] = a * b[i]
		}
	case rt.Div:
		for i := range y {
			y[i] = a / b[i]
		}
	case rt.Max:
		for i := range y {
			y[i] = max(a, b[i])
		}
	case rt.Min:
		for i := range y {
			y[i] = min(a, b[i])
		}
	}
}

func binVecScalar[T floatT](fn rt.BinaryFn, a []T, b T, y []T) {
	a = a[:len(y)]
	switch fn {
	case rt.Sub:
		for i := range y {
			y[i] = a[i] - b
		}
	case rt.Div:
		for i := range y {
			y[i] = a[i] / b
		}
	default: // Add, Mul, Max and Min commute (the builtin max and min too: NaN wins, and max(-0, +0) is +0)
		binScalarVec(fn, b, a, y)
	}
}

func binaryF64(fn rt.BinaryFn, a, b, y []float64) {
	a = a[:len(y)]
	b = b[:len(y)]
	switch fn {
	case rt.Add, rt.Sub, rt.Mul, rt.Div, rt.Max, rt.Min:
		binVecVec(fn, a, b, y)
	case rt.Equal:
		for i := range y {
			y[i] = b2f(a[i] == b[i])
		}
	case rt.Less:
		for i := range y {
			y[i] = b2f(a[i] < b[i])
		}
	case rt.LessEq:
		for i := range y {
			y[i] = b2f(a[i] <= b[i])
		}
	case rt.Greater:
		for i := range y {
			y[i] = b2f(a[i] > b[i])
		}
	case rt.GreaterEq:
		for i := range y {
			y[i] = b2f(a[i] >= b[i])
		}
	default:
		for i := range y {
			y[i] = fn.Apply(a[i], b[i])
		}
	}
}

func binaryI64(fn rt.BinaryFn, a, b, y []int64) {
	if sameForIntFloat(fn, a, b, y) {
		return
	}
	a = a[:len(y)]
	b = b[:len(y)]
	switch fn {
	case rt.Div:
		for i := range y {
			if b[i] == 0 {
				y[i] = 0
			} else {
				y[i] = a[i] / b[i]
			}
		}
	case rt.Mod:
		for i := range y {
			if b[i] == 0 {
				y[i] = 0
				continue
			}
			m := a[i] % b[i]
			if m != 0 && (m < 0) != (b[i] < 0) {
				m += b[i]
			}
			y[i] = m
		}
	case rt.Fmod:
		for i := range y {
			if b[i] == 0 {
				y[i] = 0
			} else {
				y[i] = a[i] % b[i]
			}
		}
	case rt.Equal:
		for i := range y {
			y[i] = int64(b2u(a[i] == b[i]))
		}
	case rt.Less:
		for i := range y {
			y[i] = int64(b2u(a[i] < b[i]))
		}
	case rt.LessEq:
		for i := range y {
			y[i] = int64(b2u(a[i] <= b[i]))
		}
	case rt.Greater:
		for i := range y {
			y[i] = int64(b2u(a[i] > b[i]))
		}
	case rt.GreaterEq:
		for i := range y {
			y[i] = int64(b2u(a[i] >= b[i]))
		}
	case rt.And:
		for i := range y {
			y[i] = int64(b2u(a[i] != 0 && b[i] != 0))
		}
	case rt.Or:
		for i := range y {
			y[i] = int64(b2u(a[i] != 0 || b[i] != 0))
		}
	case rt.Xor:
		for i := range y {
			y[i] = int64(b2u((a[i] != 0) != (b[i] != 0)))
		}
	}
}

// ---- Where ----

func wherePlan(o *rt.Where, c, a, b, y []byte) *ewPlan {
	p := newPlan(o.Y.Shape, operandOf(o.Cond, c), operandOf(o.A, a), operandOf(o.B, b), operandOf(o.Y, y))
	switch o.Y.DType.Size() {
	case 1:
		p.body = whereBody[uint8](p)
	case 2:
		p.body = whereBody[uint16](p)
	case 4:
		p.body = whereBody[uint32](p)
	default:
		p.body = whereBody[uint64](p)
	}
	return p
}

func whereBody[T raw](p *ewPlan) rowFunc {
	cs := p.op[0].data
	as, bs, ys := elems[T](p.op[1].data), elems[T](p.op[2].data), elems[T](p.op[3].data)
	ci, ai, bi, yi := p.inc[0], p.inc[1], p.inc[2], p.inc[3]
	return func(_ *ewScratch, offs [maxOps]int, n int) {
		co, ao, bo, yo := offs[0], offs[1], offs[2], offs[3]
		for i := 0; i < n; i++ {
			if cs[co+i*ci] != 0 {
				ys[yo+i*yi] = as[ao+i*ai]
			} else {
				ys[yo+i*yi] = bs[bo+i*bi]
			}
		}
	}
}

// ---- Fill ----

func fillPlan(o *rt.Fill, y []byte) *ewPlan {
	p := newPlan(o.Y.Shape, operandOf(o.Y, y))
	bits := rt.FillBits(o.Y.DType, o.Value)
	switch o.Y.DType.Size() {
	case 1:
		p.body = fillBody(p, uint8(bits))
	case 2:
		p.body = fillBody(p, uint16(bits))
	case 4:
		p.body = fillBody(p, uint32(bits))
	case 8:
		p.body = fillBody(p, bits)
	}
	return p
}

func fillBody[T raw](p *ewPlan, v T) rowFunc {
	ys := elems[T](p.op[0].data)
	yi := p.inc[0]
	return func(_ *ewScratch, offs [maxOps]int, n int) {
		if yi == 1 {
			y := ys[offs[0] : offs[0]+n]
			for i := range y {
				y[i] = v
			}
			return
		}
		for i := 0; i < n; i++ {
			ys[offs[0]+i*yi] = v
		}
	}
}
