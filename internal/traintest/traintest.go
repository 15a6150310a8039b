package traintest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Manifest is testdata/trainrun/manifest.json.
type Manifest struct {
	Optimizers map[string]struct {
		Kind     string  `json:"kind"`
		LR       float64 `json:"lr"`
		Momentum float64 `json:"momentum"`
	} `json:"optimizers"`
	Models map[string]struct {
		Batch   int              `json:"batch"`
		Steps   int              `json:"steps"`
		Samples int              `json:"samples"`
		Classes int              `json:"classes"`
		Params  map[string][]int `json:"params"`
	} `json:"models"`
}

// Tol is the tolerance of a step's loss against PyTorch's: |got - want|
// <= Tol(dt, k)·|want| at 0-based step k.
//
// f64: both sides compute the same float64 math in a different order
// (GEMM blocking, reduction trees), so the runs differ by rounding only.
// Training carries such a difference along without amplifying it much at
// these learning rates: measured on the CPU backend, at most 9e-15 over
// 200 steps (1e-13 on the final weights); 1e-9 leaves room for other
// backends' summation orders and fused multiply-adds.
//
// f32: the first losses agree to a few ulps (CPU: at most 2.2e-7 relative
// over the first 10 steps; tolerance 1e-5). After that the weights carry
// the rounding of every earlier update and each step adds its own
// (~1e-7 relative on activations and gradients, summed in another order
// on each side), so the difference can only grow with the step count:
// faster with Adam (its update divides by sqrt(v), so the relative error
// of a small gradient moves a weight by ~ε·lr rather than ε·lr·|g|) and
// with the CNN (MaxPool: a near-tie decided the other way sends a
// window's gradient to another pixel). The tolerance grows linearly from
// 1e-5 at step 10 to 1e-4 at step 200. Measured on the CPU backend (the
// test logs it): at most 9e-7 over 200 steps, well inside; a GPU
// backend's different reduction orders are expected to stay within 10×
// of that. A wrong gradient or update shows up as errors of 1e-3 and
// more within a few steps.
func Tol(dt rt.DType, k int) float64 {
	if dt == rt.F64 {
		return 1e-9
	}
	if k < 10 {
		return 1e-5
	}
	return 1e-5 + 9e-5*float64(k-10)/190
}

// FinalTolF64 bounds the relative error of the f64 weights after the last
// step (|got - want| <= FinalTolF64·max(|want|, 0.01)).
const FinalTolF64 = 1e-8

// Dir returns testdata/trainrun.
func Dir() (string, error) { return repo.Path("testdata/trainrun") }

// Load reads the manifest.
func Load() (*Manifest, error) { return repo.LoadJSON[Manifest]("testdata/trainrun/manifest.json") }

func shape64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// crossEntropy appends the mean cross-entropy of logits [B, C] against
// the one-hot input "onehot": -mean_b Σ_c onehot·LogSoftmax(logits).
func crossEntropy(b *model.Builder, logits string) string {
	ls := b.Op("LogSoftmax", []string{logits}, model.Attrs{"axis": 1})
	s := b.Op("ReduceSum", []string{b.Op("Mul", []string{ls, "onehot"}, nil)}, model.Attrs{"axes": []int64{1}, "keepdims": 0})
	m := b.Op("ReduceMean", []string{s}, model.Attrs{"keepdims": 0})
	return b.Op("Neg", []string{m}, nil)
}

