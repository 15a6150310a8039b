package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/internal/gomnist"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/internal/traintest"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx/onnxpb"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/train"
	"google.golang.org/protobuf/proto"
)

// fixture is a folder of synthetic training data: 240 samples of 8
// features; y: 3 classes (argmax of a fixed linear map), yr: that map's
// 3 values (regression), yb: their signs as 0/1 (bce), y1: the first
// value alone ([N], regression with one output).
type fixture struct {
	dir string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir()}
	rng := rand.New(rand.NewPCG(3, 4))
	const n, in, k = 240, 8, 3
	w := make([]float64, in*k)
	for i := range w {
		w[i] = rng.NormFloat64()
	}
	x := make([]float64, n*in)
	y := make([]float64, n)
	yr := make([]float64, n*k)
	yb := make([]float64, n*k)
	y1 := make([]float64, n)
	for i := range n {
		for j := range in {
			x[i*in+j] = rng.NormFloat64()
		}
		best := math.Inf(-1)
		for c := range k {
			v := 0.0
			for j := range in {
				v += x[i*in+j] * w[j*k+c]
			}
			v = float64(float32(v))
			yr[i*k+c] = v
			if v > 0 {
				yb[i*k+c] = 1
			}
			if v > best {
				best, y[i] = v, float64(c)
			}
		}
		y1[i] = yr[i*k]
	}
	f.write(t, "x.npy", rt.FromFloat64(rt.F32, x, n, in))
	f.write(t, "y.npy", rt.FromFloat64(rt.I64, y, n))
	f.write(t, "yr.npy", rt.FromFloat64(rt.F32, yr, n, k))
	f.write(t, "yb.npy", rt.FromFloat64(rt.F32, yb, n, k))
	f.write(t, "y1.npy", rt.FromFloat64(rt.F32, y1, n))
	f.write(t, "y_short.npy", rt.FromFloat64(rt.I64, y[:n-1], n-1))
	bad := slices.Clone(y)
	bad[17] = 12
	f.write(t, "y_range.npy", rt.FromFloat64(rt.I64, bad, n))
	bad[17] = -1
	f.write(t, "y_neg.npy", rt.FromFloat64(rt.I64, bad, n))
	return f
}

func (f *fixture) write(t *testing.T, name string, v *rt.Tensor) {
	t.Helper()
	if err := npy.WriteFile(filepath.Join(f.dir, name), v); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) path(name string) string { return filepath.Join(f.dir, name) }

// xy returns the -x and -y flags for targets y.
func (f *fixture) xy(y string) []string {
	return []string{"-x", f.path("x.npy"), "-y", f.path(y)}
}

// readLog parses a -log CSV: the losses, and the step and epoch columns.
func readLog(t *testing.T, path string) (loss []float64, steps, epochs []int, lrs []float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if lines[0] != "step,epoch,loss,lr" {
		t.Fatalf("log header %q", lines[0])
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 4 {
			t.Fatalf("log row %q", l)
		}
		s, _ := strconv.Atoi(f[0])
		e, _ := strconv.Atoi(f[1])
		v, err1 := strconv.ParseFloat(f[2], 64)
		lr, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("log row %q", l)
		}
		steps, epochs, loss, lrs = append(steps, s), append(epochs, e), append(loss, v), append(lrs, lr)
	}
	return loss, steps, epochs, lrs
}

