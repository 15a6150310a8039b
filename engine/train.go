package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/dist/nccl"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// TrainOptions configures a Trainer.
type TrainOptions struct {
	// Shapes binds input shapes, as Options.Shapes.
	Shapes map[string][]int
	// Loss names the scalar float tensor to minimise; it must be a model
	// output.
	Loss string
	// Params names the weights to train. Empty means every float weight
	// except BatchNormalization running statistics and Frozen.
	Params []string
	// Frozen names weights that are not trained: they cost no gradient
	// work.
	Frozen []string
	// InputGrads names model inputs whose gradients Grads also returns.
	InputGrads []string
	// NoGrad names nodes whose ops pass no gradient (their outputs are
	// treated as constants by the backward pass).
	NoGrad []string
	// Optimizer is applied after the backward pass of each Step; nil
	// computes gradients only.
	Optimizer *Optimizer
	// Seed seeds the Dropout masks.
	Seed uint64
	// Profile records per-op device times, read with Trainer.Profile.
	Profile bool
	// BucketBytes is the size of the gradient buckets of a data-parallel
	// trainer (NewDataParallel): whole parameters, the last ones first
	// (dist.BucketsByParam), each reduced by one NCCL call or one step of
	// the host pipeline; 0 means dist.DefaultGradBucketBytes (25 MB).
	BucketBytes int64
	// Collective is how a data-parallel trainer all-reduces gradients:
	// "" (auto) uses NCCL when every device is a CUDA device on its own
	// GPU and libnccl.so.2 loads, and the host path otherwise; "host"
	// always reduces through host memory; "nccl" requires NCCL, and also
	// applies to a single device (a one-rank communicator).
	Collective string
	// NCCL, if set, makes a data-parallel trainer one rank of a
	// communicator spanning processes and machines: it is given one CUDA
	// device, joins rank NCCL.Rank of NCCL.NRanks through the TCP
	// bootstrap of package dist/nccl (rank 0 serves the ncclGetUniqueId at
	// NCCL.Root) and ncclCommInitRank, and all-reduces (ncclAvg) with the
	// other processes, which must step with batches of the same size.
	// Implies Collective "nccl". See nccl.LaunchFromEnv.
	NCCL *nccl.Launch
	// NoOverlap turns off the overlap of the gradient reduction with
	// backward in a data-parallel trainer: by default the recorded
	// forward and backward is cut into segments at the launches that
	// finish each gradient bucket, and a bucket is all-reduced (NCCL) or
	// reduced through the host while the next segment runs. With
	// NoOverlap every bucket is reduced after the whole backward pass.
	// Either way the result is the same.
	NoOverlap bool
}

// Trainer trains a model on one device (NewTrainer) or data-parallel on
// several (NewDataParallel). A training step — forward,
// backward and the optimizer update — is planned once per input shape
// into one arena and recorded into one stream (a data-parallel trainer:
// in segments, see NewDataParallel), then replayed: one submit
// and one wait per step. Parameters, their gradients and the optimizer
// state each live in one flat device buffer. A Trainer is safe for
// concurrent use; steps are serialised.
type Trainer struct {
	s      *Session
	opts   TrainOptions
	spec   gradSpec
	optim  *optimSpec
	names  map[int]bool // mutable weights (by tensor index)
	params []int

	mu    sync.Mutex
	lr    float64
	steps int
	rng   *rand.Rand
	pcg   *rand.PCG // rng's source, whose state State saves
	last  *planState
	lastC *execCtx

	reps    []*Trainer    // data-parallel replicas on the other devices (dp.go)
	stage   *dist.Staging // their reduction's pinned staging buffers
	buckets []dist.Bucket // the gradient buckets of a data-parallel group
	nccl    *ncclGroup    // the NCCL communicator of a CUDA group, or nil
	// groups are the bucket indices reduced after each segment of an
	// overlapped step (overlap.go), decided on the first step
	// (groupsSet); nil when steps do not overlap.
	groups    [][]int
	groupsSet bool
	hook      func(kind string, dev, seg int) // sees overlapped steps, for tests
}

