package engine

import "github.com/vrun-go/vrun/rt"

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
