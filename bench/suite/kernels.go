package main

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/vrun-go/vrun/rt"
)

// timing bounds one measurement: at least minRuns timed repeats and
// minTime, at most maxRuns.
type timing struct {
	minTime          time.Duration
	minRuns, maxRuns int
}

// opBufs allocates the buffers of an op on d and frees them.
type opBufs struct {
	d    rt.Device
	bufs []rt.Buffer
}

// f32 allocates n f32 elements filled with deterministic non-zero
// values.
func (o *opBufs) f32(n int, fill bool) (rt.Ref, error) {
	b, err := o.d.Alloc(int64(4 * n))
	if err != nil {
		return rt.Ref{}, err
	}
	o.bufs = append(o.bufs, b)
	if fill {
		v := make([]float64, n)
		for i := range v {
			v[i] = 0.5*math.Sin(float64(i)*0.37) + 0.01
		}
		if err := o.d.Write(b, 0, rt.FromFloat64(rt.F32, v, n).Data); err != nil {
			return rt.Ref{}, err
		}
	}
	return rt.Ref{Buf: b, DType: rt.F32, Shape: []int{n}}, nil
}

func (o *opBufs) free() {
	for _, b := range o.bufs {
		b.Free()
	}
}

func gemmOp(o *opBufs, c gemmCase) (rt.Op, error) {
	n := c.N
	a, err := o.f32(n*n, true)
	if err != nil {
		return nil, err
	}
	b, err := o.f32(n*n, true)
	if err != nil {
		return nil, err
	}
	y, err := o.f32(n*n, false)
	if err != nil {
		return nil, err
	}
	return &rt.MatMul{A: a, B: b, Y: y, Batch: 1, M: n, N: n, K: n, Alpha: 1}, nil
}

func gemvOp(o *opBufs, c gemvCase) (rt.Op, error) {
	x, err := o.f32(c.K, true)
	if err != nil {
		return nil, err
	}
	w, err := o.f32(c.K*c.N, true)
	if err != nil {
		return nil, err
	}
	y, err := o.f32(c.N, false)
	if err != nil {
		return nil, err
	}
	return &rt.MatMul{A: x, B: w, Y: y, Batch: 1, M: 1, N: c.N, K: c.K, TransB: c.Form == "Ax", Alpha: 1}, nil
}

func convOp(o *opBufs, c convCase) (rt.Op, error) {
	oh := c.out()
	x, err := o.f32(c.N*c.C*c.H*c.H, true)
	if err != nil {
		return nil, err
	}
	w, err := o.f32(c.K*c.C/c.Groups*c.KH*c.KH, true)
	if err != nil {
		return nil, err
	}
	b, err := o.f32(c.K, true)
	if err != nil {
		return nil, err
	}
	y, err := o.f32(c.N*c.K*oh*oh, false)
	if err != nil {
		return nil, err
	}
	return &rt.Conv{X: x, W: w, Bias: b, Y: y, N: c.N, C: c.C, H: c.H, Width: c.H, K: c.K, OH: oh, OW: oh,
		KH: c.KH, KW: c.KH, StrideH: c.S, StrideW: c.S, PadT: c.P, PadL: c.P, DilH: 1, DilW: 1, Groups: c.Groups}, nil
}

// timeOp records op reps times into one stream, reps chosen so that one
// Submit takes about 2 ms (launch costs amortised on a GPU), and returns
// the median time of one op over the timed Submits, in ms, and their
// number.
func timeOp(d rt.Device, op rt.Op, tm timing) (float64, int, error) {
	if err := d.Supports(op); err != nil {
		return 0, 0, err
	}
	one, _, err := submits(d, op, 1, timing{minRuns: 2, maxRuns: 2})
	if err != nil {
		return 0, 0, err
	}
	reps := 1
	if one > 0 {
		reps = int(math.Ceil(2 / one))
	}
	reps = min(max(reps, 1), 64)
	return submits(d, op, reps, tm)
}

// submits times Submit+Wait of a stream with reps launches of op after
// one untimed Submit; it returns the median per op in ms.
func submits(d rt.Device, op rt.Op, reps int, tm timing) (float64, int, error) {
	s, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	for i := 0; i < reps; i++ {
		if err := s.Launch(op); err != nil {
			return 0, 0, err
		}
	}
	run := func() error {
		if err := s.Submit(); err != nil {
			return err
		}
		return s.Wait()
	}
	if err := run(); err != nil {
		return 0, 0, err
	}
	t, n, err := tm.median(run)
	return t / float64(reps), n, err
}

