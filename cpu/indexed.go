package cpu

import (
	"encoding/binary"
	"math"
	"sort"
	"sync/atomic"

	"github.com/vrun-go/vrun/rt"
)

// Kernels for the index-driven primitives Gather, GatherElements,
// ScatterElements and TopK. lower.go hands these op types to the functions
// here.

// isIndexed reports whether op is one of the primitives of this file.
func isIndexed(op rt.Op) bool {
	switch op.(type) {
	case *rt.Gather, *rt.GatherElements, *rt.ScatterElements, *rt.TopK:
		return true
	}
	return false
}

// indexReader reads a strided [Outer, N, Inner] I32/I64 ref.
type indexReader struct {
	b          []byte
	base       int
	s0, s1, s2 int
	i64        bool
}

func newIndexReader(r rt.Ref) indexReader {
	st := r.StridesOrContiguous()
	es := r.DType.Size()
	return indexReader{b: data(r), base: int(r.Off) / es, s0: st[0], s1: st[1], s2: st[2], i64: r.DType == rt.I64}
}

func (ir indexReader) at(o, j, i int) int64 {
	e := ir.base + o*ir.s0 + j*ir.s1 + i*ir.s2
	if ir.i64 {
		return int64(binary.LittleEndian.Uint64(ir.b[8*e:]))
	}
	return int64(int32(binary.LittleEndian.Uint32(ir.b[4*e:])))
}

// oob records the first out-of-range index a kernel meets; the workers
// of one kernel may set it concurrently.
type oob struct {
	hit atomic.Bool
	idx atomic.Int64
}

func (b *oob) set(k int64) {
	if b.hit.CompareAndSwap(false, true) {
		b.idx.Store(k)
	}
}

// err returns the *rt.IndexError of op (axis elements) when an index was
// out of range and op checks its indices, else nil.
func (b *oob) err(op rt.Op, axis int) error {
	if !b.hit.Load() || !rt.IndexChecked(op) {
		return nil
	}
	return &rt.IndexError{Backend: BackendName, Op: op.OpName(), Launch: -1, Index: b.idx.Load(), Axis: axis, Known: true}
}

// resolve maps index k of an axis of a elements to [0, a), counting a
// negative index from the end; ok is false when it stays out of range.
func resolve(k int64, a int) (int, bool) {
	if k < 0 {
		k += int64(a)
	}
	if k < 0 || k >= int64(a) {
		return 0, false
	}
	return int(k), true
}

func gatherElementsOp(o *rt.GatherElements) error {
	O, A, N, I := o.Outer, o.Axis, o.N, o.Inner
	es := o.X.DType.Size()
	xb := data(o.X)[o.X.Off:]
	yb := data(o.Y)[o.Y.Off:]
	ir := newIndexReader(o.Idx)
	var bad oob
	parallelFor(O*N, max(1, 16384/max(I, 1)), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			oo, j := q/N, q%N
			for i := 0; i < I; i++ {
				raw := ir.at(oo, j, i)
				dst := yb[(q*I+i)*es : (q*I+i+1)*es]
				k, ok := resolve(raw, A)
				if !ok {
					bad.set(raw)
					clear(dst)
					continue
				}
				copy(dst, xb[((oo*A+k)*I+i)*es:])
			}
		}
	})
	return bad.err(o, A)
}

// scalarIO reads and writes one element of a dtype as float64 (floats)
// or int64 (integers and bool).
func getF(b []byte, dt rt.DType, e int) float64 {
	switch dt {
	case rt.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*e:])))
	case rt.F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*e:]))
	case rt.F16:
		return float64(rt.F16Float(binary.LittleEndian.Uint16(b[2*e:])))
	}
	return float64(getI(b, dt, e))
}

func setF(b []byte, dt rt.DType, e int, v float64) {
	switch dt {
	case rt.F32:
		binary.LittleEndian.PutUint32(b[4*e:], math.Float32bits(float32(v)))
	case rt.F64:
		binary.LittleEndian.PutUint64(b[8*e:], math.Float64bits(v))
	case rt.F16:
		binary.LittleEndian.PutUint16(b[2*e:], rt.F16Bits(float32(v)))
	}
}

func getI(b []byte, dt rt.DType, e int) int64 {
	switch dt {
	case rt.I64:
		return int64(binary.LittleEndian.Uint64(b[8*e:]))
	case rt.I32:
		return int64(int32(binary.LittleEndian.Uint32(b[4*e:])))
	case rt.I8:
		return int64(int8(b[e]))
	}
	return int64(b[e]) // U8, Bool
}

func setI(b []byte, dt rt.DType, e int, v int64) {
	switch dt {
	case rt.I64:
		binary.LittleEndian.PutUint64(b[8*e:], uint64(v))
	case rt.I32:
		binary.LittleEndian.PutUint32(b[4*e:], uint32(int32(v)))
	case rt.Bool:
		b[e] = b2u(v != 0)
	default:
		b[e] = byte(v)
	}
}

// scatterCombine applies a ScatterElements reduction to the element a and
// the update u. Float Max and Min follow math.Max and math.Min, where an
// infinity wins over NaN (the builtins give NaN).
func scatterCombine[S scratch](fn rt.ScatterFn, a, u S) S {
	switch fn {
	case rt.ScatterAdd:
		return a + u
	case rt.ScatterMul:
		return a * u
	case rt.ScatterMax, rt.ScatterMin:
		if fa, ok := any(a).(float64); ok {
			fu := any(u).(float64)
			if fn == rt.ScatterMax {
				return S(math.Max(fa, fu))
			}
			return S(math.Min(fa, fu))
		}
		if fn == rt.ScatterMax {
			return max(a, u)
		}
		return min(a, u)
	}
	return a
}