func mustTrain(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runCLI(t, append([]string{"train"}, args...)...)
	if err != nil {
		t.Fatalf("vrun train %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func contains(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// Every loss on the built-in mlp: the model gets the head the loss takes
// (sigmoid for bce, log-softmax for nll), training lowers the loss, and
// the class losses report an accuracy.
func TestTrainLosses(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		loss, y string
		acc     bool
	}{
		{"cross_entropy", "y.npy", true},
		{"nll", "y.npy", true},
		{"mse", "yr.npy", false},
		{"huber", "yr.npy", false},
		{"bce", "yb.npy", true},
		{"mse", "y1.npy", false}, // y [N] against an output [N, 1]
	} {
		t.Run(tc.loss+"/"+tc.y, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log.csv")
			out := mustTrain(t, append(f.xy(tc.y), "mlp", "-loss", tc.loss, "-lr", "0.01", "-epochs", "4", "-batch", "32", "-device", "cpu", "-log", log)...)
			contains(t, out, tc.loss+" loss", "result   validation loss", "epoch    4:")
			if got := strings.Contains(out, "accuracy"); got != tc.acc {
				t.Errorf("accuracy reported: %v, want %v\n%s", got, tc.acc, out)
			}
			loss, steps, epochs, _ := readLog(t, log)
			// 216 training samples (10% held out) in batches of 32: 7 steps an epoch.
			if len(loss) != 28 || steps[27] != 28 || epochs[0] != 1 || epochs[27] != 4 || steps[0] != 1 {
				t.Fatalf("log has %d rows, steps %v, epochs %v", len(loss), steps, epochs)
			}
			first, last := mean(loss[:7]), mean(loss[21:])
			if !(last < 0.7*first) {
				t.Errorf("mean loss of epoch 1 %g, of epoch 4 %g: did not fall", first, last)
			}
		})
	}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// Every optimizer, with PyTorch's default hyperparameters unless given.
func TestTrainOptimizers(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-optim", "sgd", "-lr", "0.1", "-momentum", "0.9"}, "sgd (lr 0.1, momentum 0.9)"},
		{[]string{"-optim", "sgd", "-lr", "0.1", "-weight-decay", "1e-4"}, "sgd (lr 0.1, weight decay 0.0001)"},
		{[]string{"-optim", "adam"}, "adam (lr 0.001)"},
		{[]string{"-optim", "adamw", "-lr", "0.01"}, "adamw (lr 0.01, weight decay 0.01)"},
		{[]string{"-optim", "adamw", "-lr", "0.01", "-weight-decay", "0"}, "adamw (lr 0.01)"},
		{[]string{"-optim", "adagrad"}, "adagrad (lr 0.01)"},
		{[]string{"-optim", "rmsprop", "-momentum", "0.5", "-lr", "0.001"}, "rmsprop (lr 0.001, momentum 0.5)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log.csv")
			out := mustTrain(t, append(append(f.xy("y.npy"), "mlp", "-epochs", "3", "-batch", "24", "-log", log), tc.args...)...)
			contains(t, out, tc.want)
			loss, _, _, lrs := readLog(t, log)
			if n := len(loss); !(mean(loss[n-9:]) < mean(loss[:9])) {
				t.Errorf("loss did not fall: first epoch %g, last %g", mean(loss[:9]), mean(loss[n-9:]))
			}
			if lr, _ := strconv.ParseFloat(strings.TrimRight(strings.Fields(tc.want[strings.Index(tc.want, "lr ")+3:])[0], ",)"), 64); lrs[0] != lr {
				t.Errorf("log lr %g, want %g", lrs[0], lr)
			}
		})
	}
}

