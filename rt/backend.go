package rt

import (
	"strconv"
	"sync"
	"time"
)

// DeviceKind classifies a device, for display and for "auto" selection.
type DeviceKind uint8

// Device kinds.
const (
	KindOther DeviceKind = iota
	KindCPU              // the host CPU, or a CPU driver (lavapipe, pocl)
	KindDiscreteGPU
	KindIntegratedGPU
	KindVirtualGPU
)

func (k DeviceKind) String() string {
	switch k {
	case KindCPU:
		return "cpu"
	case KindDiscreteGPU:
		return "discrete-gpu"
	case KindIntegratedGPU:
		return "integrated-gpu"
	case KindVirtualGPU:
		return "virtual-gpu"
	}
	return "other"
}

// DeviceInfo describes one device of a backend.
type DeviceInfo struct {
	Backend string     // "cpu", "vulkan", "cuda", "opencl"
	Index   int        // position in the backend's device list
	Name    string     // "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
	Kind    DeviceKind //
	Driver  string     // driver name and version, if known
	Memory  int64      // bytes of device memory (host RAM for the CPU)
	// MaxAlloc is the largest single buffer Alloc can make, in bytes
	// (Vulkan's maxMemoryAllocationSize, OpenCL's CL_DEVICE_MAX_MEM_ALLOC_SIZE);
	// 0 when only Memory limits it.
	MaxAlloc int64
	// MaxRange is the most bytes one operand of an op may span (Vulkan's
	// maxStorageBufferRange); 0 when only MaxAlloc limits it. The engine
	// splits a batch into chunks that fit.
	MaxRange int64
	FP16     bool // f16 arithmetic or at least f16 storage is usable
	FP64     bool // f64 arithmetic is usable
	Unified  bool // device memory is host-visible (UMA, ReBAR, CPU)
	// UUID identifies the physical device across APIs, formatted
	// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" ([FormatUUID]): Vulkan's
	// deviceUUID, CUDA's cuDeviceGetUuid, OpenCL's CL_DEVICE_UUID_KHR. The
	// same GPU seen through Vulkan and CUDA has the same UUID (see
	// [SamePhysical]). Empty when the API reports none (the CPU backend).
	UUID string
	// Logical is set on the logical devices that a backend makes of one
	// physical device for testing (see [LogicalDevices]): cpu:0..cpu:N-1 of
	// VRUN_LOGICAL_DEVICES=cpu=N. Logical devices of one physical device
	// may be listed together in one device list.
	Logical bool
	// Physical is the index of the physical device in the backend's own
	// list; it equals Index unless Logical.
	Physical int
	// Details are extra capability lines for `vrun devices`, in display
	// order: {"subgroup size", "32"}, {"max shared memory", "48 KiB"}, ...
	Details [][2]string
}

// Spec returns the selector that names this device: "vulkan:1".
func (d DeviceInfo) Spec() string {
	return d.Backend + ":" + strconv.Itoa(d.Index)
}

// Backend is one compiled-in device API. Backends register themselves with
// [Register] from their package's init function.
type Backend interface {
	// Name is the selector prefix: "cpu", "vulkan", "cuda", "opencl".
	Name() string
	// Devices lists the backend's devices. When the backend cannot start
	// (no loader, no driver, no device) it returns an error wrapping
	// ErrUnavailable that says why. It may be called many times; the backend
	// loads its libraries once, lazily, and remembers the outcome.
	Devices() ([]DeviceInfo, error)
	// Open opens device index of the backend. The caller must Close it.
	Open(index int) (Device, error)
}

// Device is an opened device. Its methods may be called from several
// goroutines; each Stream is used by one goroutine at a time.
type Device interface {
	Info() DeviceInfo
	// Supports returns nil when the device can run op with its dtypes and
	// sizes, and otherwise an error (usually *UnsupportedError) naming the
	// op and the reason. Stream.Launch checks the same thing.
	Supports(op Op) error
	// Alloc allocates size bytes of device memory, aligned to at least 256
	// bytes. The contents are unspecified. Failure wraps ErrOutOfMemory.
	Alloc(size int64) (Buffer, error)
	// Write copies src into dst at byte offset off and returns when done.
	Write(dst Buffer, off int64, src []byte) error
	// Read copies len(dst) bytes of src at byte offset off into dst and
	// returns when done.
	Read(dst []byte, src Buffer, off int64) error
	// NewStream creates a command stream.
	NewStream(opts StreamOptions) (Stream, error)
	// Close frees every buffer, stream and driver object of the device.
	// It is safe to call more than once.
	Close() error
}

// Buffer is a block of device memory.
type Buffer interface {
	// Size is the usable size in bytes, as asked of Alloc.
	Size() int64
	// Free releases the memory. It is safe to call more than once; buffers
	// still alive when the device closes are freed by Close.
	Free()
}

// StreamOptions configures a Stream.
type StreamOptions struct {
	// Profile asks for per-Launch device times, read by Stream.Timings.
	Profile bool
}

// Stream is a recorded list of commands: copies between host and device
// and op launches. Commands are recorded once, then replayed by every
// Submit, until Reset clears them. This is how a model run is recorded into
// one command buffer (Vulkan), one CUDA graph or one OpenCL queue, and
// replayed while shapes stay the same.
//
// A Stream is used by one goroutine at a time.
type Stream interface {
	// Write records a copy of src into dst at byte offset off. src is read
	// at each Submit, so the caller may refill it between runs; it must not
	// change between Submit and Wait.
	Write(dst Buffer, off int64, src []byte) error
	// Read records a copy of len(dst) bytes from src at byte offset off
	// into dst. dst is filled by the time Wait returns.
	Read(dst []byte, src Buffer, off int64) error
	// Launch records op. It returns an error (usually *UnsupportedError or
	// an invalid-argument error naming the op) if the op cannot run.
	Launch(op Op) error
	// Submit starts executing everything recorded, in order, with the
	// dependencies that order implies. It returns without waiting where the
	// API allows.
	Submit() error
	// Wait blocks until the last Submit has finished and returns its error
	// (ErrDeviceLost, a kernel error, ...).
	Wait() error
	// Timings returns the device time of each Launch of the last Submit, in
	// recording order, when the stream was created with Profile.
	Timings() []time.Duration
	// Reset discards all recorded commands.
	Reset()
	// Close frees the stream. It is safe to call more than once.
	Close() error
}

// LaunchTimes holds the time of each Launch of a stream's last Submit,
// which a backend's [Stream.Timings] returns. It has a lock of its own; the
// zero value holds none.
type LaunchTimes struct {
	mu sync.Mutex
	t  []time.Duration
}

// Get returns a copy of the times, or nil when there are none.
func (l *LaunchTimes) Get() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.t...)
}

// Set replaces the times with t, which l keeps; nil clears them.
func (l *LaunchTimes) Set(t []time.Duration) {
	l.mu.Lock()
	l.t = t
	l.mu.Unlock()
}

// StreamCmd is the kind of a command a backend's [Stream] records: one of
// its three recording calls.
type StreamCmd uint8

// The recording calls of a [Stream].
const (
	CmdWrite  StreamCmd = iota // Stream.Write
	CmdRead                    // Stream.Read
	CmdLaunch                  // Stream.Launch
)
