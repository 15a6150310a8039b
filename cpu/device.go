package cpu

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	xcpu "golang.org/x/sys/cpu"

	"github.com/vrun-go/vrun/rt"
)

// BackendName is the name under which the backend registers: "cpu".
const BackendName = "cpu"

// bufAlign is the alignment of every buffer's first byte.
const bufAlign = 256

func init() { rt.Register(Backend{}) }

// Backend is the CPU backend. Its zero value is ready to use; the package
// registers one from init.
type Backend struct{}

// Name returns "cpu".
func (Backend) Name() string { return BackendName }

// Devices returns the host device: one, or N logical devices cpu:0 to
// cpu:N-1 with VRUN_CPU_DEVICES=N or VRUN_LOGICAL_DEVICES=cpu=N (see
// rt.LogicalDevices). Logical CPU devices are independent devices (their
// own buffers and streams) that share the host's cores and worker pool.
func (Backend) Devices() ([]rt.DeviceInfo, error) {
	n, err := rt.LogicalDevices(BackendName)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w: %w", err, rt.ErrUnavailable)
	}
	return rt.ExpandLogical([]rt.DeviceInfo{deviceInfo()}, n), nil
}

// Open opens the host device: index 0, or a logical device (see Devices).
func (b Backend) Open(index int) (rt.Device, error) {
	ds, err := b.Devices()
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(ds) {
		if len(ds) == 1 {
			return nil, fmt.Errorf("cpu: no device %d (the CPU backend has one device, 0; VRUN_CPU_DEVICES=N makes N logical devices)", index)
		}
		return nil, fmt.Errorf("cpu: no device %d (the CPU backend has %d logical devices, 0 to %d)", index, len(ds), len(ds)-1)
	}
	d := NewDevice()
	if ds[index].Logical {
		d.info = &ds[index]
	}
	return d, nil
}

var (
	infoOnce sync.Once
	info     rt.DeviceInfo
)

func deviceInfo() rt.DeviceInfo {
	infoOnce.Do(func() {
		feats := cpuFeatures()
		name := fmt.Sprintf("Go CPU (%s, %d threads", runtime.GOARCH, runtime.GOMAXPROCS(0))
		if len(feats) > 0 {
			name += ", " + strings.Join(feats, " ")
		}
		name += ")"
		info = rt.DeviceInfo{
			Backend: BackendName,
			Index:   0,
			Name:    name,
			Kind:    rt.KindCPU,
			Driver:  runtime.Version(),
			Memory:  totalMemory(),
			FP16:    true,
			FP64:    true,
			Unified: true,
			Details: [][2]string{
				{"threads", strconv.Itoa(runtime.GOMAXPROCS(0))},
				{"logical cpus", strconv.Itoa(runtime.NumCPU())},
				{"gemm kernel", gemmKernelName()},
			},
		}
	})
	return info
}

// cpuFeatures lists the SIMD features the kernels may care about.
func cpuFeatures() []string {
	var f []string
	switch runtime.GOARCH {
	case "amd64", "386":
		if xcpu.X86.HasAVX512F {
			f = append(f, "AVX512")
		} else if xcpu.X86.HasAVX2 {
			f = append(f, "AVX2")
		} else if xcpu.X86.HasAVX {
			f = append(f, "AVX")
		} else if xcpu.X86.HasSSE41 {
			f = append(f, "SSE4.1")
		}
		if xcpu.X86.HasFMA {
			f = append(f, "FMA")
		}
	case "arm64":
		if xcpu.ARM64.HasASIMD {
			f = append(f, "NEON")
		}
		if xcpu.ARM64.HasSVE {
			f = append(f, "SVE")
		}
	}
	return f
}