// The seed fixes the initial weights, the split and the shuffling: the
// same seed gives the same log; another seed another; -shuffle=false
// feeds the samples in order, which changes the log too.
func TestTrainSeedAndShuffle(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	logOf := func(name string, args ...string) string {
		p := filepath.Join(dir, name)
		mustTrain(t, append(append(f.xy("y.npy"), "mlp", "-epochs", "2", "-log", p), args...)...)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b := logOf("a.csv", "-seed", "5"), logOf("b.csv", "-seed", "5")
	c, d := logOf("c.csv", "-seed", "6"), logOf("d.csv", "-seed", "5", "-shuffle=false")
	e := logOf("e.csv", "-seed", "5", "-shuffle=false")
	if a != b || d != e {
		t.Error("the same seed gave different logs")
	}
	if a == c || a == d {
		t.Error("another seed or -shuffle=false gave the same log")
	}
}

// mlpModel builds testdata/trainrun's MLP (Linear(20, 32) - ReLU -
// Linear(32, 10), PyTorch's initial weights) as an inference model.bin
// of dtype dt, with a dynamic batch.
func mlpModel(t *testing.T, dt rt.DType, path string) {
	t.Helper()
	dir, err := traintest.Dir()
	if err != nil {
		t.Fatal(err)
	}
	b := model.NewBuilder()
	b.Input("x", dt, -1, 20)
	w := func(name string) string {
		v, err := npy.ReadFile(filepath.Join(dir, "mlp", name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		sh := make([]int64, len(v.Shape))
		for i, d := range v.Shape {
			sh[i] = int64(d)
		}
		return b.Weight(name, dt, sh, rt.FromFloat64(dt, v.Float64s(), v.Shape...).Data)
	}
	h := b.Op("Relu", []string{b.Op("Gemm", []string{"x", w("fc1_weight"), w("fc1_bias")}, model.Attrs{"transB": 1})}, nil)
	b.Node("fc2", "Gemm", []string{h, w("fc2_weight"), w("fc2_bias")}, []string{"logits"}, model.Attrs{"transB": 1})
	b.Output("logits")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
}

// vrun train on a model.bin reproduces PyTorch's losses step for step
// (testdata/trainrun, generated by torch.optim: 12 epochs of 16 batches
// in order, f32 and f64, Adam and SGD with momentum), within the
// tolerances of internal/traintest.
func TestTrainMatchesPyTorch(t *testing.T) {
	dir, err := traintest.Dir()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, opt := range []struct{ name, args string }{{"adam", "-optim adam -lr 0.01"}, {"sgd_momentum", "-optim sgd -lr 0.05 -momentum 0.9"}} {
			t.Run(fmt.Sprintf("%s/%s", dt, opt.name), func(t *testing.T) {
				mb := filepath.Join(tmp, dt.String()+".bin")
				mlpModel(t, dt, mb)
				log := filepath.Join(tmp, "log.csv")
				args := append([]string{mb, "-x", filepath.Join(dir, "mlp", "x.npy"), "-y", filepath.Join(dir, "mlp", "labels.npy"),
					"-batch", "32", "-epochs", "12", "-shuffle=false", "-val", "0", "-log", log, "-device", "cpu"}, strings.Fields(opt.args)...)
				out := mustTrain(t, args...)
				contains(t, out, "4 trained tensors", "result   training set loss")
				got, _, _, _ := readLog(t, log)
				want, err := npy.ReadFile(filepath.Join(dir, "mlp", fmt.Sprintf("loss_%s_%s.npy", opt.name, dt)))
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 192 {
					t.Fatalf("%d steps, want 192", len(got))
				}
				worst := 0.0
				for k, g := range got {
					w := want.Float64(k)
					r := math.Abs(g-w) / math.Abs(w)
					if r > traintest.Tol(dt, k) {
						t.Fatalf("step %d: loss %.17g, PyTorch %.17g (relative error %.3g > %.3g)", k+1, g, w, r, traintest.Tol(dt, k))
					}
					worst = max(worst, r)
				}
				t.Logf("worst relative error of a step's loss against PyTorch: %.3g", worst)
			})
		}
	}
}

// tinyONNX writes an ONNX model: x [batch, 8] -> Gemm(fc1) -> Relu ->
// Expand to the shape of the float initializer "shape_only" (which only
// feeds a Shape: not trained) -> Gemm(fc2) -> logits [batch, 3].
func tinyONNX(t *testing.T, path string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	f32 := func(name string, dims ...int64) *onnxpb.TensorProto {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.3)
		}
		return &onnxpb.TensorProto{Name: name, DataType: int32(onnxpb.TensorProto_FLOAT), Dims: dims, FloatData: v}
	}
	vi := func(name string, dims ...any) *onnxpb.ValueInfoProto {
		sh := &onnxpb.TensorShapeProto{}
		for _, d := range dims {
			dim := &onnxpb.TensorShapeProto_Dimension{}
			switch d := d.(type) {
			case int:
				dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}
			case string:
				dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}
			}
			sh.Dim = append(sh.Dim, dim)
		}
		return &onnxpb.ValueInfoProto{Name: name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: int32(onnxpb.TensorProto_FLOAT), Shape: sh}}}}
	}
	transB := &onnxpb.AttributeProto{Name: "transB", Type: onnxpb.AttributeProto_INT, I: 1}
	g := &onnxpb.GraphProto{
		Name: "tiny",
		Node: []*onnxpb.NodeProto{
			{OpType: "Gemm", Name: "fc1", Input: []string{"x", "fc1.weight", "fc1.bias"}, Output: []string{"h"}, Attribute: []*onnxpb.AttributeProto{transB}},
			{OpType: "Relu", Name: "relu", Input: []string{"h"}, Output: []string{"r"}},
			{OpType: "Shape", Name: "shape", Input: []string{"shape_only"}, Output: []string{"s"}},
			{OpType: "Expand", Name: "expand", Input: []string{"r", "s"}, Output: []string{"e"}},
			{OpType: "Gemm", Name: "fc2", Input: []string{"e", "fc2.weight", "fc2.bias"}, Output: []string{"logits"}, Attribute: []*onnxpb.AttributeProto{transB}},
		},
		Initializer: []*onnxpb.TensorProto{f32("fc1.weight", 16, 8), f32("fc1.bias", 16), f32("fc2.weight", 3, 16), f32("fc2.bias", 3), f32("shape_only", 1, 16)},
		Input:       []*onnxpb.ValueInfoProto{vi("x", "batch", 8)},
		Output:      []*onnxpb.ValueInfoProto{vi("logits", "batch", 3)},
	}
	m := &onnxpb.ModelProto{IrVersion: 8, ProducerName: "vrun test", Graph: g,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: "", Version: 17}}}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// An ONNX model trains; a float initializer that only feeds a shape is
