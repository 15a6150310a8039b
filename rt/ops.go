package rt

import (
	"fmt"
	"math"
	"reflect"
)

// Ref is a strided view of device memory: the operand of a primitive op.
// Element i (a multi-index) lives at byte offset
// Off + sum(i[d]*Strides[d]) * DType.Size() of Buf. Strides are in
// elements and may be zero (broadcast) or negative (reversed slice).
type Ref struct {
	Buf     Buffer
	Off     int64 // byte offset of element [0, 0, ...]
	DType   DType
	Shape   []int
	Strides []int // nil means row-major contiguous
}

// Valid reports whether the ref names a buffer.
func (r Ref) Valid() bool { return r.Buf != nil }

// Len is the number of elements.
func (r Ref) Len() int64 { return NumElements(r.Shape) }

// StridesOrContiguous returns Strides, or row-major strides when nil.
func (r Ref) StridesOrContiguous() []int {
	if r.Strides != nil {
		return r.Strides
	}
	return ContiguousStrides(r.Shape)
}

// Contiguous reports whether the view is dense and row-major.
func (r Ref) Contiguous() bool {
	if r.Strides == nil {
		return true
	}
	want := 1
	for i := len(r.Shape) - 1; i >= 0; i-- {
		if r.Shape[i] != 1 && r.Strides[i] != want {
			return false
		}
		want *= r.Shape[i]
	}
	return true
}

// Span returns the lowest and one-past-highest byte offsets the view touches
// within its buffer. An empty view returns (Off, Off).
func (r Ref) Span() (lo, hi int64) {
	if r.Len() == 0 {
		return r.Off, r.Off
	}
	st := r.StridesOrContiguous()
	var mn, mx int64
	for i, d := range r.Shape {
		e := int64(d-1) * int64(st[i])
		if e < 0 {
			mn += e
		} else {
			mx += e
		}
	}
	sz := int64(r.DType.Size())
	return r.Off + mn*sz, r.Off + (mx+1)*sz
}

// Check validates the ref: a known dtype, non-negative dims, strides that
// match the rank, an aligned offset and every element inside the buffer.
func (r Ref) Check() error {
	if r.Buf == nil {
		return fmt.Errorf("no buffer")
	}
	if !r.DType.Valid() {
		return fmt.Errorf("invalid dtype %d", r.DType)
	}
	if r.Strides != nil && len(r.Strides) != len(r.Shape) {
		return fmt.Errorf("%d strides for rank %d", len(r.Strides), len(r.Shape))
	}
	if r.Len() < 0 {
		return fmt.Errorf("bad shape %v", r.Shape)
	}
	if r.Off%int64(r.DType.Size()) != 0 {
		return fmt.Errorf("offset %d not aligned to %s", r.Off, r.DType)
	}
	lo, hi := r.Span()
	if lo < 0 || hi > r.Buf.Size() {
		return fmt.Errorf("view [%d,%d) outside buffer of %d bytes", lo, hi, r.Buf.Size())
	}
	return nil
}

// UnaryFn is an elementwise function of one operand, with up to two
// float parameters Alpha and Beta.
type UnaryFn uint8

// Unary functions. Copy with different X and Y dtypes is a cast.
const (
	Copy        UnaryFn = iota // y = x (cast when dtypes differ)
	Neg                        // -x
	Abs                        // |x|
	Relu                       // max(x, 0)
	LeakyRelu                  // x >= 0 ? x : Alpha*x
	Elu                        // x >= 0 ? x : Alpha*(exp(x)-1)
	Selu                       // Beta * (x > 0 ? x : Alpha*(exp(x)-1))   (Alpha=alpha, Beta=gamma)
	Celu                       // max(0,x) + min(0, Alpha*(exp(x/Alpha)-1))
	Sigmoid                    // 1/(1+exp(-x))
	HardSigmoid                // max(0, min(1, Alpha*x + Beta))
	HardSwish                  // x * max(0, min(1, x/6 + 0.5))
	Tanh                       //
	Gelu                       // 0.5 x (1 + erf(x/sqrt 2))
	GeluTanh                   // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
	Silu                       // x * sigmoid(x)
	Mish                       // x * tanh(softplus(x))
	Softplus                   // log(1 + exp(x)), stable
	Softsign                   // x / (1 + |x|)
	Exp                        //
	Log                        //
	Sqrt                       //
	Rsqrt                      // 1/sqrt(x)
	Reciprocal                 // 1/x
	Floor                      //
	Ceil                       //
	Round                      // round half to even
	Sign                       // -1, 0, 1
	Sin                        //
	Cos                        //
	Erf                        //
	Clip                       // min(max(x, Alpha), Beta)
	Affine                     // Alpha*x + Beta
	Not                        // logical not (bool)
	Square                     // x*x
	numUnary
)

