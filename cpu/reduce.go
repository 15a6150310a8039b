package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// ---- Reduce ----

func reduceOp(o *rt.Reduce) {
	switch o.X.DType {
	case rt.F32:
		if o.Inner == 1 && reduceRowsF32(o) {
			return
		}
		reduceRows(o, reduceRowF[float32])
	case rt.F64:
		if reduceLongRowF64(o) {
			return
		}
		reduceRows(o, reduceRowF64)
	case rt.I32:
		reduceRows(o, reduceRowI[int32])
	case rt.I64:
		reduceRows(o, reduceRowI[int64])
	case rt.U8, rt.Bool:
		reduceRows(o, reduceRowI[uint8])
	case rt.I8:
		reduceRows(o, reduceRowI[int8])
	}
}

func reduceGrain(n int) int { return max(1, 16384/max(n, 1)) }

// reduceRows reduces each of the Outer*Inner rows of o with row, in
// parallel; row returns the reduced value or, for ArgMax and ArgMin, the
// index.
func reduceRows[T number, S scratch](o *rt.Reduce, row func(fn rt.ReduceFn, x []T, base, st, n int, last bool) (S, int64)) {
	O, N, I := o.Outer, o.N, o.Inner
	x := lin[T](o.X, O*N*I)
	arg := o.Fn == rt.ArgMax || o.Fn == rt.ArgMin
	var y []T
	var yi []int64
	if arg {
		yi = lin[int64](o.Y, O*I)
	} else {
		y = lin[T](o.Y, O*I)
	}
	parallelFor(O*I, reduceGrain(N), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			oo, ii := q/I, q%I
			v, idx := row(o.Fn, x, oo*N*I+ii, I, N, o.SelectLast)
			if arg {
				yi[q] = idx
			} else {
				y[q] = T(v)
			}
		}
	})
}

// reduceChunk is the number of elements the f32 row kernels sum in
// float32 lanes before the partial sum joins a float64 total.
const reduceChunk = 4096

// reduceRowsF32 reduces contiguous f32 rows (Inner == 1) with the
// vectorised row kernels for Sum, Mean, SumSquare, L2 and Max, and
// reports whether it could.
func reduceRowsF32(o *rt.Reduce) bool {
	switch o.Fn {
	case rt.Sum, rt.Mean, rt.SumSquare, rt.L2, rt.RMax:
	default:
		return false
	}
	if _, ok := sumF32(nil); !ok {
		return false
	}
	O, N := o.Outer, o.N
	x := lin[float32](o.X, O*N)
	y := lin[float32](o.Y, O)
	if O*N < 1<<17 {
		reduceRangeF32(o.Fn, x, y, N, 0, O)
		return true
	}
	fn := o.Fn
	if O == 1 && fn != rt.RMax && N >= 4*longRowChunk && workers() > 1 {
		// One long row (a vector's norm): reduceRangeF32's float64 sums of
		// each longRowChunk elements in parallel, added in order.
		part := rt.Sum
		if fn == rt.SumSquare || fn == rt.L2 {
			part = rt.SumSquare
		}
		s := finishSum(fn, chunkedSum(N, func(lo, hi int) float64 { return sumRangeF32(part, x[lo:hi]) }), N)
		y[0] = float32(s)
		return true
	}
	parallelFor(O, max(1, (1<<16)/max(N, 1)), func(lo, hi int) { reduceRangeF32(fn, x, y, N, lo, hi) })
	return true
}

func reduceRangeF32(fn rt.ReduceFn, x, y []float32, N, lo, hi int) {
	for r := lo; r < hi; r++ {
		xr := x[r*N : (r+1)*N]
		if fn == rt.RMax {
			if N == 0 {
				y[r] = float32(math.Inf(-1))
			} else {
				y[r], _ = maxF32(xr)
			}
			continue
		}
		y[r] = float32(finishSum(fn, sumRangeF32(fn, xr), N))
	}
}

// sumRangeF32 is the sum of x (fn Sum or Mean) or of its squares
// (SumSquare or L2) in float64, of the float32 sums of each reduceChunk
// elements by the vector kernels.
func sumRangeF32(fn rt.ReduceFn, x []float32) float64 {
	s := 0.0
	for c := 0; c < len(x); c += reduceChunk {
		xc := x[c:min(c+reduceChunk, len(x))]
		var v float32
		if fn == rt.SumSquare || fn == rt.L2 {
			v, _ = sumSqDevF32(xc, 0)
		} else {
			v, _ = sumF32(xc)
		}
		s += float64(v)
	}
	return s
}

