package train

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/nn"
	"github.com/vrun-go/vrun/rt"
)

// Loss names a training loss. Every loss is the batch mean, as PyTorch's
// default reduction.
type Loss string

// The losses of vrun train, with torch.nn.functional's semantics.
const (
	// CrossEntropy is cross_entropy of logits [N, C] (or [N, C, d...])
	// and int64 class indices [N] (or [N, d...]).
	CrossEntropy Loss = "cross_entropy"
	// NLL is nll_loss of log-probabilities and int64 class indices.
	NLL Loss = "nll"
	// MSE is mse_loss: the mean of (output - target)².
	MSE Loss = "mse"
	// BCE is binary_cross_entropy of probabilities in [0, 1] and targets
	// in [0, 1].
	BCE Loss = "bce"
	// Huber is huber_loss with delta 1.
	Huber Loss = "huber"
)

// Losses lists the losses, in the order vrun train's help gives them.
var Losses = []Loss{CrossEntropy, MSE, BCE, Huber, NLL}

// ParseLoss returns the loss named s.
func ParseLoss(s string) (Loss, error) {
	for _, l := range Losses {
		if string(l) == s {
			return l, nil
		}
	}
	names := make([]string, len(Losses))
	for i, l := range Losses {
		names[i] = string(l)
	}
	return "", fmt.Errorf("train: unknown loss %q (want %s)", s, strings.Join(names, ", "))
}

// Classes reports whether the loss takes int64 class indices as targets.
func (l Loss) Classes() bool { return l == CrossEntropy || l == NLL }

// NetOptions configures NewNet.
type NetOptions struct {
	// Loss is applied to the model's first output.
	Loss Loss
	// Params, when not empty, names exactly the weights to train.
	// Otherwise every float weight is trained except BatchNormalization
	// running statistics, weights that only feed shape computations, and
	// Freeze.
	Params []string
	// Freeze names weights not to train: exact names, or prefixes that
	// end at a dot ("conv1" freezes "conv1.weight" and "conv1.bias").
	Freeze []string
	// NoGrad names nodes of the model whose ops pass no gradient
	// (nn.Graph.NoGradNodes).
	NoGrad []string
	// Sample is the shape of one input sample (the input's shape without
	// the batch dim). Empty means the model's static input shape.
	Sample []int
}

// Net is a model prepared for training: the inference model, and a
// training model that computes the loss of its first output against a
// target input.
type Net struct {
	// Base is the inference model it was made from (not modified).
	Base *model.Model
	// Model is Base with the loss attached: one more input (Target) and
	// one more output (LossName).
	Model *model.Model
	// Input is the model's data input; Output its first output, to
	// which the loss applies.
	Input, Output string
	// Target is the input that takes the targets; LossName the loss
	// output.
	Target, LossName string
	// Loss is the attached loss.
	Loss Loss
	// Params are the trained weights, Frozen the float weights that are
	// not (running statistics excluded).
	Params, Frozen []string
	// NoGrad is NetOptions.NoGrad.
	NoGrad []string
	// Sample is the shape of one input sample, OutSample that of the
	// first output for one sample (both without the batch dim), OutDType
	// the output's dtype.
	Sample, OutSample []int
	OutDType          rt.DType
	// Batch is the batch size the model requires when its input's batch
	// dim is static (an ONNX export with a fixed batch), 0 when dynamic.
	Batch int
}

// NewClassifier is [Arch] followed by [NewNet] with [CrossEntropy]: the
// architecture named arch for samples of shape sample and classes
// outputs, its weights seeded with seed, as a classifier to train.
func NewClassifier(arch string, sample []int, classes int, seed uint64) (*Net, error) {
	m, err := Arch(arch, ArchOptions{Sample: sample, Outputs: classes, Seed: seed})
	if err != nil {
		return nil, err
	}
	return NewNet(m, NetOptions{Loss: CrossEntropy})
}

