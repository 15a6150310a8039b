package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/rt"
)

// Overlapping the gradient reduction of a data-parallel step with the
// rest of backward.
//
// The gradient buckets are ordered by the launch that last touches them
// in the recorded forward and backward (the backward pass finishes the
// last layers' gradients first), and buckets finished by the same launch
// form a group. Each replica's recording is cut into one segment per
// group, ending at the launch that finishes the group's buckets on that
// replica, and a tail (the rest of backward and the output reads). A step
// then reduces group j as soon as every replica has run segment j, while
// the replicas run segment j+1:
//
//   - through the host: each replica's goroutine runs its segments in
//     order (submit, wait) and reports each one; the calling goroutine
//     reduces group j (dist.Array.Reduce, gated on the reports of segment
//     j) while the replicas compute the next segments;
//   - through NCCL: the host submits segment j on every GPU, orders
//     segment j+1 after it on the device (rt.OrderedStream: a CUDA event,
//     no host wait), then enqueues the all-reduce of group j on segment
//     j's stream, so that the all-reduce runs beside segment j+1.
//
// Later segments never touch a reduced group's bytes (that is how the
// cuts are chosen), and nothing else shares them: the gradient block
// lives in the arena from its first write to the end of the step.

// refSpan returns the bytes [lo, hi) of its root tensor that operand o
// addresses, relative to the root's start; ok is false when they are
// not known.
func refSpan(o rt.Operand) (lo, hi int64, ok bool) {
	r := o.Ref
	es := int64(r.DType.Size())
	if es <= 0 {
		return 0, 0, false
	}
	if !o.Strided {
		if o.Need < 0 {
			return 0, 0, false
		}
		return r.Off, r.Off + o.Need*es, true
	}
	st := r.StridesOrContiguous()
	if len(st) != len(r.Shape) {
		return 0, 0, false
	}
	lo, hi = r.Off, r.Off
	for i, d := range r.Shape {
		if d <= 0 {
			return r.Off, r.Off, true // no elements
		}
		s := int64(st[i]) * int64(d-1) * es
		if s < 0 {
			lo += s
		} else {
			hi += s
		}
	}
	return lo, hi + es, true
}

// gradTouch returns, for each bucket of the flat gradient block, the
// index of the last launch of the recorded forward and backward (in
// recording order, Session.record) that reads or writes any of its
// bytes, or -1 when none does; and the number of those launches.
func (p *plan) gradTouch(buckets []dist.Bucket) ([]int, int) {
	last := make([]int, len(buckets))
	for i := range last {
		last[i] = -1
	}
	steps := p.steps
	if p.optFrom > 0 {
		steps = steps[:p.optFrom]
	}
	g := p.paramsG
	launch := 0
	for _, st := range steps {
		for _, op := range st.ops {
			ops := rt.Operands(op)
			if ops == nil { // an op the table does not know: it may touch anything
				for i := range last {
					last[i] = launch
				}
			}
			for _, o := range ops {
				if o.Ref == nil || g == nil {
					continue
				}
				sl, isSlot := o.Ref.Buf.(slot)
				if !isSlot || sl.t.root != g {
					continue
				}
				lo, hi, ok := refSpan(o)
				if !ok {
					lo, hi = 0, g.bytes()
				}
				for i, b := range buckets {
					if lo < b.Off+b.Len && b.Off < hi {
						last[i] = launch
					}
				}
			}
			launch++
		}
	}
	return last, launch
}

// overlapGroups orders the buckets by the launch that last touches them
// (ties keep the bucket order) and groups those finished by the same
// launch: the reduction order of an overlapped step, as bucket indices.
// It returns nil when that leaves fewer than two groups (nothing to
// overlap).
func overlapGroups(last []int) [][]int {
	idx := make([]int, len(last))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return last[a] - last[b] })
	var groups [][]int
	for n, i := range idx {
		if n > 0 && last[i] == last[idx[n-1]] {
			groups[len(groups)-1] = append(groups[len(groups)-1], i)
			continue
		}
		groups = append(groups, []int{i})
	}
	if len(groups) < 2 {
		return nil
	}
	return groups
}