// totalMemory returns the host RAM in bytes from /proc/meminfo, or 0 where
// that file does not exist.
func totalMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			fs := strings.Fields(rest)
			if len(fs) >= 1 {
				kb, err := strconv.ParseInt(fs[0], 10, 64)
				if err == nil && kb > 0 && kb < math.MaxInt64/1024 {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// allocLimit is the largest single allocation the device attempts.
func allocLimit() int64 {
	if m := deviceInfo().Memory; m > 0 {
		return m
	}
	// Unknown RAM: allow up to 1 TiB on 64-bit hosts and 1 GiB on 32-bit.
	if unsafe.Sizeof(uintptr(0)) == 4 {
		return 1 << 30
	}
	return 1 << 40
}

// Device is the opened host device. It implements [rt.Device].
type Device struct {
	mu      sync.Mutex
	closed  bool
	bufs    map[*Buffer]struct{}
	hosts   map[*hostBuf]struct{}
	streams map[*Stream]struct{}
	info    *rt.DeviceInfo // a logical device's, or nil for the host's
}

// NewDevice opens a new host device; Backend.Open(0) calls it.
func NewDevice() *Device {
	return &Device{bufs: map[*Buffer]struct{}{}, hosts: map[*hostBuf]struct{}{}, streams: map[*Stream]struct{}{}}
}

// Info describes the device.
func (d *Device) Info() rt.DeviceInfo {
	if d.info != nil {
		return *d.info
	}
	return deviceInfo()
}

// Buffer is a block of host memory allocated by a [Device]. It implements
// [rt.Buffer].
type Buffer struct {
	dev  *Device
	size int64
	mu   sync.RWMutex
	data []byte      // nil once freed
	dead atomic.Bool // set with data = nil, read lock-free by Submit
	// constant is the hint of [rt.ConstantBuffer]: while it is set, the
	// weight caches (wcache.go) use their entries for weights in the
	// buffer without comparing the weights with their copy.
	constant atomic.Bool
}

var _ rt.ConstantBuffer = (*Buffer)(nil)

// MarkConstant tells the backend that the buffer's contents will not
// change until the next write through the backend (see
// [rt.ConstantBuffer]): convolutions then use their cached weight
// transforms of weights in it without comparing the weights on every run.
// It drops the cached transforms made from it before, which may be stale.
func (b *Buffer) MarkConstant() {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.data == nil {
		return
	}
	dropCachedWeights(b.data)
	b.constant.Store(true)
}

// Constant reports whether the buffer is marked constant.
func (b *Buffer) Constant() bool { return b.constant.Load() }

// written drops the constant hint (and the cached transforms made under
// it) after a write into the buffer.
func (b *Buffer) written() {
	if b == nil || !b.constant.Load() {
		return
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.constant.Swap(false) {
		dropCachedWeights(b.data)
	}
}

// constRef reports whether r's buffer is a CPU buffer marked constant.
func constRef(r rt.Ref) bool {
	b, ok := r.Buf.(*Buffer)
	return ok && b != nil && b.constant.Load()
}

// Size returns the size asked of Alloc.
func (b *Buffer) Size() int64 { return b.size }

// Free releases the buffer; it is safe to call more than once.
func (b *Buffer) Free() {
	b.mu.Lock()
	dropCachedWeights(b.data)
	b.data = nil
	b.dead.Store(true)
	b.constant.Store(false)
	b.mu.Unlock()
	if b.dev != nil {
		b.dev.mu.Lock()
		delete(b.dev.bufs, b)
		b.dev.mu.Unlock()
	}
}

// Bytes returns the buffer's memory, or nil after Free. It lets tests and
// host-side code on the CPU backend access data without copies.
func (b *Buffer) Bytes() []byte {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.data
}

// Alloc allocates size bytes aligned to 256 bytes. A size larger than the
// host's RAM fails with *rt.OOMError.
func (d *Device) Alloc(size int64) (rt.Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("cpu: Alloc: negative size %d", size)
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("cpu: Alloc: %w", err)
	}
	if lim := allocLimit(); size > lim || size > math.MaxInt-2*bufAlign {
		return nil, &rt.OOMError{Backend: BackendName, Request: size, Heap: "host RAM",
			Detail: fmt.Sprintf("larger than the %d bytes of host memory", lim)}
	}
	raw := make([]byte, int(size)+bufAlign)
	off := 0
	if len(raw) > 0 {
		if m := int(uintptr(unsafe.Pointer(&raw[0])) % bufAlign); m != 0 {
			off = bufAlign - m
		}
	}
	b := &Buffer{dev: d, size: size, data: raw[off : off+int(size) : off+int(size)]}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("cpu: Alloc: device %w", rt.ErrClosed)
	}
	d.bufs[b] = struct{}{}
	return b, nil
}

func (d *Device) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("device %w", rt.ErrClosed)
	}
	return nil
}

// bytesOf returns the memory of an rt.Buffer of this backend.
func bytesOf(b rt.Buffer) ([]byte, error) {
	cb, ok := b.(*Buffer)
	if !ok || cb == nil {
		return nil, fmt.Errorf("buffer %T does not belong to the cpu backend", b)
	}
	data := cb.Bytes()
	if data == nil && cb.size > 0 {
		return nil, fmt.Errorf("buffer used after Free: %w", rt.ErrClosed)
	}
	if cb.dev != nil {
		if err := cb.dev.check(); err != nil {
			return nil, err
		}
	}
	return data, nil
}

