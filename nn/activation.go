package nn

import (
	"cmp"

	"github.com/vrun-go/vrun/model"
)

// Activations, as layers (they have no parameters, so a value may be
// used anywhere, any number of times). Each is one ONNX node.

// ReLU is max(x, 0).
type ReLU struct{}

// Forward applies the activation.
func (ReLU) Forward(g *Graph, x Value) Value { return g.unary("Relu", x, nil) }

// LeakyReLU is x for x ≥ 0, Slope·x below (Slope 0 means PyTorch's
// default 0.01).
type LeakyReLU struct{ Slope float64 }

// Forward applies the activation.
func (a LeakyReLU) Forward(g *Graph, x Value) Value {
	return g.unary("LeakyRelu", x, model.Attrs{"alpha": cmp.Or(a.Slope, 0.01)})
}

// ELU is x for x > 0, Alpha·(eˣ-1) below (Alpha 0 means 1).
type ELU struct{ Alpha float64 }

// Forward applies the activation.
func (a ELU) Forward(g *Graph, x Value) Value {
	return g.unary("Elu", x, model.Attrs{"alpha": cmp.Or(a.Alpha, 1)})
}

// GELU is x·Φ(x) (exact, with erf), or its tanh approximation when Tanh
// is set (torch.nn.GELU(approximate="tanh")).
type GELU struct{ Tanh bool }

// Forward applies the activation.
func (a GELU) Forward(g *Graph, x Value) Value {
	approx := "none"
	if a.Tanh {
		approx = "tanh"
	}
	return g.unary("Gelu", x, model.Attrs{"approximate": approx})
}

// SiLU is x·σ(x).
type SiLU struct{}

// Forward applies the activation.
func (SiLU) Forward(g *Graph, x Value) Value { return g.unary("Silu", x, nil) }

// Mish is x·tanh(softplus(x)).
type Mish struct{}

// Forward applies the activation.
func (Mish) Forward(g *Graph, x Value) Value { return g.unary("Mish", x, nil) }

// Sigmoid is 1/(1+e⁻ˣ).
type Sigmoid struct{}

// Forward applies the activation.
func (Sigmoid) Forward(g *Graph, x Value) Value { return g.unary("Sigmoid", x, nil) }

// Tanh is the hyperbolic tangent.
type Tanh struct{}

// Forward applies the activation.
func (Tanh) Forward(g *Graph, x Value) Value { return g.unary("Tanh", x, nil) }

// Softmax normalises exp(x) along Dim (negative counts from the end).
type Softmax struct{ Dim int }

// Forward applies the activation.
func (a Softmax) Forward(g *Graph, x Value) Value {
	return g.unary("Softmax", x, model.Attrs{"axis": a.Dim})
}

// LogSoftmax is log(Softmax) along Dim, computed stably.
type LogSoftmax struct{ Dim int }

// Forward applies the activation.
func (a LogSoftmax) Forward(g *Graph, x Value) Value {
	return g.unary("LogSoftmax", x, model.Attrs{"axis": a.Dim})
}
