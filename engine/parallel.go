package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// ErrNotSplittable: a model's batch cannot be split across devices (no
// input has a dynamic leading batch dim, or a node mixes the rows of the
// batch); the error says which and why.
var ErrNotSplittable = errors.New("cannot split the batch across devices")

// ErrBatchTooSmall: a data-parallel run was given fewer batch rows than
// devices.
var ErrBatchTooSmall = errors.New("batch smaller than the device count")

// DeviceError is the error of one device of a data-parallel run: the
// device's selector ("vulkan:1"), its position in the device list, and the
// error (which may match rt.ErrDeviceLost).
type DeviceError struct {
	Device string // the device's selector
	Index  int    // its position in the device list
	Rows   [2]int // the rows of the batch it ran, [from, to)
	Err    error
}

func (e *DeviceError) Error() string {
	return fmt.Sprintf("device %s (list position %d, rows %d-%d): %s", e.Device, e.Index, e.Rows[0], e.Rows[1]-1,
		strings.TrimPrefix(e.Err.Error(), "engine: "))
}

// Unwrap returns the device's error.
func (e *DeviceError) Unwrap() error { return e.Err }

// ParallelSession runs a model on several devices at once (data-parallel
// inference): Run splits the batch (the leading dim of the inputs whose
// leading dim is dynamic) into one part per device, as even as it can
// be, runs each part on its device's Session concurrently, and gathers
// the outputs in order. The outputs are the ones a single device gives,
// because the model is checked to keep the rows of its batch apart (the
// check that engine's batch chunking uses): every node computes each row
// of its outputs from the same row of its inputs, and every output has the
// batch as its leading dim. Models that cannot be split, with the reason
// (ErrNotSplittable): no input with a dynamic leading dim (a fixed batch,
// or a batch that is not the leading dim); a node that mixes rows
// (BatchNormalization in training mode, a Reshape or Transpose that moves
// the batch, a reduction over the batch axis, a MatMul across rows); an
// output without the batch as its leading dim.
//
// The devices may be of one backend or several (cpu, opencl:0); each has
// its own plan, weights and arenas.
type ParallelSession struct {
	m        *model.Model
	devs     []rt.Device
	specs    []string
	sessions []*Session

	mu     sync.Mutex
	checks map[string]error // split checks by input-shape key
	lost   error            // a device was lost: every later Run fails with it
	shares []float64        // relative shares of the batch (SetShares), nil for even
	closed bool
}

// NewParallelSession plans m on every device of devs (at least one; see
// rt.OpenList). opts applies to every device; its shapes and dims are the
// whole batch's, and each device is planned for its part. The devices
// must agree on the dtypes the model uses (rt.CheckDTypes). The caller
// keeps ownership of m and the devices, which must outlive the result.
func NewParallelSession(m *model.Model, devs []rt.Device, opts Options) (*ParallelSession, error) {
	if len(devs) == 0 {
		return nil, errors.New("engine: data parallelism needs at least one device")
	}
	p := &ParallelSession{m: m, devs: devs, checks: map[string]error{}}
	infos := make([]rt.DeviceInfo, len(devs))
	for i, d := range devs {
		infos[i] = d.Info()
		p.specs = append(p.specs, infos[i].Spec())
	}
	if err := rt.CheckDTypes(infos, modelDTypes(m)); err != nil {
		return nil, fmt.Errorf("engine: devices %s: %s", strings.Join(p.specs, ","), strings.TrimPrefix(err.Error(), "rt: "))
	}
	shapes, defaulted, err := initialShapes(m, opts)
	if err != nil {
		return nil, err
	}
	k := len(devs)
	parts := []map[string][]int{shapes}
	if k > 1 {
		n, _, split := batchRows(m, shapes)
		if n == 0 {
			return nil, p.notSplittable(errors.New(noBatchReason(m)))
		}
		explicit := !strings.Contains(strings.Join(defaulted, " "), "[0]") // the batch was given
		if n < k && explicit {
			return nil, fmt.Errorf("engine: a batch of %d rows is smaller than the %d devices %s; plan for at least %d rows (Options.Shapes or Dims) or list fewer devices: %w", n, k, strings.Join(p.specs, ","), k, ErrBatchTooSmall)
		}
		// Check the split now, with at least two rows, so that a model
		// that cannot be split fails here, not at its first Run.
		check := shapes
		if n < k {
			check = withRows(shapes, split, k)
		}
		if err := p.checkSplit(check); err != nil {
			return nil, err
		}
		if n >= k {
			parts = nil
			for _, r := range splitRows(n, k, nil) {
				parts = append(parts, withRows(shapes, split, r[1]-r[0]))
			}
		}
	}
	for i, d := range devs {
		o := opts
		o.Shapes, o.Dims = parts[min(i, len(parts)-1)], nil
		s, err := New(m, d, o)
		if err != nil {
			cerr := p.closeSessions()
			return nil, errors.Join(fmt.Errorf("engine: device %s: %s", p.specs[i], strings.TrimPrefix(err.Error(), "engine: ")), cerr)
		}
		p.sessions = append(p.sessions, s)
	}
	return p, nil
}