// not trained; -freeze keeps a weight at its value; the output is a
// model.bin that vrun runs, and a PNG of the curves lies next to it.
func TestTrainONNX(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.onnx")
	tinyONNX(t, src)
	out := filepath.Join(dir, "tiny.bin")
	o := mustTrain(t, append(f.xy("y.npy"), src, "-epochs", "3", "-lr", "0.01", "-freeze", "fc1.bias", "-o", out, "-profile")...)
	contains(t, o, "tiny.onnx  (3 trained tensors, 179 parameters)", "wrote    "+out+", "+filepath.Join(dir, "tiny.png"),
		"profile  last step:", "fc1.grad")
	png, err := os.ReadFile(filepath.Join(dir, "tiny.png"))
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("no PNG next to the model: %v", err)
	}
	before, err := loadWeights(src)
	if err != nil {
		t.Fatal(err)
	}
	after, err := loadWeights(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, changed := range map[string]bool{"fc1.weight": true, "fc2.bias": true, "fc1.bias": false, "shape_only": false} {
		if got := string(before[name]) != string(after[name]); got != changed {
			t.Errorf("%s changed: %v, want %v", name, got, changed)
		}
	}
	// The trained model runs in vrun.
	r, err := runCLI(t, out, "-i", "x="+f.path("x.npy"))
	if err != nil {
		t.Fatal(err)
	}
	contains(t, r, "output   logits")
	files, _ := os.ReadDir(dir)
	if len(files) != 3 {
		t.Errorf("the output folder holds %d files, want tiny.onnx, tiny.bin, tiny.png", len(files))
	}
	// -o OUT.onnx exports ONNX, which vrun imports and runs.
	onnxOut := filepath.Join(t.TempDir(), "trained.onnx")
	mustTrain(t, append(f.xy("y.npy"), src, "-epochs", "1", "-o", onnxOut)...)
	r, err = runCLI(t, onnxOut, "-i", "x="+f.path("x.npy"))
	if err != nil {
		t.Fatal(err)
	}
	contains(t, r, "output   logits")
}

func loadWeights(path string) (map[string][]byte, error) {
	m, err := vrun.LoadGraph(path)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	w := map[string][]byte{}
	for _, t := range m.Tensors {
		if t.Role == model.Weight {
			w[t.Name] = slices.Clone(t.Data)
		}
	}
	return w, nil
}

