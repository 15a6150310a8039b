//go:build cgo

package clshim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/vrun-go/vrun/rt"
)

// stream records commands into a command list and replays them on its own
// in-order queue. It implements rt.Stream.
type stream struct {
	dev     *device
	queue   clQueue
	profile bool

	mu        sync.Mutex
	closed    bool
	cmds      cmdList
	ops       []string // op names of the launches, for errors
	pin       runtime.Pinner
	inFlight  bool
	submitErr error
	times     rt.LaunchTimes // of the last Submit, with profile

	// status holds the rt.IndexStatusWords that checked Gather,
	// GatherElements and ScatterElements kernels flag an out-of-range
	// index in, allocated by the first Launch of such a kernel;
	// usesStatus says whether the recording has one. Submit zeroes the
	// words, Wait reads them back.
	status     rt.Buffer
	statusMem  clMem
	usesStatus bool
	// scratch holds the buffers that recorded kernels use privately
	// (split-K partial tiles), freed with the recording.
	scratch []rt.Buffer
}

func (s *stream) usable() error {
	if s.closed {
		return fmt.Errorf("stream %w", rt.ErrClosed)
	}
	s.dev.mu.Lock()
	defer s.dev.mu.Unlock()
	return s.dev.check()
}

func (s *stream) recordCopy(kind int, what string, b rt.Buffer, off int64, host []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("opencl: Stream.%s: %w", what, err)
	}
	m, err := s.dev.memOf(b)
	if err != nil {
		return fmt.Errorf("opencl: Stream.%s: %w", what, err)
	}
	if err := rt.CheckRange(b.Size(), off, int64(len(host))); err != nil {
		return fmt.Errorf("opencl: Stream.%s: %w", what, err)
	}
	if len(host) == 0 {
		return nil
	}
	s.drain()
	// The queue reads (or fills) host after the enqueue returns, so the
	// memory is pinned for as long as the command is recorded.
	s.pin.Pin(&host[0])
	s.cmds.addCopy(kind, m, off, host)
	return nil
}

// Write records a copy of src into dst at byte offset off.
func (s *stream) Write(dst rt.Buffer, off int64, src []byte) error {
	return s.recordCopy(cmdWrite, "Write", dst, off, src)
}

// Read records a copy of len(dst) bytes from src at byte offset off.
func (s *stream) Read(dst []byte, src rt.Buffer, off int64) error {
	return s.recordCopy(cmdRead, "Read", src, off, dst)
}

// Launch validates op, creates its kernel and sets its arguments.
func (s *stream) Launch(op rt.Op) error {
	if op == nil {
		return errors.New("opencl: Launch: nil op")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("opencl: %s: %w", op.OpName(), err)
	}
	l, err := s.dev.lower(op)
	if err != nil {
		return err
	}
	if l.k != nil && l.statusArg > 0 {
		if err := s.bindStatus(op, l); err != nil {
			releaseKernel(l.k)
			return fmt.Errorf("opencl: %s: %w", op.OpName(), err)
		}
	}
	s.drain()
	s.scratch = append(s.scratch, l.scratch...)
	s.cmds.addKernel(l.k, l.dims, l.gws, l.lws)
	s.ops = append(s.ops, op.OpName())
	return nil
}

// bindStatus sets the index-status arguments of l's kernel: the stream's
// status words and the op's tag, its launch index + 1 (0 when the op
// allows out-of-range indices).
func (s *stream) bindStatus(op rt.Op, l *launchSpec) error {
	if s.status == nil {
		b, err := s.dev.Alloc(4 * rt.IndexStatusWords)
		if err != nil {
			return err
		}
		m, err := s.dev.memOf(b)
		if err != nil {
			b.Free()
			return err
		}
		s.status, s.statusMem = b, m
	}
	if err := setArgMem(l.k, l.statusArg, s.statusMem); err != nil {
		return err
	}
	var tag uint32
	if rt.IndexChecked(op) {
		tag = uint32(len(s.ops) + 1)
	}
	if err := setArgBytes(l.k, l.statusArg+1, binary.LittleEndian.AppendUint32(nil, tag)); err != nil {
		return err
	}
	s.usesStatus = true
	return nil
}

// drain waits for an in-flight run before the recording changes.
func (s *stream) drain() {
	if s.inFlight {
		finish(s.queue)
		s.cmds.times()
		s.inFlight = false
	}
}

// Submit enqueues everything recorded and flushes the queue.
func (s *stream) Submit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		s.submitErr = fmt.Errorf("opencl: Submit: %w", err)
		return s.submitErr
	}
	s.drain()
	s.submitErr = nil
	if s.usesStatus {
		var zero [4 * rt.IndexStatusWords]byte
		if err := writeSync(s.queue, s.statusMem, 0, zero[:]); err != nil {
			s.submitErr = fmt.Errorf("opencl: Submit: %w", mapExecErr(err))
			return s.submitErr
		}
	}
	i, err := s.cmds.submit(s.queue, s.profile)
	s.inFlight = true
	if err != nil {
		s.submitErr = fmt.Errorf("opencl: Submit: command %d: %w", i, mapExecErr(err))
		return s.submitErr
	}
	return nil
}

// Wait blocks until the last Submit has finished (one clFinish).
func (s *stream) Wait() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inFlight {
		return s.submitErr
	}
	s.inFlight = false
	err := finish(s.queue)
	if s.profile {
		ns, terr := s.cmds.times()
		var times []time.Duration
		for _, n := range ns {
			times = append(times, time.Duration(n))
		}
		s.times.Set(times)
		if err == nil {
			err = terr
		}
	}
	if s.submitErr != nil {
		return s.submitErr
	}
	if err != nil {
		return fmt.Errorf("opencl: Wait: %w", mapExecErr(err))
	}
	if s.usesStatus {
		var b [4 * rt.IndexStatusWords]byte
		if err := readSync(s.queue, s.statusMem, 0, b[:]); err != nil {
			return fmt.Errorf("opencl: Wait: %w", mapExecErr(err))
		}
		return rt.IndexStatusError(BackendName, b[:], s.ops)
	}
	return nil
}

// Timings returns the device time of each Launch of the last Submit.
func (s *stream) Timings() []time.Duration { return s.times.Get() }

// Reset discards all recorded commands and their kernels.
func (s *stream) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reset()
}

func (s *stream) reset() {
	s.drain()
	for _, k := range s.cmds.kernels() {
		releaseKernel(k)
	}
	s.cmds.reset()
	for _, b := range s.scratch {
		b.Free()
	}
	s.scratch = nil
	s.ops = nil
	s.usesStatus = false
	s.pin.Unpin()
	s.times.Set(nil)
	s.submitErr = nil
}

// Close frees the stream; it is safe to call more than once.
func (s *stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.reset()
	s.cmds.free()
	if s.status != nil {
		s.status.Free()
		s.status = nil
	}
	releaseQueue(s.queue)
	s.closed = true
	s.dev.mu.Lock()
	delete(s.dev.streams, s)
	s.dev.mu.Unlock()
	return nil
}
