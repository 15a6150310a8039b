//go:build cgo

package clshim

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vrun-go/vrun/internal/cmem"
	"github.com/vrun-go/vrun/rt"
)

//go:embed kernels/*.cl
var kernelFS embed.FS

// device is an opened OpenCL device. It implements rt.Device.
type device struct {
	ent   devEntry
	ctx   clContext
	queue clQueue // for the synchronous Device.Write/Read

	cfg tuning
	// gemmForce, when set (tests), is the GEMM tile of every MatMul
	// and Conv instead of one chosen by work-group count.
	gemmForce *gemmShape
	// splitForce, when > 0 (tests), is the split-K factor of every
	// implicit-GEMM Conv.
	splitForce int
	opts       string // device-wide -D defines
	// split builds one kernel per program, with a MatMul's or Conv's
	// epilogue activation fixed at build time (GPUs, whose compilers
	// take time in proportion to the code; pocl pays a fixed cost per
	// program instead). VRUN_CL_SPLIT=0 or 1 overrides the choice.
	split bool
	// convRule is ConvRuleEnv's value at Open ("wide": the former conv
	// tile rule).
	convRule string
	// jobs is the number of programs Prepare builds at once
	// (BuildJobsEnv, default GOMAXPROCS).
	jobs int
	// buildLog, when set (BuildLogEnv), is the file to which every
	// program build appends a line; opened is when the device was.
	buildLog string
	opened   time.Time
	// buildCtxs, when non-nil (BuildCtxEnv=N), holds N contexts of the
	// device in which programs are built from source, each then loaded
	// into ctx from its binary: a cold-start experiment for drivers that
	// serialise builds within one context. Created at Open, released by
	// Close.
	buildCtxs chan clContext
	nBuildCtx int

	mu      sync.Mutex // guards everything below and queue
	closed  bool
	bufs    map[*buffer]struct{}
	hosts   map[*hostBuf]struct{}
	streams map[*stream]struct{}
	progs   map[string]*progEntry // by file|options; failures stay
	// building counts programs being built outside mu, which Close
	// waits for.
	building sync.WaitGroup
	// probes are the ops that Prepare lowers to learn their programs:
	// kernel records the program of such an op and stops its lowering
	// with errProbe.
	probes map[rt.Op]*[]progKey
	// noPrepare (tests) makes Prepare do nothing.
	noPrepare bool

	cacheDir string
	// srcHook, when set (tests), may rewrite a program's source before
	// it is built.
	srcHook func(file, src string) string
	// builds counts programs built from source, hits those loaded from
	// the binary cache (tests).
	builds, hits int
}

// progKey names a program: a kernels file built with options.
type progKey struct{ file, defines string }

// progEntry is a program built, being built or failed.
type progEntry struct {
	ready chan struct{} // closed once p or err is set
	p     clProgram
	err   error
}

// tuning holds the work sizes of the kernels on one device.
type tuning struct {
	ewLocal                int // local size of 1-D kernels
	redWG                  int // work-group size of row reductions
	tm, tn, tk, wm, wn     int // f32/f16 GEMM tile
	tm64, tn64, wm64, wn64 int // f64 GEMM tile
}

func tuningFor(c caps) tuning {
	if c.cpu {
		return tuning{ewLocal: 64, redWG: 16, tm: 64, tn: 64, tk: 16, wm: 8, wn: 8, tm64: 32, tn64: 32, wm64: 4, wn64: 4}
	}
	t := tuning{ewLocal: 256, redWG: 256, tm: 128, tn: 128, tk: 16, wm: 8, wn: 8, tm64: 64, tn64: 64, wm64: 4, wn64: 4}
	if c.maxWG < 256 || c.localMem < 40<<10 {
		t = tuning{ewLocal: 64, redWG: 64, tm: 32, tn: 32, tk: 16, wm: 4, wn: 4, tm64: 32, tn64: 32, wm64: 4, wn64: 4}
	}
	if c.maxWG > 0 && t.ewLocal > c.maxWG {
		t.ewLocal = c.maxWG
	}
	return t
}

