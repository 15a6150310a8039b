package cpu

import "testing"

// TestWeightCache checks weightCache's lookup, replacement and eviction:
// oldest first past the limit, and no entry larger than the limit.
func TestWeightCache(t *testing.T) {
	type ent struct{ id, n int }
	c := weightCache[ent]{limit: 10, size: func(e *ent) int { return e.n }}
	ids := func() []int {
		var out []int
		for _, e := range c.entries {
			out = append(out, e.id)
		}
		return out
	}
	a, b, d := &ent{1, 4}, &ent{2, 4}, &ent{3, 4}
	c.replace(nil, a)
	c.replace(nil, b)
	if got := c.find(func(e *ent) bool { return e.id == 2 }); got != b {
		t.Fatalf("find 2 = %v", got)
	}
	c.replace(nil, d) // 12 > 10: a goes
	if got := ids(); len(got) != 2 || got[0] != 2 || got[1] != 3 || c.bytes != 8 {
		t.Fatalf("after eviction: %v, %d bytes", got, c.bytes)
	}
	c.replace(b, &ent{4, 6}) // b replaced: 4 + 6 = 10 fits
	if got := ids(); len(got) != 2 || got[0] != 3 || got[1] != 4 || c.bytes != 10 {
		t.Fatalf("after replace: %v, %d bytes", got, c.bytes)
	}
	c.replace(nil, &ent{5, 11}) // larger than the limit: not kept, the rest evicted
	if got := ids(); len(got) != 0 || c.bytes != 0 {
		t.Fatalf("after an oversize entry: %v, %d bytes", got, c.bytes)
	}
	if c.find(func(*ent) bool { return true }) != nil {
		t.Fatal("find in an empty cache")
	}
}