func rangeOf(data []byte, off int64, n int) ([]byte, error) {
	if err := rt.CheckRange(int64(len(data)), off, int64(n)); err != nil {
		return nil, err
	}
	return data[off : off+int64(n)], nil
}

// Write copies src into dst at byte offset off.
func (d *Device) Write(dst rt.Buffer, off int64, src []byte) error {
	if err := d.check(); err != nil {
		return fmt.Errorf("cpu: Write: %w", err)
	}
	data, err := bytesOf(dst)
	if err != nil {
		return fmt.Errorf("cpu: Write: %w", err)
	}
	r, err := rangeOf(data, off, len(src))
	if err != nil {
		return fmt.Errorf("cpu: Write: %w", err)
	}
	copy(r, src)
	dst.(*Buffer).written()
	return nil
}

// Read copies len(dst) bytes of src at byte offset off into dst.
func (d *Device) Read(dst []byte, src rt.Buffer, off int64) error {
	if err := d.check(); err != nil {
		return fmt.Errorf("cpu: Read: %w", err)
	}
	data, err := bytesOf(src)
	if err != nil {
		return fmt.Errorf("cpu: Read: %w", err)
	}
	r, err := rangeOf(data, off, len(dst))
	if err != nil {
		return fmt.Errorf("cpu: Read: %w", err)
	}
	copy(dst, r)
	return nil
}

// NewStream creates a command stream.
func (d *Device) NewStream(opts rt.StreamOptions) (rt.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("cpu: NewStream: device %w", rt.ErrClosed)
	}
	s := &Stream{dev: d, profile: opts.Profile}
	d.streams[s] = struct{}{}
	return s, nil
}

// Close frees every buffer and stream of the device. It is safe to call
// more than once.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	bufs := d.bufs
	streams := d.streams
	d.bufs = map[*Buffer]struct{}{}
	d.hosts = map[*hostBuf]struct{}{}
	d.streams = map[*Stream]struct{}{}
	d.mu.Unlock()
	for b := range bufs {
		b.mu.Lock()
		dropCachedWeights(b.data)
		b.constant.Store(false)
		b.data = nil
		b.dead.Store(true)
		b.mu.Unlock()
	}
	for s := range streams {
		s.mu.Lock()
		s.closed = true
		s.cmds = nil
		s.mu.Unlock()
	}
	return nil
}

type command struct {
	kind rt.StreamCmd
	buf  rt.Buffer
	off  int64
	host []byte
	op   rt.Op
	k    kernel       // the prepared op
	bufs []operandBuf // its operands' buffers, checked at each Submit
	outs []*Buffer    // the buffers it writes (their constant hint is dropped)
}

// operandBuf names an operand's buffer for the Submit-time check.
type operandBuf struct {
	name string
	buf  *Buffer
}

// Stream records commands and replays them on Submit. Submit runs the
// commands synchronously, in order, on the calling goroutine (kernels use
// worker goroutines internally); Wait only returns the outcome. It
// implements [rt.Stream].
type Stream struct {
	dev     *Device
	profile bool

	mu      sync.Mutex
	closed  bool
	cmds    []command
	nLaunch int
	err     error
	times   rt.LaunchTimes // of the last Submit, with profile
}

func (s *Stream) usable() error {
	if s.closed {
		return fmt.Errorf("stream %w", rt.ErrClosed)
	}
	return s.dev.check()
}

// Write records a copy of src into dst at byte offset off.
func (s *Stream) Write(dst rt.Buffer, off int64, src []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("cpu: Stream.Write: %w", err)
	}
	if err := checkRange(dst, off, len(src)); err != nil {
		return fmt.Errorf("cpu: Stream.Write: %w", err)
	}
	s.cmds = append(s.cmds, command{kind: rt.CmdWrite, buf: dst, off: off, host: src})
	return nil
}

// Read records a copy of len(dst) bytes of src at byte offset off into dst.
func (s *Stream) Read(dst []byte, src rt.Buffer, off int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("cpu: Stream.Read: %w", err)
	}
	if err := checkRange(src, off, len(dst)); err != nil {
		return fmt.Errorf("cpu: Stream.Read: %w", err)
	}
	s.cmds = append(s.cmds, command{kind: rt.CmdRead, buf: src, off: off, host: dst})
	return nil
}