func openDevice(e devEntry) (*device, error) {
	ctx, err := createContext(e.plat, e.dev)
	if err != nil {
		return nil, fmt.Errorf("opencl: open %s: %w", e.info.Spec(), err)
	}
	q, err := createQueue(ctx, e.dev, false)
	if err != nil {
		releaseContext(ctx)
		return nil, fmt.Errorf("opencl: open %s: %w", e.info.Spec(), err)
	}
	d := &device{ent: e, ctx: ctx, queue: q, cfg: tuningFor(e.caps),
		bufs: map[*buffer]struct{}{}, hosts: map[*hostBuf]struct{}{}, streams: map[*stream]struct{}{},
		progs: map[string]*progEntry{}, probes: map[rt.Op]*[]progKey{}, cacheDir: cacheDir()}
	d.opts = fmt.Sprintf("-DEWL=%d -DRWG=%d", d.cfg.ewLocal, d.cfg.redWG)
	// Cold-start experiments (see doc.go): extra build options, build
	// concurrency and a per-program build log.
	if o := strings.TrimSpace(os.Getenv(BuildOptsEnv)); o != "" {
		d.opts += " " + o
	}
	d.jobs = max(1, runtime.GOMAXPROCS(0))
	if n, err := strconv.Atoi(os.Getenv(BuildJobsEnv)); err == nil && n > 0 {
		d.jobs = n
	}
	d.buildLog = os.Getenv(BuildLogEnv)
	d.opened = time.Now()
	if n, err := strconv.Atoi(os.Getenv(BuildCtxEnv)); err == nil && n > 0 {
		d.buildCtxs = make(chan clContext, n)
		for range n {
			c, err := createContext(e.plat, e.dev)
			if err != nil {
				break // build in the contexts made so far, or in ctx
			}
			d.buildCtxs <- c
			d.nBuildCtx++
		}
		if d.nBuildCtx == 0 {
			d.buildCtxs = nil
		}
	}
	d.split = !e.caps.cpu
	d.convRule = os.Getenv(ConvRuleEnv)
	switch os.Getenv("VRUN_CL_SPLIT") { // measuring cold starts: force either way
	case "0":
		d.split = false
	case "1":
		d.split = true
	}
	return d, nil
}

// Info describes the device.
func (d *device) Info() rt.DeviceInfo { return d.ent.info }

func (d *device) check() error {
	if d.closed {
		return fmt.Errorf("device %w", rt.ErrClosed)
	}
	return nil
}

// buffer is device memory. It implements rt.Buffer.
type buffer struct {
	dev  *device
	mem  clMem
	size int64
}

// Size returns the size asked of Alloc.
func (b *buffer) Size() int64 { return b.size }

// Free releases the memory; it is safe to call more than once.
func (b *buffer) Free() {
	d := b.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if b.mem != nil {
		releaseMem(b.mem)
		b.mem = nil
	}
	delete(d.bufs, b)
}

// Alloc allocates size bytes. Requests above the device's maximum
// allocation, or that the driver cannot satisfy, fail with *rt.OOMError.
func (d *device) Alloc(size int64) (rt.Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("opencl: Alloc: negative size %d", size)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("opencl: Alloc: %w", err)
	}
	if lim := d.ent.caps.maxAlloc; lim > 0 && size > lim {
		return nil, &rt.OOMError{Backend: BackendName, Request: size, Heap: d.ent.info.Name,
			Detail: fmt.Sprintf("larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE (%d bytes)", lim)}
	}
	m, code := createBuffer(d.ctx, max(size, 4))
	if code != 0 {
		switch code {
		case clMemObjectAllocationFailure, clOutOfResources, clOutOfHostMemory, clInvalidBufferSize:
			return nil, &rt.OOMError{Backend: BackendName, Request: size, Heap: d.ent.info.Name,
				Detail: (&clError{"clCreateBuffer", code}).Error()}
		}
		return nil, fmt.Errorf("opencl: Alloc(%d): %w", size, &clError{"clCreateBuffer", code})
	}
	b := &buffer{dev: d, mem: m, size: size}
	d.bufs[b] = struct{}{}
	return b, nil
}

