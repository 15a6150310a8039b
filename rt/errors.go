package rt

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sentinel errors that callers may branch on with errors.Is.
var (
	// ErrUnavailable: a backend or device cannot start (no loader, no driver,
	// no device). The wrapping error says why.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrOutOfMemory: an allocation failed on the device or host.
	ErrOutOfMemory = errors.New("out of memory")
	// ErrUnsupported: an op or dtype is not implemented by a backend.
	ErrUnsupported = errors.New("unsupported")
	// ErrDeviceLost: the device was lost (driver reset, hang); the device must
	// be closed and opened again.
	ErrDeviceLost = errors.New("device lost")
	// ErrClosed: the device, buffer or stream was already closed.
	ErrClosed = errors.New("closed")
	// ErrIndexOutOfRange: an index of Gather, GatherElements or
	// ScatterElements was outside its axis during a run; an [*IndexError]
	// says which op.
	ErrIndexOutOfRange = errors.New("index out of range")
)

// UnsupportedError says which op and dtype a backend cannot run.
type UnsupportedError struct {
	Backend string // "vulkan"
	Op      string // "Unary.Erf", "Conv"
	DType   DType
	Reason  string // optional detail: "device lacks shaderFloat64"
}

func (e *UnsupportedError) Error() string {
	s := fmt.Sprintf("%s: op %s not supported for %s", e.Backend, e.Op, e.DType)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

// OOMError describes a failed allocation.
type OOMError struct {
	Backend string
	Request int64  // bytes asked for
	Heap    string // which heap or pool, if known
	Detail  string
}

func (e *OOMError) Error() string {
	s := fmt.Sprintf("%s: out of memory allocating %d bytes", e.Backend, e.Request)
	if e.Heap != "" {
		s += " from " + e.Heap
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap makes errors.Is(err, ErrOutOfMemory) true.
func (e *OOMError) Unwrap() error { return ErrOutOfMemory }

// IndexError reports that a Gather, GatherElements or ScatterElements op
// met an index outside [-Axis, Axis) during a run (ONNX makes that an
// error). The kernels flag it on the device, in a status word of the
// stream that Stream.Wait reads after the run, so that checking costs no
// host pass over the indices; the op itself wrote zeros (skipped the
// update) for such an index, so the run's outputs must not be used.
// Stream.Wait returns it (possibly wrapped); ops with AllowOutOfRange
// never report.
//
// When several indices (or several ops) are out of range, one of them is
// reported.
type IndexError struct {
	Backend string // "cpu", "vulkan", "opencl", "cuda"
	Op      string // "Gather", "GatherElements", "ScatterElements"
	// Launch is the op's position among the stream's launches, from 0,
	// or -1 when unknown.
	Launch int
	// Index is an offending index as it was given (before a negative
	// index counts from the end), and Axis the size of the axis it
	// indexes; both are valid when Known.
	Index int64
	Axis  int
	Known bool
	// Node and NodeOp name the model node the op was lowered from, when
	// the engine knows it.
	Node, NodeOp string
}

func (e *IndexError) Error() string {
	s := e.Op + ": "
	if e.Node != "" {
		s = fmt.Sprintf("node %s (%s): ", e.Node, e.NodeOp)
	}
	if e.Known {
		s += fmt.Sprintf("index %d out of range for an axis of size %d", e.Index, e.Axis)
	} else {
		s += "index out of range"
	}
	if e.Launch >= 0 && e.Node == "" {
		s += fmt.Sprintf(" (launch %d)", e.Launch)
	}
	return s
}

// Unwrap makes errors.Is(err, ErrIndexOutOfRange) true.
func (e *IndexError) Unwrap() error { return ErrIndexOutOfRange }

// IndexChecked reports whether op is a Gather, GatherElements or
// ScatterElements whose out-of-range indices are errors of the run (it
// does not set AllowOutOfRange): the ops whose kernels set the stream's
// status word.
func IndexChecked(op Op) bool {
	switch o := op.(type) {
	case *Gather:
		return !o.AllowOutOfRange
	case *GatherElements:
		return !o.AllowOutOfRange
	case *ScatterElements:
		return !o.AllowOutOfRange
	}
	return false
}

// IndexStatusWords is the number of status words that a stream's index
// kernels write on the device (the GPU backends share the layout): word 0 holds
// 0, or the Launch+1 of the first op that met an out-of-range index (set
// with an atomic compare-and-swap from 0, so the first one wins), words 1
// and 2 the low and high 32 bits of that index, word 3 the size of its
// axis. The stream zeroes the words before each run.
const IndexStatusWords = 4

// IndexStatusError decodes the status words (IndexStatusWords of them,
// little-endian, as the device wrote them to b) into an *IndexError, with
// the op names of the stream's launches in order; it returns nil when no
// index was out of range.
func IndexStatusError(backend string, b []byte, ops []string) error {
	if len(b) < 4*IndexStatusWords {
		return nil
	}
	var w [IndexStatusWords]uint32
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	if w[0] == 0 {
		return nil
	}
	launch := int(w[0]) - 1
	e := &IndexError{Backend: backend, Launch: launch, Index: int64(uint64(w[2])<<32 | uint64(w[1])), Axis: int(w[3]), Known: true}
	if launch < len(ops) {
		e.Op = ops[launch]
	} else {
		e.Op, e.Launch, e.Known = "index op", -1, false
	}
	return e
}
