package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/vrun-go/vrun/rt"
)

// TrainState is what a Trainer holds besides its weights: with Weights
// it is everything a checkpoint needs to resume training exactly.
type TrainState struct {
	// Steps is the number of steps run: the optimizer's step count
	// (Adam's bias correction, SGD's first-step momentum, AdaGrad's
	// learning-rate decay use it).
	Steps int
	// LR is the current learning rate (SetLR).
	LR float64
	// Params names the trained parameters, in the order in which their
	// values are concatenated in each Optim buffer.
	Params []string
	// Optim holds the optimizer's state buffers by torch.optim's names:
	// SGD "momentum"; Adam and AdamW "exp_avg", "exp_avg_sq"; AdaGrad
	// "sum"; RMSProp "square_avg", "grad_avg" (centered), "momentum".
	// Each is a flat vector over Params, in their dtype. Empty without an
	// optimizer or for plain SGD.
	Optim map[string]*rt.Tensor
	// RNG is the state of the generator that draws the Dropout masks.
	RNG []byte
}

// State returns the trainer's step count, learning rate, optimizer state
// and Dropout generator state.
func (t *Trainer) State() (*TrainState, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &TrainState{Steps: t.steps, LR: t.lr, Params: t.paramNames(), Optim: map[string]*rt.Tensor{}}
	rng, err := t.pcg.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("engine: Dropout generator state: %w", err)
	}
	st.RNG = rng
	for _, name := range t.optimState() {
		dt, n := t.optimShape()
		off, ok := s.wOffs["p:optim."+name]
		if !ok || s.weights == nil {
			return nil, fmt.Errorf("engine: optimizer state %q is not on the device", name)
		}
		v := &rt.Tensor{DType: dt, Shape: []int{n}, Data: make([]byte, n*dt.Size())}
		if err := s.dev.Read(v.Data, s.weights.buf, off); err != nil {
			return nil, fmt.Errorf("engine: optimizer state %q: %w", name, err)
		}
		st.Optim[name] = v
	}
	return st, nil
}

// SetState restores a state returned by State, from this trainer or
// another one of the same model, trained parameters and optimizer. With
// SetWeights it resumes training where State was taken: the following
// steps compute what they would have.
func (t *Trainer) SetState(st *TrainState) error {
	if st == nil {
		return fmt.Errorf("engine: SetState: nil state")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Steps < 0 {
		return fmt.Errorf("engine: SetState: %d steps", st.Steps)
	}
	if names := t.paramNames(); !slices.Equal(names, st.Params) {
		return fmt.Errorf("engine: SetState: the state is for parameters %q, the trainer trains %q", st.Params, names)
	}
	want := t.optimState()
	if len(st.Optim) != len(want) {
		return fmt.Errorf("engine: SetState: the state has %d optimizer buffers, the optimizer keeps %q", len(st.Optim), want)
	}
	dt, n := t.optimShape()
	for _, name := range want {
		v := st.Optim[name]
		if v == nil {
			return fmt.Errorf("engine: SetState: optimizer state %q missing", name)
		}
		if v.DType != dt || !sameShape(v.Shape, []int{n}) || v.Check() != nil {
			return fmt.Errorf("engine: SetState: optimizer state %q is %s%v, want %s[%d]", name, v.DType, v.Shape, dt, n)
		}
		if _, ok := s.wOffs["p:optim."+name]; !ok || s.weights == nil {
			return fmt.Errorf("engine: SetState: optimizer state %q is not on the device", name)
		}
	}
	var pcg rand.PCG
	if err := pcg.UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("engine: SetState: Dropout generator state: %w", err)
	}
	for _, name := range want {
		if err := s.dev.Write(s.weights.buf, s.wOffs["p:optim."+name], st.Optim[name].Data); err != nil {
			return fmt.Errorf("engine: SetState: optimizer state %q: %w", name, err)
		}
	}
	// Replicas that step their own optimizer (the NCCL path) keep the
	// same state.
	for k, r := range t.reps {
		if r.optim == nil {
			continue
		}
		rs := r.s
		rs.mu.Lock()
		for _, name := range want {
			off, ok := rs.wOffs["p:optim."+name]
			var err error
			if !ok || rs.weights == nil {
				err = fmt.Errorf("optimizer state %q is not on the device", name)
			} else {
				err = rs.dev.Write(rs.weights.buf, off, st.Optim[name].Data)
			}
			if err != nil {
				rs.mu.Unlock()
				return t.devErr(k+1, fmt.Errorf("SetState: %w", err))
			}
		}
		rs.mu.Unlock()
	}
	*t.pcg = pcg
	t.steps, t.lr = st.Steps, st.LR
	return nil
}

// paramNames lists the trained parameters in block order.
func (t *Trainer) paramNames() []string {
	names := make([]string, len(t.params))
	for k, i := range t.params {
		names[k] = t.s.m.Tensors[i].Name
	}
	return names
}

// optimState lists the optimizer's state buffers.
func (t *Trainer) optimState() []string {
	if t.optim == nil {
		return nil
	}
	return t.optim.state
}

// optimShape is the dtype and length of each optimizer state buffer: the
// flat parameter block's.
func (t *Trainer) optimShape() (rt.DType, int) {
	if len(t.params) == 0 {
		return rt.F32, 0
	}
	m := t.s.m
	dt := m.Tensors[t.params[0]].DType
	n := 0
	for _, i := range t.params {
		n += len(m.Tensors[i].Data) / dt.Size()
	}
	return dt, n
}