// modelDTypes lists the dtypes of m's tensors, each once.
func modelDTypes(m *model.Model) []rt.DType {
	seen := map[rt.DType]bool{}
	var out []rt.DType
	for i := range m.Tensors {
		dt := m.Tensors[i].DType
		if dt.Valid() && !seen[dt] {
			seen[dt] = true
			out = append(out, dt)
		}
	}
	return out
}

// batchRows finds the batch: the leading dim of the inputs whose leading
// dim is dynamic, with the first such input's size and dim name; split
// names the inputs that have it. n is 0 when no input has a dynamic
// leading dim.
func batchRows(m *model.Model, shapes map[string][]int) (n int, dimName string, split map[string]bool) {
	split = map[string]bool{}
	first := true
	for _, i := range m.Inputs() {
		mt := &m.Tensors[i]
		if len(mt.Shape) == 0 || mt.Shape[0] >= 0 {
			continue
		}
		dn := ""
		if len(mt.DimNames) > 0 {
			dn = mt.DimNames[0]
		}
		sh := shapes[mt.Name]
		if first {
			n, dimName, first = sh[0], dn, false
		}
		if sh[0] == n && dn == dimName {
			split[mt.Name] = true
		}
	}
	return n, dimName, split
}

// noBatchReason says why a model has no batch to split.
func noBatchReason(m *model.Model) string {
	var ins []string
	for _, i := range m.Inputs() {
		ins = append(ins, m.Tensors[i].Name+" "+dimString(&m.Tensors[i]))
	}
	return "no input has a dynamic leading (batch) dim; inputs: " + strings.Join(ins, ", ")
}

// withRows returns shapes with the leading dim of the split inputs set to
// rows.
func withRows(shapes map[string][]int, split map[string]bool, rows int) map[string][]int {
	out := make(map[string][]int, len(shapes))
	for name, sh := range shapes {
		if split[name] {
			sh = append([]int{rows}, sh[1:]...)
		}
		out[name] = sh
	}
	return out
}

// splitRows divides n rows (n >= k) among k devices: as dist.Split does
// (the first n%k devices one row more) when shares is nil, else in
// proportion to shares, each device at least one row, the rows left by
// rounding down going to the largest remainders. It returns [from, to)
// per device.
func splitRows(n, k int, shares []float64) [][2]int {
	rows := dist.Split(n, k)
	if shares != nil {
		var sum float64
		for _, w := range shares {
			sum += w
		}
		exact := make([]float64, k)
		total := 0
		for i, w := range shares {
			exact[i] = float64(n) * w / sum
			rows[i] = max(1, int(exact[i]))
			total += rows[i]
		}
		for total > n { // the one-row minimums overshot: take from the largest
			j := 0
			for i := range rows {
				if rows[i] > rows[j] {
					j = i
				}
			}
			rows[j]--
			total--
		}
		for total < n { // give what rounding left to the largest remainders
			j := 0
			for i := range rows {
				if exact[i]-float64(rows[i]) > exact[j]-float64(rows[j]) {
					j = i
				}
			}
			rows[j]++
			total++
		}
	}
	out := make([][2]int, k)
	from := 0
	for i, r := range rows {
		out[i] = [2]int{from, from + r}
		from += r
	}
	return out
}

// SetShares sets each device's relative share of the batch, in list
// order: {4, 1} gives the first device four rows for every row of the
// second, for lists whose devices differ in speed (an even split finishes
// at the slowest device's pace). Every device still gets at least one
// row. nil restores the even split. Each new share of rows plans once
// more on its device.
func (p *ParallelSession) SetShares(shares []float64) error {
	if shares != nil {
		if len(shares) != len(p.devs) {
			return fmt.Errorf("engine: %d shares for the %d devices %s", len(shares), len(p.devs), strings.Join(p.specs, ","))
		}
		for i, w := range shares {
			if !(w > 0) || math.IsInf(w, 0) {
				return fmt.Errorf("engine: share %v of device %s: want a positive number", w, p.specs[i])
			}
		}
		shares = append([]float64(nil), shares...)
	}
	p.mu.Lock()
	p.shares = shares
	p.mu.Unlock()
	return nil
}

