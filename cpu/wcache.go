package cpu

import (
	"slices"
	"sync"
	"unsafe"
)

// weightCache keeps tensors derived from convolution weights (Winograd
// transforms, packed channel blocks) for recent convolutions, at most
// limit bytes of them (size of an entry), oldest dropped first. Callers
// look entries up by the weights' address and compare the weights with
// the entry's copy before using it; freeing a Buffer drops the entries of
// weights in it (dropCachedWeights), so that a closed model's entries do
// not stay until the limit pushes them out.
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

// drop removes the entries gone accepts.
func (c *weightCache[E]) drop(gone func(*E) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = slices.DeleteFunc(c.entries, func(e *E) bool {
		if gone(e) {
			c.bytes -= c.size(e)
			return true
		}
		return false
	})
}

// dropCachedWeights forgets the cached transforms of weights in mem, the
// memory of a Buffer being freed.
func dropCachedWeights(mem []byte) {
	if len(mem) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(&mem[0]))
	hi := lo + uintptr(len(mem))
	in := func(p *float32) bool { a := uintptr(unsafe.Pointer(p)); return a >= lo && a < hi }
	winoCache.drop(func(e *winoCached) bool { return in(e.key) })
	ocwCache.drop(func(e *ocwPacked) bool { return in(e.key) })
}
