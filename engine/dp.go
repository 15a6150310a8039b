package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// NewDataParallel plans a data-parallel training step of m over devs: the
// parameters are replicated on every device, each step splits its batch
// (the leading dim of every input) into len(devs) shares as dist.Split
// gives them, runs forward and backward of each share on its device
// concurrently, and all-reduces the gradients to the mean weighted by the
// shares' sizes — the gradient of the whole batch when the loss is a mean
// over the batch, as the train package's losses are. The loss StepResult
// reports is the same weighted mean; outputs whose leading dim is the
// batch are joined in device order.
//
// Gradients are reduced in buckets of whole parameters of about
// opts.BucketBytes (25 MB by default), the last parameters first — the
// order in which backward produces their gradients (GradBuckets). Two
// paths (opts.Collective):
//
//   - NCCL, when every device is a CUDA device on a GPU of its own and
//     libnccl.so.2 (2.10 or later) loads: one communicator over the GPUs
//     (ncclCommInitAll); after each device's forward and backward stream
//     is submitted, one NCCL group of ncclAllReduce(ncclAvg) calls, one
//     per bucket and rank, is enqueued in place on the gradient block, on
//     each device's own CUstream — no host round trip and no host
//     synchronisation between backward and the all-reduce. Every device
//     then steps its own optimizer on the identical gradients (the
//     replicas stay identical: one backend, the same kernels). A step
//     whose shares are unequal (a batch not divisible by the device
//     count) needs the weighted mean, which ncclAvg is not: that step
//     all-reduces through the host instead.
//   - The host path (Vulkan, OpenCL, CPU, mixed lists, several logical
//     devices of one GPU: the single-host path): the blocks are read into
//     (pinned) host memory, reduced and written to devs[0], pipelined in
//     slices of at most 4 MB within the buckets, each device's reads
//     starting as soon as its backward pass is done; the optimizer step
//     (with gradient clipping) runs on devs[0] alone and the parameters
//     are copied to the others, so the replicas stay bit-identical even
//     on mixed backends.
//
// Both paths overlap the reduction with backward unless
// opts.NoOverlap: with two or more groups of buckets (buckets finished by
// the same launch form a group), each device's forward and backward is
// recorded in one segment per group and a tail, and group j is reduced
// while segment j+1 runs (overlap.go). Otherwise each device records
// forward and backward as one stream and the buckets are reduced after
// it; on the host path one device's reduction still overlaps the other
// devices' compute.
//
// BatchNormalization in training mode normalises each share by its own
// statistics (PyTorch DistributedDataParallel without SyncBatchNorm), and
// the running statistics are those of devs[0], copied to the other
// devices after each step (DDP's broadcast_buffers). Dropout masks are
// drawn for the whole batch from one generator, as on one device, and
// split with the batch, so a run with Dropout follows the single-device
// run. InputGrads is not supported.
//
// Weights, Grads, State, Eval and Profile read devs[0]; SetWeights writes
// every device (SetState too, on the NCCL path). The caller keeps
// ownership of m and of the devices; one device listed twice is an error
// (open a backend twice for two logical devices on one physical one). A
// single device gives a plain NewTrainer, unless opts.Collective is
// "nccl": then a one-rank communicator.
func NewDataParallel(m *model.Model, devs []rt.Device, opts TrainOptions) (*Trainer, error) {
	if len(devs) == 0 {
		return nil, errors.New("engine: data-parallel trainer: no devices")
	}
	for i, d := range devs {
		if d == nil {
			return nil, fmt.Errorf("engine: data-parallel trainer: device %d is nil", i)
		}
		for j := range i {
			if devs[j] == d {
				return nil, fmt.Errorf("engine: data-parallel trainer: device %s is listed twice (positions %d and %d)", d.Info().Spec(), j, i)
			}
		}
	}
	if len(devs) == 1 && opts.Collective != "nccl" && opts.NCCL == nil {
		return NewTrainer(m, devs[0], opts)
	}
	if len(opts.InputGrads) > 0 {
		return nil, errors.New("engine: data-parallel trainer: InputGrads is not supported on several devices")
	}
	shapes := make([]map[string][]int, len(devs))
	if len(opts.Shapes) > 0 {
		n, err := batchOf(opts.Shapes, len(devs))
		if err != nil {
			return nil, err
		}
		rows := dist.Split(n, len(devs))
		for k := range devs {
			shapes[k] = map[string][]int{}
			for name, sh := range opts.Shapes {
				shapes[k][name] = append([]int{rows[k]}, sh[1:]...)
			}
		}
	}
	g, err := newNCCLGroup(devs, opts.Collective, opts.NCCL)
	if err != nil {
		return nil, err
	}
	var reps []*Trainer
	closeAll := func() {
		for _, r := range reps {
			r.Close()
		}
		if g != nil {
			g.destroy()
		}
	}
	for k, d := range devs {
		o := opts
		o.Shapes = shapes[k]
		if k > 0 {
			if g == nil {
				o.Optimizer = nil // the update runs on devs[0] (see stepDP)
			}
			o.Profile = false
		}
		r, err := NewTrainer(m, d, o)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("engine: data-parallel trainer: device %d (%s): %w", k, d.Info().Spec(), err)
		}
		r.s.splitOpt = true // the optimizer step is a stream of its own, after the reduction
		reps = append(reps, r)
	}
	t := reps[0]
	t.reps = reps[1:]
	t.stage = &dist.Staging{}
	t.nccl = g
	sizes := make([]int64, len(t.params))
	for i, p := range t.params {
		sizes[i] = int64(len(m.Tensors[p].Data))
	}
	bucket := opts.BucketBytes
	if bucket <= 0 {
		bucket = dist.DefaultGradBucketBytes
	}
	t.buckets = dist.BucketsByParam(sizes, bucket)
	return t, nil
}

