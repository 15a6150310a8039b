package nn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/nn"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// The PyTorch references of testdata/nn/cases (made by testdata/nn/gen.py,
// which documents the format): each case is built here with the same
// layer or loss and the parameters torch initialised (loaded with
// SetParam), run for one engine.Trainer step on the CPU backend in f32 and
// in f64, and its outputs, loss, gradients, updated running statistics
// and, for the training cases, three SGD steps are compared with PyTorch.
//
// Tolerances: |got - want| <= atol + rtol*|want| elementwise, with (rtol,
// atol) from the case: f64 (1e-9, 1e-10) for every case; f32 (2e-5, 2e-6)
// for elementwise layers and losses, (5e-5, 5e-6) for layers with sums
// over a few dozen products (Linear, Conv, norms, attention) and (1e-4,
// 1e-5) for LSTM and GRU (errors compound through time). The references
// are float64 computations from the same float32-representable inputs,
// so the f32 tolerance covers the f32 arithmetic alone (on the CPU
// backend the worst error is 2% of it, in f64 under 1%). The SGD cases
// compare the parameters after three steps with ten times the tolerance
// (three steps of rounding, amplified by the learning rate).

const refDir = "../testdata/nn/cases"

type refInput struct {
	Name string `json:"name"`
	File string `json:"file"`
	Grad bool   `json:"grad"`
}

type refTrain struct {
	LR     float64           `json:"lr"`
	Steps  int               `json:"steps"`
	Losses []float64         `json:"losses"`
	Params map[string]string `json:"params"`
}

type refCase struct {
	Name      string               `json:"name"`
	Inputs    []refInput           `json:"inputs"`
	Params    []string             `json:"params"`
	Outputs   int                  `json:"outputs"`
	Cot       bool                 `json:"cot"`
	Loss      float64              `json:"loss"`
	Grads     map[string]string    `json:"grads"`
	ZeroGrads []string             `json:"zero_grads"`
	Buffers   map[string]string    `json:"buffers"`
	Evals     int                  `json:"evals"`
	Train     *refTrain            `json:"train"`
	Tol       map[string][]float64 `json:"tol"`
}

// builder builds a case's network on g from its inputs and returns the
// outputs (output 0 is the loss when the case has no cotangents).
type builder func(g *nn.Graph, in map[string]nn.Value) []nn.Value

func intp(i int) *int { return &i }

func one(l nn.Layer) builder {
	return func(g *nn.Graph, in map[string]nn.Value) []nn.Value { return []nn.Value{l.Forward(g, in["x"])} }
}

// fresh wraps a layer constructor so that each build gets a new layer.
func fresh(mk func() nn.Layer) builder {
	return func(g *nn.Graph, in map[string]nn.Value) []nn.Value { return one(mk())(g, in) }
}

var acts = map[string]nn.Layer{
	"relu": nn.ReLU{}, "leakyrelu": nn.LeakyReLU{}, "leakyrelu_0.2": nn.LeakyReLU{Slope: 0.2},
	"elu": nn.ELU{}, "elu_0.5": nn.ELU{Alpha: 0.5}, "gelu": nn.GELU{}, "gelu_tanh": nn.GELU{Tanh: true},
	"silu": nn.SiLU{}, "mish": nn.Mish{}, "sigmoid": nn.Sigmoid{}, "tanh": nn.Tanh{},
	"softmax": nn.Softmax{Dim: 1}, "logsoftmax": nn.LogSoftmax{Dim: -1},
}

func regression(f func(g *nn.Graph, x, y nn.Value) nn.Value) builder {
	return func(g *nn.Graph, in map[string]nn.Value) []nn.Value { return []nn.Value{f(g, in["x"], in["y"])} }
}

func class(ce bool, o nn.ClassOptions) builder {
	return func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		if ce {
			return []nn.Value{nn.CrossEntropyLoss(g, in["x"], in["t"], o)}
		}
		return []nn.Value{nn.NLLLoss(g, in["x"], in["t"], o)}
	}
}