// reduceRowF64 is reduceRowF for float64, with contiguous rows (st 1) of
// Sum, Mean, SumSquare and L2 summed in independent partial sums (for the
// squares, the AVX2 sum-of-squares kernel, or the vector dot kernels where
// there are some): one running sum made every addition wait for the
// previous one.
func reduceRowF64(fn rt.ReduceFn, x []float64, base, st, n int, last bool) (float64, int64) {
	if st != 1 || n < 16 {
		return reduceRowF(fn, x, base, st, n, last)
	}
	r := x[base : base+n]
	var s float64
	switch fn {
	case rt.Sum, rt.Mean:
		s = sum8(r)
		if fn == rt.Mean {
			s /= float64(n)
		}
	case rt.SumSquare, rt.L2:
		var c [1]float64
		if v, ok := sumSqF64(r); ok {
			c[0] = v
		} else if !gemvDotAsm(r, r, n, n, c[:], 1, 1, 0, 1) {
			c[0] = sumSq8(r)
		}
		s = c[0]
		if fn == rt.L2 {
			s = math.Sqrt(s)
		}
	default:
		return reduceRowF(fn, x, base, st, n, last)
	}
	return s, 0
}

// longRowChunk is the number of elements of one long row that
// reduceLongRowF64 sums a task: a fixed size, so that the partial sums,
// and the result, do not depend on the number of workers.
const longRowChunk = 1 << 15

// reduceLongRowF64 reduces one long contiguous f64 row (Outer·Inner == 1,
// at least 4 chunks; Sum, Mean, SumSquare, L2) in parallel: reduceRowF64's
// sum of each longRowChunk elements, the partial sums then added in order.
// reduceRows splits rows between the workers, so that a single row (a
// vector's norm) ran on one. It reports whether it applied.
func reduceLongRowF64(o *rt.Reduce) bool {
	N := o.N
	if o.Outer != 1 || o.Inner != 1 || N < 4*longRowChunk || workers() < 2 {
		return false
	}
	fn := o.Fn
	part := fn
	switch fn {
	case rt.Sum, rt.Mean:
		part = rt.Sum
	case rt.SumSquare, rt.L2:
		part = rt.SumSquare
	default:
		return false
	}
	x := lin[float64](o.X, N)
	y := lin[float64](o.Y, 1)
	s := chunkedSum(N, func(lo, hi int) float64 {
		v, _ := reduceRowF64(part, x, lo, 1, hi-lo, false)
		return v
	})
	y[0] = finishSum(fn, s, N)
	return true
}

// chunkedSum is the sum of part(lo, hi) over [0, n) in longRowChunk
// pieces, computed in parallel and added in order, so that the result does
// not depend on the number of workers.
func chunkedSum(n int, part func(lo, hi int) float64) float64 {
	nc := (n + longRowChunk - 1) / longRowChunk
	ps := getScratch[float64](nc)
	p := *ps
	parallelFor(nc, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			p[c] = part(c*longRowChunk, min((c+1)*longRowChunk, n))
		}
	})
	s := 0.0
	for _, v := range p {
		s += v
	}
	putScratch(ps)
	return s
}

// finishSum turns the sum (of squares, for L2) of n elements into fn's
// result: the mean for Mean, the square root for L2.
func finishSum(fn rt.ReduceFn, s float64, n int) float64 {
	switch fn {
	case rt.Mean:
		return s / float64(n)
	case rt.L2:
		return math.Sqrt(s)
	}
	return s
}

