package nn_test

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/vrun-go/vrun/nn"
	"github.com/vrun-go/vrun/rt"
)

// initLayers builds, on g, the layers of testdata/nn/init.json (written
// by gen.py from torch.nn.init's own fan and gain functions).
func initLayers(g *nn.Graph) {
	x := g.Input("x", 2, 300)
	(&nn.Linear{In: 300, Out: 200, Name: "lin"}).Forward(g, x)
	(&nn.Conv2D{In: 6, Out: 12, Kernel: [2]int{3, 5}, Groups: 3, Name: "conv"}).Forward(g, g.Input("img", 1, 6, 8, 8))
	(&nn.Embedding{Num: 1000, Dim: 20, Name: "emb"}).Forward(g, g.InputOf("idx", rt.I64, 3))
	seq := g.Input("seq", 5, 2, 30)
	lstm := nn.NewLSTM(30, 40)
	lstm.Name, lstm.Layers, lstm.Bidirectional = "lstm", 2, true
	lstm.Forward(g, seq)
	gru := nn.NewGRU(30, 40)
	gru.Name = "gru"
	gru.Forward(g, seq)
	(&nn.MultiHeadAttention{Embed: 64, Heads: 4, Name: "attn"}).Forward(g, g.Input("tok", 5, 2, 64))
	(&nn.LayerNorm{Shape: []int{10}, Name: "ln"}).Forward(g, g.Input("f", 3, 10))
	(&nn.BatchNorm{Features: 7, Name: "bn"}).Forward(g, g.Input("bnx", 2, 7, 3, 3))
}

type initSpec struct {
	Kind  string  `json:"kind"`
	Bound float64 `json:"bound"`
	Std   float64 `json:"std"`
	Value float64 `json:"value"`
	Shape []int   `json:"shape"`
}

// TestInitStatistics checks every default initialisation against
// PyTorch's: the distribution's support, mean and standard deviation
// (uniform U(-b, b): std b/√3; normal: std given), within a few standard
// errors of the sample.
func TestInitStatistics(t *testing.T) {
	raw, err := os.ReadFile("../testdata/nn/init.json")
	if err != nil {
		t.Fatal(err)
	}
	var specs map[string]initSpec
	if err := json.Unmarshal(raw, &specs); err != nil {
		t.Fatal(err)
	}
	g := nn.NewGraph(rt.F64, 12345)
	initLayers(g)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	names := append(g.Params(), g.Buffers()...)
	if len(names) != len(specs) {
		t.Errorf("%d parameters and buffers, PyTorch has %d", len(names), len(specs))
	}
	for _, name := range names {
		s, ok := specs[name]
		if !ok {
			t.Errorf("%s: not a PyTorch parameter", name)
			continue
		}
		p, err := g.ParamValue(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.Shape, s.Shape) {
			t.Errorf("%s: shape %v, PyTorch %v", name, p.Shape, s.Shape)
		}
		v := p.Float64s()
		n := float64(len(v))
		var sum, sq, lo, hi float64 = 0, 0, math.Inf(1), math.Inf(-1)
		for _, x := range v {
			sum += x
			lo, hi = min(lo, x), max(hi, x)
		}
		mean := sum / n
		for _, x := range v {
			sq += (x - mean) * (x - mean)
		}
		std := math.Sqrt(sq / n)
		switch s.Kind {
		case "constant":
			if lo != s.Value || hi != s.Value {
				t.Errorf("%s: values in [%g, %g], want all %g", name, lo, hi, s.Value)
			}
		case "uniform":
			b := s.Bound
			want := b / math.Sqrt(3)
			if lo < -b || hi > b {
				t.Errorf("%s: values in [%g, %g], outside U(-%g, %g)", name, lo, hi, b, b)
			}
			// The extremes of n uniform draws lie within ~b·k/n of the bounds.
			if lo > -b*(1-20/n) || hi < b*(1-20/n) {
				t.Errorf("%s: values in [%g, %g] do not span U(-%g, %g)", name, lo, hi, b, b)
			}
			if math.Abs(mean) > 5*want/math.Sqrt(n) {
				t.Errorf("%s: mean %g, want 0 ± %g", name, mean, 5*want/math.Sqrt(n))
			}
			// The sample std of a uniform has relative standard error ≈ 0.45/√n.
			if math.Abs(std/want-1) > 5*0.45/math.Sqrt(n) {
				t.Errorf("%s: std %g, want %g (b/√3)", name, std, want)
			}
		case "normal":
			if math.Abs(mean) > 5*s.Std/math.Sqrt(n) {
				t.Errorf("%s: mean %g, want 0", name, mean)
			}
			if math.Abs(std/s.Std-1) > 5*0.71/math.Sqrt(n) {
				t.Errorf("%s: std %g, want %g", name, std, s.Std)
			}
		default:
			t.Errorf("%s: unknown kind %q", name, s.Kind)
		}
	}
}

// TestInitFormulas checks the exported initialisers against the
// formulas of torch.nn.init, written out here.
func TestInitFormulas(t *testing.T) {
	g := nn.NewGraph(rt.F64, 3)
	cases := []struct {
		name  string
		init  nn.Init
		bound float64
	}{
		// kaiming_uniform_(a): gain √(2/(1+a²)), bound gain·√(3/fan_in).
		{"kaiming_a0", nn.KaimingUniform(50, 0), math.Sqrt(2) * math.Sqrt(3.0/50)},
		{"kaiming_a_sqrt5", nn.KaimingUniform(50, math.Sqrt(5)), 1 / math.Sqrt(50)},
		// xavier_uniform_: gain·√(6/(fan_in+fan_out)).
		{"xavier", nn.XavierUniform(30, 70, 2), 2 * math.Sqrt(6.0/100)},
	}
	for _, c := range cases {
		v, err := g.ParamValue(g.Param(c.name, []int{4000}, c.init).Name())
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range v.Float64s() {
			lo, hi = min(lo, x), max(hi, x)
		}
		if lo < -c.bound || hi > c.bound || hi < 0.99*c.bound || lo > -0.99*c.bound {
			t.Errorf("%s: values in [%g, %g], want U(-%g, %g)", c.name, lo, hi, c.bound, c.bound)
		}
	}
}

// TestInitSeeded checks that initial values depend on the seed and the
// parameter's name only: the same seed gives the same values, another
// seed other values, and adding a layer before another does not change
// the other's values.
func TestInitSeeded(t *testing.T) {
	values := func(seed uint64, extra bool) map[string][]float64 {
		g := nn.NewGraph(rt.F32, seed)
		if extra {
			(&nn.Linear{In: 3, Out: 3, Name: "first"}).Forward(g, g.Input("z", 1, 3))
		}
		initLayers(g)
		out := map[string][]float64{}
		for _, name := range g.Params() {
			v, err := g.ParamValue(name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = v.Float64s()
		}
		return out
	}
	a, b, c, d := values(7, false), values(7, false), values(8, false), values(7, true)
	for name, va := range a {
		if !slices.Equal(va, b[name]) {
			t.Errorf("%s: same seed, different values", name)
		}
		if !slices.Equal(va, d[name]) {
			t.Errorf("%s: values changed when another layer was added first", name)
		}
		random := false
		for i := range va {
			if va[i] != va[0] {
				random = true
			}
		}
		if random && slices.Equal(va, c[name]) {
			t.Errorf("%s: seeds 7 and 8 give the same values", name)
		}
	}
}
