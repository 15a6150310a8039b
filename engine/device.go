package engine

import (
	"context"
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// RunDevice runs the model on device-resident inputs and returns
// device-resident outputs, so that chained models (and a model run again
// on its own outputs) make no trip through host memory. It is safe for
// concurrent use, like Run.
//
// The contract:
//   - Every input must be an *rt.DeviceTensor on the session's device with
//     the model's dtype and a shape Run would accept. RunDevice copies the
//     inputs into the run's arena on the device (rt.CopyBuffer) before the
//     run starts, so the caller may change or Free them once RunDevice
//     returns.
//   - RunDevice returns when the run is complete: the outputs are valid on
//     return, and no work of the run is left on the device. They are new
//     tensors from the session's pool (Session.Pool), owned by the caller,
//     who must Free them (which gives the memory back to the pool).
//   - They stay valid after the session closes (its pool then releases
//     each to the device when it is freed), but not after the device
//     closes.
//   - A cancelled or expired ctx returns ctx.Err(); outputs are then not
//     made.
//
// A recorded run has its host transfers (Writes of the inputs, Reads of
// the outputs) in its command stream on devices whose memory the host
// cannot map; alternating Run and RunDevice on such a device re-records
// the stream at each switch. On host-visible memory (the CPU, unified
// memory) both share one recording.
//
// RunDevice does not split a batch too large for the device into chunks
// (Run does), and does not take inputs that planning needs by value (see
// ValueInputs); both are errors.
func (s *Session) RunDevice(ctx context.Context, inputs map[string]*rt.DeviceTensor) (map[string]*rt.DeviceTensor, error) {
	shapes, err := s.checkDeviceInputs(inputs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	byValue := len(s.valIn) > 0
	s.mu.Unlock()
	if byValue {
		return nil, fmt.Errorf("engine: RunDevice: the inputs %v are planned by value and need host tensors: use Run", s.valIn)
	}
	ps, cp, err := s.prepare(shapes)
	if err != nil {
		return nil, err
	}
	if cp != nil {
		return nil, fmt.Errorf("engine: RunDevice: a batch of %d rows is too large for one run on %s (Run splits it into chunks of %d)", cp.total, s.dev.Info().Spec(), cp.rows)
	}
	p := ps.p
	var outs []*rt.DeviceTensor
	_, _, err = s.execIO(ctx, ps, true, func(c *execCtx) error {
		for _, t := range p.inputs {
			in := inputs[t.name]
			if err := rt.CopyBuffer(s.dev, c.arena, t.offset, in.Buffer, 0, t.bytes()); err != nil {
				return fmt.Errorf("engine: input %q: %w", t.name, err)
			}
		}
		return nil
	}, func(c *execCtx) error {
		for _, t := range p.outputs {
			o, err := s.pool.NewDeviceTensor(t.dtype, t.shape...)
			if err != nil {
				return fmt.Errorf("engine: output %q: %w", t.name, err)
			}
			outs = append(outs, o)
			buf, off := s.location(t, c.arena, c.w)
			if err := rt.CopyBuffer(s.dev, o.Buffer, 0, buf, off, t.bytes()); err != nil {
				return fmt.Errorf("engine: output %q: %w", t.name, err)
			}
		}
		return nil
	})
	if err != nil {
		for _, o := range outs {
			o.Free()
		}
		return nil, err
	}
	out := make(map[string]*rt.DeviceTensor, len(outs))
	for i, t := range p.outputs {
		out[t.name] = outs[i]
	}
	return out, nil
}

// checkDeviceInputs checks the inputs of a RunDevice against the model
// and the session's device and returns their shapes.
func (s *Session) checkDeviceInputs(inputs map[string]*rt.DeviceTensor) (map[string][]int, error) {
	m := s.m
	shapes := map[string][]int{}
	for _, i := range m.Inputs() {
		mt := &m.Tensors[i]
		t, ok := inputs[mt.Name]
		if !ok || t == nil || t.Buffer == nil {
			return nil, inputErr(mt.Name, ErrMissingInput, "missing input %q (the model's inputs: %s)", mt.Name, inputList(m))
		}
		if t.Device != s.dev {
			return nil, inputErr(mt.Name, ErrDevice, "input %q is on %s, the session runs on %s", mt.Name, specOf(t.Device), s.dev.Info().Spec())
		}
		if t.DType != mt.DType {
			return nil, inputErr(mt.Name, ErrDType, "input %q has dtype %s, model wants %s", mt.Name, t.DType, mt.DType)
		}
		if err := checkShape(mt, t.Shape, ""); err != nil {
			return nil, err
		}
		if n := rt.TensorBytes(t.DType, t.Shape); t.Buffer.Size() < n {
			return nil, inputErr(mt.Name, ErrShape, "input %q: %s%v needs %d bytes, its buffer has %d", mt.Name, t.DType, t.Shape, n, t.Buffer.Size())
		}
		shapes[mt.Name] = t.Shape
	}
	if err := unknownInput(inputs, shapes, m); err != nil {
		return nil, err
	}
	return shapes, nil
}

func specOf(d rt.Device) string {
	if d == nil {
		return "no device"
	}
	return d.Info().Spec()
}

// Pool returns the session's memory pool: RunDevice's outputs and the
// pinned staging of its runs come from it, and device tensors made with
// it (Pool().ToDevice) are the natural inputs of RunDevice. Its Stats
// are the session's memory outside the planned arenas and weights;
// Session.Close closes it.
func (s *Session) Pool() *rt.MemPool { return s.pool }

// MemoryStats describes a session's device memory.
type MemoryStats struct {
	Arenas  int64 // bytes of the recorded runs' arenas, all plans
	Weights int64 // bytes of the weight buffer
	Pool    rt.MemPoolStats
}

// MemoryStats returns the session's device memory: its arenas and
// weights, and its pool's statistics.
func (s *Session) MemoryStats() MemoryStats {
	s.mu.Lock()
	var st MemoryStats
	for _, ps := range s.plans {
		st.Arenas += int64(len(ps.all)) * max(ps.p.arena, arenaAlign)
	}
	if s.weights != nil {
		st.Weights = s.weights.buf.Size()
	}
	s.mu.Unlock()
	st.Pool = s.pool.Stats()
	return st
}