var unaryNames = [...]string{
	Copy: "Copy", Neg: "Neg", Abs: "Abs", Relu: "Relu", LeakyRelu: "LeakyRelu", Elu: "Elu",
	Selu: "Selu", Celu: "Celu", Sigmoid: "Sigmoid", HardSigmoid: "HardSigmoid",
	HardSwish: "HardSwish", Tanh: "Tanh", Gelu: "Gelu", GeluTanh: "GeluTanh", Silu: "Silu",
	Mish: "Mish", Softplus: "Softplus", Softsign: "Softsign", Exp: "Exp", Log: "Log",
	Sqrt: "Sqrt", Rsqrt: "Rsqrt", Reciprocal: "Reciprocal", Floor: "Floor", Ceil: "Ceil",
	Round: "Round", Sign: "Sign", Sin: "Sin", Cos: "Cos", Erf: "Erf", Clip: "Clip",
	Affine: "Affine", Not: "Not", Square: "Square",
}

// NumUnaryFns is the number of unary functions, for tables indexed by UnaryFn.
const NumUnaryFns = int(numUnary)

func (f UnaryFn) String() string {
	if int(f) < len(unaryNames) {
		return unaryNames[f]
	}
	return fmt.Sprintf("UnaryFn(%d)", f)
}

// BinaryFn is an elementwise function of two operands.
type BinaryFn uint8

// Binary functions. Comparisons write Bool; And, Or and Xor take Bool.
const (
	Add BinaryFn = iota
	Sub
	Mul
	Div // integer division truncates toward zero
	Pow
	Max
	Min
	Mod   // result has the sign of the divisor (Python/NumPy); floats: fmod when Fmod attr, see engine
	Fmod  // C fmod: result has the sign of the dividend
	PRelu // a >= 0 ? a : a*b
	Equal
	Less
	LessEq
	Greater
	GreaterEq
	And
	Or
	Xor
	numBinary
)

var binaryNames = [...]string{
	Add: "Add", Sub: "Sub", Mul: "Mul", Div: "Div", Pow: "Pow", Max: "Max", Min: "Min",
	Mod: "Mod", Fmod: "Fmod", PRelu: "PRelu", Equal: "Equal", Less: "Less", LessEq: "LessEq",
	Greater: "Greater", GreaterEq: "GreaterEq", And: "And", Or: "Or", Xor: "Xor",
}

// NumBinaryFns is the number of binary functions.
const NumBinaryFns = int(numBinary)

func (f BinaryFn) String() string {
	if int(f) < len(binaryNames) {
		return binaryNames[f]
	}
	return fmt.Sprintf("BinaryFn(%d)", f)
}

// IsCompare reports whether f writes a Bool result.
func (f BinaryFn) IsCompare() bool { return f >= Equal && f <= GreaterEq }

// IsLogical reports whether f takes and writes Bool.
func (f BinaryFn) IsLogical() bool { return f >= And && f <= Xor }

// ReduceFn is a reduction over one axis.
type ReduceFn uint8

// Reduce functions. ArgMax and ArgMin write I64 indices.
const (
	Sum ReduceFn = iota
	Mean
	RMax
	RMin
	Prod
	SumSquare
	L1
	L2
	LogSumExp
	ArgMax
	ArgMin
	numReduce
)

var reduceNames = [...]string{
	Sum: "Sum", Mean: "Mean", RMax: "Max", RMin: "Min", Prod: "Prod", SumSquare: "SumSquare",
	L1: "L1", L2: "L2", LogSumExp: "LogSumExp", ArgMax: "ArgMax", ArgMin: "ArgMin",
}

// NumReduceFns is the number of reduce functions.
const NumReduceFns = int(numReduce)

func (f ReduceFn) String() string {
	if int(f) < len(reduceNames) {
		return reduceNames[f]
	}
	return fmt.Sprintf("ReduceFn(%d)", f)
}

// PoolFn is a pooling function.
type PoolFn uint8

// Pool functions.
const (
	MaxPool PoolFn = iota
	AvgPool
	LpPool
)

func (f PoolFn) String() string {
	switch f {
	case MaxPool:
		return "Max"
	case AvgPool:
		return "Avg"
	case LpPool:
		return "Lp"
	}
	return fmt.Sprintf("PoolFn(%d)", f)
}

// Activation is an elementwise epilogue fused into MatMul and Conv. The
// zero value (Copy) is the identity.
type Activation struct {
	Fn          UnaryFn
	Alpha, Beta float64
}

// Op is a primitive operation that a backend executes. The concrete types
// are the structs below; backends switch on them.
type Op interface {
	// OpName names the op for errors and profiles: "Unary.Relu", "MatMul".
	OpName() string
	isOp()
}