func scatterElementsOp(o *rt.ScatterElements) error {
	O, A, N, I := o.Outer, o.Axis, o.N, o.Inner
	dt := o.Y.DType
	es := dt.Size()
	yb := data(o.Y)
	ybase := int(o.Y.Off) / es
	ub := data(o.Upd)
	ust := o.Upd.StridesOrContiguous()
	ubase := int(o.Upd.Off) / es
	ir := newIndexReader(o.Idx)
	var bad oob
	for oo := 0; oo < O; oo++ {
		for j := 0; j < N; j++ {
			for i := 0; i < I; i++ {
				raw := ir.at(oo, j, i)
				k, ok := resolve(raw, A)
				if !ok {
					bad.set(raw)
					continue
				}
				ye := ybase + (oo*A+k)*I + i
				ue := ubase + oo*ust[0] + j*ust[1] + i*ust[2]
				if o.Fn == rt.ScatterSet {
					copy(yb[ye*es:(ye+1)*es], ub[ue*es:(ue+1)*es])
					continue
				}
				if dt.IsFloat() {
					setF(yb, dt, ye, scatterCombine(o.Fn, getF(yb, dt, ye), getF(ub, dt, ue)))
					continue
				}
				a := scatterCombine(o.Fn, getI(yb, dt, ye), getI(ub, dt, ue))
				if dt == rt.Bool && o.Fn == rt.ScatterAdd {
					a = min(a, 1)
				}
				setI(yb, dt, ye, a)
			}
		}
	}
	return bad.err(o, A)
}

func topKOp(o *rt.TopK) {
	O, N, I, K := o.Outer, o.N, o.Inner, o.K
	dt := o.X.DType
	es := dt.Size()
	xb := data(o.X)
	xbase := int(o.X.Off) / es
	vb := data(o.Values)[o.Values.Off:]
	ib := data(o.Indices)[o.Indices.Off:]
	// greater orders values for Largest: NaN above everything.
	greater := func(a, b float64) bool {
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.IsNaN(a) && !math.IsNaN(b)
		}
		return a > b
	}
	if K == 1 {
		// One linear scan: the first element that nothing ranks before,
		// which is what the stable sort below puts first (the argmax of
		// MaxPool's gradient takes this path for every window).
		parallelFor(O*I, 256, func(lo, hi int) {
			for q := lo; q < hi; q++ {
				oo, i := q/I, q%I
				bj, bv := 0, getF(xb, dt, xbase+oo*N*I+i)
				for j := 1; j < N; j++ {
					v := getF(xb, dt, xbase+(oo*N+j)*I+i)
					if (o.Largest && greater(v, bv)) || (!o.Largest && greater(bv, v)) {
						bj, bv = j, v
					}
				}
				copy(vb[q*es:(q+1)*es], xb[(xbase+(oo*N+bj)*I+i)*es:])
				binary.LittleEndian.PutUint64(ib[8*q:], uint64(bj))
			}
		})
		return
	}
	parallelFor(O*I, 1, func(lo, hi int) {
		vals := make([]float64, N)
		order := make([]int, N)
		for q := lo; q < hi; q++ {
			oo, i := q/I, q%I
			for j := 0; j < N; j++ {
				vals[j] = getF(xb, dt, xbase+(oo*N+j)*I+i)
				order[j] = j
			}
			sort.SliceStable(order, func(p, r int) bool {
				a, b := vals[order[p]], vals[order[r]]
				if o.Largest {
					return greater(a, b)
				}
				return greater(b, a)
			})
			for k := 0; k < K; k++ {
				j := order[k]
				dst := (oo*K+k)*I + i
				copy(vb[dst*es:(dst+1)*es], xb[(xbase+(oo*N+j)*I+i)*es:])
				binary.LittleEndian.PutUint64(ib[8*dst:], uint64(j))
			}
		}
	})
}

func gatherOp(o *rt.Gather) error {
	O, A, I := o.Outer, o.Axis, o.Inner
	ni := int(o.Idx.Len())
	esz := o.X.DType.Size()
	row := I * esz
	xb := data(o.X)[o.X.Off:]
	yb := data(o.Y)[o.Y.Off:]
	idx := make([]int, ni) // resolved indices, -1 when out of range
	var bad oob
	note := func(j int, raw int64) {
		k, ok := resolve(raw, A)
		if !ok {
			bad.set(raw)
			k = -1
		}
		idx[j] = k
	}
	if o.Idx.DType == rt.I32 {
		for j, v := range lin[int32](o.Idx, ni) {
			note(j, int64(v))
		}
	} else {
		for j, v := range lin[int64](o.Idx, ni) {
			note(j, v)
		}
	}
	parallelFor(O*ni, max(1, 65536/max(row, 1)), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			oo, j := q/ni, q%ni
			k := idx[j]
			dst := yb[q*row : q*row+row]
			if k < 0 {
				clear(dst)
				continue
			}
			copy(dst, xb[(oo*A+k)*row:])
		}
	})
	return bad.err(o, A)
}
