package optimref

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/optimconf"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Config is one optimizer case of testdata/optim/cases.json, in
// engine.Optimizer's terms.
type Config struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	optimconf.Hyper
	InitAccum float64 `json:"initial_accumulator_value"`
	ClipNorm  float64 `json:"clip_norm"`
	// Schedule names an entry of Manifest.ScheduleConfigs that set the
	// learning rate of each step in the reference run ("" for none).
	Schedule string `json:"schedule"`
}

// Optimizer returns the engine optimizer of c.
func (c Config) Optimizer() engine.Optimizer {
	return engine.Optimizer{Kind: engine.OptimizerKind(c.Kind), LR: c.LR, Momentum: c.Momentum,
		Dampening: c.Dampening, Nesterov: c.Nesterov, WeightDecay: c.WeightDecay, Beta1: c.Beta1,
		Beta2: c.Beta2, Eps: c.Eps, Alpha: c.Alpha, Centered: c.Centered, LRDecay: c.LRDecay,
		InitAccum: c.InitAccum, ClipNorm: c.ClipNorm}
}

// Schedule is a learning-rate schedule configuration of cases.json, with
// torch.optim.lr_scheduler's parameter names.
type Schedule struct {
	Name          string  `json:"name"`
	Kind          string  `json:"kind"` // step, multistep, exponential, warmup_cosine, onecycle, plateau
	LR            float64 `json:"lr"`   // base (OneCycle: maximum) learning rate
	StepSize      int     `json:"step_size"`
	Gamma         float64 `json:"gamma"`
	Milestones    []int   `json:"milestones"`
	Warmup        int     `json:"warmup"`
	StartFactor   float64 `json:"start_factor"`
	Total         int     `json:"total"`
	MinLR         float64 `json:"min_lr"`
	PctStart      float64 `json:"pct_start"`
	DivFactor     float64 `json:"div_factor"`
	FinalDiv      float64 `json:"final_div_factor"`
	Mode          string  `json:"mode"`
	Factor        float64 `json:"factor"`
	Patience      int     `json:"patience"`
	Threshold     float64 `json:"threshold"`
	ThresholdMode string  `json:"threshold_mode"`
	Cooldown      int     `json:"cooldown"`
	// Metrics (ReduceLROnPlateau) are the values given to its steps; LRs
	// are the learning rates of consecutive optimizer steps.
	Metrics []float64 `json:"metrics"`
	LRs     []float64 `json:"lrs"`
}

// Manifest is testdata/optim/cases.json.
type Manifest struct {
	Steps           int                 `json:"steps"`
	Shapes          [][]int             `json:"shapes"`
	Optimizers      []Config            `json:"optimizers"`
	ScheduleConfigs map[string]Schedule `json:"schedule_configs"`
	Schedules       []Schedule          `json:"schedules"`
}

// Dir returns testdata/optim.
func Dir() (string, error) { return repo.Path("testdata/optim") }

// Load reads the manifest.
func Load() (*Manifest, error) { return repo.LoadJSON[Manifest]("testdata/optim/cases.json") }

// Tol returns the tolerances (rtol, atol) of dt: |got - want| <= atol +
// rtol*|want| for every weight after every step. f64 runs the same
// arithmetic as torch up to the order of a few roundings (e.g.
// m/(sqrt(v)/sqrt(bc2)+eps) vs m/(sqrt(v)*(1/sqrt(bc2))+eps)), so 1e-10
// holds with a wide margin; f32 differs by a few ulps per step,
// accumulated over 20 steps.
func Tol(dt rt.DType) (rtol, atol float64) {
	if dt == rt.F64 {
		return 1e-10, 1e-12
	}
	return 1e-5, 1e-6
}

// LRFunc returns the learning rate of step k (0-based), given the losses
// of the steps before it.
type LRFunc func(k int, losses []float64) float64

