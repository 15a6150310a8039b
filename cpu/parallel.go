package cpu

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Parallel work runs on a persistent pool of worker goroutines: a kernel
// that splits its work posts a job, helps with it on the calling goroutine
// and returns when every chunk is done. Idle helpers poll for the next job
// for spinNS before they block, and the caller polls for its helpers
// likewise. No goroutine is started per op,
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
	div      int // > 0: guided chunks of max(grain, remaining/div)
	// homes, when not nil, splits [0, n) into one contiguous range a
	// worker (see runHomes); home i is [homes[i].next, homes[i].end).
	homes   []home
	hbuf    []home
	maxHelp int64
	f1      func(lo, hi int)
	f2      func(w, lo, hi int)
	next    atomic.Int64
	joined  atomic.Int64
	state   atomic.Int64
	done    chan struct{}
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
		go helperLoop()
	}
}

// spinNS is how long, in nanoseconds, an idle pool helper polls for the
// next job before it blocks, and a caller polls for its helpers to finish
// before it blocks (0: block at once); VRUN_CPU_SPIN sets it in µs.
// Blocking costs a wake-up through the Go scheduler and the OS on each
// side of every parallel op (tens of µs on this VM), which for
// MobileNetV2's 50 parallel ops of 20-300 µs made two threads slower
// than one. With both threads given the cores (chrt -f 10, load 12-14),
// `go run ./bench/ort` mobilenet_v2 went from 7.09 / 7.14 ms (0) to 4.85 /
// 4.67 (200 µs), 4.82 / 4.93 (50 µs) and 5.68 (20 µs); onnxruntime's
// threads spin likewise.
var spinNS int64 = 200_000

func init() {
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_SPIN")); err == nil {
		spinNS = int64(v) * 1000
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_HOMES")); err == nil {
		homesMode = v
	}
}

// helperLoop runs jobs from requests: after each it polls for the next
// one for up to spinNS before it blocks, so that the jobs of consecutive
// ops find it awake.
func helperLoop() {
	for {
		var j *job
		select {
		case j = <-requests:
		default:
			j = pollJob()
			if j == nil {
				j = <-requests
			}
		}
		j.help()
	}
}

// pollJob polls requests for up to spinNS; nil if nothing came.
func pollJob() *job {
	if spinNS <= 0 {
		return nil
	}
	start := time.Now()
	for i := 1; ; i++ {
		if len(requests) > 0 {
			select {
			case j := <-requests:
				return j
			default:
			}
		}
		if i&63 == 0 && time.Since(start) > time.Duration(spinNS) {
			return nil
		}
	}
}

// work runs chunks until none is left: of grain items, or, guided (div
// > 0), of max(grain, remaining/div) items, so that the chunks shrink
// toward the end of the job and the workers finish together. w is the
// worker number (0 for the caller).
func (j *job) work(w int) {
	for {
		var lo, hi int
		var ok bool
		if j.homes != nil {
			lo, hi, ok = j.takeHome(w)
		} else {
			lo, hi, ok = j.take()
		}
		if !ok {
			return
		}
		if j.f1 != nil {
			j.f1(lo, hi)
		} else {
			j.f2(w, lo, hi)
		}
	}
}

// home is a worker's range of a runHomes job.
type home struct {
	next atomic.Int64
	end  int64
	_    [48]byte // a cache line each
}

// takeHome claims the next chunk for worker w of a runHomes job: half of
// what is left of its own range (at least grain items), or, once that is
// empty, half of what is left of another's.
func (j *job) takeHome(w int) (lo, hi int, ok bool) {
	nh := len(j.homes)
	for k := range nh {
		h := &j.homes[(w+k)%nh]
		for {
			l := h.next.Load()
			if l >= h.end {
				break
			}
			e := min(h.end, l+max(int64(j.grain), (h.end-l)/2))
			if h.next.CompareAndSwap(l, e) {
				return int(l), int(e), true
			}
		}
	}
	return 0, 0, false
}