func checkRange(b rt.Buffer, off int64, n int) error {
	if _, err := bytesOf(b); err != nil {
		return err
	}
	return rt.CheckRange(b.Size(), off, int64(n))
}

// Launch validates op and records it.
func (s *Stream) Launch(op rt.Op) error {
	if op == nil {
		return errors.New("cpu: Launch: nil op")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("cpu: %s: %w", op.OpName(), err)
	}
	if err := validate(op); err != nil {
		return err
	}
	c := rt.CloneOp(op)
	var bufs []operandBuf
	var outs []*Buffer
	for _, o := range rt.Operands(c) {
		if b, ok := o.Ref.Buf.(*Buffer); ok && b != nil {
			bufs = append(bufs, operandBuf{o.Name, b})
			if o.Output && !slices.Contains(outs, b) {
				outs = append(outs, b)
			}
		}
	}
	s.cmds = append(s.cmds, command{kind: rt.CmdLaunch, op: c, k: prepare(c), bufs: bufs, outs: outs})
	s.nLaunch++
	return nil
}

// Submit runs every recorded command in order and returns when they are
// done. The error is also returned by the following Wait.
func (s *Stream) Submit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		s.err = fmt.Errorf("cpu: Submit: %w", err)
		return s.err
	}
	s.err = nil
	var times []time.Duration // of the launches, with profile
	if s.profile {
		defer func() { s.times.Set(times) }()
	}
	// An out-of-range index does not stop the run (as on the GPUs, where
	// the kernels flag it in a status word): the first one is reported by
	// Wait once every command has run.
	var idxErr *rt.IndexError
	launch := -1
	for i := range s.cmds {
		c := &s.cmds[i]
		var err error
		switch c.kind {
		case rt.CmdWrite:
			err = s.dev.Write(c.buf, c.off, c.host)
		case rt.CmdRead:
			err = s.dev.Read(c.host, c.buf, c.off)
		case rt.CmdLaunch:
			var t0 time.Time
			if s.profile {
				t0 = time.Now()
			}
			launch++
			err = runCommand(c)
			if s.profile {
				times = append(times, time.Since(t0))
			}
			if err != nil {
				if ie := indexError(err); ie != nil {
					if idxErr == nil {
						ie.Launch = launch
						idxErr = ie
					}
					err = nil
				}
			}
		}
		if err != nil {
			s.err = fmt.Errorf("cpu: Submit: command %d: %w", i, err)
			return s.err
		}
	}
	if idxErr != nil {
		s.err = idxErr
	}
	return nil
}

// indexError returns err's *rt.IndexError, if any (out of the Submit
// loop, so that a run without errors allocates nothing).
func indexError(err error) *rt.IndexError {
	var ie *rt.IndexError
	if errors.As(err, &ie) {
		return ie
	}
	return nil
}

// runCommand runs a recorded launch: its buffers must still be live (the
// device was checked by Submit), and a kernel fault becomes an error.
func runCommand(c *command) (err error) {
	for _, b := range c.bufs {
		if b.buf.dead.Load() {
			return fmt.Errorf("%s: operand %s: buffer used after Free: %w", c.op.OpName(), b.name, rt.ErrClosed)
		}
	}
	defer func() {
		// Defence in depth only: inputs are validated at Launch, so this
		// fires only if a buffer is freed while a kernel runs.
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: kernel fault: %v", c.op.OpName(), r)
		}
		for _, b := range c.outs {
			b.written()
		}
	}()
	return c.k.run()
}

// Wait returns the error of the last Submit; Submit has already finished.
// An index out of range in a checked Gather, GatherElements or
// ScatterElements is an *rt.IndexError, which only Wait returns.
func (s *Stream) Wait() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Timings returns the wall time of each Launch of the last Submit, when the
// stream was created with Profile.
func (s *Stream) Timings() []time.Duration { return s.times.Get() }

// Reset discards all recorded commands.
func (s *Stream) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cmds = nil
	s.nLaunch = 0
	s.times.Set(nil)
	s.err = nil
}

// Close frees the stream; it is safe to call more than once.
func (s *Stream) Close() error {
	s.mu.Lock()
	s.closed = true
	s.cmds = nil
	s.mu.Unlock()
	s.dev.mu.Lock()
	delete(s.dev.streams, s)
	s.dev.mu.Unlock()
	return nil
}