var w5 = []float64{0.5, 2.0, 1.0, 0.25, 1.5}

var builders = map[string]builder{
	"linear":           fresh(func() nn.Layer { return &nn.Linear{In: 5, Out: 4, Name: "lin"} }),
	"linear_nobias_3d": fresh(func() nn.Layer { return &nn.Linear{In: 6, Out: 3, NoBias: true, Name: "lin"} }),
	"sequential_mlp": fresh(func() nn.Layer {
		return nn.NewSequential(nn.NewLinear(4, 8), nn.Tanh{}, nn.NewLinear(8, 3))
	}),
	"shared_linear": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		l := &nn.Linear{In: 4, Out: 4, Name: "lin"}
		return []nn.Value{l.Forward(g, nn.Tanh{}.Forward(g, l.Forward(g, in["x"])))}
	},
	"broadcast_params": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		x := in["x"]
		scale := g.Param("scale", []int{1, 4, 1}, nil)
		bias := g.Param("bias", []int{5}, nil)
		s := g.Param("s", []int{1}, nil)
		m := g.Param("m", []int{3, 1, 5}, nil)
		return []nn.Value{g.Sub(g.Add(g.Mul(x, scale), g.Mul(bias, s)), g.Mul(m, x))}
	},
	"conv2d": fresh(func() nn.Layer {
		return &nn.Conv2D{In: 3, Out: 4, Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}, Name: "conv"}
	}),
	"conv2d_stride_dil_groups": fresh(func() nn.Layer {
		return &nn.Conv2D{In: 4, Out: 6, Kernel: [2]int{3, 2}, Stride: [2]int{2, 1}, Padding: [2]int{1, 2},
			Dilation: [2]int{2, 1}, Groups: 2, Name: "conv"}
	}),
	"conv2d_same_nobias": fresh(func() nn.Layer {
		return &nn.Conv2D{In: 2, Out: 3, Kernel: [2]int{4, 4}, Same: true, NoBias: true, Dilation: [2]int{1, 2}, Name: "conv"}
	}),
	"maxpool":                one(nn.MaxPool2D{Kernel: [2]int{2, 2}}),
	"maxpool_pad_stride_dil": one(nn.MaxPool2D{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 2}}),
	"maxpool_ceil":           one(nn.MaxPool2D{Kernel: [2]int{2, 2}, CeilMode: true}),
	"avgpool":                one(nn.AvgPool2D{Kernel: [2]int{2, 2}}),
	"avgpool_pad":            one(nn.AvgPool2D{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}),
	"avgpool_pad_exclude":    one(nn.AvgPool2D{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, ExcludePad: true}),
	"avgpool_ceil":           one(nn.AvgPool2D{Kernel: [2]int{2, 2}, CeilMode: true}),
	"globalavgpool":          one(nn.GlobalAvgPool{}),
	"flatten_linear":         fresh(func() nn.Layer { return nn.NewSequential(nn.Flatten{}, nn.NewLinear(12, 3)) }),
	"cnn": fresh(func() nn.Layer {
		return nn.NewSequential(
			&nn.Conv2D{In: 2, Out: 4, Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}}, nn.BatchNorm2D(4), nn.ReLU{},
			nn.MaxPool2D{Kernel: [2]int{2, 2}},
			&nn.Conv2D{In: 4, Out: 4, Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}, Groups: 2}, nn.GELU{},
			nn.GlobalAvgPool{}, nn.Flatten{}, nn.NewLinear(4, 3))
	}),
	"batchnorm1d":          fresh(func() nn.Layer { return &nn.BatchNorm{Features: 5, Name: "bn"} }),
	"batchnorm1d_3d":       fresh(func() nn.Layer { return &nn.BatchNorm{Features: 3, Momentum: 0.25, Name: "bn"} }),
	"batchnorm2d":          fresh(func() nn.Layer { return &nn.BatchNorm{Features: 3, Eps: 1e-3, Momentum: 0.2, Name: "bn"} }),
	"batchnorm2d_noaffine": fresh(func() nn.Layer { return &nn.BatchNorm{Features: 3, NoAffine: true, Name: "bn"} }),
	"layernorm_noaffine":   fresh(func() nn.Layer { return &nn.LayerNorm{Shape: []int{5}, NoAffine: true, Name: "ln"} }),
	"layernorm":            fresh(func() nn.Layer { return &nn.LayerNorm{Shape: []int{6}, Name: "ln"} }),
	"layernorm_2d":         fresh(func() nn.Layer { return &nn.LayerNorm{Shape: []int{4, 6}, Eps: 1e-3, Name: "ln"} }),
	"embedding": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{(&nn.Embedding{Num: 10, Dim: 4, Name: "emb"}).Forward(g, in["idx"])}
	},
	"embedding_padding": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{(&nn.Embedding{Num: 8, Dim: 3, PaddingIdx: intp(1), Name: "emb"}).Forward(g, in["idx"])}
	},
	"lstm": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		l := nn.NewLSTM(4, 5)
		l.Name = "lstm"
		y, h, c := l.Run(g, in["x"], in["h0"], in["c0"])
		return []nn.Value{y, h, c}
	},
	"lstm_bi_2layer_batchfirst": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		l := nn.NewLSTM(3, 4)
		l.Name, l.Layers, l.Bidirectional, l.BatchFirst = "lstm", 2, true, true
		y, h, c := l.Run(g, in["x"], nn.Value{}, nn.Value{})
		return []nn.Value{y, h, c}
	},
	"gru": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		l := nn.NewGRU(4, 5)
		l.Name = "gru"
		y, h := l.Run(g, in["x"], in["h0"])
		return []nn.Value{y, h}
	},
	"gru_bi_2layer_nobias": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		l := nn.NewGRU(3, 4)
		l.Name, l.Layers, l.Bidirectional, l.BatchFirst, l.NoBias = "gru", 2, true, true, true
		y, h := l.Run(g, in["x"], in["h0"])
		return []nn.Value{y, h}
	},
	"mha_self": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		a := &nn.MultiHeadAttention{Embed: 8, Heads: 2, Name: "attn"}
		y, w := a.Attend(g, in["x"], in["x"], in["x"], nn.AttentionOptions{Weights: true})
		return []nn.Value{y, w}
	},
	"mha_cross_bool_masks": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		a := &nn.MultiHeadAttention{Embed: 8, Heads: 2, BatchFirst: true, Name: "attn"}
		y, _ := a.Attend(g, in["q"], in["kv"], in["kv"], nn.AttentionOptions{Mask: in["mask"], KeyPadding: in["kpm"]})
		return []nn.Value{y}
	},
	"mha_float_mask_kvdim": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		a := &nn.MultiHeadAttention{Embed: 6, Heads: 3, KDim: 4, VDim: 5, NoBias: true, Name: "attn"}
		y, w := a.Attend(g, in["q"], in["k"], in["v"], nn.AttentionOptions{Mask: in["mask"], Weights: true})
		return []nn.Value{y, w}
	},
	"mha_causal": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		a := &nn.MultiHeadAttention{Embed: 4, Heads: 2, BatchFirst: true, Name: "attn"}
		y, _ := a.Attend(g, in["x"], in["x"], in["x"], nn.AttentionOptions{Causal: true})
		return []nn.Value{y}
	},
	"posenc":              one(nn.PositionalEncoding{Dim: 6, MaxLen: 16, BatchFirst: true}),
	"posenc_seqfirst_odd": one(nn.PositionalEncoding{Dim: 5, MaxLen: 12}),

	"loss_mse_mean": regression(func(g *nn.Graph, x, y nn.Value) nn.Value { return nn.MSELoss(g, x, y, nn.Mean) }),
	"loss_mse_sum":  regression(func(g *nn.Graph, x, y nn.Value) nn.Value { return nn.MSELoss(g, x, y, nn.Sum) }),
	"loss_l1_mean":  regression(func(g *nn.Graph, x, y nn.Value) nn.Value { return nn.L1Loss(g, x, y, nn.Mean) }),
	"loss_huber_mean": regression(func(g *nn.Graph, x, y nn.Value) nn.Value {
		return nn.HuberLoss(g, x, y, 1, nn.Mean)
	}),
	"loss_huber_delta0.5_sum": regression(func(g *nn.Graph, x, y nn.Value) nn.Value {
		return nn.HuberLoss(g, x, y, 0.5, nn.Sum)
	}),
	"loss_smoothl1_mean": regression(func(g *nn.Graph, x, y nn.Value) nn.Value {
		return nn.SmoothL1Loss(g, x, y, 1, nn.Mean)
	}),
	"loss_smoothl1_beta0.25_sum": regression(func(g *nn.Graph, x, y nn.Value) nn.Value {
		return nn.SmoothL1Loss(g, x, y, 0.25, nn.Sum)
	}),
	"loss_smoothl1_beta0": regression(func(g *nn.Graph, x, y nn.Value) nn.Value {
		return nn.SmoothL1Loss(g, x, y, 0, nn.Mean)
	}),
	"loss_bce_mean": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.BCELoss(g, in["p"], in["y"], nn.Value{}, nn.Mean)}
	},
	"loss_bce_weight_sum": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.BCELoss(g, in["p"], in["y"], in["w"], nn.Sum)}
	},
	"loss_bcelogits_mean": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.BCEWithLogitsLoss(g, in["x"], in["y"], nn.Value{}, nn.Value{}, nn.Mean)}
	},
	"loss_bcelogits_weight_posweight_sum": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.BCEWithLogitsLoss(g, in["x"], in["y"], in["w"], in["pw"], nn.Sum)}
	},
	"loss_bcelogits_posweight_mean": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.BCEWithLogitsLoss(g, in["x"], in["y"], nn.Value{}, in["pw"], nn.Mean)}
	},
	"loss_nll_mean":               class(false, nn.ClassOptions{}),
	"loss_nll_sum":                class(false, nn.ClassOptions{Reduction: nn.Sum}),
	"loss_nll_weight_ignore_mean": class(false, nn.ClassOptions{Weight: w5}),
	"loss_nll_ignore2_mean_3d":    class(false, nn.ClassOptions{IgnoreIndex: intp(2)}),
	"loss_ce_mean":                class(true, nn.ClassOptions{}),
	"loss_ce_sum":                 class(true, nn.ClassOptions{Reduction: nn.Sum}),
	"loss_ce_weight_ignore_mean":  class(true, nn.ClassOptions{Weight: w5}),
	"loss_ce_smooth_mean":         class(true, nn.ClassOptions{LabelSmoothing: 0.1}),
	"loss_ce_smooth_ignore_mean":  class(true, nn.ClassOptions{LabelSmoothing: 0.2}),
	"loss_ce_smooth_weight_ignore_mean": class(true, nn.ClassOptions{Weight: w5, IgnoreIndex: intp(2),
		LabelSmoothing: 0.15}),
	"loss_ce_smooth_weight_sum":     class(true, nn.ClassOptions{Weight: w5, LabelSmoothing: 0.3, Reduction: nn.Sum}),
	"loss_ce_smooth_weight_mean_3d": class(true, nn.ClassOptions{Weight: w5, LabelSmoothing: 0.1}),
	"loss_mse_none": regression(func(g *nn.Graph, x, y nn.Value) nn.Value {
		return nn.MSELoss(g, x, y, nn.NoReduction)
	}),
	"loss_huber_none": regression(func(g *nn.Graph, x, y nn.Value) nn.Value {
		return nn.HuberLoss(g, x, y, 1, nn.NoReduction)
	}),
	"loss_bcelogits_posweight_none": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.BCEWithLogitsLoss(g, in["x"], in["y"], nn.Value{}, in["pw"], nn.NoReduction)}
	},
	"loss_nll_weight_ignore_none": class(false, nn.ClassOptions{Weight: w5, Reduction: nn.NoReduction}),
	"loss_ce_smooth_weight_ignore_none": class(true, nn.ClassOptions{Weight: w5, LabelSmoothing: 0.2,
		Reduction: nn.NoReduction}),
	"loss_kldiv_none": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.KLDivLoss(g, in["x"], in["t"], nn.NoReduction, false)}
	},
	"loss_kldiv_mean": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.KLDivLoss(g, in["x"], in["t"], nn.Mean, false)}
	},
	"loss_kldiv_batchmean": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.KLDivLoss(g, in["x"], in["t"], nn.BatchMean, false)}
	},
	"loss_kldiv_sum": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.KLDivLoss(g, in["x"], in["t"], nn.Sum, false)}
	},
	"loss_kldiv_logtarget_batchmean": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		return []nn.Value{nn.KLDivLoss(g, in["x"], in["t"], nn.BatchMean, true)}
	},

	"nograd": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		lin1 := &nn.Linear{In: 4, Out: 6, Name: "lin1"}
		lin2 := &nn.Linear{In: 6, Out: 3, Name: "lin2"}
		var h nn.Value
		g.NoGrad(func() { h = lin1.Forward(g, in["x"]) })
		return []nn.Value{lin2.Forward(g, nn.ReLU{}.Forward(g, h))}
	},
	"train_norms_embedding": func(g *nn.Graph, in map[string]nn.Value) []nn.Value {
		h := (&nn.Embedding{Num: 12, Dim: 6, Name: "emb"}).Forward(g, in["idx"])
		h = (&nn.LayerNorm{Shape: []int{6}, Name: "ln"}).Forward(g, h)
		h = (&nn.BatchNorm{Features: 6, Name: "bn"}).Forward(g, nn.Tanh{}.Forward(g, h))
		h = (&nn.Linear{In: 6, Out: 3, Name: "lin"}).Forward(g, h)
		return []nn.Value{nn.CrossEntropyLoss(g, h, in["t"], nn.ClassOptions{})}
	},
}

