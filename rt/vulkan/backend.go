//go:build cgo

package vulkan

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	vk "github.com/goki/vulkan"
	"github.com/vrun-go/vrun/rt"
)

const backendName = "vulkan"

type backend struct{}

func init() { rt.Register(backend{}) }

func (backend) Name() string { return backendName }

var (
	loaderOnce sync.Once
	loaderErr  error
	gipa       unsafe.Pointer // vkGetInstanceProcAddr
)

// load dlopens the Vulkan loader once.
func load() error {
	loaderOnce.Do(func() {
		p, err := loadLoader()
		if err != nil {
			loaderErr = fmt.Errorf("%v: %w", err, rt.ErrUnavailable)
			return
		}
		gipa = p
	})
	return loaderErr
}

func (backend) Devices() ([]rt.DeviceInfo, error) {
	in, err := sharedInstance()
	if err != nil {
		return nil, err
	}
	if len(in.phys) == 0 {
		return nil, fmt.Errorf("vulkan: no Vulkan devices: %w", rt.ErrUnavailable)
	}
	out := make([]rt.DeviceInfo, len(in.phys))
	for i := range in.phys {
		out[i] = in.physInfo(i).info
	}
	n, err := rt.LogicalDevices(backendName)
	if err != nil {
		return nil, fmt.Errorf("vulkan: %w: %w", err, rt.ErrUnavailable)
	}
	return rt.ExpandLogical(out, n), nil
}

func (b backend) Open(index int) (rt.Device, error) {
	infos, err := b.Devices()
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(infos) {
		return nil, fmt.Errorf("vulkan: device index %d out of range (%d devices)", index, len(infos))
	}
	// A logical device (VRUN_LOGICAL_DEVICES=vulkan=N) is a VkDevice of
	// its own on the physical device.
	d, err := openDevice(infos[index].Physical)
	if err != nil {
		return nil, err
	}
	if infos[index].Logical {
		d.(*device).phys.info = infos[index]
	}
	return d, nil
}

