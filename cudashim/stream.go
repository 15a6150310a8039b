//go:build cgo

package cudashim

/*
#include "cuda_shim.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

type command struct {
	kind  rt.StreamCmd
	buf   *Buffer
	off   int64
	host  []byte
	stage int64 // offset in the stream's pinned staging memory
	// pin is host itself when it lies in a Device.AllocHost buffer: the
	// copy goes from or to it directly, without the staging copy.
	pin      unsafe.Pointer
	launches []launch // rt.CmdLaunch
	bufs     []*Buffer
	name     string
}

// Stream records commands and replays them: the whole list is captured
// once into a CUDA graph and replayed with cuGraphLaunch until Reset or a
// new record; with Profile it is issued directly, with events around each
// op. It implements [rt.Stream].
type Stream struct {
	dev     *Device
	profile bool
	cs      C.CUstream

	mu      sync.Mutex
	closed  bool
	cmds    []command
	nLaunch int
	dirty   bool // commands changed since the graph was captured

	graph C.CUgraph
	exec  C.CUgraphExec

	pinned     unsafe.Pointer
	pinnedSize int64

	blas   C.cublasHandle_t
	blasWS C.CUdeviceptr

	dnn dnnStream // cuDNN handle and workspace (cudnn.go)

	// scratch holds the split-K partial sums of the small-grid Convs
	// (convsk.go): scratchSize bytes, grown by prepare to the largest
	// need of the recorded launches, freed by Close.
	scratch     C.CUdeviceptr
	scratchSize int64

	events []C.CUevent
	times  rt.LaunchTimes // of the last Submit, with profile

	// after is recorded by After on another stream; with afterSet the
	// next Submit makes cs wait for it first.
	after    C.CUevent
	afterSet bool

	pending bool // submitted, not yet waited
	err     error

	// status holds the rt.IndexStatusWords that checked Gather,
	// GatherElements and ScatterElements kernels flag an out-of-range
	// index in, allocated by the first Launch of such a kernel (when the
	// PTX has the status fields, Device.indexStatus). usesStatus says
	// whether the recording has one: each run first copies zeros into it
	// from pinned memory at statusStage, and copies it back to
	// statusStage+statusBytes at its end, which Wait decodes.
	status      *Buffer
	usesStatus  bool
	statusStage int64
}

// statusBytes is the size of a stream's index status words.
const statusBytes = 4 * rt.IndexStatusWords

// blasWorkspace is the cuBLAS workspace per stream, set explicitly so
// cuBLAS never allocates while a graph is being captured.
const blasWorkspace = 32 << 20

func (s *Stream) usable() error {
	if s.closed {
		return fmt.Errorf("stream %w", rt.ErrClosed)
	}
	return s.dev.check()
}

func (s *Stream) record(what string, dst *Buffer, off int64, host []byte, kind rt.StreamCmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("cuda: Stream.%s: %w", what, err)
	}
	if err := rt.CheckRange(dst.size, off, int64(len(host))); err != nil {
		return fmt.Errorf("cuda: Stream.%s: %w", what, err)
	}
	s.cmds = append(s.cmds, command{kind: kind, buf: dst, off: off, host: host, bufs: []*Buffer{dst}, pin: s.dev.hostOf(host)})
	s.dirty = true
	return nil
}

// Write records a copy of src into dst at byte offset off; src is read at
// each Submit (copied to pinned memory, then copied asynchronously).
func (s *Stream) Write(dst rt.Buffer, off int64, src []byte) error {
	b, err := s.dev.bufferOf(dst)
	if err != nil {
		return fmt.Errorf("cuda: Stream.Write: %w", err)
	}
	return s.record("Write", b, off, src, rt.CmdWrite)
}

// Read records a copy of len(dst) bytes of src at byte offset off into
// dst, which is filled by the time Wait returns.
func (s *Stream) Read(dst []byte, src rt.Buffer, off int64) error {
	b, err := s.dev.bufferOf(src)
	if err != nil {
		return fmt.Errorf("cuda: Stream.Read: %w", err)
	}
	return s.record("Read", b, off, dst, rt.CmdRead)
}

// Launch validates op, lowers it to kernel launches (and cuBLAS calls)
// and records them.
func (s *Stream) Launch(op rt.Op) error {
	if op == nil {
		return errors.New("cuda: Launch: nil op")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("cuda: %s: %w", op.OpName(), err)
	}
	if err := s.dev.validate(op); err != nil {
		return err
	}
	ls, bufs, err := s.dev.lower(op)
	if err != nil {
		return err
	}
	if s.dev.indexStatus {
		for i := range ls {
			if ls[i].statusAt == 0 {
				continue
			}
			if err := s.bindStatus(op, &ls[i]); err != nil {
				return fmt.Errorf("cuda: %s: %w", op.OpName(), err)
			}
			bufs = append(bufs, s.status)
		}
	}
	s.cmds = append(s.cmds, command{kind: rt.CmdLaunch, launches: ls, bufs: bufs, name: op.OpName()})
	s.nLaunch++
	s.dirty = true
	return nil
}

// bindStatus fills in the index-status fields of l's arguments: the
// stream's status words and the op's tag, its launch index + 1 (0 when the
// op allows out-of-range indices).
func (s *Stream) bindStatus(op rt.Op, l *launch) error {
	if s.status == nil {
		b, err := s.dev.Alloc(statusBytes)
		if err != nil {
			return err
		}
		s.status = b.(*Buffer)
	}
	p, err := s.status.devptr()
	if err != nil {
		return err
	}
	var tag uint64
	if rt.IndexChecked(op) {
		tag = uint64(s.nLaunch + 1)
	}
	binary.LittleEndian.PutUint64(l.args[l.statusAt:], p)
	binary.LittleEndian.PutUint64(l.args[l.statusAt+8:], tag)
	s.usesStatus = true
	return nil
}

func (s *Stream) usesBlas() bool {
	for i := range s.cmds {
		for _, l := range s.cmds[i].launches {
			if l.gemm != nil {
				return true
			}
		}
	}
	return false
}

// prepare lays out the staging memory and creates the cuBLAS handle and
// events, all before any capture starts. The context is current.
func (s *Stream) prepare() error {
	var need int64
	for i := range s.cmds {
		c := &s.cmds[i]
		if c.kind == rt.CmdLaunch || c.pin != nil {
			continue
		}
		c.stage = need
		need += (int64(len(c.host)) + 255) &^ 255
	}
	if s.usesStatus {
		s.statusStage = need
		need += 256
	}
	if need > s.pinnedSize {
		if s.pinned != nil {
			C.vr_cuMemFreeHost(s.pinned)
			s.pinned, s.pinnedSize = nil, 0
		}
		var p unsafe.Pointer
		if err := check(C.vr_cuMemHostAlloc(&p, C.size_t(need)), "cuMemHostAlloc"); err != nil {
			if errors.Is(err, rt.ErrOutOfMemory) {
				return &rt.OOMError{Backend: BackendName, Request: need, Heap: "pinned host memory", Detail: err.Error()}
			}
			return err
		}
		s.pinned, s.pinnedSize = p, need
	}
	if s.usesBlas() && s.blas == nil {
		if err := checkBlas(C.vr_cublasCreate(&s.blas), "cublasCreate_v2"); err != nil {
			s.blas = nil
			return err
		}
		if err := checkBlas(C.vr_cublasSetMathMode(s.blas, C.int(b2i(s.dev.tf32))), "cublasSetMathMode"); err != nil {
			return err
		}
		if C.vr_cublas_has_workspace() != 0 {
			if err := check(C.vr_cuMemAlloc(&s.blasWS, blasWorkspace), "cuMemAlloc_v2 (cuBLAS workspace)"); err != nil {
				return err
			}
		}
	}
	if s.blas != nil {
		if err := checkBlas(C.vr_cublasSetStream(s.blas, s.cs), "cublasSetStream_v2"); err != nil {
			return err
		}
		// SetStream resets the workspace to cuBLAS's own pool: set it again.
		if s.blasWS != 0 {
			if err := checkBlas(C.vr_cublasSetWorkspace(s.blas, s.blasWS, blasWorkspace), "cublasSetWorkspace_v2"); err != nil {
				return err
			}
		}
	}
	if err := s.dnnPrepare(); err != nil {
		return err
	}
	if err := s.scratchPrepare(); err != nil {
		return err
	}
	if s.profile {
		for len(s.events) < 2*s.nLaunch {
			var e C.CUevent
			if err := check(C.vr_cuEventCreate(&e), "cuEventCreate"); err != nil {
				return err
			}
			s.events = append(s.events, e)
		}
	}
	return nil
}

// scratchPrepare grows the scratch buffer to the largest need of the
// recorded launches and writes its address into their arguments. It runs
// before any capture, with the context current and no Submit pending.
func (s *Stream) scratchPrepare() error {
	var need int64
	for i := range s.cmds {
		for _, l := range s.cmds[i].launches {
			need = max(need, l.scratch)
		}
	}
	if need == 0 {
		return nil
	}
	if need > s.scratchSize {
		if s.scratch != 0 {
			C.vr_cuMemFree(s.scratch)
			s.scratch, s.scratchSize = 0, 0
		}
		n := (need + 1<<20 - 1) &^ (1<<20 - 1)
		var p C.CUdeviceptr
		if err := check(C.vr_cuMemAlloc(&p, C.size_t(n)), "cuMemAlloc_v2 (split-K scratch)"); err != nil {
			if errors.Is(err, rt.ErrOutOfMemory) {
				return &rt.OOMError{Backend: BackendName, Request: n, Heap: "device memory of " + s.dev.info.Spec(),
					Detail: "split-K convolution scratch: " + err.Error()}
			}
			return err
		}
		s.scratch, s.scratchSize = p, n
	}
	for i := range s.cmds {
		for j := range s.cmds[i].launches {
			if l := &s.cmds[i].launches[j]; l.scratchAt > 0 {
				binary.LittleEndian.PutUint64(l.args[l.scratchAt:], uint64(s.scratch))
			}
		}
	}
	return nil
}

// issue enqueues every command on the stream (captured or not).
func (s *Stream) issue() error {
	var statusPtr C.CUdeviceptr
	if s.usesStatus {
		p, err := s.status.devptr()
		if err != nil {
			return err
		}
		statusPtr = C.CUdeviceptr(p)
		if err := check(C.vr_cuMemcpyHtoDAsync(statusPtr, unsafe.Add(s.pinned, s.statusStage), statusBytes, s.cs), "cuMemcpyHtoDAsync_v2"); err != nil {
			return err
		}
	}
	if err := s.issueCmds(); err != nil {
		return err
	}
	if s.usesStatus {
		return check(C.vr_cuMemcpyDtoHAsync(unsafe.Add(s.pinned, s.statusStage+statusBytes), statusPtr, statusBytes, s.cs), "cuMemcpyDtoHAsync_v2")
	}
	return nil
}

// issueCmds enqueues the recorded commands.
func (s *Stream) issueCmds() error {
	ev := 0
	for i := range s.cmds {
		c := &s.cmds[i]
		switch c.kind {
		case rt.CmdWrite, rt.CmdRead:
			if len(c.host) == 0 {
				continue
			}
			p, err := c.buf.devptr()
			if err != nil {
				return err
			}
			dp := C.CUdeviceptr(p + uint64(c.off))
			hp := unsafe.Add(s.pinned, c.stage)
			if c.pin != nil {
				hp = c.pin
			}
			if c.kind == rt.CmdWrite {
				err = check(C.vr_cuMemcpyHtoDAsync(dp, hp, C.size_t(len(c.host)), s.cs), "cuMemcpyHtoDAsync_v2")
			} else {
				err = check(C.vr_cuMemcpyDtoHAsync(hp, dp, C.size_t(len(c.host)), s.cs), "cuMemcpyDtoHAsync_v2")
			}
			if err != nil {
				return fmt.Errorf("command %d: %w", i, err)
			}
		case rt.CmdLaunch:
			if s.profile {
				if err := check(C.vr_cuEventRecord(s.events[ev], s.cs), "cuEventRecord"); err != nil {
					return err
				}
			}
			for _, l := range c.launches {
				if err := s.issueLaunch(&l); err != nil {
					return fmt.Errorf("command %d (%s): %w", i, c.name, err)
				}
			}
			if s.profile {
				if err := check(C.vr_cuEventRecord(s.events[ev+1], s.cs), "cuEventRecord"); err != nil {
					return err
				}
				ev += 2
			}
		}
	}
	return nil
}

func (s *Stream) issueLaunch(l *launch) error {
	if l.dnn != nil {
		return s.issueDnn(l.dnn)
	}
	if g := l.gemm; g != nil {
		st := C.vr_gemm(s.blas, C.int(g.dt), C.int(b2i(g.ta)), C.int(b2i(g.tb)), C.int(g.m), C.int(g.n), C.int(g.k),
			C.double(g.alpha), C.CUdeviceptr(g.a), C.int(g.lda), C.longlong(g.sa),
			C.CUdeviceptr(g.b), C.int(g.ldb), C.longlong(g.sb),
			C.double(g.beta), C.CUdeviceptr(g.c), C.int(g.ldc), C.longlong(g.sc), C.int(g.batch))
		return checkBlas(st, "cublas GEMM")
	}
	f := s.dev.fns[l.kernel]
	block := uint32(nt)
	if l.block > 0 {
		block = l.block
	}
	return check(C.vr_launch(f, C.uint(l.grid[0]), C.uint(l.grid[1]), C.uint(l.grid[2]), C.uint(block), s.cs,
		unsafe.Pointer(&l.args[0])), "cuLaunchKernel("+kernelNames[l.kernel]+")")
}

// capture records the command list into a new CUDA graph.
func (s *Stream) capture() error {
	s.dropGraph()
	if err := check(C.vr_cuStreamBeginCapture(s.cs), "cuStreamBeginCapture_v2"); err != nil {
		return err
	}
	ierr := s.issue()
	var g C.CUgraph
	eerr := check(C.vr_cuStreamEndCapture(s.cs, &g), "cuStreamEndCapture")
	if ierr != nil || eerr != nil {
		if g != nil {
			C.vr_cuGraphDestroy(g)
		}
		return errors.Join(ierr, eerr)
	}
	var e C.CUgraphExec
	if err := check(C.vr_cuGraphInstantiate(&e, g), "cuGraphInstantiateWithFlags"); err != nil {
		C.vr_cuGraphDestroy(g)
		return err
	}
	s.graph, s.exec = g, e
	return nil
}

func (s *Stream) dropGraph() {
	if s.exec != nil {
		C.vr_cuGraphExecDestroy(s.exec)
		s.exec = nil
	}
	if s.graph != nil {
		C.vr_cuGraphDestroy(s.graph)
		s.graph = nil
	}
}

// Submit starts the recorded commands: host sources are copied to pinned
// memory, then the captured graph (captured now if the commands changed)
// is launched. It returns without waiting.
func (s *Stream) Submit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		s.err = fmt.Errorf("cuda: Submit: %w", err)
		return s.err
	}
	leave, err := s.dev.enter()
	if err != nil {
		s.err = s.dev.noteErr(err)
		return s.err
	}
	defer leave()
	if s.pending { // a Submit without Wait: finish it before reusing memory
		s.waitLocked()
	}
	s.err = s.submitLocked()
	if s.err != nil {
		s.err = s.dev.noteErr(fmt.Errorf("cuda: Submit: %w", s.err))
		return s.err
	}
	s.pending = true
	return nil
}

func (s *Stream) submitLocked() error {
	for i := range s.cmds {
		for _, b := range s.cmds[i].bufs {
			if _, err := b.devptr(); err != nil {
				return fmt.Errorf("command %d: %w", i, err)
			}
		}
	}
	if len(s.cmds) == 0 {
		return s.waitAfter() // a stream ordered after this one still follows the earlier one
	}
	if s.dirty || (!s.profile && s.exec == nil) {
		s.dropGraph()
		if err := s.prepare(); err != nil {
			return err
		}
	}
	for i := range s.cmds {
		c := &s.cmds[i]
		if c.kind == rt.CmdWrite && len(c.host) > 0 && c.pin == nil {
			copy(unsafe.Slice((*byte)(unsafe.Add(s.pinned, c.stage)), len(c.host)), c.host)
		}
	}
	if s.usesStatus {
		clear(unsafe.Slice((*byte)(unsafe.Add(s.pinned, s.statusStage)), statusBytes))
	}
	if s.profile {
		s.dirty = false
		if err := s.waitAfter(); err != nil {
			return err
		}
		return s.issue()
	}
	if s.exec == nil {
		if err := s.capture(); err != nil {
			return err
		}
		s.dirty = false
	}
	if err := s.waitAfter(); err != nil {
		return err
	}
	return check(C.vr_cuGraphLaunch(s.exec, s.cs), "cuGraphLaunch")
}

// waitAfter makes cs wait for the event After recorded, once. The
// context is current.
func (s *Stream) waitAfter() error {
	if !s.afterSet {
		return nil
	}
	s.afterSet = false
	return check(C.vr_cuStreamWaitEvent(s.cs, s.after), "cuStreamWaitEvent")
}

// After makes the stream's next Submit wait on the device for the work
// submitted to and enqueued on prev so far (an event recorded on prev's
// CUstream now, waited for by this stream's CUstream right before its
// next graph launch), with no host synchronisation. prev must be another
// stream of the same device. It locks the stream, then prev. It
// implements [rt.OrderedStream].
func (s *Stream) After(prev rt.Stream) error {
	p, ok := prev.(*Stream)
	switch {
	case !ok:
		return fmt.Errorf("cuda: After: %T is not a CUDA stream", prev)
	case p == s:
		return errors.New("cuda: After: a stream cannot wait for itself")
	case p.dev != s.dev:
		return errors.New("cuda: After: the streams belong to different devices")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("cuda: After: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usable(); err != nil {
		return fmt.Errorf("cuda: After: the earlier %w", err)
	}
	leave, err := s.dev.enter()
	if err != nil {
		return s.dev.noteErr(fmt.Errorf("cuda: After: %w", err))
	}
	defer leave()
	if s.after == nil {
		if err := check(C.vr_cuEventCreateSync(&s.after), "cuEventCreate"); err != nil {
			s.after = nil
			return s.dev.noteErr(fmt.Errorf("cuda: After: %w", err))
		}
	}
	if err := check(C.vr_cuEventRecord(s.after, p.cs), "cuEventRecord"); err != nil {
		return s.dev.noteErr(fmt.Errorf("cuda: After: %w", err))
	}
	s.afterSet = true
	return nil
}

// Wait blocks until the last Submit has finished (one
// cuStreamSynchronize), copies Read results out of pinned memory and
// returns the Submit's error.
func (s *Stream) Wait() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pending {
		return s.err
	}
	leave, err := s.dev.enter()
	if err != nil {
		s.pending = false
		s.err = s.dev.noteErr(err)
		return s.err
	}
	defer leave()
	s.waitLocked()
	return s.err
}

func (s *Stream) waitLocked() {
	s.pending = false
	if err := check(C.vr_cuStreamSynchronize(s.cs), "cuStreamSynchronize"); err != nil {
		s.err = s.dev.noteErr(fmt.Errorf("cuda: Wait: %w", err))
		return
	}
	for i := range s.cmds {
		c := &s.cmds[i]
		if c.kind == rt.CmdRead && len(c.host) > 0 && c.pin == nil {
			copy(c.host, unsafe.Slice((*byte)(unsafe.Add(s.pinned, c.stage)), len(c.host)))
		}
	}
	if s.usesStatus && s.err == nil {
		b := unsafe.Slice((*byte)(unsafe.Add(s.pinned, s.statusStage+statusBytes)), statusBytes)
		var names []string
		for i := range s.cmds {
			if s.cmds[i].kind == rt.CmdLaunch {
				names = append(names, s.cmds[i].name)
			}
		}
		s.err = rt.IndexStatusError(BackendName, b, names)
	}
	if s.profile {
		var times []time.Duration
		for i := 0; i < s.nLaunch; i++ {
			var ms C.float
			if err := check(C.vr_cuEventElapsedTime(&ms, s.events[2*i], s.events[2*i+1]), "cuEventElapsedTime"); err != nil {
				times = append(times, 0)
				continue
			}
			times = append(times, time.Duration(float64(ms)*1e6))
		}
		s.times.Set(times)
	}
}

// Timings returns the device time of each Launch of the last Submit, in
// recording order, when the stream was created with Profile.
func (s *Stream) Timings() []time.Duration { return s.times.Get() }

// Reset discards all recorded commands (and the captured graph).
func (s *Stream) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending && !s.closed {
		if leave, err := s.dev.enter(); err == nil {
			s.waitLocked()
			leave()
		}
	}
	s.dnnDropCmds()
	s.cmds = nil
	s.nLaunch = 0
	s.usesStatus = false
	s.times.Set(nil)
	s.err = nil
	s.dirty = true
}

// Close frees the stream's CUstream, graph, events, cuBLAS handle and
// staging memory. It is safe to call more than once.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.dnnDropCmds()
	s.cmds = nil
	d := s.dev
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cuCtxSetCurrent(d.ctx) == nil {
		if s.pending {
			C.vr_cuStreamSynchronize(s.cs)
			s.pending = false
		}
		s.dropGraph()
		for _, e := range s.events {
			C.vr_cuEventDestroy(e)
		}
		s.events = nil
		if s.after != nil {
			C.vr_cuEventDestroy(s.after)
			s.after, s.afterSet = nil, false
		}
		if s.blas != nil {
			C.vr_cublasDestroy(s.blas)
			s.blas = nil
		}
		if s.blasWS != 0 {
			C.vr_cuMemFree(s.blasWS)
			s.blasWS = 0
		}
		s.dnnClose()
		if s.scratch != 0 {
			C.vr_cuMemFree(s.scratch)
			s.scratch, s.scratchSize = 0, 0
		}
		if s.pinned != nil {
			C.vr_cuMemFreeHost(s.pinned)
			s.pinned, s.pinnedSize = nil, 0
		}
		C.vr_cuStreamDestroy(s.cs)
		s.cs = nil
	}
	st := s.status
	s.status = nil
	s.mu.Unlock()
	if st != nil {
		st.Free()
	}
	d.mu.Lock()
	delete(d.streams, s)
	d.mu.Unlock()
	return nil
}

// Enqueue calls f with the stream's CUstream while the device's (primary)
// context is current on the calling thread: work f enqueues there (an
// NCCL all-reduce) runs after the last Submit's graph, and Wait waits for
// it. It implements [rt.NativeStream].
func (s *Stream) Enqueue(f func(queue uintptr) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("cuda: Enqueue: %w", err)
	}
	leave, err := s.dev.enter()
	if err != nil {
		return s.dev.noteErr(fmt.Errorf("cuda: Enqueue: %w", err))
	}
	defer leave()
	return f(uintptr(unsafe.Pointer(s.cs)))
}