// maxOverlapGroups bounds the segments of an overlapped step: each
// segment is a stream of its own (on CUDA a graph, a cuBLAS handle and
// its workspace), so many small buckets are merged into fewer groups.
const maxOverlapGroups = 8

// mergeGroups merges consecutive groups (in order) into at most n,
// each of about an n-th of the bytes of all (size gives a bucket's).
func mergeGroups(groups [][]int, size func(i int) int64, n int) [][]int {
	if len(groups) <= n {
		return groups
	}
	bytes := make([]int64, len(groups))
	var total int64
	for j, g := range groups {
		for _, i := range g {
			bytes[j] += size(i)
		}
		total += bytes[j]
	}
	var out [][]int
	var acc int64 // bytes of the groups merged so far
	for j, g := range groups {
		left := len(groups) - j // groups not yet placed, this one included
		// Start a new group when this one would take the merged groups
		// past their share of the bytes, or when every remaining group
		// needs one of its own.
		if len(out) == 0 || left <= n-len(out) || (len(out) < n && (acc+bytes[j])*int64(n) > total*int64(len(out))) {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], g...)
		acc += bytes[j]
	}
	return out
}

// segmentCuts returns, for a plan whose buckets are last touched at
// last, the launch index at which each segment after the first starts:
// segment j (j < len(groups)) ends once every bucket of groups[0..j] is
// finished, and the tail follows the last group.
func segmentCuts(last []int, groups [][]int) []int {
	cuts := make([]int, len(groups))
	end := 0
	for j, g := range groups {
		for _, i := range g {
			end = max(end, last[i]+1)
		}
		cuts[j] = end
	}
	return cuts
}

// overlapPlan returns the bucket groups a data-parallel step reduces
// between segments of backward, or nil when it does not overlap
// (TrainOptions.NoOverlap, fewer than two groups, buckets that do not
// tile the gradient block). The groups are decided on the first step,
// from replica 0's plan; each plan of the step gets its segment cuts
// when it first needs them (and its contexts recorded without them are
// recorded again). t.mu must be held.
func (t *Trainer) overlapPlan(pss []*planState) [][]int {
	if t.opts.NoOverlap || len(t.buckets) < 2 {
		return nil
	}
	if !t.groupsSet {
		t.groupsSet = true
		p0 := pss[0].p
		if g := p0.paramsG; g != nil && bucketsBytes(t.buckets) == g.bytes() {
			last, _ := p0.gradTouch(t.buckets)
			t.groups = mergeGroups(overlapGroups(last), func(i int) int64 { return t.buckets[i].Len }, maxOverlapGroups)
		}
	}
	if t.groups == nil {
		return nil
	}
	for k, ps := range pss {
		p := ps.p
		if p.segSet {
			continue
		}
		last, _ := p.gradTouch(t.buckets)
		s := t.replica(k).s
		s.mu.Lock()
		p.segCuts, p.segSet = segmentCuts(last, t.groups), true
		for _, c := range ps.all {
			c.stale = true
		}
		s.mu.Unlock()
	}
	return t.groups
}

// groupBuckets returns the buckets of group g.
func (t *Trainer) groupBuckets(g []int) []dist.Bucket {
	out := make([]dist.Bucket, len(g))
	for n, i := range g {
		out[n] = t.buckets[i]
	}
	return out
}

// segmented reports whether every context has one segment per group and
// a tail, as an overlapped step needs.
func segmented(cs []*execCtx, groups [][]int) bool {
	for _, c := range cs {
		if len(c.segs) != len(groups) {
			return false
		}
	}
	return true
}

// note calls the trainer's test hook, if any.
func (t *Trainer) note(kind string, dev, seg int) {
	if t.hook != nil {
		t.hook(kind, dev, seg)
	}
}

// runSegment submits segment j of c and waits for it.
func (s *Session) runSegment(ps *planState, c *execCtx, j int) error {
	st := c.fb()[j]
	err := st.Submit()
	if err == nil {
		err = c.segErr(j, st.Wait())
	}
	if err != nil {
		ps.p.nameIndexError(err)
		return fmt.Errorf("engine: run: %w", err)
	}
	return nil
}