// StepResult is what one training step returns.
type StepResult struct {
	Loss    float64
	Outputs map[string]*rt.Tensor
}

// NewTrainer plans a training step of m on dev. The caller keeps
// ownership of m and dev, which must outlive the trainer.
func NewTrainer(m *model.Model, dev rt.Device, opts TrainOptions) (*Trainer, error) {
	t := &Trainer{opts: opts, names: map[int]bool{}, pcg: rand.NewPCG(opts.Seed, 0x76727564726f70)}
	t.rng = rand.New(t.pcg)
	loss := m.TensorIndex(opts.Loss)
	if loss < 0 || m.Tensors[loss].Role != model.Output {
		return nil, fmt.Errorf("engine: loss %q is not a model output", opts.Loss)
	}
	params, stats, err := trainables(m, opts)
	if err != nil {
		return nil, err
	}
	for _, i := range append(append([]int{}, params...), stats...) {
		t.names[i] = true
	}
	t.params = params
	var inputs []int
	for _, name := range opts.InputGrads {
		i := m.TensorIndex(name)
		if i < 0 || m.Tensors[i].Role != model.Input {
			return nil, fmt.Errorf("engine: input gradient %q: not a model input", name)
		}
		if !m.Tensors[i].DType.IsFloat() {
			return nil, fmt.Errorf("engine: input gradient %q: dtype %s is not a float type", name, m.Tensors[i].DType)
		}
		inputs = append(inputs, i)
	}
	noGrad := map[int]bool{}
	for _, name := range opts.NoGrad {
		found := false
		for i := range m.Nodes {
			if m.Nodes[i].Name == name {
				noGrad[i], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("engine: NoGrad node %q not found", name)
		}
	}
	if len(params) == 0 && len(inputs) == 0 {
		return nil, fmt.Errorf("engine: nothing to differentiate: no trained parameters and no input gradients")
	}
	t.spec = gradSpec{loss: loss, params: params, inputs: inputs, noGrad: noGrad}
	if opts.Optimizer != nil {
		if t.optim, err = newOptimSpec(*opts.Optimizer); err != nil {
			return nil, err
		}
		t.spec.optim, t.lr = t.optim, opts.Optimizer.LR
	}
	s := newSession(m, dev, Options{Shapes: opts.Shapes, Parallel: 1, Profile: opts.Profile})
	s.mode = planMode{mutable: t.names, params: params}
	t.s = s
	for name := range opts.Shapes {
		if i := m.TensorIndex(name); i < 0 || m.Tensors[i].Role != model.Input {
			return nil, fmt.Errorf("engine: shape given for %q, which is not a model input", name)
		}
	}
	shapes := map[string][]int{}
	for _, i := range m.Inputs() {
		if sh, ok := opts.Shapes[m.Tensors[i].Name]; ok {
			shapes[m.Tensors[i].Name] = sh
		}
	}
	if _, err := t.trainPlan(shapes); err != nil {
		s.Close()
		return nil, err
	}
	return t, nil
}

// trainables picks the trained parameters and the mutable running
// statistics of m.
func trainables(m *model.Model, opts TrainOptions) (params, stats []int, err error) {
	isStat := map[int]bool{}
	for _, n := range m.Nodes {
		if n.Op == "BatchNormalization" && len(n.Inputs) == 5 {
			for _, i := range n.Inputs[3:] {
				if i >= 0 && m.Tensors[i].Role == model.Weight {
					isStat[i] = true
				}
			}
		}
	}
	frozen := map[int]bool{}
	for _, name := range opts.Frozen {
		i := m.TensorIndex(name)
		if i < 0 || m.Tensors[i].Role != model.Weight {
			return nil, nil, fmt.Errorf("engine: frozen %q is not a weight", name)
		}
		frozen[i] = true
	}
	if len(opts.Params) > 0 {
		for _, name := range opts.Params {
			i := m.TensorIndex(name)
			if i < 0 || m.Tensors[i].Role != model.Weight {
				return nil, nil, fmt.Errorf("engine: parameter %q is not a weight", name)
			}
			if !m.Tensors[i].DType.IsFloat() {
				return nil, nil, fmt.Errorf("engine: parameter %q has dtype %s, want a float type", name, m.Tensors[i].DType)
			}
			if !frozen[i] {
				params = append(params, i)
			}
		}
	} else {
		for i, t := range m.Tensors {
			if t.Role == model.Weight && t.DType.IsFloat() && !isStat[i] && !frozen[i] {
				params = append(params, i)
			}
		}
	}
	for i := range isStat {
		stats = append(stats, i)
	}
	return params, stats, nil
}

func (t *Trainer) trainPlan(shapes map[string][]int) (*planState, error) {
	mode := t.s.mode
	mode.train, mode.grad = true, &t.spec
	return t.s.planMode(shapes, mode, "train;")
}

// inputShapes checks inputs against the model and returns their shapes.
func (t *Trainer) inputShapes(inputs map[string]*rt.Tensor) (map[string][]int, error) {
	return checkInputs(t.s.m, inputs)
}

// Step runs one training step on inputs: forward, backward and, when the
// trainer has an optimizer, the update. It returns the loss and the
// model's outputs.
func (t *Trainer) Step(ctx context.Context, inputs map[string]*rt.Tensor) (StepResult, error) {
	if len(t.reps) > 0 || t.nccl != nil {
		return t.stepDP(ctx, inputs)
	}
	shapes, err := t.inputShapes(inputs)
	if err != nil {
		return StepResult{}, err
	}
	ps, err := t.trainPlan(shapes)
	if err != nil {
		return StepResult{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	step := t.steps + 1
	p := ps.p
	masks := map[*tensor]float64{}
	for _, mk := range p.masks {
		masks[mk.t] = mk.ratio
	}
	out, c, err := t.s.exec(ctx, ps, func(i int, x *tensor, dst []byte) error {
		switch {
		case x == p.hyper:
			h := t.optim.hyper(step, t.lr)
			copy(dst, rt.FromFloat64(x.dtype, h, len(h)).Data)
		case masks[x] > 0:
			r := masks[x]
			v := make([]float64, rt.NumElements(x.shape))
			for k := range v {
				if t.rng.Float64() >= r {
					v[k] = 1 / (1 - r)
				}
			}
			copy(dst, rt.FromFloat64(x.dtype, v, len(v)).Data)
		default:
			copy(dst, inputs[x.name].Data)
		}
		return nil
	}, nil)
	if err != nil {
		return StepResult{}, err
	}
	t.steps = step
	t.last, t.lastC = ps, c
	l := out[t.opts.Loss]
	return StepResult{Loss: l.Float64(0), Outputs: out}, nil
}

// Grads returns the gradients computed by the last Step: of every
// trained parameter and of each input named in InputGrads. With an
// optimizer, parameter gradients are after clipping (ClipNorm scales them
// in place, as torch.nn.utils.clip_grad_norm_ does) and without weight
// decay (which the update adds on the fly, as torch.optim does).
func (t *Trainer) Grads() (map[string]*rt.Tensor, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		return nil, errors.New("engine: Grads before the first Step")
	}
	out := map[string]*rt.Tensor{}
	for _, r := range t.last.p.gradOut {
		v := &rt.Tensor{DType: r.of.dtype, Shape: append([]int{}, r.of.shape...), Data: make([]byte, r.unit.bytes)}
		if err := t.s.dev.Read(v.Data, t.lastC.arena, r.unit.root.offset+r.unit.off); err != nil {
			return nil, fmt.Errorf("engine: gradient of %q: %w", r.name, err)
		}
		out[r.name] = v
	}
	return out, nil
}

// Weights returns the current values of the trained parameters and of
// the running statistics, by name.
func (t *Trainer) Weights() (map[string]*rt.Tensor, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*rt.Tensor{}
	for i := range t.names {
		mt := &s.m.Tensors[i]
		v := &rt.Tensor{DType: mt.DType, Shape: toInts(mt.Shape), Data: append([]byte(nil), mt.Data...)}
		if off, ok := t.weightOffset(i); ok {
			if err := s.dev.Read(v.Data, s.weights.buf, off); err != nil {
				return nil, fmt.Errorf("engine: weight %q: %w", mt.Name, err)
			}
		}
		out[mt.Name] = v
	}
	return out, nil
}

// weightOffset returns where mutable weight i lives in the weight buffer,
// if it was uploaded; t.s.mu must be held.
func (t *Trainer) weightOffset(i int) (int64, bool) {
	s := t.s
	if s.weights == nil {
		return 0, false
	}
	if off, ok := s.wOffs[fmt.Sprint("w:", i)]; ok {
		return off, true
	}
	blk, ok := s.wOffs["p:params"]
	if !ok {
		return 0, false
	}
	var off int64
	for _, j := range t.params {
		if j == i {
			return blk + off, true
		}
		off += int64(len(s.m.Tensors[j].Data))
	}
	return 0, false
}

// SetWeights overwrites trained parameters or running statistics, by
// name, on the device (on every device of a data-parallel trainer).
func (t *Trainer) SetWeights(w map[string]*rt.Tensor) error {
	if err := t.setWeights(w); err != nil {
		return err
	}
	for k, r := range t.reps {
		if err := r.setWeights(w); err != nil {
			return t.devErr(k+1, err)
		}
	}
	return nil
}

func (t *Trainer) setWeights(w map[string]*rt.Tensor) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, v := range w {
		i := s.m.TensorIndex(name)
		if i < 0 || !t.names[i] {
			return fmt.Errorf("engine: SetWeights: %q is not a trained parameter or running statistic", name)
		}
		mt := &s.m.Tensors[i]
		if v.DType != mt.DType || !sameShape(v.Shape, toInts(mt.Shape)) {
			return fmt.Errorf("engine: SetWeights: %q is %s%v, want %s%v", name, v.DType, v.Shape, mt.DType, mt.Shape)
		}
		off, ok := t.weightOffset(i)
		if !ok {
			return fmt.Errorf("engine: SetWeights: %q is not on the device", name)
		}
		if err := s.dev.Write(s.weights.buf, off, v.Data); err != nil {
			return fmt.Errorf("engine: SetWeights %q: %w", name, err)
		}
	}
	return nil
}

// Eval runs the model in inference mode (running statistics, no Dropout)
// on the current weights.
func (t *Trainer) Eval(ctx context.Context, inputs map[string]*rt.Tensor) (map[string]*rt.Tensor, error) {
	shapes, err := t.inputShapes(inputs)
	if err != nil {
		return nil, err
	}
	ps, err := t.s.planMode(shapes, t.s.mode, "eval;")
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out, _, err := t.s.exec(ctx, ps, func(i int, x *tensor, dst []byte) error {
		copy(dst, inputs[x.name].Data)
		return nil
	}, nil)
	return out, err
}

// SetLR sets the learning rate of the following steps (a schedule calls
// it between steps; nothing is re-recorded).
func (t *Trainer) SetLR(lr float64) {
	t.mu.Lock()
	t.lr = lr
	t.mu.Unlock()
}

// LR returns the current learning rate.
func (t *Trainer) LR() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lr
}

// Steps returns how many steps have run.
func (t *Trainer) Steps() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.steps
}

// Profile returns per-op device times of the last step (TrainOptions.Profile).
func (t *Trainer) Profile() []OpTime { return t.s.Profile() }

// Info describes the training plan for the last input shapes.
func (t *Trainer) Info() Info { return t.s.Info() }

// Close frees the trainer's device memory (on every device of a
// data-parallel trainer).
func (t *Trainer) Close() error {
	errs := []error{t.s.Close()}
	for _, r := range t.reps {
		errs = append(errs, r.Close())
	}
	if t.stage != nil {
		t.stage.Free() // after the sessions: no reduction is in flight
	}
	if t.nccl != nil {
		errs = append(errs, t.nccl.destroy())
		t.nccl = nil
	}
	return errors.Join(errs...)
}
