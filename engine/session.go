package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Options configures a Session.
type Options struct {
	// Shapes binds input shapes, by input name, for inputs with dynamic
	// dims. Inputs not named here use the model's static shape. Run
	// re-plans when it is given inputs of other shapes.
	Shapes map[string][]int
	// Parallel is the most runs that may execute at once, each with its
	// own arena; 0 means 1 (runs are serialised).
	Parallel int
	// Profile records per-op device times, read with Session.Profile.
	Profile bool
	// FoldDevice evaluates the nodes whose inputs are all constants (shape
	// subgraphs, transposed or cast weights) while planning. nil means a
	// device of the "cpu" backend opened through the rt registry for each
	// plan, which needs that backend registered (import _
	// "github.com/vrun-go/vrun/cpu"); planning a model with such nodes
	// fails otherwise. The caller keeps ownership of FoldDevice, which must
	// outlive the session.
	FoldDevice rt.Device
}

// Session is a model planned for one device, ready to run.
type Session struct {
	m    *model.Model
	dev  rt.Device
	opts Options

	mu      sync.Mutex
	plans   map[string]*planState // by input-shape key
	last    *planState
	closed  bool
	weights *weightBuf       // shared by all plans
	wOffs   map[string]int64 // weight-buffer offsets of shared tensors, by weightKey
	wSize   int64
	mode    planMode // how plans are made (training sessions: mutable weights)

	lastProf []OpTime
}

type planState struct {
	p    *plan
	key  string
	pool chan *execCtx // free contexts
	all  []*execCtx
	made int
}

// weightBuf is one generation of the weight buffer. When a new plan
// grows the weights, the old generation stays allocated while runs
// recorded against it are in flight.
type weightBuf struct {
	buf   rt.Buffer
	users int // runs in flight bound to buf
}

// execCtx is one arena with its recorded stream.
type execCtx struct {
	arena   rt.Buffer
	stream  rt.Stream
	inBufs  [][]byte
	outBufs [][]byte
	stale   bool       // weights moved: re-record before the next run
	w       *weightBuf // the weights the stream is recorded against
}

// New plans m on dev. The caller keeps ownership of m and dev, which must
// outlive the session.
func New(m *model.Model, dev rt.Device, opts Options) (*Session, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 1
	}
	s := &Session{m: m, dev: dev, opts: opts, plans: map[string]*planState{}}
	shapes := map[string][]int{}
	for _, i := range m.Inputs() {
		t := m.Tensors[i]
		if sh, ok := opts.Shapes[t.Name]; ok {
			shapes[t.Name] = sh
		}
	}
	for name := range opts.Shapes {
		if i := m.TensorIndex(name); i < 0 || m.Tensors[i].Role != model.Input {
			return nil, fmt.Errorf("engine: shape given for %q, which is not a model input", name)
		}
	}
	if _, err := s.planFor(shapes); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func shapeKey(shapes map[string][]int, m *model.Model) string {
	var b strings.Builder
	for _, i := range m.Inputs() {
		fmt.Fprintf(&b, "%v;", shapes[m.Tensors[i].Name])
	}
	return b.String()
}

// planFor returns the plan for the given input shapes, creating it (and
// uploading any weights it needs) on first use. s.mu must not be held.
func (s *Session) planFor(shapes map[string][]int) (*planState, error) {
	return s.planMode(shapes, s.mode, "")
}

// planMode is planFor with an explicit mode; tag tells plans of other
// modes for the same shapes apart.
func (s *Session) planMode(shapes map[string][]int, mode planMode, tag string) (*planState, error) {
	key := tag + shapeKey(shapes, s.m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("engine: session %w", rt.ErrClosed)
	}
	if ps, ok := s.plans[key]; ok {
		return ps, nil
	}
	p, err := newPlan(s.m, shapes, mode, s.opts.FoldDevice)
	if err != nil {
		return nil, err
	}
	for _, st := range p.steps {
		for _, op := range st.ops {
			if err := s.dev.Supports(op); err != nil {
				return nil, &PlanError{Node: st.node.Name, Op: st.node.Op, Err: err}
			}
		}
	}
	if err := s.uploadWeights(p); err != nil {
		return nil, err
	}
	ps := &planState{p: p, key: key, pool: make(chan *execCtx, s.opts.Parallel)}
	s.plans[key] = ps
	s.last = ps
	return ps, nil
}

// weightKey names a weight-buffer tensor shared by the session's plans:
// model weights by index, plan-level blocks (parameters, optimizer state)
// by name. Plan-time constants have no key: each plan uploads its own.
func (s *Session) weightKey(t *tensor) string {
	if t.persist != "" {
		return "p:" + t.persist
	}
	if t.id < len(s.m.Tensors) && s.m.Tensors[t.id].Role == model.Weight {
		return fmt.Sprint("w:", t.id)
	}
	return ""
}

