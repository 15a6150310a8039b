package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Options configures a Session.
type Options struct {
	// Shapes binds input shapes, by input name, for inputs with dynamic
	// dims. Inputs not named here use the model's shape, with each dynamic
	// dim taken from Dims by its name, or 1. Run re-plans when it is given
	// inputs of other shapes.
	Shapes map[string][]int
	// Dims binds dynamic dims by name ("batch": 4) for the inputs that
	// Shapes does not name. Every name must be a dim name of some input.
	Dims map[string]int
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
	// NoFusion keeps the optional fused ops (rt.Fused, rt.Attention) out
	// of the plans, as on a device without them: every op is one of the
	// primitive set. Runs with and without it agree within the dtype's
	// rounding.
	NoFusion bool
	// Precision is the dtype the constant weights of MatMul (Gemm, Linear)
	// and Conv ops are stored in on the device: rt.F32 (or 0, the
	// default), or rt.F16, which rounds each weight once to f16 after
	// every plan-time fold (BatchNorm into Conv, bias folding) while
	// activations, biases and accumulation stay f32. It halves the
	// weight memory and traffic. Ops whose device lacks f16 weights keep
	// f32 ones (Info.PrecisionNotes says which); planning fails with an
	// error wrapping the device's *rt.UnsupportedError when the device
	// takes none of them in f16. Outputs then differ from f32 runs by the
	// weights' rounding: within about 2e-3 of sum |x||w| per output (the
	// f16 unit roundoff 2^-11 is 4.9e-4). Training ignores it.
	Precision rt.DType
}

