package nn

import (
	"math"
	"strconv"

	"github.com/vrun-go/vrun/model"
)

// binding remembers the graph a layer's parameters were created on.
type binding struct {
	g      *Graph
	prefix string
}

// bind reports whether the layer must create its parameters on g (its
// first Forward on g) and sets the prefix they get.
func (b *binding) bind(g *Graph, name, kind string) bool {
	if b.g == g {
		return false
	}
	b.g, b.prefix = g, g.layerPrefix(name, kind)
	return true
}

// param creates a parameter under the layer's prefix.
func (b *binding) param(name string, shape []int, init Init) Value {
	return b.g.addFloat(join(b.prefix, name), shape, init, true, false)
}

// Prefix returns the parameter name prefix the layer was bound with
// ("" before its first Forward).
func (b *binding) Prefix() string { return b.prefix }

// Sequential applies its layers in order. Unnamed children take their
// index as their name, as in torch.nn.Sequential ("0.weight", "2.bias");
// a child's Name replaces its index.
type Sequential struct {
	Name   string // prefix of the children's names; "" for none
	Layers []Layer
}

// NewSequential returns an unnamed Sequential of layers.
func NewSequential(layers ...Layer) *Sequential { return &Sequential{Layers: layers} }

// Forward applies the layers in order.
func (s *Sequential) Forward(g *Graph, x Value) Value {
	run := func() {
		for i, l := range s.Layers {
			g.slot(strconv.Itoa(i), func() { x = l.Forward(g, x) })
		}
	}
	if n := len(g.scopes); n > 0 && g.scopes[n-1].slot && !g.scopes[n-1].used {
		g.scopes[n-1].used = true
		if s.Name != "" {
			g.scopes[n-1].name = s.Name
		}
		run()
	} else if s.Name != "" {
		g.Scope(s.Name, run)
	} else {
		run()
	}
	return x
}

// Linear is torch.nn.Linear: y = x Wᵀ + b over the last dim of x, with
// weight [Out, In] and bias [Out], both U(-1/√In, 1/√In).
type Linear struct {
	In, Out int
	NoBias  bool
	Name    string
	// Weight and Bias are set by the first Forward.
	Weight, Bias Value
	binding
}

// NewLinear returns an unnamed Linear layer with a bias.
func NewLinear(in, out int) *Linear { return &Linear{In: in, Out: out} }

// Forward applies the layer (a Gemm for 2-D input, else a MatMul).
func (l *Linear) Forward(g *Graph, x Value) Value {
	if l.In <= 0 || l.Out <= 0 {
		return g.errorf("Linear: In %d, Out %d", l.In, l.Out)
	}
	if l.bind(g, l.Name, "linear") {
		l.Weight = l.param("weight", []int{l.Out, l.In}, KaimingUniform(l.In, math.Sqrt(5)))
		l.Bias = Value{}
		if !l.NoBias {
			l.Bias = l.param("bias", []int{l.Out}, fanInBound(l.In))
		}
	}
	if x.Rank() == 2 {
		return g.op("Gemm", []Value{x, l.Weight, l.Bias}, model.Attrs{"transB": 1}, 2)
	}
	y := g.MatMul(x, g.Transpose(l.Weight, 1, 0))
	if l.Bias.name != "" {
		y = g.Add(y, l.Bias)
	}
	return y
}

// pair returns v, or def where v is zero.
func pair(v [2]int, def int) [2]int {
	for i := range v {
		if v[i] == 0 {
			v[i] = def
		}
	}
	return v
}

// Conv2D is torch.nn.Conv2d (zero padding): weight [Out, In/Groups, KH,
// KW] and bias [Out], both U(-1/√fanIn, 1/√fanIn) with fanIn =
// In/Groups·KH·KW. Stride and Dilation default to 1, Groups to 1.
type Conv2D struct {
	In, Out  int
	Kernel   [2]int
	Stride   [2]int
	Padding  [2]int // rows, columns added on both sides
	Same     bool   // padding "same" (stride 1): Padding is ignored
	Dilation [2]int
	Groups   int
	NoBias   bool
	Name     string
	// Weight and Bias are set by the first Forward.
	Weight, Bias Value
	binding
}

// NewConv2D returns an unnamed square-kernel Conv2D with a bias.
func NewConv2D(in, out, kernel int) *Conv2D {
	return &Conv2D{In: in, Out: out, Kernel: [2]int{kernel, kernel}}
}