// GradBuckets returns the gradient buckets of a data-parallel trainer,
// the last parameters first (dist.BucketsByParam): byte ranges of the
// flat gradient block, whose parameters are listed in block order by
// State().Params. A step without overlap reduces them in this order; an
// overlapped step in the order backward finishes them, which may differ
// (a layer's weight gradient comes before its bias's). It is nil for a
// single-device trainer.
func (t *Trainer) GradBuckets() []dist.Bucket {
	return append([]dist.Bucket(nil), t.buckets...)
}

// Collective names how the trainer all-reduces gradients: "nccl", "host"
// for a data-parallel trainer that reduces through host memory, or ""
// for a single-device trainer.
func (t *Trainer) Collective() string {
	switch {
	case t.nccl != nil:
		return "nccl"
	case len(t.reps) > 0:
		return "host"
	}
	return ""
}

// bucketsBytes is the number of bytes that bs cover.
func bucketsBytes(bs []dist.Bucket) int64 {
	var n int64
	for _, b := range bs {
		n += b.Len
	}
	return n
}

// batchOf returns the leading dim that every shape shares, and checks it
// against the device count.
func batchOf(shapes map[string][]int, devs int) (int, error) {
	n, first := -1, ""
	for _, name := range sortedKeys(shapes) {
		sh := shapes[name]
		if len(sh) == 0 {
			return 0, fmt.Errorf("engine: data-parallel step: input %q is a scalar; every input needs the batch as its leading dim", name)
		}
		if n >= 0 && sh[0] != n {
			return 0, fmt.Errorf("engine: data-parallel step: input %q has %d rows, input %q %d; every input needs the batch as its leading dim", name, sh[0], first, n)
		}
		n, first = sh[0], name
	}
	if n < devs {
		return 0, fmt.Errorf("engine: data-parallel step: a batch of %d samples cannot be split over %d devices: %w", n, devs, ErrBatchTooSmall)
	}
	return n, nil
}

// replica returns trainer k of a data-parallel group (0 is t).
func (t *Trainer) replica(k int) *Trainer {
	if k == 0 {
		return t
	}
	return t.reps[k-1]
}