// Session is a model planned for one device, ready to run.
type Session struct {
	m    *model.Model
	dev  rt.Device
	opts Options

	mu      sync.Mutex
	plans   map[string]*planState // by input-shape key
	chunks  map[string]*chunkPlan // by input-shape key: runs split into batch chunks
	last    *planState
	lastCh  *chunkPlan // the last run's chunking, if it was split
	closed  bool
	closing chan struct{}    // closed by Close: wakes runs waiting for a context
	flight  sync.WaitGroup   // runs between acquire and release
	weights *weightBuf       // shared by all plans
	wOffs   map[string]int64 // weight-buffer offsets of shared tensors, by weightKey
	wSize   int64
	mode    planMode // how plans are made (training sessions: mutable weights)
	// splitOpt records a training plan's optimizer step into a second
	// stream (execCtx.opt), run after the gradients have been reduced
	// across data-parallel replicas (dp.go).
	splitOpt bool
	valIn    []string // graph inputs planned by value, in model order (values.go)

	lastProf []OpTime

	// pool holds the session's device tensors (RunDevice outputs) and
	// pinned staging (the contexts' input and output bytes).
	pool *rt.MemPool

	init    map[string][]int // the shapes New planned
	outOnce sync.Once
	outInfo []TensorInfo
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
//
// inBufs are the bytes feed fills: where the arena is host-visible
// (rt.Mapper: the CPU, unified memory) they are the inputs' places in the
// arena itself (inView), so that an input is copied once, from the
// caller's tensor into the arena, and the recording has no input Writes;
// otherwise pinned host memory from the session's pool, which the
// stream's Writes copy to the device without a staging copy. outBufs are
// likewise views of the outputs in mapped memory (no Reads recorded), or
// pinned memory (outOwn) that the recorded Reads fill.
type execCtx struct {
	arena   rt.Buffer
	stream  rt.Stream
	inBufs  [][]byte
	outBufs [][]byte
	outOwn  [][]byte
	hosts   []rt.HostBuffer // pinned memory behind inBufs and outOwn
	inView  bool            // inBufs alias the mapped arena
	devIO   bool            // recorded for RunDevice: no host Writes or Reads
	hostIO  bool            // the recording for host runs has Writes or Reads
	stale   bool            // weights moved: re-record before the next run
	opt     rt.Stream       // the optimizer step, with Session.splitOpt
	w       *weightBuf      // the weights the stream is recorded against
	// segs continue stream when the plan's forward and backward are
	// recorded in segments (plan.segCuts: a data-parallel step that
	// overlaps the gradient reduction with backward); starts[j] is the
	// launch index segment j (stream, then segs[j-1]) starts at.
	segs   []rt.Stream
	starts []int
}

// fb returns c's forward-and-backward streams in order: stream, then
// the segments that continue it.
func (c *execCtx) fb() []rt.Stream {
	return append([]rt.Stream{c.stream}, c.segs...)
}

// lastFB is c's last forward-and-backward stream.
func (c *execCtx) lastFB() rt.Stream {
	if n := len(c.segs); n > 0 {
		return c.segs[n-1]
	}
	return c.stream
}

// timings returns the launch times of c's forward-and-backward streams,
// in recording order.
func (c *execCtx) timings() []time.Duration {
	var ts []time.Duration
	for _, st := range c.fb() {
		ts = append(ts, st.Timings()...)
	}
	return ts
}

// segErr makes the launch index of an *rt.IndexError in err, reported
// by segment j, an index into the whole recording.
func (c *execCtx) segErr(j int, err error) error {
	var ie *rt.IndexError
	if j > 0 && j < len(c.starts) && errors.As(err, &ie) && ie.Launch >= 0 {
		ie.Launch += c.starts[j]
	}
	return err
}

// submitFB submits c's forward and backward: with segments, every
// segment but the last runs to completion first (submitted and waited
// for, in order), and the last is submitted. waitFB waits for the last.
func (c *execCtx) submitFB() error {
	fb := c.fb()
	for j, st := range fb[:len(fb)-1] {
		if err := st.Submit(); err != nil {
			return err
		}
		if err := st.Wait(); err != nil {
			return c.segErr(j, err)
		}
	}
	return fb[len(fb)-1].Submit()
}

// waitFB waits for the last forward-and-backward stream submitFB
// submitted.
func (c *execCtx) waitFB() error {
	return c.segErr(len(c.segs), c.lastFB().Wait())
}

// New plans m on dev. The caller keeps ownership of m and dev, which must
// outlive the session.
//
// The first plan is for the shapes in opts.Shapes; inputs not named there
// get the model's shape, each dynamic dim taken from opts.Dims by name or
// set to 1. Run plans again for other input shapes.
func New(m *model.Model, dev rt.Device, opts Options) (*Session, error) {
	if err := checkPrecision(opts.Precision); err != nil {
		return nil, err
	}
	s := newSession(m, dev, opts)
	shapes, defaulted, err := initialShapes(m, opts)
	if err != nil {
		return nil, err
	}
	s.init = shapes
	if _, _, err := s.prepare(shapes); err != nil {
		if nc := notConstant(err); nc != nil && s.learnValues(nc, shapes) {
			return s, nil // the plan needs input values: the first Run makes it
		}
		s.Close()
		if len(defaulted) > 0 {
			return nil, fmt.Errorf("%w (planned with the dynamic dims %s set to 1; give input shapes in Options.Shapes or dims by name in Options.Dims)", err, strings.Join(defaulted, ", "))
		}
		return nil, err
	}
	return s, nil
}

func newSession(m *model.Model, dev rt.Device, opts Options) *Session {
	if opts.Parallel <= 0 {
		opts.Parallel = 1
	}
	return &Session{m: m, dev: dev, opts: opts, plans: map[string]*planState{}, chunks: map[string]*chunkPlan{},
		closing: make(chan struct{}), pool: rt.NewMemPool(dev, rt.MemPoolOptions{})}
}

// initialShapes returns the shapes New plans for: opts.Shapes, then the
// model's shapes with dynamic dims from opts.Dims or 1. defaulted lists the
// dims set to 1, for error messages.
func initialShapes(m *model.Model, opts Options) (shapes map[string][]int, defaulted []string, err error) {
	names := map[string]bool{}
	for _, i := range m.Inputs() {
		for _, n := range m.Tensors[i].DimNames {
			if n != "" {
				names[n] = true
			}
		}
	}
	for name := range opts.Shapes {
		if i := m.TensorIndex(name); i < 0 || m.Tensors[i].Role != model.Input {
			return nil, nil, inputErr(name, ErrUnknownInput, "shape given in Options.Shapes for %q, which is not a model input (inputs: %s)", name, inputList(m))
		}
	}
	for name, v := range opts.Dims {
		if !names[name] {
			return nil, nil, inputErr(name, ErrUnknownInput, "Options.Dims names the dim %q, which no input has (named dims: %s)", name, strings.Join(sortedKeys(names), ", "))
		}
		if v < 0 {
			return nil, nil, inputErr(name, ErrShape, "Options.Dims sets the dim %q to %d", name, v)
		}
	}
	shapes = map[string][]int{}
	seen := map[string]bool{}
	for _, i := range m.Inputs() {
		mt := &m.Tensors[i]
		if sh, ok := opts.Shapes[mt.Name]; ok {
			if err := checkShape(mt, sh, " in Options.Shapes"); err != nil {
				return nil, nil, err
			}
			shapes[mt.Name] = sh
			continue
		}
		sh := make([]int, len(mt.Shape))
		for d, v := range mt.Shape {
			if v >= 0 {
				sh[d] = int(v)
				continue
			}
			dn := ""
			if d < len(mt.DimNames) {
				dn = mt.DimNames[d]
			}
			if x, ok := opts.Dims[dn]; ok && dn != "" {
				sh[d] = x
				continue
			}
			sh[d] = 1
			label := fmt.Sprintf("%s[%d]", mt.Name, d)
			if dn != "" {
				label = fmt.Sprintf("%q (%s)", dn, label)
			}
			if !seen[label] {
				seen[label] = true
				defaulted = append(defaulted, label)
			}
		}
		shapes[mt.Name] = sh
	}
	return shapes, defaulted, nil
}

// unknownInput returns the error of the first input, by name, that is
// not a model input (not in shapes, which has every model input given),
// or nil.
func unknownInput[V any](inputs map[string]V, shapes map[string][]int, m *model.Model) error {
	if len(inputs) > len(shapes) {
		for _, name := range sortedKeys(inputs) {
			if _, ok := shapes[name]; !ok {
				return inputErr(name, ErrUnknownInput, "%q is not a model input (inputs: %s)", name, inputList(m))
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func inputList(m *model.Model) string {
	var names []string
	for _, i := range m.Inputs() {
		names = append(names, m.Tensors[i].Name)
	}
	return strings.Join(names, ", ")
}

// dimString renders a model tensor's declared shape: "[batch 37]", with
// "?" for an unnamed dynamic dim.
func dimString(mt *model.Tensor) string {
	parts := make([]string, len(mt.Shape))
	for i, d := range mt.Shape {
		switch {
		case d >= 0:
			parts[i] = fmt.Sprint(d)
		case i < len(mt.DimNames) && mt.DimNames[i] != "":
			parts[i] = mt.DimNames[i]
		default:
			parts[i] = "?"
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkShape checks shape s, given for model input mt (where says where:
// " in Options.Shapes", or "" for a run), against the model's rank and
// static dims.
func checkShape(mt *model.Tensor, s []int, where string) error {
	bad := len(s) != len(mt.Shape)
	for d := 0; d < len(s) && !bad; d++ {
		bad = s[d] < 0 || (mt.Shape[d] >= 0 && int64(s[d]) != mt.Shape[d])
	}
	if bad {
		return inputErr(mt.Name, ErrShape, "input %q: got shape %v%s, model wants %v%s", mt.Name, s, where, mt.Shape, named(mt))
	}
	if err := rt.CheckTensorSize("", mt.DType, s, false); err != nil {
		return &InputError{Input: mt.Name, Err: err, Msg: fmt.Sprintf("input %q: shape %v%s: %v", mt.Name, s, where, err)}
	}
	return nil
}

// named returns " (batch 37)" for a tensor with named dims, or "".
func named(mt *model.Tensor) string {
	for _, n := range mt.DimNames {
		if n != "" {
			return " (" + strings.Trim(dimString(mt), "[]") + ")"
		}
	}
	return ""
}

// checkInputs checks the inputs of a run against the model and returns
// their shapes.
func checkInputs(m *model.Model, inputs map[string]*rt.Tensor) (map[string][]int, error) {
	shapes := map[string][]int{}
	for _, i := range m.Inputs() {
		mt := &m.Tensors[i]
		t, ok := inputs[mt.Name]
		if !ok || t == nil {
			return nil, inputErr(mt.Name, ErrMissingInput, "missing input %q (the model's inputs: %s)", mt.Name, inputList(m))
		}
		if err := t.Check(); err != nil {
			return nil, &InputError{Input: mt.Name, Err: err, Msg: fmt.Sprintf("input %q: %v", mt.Name, err)}
		}
		if t.DType != mt.DType {
			return nil, inputErr(mt.Name, ErrDType, "input %q has dtype %s, model wants %s", mt.Name, t.DType, mt.DType)
		}
		if err := checkShape(mt, t.Shape, ""); err != nil {
			return nil, err
		}
		shapes[mt.Name] = t.Shape
	}
	if err := unknownInput(inputs, shapes, m); err != nil {
		return nil, err
	}
	return shapes, nil
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
	return s.planModel(func() *model.Model { return s.m }, shapes, mode, tag+shapeKey(shapes, s.m))
}

// planModel returns the plan stored under key, or plans the model that m
// returns (s.m, or a copy of it with inputs bound to values) for the
// shapes and stores it under key.
func (s *Session) planModel(m func() *model.Model, shapes map[string][]int, mode planMode, key string) (*planState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("engine: session %w", rt.ErrClosed)
	}
	if ps, ok := s.plans[key]; ok {
		return ps, nil
	}
	if !s.opts.NoFusion {
		mode.supports = s.dev.Supports
	}
	if s.opts.Precision == rt.F16 && !mode.train && mode.grad == nil {
		mode.half = s.dev.Supports
	}
	p, err := newPlan(m(), shapes, mode, s.opts.FoldDevice)
	if err != nil {
		return nil, err
	}
	if fe := s.fits(p); fe != nil {
		return nil, fe
	}
	for _, st := range p.steps {
		for _, op := range st.ops {
			if err := s.dev.Supports(op); err != nil {
				return nil, &PlanError{Node: st.node.Name, Op: st.node.Op, Err: err}
			}
		}
	}
	// The device builds the plan's kernels while the weights upload.
	// Errors are left to Launch, which names the node.
	var ops []rt.Op
	for _, st := range p.steps {
		ops = append(ops, st.ops...)
	}
	prepared := make(chan struct{})
	go func() {
		defer close(prepared)
		rt.Prepare(s.dev, ops)
	}()
	err = s.uploadWeights(p)
	<-prepared
	if err != nil {
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
	if h := t.halfOf; h != nil && h.id < len(s.m.Tensors) && s.m.Tensors[h.id].Role == model.Weight {
		return fmt.Sprint("h:", h.id) // the f16 copy of a model weight
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
	if len(s.mode.mutable) == 0 {
		// An inference session never writes its weights after this:
		// backends that cache data derived from them (the CPU backend's
		// packed and Winograd-transformed convolution weights) may skip
		// checking them on every run. Training sessions (mutable
		// weights) keep the checks.
		rt.MarkConstant(buf)
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
	host := func(n int64) ([]byte, error) {
		if n == 0 {
			return []byte{}, nil
		}
		hb, err := s.pool.AllocHost(n)
		if err != nil {
			return nil, err
		}
		c.hosts = append(c.hosts, hb)
		return hb.Bytes()[:n], nil
	}
	view := rt.MapBuffer(s.dev, arena)
	c.inView = view != nil
	for _, t := range p.inputs {
		if c.inView {
			c.inBufs = append(c.inBufs, view[t.offset:t.offset+t.bytes():t.offset+t.bytes()])
			continue
		}
		b, err := host(t.bytes())
		if err != nil {
			s.freeCtx(c)
			return nil, fmt.Errorf("engine: input %q: %w", t.name, err)
		}
		c.inBufs = append(c.inBufs, b)
	}
	for _, t := range p.outputs {
		b, err := host(t.bytes())
		if err != nil {
			s.freeCtx(c)
			return nil, fmt.Errorf("engine: output %q: %w", t.name, err)
		}
		c.outOwn = append(c.outOwn, b)
	}
	c.outBufs = append([][]byte(nil), c.outOwn...)
	return c, nil
}

// freeCtx frees c's streams, arena and pinned memory.
func (s *Session) freeCtx(c *execCtx) error {
	var errs []error
	if c.stream != nil {
		errs = append(errs, c.stream.Close())
	}
	if c.opt != nil {
		errs = append(errs, c.opt.Close())
	}
	for _, st := range c.segs {
		errs = append(errs, st.Close())
	}
	c.arena.Free()
	for _, hb := range c.hosts {
		s.pool.FreeHost(hb)
	}
	c.hosts = nil
	return errors.Join(errs...)
}

// record records the whole run into c.stream, bound to c.w; with
// c.devIO it leaves out the host Writes and Reads (RunDevice copies on the
// device instead).
func (s *Session) record(p *plan, c *execCtx) error {
	c.stream.Reset()
	c.hostIO = !c.inView && len(p.inputs) > 0
	for i, t := range p.inputs {
		if c.devIO || c.inView || len(c.inBufs[i]) == 0 {
			continue
		}
		if err := c.stream.Write(c.arena, t.offset, c.inBufs[i]); err != nil {
			return fmt.Errorf("engine: input %q: %w", t.name, err)
		}
	}
	steps, rest := p.steps, []step(nil)
	if s.splitOpt && p.optFrom > 0 {
		steps, rest = p.steps[:p.optFrom], p.steps[p.optFrom:]
		if c.opt == nil {
			st, err := s.dev.NewStream(rt.StreamOptions{Profile: s.opts.Profile})
			if err != nil {
				return fmt.Errorf("engine: optimizer stream: %w", err)
			}
			c.opt = st
		}
		c.opt.Reset()
		for _, st := range rest {
			for _, op := range st.ops {
				if err := c.opt.Launch(s.bind(op, c.arena, c.w)); err != nil {
					return &PlanError{Node: st.node.Name, Op: st.node.Op, Err: err}
				}
			}
		}
	}
	// Forward and backward, in segments at p.segCuts (split training
	// plans of a data-parallel trainer that overlaps the gradient
	// reduction with backward).
	var cuts []int
	if s.splitOpt {
		cuts = p.segCuts
	}
	if err := c.segments(s.dev, len(cuts), s.opts.Profile); err != nil {
		return err
	}
	c.starts = append([]int{0}, cuts...)
	into, seg, launch := c.stream, 0, 0
	for _, st := range steps {
		for _, op := range st.ops {
			for seg < len(cuts) && launch >= cuts[seg] {
				into = c.segs[seg]
				seg++
			}
			bound := s.bind(op, c.arena, c.w)
			if err := into.Launch(bound); err != nil {
				return &PlanError{Node: st.node.Name, Op: st.node.Op, Err: err}
			}
			launch++
		}
	}
	for i, t := range p.outputs {
		buf, off := s.location(t, c.arena, c.w)
		c.outBufs[i] = c.outOwn[i]
		if len(c.outBufs[i]) == 0 {
			continue
		}
		// In mapped memory the output is read in place after the run,
		// unless a split optimizer stream runs between the two.
		if v := rt.MapBuffer(s.dev, buf); v != nil && !s.splitOpt {
			c.outBufs[i] = v[off : off+t.bytes() : off+t.bytes()]
			continue
		}
		c.hostIO = true
		if c.devIO {
			continue
		}
		if err := c.lastFB().Read(c.outBufs[i], buf, off); err != nil {
			return fmt.Errorf("engine: output %q: %w", t.name, err)
		}
	}
	return nil
}

// segments gives c n segment streams after stream (creating or closing
// streams as needed), all reset.
func (c *execCtx) segments(dev rt.Device, n int, profile bool) error {
	for len(c.segs) > n {
		last := c.segs[len(c.segs)-1]
		c.segs = c.segs[:len(c.segs)-1]
		if err := last.Close(); err != nil {
			return fmt.Errorf("engine: segment stream: %w", err)
		}
	}
	for _, st := range c.segs {
		st.Reset()
	}
	for len(c.segs) < n {
		st, err := dev.NewStream(rt.StreamOptions{Profile: profile})
		if err != nil {
			return fmt.Errorf("engine: segment stream: %w", err)
		}
		c.segs = append(c.segs, st)
	}
	return nil
}

func (s *Session) location(t *tensor, arena rt.Buffer, w *weightBuf) (rt.Buffer, int64) {
	if t.root.where == inWeights {
		return w.buf, t.root.offset
	}
	return arena, t.root.offset + t.rootOff
}

// nameIndexError fills in the model node of an *rt.IndexError in err
// from its launch index: the stream launched the plan's ops in step order
// (Session.record).
func (p *plan) nameIndexError(err error) {
	var ie *rt.IndexError
	if !errors.As(err, &ie) || ie.Launch < 0 || ie.Node != "" {
		return
	}
	k := ie.Launch
	for _, st := range p.steps {
		if k < len(st.ops) {
			if st.node != nil {
				ie.Node, ie.NodeOp = st.node.Name, st.node.Op
				if st.node.Op == "GatherND" || st.node.Op == "ScatterND" {
					// The op met the out-of-range flat index that
					// flatIndex gives a bad index tuple: not the model's.
					ie.Known = false
				}
			}
			return
		}
		k -= len(st.ops)
	}
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
// name. It is safe for concurrent use. Input problems are *InputError
// values (errors.Is matches ErrShape, ErrDType, ErrMissingInput,
// ErrUnknownInput). When ctx is cancelled or expires, Run returns
// ctx.Err() without waiting for the device (the device finishes the
// interrupted work in the background; Close waits for it).
//
// A batch too large for the device (its memory, its largest buffer or the
// range one op may address) runs in chunks of rows along the leading dim,
// replayed through one recording, when the model treats the rows of that
// dim independently; see Info.ChunkRows.
//
// Graph inputs whose values planning needs (a Reshape's shape, a Slice's
// axes, fed as inputs rather than stored as weights) are planned by value:
// Run plans for the values it is given and keeps that plan under them, so
// each new value plans once (see ValueInputs). Such plans run whole, never
// in chunks.
func (s *Session) Run(ctx context.Context, inputs map[string]*rt.Tensor) (map[string]*rt.Tensor, error) {
	shapes, err := checkInputs(s.m, inputs)
	if err != nil {
		return nil, err
	}
	var ps *planState
	var cp *chunkPlan
	for {
		if vals := s.runValues(inputs); vals != nil {
			ps, err = s.planValues(shapes, vals)
		} else {
			ps, cp, err = s.prepare(shapes)
		}
		if nc := notConstant(err); nc == nil || !s.learnValues(nc, shapes) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if cp != nil {
		return s.runChunked(ctx, cp, inputs)
	}
	out, _, err := s.exec(ctx, ps, func(i int, t *tensor, dst []byte) error {
		copy(dst, inputs[t.name].Data)
		return nil
	}, nil)
	return out, err
}

// exec runs plan ps once: feed fills each plan input's staging bytes
// (model inputs, and a training plan's masks and optimizer values). With
// collect nil, exec returns the outputs; otherwise collect reads them (and
// any device state) from the context before it is released, and the map is
// nil.
func (s *Session) exec(ctx context.Context, ps *planState, feed func(i int, t *tensor, dst []byte) error,
	collect func(c *execCtx) error) (map[string]*rt.Tensor, *execCtx, error) {
	return s.execIO(ctx, ps, false, func(c *execCtx) error {
		for i, t := range ps.p.inputs {
			if err := feed(i, t, c.inBufs[i]); err != nil {
				return err
			}
		}
		return nil
	}, collect)
}

// execIO is exec with the context's inputs filled by load, for a host run
// or (devIO) a RunDevice run.
func (s *Session) execIO(ctx context.Context, ps *planState, devIO bool, load func(c *execCtx) error,
	collect func(c *execCtx) error) (map[string]*rt.Tensor, *execCtx, error) {
	c, err := s.acquireIO(ctx, ps, devIO)
	if err != nil {
		return nil, nil, err
	}
	detached := false
	defer func() {
		if !detached {
			s.release(ps, c)
		}
	}()
	p := ps.p
	if err := load(c); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := c.submitFB(); err != nil {
		p.nameIndexError(err)
		return nil, nil, fmt.Errorf("engine: submit: %w", err)
	}
	if ctx.Done() == nil {
		err = c.waitFB()
	} else {
		// Wait in a goroutine so that a cancelled context returns at once;
		// the context goes back to the pool when the device is done.
		done := make(chan error, 1)
		go func() { done <- c.waitFB() }()
		select {
		case err = <-done:
		case <-ctx.Done():
			select {
			case err = <-done:
			default:
				detached = true
				go func() {
					<-done
					s.release(ps, c)
				}()
				return nil, nil, ctx.Err()
			}
		}
	}
	if err != nil {
		p.nameIndexError(err)
		return nil, nil, fmt.Errorf("engine: run: %w", err)
	}
	if s.opts.Profile {
		prof := profileOf(p, c.timings())
		s.mu.Lock()
		s.lastProf = prof
		s.mu.Unlock()
	}
	if collect != nil {
		return nil, c, collect(c)
	}
	out := make(map[string]*rt.Tensor, len(p.outputs))
	for i, t := range p.outputs {
		out[t.name] = &rt.Tensor{DType: t.dtype, Shape: append([]int{}, t.shape...), Data: append([]byte(nil), c.outBufs[i]...)}
	}
	return out, c, nil
}

// acquire takes a free context of ps, creating one while fewer than
// Parallel exist, or waits for one. The run counts as in flight (Close
// waits for it) until release.
func (s *Session) acquire(ctx context.Context, ps *planState) (*execCtx, error) {
	return s.acquireIO(ctx, ps, false)
}

// acquireIO is acquire for a host run (devIO false) or a RunDevice run,
// whose recording has no host Writes and Reads.
func (s *Session) acquireIO(ctx context.Context, ps *planState, devIO bool) (*execCtx, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("engine: session %w", rt.ErrClosed)
	}
	s.flight.Add(1)
	s.mu.Unlock()
	c, err := s.take(ctx, ps)
	if err != nil {
		s.flight.Done()
		return nil, err
	}
	if err := s.ensureRecorded(ps, c, devIO); err != nil {
		s.mu.Lock()
		c.stale = true // a partial recording must not be replayed
		s.mu.Unlock()
		s.release(ps, c)
		return nil, err
	}
	return c, nil
}

// take returns a free context of ps, or a new one while fewer than
// Parallel exist, or waits for one.
func (s *Session) take(ctx context.Context, ps *planState) (*execCtx, error) {
	select {
	case c := <-ps.pool:
		return c, nil
	default:
	}
	s.mu.Lock()
	grow := ps.made < s.opts.Parallel
	if grow {
		ps.made++
	}
	s.mu.Unlock()
	if !grow {
		select {
		case c := <-ps.pool:
			return c, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.closing:
			return nil, fmt.Errorf("engine: session %w", rt.ErrClosed)
		}
	}
	nc, err := s.newCtx(ps)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		ps.made--
		return nil, err
	}
	nc.stale = true // record on first use
	ps.all = append(ps.all, nc)
	return nc, nil
}

// release ends a run on c and returns c to its pool.
func (s *Session) release(ps *planState, c *execCtx) {
	s.mu.Lock()
	s.unpin(c.w)
	s.mu.Unlock()
	ps.pool <- c
	s.flight.Done()
}

// ensureRecorded re-records c if its stream was reset (weights moved),
// and pins the weights c is recorded against until release.
func (s *Session) ensureRecorded(ps *planState, c *execCtx, devIO bool) error {
	s.mu.Lock()
	// A recording with host transfers differs between host and device
	// runs: switching re-records.
	stale := c.stale || (c.devIO != devIO && c.hostIO)
	c.devIO = devIO
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

// Close frees the session's device memory. Runs that have not started
// fail with rt.ErrClosed; Close waits for the runs in flight (including
// the device work of runs whose context was cancelled) before freeing.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	s.flight.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, ps := range s.plans {
		for _, c := range ps.all {
			errs = append(errs, s.freeCtx(c))
		}
	}
	if s.weights != nil {
		s.weights.buf.Free()
		s.weights = nil
	}
	errs = append(errs, s.pool.Close())
	return errors.Join(errs...)
}