// uploadWeights uploads the plan's weight-buffer tensors. Model weights
// and persistent blocks are shared between plans (a trained parameter
// keeps its trained value); plan-time constants are appended per plan.
func (s *Session) uploadWeights(p *plan) error {
	if s.wOffs == nil {
		s.wOffs = map[string]int64{}
	}
	var need []*tensor
	for _, t := range p.tensors {
		if t.root != t || t.where != inWeights || t.block != nil || (!t.used && t.persist == "") {
			continue
		}
		if key := s.weightKey(t); key != "" {
			if off, ok := s.wOffs[key]; ok {
				t.offset = off
				continue
			}
		}
		need = append(need, t)
	}
	defer func() {
		for _, t := range p.tensors {
			if t.block != nil {
				t.offset = t.block.offset + t.blockOff
			}
		}
	}()
	if len(need) == 0 {
		return nil
	}
	// Grow the weight buffer: allocate a new one holding old and new data.
	size := s.wSize
	offs := make([]int64, len(need))
	for i, t := range need {
		offs[i] = size
		size += (t.bytes() + arenaAlign - 1) &^ (arenaAlign - 1)
	}
	buf, err := s.dev.Alloc(max(size, arenaAlign))
	if err != nil {
		return fmt.Errorf("engine: weights (%d bytes): %w", size, err)
	}
	if s.weights != nil && s.wSize > 0 {
		old := make([]byte, s.wSize)
		if err := s.dev.Read(old, s.weights.buf, 0); err != nil {
			buf.Free()
			return fmt.Errorf("engine: weights: %w", err)
		}
		if err := s.dev.Write(buf, 0, old); err != nil {
			buf.Free()
			return fmt.Errorf("engine: weights: %w", err)
		}
	}
	for i, t := range need {
		data := t.value
		if data == nil {
			data = t.init
		}
		if err := s.dev.Write(buf, offs[i], data.Data); err != nil {
			buf.Free()
			return fmt.Errorf("engine: upload %q: %w", t.name, err)
		}
	}
	for i, t := range need {
		t.offset = offs[i]
		if key := s.weightKey(t); key != "" {
			s.wOffs[key] = offs[i]
		}
	}
	if old := s.weights; old != nil {
		// Earlier plans' ops are bound to the old buffer: re-bind them.
		for _, ps := range s.plans {
			for _, c := range ps.all {
				c.stale = true
			}
		}
		// Runs in flight still read it; the last one frees it.
		if old.users == 0 {
			old.buf.Free()
		}
	}
	s.weights, s.wSize = &weightBuf{buf: buf}, size
	return nil
}

// unpin ends a run's use of w; s.mu must be held. A replaced generation
// is freed by its last user.
func (s *Session) unpin(w *weightBuf) {
	if w == nil {
		return
	}
	w.users--
	if w.users == 0 && w != s.weights {
		w.buf.Free()
	}
}

// newCtx allocates an arena and records the plan into a fresh stream.
func (s *Session) newCtx(ps *planState) (*execCtx, error) {
	p := ps.p
	arena, err := s.dev.Alloc(max(p.arena, arenaAlign))
	if err != nil {
		return nil, fmt.Errorf("engine: arena (%d bytes): %w", p.arena, err)
	}
	st, err := s.dev.NewStream(rt.StreamOptions{Profile: s.opts.Profile})
	if err != nil {
		arena.Free()
		return nil, fmt.Errorf("engine: %w", err)
	}
	c := &execCtx{arena: arena, stream: st}
	for _, t := range p.inputs {
		c.inBufs = append(c.inBufs, make([]byte, t.bytes()))
	}
	for _, t := range p.outputs {
		c.outBufs = append(c.outBufs, make([]byte, t.bytes()))
	}
	return c, nil
}

// record records the whole run into c.stream, bound to c.w.
func (s *Session) record(p *plan, c *execCtx) error {
	c.stream.Reset()
	for i, t := range p.inputs {
		if err := c.stream.Write(c.arena, t.offset, c.inBufs[i]); err != nil {
			return fmt.Errorf("engine: input %q: %w", t.name, err)
		}
	}
	for _, st := range p.steps {
		for _, op := range st.ops {
			bound := s.bind(op, c.arena, c.w)
			if err := c.stream.Launch(bound); err != nil {
				return &PlanError{Node: st.node.Name, Op: st.node.Op, Err: err}
			}
		}
	}
	for i, t := range p.outputs {
		buf, off := s.location(t, c.arena, c.w)
		if len(c.outBufs[i]) == 0 {
			continue
		}
		if err := c.stream.Read(c.outBufs[i], buf, off); err != nil {
			return fmt.Errorf("engine: output %q: %w", t.name, err)
		}
	}
	return nil
}

func (s *Session) location(t *tensor, arena rt.Buffer, w *weightBuf) (rt.Buffer, int64) {
	if t.root.where == inWeights {
		return w.buf, t.root.offset
	}
	return arena, t.root.offset
}

// bind returns a copy of op with placeholder slots replaced by real
// buffers and offsets.
func (s *Session) bind(op rt.Op, arena rt.Buffer, w *weightBuf) rt.Op {
	op = rt.CloneOp(op)
	rt.MapRefs(op, func(_ string, r *rt.Ref) {
		sl, ok := r.Buf.(slot)
		if !ok {
			return
		}
		buf, off := s.location(sl.t, arena, w)
		r.Buf = buf
		r.Off += off
	})
	return op
}

