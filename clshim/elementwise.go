//go:build cgo

package clshim

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// ewShape is the coalesced iteration space of an elementwise op.
type ewShape struct {
	total int64
	rank  int
	shape [8]int32
	st    [][8]int32 // per operand
}

// coalesce merges dims with rt.Coalesce; the result must have rank <= 8
// and 32-bit dims and strides.
func coalesce(op rt.Op, shape []int, refs ...rt.Ref) (*ewShape, error) {
	e := &ewShape{total: 1, st: make([][8]int32, len(refs))}
	sts := make([][]int, len(refs))
	for k, r := range refs {
		sts[k] = r.StridesOrContiguous()
	}
	if rt.NumElements(shape) == 0 {
		e.total = 0
		return e, nil
	}
	cs, cst := rt.Coalesce(shape, sts...)
	if len(cs) > 8 {
		return nil, unsupported(op, rt.OpDType(op), fmt.Sprintf("strided view of rank %d after merging dims (max 8)", len(cs)))
	}
	e.rank = len(cs)
	fits := func(v int) bool { return v <= math.MaxInt32 && v >= math.MinInt32 }
	for i, s := range cs {
		if !fits(s) {
			return nil, unsupported(op, rt.OpDType(op), "dimension above 2^31")
		}
		e.shape[i] = int32(s)
		e.total *= int64(s)
		for k := range refs {
			if !fits(cst[k][i]) {
				return nil, unsupported(op, rt.OpDType(op), "stride above 2^31")
			}
			e.st[k][i] = int32(cst[k][i])
		}
	}
	for i := len(cs); i < 8; i++ {
		e.shape[i] = 1
	}
	return e, nil
}

func (d *device) lowerUnary(o *rt.Unary) (*launchSpec, error) {
	e, err := coalesce(o, o.Y.Shape, o.X, o.Y)
	if err != nil || e.total == 0 {
		return &launchSpec{}, err
	}
	var a *args
	xd, yd := o.X.DType, o.Y.DType
	switch {
	case o.Fn == rt.Copy && xd == yd:
		a, err = d.kernel(o, "raw.cl", "-DR="+rawType(xd.Size())+" "+rawDefs, "copy")
	case o.Fn == rt.Copy:
		a, err = d.kernel(o, "cast.cl", castDefs(xd, yd), "cast")
	default:
		a, err = d.kernel(o, "elementwise.cl", typeDefs(xd), "unary")
	}
	if err != nil {
		return nil, err
	}
	a.i64(e.total)
	a.i32(e.rank)
	a.vec8(e.shape)
	a.ref(d, o.X)
	a.vec8(e.st[0])
	a.ref(d, o.Y)
	a.vec8(e.st[1])
	if o.Fn != rt.Copy {
		a.i32(int(o.Fn))
		a.acc(xd, o.Alpha)
		a.acc(xd, o.Beta)
	}
	return d.finish1D(a, e.total, d.cfg.ewLocal)
}

func (d *device) lowerBinary(o *rt.Binary) (*launchSpec, error) {
	e, err := coalesce(o, o.Y.Shape, o.A, o.B, o.Y)
	if err != nil || e.total == 0 {
		return &launchSpec{}, err
	}
	name := "binary"
	if o.Fn.IsCompare() {
		name = "compare"
	}
	a, err := d.kernel(o, "elementwise.cl", typeDefs(o.A.DType), name)
	if err != nil {
		return nil, err
	}
	a.i64(e.total)
	a.i32(e.rank)
	a.vec8(e.shape)
	a.ref(d, o.A)
	a.vec8(e.st[0])
	a.ref(d, o.B)
	a.vec8(e.st[1])
	a.ref(d, o.Y)
	a.vec8(e.st[2])
	a.i32(int(o.Fn))
	return d.finish1D(a, e.total, d.cfg.ewLocal)
}

func (d *device) lowerWhere(o *rt.Where) (*launchSpec, error) {
	e, err := coalesce(o, o.Y.Shape, o.Cond, o.A, o.B, o.Y)
	if err != nil || e.total == 0 {
		return &launchSpec{}, err
	}
	a, err := d.kernel(o, "raw.cl", "-DR="+rawType(o.Y.DType.Size())+" "+rawDefs, "where_")
	if err != nil {
		return nil, err
	}
	a.i64(e.total)
	a.i32(e.rank)
	a.vec8(e.shape)
	for i, r := range []rt.Ref{o.Cond, o.A, o.B, o.Y} {
		a.ref(d, r)
		a.vec8(e.st[i])
	}
	return d.finish1D(a, e.total, d.cfg.ewLocal)
}

func (d *device) lowerFill(o *rt.Fill) (*launchSpec, error) {
	e, err := coalesce(o, o.Y.Shape, o.Y)
	if err != nil || e.total == 0 {
		return &launchSpec{}, err
	}
	sz := o.Y.DType.Size()
	a, err := d.kernel(o, "raw.cl", "-DR="+rawType(sz)+" "+rawDefs, "fill")
	if err != nil {
		return nil, err
	}
	a.i64(e.total)
	a.i32(e.rank)
	a.vec8(e.shape)
	a.ref(d, o.Y)
	a.vec8(e.st[0])
	bits := rt.FillBits(o.Y.DType, o.Value)
	a.bytes(unsafe.Pointer(&bits), sz)
	return d.finish1D(a, e.total, d.cfg.ewLocal)
}

// castDefs specialises cast.cl for a conversion from x to y.
func castDefs(x, y rt.DType) string {
	return fmt.Sprintf("%s -DXT=%s -DYT=%s -DXF=%d -DXH=%d -DXD=%d -DYF=%d -DYH=%d -DYD=%d -DYB=%d",
		rawDefs, clType(x), clType(y), b01(x == rt.F32 || x == rt.F64), b01(x == rt.F16), b01(x == rt.F64),
		b01(y == rt.F32 || y == rt.F64), b01(y == rt.F16), b01(y == rt.F64), b01(y == rt.Bool))
}