// sum8 sums x in eight interleaved partial sums.
func sum8(x []float64) float64 {
	var s [8]float64
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		s[0] += v[0]
		s[1] += v[1]
		s[2] += v[2]
		s[3] += v[3]
		s[4] += v[4]
		s[5] += v[5]
		s[6] += v[6]
		s[7] += v[7]
	}
	for ; i < len(x); i++ {
		s[0] += x[i]
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// sumSq8 sums the squares of x in eight interleaved partial sums.
func sumSq8(x []float64) float64 {
	var s [8]float64
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		s[0] += v[0] * v[0]
		s[1] += v[1] * v[1]
		s[2] += v[2] * v[2]
		s[3] += v[3] * v[3]
		s[4] += v[4] * v[4]
		s[5] += v[5] * v[5]
		s[6] += v[6] * v[6]
		s[7] += v[7] * v[7]
	}
	for ; i < len(x); i++ {
		s[0] += x[i] * x[i]
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// reduceRowF reduces x[base + j*st] for j < n.
func reduceRowF[T floatT](fn rt.ReduceFn, x []T, base, st, n int, last bool) (float64, int64) {
	switch fn {
	case rt.Sum, rt.Mean:
		s := 0.0
		for j := 0; j < n; j++ {
			s += float64(x[base+j*st])
		}
		if fn == rt.Mean {
			s /= float64(n)
		}
		return s, 0
	case rt.SumSquare, rt.L2:
		s := 0.0
		for j := 0; j < n; j++ {
			v := float64(x[base+j*st])
			s += v * v
		}
		if fn == rt.L2 {
			s = math.Sqrt(s)
		}
		return s, 0
	case rt.L1:
		s := 0.0
		for j := 0; j < n; j++ {
			s += math.Abs(float64(x[base+j*st]))
		}
		return s, 0
	case rt.Prod:
		s := 1.0
		for j := 0; j < n; j++ {
			s *= float64(x[base+j*st])
		}
		return s, 0
	case rt.RMax, rt.RMin, rt.LogSumExp:
		m := math.Inf(-1)
		if fn == rt.RMin {
			m = math.Inf(1)
		}
		for j := 0; j < n; j++ {
			v := float64(x[base+j*st])
			if v != v {
				return v, 0
			}
			if (fn == rt.RMin && v < m) || (fn != rt.RMin && v > m) {
				m = v
			}
		}
		if fn != rt.LogSumExp || math.IsInf(m, 0) {
			return m, 0
		}
		s := 0.0
		for j := 0; j < n; j++ {
			s += math.Exp(float64(x[base+j*st]) - m)
		}
		return m + math.Log(s), 0
	case rt.ArgMax, rt.ArgMin:
		if n == 0 {
			return 0, 0
		}
		best, bi := x[base], 0
		for j := 1; j < n; j++ {
			v := x[base+j*st]
			var better bool
			if fn == rt.ArgMax {
				better = v > best || (last && v == best)
			} else {
				better = v < best || (last && v == best)
			}
			if better {
				best, bi = v, j
			}
		}
		return 0, int64(bi)
	}
	return math.NaN(), 0
}

type intT interface {
	~int32 | ~int64 | ~uint8 | ~int8
}

// reduceRowI reduces the integers x[base + j*st] for j < n (Sum, Prod,
// RMax, RMin, ArgMax, ArgMin).
func reduceRowI[T intT](fn rt.ReduceFn, x []T, base, st, n int, last bool) (int64, int64) {
	var v int64
	var bi int
	switch fn {
	case rt.Sum:
		for j := 0; j < n; j++ {
			v += int64(x[base+j*st])
		}
	case rt.Prod:
		v = 1
		for j := 0; j < n; j++ {
			v *= int64(x[base+j*st])
		}
	case rt.RMax, rt.RMin, rt.ArgMax, rt.ArgMin:
		if n == 0 {
			break
		}
		best := x[base]
		for j := 1; j < n; j++ {
			e := x[base+j*st]
			var better bool
			if fn == rt.RMax || fn == rt.ArgMax {
				better = e > best || (last && e == best)
			} else {
				better = e < best || (last && e == best)
			}
			if better {
				best, bi = e, j
			}
		}
		v = int64(best)
	}
	return v, int64(bi)
}

// ---- Softmax ----

func softmaxOp(o *rt.Softmax) {
	if o.X.DType == rt.F64 {
		softmaxF[float64](o)
		return
	}
	if o.Inner == 1 && softmaxRowsF32(o) {
		return
	}
	softmaxF[float32](o)
}

// softmaxWork is the element count from which a row kernel is split
// between workers.
const softmaxWork = 1 << 16

// softmaxRowsF32 runs an f32 softmax over contiguous rows with the
// vectorised row kernels (max, then exp(x - max) with its sum, then a
// scale or, for log-softmax, two shifts), and reports whether it could.
func softmaxRowsF32(o *rt.Softmax) bool {
	if _, ok := sumF32(nil); !ok {
		return false
	}
	O, N := o.Outer, o.N
	x := lin[float32](o.X, O*N)
	y := lin[float32](o.Y, O*N)
	if O*N < softmaxWork {
		softmaxRange(x, y, N, o.Log, 0, O)
		return true
	}
	log := o.Log
	parallelFor(O, max(1, softmaxWork/max(N, 1)/4), func(lo, hi int) { softmaxRange(x, y, N, log, lo, hi) })
	return true
}

func softmaxRange(x, y []float32, N int, log bool, lo, hi int) {
	if N == 0 {
		return
	}
	for r := lo; r < hi; r++ {
		xr, yr := x[r*N:(r+1)*N], y[r*N:(r+1)*N]
		m, _ := maxF32(xr)
		s, _ := expShiftSumF32(yr, xr, m)
		if log {
			// log(s) is small when one element dominates: sum in float64
			// so that it keeps its relative accuracy; then (x - m) - log(s),
			// each step rounded once.
			s64 := 0.0
			for _, v := range yr {
				s64 += float64(v)
			}
			unaryF32(rt.Affine, 1, -float64(m), yr, xr)
			unaryF32(rt.Affine, 1, -math.Log(s64), yr, yr)
			continue
		}
		unaryF32(rt.Affine, 1/float64(s), 0, yr, yr)
	}
}

func softmaxF[T floatT](o *rt.Softmax) {
	O, N, I := o.Outer, o.N, o.Inner
	x := lin[T](o.X, O*N*I)
	y := lin[T](o.Y, O*N*I)
	parallelFor(O*I, reduceGrain(N), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			base := (q/I)*N*I + q%I
			m := math.Inf(-1)
			for j := 0; j < N; j++ {
				if v := float64(x[base+j*I]); v > m || v != v {
					m = v
				}
			}
			s := 0.0
			if o.Log {
				for j := 0; j < N; j++ {
					s += math.Exp(float64(x[base+j*I]) - m)
				}
				ls := math.Log(s)
				for j := 0; j < N; j++ {
					p := base + j*I
					y[p] = T((float64(x[p]) - m) - ls)
				}
				continue
			}
			for j := 0; j < N; j++ {
				p := base + j*I
				e := math.Exp(float64(x[p]) - m)
				s += e
				y[p] = T(e)
			}
			inv := 1 / s
			for j := 0; j < N; j++ {
				p := base + j*I
				y[p] = T(float64(y[p]) * inv)
			}
		}
	})
}