// Unary applies Fn elementwise: Y[i] = Fn(X[i]). X and Y have the same
// shape (broadcasting is expressed with zero strides in X); both may be
// strided, which makes Unary{Copy} the strided copy used for transpose,
// slice, concat, expand and tile. X and Y dtypes are equal except for Copy,
// which converts. Y must not partially overlap X (exact aliasing of
// identically laid out contiguous views, for in-place ops, is allowed).
type Unary struct {
	Fn          UnaryFn
	Alpha, Beta float64
	X, Y        Ref
}

// Binary applies Fn elementwise: Y[i] = Fn(A[i], B[i]). A, B and Y have the
// same shape; NumPy broadcasting is expressed with zero strides. A and B
// have the same dtype; Y is Bool for comparisons and A's dtype otherwise.
// Y may alias A or B exactly (in place).
type Binary struct {
	Fn      BinaryFn
	A, B, Y Ref
}

// Where selects elementwise: Y[i] = Cond[i] ? A[i] : B[i]. Cond is Bool;
// all four share Y's shape through strides.
type Where struct {
	Cond, A, B, Y Ref
}

// Reduce reduces the middle axis of a contiguous X viewed as
// [Outer, N, Inner] into a contiguous Y viewed as [Outer, Inner]. The
// shapes of X and Y refs are ignored beyond their element counts. Float
// reductions accumulate in at least f32 (f64 for f64). ArgMax/ArgMin write
// I64 and pick the first extreme index, or the last when SelectLast.
type Reduce struct {
	Fn              ReduceFn
	X, Y            Ref
	Outer, N, Inner int
	SelectLast      bool
}

// Softmax computes a numerically stable softmax (or log-softmax when Log)
// over the middle axis of a contiguous X viewed as [Outer, N, Inner].
// Y has X's layout.
type Softmax struct {
	X, Y            Ref
	Outer, N, Inner int
	Log             bool
}

// MatMul computes, for each batch b,
//
//	Y[b] = Act(Alpha * op(A[b]) @ op(B[b]) + Beta * Bias)
//
// where op(A[b]) is M×K and op(B[b]) is K×N. A[b] is row-major M×K (K×M
// when TransA) at element offset b*StrideA from A's start, B[b] likewise
// K×N (N×K when TransB); a zero batch stride broadcasts. Y[b] is row-major
// M×N at b*StrideY. Bias is optional (Buf nil): a 2-D [M, N] ref whose
// strides broadcast (e.g. [0, 1] for a per-column bias), shared by all
// batches. Refs' shapes are informational; the fields here rule.
type MatMul struct {
	A, B, Bias, Y             Ref
	Batch, M, N, K            int
	TransA, TransB            bool
	StrideA, StrideB, StrideY int
	Alpha, Beta               float64
	Act                       Activation
}

// Conv is a 2-D convolution (1-D when H = KH = 1) in NCHW layout:
//
//	Y[n,k,oh,ow] = Act(Bias[k] + sum_{c,kh,kw} X[n, g*C/G + c, ih, iw] * W[k, c, kh, kw])
//
// with ih = oh*StrideH - PadT + kh*DilH (zero outside the input), and g the
// group of output channel k. X is contiguous [N, C, H, W], W is contiguous
// [K, C/Groups, KH, KW], Bias is optional [K], Y is contiguous
// [N, K, OH, OW]. Bottom and right padding are implied by OH and OW.
type Conv struct {
	X, W, Bias, Y    Ref
	N, C, H, W_      int
	K, OH, OW        int
	KH, KW           int
	StrideH, StrideW int
	PadT, PadL       int
	DilH, DilW       int
	Groups           int
	Act              Activation
}

// ConvTranspose is the transpose (gradient) of Conv: X is [N, C, H, W],
// W is [C, K/Groups, KH, KW], Y is [N, K, OH, OW] with
// OH = (H-1)*StrideH - PadT - PadB + DilH*(KH-1) + OutPadH + 1; pads here
// are the ones of the equivalent forward Conv, and the backend derives the
// rest from OH/OW. Bias is optional [K].
type ConvTranspose struct {
	X, W, Bias, Y    Ref
	N, C, H, W_      int
	K, OH, OW        int
	KH, KW           int
	StrideH, StrideW int
	PadT, PadL       int
	DilH, DilW       int
	Groups           int
}

// Pool is 2-D pooling over contiguous X [NC, H, W] into contiguous
// Y [NC, OH, OW] (N and C merged). Windows start at oh*StrideH - PadT.
// MaxPool ignores positions outside the input. AvgPool divides by the
// number of in-input positions, or, when CountIncludePad, by the number of
// positions inside the padded input [-PadT, H+PadB) × [-PadL, W+PadR)
// (positions beyond that, from ceil mode, never count). LpPool computes
// (sum |x|^P)^(1/P) over in-input positions.
type Pool struct {
	Fn                     PoolFn
	X, Y                   Ref
	NC, H, W               int
	OH, OW                 int
	KH, KW                 int
	StrideH, StrideW       int
	PadT, PadL, PadB, PadR int
	DilH, DilW             int
	CountIncludePad        bool
	P                      int
}