// NewNet attaches a loss to the first output of base, a model with one
// input, and picks the weights to train.
func NewNet(base *model.Model, o NetOptions) (*Net, error) {
	if _, err := ParseLoss(string(o.Loss)); err != nil {
		return nil, err
	}
	ins, outs := base.Inputs(), base.Outputs()
	if len(ins) != 1 {
		names := make([]string, len(ins))
		for i, k := range ins {
			names[i] = base.Tensors[k].Name
		}
		return nil, fmt.Errorf("train: the model has %d inputs (%s); training feeds one input from the dataset", len(ins), strings.Join(names, ", "))
	}
	if len(outs) == 0 {
		return nil, fmt.Errorf("train: the model has no outputs")
	}
	out := base.Tensors[outs[0]]
	in := base.Tensors[ins[0]]
	n := &Net{Base: base, Input: in.Name, Output: out.Name, Loss: o.Loss, NoGrad: o.NoGrad, Sample: slices.Clone(o.Sample)}
	if len(in.Shape) > 0 && in.Shape[0] > 0 {
		n.Batch = int(in.Shape[0])
	}
	if len(n.Sample) == 0 {
		for i, d := range in.Shape {
			if i > 0 && d < 0 {
				return nil, fmt.Errorf("train: the model's input %q has dynamic dims %v: give the sample shape (NetOptions.Sample)", in.Name, in.Shape)
			}
			if i > 0 {
				n.Sample = append(n.Sample, int(d))
			}
		}
		if len(in.Shape) == 0 {
			return nil, fmt.Errorf("train: the model's input %q has no batch dim", in.Name)
		}
	}
	if err := n.probe(); err != nil {
		return nil, err
	}
	if n.OutDType != rt.F32 && n.OutDType != rt.F64 {
		return nil, fmt.Errorf("train: the first output %q has dtype %s; the loss needs f32 or f64", out.Name, n.OutDType)
	}
	if err := n.attachLoss(o.Loss, out); err != nil {
		return nil, err
	}
	if err := n.pickParams(o); err != nil {
		return nil, err
	}
	return n, nil
}

// attachLoss builds the loss with package nn on a graph whose input
// stands for the model's first output, and appends that graph's tensors
// and nodes to a copy of the base model.
func (n *Net) attachLoss(kind Loss, out model.Tensor) error {
	base := n.Base
	used := map[string]bool{}
	for _, t := range base.Tensors {
		used[t.Name] = true
	}
	for _, nd := range base.Nodes {
		used[nd.Name] = true
	}
	fresh := func(name string) string {
		for k := 1; used[name]; k++ {
			name = fmt.Sprintf("%s_%d", strings.TrimRight(name, "_0123456789"), k)
		}
		used[name] = true
		return name
	}
	g := nn.NewGraph(n.OutDType, 0)
	shape := append([]int{-1}, n.OutSample...)
	pred := g.Input("__pred", shape...)
	var target, loss nn.Value
	switch kind {
	case CrossEntropy, NLL:
		tshape := []int{-1}
		if len(shape) > 2 {
			tshape = append(tshape, shape[2:]...)
		}
		target = g.InputOf("__target", rt.I64, tshape...)
		if kind == CrossEntropy {
			loss = nn.CrossEntropyLoss(g, pred, target, nn.ClassOptions{})
		} else {
			loss = nn.NLLLoss(g, pred, target, nn.ClassOptions{})
		}
	default:
		target = g.Input("__target", shape...)
		switch kind {
		case MSE:
			loss = nn.MSELoss(g, pred, target, nn.Mean)
		case BCE:
			loss = nn.BCELoss(g, pred, target, nn.Value{}, nn.Mean)
		case Huber:
			loss = nn.HuberLoss(g, pred, target, 1, nn.Mean)
		}
	}
	lm, err := g.Model(loss)
	if err != nil {
		return fmt.Errorf("train: %s loss: %w", kind, err)
	}
	// Merge: the loss model's tensors are renamed under "loss.", its
	// prediction input becomes the base model's first output.
	m := &model.Model{Meta: slices.Clone(base.Meta), Tensors: slices.Clone(base.Tensors), Nodes: slices.Clone(base.Nodes)}
	predIdx := base.TensorIndex(out.Name)
	remap := make([]int, len(lm.Tensors))
	for i, t := range lm.Tensors {
		switch {
		case t.Name == "__pred":
			remap[i] = predIdx
			continue
		case t.Name == "__target":
			t.Name = fresh("target")
			n.Target = t.Name
		case t.Role == model.Output:
			t.Name = fresh("loss")
			n.LossName = t.Name
		default:
			t.Name = fresh("loss." + t.Name)
		}
		remap[i] = len(m.Tensors)
		m.Tensors = append(m.Tensors, t)
	}
	for _, nd := range lm.Nodes {
		nd.Name = fresh("loss." + nd.Name)
		nd.Inputs = remapIdx(nd.Inputs, remap)
		nd.Outputs = remapIdx(nd.Outputs, remap)
		m.Nodes = append(m.Nodes, nd)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("train: attaching the %s loss: %w", kind, err)
	}
	n.Model = m
	return nil
}

