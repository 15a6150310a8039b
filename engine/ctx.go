package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// ErrUnsupportedOp is wrapped when a model uses an op the engine does not
// know.
var ErrUnsupportedOp = errors.New("unsupported op")

// opDef describes one model-level op: its input arity and the function that
// infers its outputs and lowers it to primitives.
type opDef struct {
	minIn, maxIn int // maxIn < 0: variadic
	fn           func(c *nodeCtx) error
}

var ops = map[string]*opDef{}

func register(name string, minIn, maxIn int, fn func(c *nodeCtx) error) {
	ops[name] = &opDef{minIn: minIn, maxIn: maxIn, fn: fn}
}

// SupportedOps reports whether the engine can plan op (ONNX-style name).
func SupportedOps(op string) bool { _, ok := ops[op]; return ok }

// Ops lists every model-level op the engine can plan, sorted.
func Ops() []string {
	out := make([]string, 0, len(ops))
	for name := range ops {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// nodeCtx is what an op's lowering function sees.
type nodeCtx struct {
	p    *plan
	n    *model.Node
	step int
	in   []*tensor // nil for absent optional inputs
	out  []*tensor
	ops  []rt.Op
}

// has reports whether optional input i is present.
func (c *nodeCtx) has(i int) bool { return i < len(c.in) && c.in[i] != nil }

func (c *nodeCtx) errf(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

func (c *nodeCtx) shapeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrShape, fmt.Sprintf(format, args...))
}

// define sets output i's dtype and shape and gives it arena storage.
func (c *nodeCtx) define(i int, dt rt.DType, shape []int) (*tensor, error) {
	if i >= len(c.out) {
		if i == 0 {
			return nil, c.errf("node has no outputs")
		}
		return nil, nil // optional output not requested
	}
	t := c.out[i]
	if t == nil {
		return nil, nil // absent optional output
	}
	if rt.NumElements(shape) < 0 {
		return nil, c.shapeErr("output %q has invalid shape %v", t.name, shape)
	}
	if err := rt.CheckTensorSize(fmt.Sprintf("output %q", t.name), dt, shape, false); err != nil {
		return nil, err
	}
	t.dtype, t.shape, t.defined = dt, append([]int{}, shape...), true
	t.first = c.step
	return t, nil
}

// alias makes output i a view of input t with a new shape (same bytes).
func (c *nodeCtx) alias(i int, src *tensor, shape []int) error {
	if rt.NumElements(shape) != rt.NumElements(src.shape) {
		return c.shapeErr("cannot view %v (%d elements) as %v", src.shape, rt.NumElements(src.shape), shape)
	}
	t, err := c.define(i, src.dtype, shape)
	if err != nil || t == nil {
		return err
	}
	if g := c.p.mode.grad; g != nil && g.noGrad[c.step-1] && src.dtype.IsFloat() && src.value == nil {
		// Gradients live per storage root: a view made by a no-grad node
		// would pass its gradient straight to its input. A copy stops it.
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(src, shape, nil, 0), Y: c.ref(t)})
		return nil
	}
	t.root = src.root
	t.where = src.root.where
	src.root.aliases = append(src.root.aliases, t)
	if src.value != nil {
		t.value = &rt.Tensor{DType: src.dtype, Shape: t.shape, Data: src.value.Data}
	}
	return nil
}

// constant defines output i as a plan-time constant.
func (c *nodeCtx) constant(i int, v *rt.Tensor) error {
	t, err := c.define(i, v.DType, v.Shape)
	if err != nil || t == nil {
		return err
	}
	t.value = v
	t.where = inWeights
	return nil
}

// newConst adds a plan-time constant tensor (uploaded with the weights).
func (c *nodeCtx) newConst(v *rt.Tensor) *tensor {
	t := &tensor{id: len(c.p.tensors), name: fmt.Sprintf("%s.const%d", c.n.Name, len(c.p.tensors)),
		dtype: v.DType, shape: v.Shape, value: v, where: inWeights, defined: true, lastUse: c.step}
	t.root = t
	c.p.tensors = append(c.p.tensors, t)
	return t
}

// temp adds a scratch tensor that lives only during this node.
func (c *nodeCtx) temp(dt rt.DType, shape []int) *tensor {
	t := &tensor{id: len(c.p.tensors), name: fmt.Sprintf("%s.tmp%d", c.n.Name, len(c.p.tensors)),
		dtype: dt, shape: append([]int{}, shape...), defined: true, first: c.step, lastUse: c.step}
	t.root = t
	c.p.tensors = append(c.p.tensors, t)
	return t
}

// ref returns a contiguous ref covering t.
func (c *nodeCtx) ref(t *tensor) rt.Ref {
	t.root.used = true
	return rt.Ref{Buf: slot{t.root}, Off: t.rootOff, DType: t.dtype, Shape: append([]int{}, t.shape...)}
}

// view returns a strided ref of t with the given shape, strides and element
// offset.
func (c *nodeCtx) view(t *tensor, shape, strides []int, off int) rt.Ref {
	r := c.ref(t)
	r.Shape, r.Strides, r.Off = shape, strides, r.Off+int64(off)*int64(t.dtype.Size())
	return r
}

// bcast returns a ref of t broadcast (NumPy rules) to shape.
func (c *nodeCtx) bcast(t *tensor, shape []int) rt.Ref {
	st := rt.ContiguousStrides(t.shape)
	out := make([]int, len(shape))
	k := len(shape) - len(t.shape)
	for i := range shape {
		j := i - k
		if j >= 0 && t.shape[j] != 1 {
			out[i] = st[j]
		}
	}
	return c.view(t, append([]int{}, shape...), out, 0)
}