// Build returns the graph of model name (mlp or cnn) in dtype dt, with
// weights w (torch's layout), input "x" of the given batch and input
// "onehot" [batch, classes], and the scalar output "loss".
func Build(name string, dt rt.DType, batch, classes int, w map[string]*rt.Tensor) (*model.Model, error) {
	b := model.NewBuilder()
	wt := func(n string) string {
		t, ok := w[n]
		if !ok {
			b.Weight(n, dt, nil, []byte{}) // reported by Build as a shape mismatch
			return n
		}
		return b.Weight(n, dt, shape64(t.Shape), t.Data)
	}
	var logits string
	switch name {
	case "mlp":
		b.Input("x", dt, int64(batch), int64(w["fc1_weight"].Shape[1]))
		h := b.Op("Relu", []string{b.Op("Gemm", []string{"x", wt("fc1_weight"), wt("fc1_bias")}, model.Attrs{"transB": 1})}, nil)
		logits = b.Op("Gemm", []string{h, wt("fc2_weight"), wt("fc2_bias")}, model.Attrs{"transB": 1})
	case "cnn":
		b.Input("x", dt, int64(batch), 3, 8, 8)
		pad1 := model.Attrs{"pads": []int64{1, 1, 1, 1}}
		h := b.Op("Relu", []string{b.Op("Conv", []string{"x", wt("conv1_weight"), wt("conv1_bias")}, pad1)}, nil)
		h = b.Op("MaxPool", []string{h}, model.Attrs{"kernel_shape": []int64{2, 2}, "strides": []int64{2, 2}})
		h = b.Op("Relu", []string{b.Op("Conv", []string{h, wt("conv2_weight"), wt("conv2_bias")}, pad1)}, nil)
		h = b.Op("Flatten", []string{b.Op("GlobalAveragePool", []string{h}, nil)}, nil)
		logits = b.Op("Gemm", []string{h, wt("fc_weight"), wt("fc_bias")}, model.Attrs{"transB": 1})
	default:
		return nil, fmt.Errorf("traintest: unknown model %q", name)
	}
	b.Input("onehot", dt, int64(batch), int64(classes))
	b.Node("loss", "Identity", []string{crossEntropy(b, logits)}, []string{"loss"}, nil)
	b.Output("loss")
	return b.Build()
}

// weights converts float64 values of a tensor's elements, whatever its
// dtype, into a tensor of dtype dt.
func convert(t *rt.Tensor, dt rt.DType) *rt.Tensor {
	return rt.FromFloat64(dt, t.Float64s(), t.Shape...)
}

// Result is one run compared with PyTorch.
type Result struct {
	Losses   []float64 // per step
	Want     []float64
	Worst    float64 // largest |got-want|/(Tol·|want|)
	WorstAt  int
	MaxRel   float64 // largest relative error of a loss
	MaxRel10 float64 // over the first 10 steps
	FinalRel float64 // f64: largest relative error of a final weight
	Fail     error
}

