package cpu

import (
	"slices"
	"sync"
)

// weightCache keeps tensors derived from convolution weights (Winograd
// transforms, packed channel blocks) for recent convolutions, at most
// limit bytes of them (size of an entry), oldest dropped first. Callers
// look entries up by the weights' address and compare the weights with
// the entry's copy before using it.
type weightCache[E any] struct {
	mu      sync.Mutex
	entries []*E
	bytes   int
	limit   int
	size    func(*E) int
}

// find returns the first entry match accepts, or nil.
func (c *weightCache[E]) find(match func(*E) bool) *E {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if match(e) {
			return e
		}
	}
	return nil
}

// replace drops old (unless nil) and adds ne, dropping the oldest entries
// while the cache would exceed its limit; an entry larger than the limit
// is not kept.
func (c *weightCache[E]) replace(old, ne *E) {
	size := c.size(ne)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old != nil {
		if i := slices.Index(c.entries, old); i >= 0 {
			c.entries = slices.Delete(c.entries, i, i+1)
			c.bytes -= c.size(old)
		}
	}
	for len(c.entries) > 0 && c.bytes+size > c.limit {
		c.bytes -= c.size(c.entries[0])
		c.entries = c.entries[1:]
	}
	if size <= c.limit {
		c.entries = append(c.entries, ne)
		c.bytes += size
	}
}