// probe plans the inference model for one sample on the CPU to learn the
// output's shape and dtype.
func (n *Net) probe() error {
	dev, err := rt.Open("cpu", nil)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer dev.Close()
	b := max(n.Batch, 1)
	s, err := engine.New(n.Base, dev, engine.Options{Shapes: map[string][]int{n.Input: append([]int{b}, n.Sample...)}})
	if err != nil {
		return fmt.Errorf("train: the model does not take samples of shape %v: %w", n.Sample, err)
	}
	defer s.Close()
	info := s.Info()
	sh := info.OutputShapes[n.Output]
	if len(sh) == 0 || sh[0] != b {
		return fmt.Errorf("train: for %d samples of shape %v the model's output %q has shape %v; want the batch dim first", b, n.Sample, n.Output, sh)
	}
	n.OutSample, n.OutDType = slices.Clone(sh[1:]), info.OutputTypes[n.Output]
	return nil
}

func remapIdx(idx, remap []int) []int {
	out := make([]int, len(idx))
	for i, k := range idx {
		out[i] = -1
		if k >= 0 {
			out[i] = remap[k]
		}
	}
	return out
}

// shapeSlots lists, per op, the inputs that are read as shapes, axes,
// sizes or counts rather than as data: a weight that feeds only these is
// not trained.
var shapeSlots = map[string][]int{
	"Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Squeeze": {1}, "Unsqueeze": {1},
	"Resize": {1, 2, 3}, "Upsample": {1}, "ConstantOfShape": {0}, "Range": {0, 1, 2}, "Pad": {1, 3},
	"Split": {1}, "TopK": {1}, "OneHot": {1}, "CumSum": {1}, "Shape": {0}, "Size": {0}, "EyeLike": {0},
	"ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "ReduceMin": {1}, "ReduceProd": {1},
	"ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1}, "ReduceSumSquare": {1},
	"Trilu": {1}, "RandomNormalLike": {0}, "RandomUniformLike": {0}, "Multinomial": {}, "NonMaxSuppression": {2, 3, 4},
	"CenterCropPad": {1}, "DFT": {1, 2}, "STFT": {1, 2, 3},
}

// dataWeights returns the weights of m that feed some node as data (not
// only as shapes), following the data flow backwards from the outputs.
func dataWeights(m *model.Model) map[int]bool {
	producer := map[int]int{}
	for k, nd := range m.Nodes {
		for _, o := range nd.Outputs {
			if o >= 0 {
				producer[o] = k
			}
		}
	}
	data := map[int]bool{}
	var stack []int
	for _, o := range m.Outputs() {
		data[o] = true
		stack = append(stack, o)
	}
	visited := map[int]bool{}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		k, ok := producer[t]
		if !ok || visited[k] {
			continue
		}
		visited[k] = true
		nd := m.Nodes[k]
		for slot, in := range nd.Inputs {
			if in < 0 || slices.Contains(shapeSlots[nd.Op], slot) || data[in] {
				continue
			}
			data[in] = true
			stack = append(stack, in)
		}
	}
	out := map[int]bool{}
	for i := range data {
		if m.Tensors[i].Role == model.Weight {
			out[i] = true
		}
	}
	return out
}