func init() {
	for name, a := range acts {
		builders["act_"+name] = one(a)
	}
}

func readCase(t *testing.T, name string) (*refCase, string) {
	t.Helper()
	dir := filepath.Join(refDir, name)
	raw, err := os.ReadFile(filepath.Join(dir, "case.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c refCase
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &c, dir
}

func load(t *testing.T, dir, file string) *rt.Tensor {
	t.Helper()
	v, err := npy.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// as converts a float tensor to dt (other dtypes are returned as they are).
func as(v *rt.Tensor, dt rt.DType) *rt.Tensor {
	if !v.DType.IsFloat() {
		return v
	}
	return rt.FromFloat64(dt, v.Float64s(), v.Shape...)
}

// closeTo compares got with want elementwise and describes the worst
// violation of |got - want| <= atol + rtol*|want|.
func closeTo(got, want []float64, tol []float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range want {
		d := math.Abs(got[i] - want[i])
		lim := tol[1] + tol[0]*math.Abs(want[i])
		if !(d <= lim) && (at < 0 || d/lim > worst) {
			worst, at = d/lim, i
		}
	}
	if at >= 0 {
		return fmt.Errorf("[%d] = %.10g, want %.10g (%.3g times the tolerance)", at, got[at], want[at], worst)
	}
	return nil
}

func buildRef(t *testing.T, c *refCase, dir string, dt rt.DType) (*nn.Graph, []nn.Value, nn.Value, map[string]*rt.Tensor, engine.TrainOptions, *model.Model) {
	t.Helper()
	b := builders[c.Name]
	if b == nil {
		t.Fatalf("no Go builder for case %q", c.Name)
	}
	g := nn.NewGraph(dt, 1)
	in := map[string]nn.Value{}
	inputs := map[string]*rt.Tensor{}
	var gradIns []string
	for _, ri := range c.Inputs {
		v := as(load(t, dir, ri.File), dt)
		inputs[ri.Name] = v
		in[ri.Name] = g.InputOf(ri.Name, v.DType, v.Shape...)
		if ri.Grad {
			gradIns = append(gradIns, ri.Name)
		}
	}
	outs := b(g, in)
	if len(outs) != c.Outputs {
		t.Fatalf("builder returns %d outputs, reference has %d", len(outs), c.Outputs)
	}
	// Every parameter and buffer has PyTorch's name: the sets must match.
	have := append(g.Params(), g.Buffers()...)
	want := slices.Clone(c.Params)
	sort.Strings(have)
	sort.Strings(want)
	if !slices.Equal(have, want) {
		t.Fatalf("parameters %v, PyTorch has %v", have, want)
	}
	for _, name := range c.Params {
		if err := g.SetParam(name, load(t, dir, "p_"+name+".npy")); err != nil {
			t.Fatal(err)
		}
	}
	loss := outs[0]
	mo := outs
	if c.Cot {
		var sum nn.Value
		for k, o := range outs {
			s := g.Sum(g.Mul(o, in[fmt.Sprintf("cot%d", k)]), false)
			if k == 0 {
				sum = s
			} else {
				sum = g.Add(sum, s)
			}
		}
		loss = sum
		mo = append(slices.Clone(outs), loss)
	}
	m, err := g.Model(mo...)
	if err != nil {
		t.Fatal(err)
	}
	opts := g.TrainOptions(m, loss)
	opts.InputGrads = gradIns
	return g, outs, loss, inputs, opts, m
}

func TestReferences(t *testing.T) {
	entries, err := os.ReadDir(refDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		seen[name] = true
		for _, dt := range []rt.DType{rt.F32, rt.F64} {
			t.Run(name+"/"+dt.String(), func(t *testing.T) { runRef(t, name, dt) })
		}
	}
	for name := range builders {
		if !seen[name] {
			t.Errorf("builder %q has no reference case", name)
		}
	}
	if len(seen) < 70 {
		t.Errorf("%d reference cases, want at least 70", len(seen))
	}
}

func runRef(t *testing.T, name string, dt rt.DType) {
	c, dir := readCase(t, name)
	tol := c.Tol[dt.String()]
	if len(tol) != 2 {
		t.Fatalf("no %s tolerance", dt)
	}
	g, outs, loss, inputs, opts, m := buildRef(t, c, dir, dt)
	dev := cpu.NewDevice()
	defer dev.Close()
	tr, err := engine.NewTrainer(m, dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx := context.Background()
	res, err := tr.Step(ctx, inputs)
	if err != nil {
		t.Fatal(err)
	}
	for k, o := range outs {
		want := load(t, dir, fmt.Sprintf("out_%d.npy", k))
		got := res.Outputs[o.Name()]
		if got == nil {
			if k == 0 && !c.Cot {
				got = res.Outputs[loss.Name()]
			}
			if got == nil {
				t.Fatalf("output %d (%s) missing", k, o.Name())
			}
		}
		if !slices.Equal(got.Shape, want.Shape) && !(got.Len() == 1 && want.Len() == 1) {
			t.Errorf("output %d: shape %v, want %v", k, got.Shape, want.Shape)
			continue
		}
		if err := closeTo(got.Float64s(), want.Float64s(), tol); err != nil {
			t.Errorf("output %d: %v", k, err)
		}
	}
	if err := closeTo([]float64{res.Loss}, []float64{c.Loss}, tol); err != nil {
		t.Errorf("loss: %v", err)
	}
	grads, err := tr.Grads()
	if err != nil {
		t.Fatal(err)
	}
	for n, f := range c.Grads {
		got := grads[n]
		if got == nil {
			t.Errorf("no gradient for %s", n)
			continue
		}
		if err := closeTo(got.Float64s(), load(t, dir, f).Float64s(), tol); err != nil {
			t.Errorf("d loss/d %s: %v", n, err)
		}
	}
	for _, n := range c.ZeroGrads {
		if got := grads[n]; got != nil {
			for i, v := range got.Float64s() {
				if v != 0 {
					t.Errorf("d loss/d %s[%d] = %g under NoGrad, want 0", n, i, v)
					break
				}
			}
		}
	}
	if len(c.Buffers) > 0 {
		w, err := tr.Weights()
		if err != nil {
			t.Fatal(err)
		}
		for n, f := range c.Buffers {
			if err := closeTo(w[n].Float64s(), load(t, dir, f).Float64s(), tol); err != nil {
				t.Errorf("%s after the step: %v", n, err)
			}
		}
	}
	if c.Evals > 0 {
		// Inference after the step: BatchNorm with the running statistics.
		ev := map[string]*rt.Tensor{}
		for k, v := range inputs {
			if !strings.HasPrefix(k, "cot") {
				ev[k] = v
			}
		}
		w, err := tr.Weights()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range append(g.Params(), g.Buffers()...) {
			if err := g.SetParam(name, w[name]); err != nil {
				t.Fatal(err)
			}
		}
		em, err := g.Model(outs...)
		if err != nil {
			t.Fatal(err)
		}
		s, err := engine.New(em, dev, engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		got, err := s.Run(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		// The trainer's own inference mode agrees.
		got2, err := tr.Eval(ctx, inputs)
		if err != nil {
			t.Fatal(err)
		}
		for k := range c.Evals {
			want := load(t, dir, fmt.Sprintf("eval_%d.npy", k)).Float64s()
			if err := closeTo(got[outs[k].Name()].Float64s(), want, tol); err != nil {
				t.Errorf("inference output %d: %v", k, err)
			}
			if err := closeTo(got2[outs[k].Name()].Float64s(), want, tol); err != nil {
				t.Errorf("Trainer.Eval output %d: %v", k, err)
			}
		}
	}
	if c.Train != nil {
		checkTrain(t, c, dir, dt, tol, m, opts, inputs)
	}
}

// checkTrain runs the case's SGD steps from the initial parameters and
// compares the per-step losses and the parameters after them.
func checkTrain(t *testing.T, c *refCase, dir string, dt rt.DType, tol []float64, m *model.Model, opts engine.TrainOptions,
	inputs map[string]*rt.Tensor) {
	opts.Optimizer = &engine.Optimizer{Kind: engine.SGD, LR: c.Train.LR}
	opts.InputGrads = nil
	dev := cpu.NewDevice()
	defer dev.Close()
	tr, err := engine.NewTrainer(m, dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before, err := tr.Weights()
	if err != nil {
		t.Fatal(err)
	}
	ttol := []float64{10 * tol[0], 10 * tol[1]}
	for s := range c.Train.Steps {
		res, err := tr.Step(context.Background(), inputs)
		if err != nil {
			t.Fatal(err)
		}
		if err := closeTo([]float64{res.Loss}, []float64{c.Train.Losses[s]}, ttol); err != nil {
			t.Errorf("SGD step %d: loss %v", s+1, err)
		}
	}
	after, err := tr.Weights()
	if err != nil {
		t.Fatal(err)
	}
	zero := map[string]bool{}
	for _, n := range c.ZeroGrads {
		zero[n] = true
	}
	for n, f := range c.Train.Params {
		want := load(t, dir, f).Float64s()
		got, init := after[n].Float64s(), before[n].Float64s()
		if zero[n] {
			// Under NoGrad: exactly unchanged.
			if !slices.Equal(got, init) {
				t.Errorf("%s changed under NoGrad", n)
			}
			continue
		}
		if err := closeTo(got, want, ttol); err != nil {
			t.Errorf("%s after %d SGD steps: %v", n, c.Train.Steps, err)
		}
		// The update moved the parameter in PyTorch's direction.
		moved := 0
		for i := range got {
			dw, dg := want[i]-init[i], got[i]-init[i]
			if math.Abs(dw) > 1e-6 {
				moved++
				if dw*dg <= 0 {
					t.Errorf("%s[%d] moved by %g, PyTorch by %g", n, i, dg, dw)
					break
				}
			}
		}
		if moved == 0 {
			t.Errorf("%s: PyTorch's update leaves it unchanged; the case tests nothing", n)
		}
	}
}
