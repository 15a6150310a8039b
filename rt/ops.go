package rt

import (
	"fmt"
	"reflect"
)

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
//
// B may be F16 while A, Bias and Y are F32: a weight stored in half
// precision, with the products accumulated in f32 (see [HalfWeights]).
//
// Res, when present, is a residual of Y's dtype and layout (element
// [b, i, j] at b*StrideY + i*N + j from its start) added before Act:
// Y[b] = Act(Alpha * op(A[b]) @ op(B[b]) + Beta * Bias + Res[b]), the
// shortcut Add of a transformer block. It is either Y itself (the same
// offset: the sum replaces the residual in place) or does not overlap Y.
// Only some backends compute it; the others reject a MatMul with Res in
// Supports, and the engine folds the Add into the MatMul only where the
// device supports it.
type MatMul struct {
	A, B, Bias, Y, Res        Ref
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
// group of output channel k. X is contiguous [N, C, H, Width], W (the
// weight) is contiguous [K, C/Groups, KH, KW], Bias is optional [K], Y is
// [N, K, OH, OW], contiguous within each image, its images StrideY
// elements apart (0: K*OH*OW, contiguous). Bottom and right padding are
// implied by OH and OW. W may be F16 while X, Bias and Y are F32 (see
// [HalfWeights]).
//
// A StrideY above K*OH*OW writes the images into a wider tensor: the
// engine points a Conv whose result feeds a channel Concat at batch > 1
// straight into its stretch of the Concat's output. Only some backends
// take it; the others reject such a Conv in Supports.
//
// Res, when present, is an [N, K, OH, OW] residual laid out like Y (its
// images StrideY apart), added to the sum before Act (Y = Act(Bias + sum
// + Res): the shortcut of a ResNet or MobileNetV2 block); it must not
// overlap Y. Only some backends compute it; the others reject a Conv with
// Res in Supports, and the engine folds the Add into the Conv only where
// the device supports it.
type Conv struct {
	X, W, Bias, Y    Ref
	Res              Ref
	N, C, H, Width   int
	K, OH, OW        int
	KH, KW           int
	StrideH, StrideW int
	PadT, PadL       int
	DilH, DilW       int
	Groups           int
	Act              Activation
	StrideY          int
}

// ImageStrideY returns the elements between the images of Y (and Res):
// StrideY, or K*OH*OW where it is 0.
func (o *Conv) ImageStrideY() int {
	if o.StrideY == 0 {
		return o.K * o.OH * o.OW
	}
	return o.StrideY
}

// DenseY reports whether Y (and Res) are contiguous [N, K, OH, OW]: StrideY
// is 0 or K*OH*OW, or there is at most one image.
func (o *Conv) DenseY() bool { return o.StrideY == 0 || o.N <= 1 || o.StrideY == o.K*o.OH*o.OW }

// ConvTranspose is the transpose (gradient) of Conv: X is [N, C, H, Width],
// W (the weight) is [C, K/Groups, KH, KW], Y is [N, K, OH, OW] with
// OH = (H-1)*StrideH - PadT - PadB + DilH*(KH-1) + OutPadH + 1; pads here
// are the ones of the equivalent forward Conv, and the backend derives the
// rest from OH/OW. Bias is optional [K].
type ConvTranspose struct {
	X, W, Bias, Y    Ref
	N, C, H, Width   int
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
// An index still outside [0, Axis) yields zeros and, unless
// AllowOutOfRange, makes the run fail: see [IndexError]. Y is contiguous
// [Outer, len(Idx), Inner].
type Gather struct {
	X, Idx, Y          Ref
	Outer, Axis, Inner int
	// AllowOutOfRange makes an index outside [-Axis, Axis) a silent zero
	// instead of an error of the run. The engine sets it where it builds
	// the indices itself and means zero (padding taps).
	AllowOutOfRange bool
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
// [0, Axis) yields zero and, unless AllowOutOfRange, makes the run fail
// (see [IndexError]). Y is contiguous [Outer, N, Inner]. Any dtype:
// elements are copied bitwise.
type GatherElements struct {
	X, Idx, Y             Ref
	Outer, Axis, N, Inner int
	// AllowOutOfRange makes an index outside [-Axis, Axis) a silent zero
	// instead of an error of the run (as [Gather.AllowOutOfRange]).
	AllowOutOfRange bool
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
// [0, Axis) is skipped and, unless AllowOutOfRange, makes the run fail
// (see [IndexError]). Callers copy the data into Y first (ScatterND and
// ScatterElements of ONNX are a copy followed by this op).
type ScatterElements struct {
	Fn                    ScatterFn
	Y, Idx, Upd           Ref
	Outer, Axis, N, Inner int
	// AllowOutOfRange makes an index outside [-Axis, Axis) a silent skip
	// instead of an error of the run (as [Gather.AllowOutOfRange]).
	AllowOutOfRange bool
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

// HalfWeights reports whether op is a MatMul whose B, or a Conv whose W,
// is F16 while its other operands (A or X, Bias, Y) are F32: a weight
// stored in half precision, widened to f32 as it is loaded, with the
// products accumulated in f32 (engine.Options.Precision, `vrun -precision
// f16`). A backend may instead multiply a Conv in f16 on matrix hardware,
// rounding X to f16 for the products (a relative 2^-11 each) while the
// sums stay f32: the Vulkan backend does so on devices with cooperative
// matrices. It is an optional form: a backend runs it only where its
// Supports accepts it, and may refuse it where f32 weights run faster
// (the Vulkan backend, for the convolutions its cooperative-matrix kernel
// does not take); the reference rules ([ReferenceSupport]) reject it
// with an *UnsupportedError.
func HalfWeights(op Op) bool {
	switch o := op.(type) {
	case *MatMul:
		return o.A.DType == F32 && o.B.DType == F16 && o.Y.DType == F32 && (o.Bias.Buf == nil || o.Bias.DType == F32)
	case *Conv:
		return o.X.DType == F32 && o.W.DType == F16 && o.Y.DType == F32 && (o.Bias.Buf == nil || o.Bias.DType == F32)
	}
	return false
}

// OpDType returns the dtype that selects an op's kernel: the dtype of its
// main input (X, A, Y for Fill, P for OptimStep).
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
	case *OptimStep:
		return o.P.DType
	case *Attention:
		return o.Q.DType
	case *SepConv:
		return o.DW.X.DType
	case *Fused:
		if len(o.Out) > 0 {
			return o.Out[0].DType
		}
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

// MapRefs calls f with a pointer to every present operand (a Ref field
// with a buffer) of op, in field order, so that a caller can rebind
// buffers and offsets; op is typically a CloneOp copy.
func MapRefs(op Op, f func(name string, r *Ref)) {
	for _, o := range Operands(op) {
		if o.Ref.Buf != nil {
			f(o.Name, o.Ref)
		}
	}
}

// CloneOp returns a copy of op's struct; shape and stride slices are
// shared. Streams record clones so that a caller may reuse its op values.
func CloneOp(op Op) Op {
	if f, ok := op.(*Fused); ok {
		// Its operands live in slices, which MapRefs rebinds in place.
		return cloneFused(f)
	}
	v := reflect.ValueOf(op)
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface().(Op)
}
