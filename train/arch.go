package train

import (
	"fmt"
	"strings"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/nn"
	"github.com/vrun-go/vrun/rt"
)

// Architectures lists the built-in networks of [Arch].
var Architectures = []string{"mlp", "lenet", "cifar-cnn"}

// MLP returns Flatten - Linear(in, hidden) - ReLU - Linear(hidden, out).
func MLP(in, hidden, out int) *nn.Sequential {
	return nn.NewSequential(nn.Flatten{}, nn.NewLinear(in, hidden), nn.ReLU{}, nn.NewLinear(hidden, out))
}

// LeNet5 returns LeNet-5 as PyTorch's tutorials write it, for images [c,
// h, w] (MNIST: 1, 28, 28): Conv(c, 6, 5, padding 2) - ReLU - MaxPool(2)
// - Conv(6, 16, 5) - ReLU - MaxPool(2) - Flatten - Linear(16·5·5, 120) -
// ReLU - Linear(120, 84) - ReLU - Linear(84, classes), where 5·5 is the
// feature map of a 28×28 image ((h/2-4)/2 · (w/2-4)/2 in general). Parameter
// names are torch.nn.Sequential's ("0.weight", ..., "11.bias").
func LeNet5(c, h, w, classes int) *nn.Sequential {
	fh, fw := (h/2-4)/2, (w/2-4)/2 // after the second pool
	return nn.NewSequential(
		&nn.Conv2D{In: c, Out: 6, Kernel: [2]int{5, 5}, Padding: [2]int{2, 2}}, nn.ReLU{}, nn.MaxPool2D{Kernel: [2]int{2, 2}},
		nn.NewConv2D(6, 16, 5), nn.ReLU{}, nn.MaxPool2D{Kernel: [2]int{2, 2}},
		nn.Flatten{},
		nn.NewLinear(16*fh*fw, 120), nn.ReLU{},
		nn.NewLinear(120, 84), nn.ReLU{},
		nn.NewLinear(84, classes))
}

// CIFARCNN returns a small CNN for images [c, h, w] (CIFAR-10: 3, 32,
// 32): Conv(c, 32, 3, padding 1) - ReLU - MaxPool(2) - Conv(32, 64, 3,
// padding 1) - ReLU - MaxPool(2) - Flatten - Linear(64·h/4·w/4, classes).
func CIFARCNN(c, h, w, classes int) *nn.Sequential {
	return nn.NewSequential(
		&nn.Conv2D{In: c, Out: 32, Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}}, nn.ReLU{}, nn.MaxPool2D{Kernel: [2]int{2, 2}},
		&nn.Conv2D{In: 32, Out: 64, Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}}, nn.ReLU{}, nn.MaxPool2D{Kernel: [2]int{2, 2}},
		nn.Flatten{},
		nn.NewLinear(64*(h/4)*(w/4), classes))
}

// ArchOptions configures [Arch].
type ArchOptions struct {
	// Sample is the shape of one input sample: [features...] for mlp,
	// [C, H, W] for lenet and cifar-cnn.
	Sample []int
	// Outputs is the number of outputs per sample: the classes of a
	// classifier.
	Outputs int
	// DType is the float dtype of the model (default F32).
	DType rt.DType
	// Seed seeds the initial weights (PyTorch's default initialisation).
	Seed uint64
	// Head appends an activation to the output: "" for none (logits, as
	// cross_entropy, mse and huber take), "sigmoid" (probabilities, as
	// bce takes) or "log_softmax" (as nll takes).
	Head string
	// Hidden is mlp's hidden width (default 128).
	Hidden int
}

// HeadFor returns the output activation that loss l expects after a
// network's logits.
func HeadFor(l Loss) string {
	switch l {
	case BCE:
		return "sigmoid"
	case NLL:
		return "log_softmax"
	}
	return ""
}

// Arch builds the built-in network name ("mlp", "lenet", "cifar-cnn") as
// an inference model with input "x" [-1, Sample...] and output "logits".
func Arch(name string, o ArchOptions) (*model.Model, error) {
	if o.DType == 0 {
		o.DType = rt.F32
	}
	if o.Outputs <= 0 {
		return nil, fmt.Errorf("train: %s: %d outputs", name, o.Outputs)
	}
	for _, d := range o.Sample {
		if d <= 0 {
			return nil, fmt.Errorf("train: %s: sample shape %v", name, o.Sample)
		}
	}
	var net nn.Layer
	switch name {
	case "mlp":
		in := 1
		for _, d := range o.Sample {
			in *= d
		}
		hidden := o.Hidden
		if hidden <= 0 {
			hidden = 128
		}
		net = MLP(in, hidden, o.Outputs)
	case "lenet", "cifar-cnn":
		if len(o.Sample) != 3 {
			return nil, fmt.Errorf("train: %s takes images [C, H, W]; the samples have shape %v", name, o.Sample)
		}
		c, h, w := o.Sample[0], o.Sample[1], o.Sample[2]
		if name == "lenet" {
			if h < 12 || w < 12 {
				return nil, fmt.Errorf("train: lenet needs images of at least 12×12, got %d×%d", h, w)
			}
			net = LeNet5(c, h, w, o.Outputs)
		} else {
			if h < 4 || w < 4 {
				return nil, fmt.Errorf("train: cifar-cnn needs images of at least 4×4, got %d×%d", h, w)
			}
			net = CIFARCNN(c, h, w, o.Outputs)
		}
	default:
		return nil, fmt.Errorf("train: unknown architecture %q (want %s)", name, strings.Join(Architectures, ", "))
	}
	g := nn.NewGraph(o.DType, o.Seed)
	x := g.Input("x", append([]int{-1}, o.Sample...)...)
	y := net.Forward(g, x)
	switch o.Head {
	case "":
	case "sigmoid":
		y = nn.Sigmoid{}.Forward(g, y)
	case "log_softmax":
		y = nn.LogSoftmax{Dim: 1}.Forward(g, y)
	default:
		return nil, fmt.Errorf("train: unknown output head %q", o.Head)
	}
	m, err := g.Model(y)
	if err != nil {
		return nil, fmt.Errorf("train: %s: %w", name, err)
	}
	if k := m.Outputs(); len(k) == 1 && m.TensorIndex("logits") < 0 {
		m.Tensors[k[0]].Name = "logits"
	}
	m.Meta = append(m.Meta, [2]string{"producer", "vrun train"}, [2]string{"architecture", name})
	return m, nil
}
