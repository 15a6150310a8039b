package engine_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// dropoutModel is a small classifier with BatchNormalization (running
// statistics) and Dropout (random masks): x [8, 6], one-hot t [8, 3].
func dropoutModel(t *testing.T, dt rt.DType) (*model.Model, []string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	b := model.NewBuilder()
	b.Input("x", dt, 8, 6)
	b.Input("t", dt, 8, 3)
	weight := func(name string, shape []int, v []float64) string {
		return b.Weight(name, dt, shape64(shape...), rt.FromFloat64(dt, v, len(v)).Data)
	}
	w := func(name string, shape ...int) string {
		return weight(name, shape, f64(rng, int(rt.NumElements(shape))))
	}
	h := b.Op("Gemm", []string{"x", w("w1", 10, 6), w("b1", 10)}, model.Attrs{"transB": 1})
	h = b.Op("BatchNormalization", []string{h, w("g", 10), w("beta", 10),
		weight("rm", []int{10}, make([]float64, 10)), weight("rv", []int{10}, slicesRepeat(1.0, 10))}, nil)
	h = b.Op("Relu", []string{h}, nil)
	h = b.Op("Dropout", []string{h, weight("ratio", []int{}, []float64{0.3})}, nil)
	ls := b.Op("LogSoftmax", []string{b.Op("MatMul", []string{h, w("w2", 10, 3)}, nil)}, model.Attrs{"axis": 1})
	b.Node("loss", "Neg", []string{b.Op("ReduceMean", []string{b.Op("Mul", []string{ls, "t"}, nil)}, model.Attrs{"keepdims": 0})}, []string{"loss"}, nil)
	b.Output("loss")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m, []string{"w1", "b1", "g", "beta", "w2"}
}

func slicesRepeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// dropoutBatch is the inputs of step i.
func dropoutBatch(dt rt.DType, i int) map[string]*rt.Tensor {
	rng := rand.New(rand.NewPCG(uint64(i), 99))
	tv := make([]float64, 24)
	for r := range 8 {
		tv[r*3+rng.IntN(3)] = 1
	}
	return map[string]*rt.Tensor{"x": rt.FromFloat64(dt, f64(rng, 48), 8, 6), "t": rt.FromFloat64(dt, tv, 8, 3)}
}

// TestTrainStateAdamMoments checks the optimizer state State reads after
// one Adam step against the update rule: exp_avg = (1-β1)·g and
// exp_avg_sq = (1-β2)·g², with g the gradients of that step.
func TestTrainStateAdamMoments(t *testing.T) {
	m, params := dropoutModel(t, rt.F64)
	dev := cpu.NewDevice()
	defer dev.Close()
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Params: params, Seed: 1,
		Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	st, err := tr.State()
	if err != nil {
		t.Fatal(err)
	}
	if st.Steps != 0 || st.LR != 0.01 || len(st.Optim) != 2 || strings.Join(st.Params, ",") != strings.Join(params, ",") {
		t.Fatalf("initial state %+v", st)
	}
	for _, v := range st.Optim {
		for _, x := range v.Float64s() {
			if x != 0 {
				t.Fatal("initial moments are not zero")
			}
		}
	}
	if _, err := tr.Step(context.Background(), dropoutBatch(rt.F64, 0)); err != nil {
		t.Fatal(err)
	}
	grads, _ := tr.Grads()
	if st, err = tr.State(); err != nil {
		t.Fatal(err)
	}
	var g []float64
	for _, p := range params {
		g = append(g, grads[p].Float64s()...)
	}
	m1, m2 := st.Optim["exp_avg"].Float64s(), st.Optim["exp_avg_sq"].Float64s()
	if st.Steps != 1 || len(m1) != len(g) || len(m2) != len(g) {
		t.Fatalf("steps %d, %d and %d moments for %d gradients", st.Steps, len(m1), len(m2), len(g))
	}
	for i := range g {
		if w := 0.1 * g[i]; math.Abs(m1[i]-w) > 1e-15*math.Abs(w) {
			t.Fatalf("exp_avg[%d] = %v, want %v", i, m1[i], w)
		}
		if w := 0.001 * g[i] * g[i]; math.Abs(m2[i]-w) > 1e-14*math.Abs(w) {
			t.Fatalf("exp_avg_sq[%d] = %v, want %v", i, m2[i], w)
		}
	}
}

