package engine

import (
	"sort"
	"time"

	"github.com/vrun-go/vrun/rt"
)

// Info summarises a plan.
type Info struct {
	Nodes        int            // model nodes
	Ops          int            // primitive ops launched per run
	OpCounts     map[string]int // primitive ops by name
	ArenaBytes   int64          // the planned arena
	TensorBytes  int64          // sum of all arena tensors, without reuse
	WeightBytes  int64          // weights and constants on the device
	InputShapes  map[string][]int
	OutputShapes map[string][]int
	OutputTypes  map[string]rt.DType
	// ChunkRows, when not 0, says that the last run's batch (Rows rows
	// along the leading dim) did not fit the device (ChunkReason says
	// why) and runs in chunks of ChunkRows rows; the plan described is a
	// chunk's, while InputShapes and OutputShapes are the whole batch's.
	ChunkRows   int
	Rows        int
	ChunkReason string
	// HalfWeightOps is the number of MatMul and Conv ops whose constant
	// weights are stored in f16 (Options.Precision f16); HalfKeptOps the
	// ones that kept f32 weights, with PrecisionNotes saying why.
	HalfWeightOps  int
	HalfKeptOps    int
	PrecisionNotes []string
}

// Info describes the most recently used plan. Before the first Run of a
// model whose plan needs the values of inputs (see Run), it holds only
// Nodes.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		// Nothing planned yet: the plan needs input values (Run).
		return Info{Nodes: len(s.m.Nodes), OpCounts: map[string]int{}, InputShapes: map[string][]int{},
			OutputShapes: map[string][]int{}, OutputTypes: map[string]rt.DType{}}
	}
	p := s.last.p
	in := Info{Nodes: len(p.m.Nodes), Ops: p.numOps, OpCounts: map[string]int{}, ArenaBytes: p.arena,
		TensorBytes: p.sum, WeightBytes: s.wSize, InputShapes: map[string][]int{}, OutputShapes: map[string][]int{},
		OutputTypes: map[string]rt.DType{}}
	for k, v := range p.opCounts {
		in.OpCounts[k] = v
	}
	in.HalfWeightOps, in.HalfKeptOps = p.half.ops, p.half.kept
	in.PrecisionNotes = append([]string(nil), p.half.notes...)
	for _, t := range p.inputs {
		in.InputShapes[t.name] = t.shape
	}
	for _, t := range p.outputs {
		in.OutputShapes[t.name] = t.shape
		in.OutputTypes[t.name] = t.dtype
	}
	if cp := s.lastCh; cp != nil {
		in.ChunkRows, in.Rows, in.ChunkReason = cp.rows, cp.total, cp.reason
		for i, t := range p.inputs {
			if cp.split[i] {
				in.InputShapes[t.name] = append([]int{cp.total}, t.shape[1:]...)
			}
		}
		for i, t := range p.outputs {
			in.OutputShapes[t.name] = cp.outShapes[i]
		}
	}
	return in
}

// OpTime is the device time of one model node in the last profiled run.
type OpTime struct {
	Node string
	Op   string
	Time time.Duration
}

func profileOf(p *plan, ts []time.Duration) []OpTime {
	var out []OpTime
	k := 0
	for _, st := range p.steps {
		var d time.Duration
		for range st.ops {
			if k < len(ts) {
				d += ts[k]
			}
			k++
		}
		if len(st.ops) > 0 {
			out = append(out, OpTime{Node: st.node.Name, Op: st.node.Op, Time: d})
		}
	}
	return out
}

// Profile returns per-node device times of the last run, slowest first.
// It is empty unless the session was created with Options.Profile.
func (s *Session) Profile() []OpTime {
	s.mu.Lock()
	out := append([]OpTime(nil), s.lastProf...)
	s.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time > out[j].Time })
	return out
}
