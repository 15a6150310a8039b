package rt

import "math"

// Apply evaluates a unary function in float64. It is the reference the
// backends' kernels are tested against, and the CPU backend's f64 path.
func (f UnaryFn) Apply(x, alpha, beta float64) float64 {
	if f < numUnary && plainUnary[f] != nil {
		return plainUnary[f](x)
	}
	switch f {
	case Copy:
		return x
	case Neg:
		return -x
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
	case HardSigmoid:
		return math.Max(0, math.Min(1, alpha*x+beta))
	case HardSwish:
		return x * math.Max(0, math.Min(1, x/6+0.5))
	case Gelu:
		return 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
	case GeluTanh:
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	case Silu:
		return x * sigmoid(x)
	case Mish:
		return x * math.Tanh(softplus(x))
	case Softsign:
		return x / (1 + math.Abs(x))
	case Rsqrt:
		return 1 / math.Sqrt(x)
	case Reciprocal:
		return 1 / x
	case Sign:
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return x
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

// plainUnary holds the functions that are one call of x alone.
var plainUnary = [numUnary]func(float64) float64{
	Exp:      math.Exp,
	Log:      math.Log,
	Sqrt:     math.Sqrt,
	Floor:    math.Floor,
	Ceil:     math.Ceil,
	Round:    math.RoundToEven,
	Sin:      math.Sin,
	Cos:      math.Cos,
	Erf:      math.Erf,
	Tanh:     math.Tanh,
	Abs:      math.Abs,
	Sigmoid:  sigmoid,
	Softplus: softplus,
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
