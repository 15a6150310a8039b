package engine

import (
	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/rt"
)

// NumPlans returns how many plans s holds, for tests.
func NumPlans(s *Session) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.plans)
}

// ReplicaWeights returns the weights held by replica k of a data-parallel
// trainer (0 is t itself), for tests.
func ReplicaWeights(t *Trainer, k int) (map[string]*rt.Tensor, error) {
	return t.replica(k).Weights()
}

// SetFuseMinElements sets the smallest chain that plan-time fusion merges
// and returns the previous value, for tests.
func SetFuseMinElements(n int64) int64 {
	old := fuseMinElements
	fuseMinElements = n
	return old
}

// SetOverlapHook sets a function that sees the events of t's overlapped
// data-parallel steps, for tests: "start" and "done" of segment seg on
// device dev (the tail is segment len(OverlapGroups)), "reduced" (host
// path) or "enqueued" (NCCL) of group seg, with dev -1. It may block.
func SetOverlapHook(t *Trainer, f func(kind string, dev, seg int)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hook = f
}

// OverlapGroups returns the bucket groups t's overlapped steps reduce,
// in order (nil before the first step, or when steps do not overlap),
// for tests.
func OverlapGroups(t *Trainer) [][]dist.Bucket {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out [][]dist.Bucket
	for _, g := range t.groups {
		out = append(out, t.groupBuckets(g))
	}
	return out
}

// WeightsConstant reports whether s's weight buffer is marked constant
// (rt.ConstantBuffer), for tests.
func WeightsConstant(s *Session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.weights.buf.(rt.ConstantBuffer)
	return ok && c.Constant()
}

// TrainerSession returns the session that runs t's steps, for tests.
func TrainerSession(t *Trainer) *Session { return t.s }

// SetConcatAlign sets the byte alignment a Concat input's offset in the
// output needs for the input to be computed in place there, and returns
// the previous value, for tests.
func SetConcatAlign(n int64) int64 {
	old := concatAlign
	concatAlign = n
	return old
}
