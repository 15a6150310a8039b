package cpu

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// withProcs runs f with GOMAXPROCS = n.
func withProcs(t *testing.T, n int, f func()) {
	t.Helper()
	old := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(old)
	f()
}

// TestRunHomesCoversOnce checks that runHomes (and homesFor) visits every index once,
// on workers numbered below nw, none of them twice at once, for ranges
// shorter and longer than the workers' homes.
func TestRunHomesCoversOnce(t *testing.T) {
	for _, procs := range []int{1, 2, 3, 4} {
		withProcs(t, procs, func() {
			for _, n := range []int{1, 2, 3, 7, 64, 1000, 4097} {
				for _, grain := range []int{1, 3, 100} {
					nw := min(procs, n)
					hits := make([]atomic.Int32, n)
					busy := make([]atomic.Int32, nw)
					runHomes(n, grain, nw, func(w, lo, hi int) {
						if w < 0 || w >= nw || lo < 0 || hi > n || lo >= hi {
							t.Errorf("n=%d grain=%d: worker %d of %d, range [%d,%d)", n, grain, w, nw, lo, hi)
							return
						}
						if busy[w].Add(1) != 1 {
							t.Errorf("n=%d grain=%d: worker %d runs twice at once", n, grain, w)
						}
						for i := lo; i < hi; i++ {
							hits[i].Add(1)
						}
						busy[w].Add(-1)
					})
					for i := range hits {
						if h := hits[i].Load(); h != 1 {
							t.Fatalf("procs=%d n=%d grain=%d: index %d visited %d times", procs, n, grain, i, h)
						}
					}
					homesFor(n, grain, func(lo, hi int) {
						for i := lo; i < hi; i++ {
							hits[i].Add(1)
						}
					})
					for i := range hits {
						if h := hits[i].Load(); h != 2 {
							t.Fatalf("homesFor procs=%d n=%d grain=%d: index %d visited %d times", procs, n, grain, i, h-1)
						}
					}
				}
			}
		})
	}
}

func TestParallelForCoversOnce(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		withProcs(t, procs, func() {
			for _, n := range []int{0, 1, 2, 3, 7, 64, 1000, 4097} {
				for _, grain := range []int{0, 1, 3, 100, 5000} {
					hits := make([]atomic.Int32, n)
					parallelFor(n, grain, func(lo, hi int) {
						if lo < 0 || hi > n || lo >= hi {
							t.Errorf("n=%d grain=%d: bad range [%d,%d)", n, grain, lo, hi)
							return
						}
						for i := lo; i < hi; i++ {
							hits[i].Add(1)
						}
					})
					for i := range hits {
						if h := hits[i].Load(); h != 1 {
							t.Fatalf("procs=%d n=%d grain=%d: index %d visited %d times", procs, n, grain, i, h)
						}
					}
				}
			}
		})
	}
}

// TestParallelForGuided checks the guided chunks: in the order they
// start, each is at least grain items (the last may be what is left),
// none is larger than the one before, the first is at most half a
// worker's share, and they shrink to grain by the end.
func TestParallelForGuided(t *testing.T) {
	withProcs(t, 2, func() {
		for _, c := range []struct{ n, grain int }{{1000, 1}, {4097, 3}, {97, 5}, {64, 16}} {
			var mu sync.Mutex
			var chunks [][2]int
			parallelFor(c.n, c.grain, func(lo, hi int) {
				mu.Lock()
				chunks = append(chunks, [2]int{lo, hi})
				mu.Unlock()
			})
			sort.Slice(chunks, func(a, b int) bool { return chunks[a][0] < chunks[b][0] })
			next := 0
			for i, ch := range chunks {
				size := ch[1] - ch[0]
				switch {
				case ch[0] != next:
					t.Fatalf("n=%d grain=%d: chunk %d starts at %d, want %d", c.n, c.grain, i, ch[0], next)
				case size < c.grain && ch[1] != c.n:
					t.Fatalf("n=%d grain=%d: chunk %d has %d items", c.n, c.grain, i, size)
				case i > 0 && size > chunks[i-1][1]-chunks[i-1][0]:
					t.Fatalf("n=%d grain=%d: chunk %d (%d items) is larger than the one before", c.n, c.grain, i, size)
				}
				next = ch[1]
			}
			if next != c.n {
				t.Fatalf("n=%d grain=%d: chunks end at %d", c.n, c.grain, next)
			}
			if first := chunks[0][1] - chunks[0][0]; first > max(c.grain, c.n/4) {
				t.Errorf("n=%d grain=%d: first chunk %d items, want at most %d", c.n, c.grain, first, max(c.grain, c.n/4))
			}
			if last := chunks[len(chunks)-1][1] - chunks[len(chunks)-1][0]; last > c.grain {
				t.Errorf("n=%d grain=%d: last chunk %d items, want at most grain", c.n, c.grain, last)
			}
		}
	})
}