// execAcquire takes a context for the first part of a split training
// step (forward and backward, and the output reads) and fills its inputs;
// execRun runs it, and execFinish must follow either.
func (s *Session) execAcquire(ctx context.Context, ps *planState, feed func(i int, t *tensor, dst []byte) error) (*execCtx, error) {
	c, err := s.acquire(ctx, ps)
	if err != nil {
		return nil, err
	}
	for i, t := range ps.p.inputs {
		if err := feed(i, t, c.inBufs[i]); err != nil {
			s.release(ps, c)
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		s.release(ps, c)
		return nil, err
	}
	return c, nil
}

// execRun submits c's first part and waits for it.
func (s *Session) execRun(ps *planState, c *execCtx) error {
	if err := s.execSubmit(ps, c); err != nil {
		return err
	}
	return s.execWait(ps, c)
}

// execSubmit submits c's first part: with segments, all but the last
// run to completion and the last is submitted (execCtx.submitFB).
func (s *Session) execSubmit(ps *planState, c *execCtx) error {
	if err := c.submitFB(); err != nil {
		ps.p.nameIndexError(err)
		return fmt.Errorf("engine: submit: %w", err)
	}
	return nil
}

// execWait waits for c's first part (and whatever was enqueued after it
// on its last stream).
func (s *Session) execWait(ps *planState, c *execCtx) error {
	if err := c.waitFB(); err != nil {
		ps.p.nameIndexError(err)
		return fmt.Errorf("engine: run: %w", err)
	}
	return nil
}

// execFinish runs the optimizer stream of c when opt is set, returns the
// outputs and releases c.
func (s *Session) execFinish(ps *planState, c *execCtx, opt bool) (map[string]*rt.Tensor, error) {
	defer s.release(ps, c)
	p := ps.p
	var ts []time.Duration
	if s.opts.Profile {
		ts = c.timings()
	}
	if opt && c.opt != nil {
		if err := c.opt.Submit(); err != nil {
			return nil, fmt.Errorf("engine: submit: %w", err)
		}
		if err := c.opt.Wait(); err != nil {
			return nil, fmt.Errorf("engine: optimizer step: %w", err)
		}
		if s.opts.Profile {
			ts = append(ts, c.opt.Timings()...)
		}
	}
	if s.opts.Profile {
		prof := profileOf(p, ts)
		s.mu.Lock()
		s.lastProf = prof
		s.mu.Unlock()
	}
	out := make(map[string]*rt.Tensor, len(p.outputs))
	for i, x := range p.outputs {
		out[x.name] = &rt.Tensor{DType: x.dtype, Shape: append([]int{}, x.shape...), Data: append([]byte(nil), c.outBufs[i]...)}
	}
	return out, nil
}

// devErr names replica k's device in err.
func (t *Trainer) devErr(k int, err error) error {
	return fmt.Errorf("engine: data-parallel step: device %d (%s): %w", k, t.replica(k).s.dev.Info().Spec(), err)
}

// stepDP is Step on a data-parallel group (see NewDataParallel).
func (t *Trainer) stepDP(ctx context.Context, inputs map[string]*rt.Tensor) (StepResult, error) {
	shapes, err := t.inputShapes(inputs)
	if err != nil {
		return StepResult{}, err
	}
	R := 1 + len(t.reps)
	n, err := batchOf(shapes, R)
	if err != nil {
		return StepResult{}, err
	}
	rows := dist.Split(n, R)
	starts := make([]int, R+1)
	for k, r := range rows {
		starts[k+1] = starts[k] + r
	}
	// Each share's inputs: rows [starts[k], starts[k+1]) of every input.
	shards := make([]map[string]*rt.Tensor, R)
	pss := make([]*planState, R)
	for k := range R {
		shards[k] = map[string]*rt.Tensor{}
		sh := map[string][]int{}
		for name, x := range inputs {
			per := len(x.Data) / n
			s := append([]int{rows[k]}, x.Shape[1:]...)
			shards[k][name] = &rt.Tensor{DType: x.DType, Shape: s, Data: x.Data[starts[k]*per : starts[k+1]*per]}
			sh[name] = s
		}
		if pss[k], err = t.replica(k).trainPlan(sh); err != nil {
			return StepResult{}, t.devErr(k, err)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	step := t.steps + 1
	feeds, err := t.dpMasks(pss, rows)
	if err != nil {
		return StepResult{}, err
	}
	groups := t.overlapPlan(pss) // before the contexts are recorded
	p0 := pss[0].p
	cs := make([]*execCtx, R)
	errs := make([]error, R)
	release := func() {
		for k, c := range cs {
			if c != nil {
				t.replica(k).s.execFinish(pss[k], c, false)
				cs[k] = nil
			}
		}
	}
	parallel := func(f func(k int) error) error {
		var wg sync.WaitGroup
		for k := range R {
			wg.Go(func() {
				if err := f(k); err != nil {
					errs[k] = t.devErr(k, err)
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	// Take every device's context and fill its inputs (recording its
	// streams on first use).
	if err := parallel(func(k int) error {
		p := pss[k].p
		var err error
		cs[k], err = t.replica(k).s.execAcquire(ctx, pss[k], func(i int, x *tensor, dst []byte) error {
			switch {
			case (k == 0 || t.nccl != nil) && x == p.hyper:
				h := t.optim.hyper(step, t.lr)
				copy(dst, rt.FromFloat64(x.dtype, h, len(h)).Data)
			case feeds[k][i] != nil:
				copy(dst, feeds[k][i])
			default:
				copy(dst, shards[k][x.name].Data)
			}
			return nil
		})
		return err
	}); err != nil {
		release()
		return StepResult{}, err
	}
	// The gradient blocks, reduced into device 0 as each device finishes
	// its backward pass: a device's reads start while slower devices still
	// compute.
	var grads *dist.Array
	if g := p0.paramsG; g != nil {
		sh := make([]dist.Shard, R)
		for k := range R {
			pg := pss[k].p.paramsG
			if pg == nil || pg.bytes() != g.bytes() {
				release()
				return StepResult{}, t.devErr(k, errors.New("the replica's gradient block differs from device 0's"))
			}
			sh[k] = dist.Shard{Dev: t.replica(k).s.dev, Buf: cs[k].arena, Off: pg.root.offset, Shape: pg.shape}
		}
		var err error
		if grads, err = dist.View(g.dtype, g.shape, dist.Replicated, sh); err != nil {
			release()
			return StepResult{}, fmt.Errorf("engine: data-parallel step: gradients: %w", err)
		}
	}
	even := true
	for _, r := range rows {
		even = even && r == rows[0]
	}
	overlap := groups != nil && grads != nil && segmented(cs, groups)
	if t.nccl != nil && even && overlap && ordered(cs) {
		// NCCL, overlapped: the all-reduce of each group of buckets
		// runs beside the next segment of backward (overlap.go).
		if err := t.stepNCCLOverlap(pss, cs); err != nil {
			release()
			return StepResult{}, fmt.Errorf("engine: data-parallel step: %w", err)
		}
	} else if t.nccl != nil && even {
		// NCCL: every stream runs forward and backward, then the
		// all-reduce of each bucket in place (ncclAvg: the shares are
		// equal), with no host round trip; each replica then steps its
		// own optimizer on the identical gradients.
		serr := parallel(func(k int) error { return t.replica(k).s.execSubmit(pss[k], cs[k]) })
		var nerr error
		if serr == nil && grads != nil {
			last := make([]rt.Stream, R)
			for k, c := range cs {
				last[k] = c.lastFB()
			}
			nerr = t.nccl.allReduce(pss, cs, t.buckets, last)
		}
		clear(errs)
		werr := parallel(func(k int) error { return t.replica(k).s.execWait(pss[k], cs[k]) })
		if err := errors.Join(serr, nerr, werr); err != nil {
			release()
			return StepResult{}, fmt.Errorf("engine: data-parallel step: %w", err)
		}
	} else {
		var ro dist.ReduceOptions
		if grads != nil {
			w := make([]float64, R)
			for k, r := range rows {
				w[k] = float64(r)
			}
			ro = dist.ReduceOptions{Weights: w, BucketBytes: t.opts.BucketBytes, Staging: t.stage}
			if sum := bucketsBytes(t.buckets); sum == grads.Shards[0].Bytes(grads.DType) {
				// Within each gradient bucket, the pipeline's steps
				// of at most 4 MB (or BucketBytes, when smaller).
				step := int64(dist.DefaultBucketBytes)
				if b := t.opts.BucketBytes; b > 0 && b < step {
					step = b
				}
				ro.Buckets = dist.SplitBuckets(t.buckets, grads.DType.Size(), step)
			} else {
				overlap = false
			}
		}
		if overlap {
			// Each group of buckets is reduced as soon as every
			// device has run its segment of backward (overlap.go);
			// unequal shares on an NCCL group reduce into every
			// device (see below).
			derr, rerr := t.stepHostOverlap(pss, cs, grads, ro, t.nccl != nil)
			if derr != nil {
				release()
				return StepResult{}, derr
			}
			if rerr != nil {
				release()
				return StepResult{}, fmt.Errorf("engine: data-parallel step: gradients: %w", rerr)
			}
		} else if err := t.stepHost(pss, cs, grads, ro, parallel); err != nil {
			release()
			return StepResult{}, err
		}
	}
	c0 := cs[0]
	outs := make([]map[string]*rt.Tensor, R)
	for k := R - 1; k >= 0; k-- {
		out, err := t.replica(k).s.execFinish(pss[k], cs[k], k == 0 || t.nccl != nil)
		cs[k] = nil
		if err != nil {
			release()
			return StepResult{}, t.devErr(k, err)
		}
		outs[k] = out
	}
	if err := t.syncReplicas(); err != nil {
		return StepResult{}, err
	}
	t.steps = step
	t.last, t.lastC = pss[0], c0 // c0's arena keeps the reduced gradients (Grads)
	out := joinOutputs(outs, rows, n)
	return StepResult{Loss: out[t.opts.Loss].Float64(0), Outputs: out}, nil
}

// dpMasks draws the Dropout masks of a data-parallel step: for each mask
// of replica 0's plan, in input order, the mask of the whole batch as
// one device would draw it, split by rows. A mask whose leading dim is
// not the batch is drawn for each replica in turn.
func (t *Trainer) dpMasks(pss []*planState, rows []int) ([][][]byte, error) {
	R := len(pss)
	feeds := make([][][]byte, R)
	for k := range R {
		feeds[k] = make([][]byte, len(pss[k].p.inputs))
	}
	ratio := func(p *plan, x *tensor) float64 {
		for _, mk := range p.masks {
			if mk.t == x {
				return mk.ratio
			}
		}
		return 0
	}
	draw := func(r float64, v []float64) {
		for i := range v {
			v[i] = 0
			if t.rng.Float64() >= r {
				v[i] = 1 / (1 - r)
			}
		}
	}
	// The masks of each plan, in input order (replica 0's plan also has
	// the optimizer's input, so input indices differ).
	masks := make([][]int, R)
	for k := range R {
		for i, x := range pss[k].p.inputs {
			if ratio(pss[k].p, x) > 0 {
				masks[k] = append(masks[k], i)
			}
		}
		if len(masks[k]) != len(masks[0]) {
			return nil, t.devErr(k, fmt.Errorf("the replica has %d Dropout masks, device 0 %d", len(masks[k]), len(masks[0])))
		}
	}
	p0 := pss[0].p
	for j, i0 := range masks[0] {
		x := p0.inputs[i0]
		r := ratio(p0, x)
		batched := len(x.shape) > 0 && x.shape[0] == rows[0]
		for k := range R {
			xk := pss[k].p.inputs[masks[k][j]]
			if xk.name != x.name || ratio(pss[k].p, xk) != r {
				return nil, t.devErr(k, fmt.Errorf("the Dropout masks differ from device 0's"))
			}
			if xs := xk.shape; len(xs) == 0 || xs[0] != rows[k] || !slices.Equal(xs[1:], x.shape[1:]) {
				batched = false
			}
		}
		if batched {
			per := int(rt.NumElements(x.shape[1:]))
			total := 0
			for _, n := range rows {
				total += n
			}
			v := make([]float64, total*per)
			draw(r, v)
			at := 0
			for k := range R {
				m := rows[k] * per
				feeds[k][masks[k][j]] = rt.FromFloat64(x.dtype, v[at:at+m], m).Data
				at += m
			}
			continue
		}
		for k := range R {
			xk := pss[k].p.inputs[masks[k][j]]
			v := make([]float64, rt.NumElements(xk.shape))
			draw(r, v)
			feeds[k][masks[k][j]] = rt.FromFloat64(xk.dtype, v, len(v)).Data
		}
	}
	return feeds, nil
}

// joinOutputs combines the replicas' outputs: those whose leading dim is
// each share's row count are joined along it; float scalars become the
// mean weighted by the rows; anything else is replica 0's.
func joinOutputs(outs []map[string]*rt.Tensor, rows []int, n int) map[string]*rt.Tensor {
	res := map[string]*rt.Tensor{}
	for name, x0 := range outs[0] {
		batched, size := true, 0
		for k, o := range outs {
			x := o[name]
			if x == nil || len(x.Shape) == 0 || x.Shape[0] != rows[k] || !slices.Equal(x.Shape[1:], x0.Shape[1:]) || x.DType != x0.DType {
				batched = false
				break
			}
			size += len(x.Data)
		}
		switch {
		case batched:
			res[name] = concatRows(outs, name, n, size)
		case x0.DType.IsFloat() && x0.Len() == 1:
			v := 0.0
			for k, o := range outs {
				v += float64(rows[k]) / float64(n) * o[name].Float64(0)
			}
			res[name] = rt.FromFloat64(x0.DType, []float64{v}, x0.Shape...)
		default:
			res[name] = x0
		}
	}
	return res
}

// syncReplicas copies the trained parameters (one flat block) and the
// running statistics of replica 0 to the others; t.mu must be held.
func (t *Trainer) syncReplicas() error {
	type region struct {
		key  string // weight-buffer key
		data []byte
	}
	if len(t.reps) == 0 {
		return nil
	}
	s := t.s
	s.mu.Lock()
	var regs []region
	if s.weights != nil {
		var keys []string
		if _, ok := s.wOffs["p:params"]; ok && t.optim != nil && t.nccl == nil {
			keys = append(keys, "p:params")
		}
		for i := range t.names {
			if k := fmt.Sprint("w:", i); !slices.Contains(t.params, i) {
				if _, ok := s.wOffs[k]; ok {
					keys = append(keys, k)
				}
			}
		}
		for _, key := range keys {
			n := t.regionBytes(key)
			b := make([]byte, n)
			if err := s.dev.Read(b, s.weights.buf, s.wOffs[key]); err != nil {
				s.mu.Unlock()
				return t.devErr(0, fmt.Errorf("reading %s: %w", key, err))
			}
			regs = append(regs, region{key, b})
		}
	}
	s.mu.Unlock()
	errs := make([]error, len(t.reps))
	var wg sync.WaitGroup
	for j, r := range t.reps {
		wg.Go(func() {
			rs := r.s
			rs.mu.Lock()
			defer rs.mu.Unlock()
			for _, g := range regs {
				off, ok := rs.wOffs[g.key]
				if !ok || rs.weights == nil {
					errs[j] = t.devErr(j+1, fmt.Errorf("%s is not on the device", g.key))
					return
				}
				if err := rs.dev.Write(rs.weights.buf, off, g.data); err != nil {
					errs[j] = t.devErr(j+1, fmt.Errorf("writing %s: %w", g.key, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// regionBytes is the size of a weight-buffer region named by key: the
// flat parameter block or one weight.
func (t *Trainer) regionBytes(key string) int64 {
	m := t.s.m
	if key == "p:params" {
		var n int64
		for _, i := range t.params {
			n += int64(len(m.Tensors[i].Data))
		}
		return n
	}
	var i int
	fmt.Sscan(key[2:], &i)
	return int64(len(m.Tensors[i].Data))
}

// stepHost runs every replica's forward and backward and reduces the
// gradients through the host with ro (into devs[0]; on an NCCL group,
// whose shares are unequal, into every device), each device's reads
// starting as soon as its backward pass is done. parallel runs a
// function per replica and names the failing devices.
func (t *Trainer) stepHost(pss []*planState, cs []*execCtx, grads *dist.Array, ro dist.ReduceOptions, parallel func(func(k int) error) error) error {
	R := len(cs)
	ready := make([]chan error, R)
	ro.Ready = make([]<-chan error, R)
	for k := range ready {
		ready[k] = make(chan error, 1)
		ro.Ready[k] = ready[k]
	}
	var rerr error
	done := make(chan error, 1)
	go func() {
		done <- parallel(func(k int) error {
			err := t.replica(k).s.execRun(pss[k], cs[k])
			ready[k] <- err
			return err
		})
	}()
	if grads != nil {
		if t.nccl != nil {
			// Unequal shares on the NCCL group: the weighted mean,
			// which ncclAvg cannot give, through the host, to every
			// device, whose optimizers all step.
			rerr = grads.AllReduce(dist.Mean, ro)
		} else {
			rerr = grads.Reduce(0, dist.Mean, ro)
		}
	}
	if err := <-done; err != nil { // a device's own error, rather than the reduction's report of it
		return err
	}
	if rerr != nil {
		return fmt.Errorf("engine: data-parallel step: gradients: %w", rerr)
	}
	return nil
}