// minSample is the shortest time one sample may take: a millisecond, or 20
// ticks of a coarse clock (under Wine time.Now may move in steps of a
// millisecond or more). Runs shorter than that are timed several to a
// sample, so that no sample reads 0.
var minSample = sync.OnceValue(func() time.Duration {
	// The period between two changes of the clock, after waiting for one
	// (the wait alone is anywhere between 0 and a period); the longest of 3.
	var tick time.Duration
	for i := 0; i < 3; i++ {
		t1 := nextTick(time.Now())
		tick = max(tick, nextTick(t1).Sub(t1))
	}
	return max(time.Millisecond, 20*tick)
})

// nextTick waits until the clock reads later than t and returns that time.
func nextTick(t time.Time) time.Time {
	for {
		if u := time.Now(); u.Sub(t) > 0 {
			return u
		}
	}
}

// median times calls of run, after the caller's warm-up, and returns the
// median time of one call in ms and the number of samples: at least
// tm.minRuns and until tm.minTime has passed, at most tm.maxRuns, each
// sample as many calls as take minSample. Should the median still read 0
// (a clock coarser than minSample found), it measures again with 4 times
// the calls a sample.
func (tm timing) median(run func() error) (float64, int, error) {
	k := 1
	for {
		t0 := time.Now()
		for i := 0; i < k; i++ {
			if err := run(); err != nil {
				return 0, 0, err
			}
		}
		if time.Since(t0) >= minSample() || k >= 1<<20 {
			break
		}
		k *= 2
	}
	for {
		var ms []float64
		start := time.Now()
		for len(ms) < tm.maxRuns && (len(ms) < tm.minRuns || time.Since(start) < tm.minTime) {
			t0 := time.Now()
			for i := 0; i < k; i++ {
				if err := run(); err != nil {
					return 0, 0, err
				}
			}
			ms = append(ms, float64(time.Since(t0))/1e6/float64(k))
		}
		if m := median(ms); m > 0 || k >= 1<<22 {
			return m, len(ms), nil
		}
		k *= 4
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// kernelResults runs the kernel cases on d.
func kernelResults(d rt.Device, dev Device, cs caseSet, tm timing, logf func(string, ...any)) []Result {
	var out []Result
	run := func(kind, name string, work float64, unit string, mk func(*opBufs) (rt.Op, error)) {
		r := Result{Kind: kind, Case: name, Impl: "vrun", Device: dev.Spec, Class: dev.Class, Unit: unit}
		o := &opBufs{d: d}
		defer o.free()
		op, err := mk(o)
		if err == nil {
			r.MS, r.Runs, err = timeOp(d, op, tm)
		}
		if err != nil {
			r.Error = firstLine(err)
			r.MS, r.Runs = 0, 0
			logf("%s %s %s: %s", dev.Spec, kind, name, r.Error)
		} else {
			r.Rate = work / (r.MS / 1e3) / 1e9
			logf("%s %s %s: %.4g ms, %.4g %s", dev.Spec, kind, name, r.MS, r.Rate, unit)
		}
		out = append(out, r)
	}
	for _, c := range cs.gemm {
		run("gemm", c.name(), c.flops(), "GFLOP/s", func(o *opBufs) (rt.Op, error) { return gemmOp(o, c) })
	}
	for _, c := range cs.gemv {
		run("gemv", c.name(), c.bytes(), "GB/s", func(o *opBufs) (rt.Op, error) { return gemvOp(o, c) })
	}
	for _, c := range cs.conv {
		run("conv", c.Name, c.flops(), "GFLOP/s", func(o *opBufs) (rt.Op, error) { return convOp(o, c) })
	}
	return out
}

func firstLine(err error) string {
	s := err.Error()
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// rateOf turns a baseline's time into the rate of its case.
func rateOf(kind, name string, ms float64) (float64, string, error) {
	for _, c := range allGemm() {
		if kind == "gemm" && c.name() == name {
			return c.flops() / (ms / 1e3) / 1e9, "GFLOP/s", nil
		}
	}
	for _, c := range allGemv() {
		if kind == "gemv" && c.name() == name {
			return c.bytes() / (ms / 1e3) / 1e9, "GB/s", nil
		}
	}
	for _, c := range allConv() {
		if kind == "conv" && c.Name == name {
			return c.flops() / (ms / 1e3) / 1e9, "GFLOP/s", nil
		}
	}
	return 0, "", fmt.Errorf("unknown %s case %q", kind, name)
}

func allSets() []caseSet {
	return []caseSet{casesFor(ClassGPU, false, false), casesFor(ClassCPU, false, false), casesFor(ClassCPU, true, false), casesFor(ClassCPU, false, true)}
}

func allGemm() (v []gemmCase) {
	for _, s := range allSets() {
		v = append(v, s.gemm...)
	}
	return v
}

func allGemv() (v []gemvCase) {
	for _, s := range allSets() {
		v = append(v, s.gemv...)
	}
	return v
}

func allConv() (v []convCase) {
	for _, s := range allSets() {
		v = append(v, s.conv...)
	}
	return v
}