// Normalize normalizes each row of a contiguous X viewed as [Outer, N]:
//
//	Y[o,n] = (X[o,n] - mean_o) / sqrt(var_o + Eps) * Scale[n] + Bias[n]
//
// with the population variance, accumulated in at least f32. Scale and
// Bias are optional contiguous [N] refs. Y has X's layout.
type Normalize struct {
	X, Y, Scale, Bias Ref
	Outer, N          int
	Eps               float64
}

// Gather picks slices along the middle axis of a contiguous X viewed as
// [Outer, Axis, Inner]: Y[o, j, i] = X[o, Idx[j], i] for j < len(Idx).
// Idx is a contiguous I32 or I64 ref; negative indices count from the end.
// An index still outside [0, Axis) yields zeros (the engine checks constant
// indices at plan time). Y is contiguous [Outer, len(Idx), Inner].
type Gather struct {
	X, Idx, Y          Ref
	Outer, Axis, Inner int
}

// Fill sets every element of Y (which may be strided) to Value.
type Fill struct {
	Y     Ref
	Value float64
}

// GatherElements picks single elements along the middle axis of a
// contiguous X viewed as [Outer, Axis, Inner]:
//
//	Y[o, j, i] = X[o, Idx[o, j, i], i]    for j < N
//
// Idx is an I32 or I64 ref of shape [Outer, N, Inner] that may be strided
// (zero strides share one index over o or i; GatherND and Resize use
// that). Negative indices count from the end; an index still outside
// [0, Axis) yields zero. Y is contiguous [Outer, N, Inner]. Any dtype:
// elements are copied bitwise.
type GatherElements struct {
	X, Idx, Y             Ref
	Outer, Axis, N, Inner int
}

// ScatterFn combines an existing element with an update in ScatterElements.
type ScatterFn uint8

// Scatter functions.
const (
	ScatterSet ScatterFn = iota // y = u
	ScatterAdd                  // y = y + u
	ScatterMul                  // y = y * u
	ScatterMax                  // y = max(y, u)
	ScatterMin                  // y = min(y, u)
)

func (f ScatterFn) String() string {
	switch f {
	case ScatterSet:
		return "Set"
	case ScatterAdd:
		return "Add"
	case ScatterMul:
		return "Mul"
	case ScatterMax:
		return "Max"
	case ScatterMin:
		return "Min"
	}
	return fmt.Sprintf("ScatterFn(%d)", f)
}

// ScatterElements updates single elements along the middle axis of a
// contiguous Y viewed as [Outer, Axis, Inner], in place:
//
//	Y[o, Idx[o, j, i], i] = Fn(Y[o, Idx[o, j, i], i], Upd[o, j, i])
//
// for every o < Outer, j < N, i < Inner, applied in that order (o, then
// j, then i), so that with ScatterSet the last duplicate wins. Idx (I32 or
// I64) and Upd (Y's dtype) are refs of shape [Outer, N, Inner] that may be
// strided. Negative indices count from the end; an index still outside
// [0, Axis) is skipped. Callers copy the data into Y first (ScatterND and
// ScatterElements of ONNX are a copy followed by this op).
type ScatterElements struct {
	Fn                    ScatterFn
	Y, Idx, Upd           Ref
	Outer, Axis, N, Inner int
}

// TopK selects, for each (o, i), the K largest elements (smallest when
// !Largest) along the middle axis of a contiguous X viewed as
// [Outer, N, Inner], into contiguous Values (X's dtype) and Indices (I64),
// both [Outer, K, Inner], ordered by value (descending when Largest,
// ascending otherwise); equal values keep the lower index first. NaN
// counts as larger than every number. 0 <= K <= N.
type TopK struct {
	X, Values, Indices Ref
	Outer, N, Inner, K int
	Largest            bool
}

// OpName implementations.
func (o *Unary) OpName() string         { return "Unary." + o.Fn.String() }
func (o *Binary) OpName() string        { return "Binary." + o.Fn.String() }
func (o *Where) OpName() string         { return "Where" }
func (o *Reduce) OpName() string        { return "Reduce." + o.Fn.String() }
func (o *Softmax) OpName() string       { return "Softmax" }
func (o *MatMul) OpName() string        { return "MatMul" }
func (o *Conv) OpName() string          { return "Conv" }
func (o *ConvTranspose) OpName() string { return "ConvTranspose" }
func (o *Pool) OpName() string          { return "Pool." + o.Fn.String() }
func (o *Normalize) OpName() string     { return "Normalize" }
func (o *Gather) OpName() string        { return "Gather" }
func (o *Fill) OpName() string          { return "Fill" }
func (o *GatherElements) OpName() string {
	return "GatherElements"
}
func (o *ScatterElements) OpName() string { return "ScatterElements." + o.Fn.String() }
func (o *TopK) OpName() string            { return "TopK" }

