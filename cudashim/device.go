//go:build cgo

package cudashim

/*
#include "cuda_shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

func init() { rt.Register(Backend{}) }

// Backend is the CUDA backend. Its zero value is ready to use; the package
// registers one from init.
type Backend struct{}

// Name returns "cuda".
func (Backend) Name() string { return BackendName }

// lib is the outcome of loading the driver and cuBLAS, computed once.
var lib struct {
	once    sync.Once
	err     error
	driver  string // library file name
	blas    string // "" when cuBLAS is disabled
	version int    // cuDriverGetVersion
	devices []rt.DeviceInfo
}

// useCublas reports whether cuBLAS is wanted (VRUN_CUDA_CUBLAS=0 turns it
// off; MatMul then runs on the built-in tiled GEMM kernel).
func useCublas() bool { return os.Getenv("VRUN_CUDA_CUBLAS") != "0" }

// useTF32 reports the TF32 opt-in (VRUN_CUDA_TF32=1).
func useTF32() bool { return os.Getenv("VRUN_CUDA_TF32") == "1" }

func loadLib() error {
	lib.once.Do(func() {
		name, err := loadDriver()
		if err != nil {
			lib.err = err
			return
		}
		lib.driver = name
		if err := cuInit(); err != nil {
			lib.err = fmt.Errorf("cuda: %s: %w", name, withUnavailable(err))
			return
		}
		lib.version = cuDriverVersion()
		if useCublas() {
			b, err := loadBlas()
			if err != nil {
				lib.err = err
				return
			}
			lib.blas = b
		}
		n, err := cuDeviceCount()
		if err != nil {
			lib.err = withUnavailable(err)
			return
		}
		if n == 0 {
			lib.err = fmt.Errorf("cuda: the driver reports no CUDA devices: %w", rt.ErrUnavailable)
			return
		}
		for i := 0; i < n; i++ {
			d, err := cuDevice(i)
			if err != nil {
				lib.err = withUnavailable(err)
				return
			}
			lib.devices = append(lib.devices, describe(i, d))
		}
	})
	return lib.err
}

// withUnavailable makes err match rt.ErrUnavailable too.
func withUnavailable(err error) error {
	if errors.Is(err, rt.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w (%w)", rt.ErrUnavailable, err)
}

func describe(i int, d C.CUdevice) rt.DeviceInfo {
	major, minor := cuAttr(d, attrCCMajor), cuAttr(d, attrCCMinor)
	kind := rt.KindDiscreteGPU
	integrated := cuAttr(d, attrIntegrated) != 0
	if integrated {
		kind = rt.KindIntegratedGPU
	}
	v := lib.version
	drv := fmt.Sprintf("CUDA driver API %d.%d (%s)", v/1000, (v%1000)/10, lib.driver)
	blas := lib.blas
	if blas == "" {
		blas = "disabled (VRUN_CUDA_CUBLAS=0): built-in GEMM kernel"
	}
	tf32 := "off (VRUN_CUDA_TF32=1 enables)"
	if useTF32() {
		tf32 = "on (VRUN_CUDA_TF32=1)"
	}
	ver, target := PTXVersion(embeddedPTX)
	ptx := "placeholder (run cudashim/kernels/build.sh)"
	if !PTXIsPlaceholder() {
		ptx = fmt.Sprintf("ISA %s, target %s", ver, target)
	}
	indexed := "placeholder: GatherElements, ScatterElements, TopK unsupported (run cudashim/kernels/build.sh)"
	if !IndexedPTXIsPlaceholder() {
		ver, target := PTXVersion(embeddedIndexedPTX)
		indexed = fmt.Sprintf("ISA %s, target %s", ver, target)
	}
	optim := "placeholder: OptimStep unsupported (run cudashim/kernels/build.sh --optim)"
	if !OptimPTXIsPlaceholder() {
		ver, target := PTXVersion(embeddedOptimPTX)
		optim = fmt.Sprintf("ISA %s, target %s", ver, target)
	}
	fatbin := fatbinDetail(major*10 + minor)
	return rt.DeviceInfo{
		Backend:  BackendName,
		Index:    i,
		Name:     cuDeviceName(d),
		Kind:     kind,
		Driver:   drv,
		Memory:   cuDeviceTotalMem(d),
		FP16:     true,
		FP64:     true,
		Unified:  integrated,
		UUID:     cuDeviceUUID(lib.driver, d),
		Physical: i,
		Details: [][2]string{
			{"compute capability", fmt.Sprintf("%d.%d", major, minor)},
			{"multiprocessors", strconv.Itoa(cuAttr(d, attrMultiprocessors))},
			{"max shared memory", fmt.Sprintf("%d KiB per block (%d KiB opt-in)", cuAttr(d, attrMaxSharedPerBlock)/1024, cuAttr(d, attrMaxSharedOptin)/1024)},
			{"cublas", blas},
			{"tf32", tf32},
			{"ptx", ptx},
			{"indexed ptx", indexed},
			{"optim ptx", optim},
			{"fatbin", fatbin},
			{"cudnn", dnnDetail()},
			{"conv", convDetail()},
		},
	}
}

// fatbinDetail is DeviceInfo.Details' "fatbin" entry for a GPU of compute
// capability cc (86 for 8.6): the SASS the embedded kernels.fatbin holds
// and whether this GPU can use it.
func fatbinDetail(cc int) string {
	if len(embeddedFatbin) == 0 {
		return "placeholder: the kernels are JIT-compiled from PTX (run cudashim/kernels/build.sh)"
	}
	sass, _, err := FatbinArchs(embeddedFatbin)
	if err != nil {
		return err.Error()
	}
	s := "SASS " + archList(sass)
	if a := sassFor(sass, cc); a != 0 {
		s += fmt.Sprintf("; this GPU (sm_%d) loads sm_%d without a PTX JIT", cc, a)
	} else {
		s += fmt.Sprintf("; none runs on this GPU (sm_%d): the PTX is JIT-compiled", cc)
	}
	if !useFatbin() {
		s += " (disabled: " + fatbinEnv + "=0)"
	}
	return s
}

// Devices lists the CUDA devices. It loads the driver (and cuBLAS) on
// first use and remembers the outcome; a missing driver or library is an
// error wrapping rt.ErrUnavailable that names it.
func (Backend) Devices() ([]rt.DeviceInfo, error) {
	if err := loadLib(); err != nil {
		return nil, err
	}
	n, err := rt.LogicalDevices(BackendName)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w: %w", err, rt.ErrUnavailable)
	}
	return rt.ExpandLogical(append([]rt.DeviceInfo(nil), lib.devices...), n), nil
}

// Open opens device index: it retains the device's primary context and
// loads the kernel modules (their SASS fatbins where the GPU runs them,
// else their PTX through the JIT). A logical device
// (VRUN_LOGICAL_DEVICES=cuda=N) shares the physical device's primary
// context, with its own module, streams, cuBLAS handle and buffers.
func (b Backend) Open(index int) (rt.Device, error) {
	infos, err := b.Devices()
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(infos) {
		return nil, fmt.Errorf("cuda: no device %d (%d devices)", index, len(infos))
	}
	d, err := openDevice(infos[index].Physical, true)
	if err != nil {
		return nil, err
	}
	if infos[index].Logical {
		d.info = d.withKernelsDetail(infos[index])
	}
	return d, nil
}

// kernel indices; kernelNames holds the PTX entry names in this order.
const (
	kEwCopy = iota
	kEwCast
	kEwUnaryF
	kEwUnaryD
	kEwUnaryI
	kEwBinaryF
	kEwBinaryD
	kEwBinaryI
	kEwWhere
	kEwFill
	kReduceRowsH
	kReduceRowsF
	kReduceRowsD
	kReduceColsH
	kReduceColsF
	kReduceColsD
	kReduceInt
	kSoftmaxRowsH
	kSoftmaxRowsF
	kSoftmaxRowsD
	kSoftmaxColsH
	kSoftmaxColsF
	kSoftmaxColsD
	kNormalizeH
	kNormalizeF
	kNormalizeD
	kGemmH
	kGemmF
	kGemmD
	kConvH
	kConvF
	kConvD
	kConvtH
	kConvtF
	kConvtD
	kPoolH
	kPoolF
	kPoolD
	kGather
	kAttentionH64
	kAttentionF64
	kAttentionH128
	kAttentionF128
	kAttentionHT
	kAttentionFT
	kConvSKHN
	kConvSKHU
	kConvSKFN
	kConvSKFU
	kConvSKDN
	kConvSKDU
	kConvSKRH
	kConvSKRF
	kConvSKRD
	kDWConvH
	kDWConvF
	kDWConvD
	numKernels
)

// indices of the kernels of indexed.ptx, after those of kernels.ptx.
const (
	kGatherElements = numKernels + iota
	kScatterElements
	kTopK
	numIndexedEnd
)

// indices of the kernels of optim.ptx, after those of indexed.ptx.
const (
	kOptimF = numIndexedEnd + iota
	kOptimD
	numAllKernels
)

// kernelNames holds the PTX entry names in kernel-index order: those of
// kernels.ptx, then those of indexed.ptx, then those of optim.ptx.
var kernelNames = func() (n [numAllKernels]string) {
	if len(kernelEntryNames) != int(numKernels) || len(indexedEntryNames) != int(numIndexedEnd-numKernels) ||
		len(optimEntryNames) != int(numAllKernels-numIndexedEnd) {
		panic("cudashim: kernel tables out of sync")
	}
	copy(n[:], kernelEntryNames)
	copy(n[numKernels:], indexedEntryNames)
	copy(n[numIndexedEnd:], optimEntryNames)
	return n
}()

// indexedNotBuilt is the reason the ops of indexed.ptx are unsupported while
// it is the placeholder.
const indexedNotBuilt = "indexed.ptx not built; run cudashim/kernels/build.sh on a machine with nvcc"

// optimNotBuilt is the reason OptimStep is unsupported while optim.ptx is
// the placeholder.
const optimNotBuilt = "optim.ptx not built; run cudashim/kernels/build.sh --optim on a machine with nvcc"

// Device is an opened CUDA device. It implements [rt.Device].
type Device struct {
	info    rt.DeviceInfo
	cudev   C.CUdevice
	ctx     C.CUcontext
	mod     C.CUmodule
	indexed C.CUmodule // nil while indexed.ptx is the placeholder
	optim   C.CUmodule // nil while optim.ptx is the placeholder
	fns     [numAllKernels]C.CUfunction
	// noIndexed, when set, is why the ops of indexed.ptx are unsupported.
	noIndexed string
	// noOptim, when set, is why OptimStep is unsupported.
	noOptim string
	// indexStatus: the loaded gather, gather_elements and
	// scatter_elements kernels take the stream's index status words
	// (PTX built from sources with flag_index); with older PTX an index
	// out of range silently gives zero.
	indexStatus bool
	// cc is the compute capability (86 for 8.6).
	cc int
	// loads says how kernels.ptx, indexed.ptx and optim.ptx were loaded:
	// "SASS sm_90 (fatbin)" or "PTX JIT (why)"; "" for a placeholder.
	loads  [3]string
	cublas bool // MatMul uses cuBLAS
	tf32   bool

	mu      sync.Mutex
	closed  bool
	lost    error // set once a launch or sync reported a device-lost error
	bufs    map[*Buffer]struct{}
	hosts   map[*hostBuf]struct{} // AllocHost buffers
	streams map[*Stream]struct{}

	ioMu     sync.Mutex // guards the staging buffer and copy stream
	ioStream C.CUstream
	ioStage  unsafe.Pointer
	ioSize   int64

	dnn dnnDevice // cuDNN state (cudnn.go)

	// skUsed counts the Convs recorded on the small-grid path (convsk.go).
	skUsed atomic.Int64
}

// ioChunk is the size of the pinned staging buffer of Device.Write/Read.
const ioChunk = 8 << 20

// openDevice opens device index; cublas selects cuBLAS for MatMul.
func openDevice(index int, cublas bool) (*Device, error) {
	if err := loadLib(); err != nil {
		return nil, err
	}
	if index < 0 || index >= len(lib.devices) {
		return nil, fmt.Errorf("cuda: no device %d (%d devices)", index, len(lib.devices))
	}
	ptx, ptxSrc, err := kernelPTX()
	if err != nil {
		return nil, err
	}
	if cublas && lib.blas == "" {
		cublas = false
	}
	cd, err := cuDevice(index)
	if err != nil {
		return nil, err
	}
	if major := cuAttr(cd, attrCCMajor); major*10+cuAttr(cd, attrCCMinor) < 75 {
		return nil, fmt.Errorf("cuda: device %d (%s) has compute capability %d.%d; the kernels need 7.5 or newer: %w",
			index, lib.devices[index].Name, major, cuAttr(cd, attrCCMinor), rt.ErrUnavailable)
	}
	d := &Device{info: lib.devices[index], cudev: cd, cc: cuAttr(cd, attrCCMajor)*10 + cuAttr(cd, attrCCMinor), cublas: cublas, tf32: useTF32(),
		bufs: map[*Buffer]struct{}{}, hosts: map[*hostBuf]struct{}{}, streams: map[*Stream]struct{}{}}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check(C.vr_cuDevicePrimaryCtxRetain(&d.ctx, cd), "cuDevicePrimaryCtxRetain"); err != nil {
		return nil, err
	}
	fail := func(err error) (*Device, error) {
		d.release()
		return nil, err
	}
	if err := cuCtxSetCurrent(d.ctx); err != nil {
		return fail(err)
	}
	fb, why := fatbinFor(ptxSrc, ptxOverride, embeddedFatbin)
	if d.mod, d.loads[0], err = d.loadModule("the kernels' PTX", ptx, fb, why); err != nil {
		return fail(err)
	}
	for i, n := range kernelNames[:numKernels] {
		if d.fns[i], err = moduleFunction(d.mod, n); err != nil {
			return fail(fmt.Errorf("%w (the PTX is stale: rebuild it with cudashim/kernels/build.sh)", err))
		}
	}
	indexed, indexedSrc, err := indexedPTX()
	if err != nil {
		return fail(err)
	}
	d.indexStatus = ptxHasIndexStatus(ptx, indexed)
	if indexed == "" {
		d.noIndexed = indexedNotBuilt
	} else {
		fb, why := fatbinFor(indexedSrc, indexedPTXOverride, embeddedIndexedFatbin)
		if d.indexed, d.loads[1], err = d.loadModule("indexed.ptx", indexed, fb, why); err != nil {
			return fail(err)
		}
		for i := numKernels; i < numIndexedEnd; i++ {
			if d.fns[i], err = moduleFunction(d.indexed, kernelNames[i]); err != nil {
				return fail(fmt.Errorf("%w (indexed.ptx is stale: rebuild it with cudashim/kernels/build.sh)", err))
			}
		}
	}
	optim, optimSrc, err := optimPTX()
	if err != nil {
		return fail(err)
	}
	if optim == "" {
		d.noOptim = optimNotBuilt
	} else {
		fb, why := fatbinFor(optimSrc, optimPTXOverride, embeddedOptimFatbin)
		if d.optim, d.loads[2], err = d.loadModule("optim.ptx", optim, fb, why); err != nil {
			return fail(err)
		}
		for i := numIndexedEnd; i < numAllKernels; i++ {
			if d.fns[i], err = moduleFunction(d.optim, kernelNames[i]); err != nil {
				return fail(fmt.Errorf("%w (optim.ptx is stale: rebuild it with cudashim/kernels/build.sh --optim)", err))
			}
		}
	}
	if err := check(C.vr_cuStreamCreate(&d.ioStream), "cuStreamCreate"); err != nil {
		return fail(err)
	}
	var p unsafe.Pointer
	if err := check(C.vr_cuMemHostAlloc(&p, ioChunk), "cuMemHostAlloc"); err != nil {
		return fail(err)
	}
	d.ioStage, d.ioSize = p, ioChunk
	d.info = d.withKernelsDetail(d.info)
	return d, nil
}

// fatbinFor returns fb if a module whose PTX came from src ("embedded" or
// the override file's path) should load it: the PTX is the embedded one,
// VRUN_CUDA_FATBIN is not 0 and fb is not a placeholder. Otherwise it
// returns nil and why the PTX is JIT-compiled; override is the variable
// naming the module's override file.
func fatbinFor(src, override string, fb []byte) ([]byte, string) {
	switch {
	case src != "embedded":
		return nil, override + " replaces the PTX"
	case !useFatbin():
		return nil, fatbinEnv + "=0"
	case len(fb) == 0:
		return nil, "fatbin not built"
	}
	return fb, ""
}

// loadModule loads one kernel module (what names it in errors) in the
// current context: fb, the module's SASS, when non-nil and it holds a
// cubin for this GPU (no JIT); otherwise, or when the driver refuses fb,
// the PTX through the JIT. why is why fb is nil. It returns the module and
// how it was loaded: "SASS sm_90 (fatbin)" or "PTX JIT (why)".
func (d *Device) loadModule(what, ptx string, fb []byte, why string) (C.CUmodule, string, error) {
	if fb != nil {
		sass, ptxs, perr := FatbinArchs(fb)
		arch := sassFor(sass, d.cc)
		switch {
		case perr == nil && arch == 0 && len(ptxs) == 0:
			why = fmt.Sprintf("the fatbin has no SASS for sm_%d, only %s", d.cc, archList(sass))
		default:
			m, err := moduleLoadFatbin(fb)
			if err == nil {
				if arch == 0 {
					return m, "fatbin", nil
				}
				return m, fmt.Sprintf("SASS sm_%d (fatbin)", arch), nil
			}
			if errors.Is(err, rt.ErrDeviceLost) {
				return nil, "", fmt.Errorf("cuda: loading the fatbin of %s (%s): %w", what, d.info.Driver, err)
			}
			why = "the driver refused the fatbin: " + err.Error()
			var ce *cuError
			if errors.As(err, &ce) {
				why = "the driver refused the fatbin: " + ce.name
			}
		}
	}
	m, err := moduleLoad(ptx)
	if err != nil {
		return nil, "", fmt.Errorf("cuda: loading %s (%s): %w", what, d.info.Driver, err)
	}
	return m, "PTX JIT (" + why + ")", nil
}

// withKernelsDetail returns info with a "kernels" entry added to a copy of
// its Details saying how the modules were loaded: one line when they were
// all loaded the same way, else one part per module.
func (d *Device) withKernelsDetail(info rt.DeviceInfo) rt.DeviceInfo {
	names := [3]string{"kernels.ptx", "indexed.ptx", "optim.ptx"}
	var parts []string
	first, same := "", true
	for i, l := range d.loads {
		if l == "" {
			continue
		}
		if first == "" {
			first = l
		} else if l != first {
			same = false
		}
		parts = append(parts, names[i]+": "+l)
	}
	s := first
	if !same {
		s = strings.Join(parts, "; ")
	}
	info.Details = append(append([][2]string(nil), info.Details...), [2]string{"kernels", s})
	return info
}

// release frees the device's own driver objects (not buffers or streams)
// with the context current.
func (d *Device) release() {
	d.dnnRelease()
	if d.ioStage != nil {
		C.vr_cuMemFreeHost(d.ioStage)
		d.ioStage = nil
	}
	if d.ioStream != nil {
		C.vr_cuStreamDestroy(d.ioStream)
		d.ioStream = nil
	}
	if d.indexed != nil {
		C.vr_cuModuleUnload(d.indexed)
		d.indexed = nil
	}
	if d.optim != nil {
		C.vr_cuModuleUnload(d.optim)
		d.optim = nil
	}
	if d.mod != nil {
		C.vr_cuModuleUnload(d.mod)
		d.mod = nil
	}
	if d.ctx != nil {
		C.vr_cuDevicePrimaryCtxRelease(d.cudev)
		d.ctx = nil
	}
}

// enter locks the goroutine to its thread and makes the device's context
// current; call the returned function when done.
func (d *Device) enter() (func(), error) {
	runtime.LockOSThread()
	if err := cuCtxSetCurrent(d.ctx); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

// Info describes the device.
func (d *Device) Info() rt.DeviceInfo { return d.info }

func (d *Device) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("device %w", rt.ErrClosed)
	}
	if d.lost != nil {
		return d.lost
	}
	return nil
}

// noteErr records device-lost errors so later calls fail fast.
func (d *Device) noteErr(err error) error {
	if err != nil && errors.Is(err, rt.ErrDeviceLost) {
		d.mu.Lock()
		if d.lost == nil {
			d.lost = fmt.Errorf("cuda: device %s unusable after an earlier error: %w", d.info.Spec(), err)
		}
		d.mu.Unlock()
	}
	return err
}

// Buffer is a block of device memory. It implements [rt.Buffer].
type Buffer struct {
	dev  *Device
	size int64
	mu   sync.Mutex
	ptr  C.CUdeviceptr // 0 once freed
}

// Size returns the size asked of Alloc.
func (b *Buffer) Size() int64 { return b.size }

// Free releases the memory; it is safe to call more than once.
func (b *Buffer) Free() {
	b.mu.Lock()
	p := b.ptr
	b.ptr = 0
	b.mu.Unlock()
	if p == 0 {
		return
	}
	d := b.dev
	d.mu.Lock()
	delete(d.bufs, b)
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return
	}
	if leave, err := d.enter(); err == nil {
		C.vr_cuMemFree(p)
		leave()
	}
}

// devptr returns the buffer's device address, or an error after Free.
func (b *Buffer) devptr() (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ptr == 0 {
		return 0, fmt.Errorf("buffer used after Free: %w", rt.ErrClosed)
	}
	return uint64(b.ptr), nil
}

// bufferOf returns the *Buffer of an rt.Buffer of this device.
func (d *Device) bufferOf(b rt.Buffer) (*Buffer, error) {
	cb, ok := b.(*Buffer)
	if !ok || cb == nil {
		return nil, fmt.Errorf("buffer %T does not belong to the cuda backend", b)
	}
	if cb.dev != d {
		return nil, fmt.Errorf("buffer belongs to another cuda device")
	}
	if _, err := cb.devptr(); err != nil {
		return nil, err
	}
	return cb, nil
}

// beginAlloc is the prologue of Alloc and AllocHost (named by what): it
// checks the size and the device and makes the device's context current
// until leave.
func (d *Device) beginAlloc(what string, size int64) (leave func(), err error) {
	if size < 0 {
		return nil, fmt.Errorf("cuda: %s: negative size %d", what, size)
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", what, err)
	}
	leave, err = d.enter()
	if err != nil {
		return nil, d.noteErr(err)
	}
	return leave, nil
}

// adopt is the epilogue of Alloc, AllocHost and NewStream (named by what):
// under the device lock it records a new object with add, or releases it
// with free when the device was closed meanwhile.
func (d *Device) adopt(what string, add, free func()) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		free()
		return fmt.Errorf("cuda: %s: device %w", what, rt.ErrClosed)
	}
	add()
	return nil
}

// Alloc allocates size bytes of device memory (256-byte aligned). Failure
// is an *rt.OOMError naming the request.
func (d *Device) Alloc(size int64) (rt.Buffer, error) {
	leave, err := d.beginAlloc("Alloc", size)
	if err != nil {
		return nil, err
	}
	defer leave()
	n := max(size, 256) // cuMemAlloc rejects 0; round tiny sizes up
	var p C.CUdeviceptr
	if err := check(C.vr_cuMemAlloc(&p, C.size_t(n)), "cuMemAlloc_v2"); err != nil {
		if errors.Is(err, rt.ErrOutOfMemory) {
			free, total := cuMemInfo()
			return nil, &rt.OOMError{Backend: BackendName, Request: size, Heap: "device memory of " + d.info.Spec(),
				Detail: fmt.Sprintf("%d of %d bytes free", free, total)}
		}
		return nil, d.noteErr(err)
	}
	b := &Buffer{dev: d, size: size, ptr: p}
	if err := d.adopt("Alloc", func() { d.bufs[b] = struct{}{} }, func() { C.vr_cuMemFree(p) }); err != nil {
		return nil, err
	}
	return b, nil
}

// Write copies src into dst at byte offset off, through pinned staging
// memory, and returns when done.
func (d *Device) Write(dst rt.Buffer, off int64, src []byte) error {
	return d.xfer("Write", dst, off, src, true)
}

// Read copies len(dst) bytes of src at byte offset off into dst.
func (d *Device) Read(dst []byte, src rt.Buffer, off int64) error {
	return d.xfer("Read", src, off, dst, false)
}

func (d *Device) xfer(what string, buf rt.Buffer, off int64, host []byte, toDevice bool) error {
	if err := d.check(); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	b, err := d.bufferOf(buf)
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	if err := rt.CheckRange(b.size, off, int64(len(host))); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	if len(host) == 0 {
		return nil
	}
	leave, ptrs, err := d.enterIO(what, b)
	if err != nil {
		return err
	}
	defer leave()
	ptr := ptrs[0]
	if hp := d.hostOf(host); hp != nil {
		// Pinned memory of AllocHost: one DMA, no staging copy.
		dp := C.CUdeviceptr(ptr + uint64(off))
		if toDevice {
			err = check(C.vr_cuMemcpyHtoDAsync(dp, hp, C.size_t(len(host)), d.ioStream), "cuMemcpyHtoDAsync_v2")
		} else {
			err = check(C.vr_cuMemcpyDtoHAsync(hp, dp, C.size_t(len(host)), d.ioStream), "cuMemcpyDtoHAsync_v2")
		}
		return d.syncIO(what, err)
	}
	stage := unsafe.Slice((*byte)(d.ioStage), d.ioSize)
	for done := 0; done < len(host); {
		n := min(len(host)-done, int(d.ioSize))
		dp := C.CUdeviceptr(ptr + uint64(off) + uint64(done))
		if toDevice {
			copy(stage, host[done:done+n])
			err = check(C.vr_cuMemcpyHtoDAsync(dp, d.ioStage, C.size_t(n), d.ioStream), "cuMemcpyHtoDAsync_v2")
		} else {
			err = check(C.vr_cuMemcpyDtoHAsync(d.ioStage, dp, C.size_t(n), d.ioStream), "cuMemcpyDtoHAsync_v2")
		}
		if err := d.syncIO(what, err); err != nil {
			return err
		}
		if !toDevice {
			copy(host[done:done+n], stage)
		}
		done += n
	}
	return nil
}

// enterIO is the prologue of the synchronous transfers (Write, Read and
// Copy, named by what): it takes the transfer lock, makes the device's
// context current and returns the device pointers of bufs, until leave.
func (d *Device) enterIO(what string, bufs ...*Buffer) (leave func(), ptrs []uint64, err error) {
	d.ioMu.Lock()
	leaveCtx, err := d.enter()
	if err != nil {
		d.ioMu.Unlock()
		return nil, nil, d.noteErr(err)
	}
	leave = func() {
		leaveCtx()
		d.ioMu.Unlock()
	}
	ptrs = make([]uint64, len(bufs))
	for i, b := range bufs {
		if ptrs[i], err = b.devptr(); err != nil {
			leave()
			return nil, nil, fmt.Errorf("cuda: %s: %w", what, err)
		}
	}
	return leave, ptrs, nil
}

// syncIO waits for the transfer stream after a copy was issued on it with
// result err, and returns the first error of the two, noted and wrapped.
func (d *Device) syncIO(what string, err error) error {
	if err == nil {
		err = check(C.vr_cuStreamSynchronize(d.ioStream), "cuStreamSynchronize")
	}
	if err != nil {
		return d.noteErr(fmt.Errorf("cuda: %s: %w", what, err))
	}
	return nil
}

// NewStream creates a command stream with its own CUstream.
func (d *Device) NewStream(opts rt.StreamOptions) (rt.Stream, error) {
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("cuda: NewStream: %w", err)
	}
	leave, err := d.enter()
	if err != nil {
		return nil, d.noteErr(err)
	}
	defer leave()
	s := &Stream{dev: d, profile: opts.Profile}
	if err := check(C.vr_cuStreamCreate(&s.cs), "cuStreamCreate"); err != nil {
		return nil, d.noteErr(err)
	}
	if err := d.adopt("NewStream", func() { d.streams[s] = struct{}{} }, func() { C.vr_cuStreamDestroy(s.cs) }); err != nil {
		return nil, err
	}
	return s, nil
}

// Close frees every buffer, stream and driver object of the device and
// releases its primary context. It is safe to call more than once.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	streams := d.streams
	bufs := d.bufs
	hosts := d.hosts
	d.streams = map[*Stream]struct{}{}
	d.bufs = map[*Buffer]struct{}{}
	d.hosts = map[*hostBuf]struct{}{}
	d.mu.Unlock()
	for s := range streams {
		s.Close()
	}
	d.ioMu.Lock()
	defer d.ioMu.Unlock()
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cuCtxSetCurrent(d.ctx)
	for b := range bufs {
		b.mu.Lock()
		if b.ptr != 0 {
			C.vr_cuMemFree(b.ptr)
			b.ptr = 0
		}
		b.mu.Unlock()
	}
	for h := range hosts {
		if h.ptr != nil {
			C.vr_cuMemFreeHost(h.ptr)
			h.ptr = nil
		}
	}
	d.release()
	return nil
}

// DeviceAddr returns the buffer's CUdeviceptr, or an error after Free. It
// implements [rt.NativeBuffer].
func (b *Buffer) DeviceAddr() (uintptr, error) {
	p, err := b.devptr()
	return uintptr(p), err
}
