package rt

import (
	"testing"
)

func TestSizeClass(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {4095, 4096}, {4096, 4096},
		{4097, 4608}, {5000, 5120}, {1<<20 + 3, 1<<20 + 1<<17}, {3 << 20, 3 << 20},
	} {
		if got := SizeClass(c.n); got != c.want {
			t.Errorf("SizeClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	// Every class holds its request, wastes at most 12.5% above 4 KiB,
	// is a fixed point, and classes grow with the request.
	prev := int64(0)
	for n := int64(1); n < 1<<34; n = n*5/4 + 7 {
		c := SizeClass(n)
		if c < n || (n > 4096 && c-n > n/8) || SizeClass(c) != c || c < prev {
			t.Fatalf("SizeClass(%d) = %d (previous class %d)", n, c, prev)
		}
		prev = c
	}
}

func TestPoolStatsString(t *testing.T) {
	s := MemPoolStats{InUse: 3 << 20, Reserved: 4 << 20, Blocks: 2, PeakInUse: 3 << 20, PeakReserved: 4 << 20}
	if f := s.Fragmentation(); f != 0.25 {
		t.Errorf("Fragmentation = %v, want 0.25", f)
	}
	if (MemPoolStats{}).Fragmentation() != 0 {
		t.Errorf("empty pool fragmentation is not 0")
	}
	want := "in use 3.0 MiB in 2 blocks, reserved 4.0 MiB (cached 0 B in 0 blocks), peak 3.0 MiB in use / 4.0 MiB reserved, fragmentation 25.0%; 0 allocations (0 reused, 0 device allocs, 0 device frees)"
	if got := s.String(); got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
}