func (*Unary) isOp()           {}
func (*Binary) isOp()          {}
func (*Where) isOp()           {}
func (*Reduce) isOp()          {}
func (*Softmax) isOp()         {}
func (*MatMul) isOp()          {}
func (*Conv) isOp()            {}
func (*ConvTranspose) isOp()   {}
func (*Pool) isOp()            {}
func (*Normalize) isOp()       {}
func (*Gather) isOp()          {}
func (*Fill) isOp()            {}
func (*GatherElements) isOp()  {}
func (*ScatterElements) isOp() {}
func (*TopK) isOp()            {}

// OpDType returns the dtype that selects an op's kernel: the dtype of its
// main input (X, A, or Y for Fill).
func OpDType(op Op) DType {
	switch o := op.(type) {
	case *Unary:
		return o.X.DType
	case *Binary:
		return o.A.DType
	case *Where:
		return o.A.DType
	case *Reduce:
		return o.X.DType
	case *Softmax:
		return o.X.DType
	case *MatMul:
		return o.A.DType
	case *Conv:
		return o.X.DType
	case *ConvTranspose:
		return o.X.DType
	case *Pool:
		return o.X.DType
	case *Normalize:
		return o.X.DType
	case *Gather:
		return o.X.DType
	case *Fill:
		return o.Y.DType
	case *GatherElements:
		return o.X.DType
	case *ScatterElements:
		return o.Y.DType
	case *TopK:
		return o.X.DType
	}
	return InvalidDType
}

// Refs returns the op's operands that are present, in the order of the
// op struct's fields, with their field names for error messages.
func Refs(op Op) (names []string, refs []Ref) {
	MapRefs(op, func(name string, r *Ref) {
		names = append(names, name)
		refs = append(refs, *r)
	})
	return names, refs
}

var refType = reflect.TypeOf(Ref{})

// MapRefs calls f with a pointer to every present operand (a Ref field
// with a buffer) of op, in field order, so that a caller can rebind
// buffers and offsets; op is typically a CloneOp copy.
func MapRefs(op Op, f func(name string, r *Ref)) {
	v := reflect.ValueOf(op)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	v = v.Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Type() != refType {
			continue
		}
		r := v.Field(i).Addr().Interface().(*Ref)
		if r.Buf != nil {
			f(v.Type().Field(i).Name, r)
		}
	}
}

// CloneOp returns a copy of op's struct; shape and stride slices are
// shared. Streams record clones so that a caller may reuse its op values.
func CloneOp(op Op) Op {
	v := reflect.ValueOf(op)
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface().(Op)
}

// optionalRefs are the operand fields that may be left without a buffer.
var optionalRefs = map[string]bool{"Bias": true, "Scale": true}

