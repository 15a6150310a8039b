package rt

import (
	"errors"
	"strings"
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

// maxAllocDev is a Device stub whose Alloc fails above MaxAlloc.
type maxAllocDev struct {
	Device
	max   int64
	sizes []int64
}

func (d *maxAllocDev) Info() DeviceInfo { return DeviceInfo{Backend: "stub", MaxAlloc: d.max} }

func (d *maxAllocDev) Alloc(n int64) (Buffer, error) {
	if n > d.max {
		return nil, &OOMError{Backend: "stub", Request: n, Heap: "stub heap", Detail: "over MaxAlloc"}
	}
	d.sizes = append(d.sizes, n)
	return stubBuf(n), nil
}

type stubBuf int64

func (b stubBuf) Size() int64 { return int64(b) }
func (b stubBuf) Free()       {}

// A request that fits MaxAlloc is not rounded past it; one that does not
// fit is an OOM error naming the request, the heap and the pool.
func TestMemPoolMaxAlloc(t *testing.T) {
	d := &maxAllocDev{max: 1000003}
	p := NewMemPool(d, MemPoolOptions{})
	b, err := p.Alloc(1000001)
	if err != nil {
		t.Fatal(err)
	}
	if b.Size() != 1000001 {
		t.Errorf("block of %d bytes for 1000001 under MaxAlloc 1000003", b.Size())
	}
	p.Free(b)
	_, err = p.Alloc(2000000)
	var oe *OOMError
	if !errors.As(err, &oe) || oe.Request != 2000000 || oe.Heap != "stub heap" || !strings.Contains(err.Error(), "pool (size class") {
		t.Errorf("over MaxAlloc: %v", err)
	}
	if st := p.Stats(); st.Cached != 0 || st.DeviceFrees != 1 {
		t.Errorf("the failed allocation did not trim the cache first: %+v", st)
	}
}