// Run runs the model on inputs (by input name) and returns the outputs by
// name. It is safe for concurrent use.
func (s *Session) Run(ctx context.Context, inputs map[string]*rt.Tensor) (map[string]*rt.Tensor, error) {
	shapes := map[string][]int{}
	for _, i := range s.m.Inputs() {
		name := s.m.Tensors[i].Name
		t, ok := inputs[name]
		if !ok || t == nil {
			return nil, fmt.Errorf("engine: missing input %q", name)
		}
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("engine: input %q: %w", name, err)
		}
		if t.DType != s.m.Tensors[i].DType {
			return nil, fmt.Errorf("engine: input %q has dtype %s, model wants %s", name, t.DType, s.m.Tensors[i].DType)
		}
		shapes[name] = t.Shape
	}
	for name := range inputs {
		if i := s.m.TensorIndex(name); i < 0 || s.m.Tensors[i].Role != model.Input {
			return nil, fmt.Errorf("engine: %q is not a model input", name)
		}
	}
	ps, err := s.planFor(shapes)
	if err != nil {
		return nil, err
	}
	out, _, err := s.exec(ctx, ps, func(i int, t *tensor, dst []byte) error {
		copy(dst, inputs[t.name].Data)
		return nil
	}, nil)
	return out, err
}

// exec runs plan ps once: feed fills each plan input's staging bytes
// (model inputs, and a training plan's masks and optimizer values), and
// after, when set, reads device state before the context is released.
func (s *Session) exec(ctx context.Context, ps *planState, feed func(i int, t *tensor, dst []byte) error,
	after func(c *execCtx) error) (map[string]*rt.Tensor, *execCtx, error) {
	c, err := s.acquire(ctx, ps)
	if err != nil {
		return nil, nil, err
	}
	defer s.release(ps, c)
	p := ps.p
	for i, t := range p.inputs {
		if err := feed(i, t, c.inBufs[i]); err != nil {
			return nil, nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := c.stream.Submit(); err != nil {
		return nil, nil, fmt.Errorf("engine: submit: %w", err)
	}
	if err := c.stream.Wait(); err != nil {
		return nil, nil, fmt.Errorf("engine: run: %w", err)
	}
	if s.opts.Profile {
		prof := profileOf(p, c.stream.Timings())
		s.mu.Lock()
		s.lastProf = prof
		s.mu.Unlock()
	}
	out := make(map[string]*rt.Tensor, len(p.outputs))
	for i, t := range p.outputs {
		out[t.name] = &rt.Tensor{DType: t.dtype, Shape: append([]int{}, t.shape...), Data: append([]byte(nil), c.outBufs[i]...)}
	}
	if after != nil {
		if err := after(c); err != nil {
			return nil, nil, err
		}
	}
	return out, c, nil
}

// acquire takes a free context of ps, creating one while fewer than
// Parallel exist, or waits for one.
func (s *Session) acquire(ctx context.Context, ps *planState) (*execCtx, error) {
	var c *execCtx
	select {
	case c = <-ps.pool:
	default:
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("engine: session %w", rt.ErrClosed)
		}
		grow := ps.made < s.opts.Parallel
		if grow {
			ps.made++
		}
		s.mu.Unlock()
		if !grow {
			select {
			case c = <-ps.pool:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			break
		}
		nc, err := s.newCtx(ps)
		s.mu.Lock()
		if err != nil {
			ps.made--
			s.mu.Unlock()
			return nil, err
		}
		nc.stale = true // record on first use, below
		ps.all = append(ps.all, nc)
		s.mu.Unlock()
		c = nc
	}
	if err := s.ensureRecorded(ps, c); err != nil {
		s.mu.Lock()
		c.stale = true // a partial recording must not be replayed
		s.mu.Unlock()
		s.release(ps, c)
		return nil, err
	}
	return c, nil
}

// release ends a run on c and returns c to its pool.
func (s *Session) release(ps *planState, c *execCtx) {
	s.mu.Lock()
	s.unpin(c.w)
	s.mu.Unlock()
	ps.pool <- c
}

// ensureRecorded re-records c if its stream was reset (weights moved),
// and pins the weights c is recorded against until release.
func (s *Session) ensureRecorded(ps *planState, c *execCtx) error {
	s.mu.Lock()
	stale := c.stale
	c.stale = false
	if stale {
		c.w = s.weights
	}
	if c.w != nil { // nil: the model has no weights
		c.w.users++
	}
	s.mu.Unlock()
	if stale {
		return s.record(ps.p, c)
	}
	return nil
}

// Close frees the session's device memory. It waits for no runs: the
// caller must not close a session while runs are in flight.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, ps := range s.plans {
		for _, c := range ps.all {
			if c.stream != nil {
				errs = append(errs, c.stream.Close())
			}
			c.arena.Free()
		}
	}
	if s.weights != nil {
		s.weights.buf.Free()
		s.weights = nil
	}
	return errors.Join(errs...)
}