// memOf returns the cl_mem of a buffer of this device.
func (d *device) memOf(b rt.Buffer) (clMem, error) {
	cb, ok := b.(*buffer)
	if !ok || cb == nil {
		return nil, fmt.Errorf("buffer %T does not belong to the opencl backend", b)
	}
	if cb.dev != d {
		return nil, errors.New("buffer belongs to another opencl device")
	}
	if cb.mem == nil {
		return nil, fmt.Errorf("buffer used after Free: %w", rt.ErrClosed)
	}
	return cb.mem, nil
}

// Write copies src into dst at byte offset off and returns when done.
func (d *device) Write(dst rt.Buffer, off int64, src []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return fmt.Errorf("opencl: Write: %w", err)
	}
	m, err := d.memOf(dst)
	if err != nil {
		return fmt.Errorf("opencl: Write: %w", err)
	}
	if err := rt.CheckRange(dst.Size(), off, int64(len(src))); err != nil {
		return fmt.Errorf("opencl: Write: %w", err)
	}
	if err := writeSync(d.queue, m, off, src); err != nil {
		return fmt.Errorf("opencl: Write: %w", mapExecErr(err))
	}
	return nil
}

// Read copies len(dst) bytes of src at byte offset off into dst.
func (d *device) Read(dst []byte, src rt.Buffer, off int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return fmt.Errorf("opencl: Read: %w", err)
	}
	m, err := d.memOf(src)
	if err != nil {
		return fmt.Errorf("opencl: Read: %w", err)
	}
	if err := rt.CheckRange(src.Size(), off, int64(len(dst))); err != nil {
		return fmt.Errorf("opencl: Read: %w", err)
	}
	if err := readSync(d.queue, m, off, dst); err != nil {
		return fmt.Errorf("opencl: Read: %w", mapExecErr(err))
	}
	return nil
}

// mapExecErr marks errors that mean the device is gone as ErrDeviceLost.
func mapExecErr(err error) error {
	var ce *clError
	if errors.As(err, &ce) {
		switch ce.Code {
		case clOutOfResources, clInvalidCommandQueue, clExecStatusErrorForEvents, clDeviceNotAvailable:
			return fmt.Errorf("%w: %w", err, rt.ErrDeviceLost)
		case clMemObjectAllocationFailure:
			return fmt.Errorf("%w: %w", err, rt.ErrOutOfMemory)
		}
	}
	return err
}

// NewStream creates a stream with its own in-order command queue.
func (d *device) NewStream(opts rt.StreamOptions) (rt.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("opencl: NewStream: %w", err)
	}
	q, err := createQueue(d.ctx, d.ent.dev, opts.Profile)
	if err != nil {
		return nil, fmt.Errorf("opencl: NewStream: %w", err)
	}
	s := &stream{dev: d, queue: q, profile: opts.Profile}
	d.streams[s] = struct{}{}
	return s, nil
}

// Close releases every stream, buffer, program and the context. It is safe
// to call more than once.
func (d *device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	streams := d.streams
	d.streams = map[*stream]struct{}{}
	d.mu.Unlock()
	for s := range streams {
		s.Close()
	}
	d.mu.Lock()
	d.closed = true // no program build starts from here on
	d.mu.Unlock()
	d.building.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	finish(d.queue)
	for b := range d.bufs {
		if b.mem != nil {
			releaseMem(b.mem)
			b.mem = nil
		}
	}
	d.bufs = map[*buffer]struct{}{}
	for h := range d.hosts {
		unmapRelease(d.queue, h.mem, h.ptr)
		h.mem = nil
	}
	d.hosts = map[*hostBuf]struct{}{}
	for k, e := range d.progs {
		if e.p != nil {
			releaseProgram(e.p)
		}
		delete(d.progs, k)
	}
	for range d.nBuildCtx {
		releaseContext(<-d.buildCtxs)
	}
	d.nBuildCtx = 0
	releaseQueue(d.queue)
	releaseContext(d.ctx)
	// The driver frees the context's buffers and programs to the C heap;
	// give that memory back to the system (see package cmem).
	cmem.Trim()
	return nil
}

