package engine

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// fitError is a plan that does not fit the device or the host. p is the
// device-independent plan, for splitting the batch into chunks (see
// prepare); scales says whether a smaller batch can fit.
type fitError struct {
	p      *plan
	err    *rt.SizeError
	scales bool
}

func (e *fitError) Error() string { return "engine: " + e.err.Error() }

func (e *fitError) Unwrap() error { return e.err }

// nodeLabel names a step's node for messages.
func nodeLabel(st *step, i int) string {
	if st.node == nil {
		return fmt.Sprintf("step %d", i)
	}
	if st.node.Name != "" {
		return fmt.Sprintf("node %s (%s)", st.node.Name, st.node.Op)
	}
	return fmt.Sprintf("node #%d (%s)", i, st.node.Op)
}

// fits checks plan p against the device's limits and the host's memory
// before anything is allocated: every op operand against the range one op
// may address (DeviceInfo.MaxRange), the arena and the weights against the
// largest buffer (MaxAlloc) and together against the device memory, and the
// host staging buffers (and, on the cpu backend, the arena and weights)
// against the host memory available.
func (s *Session) fits(p *plan) *fitError {
	info := s.dev.Info()
	dev := fmt.Sprintf("%s (%s)", info.Spec(), info.Name)
	fail := func(scales bool, what string, need, limit int64, of string) *fitError {
		return &fitError{p: p, scales: scales, err: &rt.SizeError{What: what, Need: need, Limit: limit, Of: of}}
	}
	if info.MaxRange > 0 {
		for i := range p.steps {
			st := &p.steps[i]
			for _, op := range st.ops {
				var fe *fitError
				rt.MapRefs(op, func(name string, r *rt.Ref) {
					if _, ok := r.Buf.(slot); !ok || fe != nil {
						return
					}
					lo, hi := r.Span()
					if need := hi - (lo &^ (arenaAlign - 1)); need > info.MaxRange {
						fe = fail(true, fmt.Sprintf("%s: operand %s %s%v of %s", nodeLabel(st, i), name, r.DType, r.Shape, op.OpName()),
							need, info.MaxRange, "that one op operand may span on "+dev+limitName(info.Backend, "range"))
					}
				})
				if fe != nil {
					return fe
				}
			}
		}
	}
	var weights, staging int64
	for _, t := range p.tensors {
		if t.root == t && t.where == inWeights && t.block == nil && (t.used || t.persist != "") {
			weights = rt.AddBytes(weights, (t.bytes()+arenaAlign-1)&^(arenaAlign-1))
		}
	}
	for _, t := range p.inputs {
		staging = rt.AddBytes(staging, t.bytes())
	}
	for _, t := range p.outputs {
		staging = rt.AddBytes(staging, rt.MulBytes(t.bytes(), 2)) // the staging buffer and the returned copy
	}
	arenas := rt.MulBytes(p.arena, int64(s.opts.Parallel))
	if lim := info.MaxAlloc; lim > 0 {
		if p.arena > lim {
			return fail(true, "the arena of intermediate tensors", p.arena, lim, "that "+dev+" allocates in one buffer"+limitName(info.Backend, "alloc"))
		}
		if weights > lim {
			return fail(false, "the weights", weights, lim, "that "+dev+" allocates in one buffer"+limitName(info.Backend, "alloc"))
		}
	}
	device := rt.AddBytes(arenas, weights)
	if lim := info.Memory; lim > 0 && (device < 0 || device > lim) {
		return fail(weights < lim, fmt.Sprintf("the plan (arena %s%s, weights %s)", rt.FormatBytes(p.arena), parallelNote(s.opts.Parallel), rt.FormatBytes(weights)),
			device, lim, "of memory on "+dev)
	}
	host := staging
	if info.Backend == "cpu" {
		host = rt.AddBytes(host, device)
	}
	avail, _ := rt.HostMemory()
	if host < 0 || host > avail {
		return fail(true, "the plan's host memory (staging of inputs and outputs"+map[bool]string{true: ", arena and weights", false: ""}[info.Backend == "cpu"]+")",
			host, avail, "of host memory available")
	}
	return nil
}

func parallelNote(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" × %d parallel runs", n)
}

// limitName names a device limit as the backend's API does, for messages.
func limitName(backend, limit string) string {
	name := map[string]string{
		"vulkan/range": "maxStorageBufferRange",
		"vulkan/alloc": "maxMemoryAllocationSize",
		"opencl/alloc": "CL_DEVICE_MAX_MEM_ALLOC_SIZE",
	}[backend+"/"+limit]
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}