// CheckOp validates the operands of op: every present ref is in bounds and
// the elementwise shapes agree. Backends call it from Launch, so a bad op is
// an error, never an out-of-bounds write.
func CheckOp(op Op) error {
	if err := checkRequired(op); err != nil {
		return err
	}
	names, refs := Refs(op)
	_, elementwise := op.(interface{ elementwise() })
	for i, r := range refs {
		if err := r.Check(); err != nil {
			return fmt.Errorf("%s: operand %s: %w", op.OpName(), names[i], err)
		}
		// Ops other than the elementwise family address their operands
		// linearly from the start; MatMul's Bias is a strided 2-D view.
		if !elementwise && !r.Contiguous() && !(names[i] == "Bias" && isMatMul(op)) && !stridedIndexed(op, names[i]) {
			return fmt.Errorf("%s: operand %s must be contiguous (shape %v, strides %v)", op.OpName(), names[i], r.Shape, r.Strides)
		}
	}
	if err := checkSizes(op); err != nil {
		return err
	}
	same := func(a, b Ref, an, bn string) error {
		if len(a.Shape) != len(b.Shape) {
			return fmt.Errorf("%s: %s rank %d != %s rank %d", op.OpName(), an, len(a.Shape), bn, len(b.Shape))
		}
		for i := range a.Shape {
			if a.Shape[i] != b.Shape[i] {
				return fmt.Errorf("%s: %s shape %v != %s shape %v", op.OpName(), an, a.Shape, bn, b.Shape)
			}
		}
		return nil
	}
	need := func(r Ref, n string, elems int64) error {
		if elems < 0 || r.Len() < elems {
			return fmt.Errorf("%s: %s has %d elements, needs %d", op.OpName(), n, r.Len(), elems)
		}
		return nil
	}
	switch o := op.(type) {
	case *Unary:
		return same(o.X, o.Y, "X", "Y")
	case *Binary:
		if err := same(o.A, o.Y, "A", "Y"); err != nil {
			return err
		}
		return same(o.B, o.Y, "B", "Y")
	case *Where:
		for _, p := range []struct {
			r Ref
			n string
		}{{o.Cond, "Cond"}, {o.A, "A"}, {o.B, "B"}} {
			if err := same(p.r, o.Y, p.n, "Y"); err != nil {
				return err
			}
		}
	case *Reduce:
		if err := need(o.X, "X", NumElements([]int{o.Outer, o.N, o.Inner})); err != nil {
			return err
		}
		return need(o.Y, "Y", NumElements([]int{o.Outer, o.Inner}))
	case *Softmax:
		n := int64(o.Outer) * int64(o.N) * int64(o.Inner)
		if err := need(o.X, "X", n); err != nil {
			return err
		}
		return need(o.Y, "Y", n)
	case *MatMul:
		if o.Batch < 1 || o.M < 0 || o.N < 0 || o.K < 0 {
			return fmt.Errorf("MatMul: bad sizes batch=%d M=%d N=%d K=%d", o.Batch, o.M, o.N, o.K)
		}
		b := int64(o.Batch - 1)
		if err := need(o.A, "A", b*int64(o.StrideA)+NumElements([]int{o.M, o.K})); err != nil {
			return err
		}
		if err := need(o.B, "B", b*int64(o.StrideB)+NumElements([]int{o.K, o.N})); err != nil {
			return err
		}
		if err := need(o.Y, "Y", b*int64(o.StrideY)+NumElements([]int{o.M, o.N})); err != nil {
			return err
		}
		if o.Bias.Buf != nil && (len(o.Bias.Shape) != 2 || o.Bias.Shape[0] != o.M || o.Bias.Shape[1] != o.N) {
			return fmt.Errorf("MatMul: Bias shape %v, want [%d %d]", o.Bias.Shape, o.M, o.N)
		}
	case *Conv:
		if o.Groups < 1 || o.C%o.Groups != 0 || o.K%o.Groups != 0 || o.StrideH < 1 || o.StrideW < 1 || o.DilH < 1 || o.DilW < 1 {
			return fmt.Errorf("Conv: bad params C=%d K=%d groups=%d stride=%dx%d dil=%dx%d", o.C, o.K, o.Groups, o.StrideH, o.StrideW, o.DilH, o.DilW)
		}
		if err := need(o.X, "X", NumElements([]int{o.N, o.C, o.H, o.W_})); err != nil {
			return err
		}
		if err := need(o.W, "W", NumElements([]int{o.K, o.C / o.Groups, o.KH, o.KW})); err != nil {
			return err
		}
		if o.Bias.Buf != nil {
			if err := need(o.Bias, "Bias", int64(o.K)); err != nil {
				return err
			}
		}
		return need(o.Y, "Y", NumElements([]int{o.N, o.K, o.OH, o.OW}))
	case *ConvTranspose:
		if o.Groups < 1 || o.C%o.Groups != 0 || o.K%o.Groups != 0 || o.StrideH < 1 || o.StrideW < 1 || o.DilH < 1 || o.DilW < 1 {
			return fmt.Errorf("ConvTranspose: bad params C=%d K=%d groups=%d", o.C, o.K, o.Groups)
		}
		if err := need(o.X, "X", NumElements([]int{o.N, o.C, o.H, o.W_})); err != nil {
			return err
		}
		if err := need(o.W, "W", NumElements([]int{o.C, o.K / o.Groups, o.KH, o.KW})); err != nil {
			return err
		}
		return need(o.Y, "Y", NumElements([]int{o.N, o.K, o.OH, o.OW}))
	case *Pool:
		if o.StrideH < 1 || o.StrideW < 1 || o.DilH < 1 || o.DilW < 1 || o.KH < 1 || o.KW < 1 {
			return fmt.Errorf("Pool: bad params kernel=%dx%d stride=%dx%d dil=%dx%d", o.KH, o.KW, o.StrideH, o.StrideW, o.DilH, o.DilW)
		}
		if o.Fn == LpPool && o.P < 1 {
			return fmt.Errorf("Pool.Lp: P = %d, want >= 1", o.P)
		}
		if err := need(o.X, "X", NumElements([]int{o.NC, o.H, o.W})); err != nil {
			return err
		}
		return need(o.Y, "Y", NumElements([]int{o.NC, o.OH, o.OW}))
	case *Normalize:
		n := int64(o.Outer) * int64(o.N)
		if err := need(o.X, "X", n); err != nil {
			return err
		}
		return need(o.Y, "Y", n)
	case *Gather:
		if o.Idx.DType != I32 && o.Idx.DType != I64 {
			return fmt.Errorf("Gather: index dtype %s, want i32 or i64", o.Idx.DType)
		}
		if err := need(o.X, "X", NumElements([]int{o.Outer, o.Axis, o.Inner})); err != nil {
			return err
		}
		return need(o.Y, "Y", int64(o.Outer)*o.Idx.Len()*int64(o.Inner))
	case *GatherElements:
		return checkIndexed(op, o.X, o.Idx, o.Y, Ref{}, o.Outer, o.Axis, o.N, o.Inner)
	case *ScatterElements:
		if o.Upd.DType != o.Y.DType {
			return fmt.Errorf("ScatterElements: Upd dtype %s != Y dtype %s", o.Upd.DType, o.Y.DType)
		}
		return checkIndexed(op, o.Y, o.Idx, Ref{}, o.Upd, o.Outer, o.Axis, o.N, o.Inner)
	case *TopK:
		if o.Outer < 0 || o.Inner < 0 || o.K < 0 || o.K > o.N {
			return fmt.Errorf("TopK: bad sizes outer=%d N=%d inner=%d K=%d", o.Outer, o.N, o.Inner, o.K)
		}
		if o.Indices.DType != I64 || o.Values.DType != o.X.DType {
			return fmt.Errorf("TopK: Values %s and Indices %s, want %s and i64", o.Values.DType, o.Indices.DType, o.X.DType)
		}
		if err := need(o.X, "X", int64(o.Outer)*int64(o.N)*int64(o.Inner)); err != nil {
			return err
		}
		if err := need(o.Values, "Values", int64(o.Outer)*int64(o.K)*int64(o.Inner)); err != nil {
			return err
		}
		return need(o.Indices, "Indices", int64(o.Outer)*int64(o.K)*int64(o.Inner))
	}
	return nil
}

