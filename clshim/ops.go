//go:build cgo

package clshim

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// launchSpec is one prepared kernel launch (k nil: nothing to run).
type launchSpec struct {
	k        clKernel
	dims     int
	gws, lws [3]int
}

// clType is the OpenCL C storage type of a dtype.
func clType(dt rt.DType) string {
	switch dt {
	case rt.F32:
		return "float"
	case rt.F64:
		return "double"
	case rt.F16:
		return "half"
	case rt.I32:
		return "int"
	case rt.I64:
		return "long"
	case rt.I8:
		return "char"
	}
	return "uchar" // U8, Bool
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// typeDefs are the -D defines that specialise a program for dtype dt.
func typeDefs(dt rt.DType) string {
	acc := "long"
	switch dt {
	case rt.F32, rt.F16:
		acc = "float"
	case rt.F64:
		acc = "double"
	}
	return fmt.Sprintf("-DT=%s -DACC=%s -DIS_FLOAT=%d -DIS_HALF=%d -DIS_DOUBLE=%d -DIS_INT=%d",
		clType(dt), acc, b01(dt.IsFloat()), b01(dt == rt.F16), b01(dt == rt.F64), b01(!dt.IsFloat()))
}

// rawType is the unsigned OpenCL type of an element size.
func rawType(size int) string {
	switch size {
	case 1:
		return "uchar"
	case 2:
		return "ushort"
	case 4:
		return "uint"
	}
	return "ulong"
}

const rawDefs = "-DT=long -DACC=long -DIS_FLOAT=0 -DIS_HALF=0 -DIS_DOUBLE=0 -DIS_INT=1"

func (d *device) gemmDefs(dt rt.DType) string {
	c := d.cfg
	tm, tn, wm, wn := c.tm, c.tn, c.wm, c.wn
	if dt == rt.F64 {
		tm, tn, wm, wn = c.tm64, c.tn64, c.wm64, c.wn64
	}
	return fmt.Sprintf("%s -DTM=%d -DTN=%d -DTK=%d -DWM=%d -DWN=%d", typeDefs(dt), tm, tn, c.tk, wm, wn)
}

// gemmTile returns the tile and work-group shape used for dt.
func (d *device) gemmTile(dt rt.DType) (tm, tn, rm, rn int) {
	c := d.cfg
	if dt == rt.F64 {
		return c.tm64, c.tn64, c.tm64 / c.wm64, c.tn64 / c.wn64
	}
	return c.tm, c.tn, c.tm / c.wm, c.tn / c.wn
}

// args sets kernel arguments in order, remembering the first error.
type args struct {
	k   clKernel
	i   int
	err error
	op  rt.Op
}

func (a *args) bytes(p unsafe.Pointer, n int) {
	if a.err == nil {
		if err := setArgBytes(a.k, a.i, unsafe.Slice((*byte)(p), n)); err != nil {
			a.err = fmt.Errorf("argument %d: %w", a.i, err)
		}
	}
	a.i++
}

func (a *args) i32(v int) {
	if (v > math.MaxInt32 || v < math.MinInt32) && a.err == nil {
		a.err = fmt.Errorf("argument %d: %d does not fit in 32 bits", a.i, v)
	}
	x := int32(v)
	a.bytes(unsafe.Pointer(&x), 4)
}

func (a *args) i64(v int64) { a.bytes(unsafe.Pointer(&v), 8) }

// acc passes v in the compute type of dt (float, double or long).
func (a *args) acc(dt rt.DType, v float64) {
	switch dt {
	case rt.F64:
		a.bytes(unsafe.Pointer(&v), 8)
	case rt.F32, rt.F16:
		x := float32(v)
		a.bytes(unsafe.Pointer(&x), 4)
	default:
		x := int64(v)
		a.bytes(unsafe.Pointer(&x), 8)
	}
}

func (a *args) vec8(v [8]int32) { a.bytes(unsafe.Pointer(&v), 32) }

func (a *args) mem(m clMem) {
	if a.err == nil {
		if err := setArgMem(a.k, a.i, m); err != nil {
			a.err = fmt.Errorf("argument %d: %w", a.i, err)
		}
	}
	a.i++
}

// ref passes a ref's buffer and its element offset.
func (a *args) ref(d *device, r rt.Ref) {
	if r.Buf == nil {
		a.mem(nil)
		a.i64(0)
		return
	}
	m, _ := d.memOf(r.Buf)
	a.mem(m)
	a.i64(r.Off / int64(r.DType.Size()))
}

// ewShape is the coalesced iteration space of an elementwise op.
type ewShape struct {
	total int64
	rank  int
	shape [8]int32
	st    [][8]int32 // per operand
}

// coalesce drops unit dims and merges dims that are contiguous in every
// operand; the result must have rank <= 8 and 32-bit dims and strides.
func coalesce(op rt.Op, shape []int, refs ...rt.Ref) (*ewShape, error) {
	e := &ewShape{total: 1, st: make([][8]int32, len(refs))}
	sts := make([][]int, len(refs))
	for k, r := range refs {
		sts[k] = r.StridesOrContiguous()
	}
	var cs []int
	cst := make([][]int, len(refs))
	for dim, s := range shape {
		if s == 0 {
			e.total = 0
			return e, nil
		}
		if s == 1 {
			continue
		}
		if n := len(cs); n > 0 {
			ok := true
			for k := range refs {
				if cst[k][n-1] != sts[k][dim]*s {
					ok = false
					break
				}
			}
			if ok {
				cs[n-1] *= s
				for k := range refs {
					cst[k][n-1] = sts[k][dim]
				}
				continue
			}
		}
		cs = append(cs, s)
		for k := range refs {
			cst[k] = append(cst[k], sts[k][dim])
		}
	}
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

func roundUp(n int64, m int) int {
	return int((n + int64(m) - 1) / int64(m) * int64(m))
}

// kernel creates a kernel of program file/defines.
func (d *device) kernel(op rt.Op, file, defines, name string) (*args, error) {
	p, err := d.program(file, defines)
	if err != nil {
		return nil, fmt.Errorf("opencl: %s: %w", op.OpName(), err)
	}
	k, err := createKernel(p, name)
	if err != nil {
		return nil, fmt.Errorf("opencl: %s: %w", op.OpName(), err)
	}
	return &args{k: k, op: op}, nil
}

// finish1D completes a 1-D launch over total work-items.
func (d *device) finish1D(a *args, total int64, local int) (*launchSpec, error) {
	if a.err != nil {
		releaseKernel(a.k)
		return nil, fmt.Errorf("opencl: %s: %w", a.op.OpName(), a.err)
	}
	return &launchSpec{k: a.k, dims: 1, gws: [3]int{roundUp(total, local), 1, 1}, lws: [3]int{local, 1, 1}}, nil
}

func (d *device) finishND(a *args, gws, lws [3]int) (*launchSpec, error) {
	if a.err != nil {
		releaseKernel(a.k)
		return nil, fmt.Errorf("opencl: %s: %w", a.op.OpName(), a.err)
	}
	return &launchSpec{k: a.k, dims: 3, gws: gws, lws: lws}, nil
}

// prepare validates op and creates its kernel with its arguments set.
func (d *device) prepare(op rt.Op) (*launchSpec, error) {
	if err := d.validate(op); err != nil {
		return nil, err
	}
	L := d.cfg.ewLocal
	empty := &launchSpec{}
	switch o := op.(type) {
	case *rt.Unary:
		e, err := coalesce(op, o.Y.Shape, o.X, o.Y)
		if err != nil || e.total == 0 {
			return empty, err
		}
		var a *args
		xd, yd := o.X.DType, o.Y.DType
		switch {
		case o.Fn == rt.Copy && xd == yd:
			a, err = d.kernel(op, "raw.cl", "-DR="+rawType(xd.Size())+" "+rawDefs, "copy")
		case o.Fn == rt.Copy:
			a, err = d.kernel(op, "cast.cl", castDefs(xd, yd), "cast")
		default:
			a, err = d.kernel(op, "elementwise.cl", typeDefs(xd), "unary")
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
		return d.finish1D(a, e.total, L)
	case *rt.Binary:
		e, err := coalesce(op, o.Y.Shape, o.A, o.B, o.Y)
		if err != nil || e.total == 0 {
			return empty, err
		}
		name := "binary"
		if o.Fn.IsCompare() {
			name = "compare"
		}
		a, err := d.kernel(op, "elementwise.cl", typeDefs(o.A.DType), name)
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
		return d.finish1D(a, e.total, L)
	case *rt.Where:
		e, err := coalesce(op, o.Y.Shape, o.Cond, o.A, o.B, o.Y)
		if err != nil || e.total == 0 {
			return empty, err
		}
		a, err := d.kernel(op, "raw.cl", "-DR="+rawType(o.Y.DType.Size())+" "+rawDefs, "where_")
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
		return d.finish1D(a, e.total, L)
	case *rt.Fill:
		e, err := coalesce(op, o.Y.Shape, o.Y)
		if err != nil || e.total == 0 {
			return empty, err
		}
		sz := o.Y.DType.Size()
		a, err := d.kernel(op, "raw.cl", "-DR="+rawType(sz)+" "+rawDefs, "fill")
		if err != nil {
			return nil, err
		}
		a.i64(e.total)
		a.i32(e.rank)
		a.vec8(e.shape)
		a.ref(d, o.Y)
		a.vec8(e.st[0])
		bits := fillBits(o.Y.DType, o.Value)
		a.bytes(unsafe.Pointer(&bits), sz)
		return d.finish1D(a, e.total, L)
	case *rt.Gather:
		ni := o.Idx.Len()
		total := int64(o.Outer) * ni * int64(o.Inner)
		if total == 0 {
			return empty, nil
		}
		name := "gather32"
		if o.Idx.DType == rt.I64 {
			name = "gather64"
		}
		a, err := d.kernel(op, "raw.cl", "-DR="+rawType(o.X.DType.Size())+" "+rawDefs, name)
		if err != nil {
			return nil, err
		}
		a.i64(total)
		a.ref(d, o.X)
		a.ref(d, o.Idx)
		a.ref(d, o.Y)
		a.i64(int64(o.Outer))
		a.i64(int64(o.Axis))
		a.i64(int64(o.Inner))
		a.i64(ni)
		return d.finish1D(a, total, L)
	case *rt.GatherElements, *rt.ScatterElements, *rt.TopK:
		return d.prepareIndexed(op)
	case *rt.Reduce:
		outs := int64(o.Outer) * int64(o.Inner)
		if outs == 0 {
			return empty, nil
		}
		R := d.cfg.redWG
		wg := o.N >= 8*R && (outs < 16384 || o.N >= 4096)
		name := "reduce_serial"
		if wg {
			name = "reduce_wg"
		}
		a, err := d.kernel(op, "reduce.cl", typeDefs(o.X.DType), name)
		if err != nil {
			return nil, err
		}
		a.ref(d, o.X)
		ym, _ := d.memOf(o.Y.Buf)
		a.mem(ym)
		a.mem(ym)
		a.i64(o.Y.Off / int64(o.Y.DType.Size()))
		a.i32(o.Outer)
		a.i32(o.N)
		a.i32(o.Inner)
		a.i32(int(o.Fn))
		a.i32(b01(o.SelectLast))
		if wg {
			return d.finish1D(a, outs*int64(R), R)
		}
		return d.finish1D(a, outs, L)
	case *rt.Softmax:
		rows := int64(o.Outer) * int64(o.Inner)
		if rows == 0 || o.N == 0 {
			return empty, nil
		}
		a, err := d.kernel(op, "reduce.cl", typeDefs(o.X.DType), "softmax")
		if err != nil {
			return nil, err
		}
		a.ref(d, o.X)
		a.ref(d, o.Y)
		a.i32(o.N)
		a.i32(o.Inner)
		a.i32(b01(o.Log))
		return d.finish1D(a, rows*int64(d.cfg.redWG), d.cfg.redWG)
	case *rt.Normalize:
		if o.Outer == 0 || o.N == 0 {
			return empty, nil
		}
		dt := o.X.DType
		a, err := d.kernel(op, "reduce.cl", typeDefs(dt), "normalize_rows")
		if err != nil {
			return nil, err
		}
		a.ref(d, o.X)
		a.ref(d, o.Y)
		a.ref(d, o.Scale)
		a.ref(d, o.Bias)
		a.i32(o.N)
		a.acc(dt, o.Eps)
		a.i32(b01(o.Scale.Buf != nil))
		a.i32(b01(o.Bias.Buf != nil))
		return d.finish1D(a, int64(o.Outer)*int64(d.cfg.redWG), d.cfg.redWG)
	case *rt.MatMul:
		return d.prepareMatMul(o)
	case *rt.Conv:
		return d.prepareConv(o)
	case *rt.ConvTranspose:
		total := int64(o.N) * int64(o.K) * int64(o.OH) * int64(o.OW)
		if total == 0 {
			return empty, nil
		}
		dt := o.X.DType
		a, err := d.kernel(op, "conv.cl", typeDefs(dt), "convt")
		if err != nil {
			return nil, err
		}
		a.i64(total)
		a.ref(d, o.X)
		a.ref(d, o.W)
		a.ref(d, o.Bias)
		a.ref(d, o.Y)
		for _, v := range []int{o.C, o.H, o.W_, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, b01(o.Bias.Buf != nil)} {
			a.i32(v)
		}
		return d.finish1D(a, total, L)
	case *rt.Pool:
		total := int64(o.NC) * int64(o.OH) * int64(o.OW)
		if total == 0 {
			return empty, nil
		}
		a, err := d.kernel(op, "conv.cl", typeDefs(o.X.DType), "pool")
		if err != nil {
			return nil, err
		}
		a.i64(total)
		a.ref(d, o.X)
		a.ref(d, o.Y)
		for _, v := range []int{o.H, o.W, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.PadB, o.PadR, o.DilH, o.DilW, int(o.Fn), b01(o.CountIncludePad), o.P} {
			a.i32(v)
		}
		return d.finish1D(a, total, L)
	}
	return nil, unsupported(op, rt.OpDType(op), "unknown op")
}

func (d *device) prepareMatMul(o *rt.MatMul) (*launchSpec, error) {
	if o.M == 0 || o.N == 0 {
		return &launchSpec{}, nil
	}
	dt := o.A.DType
	a, err := d.kernel(o, "gemm.cl", d.gemmDefs(dt), "gemm")
	if err != nil {
		return nil, err
	}
	a.ref(d, o.A)
	a.ref(d, o.B)
	bs0, bs1 := 0, 0
	if o.Bias.Buf != nil {
		st := o.Bias.StridesOrContiguous()
		bs0, bs1 = st[0], st[1]
	}
	a.ref(d, o.Bias)
	a.i32(bs0)
	a.i32(bs1)
	a.ref(d, o.Y)
	a.i32(o.M)
	a.i32(o.N)
	a.i32(o.K)
	a.i32(b01(o.TransA))
	a.i32(b01(o.TransB))
	a.i64(int64(o.StrideA))
	a.i64(int64(o.StrideB))
	a.i64(int64(o.StrideY))
	a.acc(dt, o.Alpha)
	a.acc(dt, o.Beta)
	a.i32(b01(o.Bias.Buf != nil))
	a.i32(int(o.Act.Fn))
	a.acc(dt, o.Act.Alpha)
	a.acc(dt, o.Act.Beta)
	tm, tn, rm, rn := d.gemmTile(dt)
	gws := [3]int{(o.N + tn - 1) / tn * rn, (o.M + tm - 1) / tm * rm, o.Batch}
	return d.finishND(a, gws, [3]int{rn, rm, 1})
}

func (d *device) prepareConv(o *rt.Conv) (*launchSpec, error) {
	total := int64(o.N) * int64(o.K) * int64(o.OH) * int64(o.OW)
	if total == 0 {
		return &launchSpec{}, nil
	}
	dt := o.X.DType
	kg := o.K / o.Groups
	direct := kg < 8
	var a *args
	var err error
	if direct {
		a, err = d.kernel(o, "conv.cl", typeDefs(dt), "conv_direct")
	} else {
		a, err = d.kernel(o, "gemm.cl", d.gemmDefs(dt), "conv_gemm")
	}
	if err != nil {
		return nil, err
	}
	if direct {
		a.i64(total)
	}
	a.ref(d, o.X)
	a.ref(d, o.W)
	a.ref(d, o.Bias)
	a.ref(d, o.Y)
	for _, v := range []int{o.C, o.H, o.W_, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, b01(o.Bias.Buf != nil), int(o.Act.Fn)} {
		a.i32(v)
	}
	a.acc(dt, o.Act.Alpha)
	a.acc(dt, o.Act.Beta)
	if direct {
		return d.finish1D(a, total, d.cfg.ewLocal)
	}
	tm, tn, rm, rn := d.gemmTile(dt)
	P := o.OH * o.OW
	gws := [3]int{(P + tn - 1) / tn * rn, (kg + tm - 1) / tm * rm, o.N * o.Groups}
	return d.finishND(a, gws, [3]int{rn, rm, 1})
}

// castDefs specialises cast.cl for a conversion from x to y.
func castDefs(x, y rt.DType) string {
	return fmt.Sprintf("%s -DXT=%s -DYT=%s -DXF=%d -DXH=%d -DXD=%d -DYF=%d -DYH=%d -DYD=%d -DYB=%d",
		rawDefs, clType(x), clType(y), b01(x == rt.F32 || x == rt.F64), b01(x == rt.F16), b01(x == rt.F64),
		b01(y == rt.F32 || y == rt.F64), b01(y == rt.F16), b01(y == rt.F64), b01(y == rt.Bool))
}

// f2i truncates like the CPU backend: NaN is 0, saturating at int64.
func f2i(v float64) int64 {
	switch {
	case v != v:
		return 0
	case v >= 9.223372036854775807e18:
		return math.MaxInt64
	case v <= -9.223372036854775808e18:
		return math.MinInt64
	}
	return int64(v)
}

// fillBits is Fill's value as the element's bit pattern.
func fillBits(dt rt.DType, v float64) uint64 {
	switch dt {
	case rt.F32:
		return uint64(math.Float32bits(float32(v)))
	case rt.F64:
		return math.Float64bits(v)
	case rt.F16:
		return uint64(rt.F16Bits(float32(v)))
	case rt.I32:
		return uint64(uint32(int32(f2i(v))))
	case rt.I64:
		return uint64(f2i(v))
	case rt.U8, rt.I8:
		return uint64(uint8(f2i(v)))
	case rt.Bool:
		if v != 0 {
			return 1
		}
	}
	return 0
}

// strides3 returns the element strides of a [outer, n, inner] view.
func strides3(r rt.Ref) (s0, s1, s2 int64) {
	st := r.StridesOrContiguous()
	return int64(st[0]), int64(st[1]), int64(st[2])
}

// indexedDefs specialises indexed.cl for dtype dt.
func indexedDefs(dt rt.DType) string {
	return fmt.Sprintf("%s -DR=%s -DIS_BOOL=%d", typeDefs(dt), rawType(dt.Size()), b01(dt == rt.Bool))
}

// prepareIndexed prepares GatherElements, ScatterElements and TopK.
func (d *device) prepareIndexed(op rt.Op) (*launchSpec, error) {
	L := d.cfg.ewLocal
	empty := &launchSpec{}
	suffix := func(idx rt.Ref) string {
		if idx.DType == rt.I64 {
			return "64"
		}
		return "32"
	}
	switch o := op.(type) {
	case *rt.GatherElements:
		total := int64(o.Outer) * int64(o.N) * int64(o.Inner)
		if total == 0 {
			return empty, nil
		}
		a, err := d.kernel(op, "raw.cl", "-DR="+rawType(o.X.DType.Size())+" "+rawDefs, "gather_elements"+suffix(o.Idx))
		if err != nil {
			return nil, err
		}
		s0, s1, s2 := strides3(o.Idx)
		a.i64(total)
		a.ref(d, o.X)
		a.ref(d, o.Idx)
		a.i64(s0)
		a.i64(s1)
		a.i64(s2)
		a.ref(d, o.Y)
		a.i64(int64(o.Axis))
		a.i64(int64(o.N))
		a.i64(int64(o.Inner))
		return d.finish1D(a, total, L)
	case *rt.ScatterElements:
		cols := int64(o.Outer) * int64(o.Inner)
		if cols == 0 || o.N == 0 || o.Axis == 0 {
			return empty, nil
		}
		a, err := d.kernel(op, "indexed.cl", indexedDefs(o.Y.DType), "scatter_elements"+suffix(o.Idx))
		if err != nil {
			return nil, err
		}
		a.i64(cols)
		a.ref(d, o.Y)
		s0, s1, s2 := strides3(o.Idx)
		a.ref(d, o.Idx)
		a.i64(s0)
		a.i64(s1)
		a.i64(s2)
		s0, s1, s2 = strides3(o.Upd)
		a.ref(d, o.Upd)
		a.i64(s0)
		a.i64(s1)
		a.i64(s2)
		a.i64(int64(o.Axis))
		a.i64(int64(o.N))
		a.i64(int64(o.Inner))
		a.i32(int(o.Fn))
		return d.finish1D(a, cols, L)
	case *rt.TopK:
		total := int64(o.Outer) * int64(o.N) * int64(o.Inner)
		if total == 0 || o.K == 0 {
			return empty, nil
		}
		a, err := d.kernel(op, "indexed.cl", indexedDefs(o.X.DType), "topk")
		if err != nil {
			return nil, err
		}
		a.i64(total)
		a.ref(d, o.X)
		a.ref(d, o.Values)
		a.ref(d, o.Indices)
		a.i64(int64(o.N))
		a.i64(int64(o.Inner))
		a.i64(int64(o.K))
		a.i32(b01(o.Largest))
		return d.finish1D(a, total, L)
	}
	return nil, unsupported(op, rt.OpDType(op), "unknown op")
}
