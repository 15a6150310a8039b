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

// ewKernel coalesces refs (the last is the output, whose shape is the
// iteration space) and creates kernel name of file with the iteration
// space and each ref with its strides as its first arguments. It returns
// nil args, and the error if any, where there is nothing to run.
func (d *device) ewKernel(op rt.Op, file, defines, name string, refs ...rt.Ref) (*args, int64, error) {
	e, err := coalesce(op, refs[len(refs)-1].Shape, refs...)
	if err != nil || e.total == 0 {
		return nil, 0, err
	}
	a, err := d.kernel(op, file, defines, name)
	if err != nil {
		return nil, 0, err
	}
	a.i64(e.total)
	a.i32(e.rank)
	a.vec8(e.shape)
	for i, r := range refs {
		a.ref(d, r)
		a.vec8(e.st[i])
	}
	return a, e.total, nil
}

func (d *device) lowerUnary(o *rt.Unary) (*launchSpec, error) {
	xd, yd := o.X.DType, o.Y.DType
	file, defines, name := "elementwise.cl", typeDefs(xd), "unary"
	switch {
	case o.Fn == rt.Copy && xd == yd:
		file, defines, name = "raw.cl", "-DR="+rawType(xd.Size())+" "+rawDefs, "copy"
	case o.Fn == rt.Copy:
		file, defines, name = "cast.cl", castDefs(xd, yd), "cast"
	}
	a, total, err := d.ewKernel(o, file, defines, name, o.X, o.Y)
	if a == nil {
		return &launchSpec{}, err
	}
	if o.Fn != rt.Copy {
		a.i32(int(o.Fn))
		a.acc(xd, o.Alpha)
		a.acc(xd, o.Beta)
	}
	return d.finish1D(a, total, d.cfg.ewLocal)
}

func (d *device) lowerBinary(o *rt.Binary) (*launchSpec, error) {
	name := "binary"
	if o.Fn.IsCompare() {
		name = "compare"
	}
	a, total, err := d.ewKernel(o, "elementwise.cl", typeDefs(o.A.DType), name, o.A, o.B, o.Y)
	if a == nil {
		return &launchSpec{}, err
	}
	a.i32(int(o.Fn))
	return d.finish1D(a, total, d.cfg.ewLocal)
}

func (d *device) lowerWhere(o *rt.Where) (*launchSpec, error) {
	a, total, err := d.ewKernel(o, "raw.cl", "-DR="+rawType(o.Y.DType.Size())+" "+rawDefs, "where_", o.Cond, o.A, o.B, o.Y)
	if a == nil {
		return &launchSpec{}, err
	}
	return d.finish1D(a, total, d.cfg.ewLocal)
}

func (d *device) lowerFill(o *rt.Fill) (*launchSpec, error) {
	sz := o.Y.DType.Size()
	a, total, err := d.ewKernel(o, "raw.cl", "-DR="+rawType(sz)+" "+rawDefs, "fill", o.Y)
	if a == nil {
		return &launchSpec{}, err
	}
	bits := rt.FillBits(o.Y.DType, o.Value)
	a.bytes(unsafe.Pointer(&bits), sz)
	return d.finish1D(a, total, d.cfg.ewLocal)
}

// castDefs specialises cast.cl for a conversion from x to y.
func castDefs(x, y rt.DType) string {
	return fmt.Sprintf("%s -DXT=%s -DYT=%s -DXF=%d -DXH=%d -DXD=%d -DYF=%d -DYH=%d -DYD=%d -DYB=%d",
		rawDefs, clType(x), clType(y), b01(x == rt.F32 || x == rt.F64), b01(x == rt.F16), b01(x == rt.F64),
		b01(y == rt.F32 || y == rt.F64), b01(y == rt.F16), b01(y == rt.F64), b01(y == rt.Bool))
}