// checkIndexed checks GatherElements and ScatterElements: data (X or Y)
// holds [Outer, Axis, Inner] contiguous elements; Idx and the optional out
// (contiguous) or upd (strided) refs have shape [Outer, N, Inner].
func checkIndexed(op Op, data, idx, out, upd Ref, outer, axis, n, inner int) error {
	if outer < 0 || axis < 0 || n < 0 || inner < 0 {
		return fmt.Errorf("%s: bad sizes outer=%d axis=%d N=%d inner=%d", op.OpName(), outer, axis, n, inner)
	}
	if idx.DType != I32 && idx.DType != I64 {
		return fmt.Errorf("%s: index dtype %s, want i32 or i64", op.OpName(), idx.DType)
	}
	shape := []int{outer, n, inner}
	for _, p := range []struct {
		r    Ref
		name string
	}{{idx, "Idx"}, {upd, "Upd"}} {
		if p.r.Buf != nil && !equalInts(p.r.Shape, shape) {
			return fmt.Errorf("%s: %s shape %v, want %v", op.OpName(), p.name, p.r.Shape, shape)
		}
	}
	if data.Len() < int64(outer)*int64(axis)*int64(inner) {
		return fmt.Errorf("%s: data has %d elements, needs %d", op.OpName(), data.Len(), int64(outer)*int64(axis)*int64(inner))
	}
	if out.Buf != nil && out.Len() < int64(outer)*int64(n)*int64(inner) {
		return fmt.Errorf("%s: Y has %d elements, needs %d", op.OpName(), out.Len(), int64(outer)*int64(n)*int64(inner))
	}
	return nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (*Unary) elementwise()  {}
func (*Binary) elementwise() {}
func (*Where) elementwise()  {}
func (*Fill) elementwise()   {}

func isMatMul(op Op) bool { _, ok := op.(*MatMul); return ok }

// stridedIndexed reports whether operand name of op may be a strided
// view: the Idx of GatherElements and ScatterElements, and the Upd of
// ScatterElements.
func stridedIndexed(op Op, name string) bool {
	switch op.(type) {
	case *GatherElements:
		return name == "Idx"
	case *ScatterElements:
		return name == "Idx" || name == "Upd"
	}
	return false
}

// checkRequired rejects ops whose mandatory operands have no buffer.
func checkRequired(op Op) error {
	v := reflect.ValueOf(op)
	if op == nil || v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("rt: nil op")
	}
	v = v.Elem()
	var missing []string
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		if v.Field(i).Type() == refType && !optionalRefs[name] && v.Field(i).Interface().(Ref).Buf == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: operand %v has no buffer", op.OpName(), missing)
	}
	return nil
}

