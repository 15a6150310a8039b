package rt

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

var (
	regMu    sync.Mutex
	backends []Backend
)

// Register adds a backend to the registry. Backend packages call it from
// init; registering a name twice panics (a programming error, not input).
func Register(b Backend) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, x := range backends {
		if x.Name() == b.Name() {
			panic("rt: backend " + b.Name() + " registered twice")
		}
	}
	backends = append(backends, b)
}

// Backends returns the registered backends in the order of [AutoOrder]
// for known names, then the rest by name.
func Backends() []Backend {
	regMu.Lock()
	defer regMu.Unlock()
	out := append([]Backend(nil), backends...)
	sort.SliceStable(out, func(i, j int) bool {
		return backendRank(out[i].Name()) < backendRank(out[j].Name())
	})
	return out
}

// AutoOrder is the order in which "auto" tries backends.
var AutoOrder = []string{"vulkan", "cuda", "opencl", "cpu"}

func backendRank(name string) int {
	for i, n := range AutoOrder {
		if n == name {
			return i
		}
	}
	return len(AutoOrder)
}

// Lookup returns the registered backend with the given name.
func Lookup(name string) (Backend, bool) {
	for _, b := range Backends() {
		if b.Name() == name {
			return b, true
		}
	}
	return nil, false
}

// DeviceList is one backend's entry in [ListDevices].
type DeviceList struct {
	Backend string
	Devices []DeviceInfo
	Err     error // why the backend is unavailable, or nil
}

// ListDevices enumerates every registered backend.
func ListDevices() []DeviceList {
	var out []DeviceList
	for _, b := range Backends() {
		ds, err := b.Devices()
		out = append(out, DeviceList{Backend: b.Name(), Devices: ds, Err: err})
	}
	return out
}

// ParseSpec splits a device selector "vulkan:1" into backend and index.
// A bare backend name means index -1 (the backend's best device).
func ParseSpec(spec string) (backend string, index int, err error) {
	name, idx, ok := strings.Cut(spec, ":")
	if name == "" {
		return "", 0, fmt.Errorf("rt: empty device selector")
	}
	if !ok {
		return name, -1, nil
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return "", 0, fmt.Errorf("rt: bad device index %q in %q", idx, spec)
	}
	return name, i, nil
}

// Open opens the device named by spec: "auto", "cpu", "vulkan",
// "vulkan:1", "cuda:0", "opencl:0". An explicit choice that cannot start is
// an error, never a silent swap. With "auto", each backend that is skipped
// is reported to logf (if non-nil) with the reason; "auto" picks a GPU
// through Vulkan, then CUDA, then OpenCL, then the CPU backend. Software
// devices of GPU APIs (lavapipe, pocl) are never picked by "auto".
func Open(spec string, logf func(format string, args ...any)) (Device, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if spec == "" || spec == "auto" {
		return openAuto(logf)
	}
	name, idx, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	b, ok := Lookup(name)
	if !ok {
		var names []string
		for _, b := range Backends() {
			names = append(names, b.Name())
		}
		return nil, fmt.Errorf("rt: unknown backend %q (compiled in: %s)", name, strings.Join(names, ", "))
	}
	ds, err := b.Devices()
	if err != nil {
		return nil, &deviceError{spec: spec, backend: name, err: err}
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("%s: no devices: %w", spec, ErrUnavailable)
	}
	if idx < 0 {
		idx = bestDevice(ds)
	}
	if idx >= len(ds) {
		return nil, fmt.Errorf("%s: device index %d out of range (backend has %d devices)", spec, idx, len(ds))
	}
	d, err := b.Open(idx)
	if err != nil {
		return nil, &deviceError{spec: ds[idx].Spec(), backend: name, err: err}
	}
	return d, nil
}

func kindRank(k DeviceKind) int {
	switch k {
	case KindDiscreteGPU:
		return 0
	case KindIntegratedGPU:
		return 1
	case KindVirtualGPU:
		return 2
	case KindOther:
		return 3
	}
	return 4
}

func bestDevice(ds []DeviceInfo) int {
	best := 0
	for i, d := range ds {
		if kindRank(d.Kind) < kindRank(ds[best].Kind) {
			best = i
		}
	}
	return best
}

func openAuto(logf func(string, ...any)) (Device, error) {
	var errs []error
	for _, b := range Backends() {
		ds, err := b.Devices()
		if err != nil {
			derr := &deviceError{spec: b.Name(), backend: b.Name(), err: err}
			logf("auto: skipping %v", derr)
			errs = append(errs, derr)
			continue
		}
		if len(ds) == 0 {
			logf("auto: skipping %s: no devices", b.Name())
			continue
		}
		i := bestDevice(ds)
		if b.Name() != "cpu" && ds[i].Kind == KindCPU {
			logf("auto: skipping %s: only a software device (%s)", b.Name(), ds[i].Name)
			continue
		}
		d, err := b.Open(i)
		if err != nil {
			derr := &deviceError{spec: ds[i].Spec(), backend: b.Name(), err: err}
			logf("auto: skipping %v", derr)
			errs = append(errs, derr)
			continue
		}
		logf("auto: using %s (%s)", ds[i].Spec(), ds[i].Name)
		return d, nil
	}
	return nil, fmt.Errorf("rt: no usable device: %w", errors.Join(append(errs, ErrUnavailable)...))
}

// deviceError is a backend's error on opening a device, prefixed with the
// device selector once: "cuda:0: no CUDA driver", not "rt: cuda:0: cuda:
// no CUDA driver".
type deviceError struct {
	spec, backend string
	err           error
}

func (e *deviceError) Error() string {
	return e.spec + ": " + trimPrefixes(e.err.Error(), "rt", e.backend, e.spec)
}

func (e *deviceError) Unwrap() error { return e.err }