func (c *nodeCtx) emit(op rt.Op) { c.ops = append(c.ops, op) }

// canInplace reports whether output storage may reuse input t: t's storage
// is an arena root no one reads after this step, with t's exact size.
func (c *nodeCtx) canInplace(t *tensor, dt rt.DType, shape []int) bool {
	r := t.root
	if c.p.mode.train || r.where != inArena || r.input || t.dtype != dt || !sameShape(t.shape, shape) || r.bytes() != t.bytes() {
		return false
	}
	for _, a := range append([]*tensor{r}, r.aliases...) {
		if a.output || a.lastUse > c.step {
			return false
		}
	}
	return true
}

// canFuse reports whether this node may rewrite the op that produced t
// (fuse an epilogue into it, fold constants into it): no one may read t's
// storage afterwards, and no earlier node may have read it either (each
// tensor sharing it has one reader: the node that made the next view, or
// this one), since they want the value before the rewrite.
func (c *nodeCtx) canFuse(t *tensor) bool {
	for _, a := range append([]*tensor{t.root}, t.root.aliases...) {
		if a.readers > 1 {
			return false
		}
	}
	return c.canInplace(t, t.dtype, t.shape)
}

// defineInplace defines output i, reusing input t's storage when allowed.
func (c *nodeCtx) defineInplace(i int, dt rt.DType, shape []int, t *tensor) (*tensor, error) {
	if t != nil && i < len(c.out) && c.out[i] != nil && c.canInplace(t, dt, shape) {
		if err := c.alias(i, t, shape); err != nil {
			return nil, err
		}
		o := c.out[i]
		o.dtype = dt
		return o, nil
	}
	return c.define(i, dt, shape)
}

// Attribute access.

func (c *nodeCtx) attrInt(name string, def int64) int64 { return attrNum(c, name, def) }

func (c *nodeCtx) attrFloat(name string, def float64) float64 { return attrNum(c, name, def) }

// attrNum returns the int or float attribute name converted to T, or def
// when the node has no such attribute.
func attrNum[T int64 | float64](c *nodeCtx, name string, def T) T {
	if a, ok := c.n.Attr(name); ok {
		switch a.Kind {
		case model.AttrInt:
			return T(a.Int)
		case model.AttrFloat:
			return T(a.Float)
		}
	}
	return def
}

func (c *nodeCtx) attrString(name, def string) string {
	if a, ok := c.n.Attr(name); ok && a.Kind == model.AttrString {
		return a.Str
	}
	return def
}

func (c *nodeCtx) attrInts(name string) ([]int64, bool) {
	if a, ok := c.n.Attr(name); ok {
		switch a.Kind {
		case model.AttrInts:
			return a.Ints, true
		case model.AttrInt:
			return []int64{a.Int}, true
		}
	}
	return nil, false
}

// constInts returns the values of input i, which must be known at plan
// time (a weight or a folded constant).
func (c *nodeCtx) constInts(i int) ([]int64, error) {
	t := c.in[i]
	if err := c.needConst(i); err != nil {
		return nil, err
	}
	if t.dtype != rt.I64 && t.dtype != rt.I32 {
		return nil, c.errf("input %d (%q) has dtype %s, want an integer type", i, t.name, t.dtype)
	}
	return intValues(t.value), nil
}

// intValues reads an I32 or I64 tensor exactly (not through float64,
// which would mangle INT64_MAX, the "to the end" of exported slices).
func intValues(t *rt.Tensor) []int64 {
	out := make([]int64, t.Len())
	for k := range out {
		if t.DType == rt.I64 {
			out[k] = int64(binary.LittleEndian.Uint64(t.Data[8*k:]))
		} else {
			out[k] = int64(int32(binary.LittleEndian.Uint32(t.Data[4*k:])))
		}
	}
	return out
}

// constFloat returns scalar input i, known at plan time.
func (c *nodeCtx) constFloat(i int) (float64, error) {
	t := c.in[i]
	if err := c.needConst(i); err != nil {
		return 0, err
	}
	if t.value.Len() != 1 {
		return 0, c.shapeErr("input %d (%q) must be a scalar, has shape %v", i, t.name, t.shape)
	}
	return t.value.Float64(0), nil
}

// normAxis maps a possibly negative axis into [0, rank).
func (c *nodeCtx) normAxis(axis int64, rank int) (int, error) {
	a := axis
	if a < 0 {
		a += int64(rank)
	}
	if a < 0 || a >= int64(rank) {
		return 0, c.shapeErr("axis %d out of range for rank %d", axis, rank)
	}
	return int(a), nil
}

// sameShape reports whether two shapes are equal.
func sameShape(a, b []int) bool { return slices.Equal(a, b) }

// prod is the product of s, saturated at ±math.MaxInt where it would
// overflow (0 when any dim is 0).
func prod(s []int) int {
	n, neg := 1, false
	over := false
	for _, v := range s {
		if v == 0 {
			return 0
		}
		if v < 0 {
			neg, v = !neg, -v
		}
		if !over && n > math.MaxInt/v {
			over = true
		}
		if !over {
			n *= v
		}
	}
	if over {
		n = math.MaxInt
	}
	if neg {
		return -n
	}
	return n
}

// broadcastShapes applies NumPy broadcasting.
func broadcastShapes(shapes ...[]int) ([]int, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		k := rank - len(s)
		for j, d := range s {
			switch {
			case out[k+j] == d || d == 1:
			case out[k+j] == 1:
				out[k+j] = d
			default:
				return nil, fmt.Errorf("%w: cannot broadcast shapes %v", ErrShape, shapes)
			}
		}
	}
	return out, nil
}