func (p *ParallelSession) notSplittable(err error) error {
	return fmt.Errorf("engine: model on devices %s: %w: %v", strings.Join(p.specs, ","), ErrNotSplittable, err)
}

// checkSplit plans the model for shapes (the whole batch) and for one
// device's part, and checks that the model keeps the rows apart. The
// outcome is remembered by shape.
func (p *ParallelSession) checkSplit(shapes map[string][]int) error {
	key := shapeKey(shapes, p.m)
	p.mu.Lock()
	err, ok := p.checks[key]
	p.mu.Unlock()
	if ok {
		return err
	}
	err = p.doCheck(shapes)
	p.mu.Lock()
	p.checks[key] = err
	p.mu.Unlock()
	return err
}

func (p *ParallelSession) doCheck(shapes map[string][]int) error {
	n, _, split := batchRows(p.m, shapes)
	if n == 0 {
		return p.notSplittable(errors.New(noBatchReason(p.m)))
	}
	rows := (n + len(p.devs) - 1) / len(p.devs)
	if rows >= n {
		rows = n - 1
	}
	if rows < 1 {
		return fmt.Errorf("engine: a batch of %d rows cannot be split across %d devices: %w", n, len(p.devs), ErrBatchTooSmall)
	}
	full, err := newPlan(p.m, shapes, planMode{}, nil)
	if err != nil {
		return p.notSplittable(fmt.Errorf("planning the whole batch: %w", err))
	}
	part, err := newPlan(p.m, withRows(shapes, split, rows), planMode{}, nil)
	if err != nil {
		return p.notSplittable(fmt.Errorf("planning %d rows: %w", rows, err))
	}
	sp := &splitter{m: p.m, full: full, part: part, n: n, rows: rows, batched: map[int]bool{}}
	for name := range split {
		sp.batched[p.m.TensorIndex(name)] = true
	}
	if err := sp.check(); err != nil {
		return p.notSplittable(err)
	}
	return nil
}

// Devices returns the selectors of the devices, in list order.
func (p *ParallelSession) Devices() []string { return append([]string(nil), p.specs...) }

// Sessions returns the devices' sessions, in list order (for Inputs,
// Outputs, Info and Profile of one device's plan).
func (p *ParallelSession) Sessions() []*Session { return append([]*Session(nil), p.sessions...) }

// Run splits the batch across the devices, runs the parts concurrently
// and returns the outputs, gathered in batch order. A batch of fewer rows
// than devices is an error (ErrBatchTooSmall). With one device, Run is
// that device's Session.Run.
//
// When a device fails, the runs on the others are cancelled and waited
// for, and the error is a *DeviceError naming the device. When a device
// is lost (rt.ErrDeviceLost), every session is closed, which releases the
// plans, weights and arenas on all the devices, and every later Run fails
// with the same error; the caller closes the devices.
func (p *ParallelSession) Run(ctx context.Context, inputs map[string]*rt.Tensor) (map[string]*rt.Tensor, error) {
	p.mu.Lock()
	lost, closed := p.lost, p.closed
	p.mu.Unlock()
	if lost != nil {
		return nil, lost
	}
	if closed {
		return nil, fmt.Errorf("engine: data-parallel model %w", rt.ErrClosed)
	}
	if len(p.sessions) == 1 {
		out, err := p.sessions[0].Run(ctx, inputs)
		if err != nil && errors.Is(err, rt.ErrDeviceLost) {
			return nil, p.deviceLost(&DeviceError{Device: p.specs[0], Err: err})
		}
		return out, err
	}
	shapes, err := checkInputs(p.m, inputs)
	if err != nil {
		return nil, err
	}
	n, dimName, split := batchRows(p.m, shapes)
	if n == 0 {
		return nil, p.notSplittable(errors.New(noBatchReason(p.m)))
	}
	k := len(p.sessions)
	if n < k {
		dn := ""
		if dimName != "" {
			dn = fmt.Sprintf(" (dim %q)", dimName)
		}
		return nil, fmt.Errorf("engine: a batch of %d rows%s is smaller than the %d devices %s; give at least %d rows or fewer devices: %w",
			n, dn, k, strings.Join(p.specs, ","), k, ErrBatchTooSmall)
	}
	if err := p.checkSplit(shapes); err != nil {
		return nil, err
	}
	p.mu.Lock()
	shares := p.shares
	p.mu.Unlock()
	ranges := splitRows(n, k, shares)
	outs := make([]map[string]*rt.Tensor, k)
	errs := make([]error, k)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, s := range p.sessions {
		part := make(map[string]*rt.Tensor, len(inputs))
		for name, t := range inputs {
			if split[name] {
				rb := len(t.Data) / n
				r := ranges[i]
				part[name] = &rt.Tensor{DType: t.DType, Shape: append([]int{r[1] - r[0]}, t.Shape[1:]...), Data: t.Data[r[0]*rb : r[1]*rb]}
			} else {
				part[name] = t
			}
		}
		wg.Add(1)
		go func(i int, s *Session) {
			defer wg.Done()
			outs[i], errs[i] = s.Run(rctx, part)
			if errs[i] != nil {
				cancel() // the batch has failed: stop the other devices
			}
		}(i, s)
	}
	wg.Wait()
	if err := p.firstError(ctx, errs, ranges); err != nil {
		return nil, err
	}
	return p.gather(outs, ranges, n)
}