// A model with BatchNormalization (testdata/e2e/cnn.bin, softmax output)
// trains with mse against one-hot targets: the running statistics are
// updated (not trained), and -freeze takes a name prefix.
func TestTrainBatchNormModel(t *testing.T) {
	src := filepath.Join(e2e.Dir(), "cnn.bin")
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 40
	x := make([]float64, n*3*15*13)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	ref, err := npy.ReadFile(filepath.Join(e2e.Dir(), "cnn", "y.npy"))
	if err != nil {
		t.Fatal(err)
	}
	classes := ref.Shape[1]
	y := make([]float64, n*classes)
	for i := range n {
		y[i*classes+i%classes] = 1
	}
	npy.WriteFile(filepath.Join(dir, "x.npy"), rt.FromFloat64(rt.F32, x, n, 3, 15, 13))
	npy.WriteFile(filepath.Join(dir, "y.npy"), rt.FromFloat64(rt.F32, y, n, classes))
	out := filepath.Join(dir, "cnn.bin")
	o := mustTrain(t, src, "-x", filepath.Join(dir, "x.npy"), "-y", filepath.Join(dir, "y.npy"), "-loss", "mse", "-batch", "8", "-epochs", "2", "-o", out, "-freeze", "c1w,c1b")
	contains(t, o, "mse loss")
	before, _ := loadWeights(src)
	after, err := loadWeights(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, changed := range map[string]bool{"bn_m": true, "bn_v": true, "bn_s": true, "c2w": true, "c1w": false, "c1b": false} {
		if got := string(before[name]) != string(after[name]); got != changed {
			t.Errorf("%s changed: %v, want %v", name, got, changed)
		}
	}
}

// A PyTorch-exported ONNX LSTM classifier with int64 token inputs and a
// fixed batch of 2 trains with cross_entropy; another batch size is a
// clear error.
func TestTrainTokenModel(t *testing.T) {
	src, err := repo.Path("testdata/models/lstm.onnx")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := npy.ReadFile(strings.TrimSuffix(src, ".onnx") + ".torch.npy")
	if err != nil {
		t.Fatal(err)
	}
	classes := ref.Shape[1]
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(2, 2))
	const n = 16
	x := make([]float64, n*16)
	y := make([]float64, n)
	for i := range x {
		x[i] = float64(rng.IntN(50))
	}
	for i := range y {
		y[i] = float64(i % classes)
	}
	npy.WriteFile(filepath.Join(dir, "x.npy"), rt.FromFloat64(rt.I64, x, n, 16))
	npy.WriteFile(filepath.Join(dir, "y.npy"), rt.FromFloat64(rt.I64, y, n))
	args := []string{src, "-x", filepath.Join(dir, "x.npy"), "-y", filepath.Join(dir, "y.npy"), "-epochs", "1", "-val", "0.25"}
	o := mustTrain(t, append(args, "-batch", "2")...)
	contains(t, o, "result   validation loss", "accuracy")
	_, err = runCLI(t, append([]string{"train"}, args...)...)
	if err == nil || !strings.Contains(err.Error(), "batches of exactly 2 samples") {
		t.Errorf("batch 64 on a fixed-batch model: %v", err)
	}
}

// -data mnist: trains on the bundled real MNIST (a subset here), and
// -data mnist:DIR on the GoMNIST folder; lenet reaches a floor.
func TestTrainMNIST(t *testing.T) {
	dir, err := gomnist.Dir()
	if err != nil {
		t.Skip(err)
	}
	o := mustTrain(t, "lenet", "-data", "mnist:", "-limit", "1500", "-epochs", "2", "-lr", "0.003", "-batch", "50")
	contains(t, o, "1500 training samples u8[1 28 28], 1500 for validation (the test set)")
	acc := resultAccuracy(t, o)
	if acc < 75 {
		t.Errorf("lenet on 1500 MNIST images, 2 epochs: %.2f%% test accuracy, want >= 75%%", acc)
	}
	o = mustTrain(t, "mlp", "-data", "mnist:"+dir, "-limit", "1000", "-epochs", "1", "-val", "0.2")
	contains(t, o, "800 training samples", "200 for validation (20% of the training set)")
}

