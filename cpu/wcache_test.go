package cpu

import (
	"testing"
	"unsafe"
)

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
	c.replace(nil, &ent{6, 2})
	c.replace(nil, &ent{7, 3})
	c.drop(func(e *ent) bool { return e.id == 6 })
	if got := ids(); len(got) != 1 || got[0] != 7 || c.bytes != 3 {
		t.Fatalf("after drop: %v, %d bytes", got, c.bytes)
	}
}

// TestFreeDropsCachedWeights checks that freeing a Buffer drops the
// Winograd cache entries of weights inside it (and only those).
func TestFreeDropsCachedWeights(t *testing.T) {
	d := NewDevice()
	defer d.Close()
	wk := winoF2
	var bufs [2]*Buffer
	for i := range bufs {
		b, err := d.Alloc(4 * 64 * 9)
		if err != nil {
			t.Fatal(err)
		}
		bufs[i] = b.(*Buffer)
		w := unsafe.Slice((*float32)(unsafe.Pointer(&bufs[i].Bytes()[0])), 64*9)
		for j := range w {
			w[j] = float32(j%7) - 3
		}
		_, done := winoWeightsFor(wk, w, 8, 8, false)
		done()
	}
	count := func() int {
		n := 0
		for _, e := range winoCache.entries {
			for _, b := range bufs {
				if m := b.Bytes(); m != nil && uintptr(unsafe.Pointer(e.key)) == uintptr(unsafe.Pointer(&m[0])) {
					n++
				}
			}
		}
		return n
	}
	if n := count(); n != 2 {
		t.Fatalf("%d cache entries for the two buffers, want 2", n)
	}
	before := len(winoCache.entries)
	bufs[0].Free()
	if after := len(winoCache.entries); after != before-1 || count() != 1 {
		t.Fatalf("after freeing one buffer: %d entries (was %d), %d of the other buffer", after, before, count())
	}
	bufs[1].Free()
}
