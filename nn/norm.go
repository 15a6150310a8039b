package nn

import "github.com/vrun-go/vrun/model"

// BatchNorm is torch.nn.BatchNorm1d and BatchNorm2d: an ONNX
// BatchNormalization over channel dim 1 of x ([N, C], [N, C, L] or
// [N, C, H, W]). While training (engine.Trainer.Step) it normalises with
// the batch statistics and updates running_mean and running_var (the
// unbiased batch variance) with Momentum; in inference it uses the
// running statistics. weight starts at ones and bias at zeros.
type BatchNorm struct {
	Features int
	Eps      float64 // 0 means 1e-5
	Momentum float64 // PyTorch's momentum; 0 means 0.1
	NoAffine bool    // no weight and bias (affine=False)
	Name     string
	// Set by the first Forward; Weight and Bias are absent with NoAffine.
	Weight, Bias, RunningMean, RunningVar Value
	binding
}

// BatchNorm1D returns an unnamed BatchNorm for [N, C] or [N, C, L] input.
func BatchNorm1D(features int) *BatchNorm { return &BatchNorm{Features: features} }

// BatchNorm2D returns an unnamed BatchNorm for [N, C, H, W] input.
func BatchNorm2D(features int) *BatchNorm { return &BatchNorm{Features: features} }

// Forward normalises x.
func (b *BatchNorm) Forward(g *Graph, x Value) Value {
	if b.Features <= 0 {
		return g.errorf("BatchNorm: Features %d", b.Features)
	}
	if r := x.Rank(); r >= 0 && r < 2 {
		return g.errorf("BatchNorm: input of rank %d, want [N, C, ...]", r)
	}
	c := b.Features
	if b.bind(g, b.Name, "batchnorm") {
		if b.NoAffine {
			b.Weight, b.Bias = Value{}, Value{}
		} else {
			b.Weight = b.param("weight", []int{c}, Constant(1))
			b.Bias = b.param("bias", []int{c}, Constant(0))
		}
		b.RunningMean = g.addFloat(join(b.prefix, "running_mean"), []int{c}, Constant(0), false, true)
		b.RunningVar = g.addFloat(join(b.prefix, "running_var"), []int{c}, Constant(1), false, true)
	}
	scale, bias := b.Weight, b.Bias
	if b.NoAffine {
		ones := make([]float64, c)
		for i := range ones {
			ones[i] = 1
		}
		scale = g.Const(join(b.prefix, "ones"), []int{c}, ones)
		bias = g.Const(join(b.prefix, "zeros"), []int{c}, make([]float64, c))
	}
	eps, mom := b.Eps, b.Momentum
	if eps == 0 {
		eps = 1e-5
	}
	if mom == 0 {
		mom = 0.1
	}
	return g.op("BatchNormalization", []Value{x, scale, bias, b.RunningMean, b.RunningVar},
		model.Attrs{"epsilon": eps, "momentum": 1 - mom}, x.Rank())
}

// LayerNorm is torch.nn.LayerNorm: an ONNX LayerNormalization over the
// trailing dims given by Shape, with weight (ones) and bias (zeros) of
// that shape unless NoAffine.
type LayerNorm struct {
	Shape    []int
	Eps      float64 // 0 means 1e-5
	NoAffine bool
	Name     string
	// Set by the first Forward; absent with NoAffine.
	Weight, Bias Value
	binding
}

// NewLayerNorm returns an unnamed LayerNorm over the trailing dims shape.
func NewLayerNorm(shape ...int) *LayerNorm { return &LayerNorm{Shape: shape} }

// Forward normalises x.
func (l *LayerNorm) Forward(g *Graph, x Value) Value {
	if len(l.Shape) == 0 {
		return g.errorf("LayerNorm: empty Shape")
	}
	if l.bind(g, l.Name, "layernorm") && !l.NoAffine {
		l.Weight = l.param("weight", l.Shape, Constant(1))
		l.Bias = l.param("bias", l.Shape, Constant(0))
	}
	scale, bias := l.Weight, l.Bias
	if l.NoAffine {
		n := numel(l.Shape)
		ones := make([]float64, n)
		for i := range ones {
			ones[i] = 1
		}
		scale, bias = g.Const(join(l.prefix, "ones"), l.Shape, ones), Value{}
	}
	eps := l.Eps
	if eps == 0 {
		eps = 1e-5
	}
	return g.op("LayerNormalization", []Value{x, scale, bias},
		model.Attrs{"axis": -len(l.Shape), "epsilon": eps}, x.Rank())
}