// TestParallelConcurrentNested runs jobs from several goroutines at once,
// some nested inside others' chunks, and checks every index is covered
// once and worker numbers are unique among the goroutines of one job.
func TestParallelConcurrentNested(t *testing.T) {
	withProcs(t, 4, func() {
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for it := 0; it < 200; it++ {
					n := 50 + it%37
					var sum atomic.Int64
					parallelFor(n, 4, func(lo, hi int) {
						for i := lo; i < hi; i++ {
							var inner atomic.Int64
							parallelFor(8, 2, func(a, b int) { inner.Add(int64(b - a)) })
							if inner.Load() != 8 {
								t.Errorf("nested job covered %d of 8", inner.Load())
							}
							sum.Add(int64(i))
						}
					})
					if want := int64(n * (n - 1) / 2); sum.Load() != want {
						t.Errorf("sum %d, want %d", sum.Load(), want)
						return
					}
					var busy [3]atomic.Int32
					var cover atomic.Int64
					runJob(300, 7, 3, nil, func(w, lo, hi int) {
						if w < 0 || w >= 3 {
							t.Errorf("worker %d of 3", w)
							return
						}
						if busy[w].Add(1) != 1 {
							t.Errorf("worker number %d used by two goroutines at once", w)
						}
						cover.Add(int64(hi - lo))
						busy[w].Add(-1)
					})
					if cover.Load() != 300 {
						t.Errorf("runJob covered %d of 300", cover.Load())
					}
				}
			}()
		}
		wg.Wait()
	})
}

func TestParallelForNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	withProcs(t, 2, func() {
		var sink atomic.Int64
		f := func(lo, hi int) { sink.Add(int64(hi - lo)) }
		parallelFor(1000, 10, f)
		if a := testing.AllocsPerRun(100, func() { parallelFor(1000, 10, f) }); a != 0 {
			t.Errorf("parallelFor allocates %v times per call", a)
		}
	})
}

// TestSubmitNoAlloc: replaying a recorded stream of elementwise ops (fast
// and generic paths, small and parallel sizes) allocates nothing.
func TestSubmitNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: the race detector allocates (CI runs this test without it too)")
	}
	withProcs(t, 2, func() {
		d := NewDevice()
		defer d.Close()
		buf := func(dt rt.DType, n int) rt.Ref {
			b, err := d.Alloc(int64(n * dt.Size()))
			if err != nil {
				t.Fatal(err)
			}
			return rt.Ref{Buf: b, DType: dt, Shape: []int{n}}
		}
		s, err := d.NewStream(rt.StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, n := range []int{1, 1000, 1 << 17} {
			x, y := buf(rt.F32, n), buf(rt.F32, n)
			i32 := buf(rt.I32, n)
			row := buf(rt.F32, 1)
			row.Shape, row.Strides = []int{n}, []int{0}
			ops := []rt.Op{
				&rt.Fill{Y: x, Value: 0.5},
				&rt.Unary{Fn: rt.Relu, X: x, Y: y},
				&rt.Unary{Fn: rt.Tanh, X: x, Y: y},
				&rt.Binary{Fn: rt.Add, A: x, B: row, Y: y},
				&rt.Binary{Fn: rt.Pow, A: x, B: y, Y: y},
				&rt.Unary{Fn: rt.Copy, X: x, Y: i32},
			}
			for _, op := range ops {
				if err := s.Launch(op); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(20, func() {
			if err := s.Submit(); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("Submit allocates %v times per run", a)
		}
	})
}

// BenchmarkParallelJobs is the cost of back-to-back parallel jobs of two
// chunks of a few µs each (GOMAXPROCS 2), as a model's small ops are: ns
// per job (3400-3550 on a 2-vCPU Xeon). A caller or helper that
// blocks on a channel waits for the Go scheduler to wake a thread and
// steal it (tens of µs on a VM), which shows here as a mean well above
// that.
func BenchmarkParallelJobs(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var sink atomic.Int64
	spin := func(lo, hi int) {
		s := 0
		for i := lo * 4000; i < hi*4000; i++ {
			s += i * i >> 3
		}
		sink.Add(int64(s))
	}
	parallelFor(2, 1, spin)
	b.ResetTimer()
	for range b.N {
		parallelFor(2, 1, spin)
	}
}