// Train runs model name with optimizer opt in dtype dt on dev and compares
// it with the reference. A non-nil override replaces the optimizer (not the
// reference: tests of this test use it).
func Train(ctx context.Context, dev rt.Device, m *Manifest, name, opt string, dt rt.DType, override *engine.Optimizer) (*Result, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	mm, ok := m.Models[name]
	if !ok {
		return nil, fmt.Errorf("traintest: model %q not in the manifest", name)
	}
	oc, ok := m.Optimizers[opt]
	if !ok {
		return nil, fmt.Errorf("traintest: optimizer %q not in the manifest", opt)
	}
	suffix := "f32"
	if dt == rt.F64 {
		suffix = "f64"
	}
	read := func(p ...string) (*rt.Tensor, error) {
		return npy.ReadFile(filepath.Join(append([]string{dir, name}, p...)...))
	}
	w := map[string]*rt.Tensor{}
	for p := range mm.Params {
		t, err := read(p + ".npy")
		if err != nil {
			return nil, err
		}
		w[p] = convert(t, dt)
	}
	x, err := read("x.npy")
	if err != nil {
		return nil, err
	}
	x = convert(x, dt)
	labels, err := read("labels.npy")
	if err != nil {
		return nil, err
	}
	want, err := read(fmt.Sprintf("loss_%s_%s.npy", opt, suffix))
	if err != nil {
		return nil, err
	}
	if want.Len() != mm.Steps || x.Shape[0] != mm.Samples || labels.Len() != mm.Samples || mm.Samples%mm.Batch != 0 {
		return nil, fmt.Errorf("traintest: %s: data does not match the manifest", name)
	}
	mod, err := Build(name, dt, mm.Batch, mm.Classes, w)
	if err != nil {
		return nil, err
	}
	o := engine.Optimizer{Kind: engine.OptimizerKind(oc.Kind), LR: oc.LR, Momentum: oc.Momentum}
	if override != nil {
		o = *override
	}
	tr, err := engine.NewTrainer(mod, dev, engine.TrainOptions{Loss: "loss", Optimizer: &o})
	if err != nil {
		return nil, err
	}
	defer tr.Close()

	res := &Result{Want: want.Float64s()}
	rowBytes := len(x.Data) / mm.Samples
	for k := 0; k < mm.Steps; k++ {
		i := (k * mm.Batch) % mm.Samples
		xb := &rt.Tensor{DType: dt, Shape: append([]int{mm.Batch}, x.Shape[1:]...), Data: x.Data[i*rowBytes : (i+mm.Batch)*rowBytes]}
		oh := make([]float64, mm.Batch*mm.Classes)
		for j := 0; j < mm.Batch; j++ {
			c := int(labels.Float64(i + j))
			if c < 0 || c >= mm.Classes {
				return nil, fmt.Errorf("traintest: label %d out of range", c)
			}
			oh[j*mm.Classes+c] = 1
		}
		r, err := tr.Step(ctx, map[string]*rt.Tensor{"x": xb, "onehot": rt.FromFloat64(dt, oh, mm.Batch, mm.Classes)})
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", k+1, err)
		}
		res.Losses = append(res.Losses, r.Loss)
		wv := res.Want[k]
		rel := math.Abs(r.Loss-wv) / math.Abs(wv)
		if math.IsNaN(rel) {
			rel = math.Inf(1)
		}
		res.MaxRel = max(res.MaxRel, rel)
		if k < 10 {
			res.MaxRel10 = max(res.MaxRel10, rel)
		}
		if q := rel / Tol(dt, k); q > res.Worst {
			res.Worst, res.WorstAt = q, k
		}
		if rel > Tol(dt, k) && res.Fail == nil {
			res.Fail = fmt.Errorf("step %d: loss %.9g, PyTorch %.9g (rel error %.3g, tolerance %.3g)", k+1, r.Loss, wv, rel, Tol(dt, k))
		}
	}
	if dt == rt.F64 {
		got, err := tr.Weights()
		if err != nil {
			return nil, err
		}
		for p := range mm.Params {
			fw, err := read(fmt.Sprintf("final_%s_%s", opt, suffix), p+".npy")
			if err != nil {
				return nil, err
			}
			g := got[p]
			if g == nil || g.Len() != fw.Len() {
				return nil, fmt.Errorf("traintest: trained weight %q missing or misshapen", p)
			}
			for j := 0; j < fw.Len(); j++ {
				e := math.Abs(g.Float64(j)-fw.Float64(j)) / max(math.Abs(fw.Float64(j)), 0.01)
				if math.IsNaN(e) {
					e = math.Inf(1)
				}
				res.FinalRel = max(res.FinalRel, e)
			}
		}
		if res.FinalRel > FinalTolF64 && res.Fail == nil {
			res.Fail = fmt.Errorf("final weights: rel error %.3g, tolerance %g", res.FinalRel, FinalTolF64)
		}
	}
	return res, nil
}

// Run trains each model with each optimizer on dev, in f32 and f64 (f64
// is skipped where the device does not support it), and compares the
// per-step losses (and the f64 final weights) with PyTorch's.
func Run(t *testing.T, dev rt.Device) {
	m, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mlp", "cnn"} {
		for _, opt := range []string{"sgd_momentum", "adam"} {
			for _, dt := range []rt.DType{rt.F32, rt.F64} {
				t.Run(fmt.Sprintf("%s_%s_%s", name, opt, dt), func(t *testing.T) {
					res, err := Train(context.Background(), dev, m, name, opt, dt, nil)
					var ue *rt.UnsupportedError
					if errors.As(err, &ue) {
						t.Skipf("device: %v", err)
					}
					if err != nil {
						t.Fatal(err)
					}
					if res.Fail != nil {
						t.Error(res.Fail)
					}
					t.Logf("%d steps, loss %.4f -> %.4f: max rel error %.3g (first 10 steps %.3g), worst %.3g× tolerance at step %d",
						len(res.Losses), res.Losses[0], res.Losses[len(res.Losses)-1], res.MaxRel, res.MaxRel10, res.Worst, res.WorstAt+1)
					if dt == rt.F64 {
						t.Logf("final weights: max rel error %.3g", res.FinalRel)
					}
				})
			}
		}
	}
}