// Data is the inputs and references of one case in one dtype.
type Data struct {
	W0   []*rt.Tensor // initial weights
	C    []*rt.Tensor // [steps, shape...] gradients
	Want []*rt.Tensor // [steps, shape...] torch's weights after each step
}

func suffix(dt rt.DType) string {
	if dt == rt.F64 {
		return "f64"
	}
	return "f32"
}

// LoadData reads the inputs of the manifest and the reference of case.
func (m *Manifest) LoadData(dt rt.DType, name string) (*Data, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	d := &Data{}
	for i := range m.Shapes {
		w, err := npy.ReadFile(filepath.Join(dir, fmt.Sprintf("w%d_%s.npy", i, suffix(dt))))
		if err != nil {
			return nil, err
		}
		c, err := npy.ReadFile(filepath.Join(dir, fmt.Sprintf("c%d_%s.npy", i, suffix(dt))))
		if err != nil {
			return nil, err
		}
		p, err := npy.ReadFile(filepath.Join(dir, "cases", name+"_"+suffix(dt), fmt.Sprintf("p%d.npy", i)))
		if err != nil {
			return nil, err
		}
		for _, x := range []*rt.Tensor{w, c, p} {
			if x.DType != dt {
				return nil, fmt.Errorf("optimref: %s: dtype %s, want %s", name, x.DType, dt)
			}
		}
		d.W0, d.C, d.Want = append(d.W0, w), append(d.C, c), append(d.Want, p)
	}
	return d, nil
}

// row returns x[k] of a [steps, ...] tensor.
func row(x *rt.Tensor, k int) *rt.Tensor {
	n := len(x.Data) / x.Shape[0]
	return &rt.Tensor{DType: x.DType, Shape: append([]int{}, x.Shape[1:]...), Data: x.Data[k*n : (k+1)*n]}
}

// Model builds loss = Σ_i ReduceSum(w_i * c_i) with weights w<i> set to
// w0 and inputs c<i>. With split, the inputs have a leading dimension of
// any size, which the gradient of the broadcast weight sums over.
func Model(w0 []*rt.Tensor, split bool) (*model.Model, error) {
	b := model.NewBuilder()
	var sum string
	for i, w := range w0 {
		sh := make([]int64, len(w.Shape))
		for j, d := range w.Shape {
			sh[j] = int64(d)
		}
		in := sh
		if split {
			in = append([]int64{-1}, sh...)
		}
		c := b.Input(fmt.Sprintf("c%d", i), w.DType, in...)
		wn := b.Weight(fmt.Sprintf("w%d", i), w.DType, sh, w.Data)
		s := b.Op("ReduceSum", []string{b.Op("Mul", []string{wn, c}, nil)}, model.Attrs{"keepdims": 0})
		if sum == "" {
			sum = s
		} else {
			sum = b.Op("Add", []string{sum, s}, nil)
		}
	}
	b.Node("loss", "Identity", []string{sum}, []string{"loss"}, nil)
	b.Output("loss")
	return b.Build()
}

// Result is how far a run got from a reference.
type Result struct {
	Worst     float64 // the largest |got-want| / (atol + rtol|want|) over all steps
	WorstStep int     // 0-based step of Worst
	MaxRel    float64 // the largest |got-want| / max(|want|, 1e-3)
	FirstFail int     // first step over tolerance, or -1
}

// Options varies a run.
type Options struct {
	// LR gives the learning rate of each step (nil: the optimizer's).
	LR LRFunc
	// Split feeds the gradient of odd steps (1-based) as [1, shape...]
	// and of even steps as two halves [2, shape...] (c/2 twice: exact),
	// so that the trainer alternates between two plans, which must share
	// the parameters, the optimizer state and the step count.
	Split bool
}