// Forward applies the convolution to x [N, In, H, W].
func (c *Conv2D) Forward(g *Graph, x Value) Value {
	groups := max(c.Groups, 1)
	if c.In <= 0 || c.Out <= 0 || c.Kernel[0] <= 0 || c.Kernel[1] <= 0 || c.In%groups != 0 || c.Out%groups != 0 {
		return g.errorf("Conv2D: In %d, Out %d, Kernel %v, Groups %d", c.In, c.Out, c.Kernel, groups)
	}
	stride, dil := pair(c.Stride, 1), pair(c.Dilation, 1)
	fanIn := c.In / groups * c.Kernel[0] * c.Kernel[1]
	if c.bind(g, c.Name, "conv") {
		c.Weight = c.param("weight", []int{c.Out, c.In / groups, c.Kernel[0], c.Kernel[1]}, KaimingUniform(fanIn, math.Sqrt(5)))
		c.Bias = Value{}
		if !c.NoBias {
			c.Bias = c.param("bias", []int{c.Out}, fanInBound(fanIn))
		}
	}
	pads := []int{c.Padding[0], c.Padding[1], c.Padding[0], c.Padding[1]}
	if c.Same {
		if stride != [2]int{1, 1} {
			return g.errorf("Conv2D: padding same needs stride 1, got %v", stride)
		}
		for i := range 2 {
			tot := dil[i] * (c.Kernel[i] - 1)
			pads[i], pads[i+2] = tot/2, tot-tot/2
		}
	}
	return g.op("Conv", []Value{x, c.Weight, c.Bias}, model.Attrs{
		"kernel_shape": c.Kernel[:], "strides": stride[:], "pads": pads, "dilations": dil[:], "group": groups}, 4)
}

// MaxPool2D is torch.nn.MaxPool2d (padding counts as -∞); Stride
// defaults to Kernel, Dilation to 1.
type MaxPool2D struct {
	Kernel   [2]int
	Stride   [2]int
	Padding  [2]int
	Dilation [2]int
	CeilMode bool
}

// Forward pools x [N, C, H, W].
func (p MaxPool2D) Forward(g *Graph, x Value) Value {
	if p.Kernel[0] <= 0 || p.Kernel[1] <= 0 {
		return g.errorf("MaxPool2D: kernel %v", p.Kernel)
	}
	stride, dil := p.Stride, pair(p.Dilation, 1)
	if stride == [2]int{} {
		stride = p.Kernel
	}
	return g.op("MaxPool", []Value{x}, model.Attrs{"kernel_shape": p.Kernel[:], "strides": stride[:],
		"pads": []int{p.Padding[0], p.Padding[1], p.Padding[0], p.Padding[1]}, "dilations": dil[:],
		"ceil_mode": p.CeilMode}, 4)
}

// AvgPool2D is torch.nn.AvgPool2d: as there, the zero padding counts in
// each window's divisor unless ExcludePad (count_include_pad=False).
// Stride defaults to Kernel.
type AvgPool2D struct {
	Kernel     [2]int
	Stride     [2]int
	Padding    [2]int
	CeilMode   bool
	ExcludePad bool
}

// Forward pools x [N, C, H, W].
func (p AvgPool2D) Forward(g *Graph, x Value) Value {
	if p.Kernel[0] <= 0 || p.Kernel[1] <= 0 {
		return g.errorf("AvgPool2D: kernel %v", p.Kernel)
	}
	stride := p.Stride
	if stride == [2]int{} {
		stride = p.Kernel
	}
	return g.op("AveragePool", []Value{x}, model.Attrs{"kernel_shape": p.Kernel[:], "strides": stride[:],
		"pads":      []int{p.Padding[0], p.Padding[1], p.Padding[0], p.Padding[1]},
		"ceil_mode": p.CeilMode, "count_include_pad": !p.ExcludePad}, 4)
}

// GlobalAvgPool averages each channel of x [N, C, H, W] to [N, C, 1, 1]
// (torch.nn.AdaptiveAvgPool2d(1)).
type GlobalAvgPool struct{}

// Forward pools x.
func (GlobalAvgPool) Forward(g *Graph, x Value) Value {
	return g.op("GlobalAveragePool", []Value{x}, nil, x.Rank())
}

// Flatten is torch.nn.Flatten(): [N, d1, d2, ...] to [N, d1·d2·...].
type Flatten struct{}

// Forward flattens x.
func (Flatten) Forward(g *Graph, x Value) Value {
	return g.op("Flatten", []Value{x}, model.Attrs{"axis": 1}, 2)
}

// Dropout is torch.nn.Dropout: while training, each element is zeroed
// with probability P and the others scaled by 1/(1-P), from the
// Trainer's seeded generator; in inference it is the identity. P = 0 is
// the identity (PyTorch's default is 0.5).
type Dropout struct{ P float64 }

// Forward applies dropout.
func (d Dropout) Forward(g *Graph, x Value) Value {
	if d.P < 0 || d.P >= 1 {
		return g.errorf("Dropout: P %g outside [0, 1)", d.P)
	}
	if d.P == 0 {
		return x
	}
	return g.op("Dropout", []Value{x, g.scalarOf(x, d.P)}, nil, x.Rank())
}