// validationEnabled reports whether VRUN_VK_VALIDATION asks for the
// Khronos validation layer.
func validationEnabled() bool {
	v := os.Getenv("VRUN_VK_VALIDATION")
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// ---- validation message collection ----

// Messages from the validation layer are collected per open device: a
// message goes to the device that owns a dispatchable object it names (its
// VkDevice, VkQueue or a command buffer), else to every open device, and
// always to the process-wide list of ValidationMessages.
var (
	valMu    sync.Mutex
	valAll   []string
	valByID          = map[uintptr]*[]string{}
	valOwner         = map[uint64]uintptr{} // dispatchable handle -> device id
	valNext  uintptr = 1
	valIgnor         = []string{
		// Loader chatter that is not about vrun's use of the API.
		"loader_get_json", "ReadDataFilesInRegistry",
	}
)

// newValidationID registers a device's message list.
func newValidationID() uintptr {
	valMu.Lock()
	defer valMu.Unlock()
	id := valNext
	valNext++
	valByID[id] = new([]string)
	return id
}

// dropValidationID forgets a closed device's list and handles.
func dropValidationID(id uintptr) {
	valMu.Lock()
	defer valMu.Unlock()
	delete(valByID, id)
	for h, o := range valOwner {
		if o == id {
			delete(valOwner, h)
		}
	}
}

// ownHandle attributes messages naming handle h to device id (0: forget h).
func ownHandle(id uintptr, h uint64) {
	if h == 0 {
		return
	}
	valMu.Lock()
	defer valMu.Unlock()
	if id == 0 {
		delete(valOwner, h)
	} else {
		valOwner[h] = id
	}
}

func recordValidation(severity uint32, msg string, handles []uint64) {
	for _, s := range valIgnor {
		if strings.Contains(msg, s) {
			return
		}
	}
	sev := "warning"
	if severity&0x1000 != 0 {
		sev = "error"
	}
	m := sev + ": " + msg
	if os.Getenv("VRUN_VK_VALIDATION") == "print" {
		fmt.Fprintln(os.Stderr, "vulkan validation:", m)
	}
	valMu.Lock()
	defer valMu.Unlock()
	valAll = append(valAll, m)
	owned := false
	for _, h := range handles {
		if id, ok := valOwner[h]; ok {
			if l := valByID[id]; l != nil {
				*l = append(*l, m)
				owned = true
				break
			}
		}
	}
	if !owned {
		for _, l := range valByID {
			*l = append(*l, m)
		}
	}
}

// takeValidation returns and clears the messages reported for id.
func takeValidation(id uintptr) []string {
	valMu.Lock()
	defer valMu.Unlock()
	l := valByID[id]
	if l == nil || len(*l) == 0 {
		return nil
	}
	out := *l
	*l = nil
	return out
}

// ValidationMessages returns every warning and error the Vulkan validation
// layer (enabled with VRUN_VK_VALIDATION=1) reported in this process, and
// clears the list. Tests check that it is empty after closing devices.
func ValidationMessages() []string {
	valMu.Lock()
	defer valMu.Unlock()
	out := valAll
	valAll = nil
	return out
}

// validationError turns messages into an error, or nil.
func validationError(msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	const max = 5
	s := msgs
	if len(s) > max {
		s = s[:max]
	}
	extra := ""
	if len(msgs) > max {
		extra = fmt.Sprintf(" (and %d more)", len(msgs)-max)
	}
	return fmt.Errorf("vulkan: validation layer reported %d messages%s:\n%s", len(msgs), extra, strings.Join(s, "\n"))
}

// ---- instance ----

// instance is the process's one Vulkan instance. It is created on first
// use and never destroyed: destroying the last instance lets the loader
// unload the driver, and some drivers cannot be loaded into the same
// process again (NVIDIA's libnvidia-tls.so needs static TLS, which glibc
// does not give back when the library is unloaded, so a second
// vkCreateInstance fails with "incompatible driver"). Devices share it and
// count their references (refs), as long-lived engines do; the driver
// stays loaded while none is open.
type instance struct {
	h        vkInst
	validate bool             // created with VK_LAYER_KHRONOS_validation
	api      uint32           // the instance's Vulkan version (1.3 where the loader has it, else 1.2)
	pds      []unsafe.Pointer // physical devices
	phys     []rawPhys        // their descriptions

	mu   sync.Mutex
	refs int // open devices
}

var (
	instOnce sync.Once
	inst     *instance
	instErr  error
)

// sharedInstance returns the process's instance, creating it on the first
// call (with validation where VRUN_VK_VALIDATION is set then).
func sharedInstance() (*instance, error) {
	instOnce.Do(func() {
		if err := load(); err != nil {
			instErr = err
			return
		}
		inst, instErr = newInstance(validationEnabled())
	})
	return inst, instErr
}

// acquire counts a device that uses the instance.
func (in *instance) acquire() {
	in.mu.Lock()
	in.refs++
	in.mu.Unlock()
}

// release uncounts a device. The instance stays (see instance).
func (in *instance) release() {
	in.mu.Lock()
	in.refs--
	in.mu.Unlock()
}

// openDevices is the number of devices that hold the shared instance.
func openDevices() int {
	if inst == nil {
		return 0
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.refs
}

func newInstance(validate bool) (*instance, error) {
	api := vk.MakeVersion(1, 2, 0)
	if v := vkInstanceVersion(); v < api {
		return nil, fmt.Errorf("vulkan: loader supports Vulkan %s, vrun needs 1.2: %w", versionString(v), rt.ErrUnavailable)
	}
	if validate {
		if !vkHasLayer("VK_LAYER_KHRONOS_validation") {
			return nil, fmt.Errorf("vulkan: VRUN_VK_VALIDATION is set but VK_LAYER_KHRONOS_validation is not installed")
		}
		if !vkHasInstanceExt("VK_EXT_debug_utils") {
			return nil, fmt.Errorf("vulkan: VRUN_VK_VALIDATION is set but VK_EXT_debug_utils is missing")
		}
	}
	// Vulkan 1.3 where the loader has it: mmcm2.comp is SPIR-V 1.6.
	if vkInstanceVersion() >= vk.MakeVersion(1, 3, 0) {
		api = vk.MakeVersion(1, 3, 0)
	}
	h, r := vkCreateInstance(api, vkHasInstanceExt("VK_KHR_portability_enumeration"), validate)
	if r != vk.Success {
		return nil, fmt.Errorf("vulkan: vkCreateInstance: %v: %w", vkErr(r), rt.ErrUnavailable)
	}
	in := &instance{h: h, validate: validate, api: api}
	pds, r := h.physicalDevices()
	if r != vk.Success {
		h.destroy()
		return nil, fmt.Errorf("vulkan: vkEnumeratePhysicalDevices: %v: %w", vkErr(r), rt.ErrUnavailable)
	}
	in.pds = pds
	for _, pd := range pds {
		in.phys = append(in.phys, h.describe(pd))
	}
	return in, nil
}

// vkErr names a VkResult.
func vkErr(r vk.Result) error {
	if err := vk.Error(r); err != nil {
		return err
	}
	return fmt.Errorf("VkResult(%d)", int32(r))
}

func versionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>22, (v>>12)&0x3ff, v&0xfff)
}

var errLost = errors.New("vulkan: device lost")