// firstError picks the error to report: a lost device first, then a
// device's own error over the cancellations it caused on the others.
func (p *ParallelSession) firstError(ctx context.Context, errs []error, ranges [][2]int) error {
	if err := ctx.Err(); err != nil {
		for _, e := range errs {
			if e != nil {
				return err // the caller cancelled
			}
		}
	}
	var first *DeviceError
	for i, e := range errs {
		if e == nil {
			continue
		}
		de := &DeviceError{Device: p.specs[i], Index: i, Rows: ranges[i], Err: e}
		if errors.Is(e, rt.ErrDeviceLost) {
			return p.deviceLost(de)
		}
		if first == nil || errors.Is(first.Err, context.Canceled) && !errors.Is(e, context.Canceled) {
			first = de
		}
	}
	if first == nil {
		return nil
	}
	return fmt.Errorf("engine: data-parallel run on %s: %w", strings.Join(p.specs, ","), first)
}

// deviceLost records a lost device and closes every session, releasing
// what the model holds on the other devices.
func (p *ParallelSession) deviceLost(de *DeviceError) error {
	err := fmt.Errorf("engine: data-parallel run on %s: %w (the sessions on every device are closed; close the devices and open them again)",
		strings.Join(p.specs, ","), de)
	p.mu.Lock()
	if p.lost != nil {
		err = p.lost
	} else {
		p.lost = err
	}
	p.mu.Unlock()
	p.closeSessions()
	return err
}

// gather joins the parts' outputs along the batch dim.
func (p *ParallelSession) gather(outs []map[string]*rt.Tensor, ranges [][2]int, n int) (map[string]*rt.Tensor, error) {
	res := map[string]*rt.Tensor{}
	for name, t0 := range outs[0] {
		var total int
		for i, o := range outs {
			t := o[name]
			r := ranges[i][1] - ranges[i][0]
			if t == nil || len(t.Shape) == 0 || t.Shape[0] != r || t.DType != t0.DType || !sameShape(t.Shape[1:], t0.Shape[1:]) {
				return nil, fmt.Errorf("engine: output %q of device %s does not have its %d rows as its leading dim (internal error)", name, p.specs[i], r)
			}
			total += len(t.Data)
		}
		res[name] = concatRows(outs, name, n, total)
	}
	return res, nil
}

// concatRows joins output name of every share, in order, into one tensor
// of n rows (size bytes); the shares have been checked to agree on the
// dtype and the trailing dims.
func concatRows(outs []map[string]*rt.Tensor, name string, n, size int) *rt.Tensor {
	x0 := outs[0][name]
	data := make([]byte, 0, size)
	for _, o := range outs {
		data = append(data, o[name].Data...)
	}
	return &rt.Tensor{DType: x0.DType, Shape: append([]int{n}, x0.Shape[1:]...), Data: data}
}

func (p *ParallelSession) closeSessions() error {
	var errs []error
	for i, s := range p.sessions {
		if err := s.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.specs[i], err))
		}
	}
	return errors.Join(errs...)
}

// Close waits for the runs in flight and closes every device's session.
// The devices stay open (the caller owns them).
func (p *ParallelSession) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return p.closeSessions()
}