func resultAccuracy(t *testing.T, out string) float64 {
	t.Helper()
	_, after, ok := strings.Cut(out, "accuracy ")
	if !ok {
		t.Fatalf("no accuracy in:\n%s", out)
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.Fields(after)[0], "%"), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// -data cifar10:DIR reads the binary batches (synthetic here, in the
// real format) and trains cifar-cnn.
func TestTrainCIFAR10(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 9))
	for _, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
		var b []byte
		for range 20 {
			c := rng.IntN(10)
			b = append(b, byte(c))
			for k := range 3072 {
				b = append(b, byte(c*20+k%7+rng.IntN(30)))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := mustTrain(t, "cifar-cnn", "-data", "cifar10:"+dir, "-epochs", "1", "-batch", "25")
	contains(t, o, "100 training samples u8[3 32 32], 20 for validation (the test set)", "accuracy")
}

// The vulkan backend (lavapipe in CI) trains too.
func TestTrainVulkan(t *testing.T) {
	f := newFixture(t)
	log := filepath.Join(t.TempDir(), "log.csv")
	out, err := runCLI(t, append([]string{"train"}, append(f.xy("y.npy"), "mlp", "-device", "vulkan", "-epochs", "2", "-log", log)...)...)
	if err != nil && strings.Contains(err.Error(), "unavailable") || err != nil && strings.Contains(err.Error(), "no devices") {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	contains(t, out, "device   vulkan:")
	// The CPU's log agrees.
	cpuLog := filepath.Join(t.TempDir(), "cpu.csv")
	mustTrain(t, append(f.xy("y.npy"), "mlp", "-device", "cpu", "-epochs", "2", "-log", cpuLog)...)
	a, _, _, _ := readLog(t, log)
	b, _, _, _ := readLog(t, cpuLog)
	for k := range a {
		if math.Abs(a[k]-b[k]) > 1e-4*math.Abs(b[k]) {
			t.Fatalf("step %d: vulkan loss %g, cpu %g", k+1, a[k], b[k])
		}
	}
}

// Resuming from the checkpoint written at an epoch's end gives the log
// and the model of a run that was never interrupted, byte for byte on
// the CPU; the log continues in place. (train_signal_test.go resumes
// from the middle of an epoch, after Ctrl-C.)
func TestTrainResume(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	base := append(f.xy("y.npy"), "mlp", "-batch", "16", "-lr", "0.01", "-device", "cpu")
	full, part := filepath.Join(dir, "full"), filepath.Join(dir, "part")
	os.Mkdir(full, 0o755)
	os.Mkdir(part, 0o755)
	mustTrain(t, append(base, "-epochs", "3", "-log", full+"/log.csv", "-o", full+"/m.bin")...)
	ck := filepath.Join(part, "ckpt")
	mustTrain(t, append(base, "-epochs", "1", "-log", part+"/log.csv", "-checkpoint", ck)...)
	o := mustTrain(t, append(base, "-epochs", "3", "-log", part+"/log.csv", "-o", part+"/m.bin", "-resume", ck)...)
	contains(t, o, "resume   "+ck+": step 14, epoch 2", "epoch    1:", "epoch    3:")
	sameFiles(t, full, part, "log.csv", "m.bin", "m.png")
}

// sameFiles fails unless the named files of two folders are identical.
func sameFiles(t *testing.T, a, b string, names ...string) {
	t.Helper()
	for _, name := range names {
		x, _ := os.ReadFile(filepath.Join(a, name))
		y, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(x) == 0 || string(x) != string(y) {
			t.Errorf("%s differs from the uninterrupted run's", name)
		}
	}
}

// Bad input: each a clear error, with no file left behind; usage errors
// are told apart (exit status 2).
func TestTrainErrors(t *testing.T) {
	f := newFixture(t)
	corrupt := filepath.Join(f.dir, "corrupt")
	os.Mkdir(corrupt, 0o755)
	os.WriteFile(filepath.Join(corrupt, train.CheckpointFile), []byte("VRUNCKPT\x01\x00\x00\x00garbage"), 0o644)
	aFile := f.path("x.npy")
	for _, tc := range []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"no model", []string{"-data", "mnist:"}, true, "train needs one MODEL"},
		{"two models", []string{"mlp", "lenet", "-data", "mnist:"}, true, "train needs one MODEL"},
		{"no data", []string{"mlp"}, true, "no data"},
		{"x without y", []string{"mlp", "-x", aFile}, true, "-x and -y go together"},
		{"x and data", append(f.xy("y.npy"), "mlp", "-data", "mnist:"), true, "either -x and -y or -data"},
		{"loss", append(f.xy("y.npy"), "mlp", "-loss", "hinge"), true, `-loss "hinge"`},
		{"optim", append(f.xy("y.npy"), "mlp", "-optim", "lbfgs"), true, `-optim "lbfgs"`},
		{"momentum", append(f.xy("y.npy"), "mlp", "-momentum", "0.9"), true, "-momentum applies to sgd and rmsprop"},
		{"batch", append(f.xy("y.npy"), "mlp", "-batch", "0"), true, "-batch 0"},
		{"val", append(f.xy("y.npy"), "mlp", "-val", "1.5"), true, "-val 1.5"},
		{"flag", []string{"mlp", "-nosuch"}, true, "flag provided but not defined"},
		{"data kind", []string{"mlp", "-data", "imagenet:/x"}, true, `-data "imagenet:/x"`},
		{"x and y lengths", append(f.xy("y_short.npy"), "mlp"), false, "x has 240 samples but y has 239"},
		{"label range", append(f.xy("y_range.npy"), "tiny.onnx"), false, "label 12 of sample 17 is out of range [0, 3)"},
		{"negative label", append(f.xy("y_neg.npy"), "mlp"), false, "label -1 of sample 17 is out of range"},
		{"regression targets", append(f.xy("yr.npy"), "mlp", "-loss", "cross_entropy"), false, "cross_entropy takes int64 class indices"},
		{"nan", append(f.xy("yr.npy"), "mlp", "-loss", "mse", "-optim", "sgd", "-lr", "1e30"), false, "the loss is"},
		{"nan detect", append(f.xy("yr.npy"), "mlp", "-loss", "mse", "-optim", "sgd", "-lr", "1e30", "-detect-nan"), false, "the first op that produced a NaN or an infinity is node"},
		{"out folder", append(f.xy("y.npy"), "mlp", "-o", filepath.Join(f.dir, "missing", "m.bin")), false, "does not exist"},
		{"out folder is a file", append(f.xy("y.npy"), "mlp", "-o", filepath.Join(aFile, "m.bin")), false, "is not a folder"},
		{"log folder", append(f.xy("y.npy"), "mlp", "-log", filepath.Join(f.dir, "missing", "l.csv")), false, "does not exist"},
		{"corrupt checkpoint", append(f.xy("y.npy"), "mlp", "-resume", corrupt), false, "corrupt checkpoint"},
		{"missing model", append(f.xy("y.npy"), filepath.Join(f.dir, "none.onnx")), false, "none.onnx"},
		{"freeze", append(f.xy("y.npy"), "mlp", "-freeze", "nosuch"), false, `-freeze "nosuch" matches no float weight`},
		{"lenet on vectors", append(f.xy("y.npy"), "lenet"), false, "lenet takes images [C, H, W]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			tinyONNX(t, filepath.Join(work, "tiny.onnx"))
			wd, _ := os.Getwd()
			os.Chdir(work)
			defer os.Chdir(wd)
			args := append([]string{"train"}, tc.args...)
			// Outputs go to the work folder unless the case names its own.
			if !slices.Contains(tc.args, "-o") {
				args = append(args, "-o", filepath.Join(work, "m.bin"))
			}
			if !slices.Contains(tc.args, "-log") {
				args = append(args, "-log", filepath.Join(work, "log.csv"))
			}
			out, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q\n%s", err, tc.want, out)
			}
			var ue usageError
			if errors.As(err, &ue) != tc.usage {
				t.Errorf("usage error: %v, want %v", !tc.usage, tc.usage)
			}
			files, _ := os.ReadDir(work)
			for _, e := range files {
				if e.Name() != "tiny.onnx" {
					t.Errorf("left %s behind", e.Name())
				}
			}
		})
	}
}