// Train runs opt on dev over d's gradients and measures the distance to
// want (which may be another case's reference than d.Want).
func Train(dev rt.Device, opt engine.Optimizer, d *Data, want []*rt.Tensor, o Options) (Result, error) {
	res := Result{FirstFail: -1}
	dt := d.W0[0].DType
	rtol, atol := Tol(dt)
	lr := o.LR
	m, err := Model(d.W0, o.Split)
	if err != nil {
		return res, err
	}
	topts := engine.TrainOptions{Loss: "loss", Optimizer: &opt}
	if o.Split {
		topts.Shapes = map[string][]int{}
		for i, w := range d.W0 {
			topts.Shapes[fmt.Sprintf("c%d", i)] = append([]int{1}, w.Shape...)
		}
	}
	tr, err := engine.NewTrainer(m, dev, topts)
	if err != nil {
		return res, err
	}
	defer tr.Close()
	steps := d.C[0].Shape[0]
	var losses []float64
	for k := 0; k < steps; k++ {
		if lr != nil {
			tr.SetLR(lr(k, losses))
		}
		in := map[string]*rt.Tensor{}
		for i, c := range d.C {
			x := row(c, k)
			if o.Split {
				x = &rt.Tensor{DType: x.DType, Shape: append([]int{1}, x.Shape...), Data: x.Data}
				if k%2 == 1 {
					v := x.Float64s()
					for j := range v {
						v[j] /= 2
					}
					x = rt.FromFloat64(x.DType, append(v, v...), append([]int{2}, x.Shape[1:]...)...)
				}
			}
			in[fmt.Sprintf("c%d", i)] = x
		}
		r, err := tr.Step(context.Background(), in)
		if err != nil {
			return res, fmt.Errorf("step %d: %w", k, err)
		}
		losses = append(losses, r.Loss)
		ws, err := tr.Weights()
		if err != nil {
			return res, err
		}
		fail := false
		for i := range d.W0 {
			got, w := ws[fmt.Sprintf("w%d", i)], row(want[i], k)
			for j := 0; j < w.Len(); j++ {
				g, x := got.Float64(j), w.Float64(j)
				e := math.Abs(g - x)
				if q := e / (atol + rtol*math.Abs(x)); q > res.Worst || math.IsNaN(q) {
					res.Worst, res.WorstStep = q, k
					if math.IsNaN(q) {
						res.Worst = math.Inf(1)
					}
				}
				res.MaxRel = max(res.MaxRel, e/max(math.Abs(x), 1e-3))
				if !(e <= atol+rtol*math.Abs(x)) {
					fail = true
				}
			}
		}
		if fail && res.FirstFail < 0 {
			res.FirstFail = k
		}
	}
	return res, nil
}

// Run checks case c in dtype dt on dev against its reference, with
// learning rates from lr (nil: c.LR throughout). An op the device does not
// support for dt skips the test.
func Run(t *testing.T, dev rt.Device, m *Manifest, c Config, dt rt.DType, lr LRFunc) {
	t.Helper()
	d, err := m.LoadData(dt, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Train(dev, c.Optimizer(), d, d.Want, Options{LR: lr})
	var ue *rt.UnsupportedError
	if errors.As(err, &ue) {
		t.Skipf("device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rtol, atol := Tol(dt)
	if res.FirstFail >= 0 {
		t.Errorf("weights differ from torch.optim from step %d on (1-based); worst %.3g× tolerance (rtol %g, atol %g) at step %d, max rel error %.3g",
			res.FirstFail+1, res.Worst, rtol, atol, res.WorstStep+1, res.MaxRel)
	} else {
		t.Logf("max rel error %.3g over %d steps (worst %.3g× tolerance)", res.MaxRel, m.Steps, res.Worst)
	}
}

// Check runs every optimizer case without a schedule on dev, in f32 and
// f64.
func Check(t *testing.T, dev rt.Device) {
	m, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, c := range m.Optimizers {
			if c.Schedule != "" {
				continue
			}
			t.Run(c.Name+"_"+suffix(dt), func(t *testing.T) { Run(t, dev, m, c, dt, nil) })
		}
	}
}
