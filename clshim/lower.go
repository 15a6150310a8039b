//go:build cgo

package clshim

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// launchSpec is one lowered kernel launch (k nil: nothing to run).
type launchSpec struct {
	k        clKernel
	dims     int
	gws, lws [3]int
	// statusArg, when > 0, is the argument index of the kernel's
	// index-status arguments (__global uint* status, uint tag), which the
	// stream sets (flag_index in common.cl).
	statusArg int
	// scratch are buffers the kernel alone uses, owned by the stream
	// that records it.
	scratch []rt.Buffer
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

// args sets kernel arguments in order, remembering the first error.
type args struct {
	k      clKernel
	i      int
	err    error
	op     rt.Op
	status int // argument index of the index-status arguments, or 0
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

// indexStatus reserves the two trailing index-status arguments
// (__global uint* status, uint tag) that the stream sets at Launch.
func (a *args) indexStatus() {
	a.status = a.i
	a.i += 2
}

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

// ref passes each ref's buffer and its element offset.
func (a *args) ref(d *device, rs ...rt.Ref) {
	for _, r := range rs {
		if r.Buf == nil {
			a.mem(nil)
			a.i64(0)
			continue
		}
		m, _ := d.memOf(r.Buf)
		a.mem(m)
		a.i64(r.Off / int64(r.DType.Size()))
	}
}

// view3 passes a ref and the element strides of its [outer, n, inner]
// view.
func (a *args) view3(d *device, r rt.Ref) {
	st := r.StridesOrContiguous()
	a.ref(d, r)
	a.ints(st[0], st[1], st[2])
}

// ints passes each value as a 64-bit integer.
func (a *args) ints(vs ...int) {
	for _, v := range vs {
		a.i64(int64(v))
	}
}

func roundUp(n int64, m int) int {
	return int((n + int64(m) - 1) / int64(m) * int64(m))
}

// oneKernel are the kernels files whose kernels are guarded by
// ONE_KERNEL and KERNEL_<name>: on a device with split, kernel builds a
// program of such a file with only the kernel it needs, a fraction of
// the file's code (NVIDIA's OpenCL compiler takes time in proportion).
var oneKernel = map[string]bool{"gemm.cl": true, "conv.cl": true, "reduce.cl": true, "elementwise.cl": true}

// kernel creates a kernel of program file/defines.
func (d *device) kernel(op rt.Op, file, defines, name string) (*args, error) {
	if d.split && oneKernel[file] {
		defines += " -DONE_KERNEL -DKERNEL_" + name
	}
	d.mu.Lock()
	probe := d.probes[op]
	if probe != nil {
		*probe = append(*probe, progKey{file, defines})
	}
	d.mu.Unlock()
	if probe != nil {
		return nil, errProbe
	}
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
	return &launchSpec{k: a.k, dims: 1, gws: [3]int{roundUp(total, local), 1, 1}, lws: [3]int{local, 1, 1}, statusArg: a.status}, nil
}

func (d *device) finishND(a *args, gws, lws [3]int) (*launchSpec, error) {
	if a.err != nil {
		releaseKernel(a.k)
		return nil, fmt.Errorf("opencl: %s: %w", a.op.OpName(), a.err)
	}
	return &launchSpec{k: a.k, dims: 3, gws: gws, lws: lws}, nil
}

// lower validates op and turns it into its kernel with its arguments set:
// it hands the op to its family's file (elementwise.go, reduce.go,
// matmul.go, conv.go, pool.go, indexed.go, optim.go).
func (d *device) lower(op rt.Op) (*launchSpec, error) { return d.lowerOp(op, false) }

// lowerOp is lower; with probe (Prepare), the operands' buffers may be
// anyone's and the op's lowering stops at its kernel lookup.
func (d *device) lowerOp(op rt.Op, probe bool) (*launchSpec, error) {
	if !probe {
		if err := d.validate(op); err != nil {
			return nil, err
		}
	}
	switch o := op.(type) {
	case *rt.Unary:
		return d.lowerUnary(o)
	case *rt.Binary:
		return d.lowerBinary(o)
	case *rt.Where:
		return d.lowerWhere(o)
	case *rt.Fill:
		return d.lowerFill(o)
	case *rt.Reduce:
		return d.lowerReduce(o)
	case *rt.Softmax:
		return d.lowerSoftmax(o)
	case *rt.Normalize:
		return d.lowerNormalize(o)
	case *rt.MatMul:
		return d.lowerMatMul(o)
	case *rt.Conv:
		return d.lowerConv(o)
	case *rt.ConvTranspose:
		return d.lowerConvT(o)
	case *rt.Pool:
		return d.lowerPool(o)
	case *rt.Gather:
		return d.lowerGather(o)
	case *rt.GatherElements:
		return d.lowerGatherElements(o)
	case *rt.ScatterElements:
		return d.lowerScatterElements(o)
	case *rt.TopK:
		return d.lowerTopK(o)
	case *rt.OptimStep:
		return d.lowerOptim(o)
	}
	return nil, unsupported(op, rt.OpDType(op), "unknown op")
}
