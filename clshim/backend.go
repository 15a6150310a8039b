//go:build cgo

package clshim

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/vrun-go/vrun/rt"
)

func init() { rt.Register(Backend{}) }

// Backend is the OpenCL backend. Its zero value is ready to use; the
// package registers one from init.
type Backend struct{}

// Name returns "opencl".
func (Backend) Name() string { return BackendName }

// devEntry is one enumerated device.
type devEntry struct {
	plat clPlatform
	dev  clDevice
	info rt.DeviceInfo
	caps caps
}

// caps are the device properties the kernels depend on.
type caps struct {
	fp64, fp16ext bool
	cpu           bool
	maxAlloc      int64
	maxWG         int
	computeUnits  int
	localMem      int64
	platform      string
}

var (
	enumOnce sync.Once
	enumDevs []devEntry
	enumErr  error
)

func devices() ([]devEntry, error) {
	enumOnce.Do(func() {
		if err := load(); err != nil {
			enumErr = err
			return
		}
		ps, ds, err := enumerate()
		if err != nil {
			enumErr = fmt.Errorf("opencl: %w: %w", err, rt.ErrUnavailable)
			return
		}
		if len(ds) == 0 {
			enumErr = fmt.Errorf("opencl: no OpenCL platform or device found: %w", rt.ErrUnavailable)
			return
		}
		for i := range ds {
			enumDevs = append(enumDevs, describe(i, ps[i], ds[i]))
		}
	})
	return enumDevs, enumErr
}

func hasExt(exts []string, e string) bool {
	for _, x := range exts {
		if x == e {
			return true
		}
	}
	return false
}

func kib(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

func describe(i int, p clPlatform, d clDevice) devEntry {
	typ := deviceUint(d, clDeviceType)
	unified := deviceUint(d, clDeviceHostUnifiedMemory) != 0
	exts := strings.Fields(deviceString(d, clDeviceExtensions))
	plat := platformString(p, clPlatformName)
	c := caps{
		fp64:         hasExt(exts, "cl_khr_fp64"),
		fp16ext:      hasExt(exts, "cl_khr_fp16"),
		cpu:          typ&clDeviceTypeCPU != 0,
		maxAlloc:     int64(deviceUint(d, clDeviceMaxMemAllocSize)),
		maxWG:        int(deviceUint(d, clDeviceMaxWorkGroupSize)),
		computeUnits: int(deviceUint(d, clDeviceMaxComputeUnits)),
		localMem:     int64(deviceUint(d, clDeviceLocalMemSize)),
		platform:     plat,
	}
	kind := rt.KindOther
	switch {
	case typ&clDeviceTypeGPU != 0 && unified:
		kind = rt.KindIntegratedGPU
	case typ&clDeviceTypeGPU != 0:
		kind = rt.KindDiscreteGPU
	case c.cpu:
		kind = rt.KindCPU
	}
	var interest []string
	for _, e := range []string{"cl_khr_fp64", "cl_khr_fp16", "cl_khr_int64_base_atomics", "cl_khr_subgroups", "cl_intel_subgroups", "cl_nv_device_attribute_query", "cl_amd_device_attribute_query"} {
		if hasExt(exts, e) {
			interest = append(interest, e)
		}
	}
	info := rt.DeviceInfo{
		Backend: BackendName,
		Index:   i,
		Name:    deviceString(d, clDeviceName),
		Kind:    kind,
		Driver:  strings.TrimSpace(plat + " " + deviceString(d, clDriverVersion)),
		Memory:  int64(deviceUint(d, clDeviceGlobalMemSize)),
		// f16 storage works on every device through the core
		// vload_half/vstore_half; arithmetic is done in f32.
		FP16:    true,
		FP64:    c.fp64,
		Unified: unified,
		Details: [][2]string{
			{"platform", plat + " (" + platformString(p, clPlatformVersion) + ")"},
			{"device version", deviceString(d, clDeviceVersion)},
			{"OpenCL C", deviceString(d, clDeviceOpenCLCVersion)},
			{"compute units", strconv.FormatUint(deviceUint(d, clDeviceMaxComputeUnits), 10)},
			{"max work-group size", strconv.Itoa(c.maxWG)},
			{"local memory", kib(uint64(c.localMem))},
			{"max allocation", kib(uint64(c.maxAlloc))},
			{"fp16 arithmetic (cl_khr_fp16)", strconv.FormatBool(c.fp16ext)},
			{"extensions", strings.Join(interest, " ")},
		},
	}
	info.MaxAlloc = c.maxAlloc
	info.Physical = i
	if hasExt(exts, "cl_khr_device_uuid") {
		info.UUID = rt.FormatUUID(deviceUUID(d))
	}
	return devEntry{plat: p, dev: d, info: info, caps: c}
}

// Devices lists every device of every OpenCL platform.
func (Backend) Devices() ([]rt.DeviceInfo, error) {
	ds, err := devices()
	if err != nil {
		return nil, err
	}
	out := make([]rt.DeviceInfo, len(ds))
	for i, d := range ds {
		out[i] = d.info
	}
	n, err := rt.LogicalDevices(BackendName)
	if err != nil {
		return nil, fmt.Errorf("opencl: %w: %w", err, rt.ErrUnavailable)
	}
	return rt.ExpandLogical(out, n), nil
}

// Open opens device index: a context and a queue for synchronous copies.
// A logical device (VRUN_LOGICAL_DEVICES=opencl=N) is a context of its
// own on the physical device.
func (b Backend) Open(index int) (rt.Device, error) {
	ds, err := devices()
	if err != nil {
		return nil, err
	}
	infos, err := b.Devices()
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(infos) {
		return nil, fmt.Errorf("opencl: no device %d (have %d)", index, len(infos))
	}
	e := ds[infos[index].Physical]
	e.info = infos[index]
	d, err := openDevice(e)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return d, nil
}