// checkSizes rejects negative sizes and strides, and any beyond int32
// (kernels index with 32-bit integers; products then fit in int64).
func checkSizes(op Op) error {
	var sizes []int
	switch o := op.(type) {
	case *Reduce:
		sizes = []int{o.Outer, o.N, o.Inner}
	case *Softmax:
		sizes = []int{o.Outer, o.N, o.Inner}
	case *MatMul:
		sizes = []int{o.Batch, o.M, o.N, o.K, o.StrideA, o.StrideB, o.StrideY}
	case *Conv:
		sizes = []int{o.N, o.C, o.H, o.W_, o.K, o.OH, o.OW, o.KH, o.KW, o.PadT, o.PadL}
	case *ConvTranspose:
		sizes = []int{o.N, o.C, o.H, o.W_, o.K, o.OH, o.OW, o.KH, o.KW, o.PadT, o.PadL}
	case *Pool:
		sizes = []int{o.NC, o.H, o.W, o.OH, o.OW, o.PadT, o.PadL, o.PadB, o.PadR}
	case *Normalize:
		sizes = []int{o.Outer, o.N}
	case *Gather:
		sizes = []int{o.Outer, o.Axis, o.Inner}
	case *GatherElements:
		sizes = []int{o.Outer, o.Axis, o.N, o.Inner}
	case *ScatterElements:
		sizes = []int{o.Outer, o.Axis, o.N, o.Inner}
	case *TopK:
		sizes = []int{o.Outer, o.N, o.Inner, o.K}
	}
	for _, v := range sizes {
		if v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("%s: size or stride out of range in %v", op.OpName(), sizes)
		}
	}
	return nil
}

// Apply evaluates a unary function in float64. It is the reference the
// backends' kernels are tested against, and the CPU backend's f64 path.
func (f UnaryFn) Apply(x, alpha, beta float64) float64 {
	switch f {
	case Copy:
		return x
	case Neg:
		return -x
	case Abs:
		return math.Abs(x)
	case Relu:
		return math.Max(x, 0)
	case LeakyRelu:
		if x >= 0 {
			return x
		}
		return alpha * x
	case Elu:
		if x >= 0 {
			return x
		}
		return alpha * math.Expm1(x)
	case Selu:
		if x > 0 {
			return beta * x
		}
		return beta * alpha * math.Expm1(x)
	case Celu:
		return math.Max(0, x) + math.Min(0, alpha*math.Expm1(x/alpha))
	case Sigmoid:
		return sigmoid(x)
	case HardSigmoid:
		return math.Max(0, math.Min(1, alpha*x+beta))
	case HardSwish:
		return x * math.Max(0, math.Min(1, x/6+0.5))
	case Tanh:
		return math.Tanh(x)
	case Gelu:
		return 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
	case GeluTanh:
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	case Silu:
		return x * sigmoid(x)
	case Mish:
		return x * math.Tanh(softplus(x))
	case Softplus:
		return softplus(x)
	case Softsign:
		return x / (1 + math.Abs(x))
	case Exp:
		return math.Exp(x)
	case Log:
		return math.Log(x)
	case Sqrt:
		return math.Sqrt(x)
	case Rsqrt:
		return 1 / math.Sqrt(x)
	case Reciprocal:
		return 1 / x
	case Floor:
		return math.Floor(x)
	case Ceil:
		return math.Ceil(x)
	case Round:
		return math.RoundToEven(x)
	case Sign:
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return x
	case Sin:
		return math.Sin(x)
	case Cos:
		return math.Cos(x)
	case Erf:
		return math.Erf(x)
	case Clip:
		return math.Min(math.Max(x, alpha), beta)
	case Affine:
		return alpha*x + beta
	case Not:
		if x == 0 {
			return 1
		}
		return 0
	case Square:
		return x * x
	}
	return math.NaN()
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func softplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// Apply evaluates a binary function in float64 (comparisons and logic
// return 0 or 1). Integer semantics (truncating Div, Mod) are the
// backends' own; this is the float reference.
func (f BinaryFn) Apply(a, b float64) float64 {
	b2f := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	switch f {
	case Add:
		return a + b
	case Sub:
		return a - b
	case Mul:
		return a * b
	case Div:
		return a / b
	case Pow:
		return math.Pow(a, b)
	case Max:
		return math.Max(a, b)
	case Min:
		return math.Min(a, b)
	case Mod:
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return m
	case Fmod:
		return math.Mod(a, b)
	case PRelu:
		if a >= 0 {
			return a
		}
		return a * b
	case Equal:
		return b2f(a == b)
	case Less:
		return b2f(a < b)
	case LessEq:
		return b2f(a <= b)
	case Greater:
		return b2f(a > b)
	case GreaterEq:
		return b2f(a >= b)
	case And:
		return b2f(a != 0 && b != 0)
	case Or:
		return b2f(a != 0 || b != 0)
	case Xor:
		return b2f((a != 0) != (b != 0))
	}
	return math.NaN()
}
