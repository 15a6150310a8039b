package nn

import (
	"math"
	"math/rand/v2"
)

// Initialisers with the formulas of torch.nn.init. Every layer's default
// is PyTorch's: Linear and Conv2D weights KaimingUniform(fanIn, √5), which
// is U(-1/√fanIn, 1/√fanIn), and biases U(-1/√fanIn, 1/√fanIn); Embedding
// N(0, 1); norms ones and zeros; LSTM and GRU U(-1/√hidden, 1/√hidden);
// MultiHeadAttention's input projection XavierUniform and zero biases.

// Uniform draws from U(lo, hi).
func Uniform(lo, hi float64) Init {
	return func(r *rand.Rand, v []float64) {
		for i := range v {
			v[i] = lo + (hi-lo)*r.Float64()
		}
	}
}

// Normal draws from N(mean, std²).
func Normal(mean, std float64) Init {
	return func(r *rand.Rand, v []float64) {
		for i := range v {
			v[i] = mean + std*r.NormFloat64()
		}
	}
}

// Constant sets every value to c.
func Constant(c float64) Init {
	return func(_ *rand.Rand, v []float64) {
		for i := range v {
			v[i] = c
		}
	}
}

// LeakyReLUGain is torch.nn.init.calculate_gain("leaky_relu", a):
// √(2/(1+a²)).
func LeakyReLUGain(a float64) float64 { return math.Sqrt(2 / (1 + a*a)) }

// KaimingUniform is torch.nn.init.kaiming_uniform_ with mode fan_in and
// the leaky_relu gain of slope a: U(-b, b) with b = gain·√(3/fanIn).
// PyTorch's Linear and Conv layers use a = √5, which makes b = 1/√fanIn.
func KaimingUniform(fanIn int, a float64) Init {
	if fanIn <= 0 {
		return Constant(0)
	}
	b := LeakyReLUGain(a) * math.Sqrt(3/float64(fanIn))
	return Uniform(-b, b)
}

// XavierUniform is torch.nn.init.xavier_uniform_: U(-b, b) with
// b = gain·√(6/(fanIn+fanOut)).
func XavierUniform(fanIn, fanOut int, gain float64) Init {
	if fanIn+fanOut <= 0 {
		return Constant(0)
	}
	b := gain * math.Sqrt(6/float64(fanIn+fanOut))
	return Uniform(-b, b)
}

// fanInBound is the bound PyTorch's layers use for biases (and, through
// kaiming_uniform with a = √5, for weights): 1/√fanIn, 0 when fanIn is 0.
func fanInBound(fanIn int) Init {
	if fanIn <= 0 {
		return Constant(0)
	}
	b := 1 / math.Sqrt(float64(fanIn))
	return Uniform(-b, b)
}