// take claims the next chunk [lo, hi); false when none is left.
func (j *job) take() (lo, hi int, ok bool) {
	if j.div <= 0 {
		lo = int(j.next.Add(int64(j.grain))) - j.grain
		return lo, min(lo+j.grain, j.n), lo < j.n
	}
	for {
		l := j.next.Load()
		lo = int(l)
		if lo >= j.n {
			return 0, 0, false
		}
		hi = min(j.n, lo+max(j.grain, (j.n-lo)/j.div))
		if j.next.CompareAndSwap(l, int64(hi)) {
			return lo, hi, true
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
	runGuided(n, grain, 0, nw, f1, f2)
}

// runGuided is runJob with guided chunks when div > 0 (see job.work).
func runGuided(n, grain, div, nw int, f1 func(lo, hi int), f2 func(w, lo, hi int)) {
	runSplit(n, grain, div, nw, false, f1, f2)
}

// homesMode turns runHomes's home ranges off (-1: guided chunks as
// parallelFor's, and directConv splits the channels first again) for
// tests and benchmarks (VRUN_CPU_HOMES).
var homesMode = 0

// runHomes runs f over [0, n) on nw workers, each starting on a home
// range of its own, the w-th of nw equal contiguous ranges, in chunks of
// half of what is left of it (at least grain items), then helping with
// the others' (see job.takeHome). The caller is worker 0 and the
// helpers take the next numbers as they join; with two workers the one
// helper is worker 1 in every job. So consecutive ops that split the
// rows of their planes this way give each core mostly the rows it
// wrote: on a 2-vCPU Zen 5, a core read 1.6 MB that the other had just
// written in 47 µs, and its own in 19 µs. In-process A/B of 60
// alternating rounds of 10 runs, 2 threads, homes off → on (directConv's
// bands and 1×1 row chunks): squeezenet1_1 median 3.87 → 3.59 ms and
// 4.40 → 4.10 (two runs), mobilenet_v2 5.74 → 5.38 and 5.53 → 5.16,
// resnet18 level (16.35 → 16.26). maxPool33 split by bands of rows
// likewise lost against its split by planes (squeezenet's pools at 2
// threads, ms: 0.115-0.120 → 0.120, 0.057-0.063 → 0.079, 0.048-0.061 →
// 0.103), and so did dw3Conv by bands of rows (its kernels given a first
// row; mobilenet_v2 median 5.26 → 5.46 and 5.07 → 5.32 ms), so both keep
// their split by planes.
func runHomes(n, grain, nw int, f func(w, lo, hi int)) {
	runSplit(n, grain, 2*nw, nw, homesMode >= 0, nil, f)
}

// homesFor is parallelFor with each worker starting on its home range
// (runHomes).
func homesFor(n, grain int, f func(lo, hi int)) { splitFor(n, grain, homesMode >= 0, f) }

// runSplit is runGuided, with home ranges (runHomes) when homes is set.
func runSplit(n, grain, div, nw int, homes bool, f1 func(lo, hi int), f2 func(w, lo, hi int)) {
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
	j.n, j.grain, j.div, j.maxHelp, j.f1, j.f2 = n, grain, div, int64(nw-1), f1, f2
	j.homes = nil
	if homes {
		if cap(j.hbuf) < nw {
			j.hbuf = make([]home, nw)
		}
		j.homes = j.hbuf[:nw]
		for i := range j.homes {
			j.homes[i].next.Store(int64(i * n / nw))
			j.homes[i].end = int64((i + 1) * n / nw)
		}
	}
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
	if s := j.state.Add(closedBit); s != closedBit {
		// Poll for the helpers that joined before blocking; the last one
		// to leave sends on done either way. Poll for that send, not for
		// the state it follows: a receive that blocks makes the sender
		// wake this goroutine, which then waits in the sender's run queue
		// for an idle thread to steal it (tens of µs on a VM).
		if spinNS > 0 {
			start := time.Now()
			for i := 1; len(j.done) == 0; i++ {
				if i&63 == 0 && time.Since(start) > time.Duration(spinNS) {
					break
				}
			}
		}
		<-j.done
	}
	j.f1, j.f2 = nil, nil
	jobPool.Put(j)
}

// parallelFor splits [0, n) into chunks of at least grain items and runs
// f on each, on the calling goroutine and up to workers()-1 pool helpers.
// Work below two grains runs on the caller. The chunks are guided: each
// takes half a worker's share of what is left (the first ones about
// n/(2·workers), as fixed chunks did), down to grain, so that a helper
// that joins late or runs slower leaves its partner at most one small
// chunk to wait for. On this 2-vCPU VM, the time the caller spent waiting
// for its helper per model run (2 threads, 100 runs) went from
// 1.66-2.39 ms to 0.80 ms on resnet18, 0.87-0.95 to 0.53-0.58 on
// mobilenet_v2 and 0.51-1.19 to 0.47-0.54 on squeezenet1_1. Their run
// times, fixed and guided chunks alternating in one process (600 runs
// each): squeezenet1_1 2-3 % faster at the 10th, 25th and 50th
// percentiles, the other two level within 0.5 %.
func parallelFor(n, grain int, f func(lo, hi int)) { splitFor(n, grain, false, f) }

// splitFor is parallelFor, with home ranges (runHomes) when homes is set.
func splitFor(n, grain int, homes bool, f func(lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	nw := min(workers(), n/grain)
	if nw <= 1 {
		f(0, n)
		return
	}
	runSplit(n, grain, 2*nw, nw, homes, f, nil)
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