// A device list trains data-parallel: -device cpu,opencl:0, cpu,vulkan:0,
// three logical CPU devices, two VkDevices on one Vulkan device and two
// cl_contexts on one OpenCL device log the single-device run's losses.
func TestTrainDeviceList(t *testing.T) {
	t.Setenv(rt.LogicalDevicesEnv, "cpu=3,vulkan=2,opencl=2")
	f := newFixture(t)
	cpuLog := filepath.Join(t.TempDir(), "cpu.csv")
	mustTrain(t, append(f.xy("y.npy"), "mlp", "-device", "cpu", "-epochs", "2", "-batch", "25", "-log", cpuLog)...)
	want, _, _, _ := readLog(t, cpuLog)
	for _, list := range []string{"cpu,opencl:0", "cpu,vulkan:0", "cpu:0,cpu:1,cpu:2", "vulkan:0,vulkan:1", "opencl:0,opencl:1"} {
		t.Run(list, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log.csv")
			out, err := runCLI(t, append([]string{"train"}, append(f.xy("y.npy"), "mlp", "-device", list, "-epochs", "2", "-batch", "25", "-log", log)...)...)
			if err != nil && (strings.Contains(err.Error(), "unavailable") || strings.Contains(err.Error(), "no devices")) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			contains(t, out, "(data-parallel, share 2 of ")
			got, _, _, _ := readLog(t, log)
			if len(got) != len(want) {
				t.Fatalf("%d steps, want %d", len(got), len(want))
			}
			for k := range want {
				if math.Abs(got[k]-want[k]) > 1e-4*math.Abs(want[k]) {
					t.Fatalf("step %d: loss %g on %s, %g on cpu", k+1, got[k], list, want[k])
				}
			}
		})
	}
}