// stepHostOverlap runs every replica's forward and backward segment by
// segment, each on a goroutine of its own, and reduces the bucket groups
// through the host on the calling goroutine (with ro, into devs[0], or
// into every device with all), group j as soon as every replica has run
// segment j. It returns the first device error, then the reduction's.
func (t *Trainer) stepHostOverlap(pss []*planState, cs []*execCtx, grads *dist.Array, ro dist.ReduceOptions, all bool) (devErr, redErr error) {
	R, G := len(cs), len(t.groups)
	ready := make([][]chan error, G)
	for j := range ready {
		ready[j] = make([]chan error, R)
		for k := range R {
			ready[j][k] = make(chan error, 1)
		}
	}
	errs := make([]error, R)
	var wg sync.WaitGroup
	for k := range R {
		wg.Go(func() {
			s := t.replica(k).s
			for j := range G + 1 {
				t.note("start", k, j)
				err := s.runSegment(pss[k], cs[k], j)
				if err != nil {
					errs[k] = t.devErr(k, err)
					for jj := j; jj < G; jj++ {
						ready[jj][k] <- err
					}
					return
				}
				t.note("done", k, j)
				if j < G {
					ready[j][k] <- nil
				}
			}
		})
	}
	es := grads.DType.Size()
	limit := int64(dist.DefaultBucketBytes)
	if b := t.opts.BucketBytes; b > 0 && b < limit {
		limit = b
	}
	for j, g := range t.groups {
		o := ro
		o.Ready = make([]<-chan error, R)
		for k := range R {
			o.Ready[k] = ready[j][k]
		}
		o.Buckets = dist.SplitBuckets(t.groupBuckets(g), es, limit)
		if all {
			redErr = grads.AllReduce(dist.Mean, o)
		} else {
			redErr = grads.Reduce(0, dist.Mean, o)
		}
		if redErr != nil {
			break
		}
		t.note("reduced", -1, j)
	}
	wg.Wait()
	return errors.Join(errs...), redErr
}

// stepNCCLOverlap submits every replica's forward and backward segment
// by segment on its GPU, each segment ordered after the previous one on
// the device (rt.OrderedStream, no host wait), and enqueues the NCCL
// all-reduce of group j on segment j's streams right after ordering
// segment j+1, so that the all-reduce runs beside segment j+1. It then
// waits for every stream. Every context must be segmented and its
// streams ordered streams.
func (t *Trainer) stepNCCLOverlap(pss []*planState, cs []*execCtx) error {
	R, G := len(cs), len(t.groups)
	fbs := make([][]rt.Stream, R)
	for k := range R {
		fbs[k] = cs[k].fb()
	}
	submitted := make([]int, R) // the streams of each replica to wait for
	var err error
loop:
	for j := range G + 1 {
		for k := range R {
			t.note("start", k, j)
			if e := fbs[k][j].Submit(); e != nil {
				err = t.devErr(k, fmt.Errorf("engine: submit: %w", e))
				break loop
			}
			submitted[k] = j + 1
		}
		if j == G {
			break
		}
		streams := make([]rt.Stream, R)
		for k := range R {
			streams[k] = fbs[k][j]
			if e := fbs[k][j+1].(rt.OrderedStream).After(fbs[k][j]); e != nil {
				err = t.devErr(k, fmt.Errorf("engine: ordering segment %d: %w", j+1, e))
				break loop
			}
		}
		if e := t.nccl.allReduce(pss, cs, t.groupBuckets(t.groups[j]), streams); e != nil {
			err = e
			break
		}
		t.note("enqueued", -1, j)
	}
	errs := make([]error, R)
	var wg sync.WaitGroup
	for k := range R {
		wg.Go(func() {
			for j, st := range fbs[k][:submitted[k]] {
				if e := st.Wait(); e != nil && errs[k] == nil {
					e = cs[k].segErr(j, e)
					pss[k].p.nameIndexError(e)
					errs[k] = t.devErr(k, fmt.Errorf("engine: run: %w", e))
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(append(errs, err)...)
}

// ordered reports whether every segment stream of cs can be ordered on
// the device (rt.OrderedStream), as stepNCCLOverlap needs.
func ordered(cs []*execCtx) bool {
	for _, c := range cs {
		for _, st := range c.segs {
			if _, ok := st.(rt.OrderedStream); !ok {
				return false
			}
		}
	}
	return true
}
