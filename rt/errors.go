package rt

import (
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