// TestTrainStateResume checks that Weights + State taken after k steps,
// restored into a new trainer, continue bit for bit as the uninterrupted
// trainer does (Dropout masks, Adam moments and step count, BatchNorm
// running statistics), for each optimizer; and that without SetState
// they do not.
func TestTrainStateResume(t *testing.T) {
	ctx := context.Background()
	dev := cpu.NewDevice()
	defer dev.Close()
	for _, opt := range []engine.Optimizer{
		{Kind: engine.Adam, LR: 0.01},
		{Kind: engine.AdamW, LR: 0.01, WeightDecay: 0.1},
		{Kind: engine.SGD, LR: 0.1, Momentum: 0.9, Nesterov: true},
		{Kind: engine.AdaGrad, LR: 0.1, LRDecay: 0.01, InitAccum: 0.1},
		{Kind: engine.RMSProp, LR: 0.01, Momentum: 0.5, Centered: true},
	} {
		for _, dt := range []rt.DType{rt.F32, rt.F64} {
			t.Run(string(opt.Kind)+"_"+dt.String(), func(t *testing.T) {
				m, params := dropoutModel(t, dt)
				newTrainer := func() *engine.Trainer {
					o := opt
					tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Params: params, Seed: 7, Optimizer: &o})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { tr.Close() })
					return tr
				}
				const n, k = 8, 3
				straight := newTrainer()
				var want []float64
				for i := range n {
					if i == 5 {
						straight.SetLR(opt.LR / 2) // a schedule step
					}
					r, err := straight.Step(ctx, dropoutBatch(dt, i))
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, r.Loss)
				}
				first := newTrainer()
				for i := range k {
					if _, err := first.Step(ctx, dropoutBatch(dt, i)); err != nil {
						t.Fatal(err)
					}
				}
				w, err := first.Weights()
				if err != nil {
					t.Fatal(err)
				}
				st, err := first.State()
				if err != nil {
					t.Fatal(err)
				}
				resume := func(withState bool) []float64 {
					tr := newTrainer()
					if err := tr.SetWeights(w); err != nil {
						t.Fatal(err)
					}
					if withState {
						if err := tr.SetState(st); err != nil {
							t.Fatal(err)
						}
					}
					var got []float64
					for i := k; i < n; i++ {
						if i == 5 {
							tr.SetLR(opt.LR / 2)
						}
						r, err := tr.Step(ctx, dropoutBatch(dt, i))
						if err != nil {
							t.Fatal(err)
						}
						got = append(got, r.Loss)
					}
					if withState {
						a, _ := tr.Weights()
						b, _ := straight.Weights()
						for name, v := range b {
							if !bytes.Equal(a[name].Data, v.Data) {
								t.Errorf("weight %s differs after resuming", name)
							}
						}
						sa, _ := tr.State()
						sb, _ := straight.State()
						for name, v := range sb.Optim {
							if !bytes.Equal(sa.Optim[name].Data, v.Data) {
								t.Errorf("optimizer state %s differs after resuming", name)
							}
						}
						if sa.Steps != n || !bytes.Equal(sa.RNG, sb.RNG) {
							t.Errorf("steps %d (want %d) or RNG state differ", sa.Steps, n)
						}
					}
					return got
				}
				got := resume(true)
				for i := range got {
					if math.Float64bits(got[i]) != math.Float64bits(want[k+i]) {
						t.Fatalf("step %d: loss %v after resuming, %v uninterrupted", k+i+1, got[i], want[k+i])
					}
				}
				bare := resume(false)
				same := true
				for i := range bare {
					same = same && bare[i] == want[k+i]
				}
				if same {
					t.Error("resuming without SetState gives the same losses: the test cannot see the state")
				}
			})
		}
	}
}

func TestTrainStateErrors(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	m, params := dropoutModel(t, rt.F32)
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Params: params, Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	good, err := tr.State()
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(s *engine.TrainState)) *engine.TrainState {
		s := *good
		s.Optim = map[string]*rt.Tensor{}
		for k, v := range good.Optim {
			s.Optim[k] = v
		}
		s.Params = append([]string{}, good.Params...)
		f(&s)
		return &s
	}
	for _, tc := range []struct {
		name string
		st   *engine.TrainState
		want string
	}{
		{"nil", nil, "nil state"},
		{"params", mod(func(s *engine.TrainState) { s.Params = s.Params[1:] }), "the state is for parameters"},
		{"missing buffer", mod(func(s *engine.TrainState) { delete(s.Optim, "exp_avg") }), "optimizer buffers"},
		{"renamed buffer", mod(func(s *engine.TrainState) { s.Optim["momentum"] = s.Optim["exp_avg"]; delete(s.Optim, "exp_avg") }), `"exp_avg" missing`},
		{"dtype", mod(func(s *engine.TrainState) {
			s.Optim["exp_avg"] = rt.FromFloat64(rt.F64, make([]float64, s.Optim["exp_avg"].Len()), s.Optim["exp_avg"].Len())
		}), "is f64"},
		{"rng", mod(func(s *engine.TrainState) { s.RNG = []byte("junk") }), "Dropout generator"},
		{"steps", mod(func(s *engine.TrainState) { s.Steps = -1 }), "-1 steps"},
	} {
		if err := tr.SetState(tc.st); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := tr.SetState(good); err != nil {
		t.Fatalf("the trainer's own state: %v", err)
	}
}