// runningStats returns the weights that are BatchNormalization running
// statistics (inputs 3 and 4).
func runningStats(m *model.Model) map[int]bool {
	out := map[int]bool{}
	for _, nd := range m.Nodes {
		if nd.Op == "BatchNormalization" && len(nd.Inputs) == 5 {
			for _, i := range nd.Inputs[3:] {
				if i >= 0 && m.Tensors[i].Role == model.Weight {
					out[i] = true
				}
			}
		}
	}
	return out
}

func (n *Net) pickParams(o NetOptions) error {
	base := n.Base
	stats := runningStats(base)
	isData := dataWeights(base)
	matched := make([]bool, len(o.Freeze))
	frozen := func(name string) bool {
		hit := false
		for k, f := range o.Freeze {
			if name == f || strings.HasPrefix(name, strings.TrimSuffix(f, ".")+".") {
				matched[k], hit = true, true
			}
		}
		return hit
	}
	if len(o.Params) > 0 {
		for _, name := range o.Params {
			i := base.TensorIndex(name)
			if i < 0 || base.Tensors[i].Role != model.Weight || !base.Tensors[i].DType.IsFloat() {
				return fmt.Errorf("train: parameter %q is not a float weight of the model", name)
			}
		}
	}
	for i, t := range base.Tensors {
		if t.Role != model.Weight || !t.DType.IsFloat() || stats[i] {
			continue
		}
		fz := frozen(t.Name)
		want := isData[i]
		if len(o.Params) > 0 {
			want = slices.Contains(o.Params, t.Name)
		}
		if want && !fz {
			n.Params = append(n.Params, t.Name)
		} else {
			n.Frozen = append(n.Frozen, t.Name)
		}
	}
	for k, f := range o.Freeze {
		if !matched[k] {
			return fmt.Errorf("train: -freeze %q matches no float weight of the model (weights: %s)", f, weightList(base))
		}
	}
	if len(n.Params) == 0 {
		return fmt.Errorf("train: nothing to train: every float weight is frozen, a running statistic or a shape")
	}
	return nil
}

// weightList names a model's float weights, shortened for messages.
func weightList(m *model.Model) string {
	var names []string
	for _, t := range m.Tensors {
		if t.Role == model.Weight && t.DType.IsFloat() {
			names = append(names, t.Name)
		}
	}
	if len(names) > 12 {
		names = append(names[:12], fmt.Sprintf("... %d more", len(names)-12))
	}
	return strings.Join(names, ", ")
}

// TrainOptions returns the engine options that train the net: the loss,
// the parameters, the frozen weights and the no-grad nodes. The caller
// adds the optimizer, the seed and the shapes.
func (n *Net) TrainOptions() engine.TrainOptions {
	return engine.TrainOptions{Loss: n.LossName, Params: slices.Clone(n.Params), Frozen: slices.Clone(n.Frozen),
		NoGrad: slices.Clone(n.NoGrad)}
}

// Export returns the inference model with the given weights (a
// Trainer's Weights: trained parameters and running statistics) in place
// of Base's: model.Model.WithWeights. Base is not modified. Write it with
// model.WriteFile (model.bin) or export.ONNX.
func (n *Net) Export(weights map[string]*rt.Tensor) (*model.Model, error) {
	m, err := n.Base.WithWeights(weights)
	if err != nil {
		return nil, fmt.Errorf("train: export: %w", err)
	}
	return m, nil
}

// ExportFile writes the inference model with the given weights (Export)
// to path as a model.bin (model.WriteFile).
func (n *Net) ExportFile(path string, weights map[string]*rt.Tensor) error {
	m, err := n.Export(weights)
	if err != nil {
		return err
	}
	if err := model.WriteFile(path, m); err != nil {
		return fmt.Errorf("train: export: %w", err)
	}
	return nil
}