// ---- Normalize ----

func normalizeOp(o *rt.Normalize) {
	if o.X.DType == rt.F64 {
		normalizeF[float64](o)
		return
	}
	if o.Scale.Buf != nil && o.Bias.Buf != nil && normalizeRowsF32(o) {
		return
	}
	normalizeF[float32](o)
}

// normalizeRowsF32 runs an f32 normalisation with scale and bias through
// the vectorised row kernels (two passes for the mean and the variance,
// one for the output), and reports whether it could.
func normalizeRowsF32(o *rt.Normalize) bool {
	if _, ok := sumF32(nil); !ok {
		return false
	}
	O, N := o.Outer, o.N
	x := lin[float32](o.X, O*N)
	y := lin[float32](o.Y, O*N)
	scale := lin[float32](o.Scale, N)
	bias := lin[float32](o.Bias, N)
	eps := o.Eps
	if O*N < softmaxWork {
		normalizeRange(x, y, scale, bias, N, eps, 0, O)
		return true
	}
	parallelFor(O, max(1, softmaxWork/max(N, 1)/4), func(lo, hi int) { normalizeRange(x, y, scale, bias, N, eps, lo, hi) })
	return true
}

func normalizeRange(x, y, scale, bias []float32, N int, eps float64, lo, hi int) {
	if N == 0 {
		return
	}
	for r := lo; r < hi; r++ {
		xr, yr := x[r*N:(r+1)*N], y[r*N:(r+1)*N]
		s, _ := sumF32(xr)
		mean := float32(float64(s) / float64(N))
		vs, _ := sumSqDevF32(xr, mean)
		inv := 1 / math.Sqrt(float64(vs)/float64(N)+eps)
		normApplyF32(yr, xr, scale, bias, mean, float32(inv))
	}
}

func normalizeF[T floatT](o *rt.Normalize) {
	O, N := o.Outer, o.N
	x := lin[T](o.X, O*N)
	y := lin[T](o.Y, O*N)
	scale := lin[T](o.Scale, N)
	bias := lin[T](o.Bias, N)
	parallelFor(O, reduceGrain(N), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := x[r*N : r*N+N]
			yr := y[r*N : r*N+N]
			s := 0.0
			for _, v := range xr {
				s += float64(v)
			}
			mean := s / float64(N)
			vs := 0.0
			for _, v := range xr {
				d := float64(v) - mean
				vs += d * d
			}
			inv := 1 / math.Sqrt(vs/float64(N)+o.Eps)
			for j, v := range xr {
				z := (float64(v) - mean) * inv
				if scale != nil {
					z *= float64(scale[j])
				}
				if bias != nil {
					z += float64(bias[j])
				}
				yr[j] = T(z)
			}
		}
	})
}

// ---- Gather ----