// ---- programs ----

// enumHeader defines the U_*, B_*, R_* and S_* constants from rt's enums,
// and OptimStep's OPT_* rules, H slots and flag bits, so the kernels'
// codes always match.
var enumHeader = func() string {
	var b strings.Builder
	for i := 0; i < rt.NumUnaryFns; i++ {
		fmt.Fprintf(&b, "#define U_%s %d\n", rt.UnaryFn(i), i)
	}
	for i := 0; i < rt.NumBinaryFns; i++ {
		fmt.Fprintf(&b, "#define B_%s %d\n", rt.BinaryFn(i), i)
	}
	for i := 0; i < rt.NumReduceFns; i++ {
		fmt.Fprintf(&b, "#define R_%s %d\n", rt.ReduceFn(i), i)
	}
	for f := rt.ScatterSet; f <= rt.ScatterMin; f++ {
		fmt.Fprintf(&b, "#define S_%s %d\n", f, f)
	}
	for i := 0; i < rt.NumOptimFns; i++ {
		fmt.Fprintf(&b, "#define OPT_%s %d\n", rt.OptimFn(i), i)
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"H_LR", rt.OptimLR}, {"H_FIRST", rt.OptimFirst}, {"H_STEPSIZE", rt.OptimStepSize}, {"H_BC2SQRT", rt.OptimBC2Sqrt},
		{"H_DECAY", rt.OptimDecay}, {"F_SCALE", rt.OptimFlagScale}, {"F_WD", rt.OptimFlagWD}, {"F_MOMENTUM", rt.OptimFlagMomentum},
		{"F_NESTEROV", rt.OptimFlagNesterov}, {"F_DECOUPLED", rt.OptimFlagDecoupled}, {"F_CENTERED", rt.OptimFlagCentered}} {
		fmt.Fprintf(&b, "#define OPT_%s %d\n", c.name, c.v)
	}
	return b.String()
}()

func kernelSource(file string) string {
	common, err := kernelFS.ReadFile("kernels/common.cl")
	if err != nil {
		panic(err)
	}
	src, err := kernelFS.ReadFile("kernels/" + file)
	if err != nil {
		panic(err)
	}
	return enumHeader + string(common) + "\n" + string(src)
}

// program returns the built program of kernels/file with the given
// defines, building it (or loading it from the binary cache) on first use.
// Programs of different keys build concurrently, outside d.mu; callers
// asking for one being built wait for it. A build failure is remembered.
func (d *device) program(file, defines string) (clProgram, error) {
	opts := strings.TrimSpace(defines + " " + d.opts)
	key := file + "|" + opts
	d.mu.Lock()
	if err := d.check(); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	e, ok := d.progs[key]
	if !ok {
		e = &progEntry{ready: make(chan struct{})}
		d.progs[key] = e
		d.building.Add(1)
	}
	d.mu.Unlock()
	if !ok {
		e.p, e.err = d.build(file, opts)
		close(e.ready)
		d.building.Done()
	}
	<-e.ready
	return e.p, e.err
}

// build builds kernels/file with opts: from the binary cache when it
// holds the program, else from source (then cached).
func (d *device) build(file, opts string) (clProgram, error) {
	src := kernelSource(file)
	if d.srcHook != nil {
		src = d.srcHook(file, src)
	}
	info := d.ent.info
	ck := cacheKey(info.Name, info.Driver, src, opts)
	start := time.Now()
	if bin := readCache(d.cacheDir, ck); bin != nil {
		if p, err := buildBinary(d.ctx, d.ent.dev, bin, opts); err == nil {
			d.mu.Lock()
			d.hits++
			d.mu.Unlock()
			d.logBuild(start, "cache", file, opts, len(src), len(bin))
			return p, nil
		}
	}
	start = time.Now()
	p, bin, how, err := d.buildFromSource(src, opts)
	if err != nil {
		return nil, fmt.Errorf("building kernels/%s (%s) for %s: %w", file, opts, info.Name, err)
	}
	d.mu.Lock()
	d.builds++
	d.mu.Unlock()
	d.logBuild(start, how, file, opts, len(src), len(bin))
	writeCache(d.cacheDir, ck, bin)
	return p, nil
}

