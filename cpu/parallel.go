package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Parallel work runs on a persistent pool of worker goroutines: a kernel
// that splits its work posts a job, helps with it on the calling goroutine
// and returns when every chunk is done. No goroutine is started per op,
// and a job whose helpers do not show up (a loaded machine) is finished by
// the caller alone: helpers join a job only while it is open, and the
// caller closes it when no chunk is left, then waits only for the helpers
// that joined.

// workers is the number of goroutines a kernel may fan out to.
func workers() int { return runtime.GOMAXPROCS(0) }

// closedBit marks a job's state closed; the bits below count the helpers
// working on it.
const closedBit = 1 << 40

type job struct {
	n, grain int
	maxHelp  int64
	f1       func(lo, hi int)
	f2       func(w, lo, hi int)
	next     atomic.Int64
	joined   atomic.Int64
	state    atomic.Int64
	done     chan struct{}
}

var (
	jobPool  = sync.Pool{New: func() any { j := &job{done: make(chan struct{}, 1)}; j.state.Store(closedBit); return j }}
	requests = make(chan *job, 256)
	poolMu   sync.Mutex
	nHelpers atomic.Int64
)

// ensureHelpers starts pool goroutines until there are at least k.
func ensureHelpers(k int) {
	if int(nHelpers.Load()) >= k {
		return
	}
	poolMu.Lock()
	defer poolMu.Unlock()
	for int(nHelpers.Load()) < k {
		nHelpers.Add(1)
		go func() {
			for j := range requests {
				j.help()
			}
		}()
	}
}

// work runs chunks of grain items until none is left; w is the worker
// number (0 for the caller).
func (j *job) work(w int) {
	for {
		lo := int(j.next.Add(int64(j.grain))) - j.grain
		if lo >= j.n {
			return
		}
		hi := min(lo+j.grain, j.n)
		if j.f1 != nil {
			j.f1(lo, hi)
		} else {
			j.f2(w, lo, hi)
		}
	}
}

// help joins the job if it is still open and takes chunks of it.
func (j *job) help() {
	for {
		s := j.state.Load()
		if s&closedBit != 0 {
			return
		}
		if j.state.CompareAndSwap(s, s+1) {
			break
		}
	}
	if id := j.joined.Add(1); id <= j.maxHelp {
		j.work(int(id))
	}
	if j.state.Add(-1) == closedBit {
		j.done <- struct{}{}
	}
}

// runJob runs f1(lo, hi) or f2(w, lo, hi) over [0, n) in chunks of grain,
// on the caller and up to nw-1 pool helpers; w < nw is unique among the
// goroutines running at once.
func runJob(n, grain, nw int, f1 func(lo, hi int), f2 func(w, lo, hi int)) {
	if nw <= 1 || n <= grain {
		if f1 != nil {
			f1(0, n)
		} else {
			f2(0, 0, n)
		}
		return
	}
	ensureHelpers(nw - 1)
	j := jobPool.Get().(*job)
	j.n, j.grain, j.maxHelp, j.f1, j.f2 = n, grain, int64(nw-1), f1, f2
	j.next.Store(0)
	j.joined.Store(0)
	j.state.Store(0) // open
	for i := 0; i < nw-1; i++ {
		select {
		case requests <- j:
		default:
		}
	}
	j.work(0)
	if j.state.Add(closedBit) != closedBit {
		<-j.done
	}
	j.f1, j.f2 = nil, nil
	jobPool.Put(j)
}

// parallelFor splits [0, n) into chunks of at least grain items, about
// two per worker, and runs f on each, on the calling goroutine and up to
// workers()-1 pool helpers. Work below two grains runs on the caller.
func parallelFor(n, grain int, f func(lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	nw := min(workers(), n/grain)
	if nw <= 1 {
		f(0, n)
		return
	}
	chunk := max(grain, (n+2*nw-1)/(2*nw))
	runJob(n, chunk, nw, f, nil)
}

// elems views a byte slice (aligned for T) as a slice of T.
func elems[T any](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b) < sz {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz)
}

// asBytes views a slice of T as bytes.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}
