package train

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/vrun-go/vrun/checkpoint"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// locateNaN replays a step that produced a NaN or an infinity, from the
// trainer's state before the step (snap), in a debug variant of the
// training model whose every float node output is a model output, so
// that the step reads back each op's result. It returns a description of
// the first node (in topological order) whose output is not finite while
// its inputs are, or of the gradient or update that made a weight
// non-finite.
func (r *run) locateNaN(snap *checkpoint.Checkpoint, in map[string]*rt.Tensor) string {
	s, err := locate(r.net, r.cfg, snap, in)
	if err != nil {
		return "replaying the step to find the op failed: " + err.Error()
	}
	return s
}

func locate(n *Net, cfg Config, snap *checkpoint.Checkpoint, in map[string]*rt.Tensor) (string, error) {
	// The inputs themselves.
	for _, name := range []string{n.Input, n.Target} {
		if t := in[name]; t != nil && !allFinite(t) {
			return fmt.Sprintf("the batch's %q holds a NaN or an infinity", name), nil
		}
	}
	for name, w := range snap.Weights {
		if !allFinite(w) {
			return fmt.Sprintf("weight %q was already non-finite before the step", name), nil
		}
	}
	m := n.Model
	dbg := &model.Model{Meta: m.Meta, Tensors: slices.Clone(m.Tensors), Nodes: m.Nodes}
	for _, nd := range m.Nodes {
		for _, o := range nd.Outputs {
			if o >= 0 && dbg.Tensors[o].Role == model.Intermediate && dbg.Tensors[o].DType.IsFloat() {
				dbg.Tensors[o].Role = model.Output
			}
		}
	}
	opts := n.TrainOptions()
	opt := cfg.Optimizer
	opts.Optimizer = &opt
	opts.Seed = cfg.Seed
	opts.Shapes = map[string][]int{}
	for name, t := range in {
		opts.Shapes[name] = t.Shape
	}
	dev := cfg.Device
	if len(cfg.Devices) > 0 {
		dev = cfg.Devices[0] // a data-parallel run replays the step on its first device
	}
	tr, err := engine.NewTrainer(dbg, dev, opts)
	if err != nil {
		return "", err
	}
	defer tr.Close()
	if err := snap.Restore(tr); err != nil {
		return "", err
	}
	res, err := tr.Step(context.Background(), in)
	if err != nil {
		return "", err
	}
	value := func(i int) *rt.Tensor {
		t := &dbg.Tensors[i]
		switch t.Role {
		case model.Input:
			return in[t.Name]
		case model.Weight:
			if w := snap.Weights[t.Name]; w != nil {
				return w
			}
			return &rt.Tensor{DType: t.DType, Shape: toInts(t.Shape), Data: t.Data}
		}
		return res.Outputs[t.Name]
	}
	for _, nd := range dbg.Nodes {
		for _, o := range nd.Outputs {
			if o < 0 {
				continue
			}
			v := value(o)
			if v == nil || allFinite(v) {
				continue
			}
			var ins []string
			for _, i := range nd.Inputs {
				if i < 0 {
					continue
				}
				iv := value(i)
				state := "finite"
				if iv != nil && !allFinite(iv) {
					state = "NOT finite"
				}
				ins = append(ins, fmt.Sprintf("%q %s", dbg.Tensors[i].Name, state))
			}
			return fmt.Sprintf("the first op that produced a NaN or an infinity is node %q (%s): output %q holds %s (inputs: %s)",
				nd.Name, nd.Op, dbg.Tensors[o].Name, firstBad(v), strings.Join(ins, ", ")), nil
		}
	}
	// The forward pass was finite: the backward pass or the update.
	grads, err := tr.Grads()
	if err != nil {
		return "", err
	}
	for _, name := range n.Params {
		if g := grads[name]; g != nil && !allFinite(g) {
			return fmt.Sprintf("the forward pass is finite; the backward pass made the gradient of %q non-finite (%s)", name, firstBad(g)), nil
		}
	}
	w, err := tr.Weights()
	if err != nil {
		return "", err
	}
	for _, name := range n.Params {
		if v := w[name]; v != nil && !allFinite(v) {
			return fmt.Sprintf("the forward and backward passes are finite; the optimizer update made %q non-finite (%s; learning rate %g)", name, firstBad(v), tr.LR()), nil
		}
	}
	return "replaying the step gave finite values everywhere (the NaN did not reproduce)", nil
}

// firstBad describes the first non-finite element of t.
func firstBad(t *rt.Tensor) string {
	for i := range t.Len() {
		if v := t.Float64(i); math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprintf("%g at element %d of %v", v, i, t.Shape)
		}
	}
	return "no NaN"
}

func toInts(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}