// buildFromSource builds src with opts in ctx, or, with build contexts
// (BuildCtxEnv), in one of them, loading the result into ctx from its
// binary ("source-ctx" in the build log; "source" when it fell back to
// ctx). It returns the program in ctx and its binary.
func (d *device) buildFromSource(src, opts string) (clProgram, []byte, string, error) {
	if d.buildCtxs != nil {
		c := <-d.buildCtxs
		bp, err := buildSource(c, d.ent.dev, src, opts)
		var bin []byte
		if err == nil {
			bin = programBinary(bp)
			releaseProgram(bp)
		}
		d.buildCtxs <- c
		if err != nil {
			return nil, nil, "", err
		}
		if len(bin) > 0 {
			if p, err := buildBinary(d.ctx, d.ent.dev, bin, opts); err == nil {
				return p, bin, "source-ctx", nil
			}
		}
	}
	p, err := buildSource(d.ctx, d.ent.dev, src, opts)
	if err != nil {
		return nil, nil, "", err
	}
	return p, programBinary(p), "source", nil
}

// logBuild appends one line about a program build that began at start to
// the build log (BuildLogEnv), if any: milliseconds from Open to the
// start and to the end of the build, its duration, how it was built
// ("source" or "cache"), the file, the source and binary sizes in bytes
// and the options. Failures to write are ignored.
func (d *device) logBuild(start time.Time, how, file, opts string, srcLen, binLen int) {
	if d.buildLog == "" {
		return
	}
	end := time.Now()
	ms := func(t time.Duration) float64 { return float64(t.Microseconds()) / 1e3 }
	line := fmt.Sprintf("%s\t%.1f\t%.1f\t%.1f\t%s\t%s\t%d\t%d\t%s\n", d.ent.info.Spec(), ms(start.Sub(d.opened)), ms(end.Sub(d.opened)),
		ms(end.Sub(start)), how, file, srcLen, binLen, opts)
	if d.buildLog == "-" {
		os.Stderr.WriteString(line)
		return
	}
	f, err := os.OpenFile(d.buildLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	f.WriteString(line)
	f.Close()
}

// errProbe stops the lowering of an op that Prepare probes, once kernel
// has recorded its program.
var errProbe = errors.New("opencl: probing")

// Prepare builds the programs of ops ahead of their launch (rt.Preparer),
// concurrently: each op is lowered up to its kernel lookup, which records
// the program instead of creating the kernel, and every distinct program
// is then built (or loaded from the binary cache) on its own goroutine.
// Ops the device cannot run are skipped (Stream.Launch reports them). It
// returns the build errors.
func (d *device) Prepare(ops []rt.Op) error {
	if d.noPrepare {
		return nil
	}
	var keys []progKey
	seen := map[progKey]bool{}
	for _, op := range ops {
		if op == nil || d.supports(op) != nil || rt.CheckOp(op) != nil {
			continue
		}
		var got []progKey
		c := rt.CloneOp(op)
		d.mu.Lock()
		d.probes[c] = &got
		d.mu.Unlock()
		d.lowerOp(c, true)
		d.mu.Lock()
		delete(d.probes, c)
		d.mu.Unlock()
		for _, k := range got {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	errs := make([]error, len(keys))
	sem := make(chan struct{}, d.jobs)
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[i] = d.program(k.file, k.defines)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ProgramsBuilt is the number of programs the device has built from
// source or loaded from the binary cache (tests: a run after Prepare
// builds none).
func (d *device) ProgramsBuilt() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.builds + d.hits
}
