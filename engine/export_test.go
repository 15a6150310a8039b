package engine

// NumPlans returns how many plans s holds, for tests.
func NumPlans(s *Session) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.plans)
}
