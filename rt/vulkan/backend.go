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

	listOnce sync.Once
	listErr  error
	listInfo []rt.DeviceInfo
)

// load dlopens the Vulkan loader once and initialises goki/vulkan.
func load() error {
	loaderOnce.Do(func() {
		p, err := loadLoader()
		if err != nil {
			loaderErr = fmt.Errorf("%v: %w", err, rt.ErrUnavailable)
			return
		}
		gipa = p
		vk.SetGetInstanceProcAddr(p)
		if err := vk.Init(); err != nil {
			loaderErr = fmt.Errorf("vulkan: loader init: %v: %w", err, rt.ErrUnavailable)
		}
	})
	return loaderErr
}

func (backend) Devices() ([]rt.DeviceInfo, error) {
	defer noGC()()
	if err := load(); err != nil {
		return nil, err
	}
	listOnce.Do(func() {
		inst, err := newInstance(false, 0)
		if err != nil {
			listErr = err
			return
		}
		defer inst.destroy()
		pds, err := inst.physicalDevices()
		if err != nil {
			listErr = err
			return
		}
		if len(pds) == 0 {
			listErr = fmt.Errorf("vulkan: no Vulkan devices: %w", rt.ErrUnavailable)
			return
		}
		for i, pd := range pds {
			listInfo = append(listInfo, describe(inst, pd, i).info)
		}
	})
	if listErr != nil {
		return nil, listErr
	}
	return append([]rt.DeviceInfo(nil), listInfo...), nil
}

func (b backend) Open(index int) (rt.Device, error) {
	defer noGC()()
	if _, err := b.Devices(); err != nil {
		return nil, err
	}
	if index < 0 || index >= len(listInfo) {
		return nil, fmt.Errorf("vulkan: device index %d out of range (%d devices)", index, len(listInfo))
	}
	return openDevice(index)
}

// validationEnabled reports whether VRUN_VK_VALIDATION asks for the
// Khronos validation layer.
func validationEnabled() bool {
	v := os.Getenv("VRUN_VK_VALIDATION")
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// ---- validation message collection ----

var (
	valMu    sync.Mutex
	valAll   []string
	valByID          = map[uintptr]*[]string{}
	valNext  uintptr = 1
	valIgnor         = []string{
		// Loader chatter that is not about vrun's use of the API.
		"loader_get_json", "ReadDataFilesInRegistry",
	}
)

func newValidationID() uintptr {
	valMu.Lock()
	defer valMu.Unlock()
	id := valNext
	valNext++
	valByID[id] = new([]string)
	return id
}

func recordValidation(id uintptr, severity uint32, msg string) {
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
	if l := valByID[id]; l != nil {
		*l = append(*l, m)
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

type instance struct {
	inst      vk.Instance
	messenger uint64
	msgInfo   unsafe.Pointer
	valID     uintptr
}

func hasInstanceLayer(name string) bool {
	var n uint32
	if vk.EnumerateInstanceLayerProperties(&n, nil) != vk.Success || n == 0 {
		return false
	}
	ls := make([]vk.LayerProperties, n)
	vk.EnumerateInstanceLayerProperties(&n, ls)
	for _, l := range ls[:n] {
		l.Deref()
		if vk.ToString(l.LayerName[:]) == name {
			return true
		}
	}
	return false
}

func instanceExtensions() map[string]bool {
	out := map[string]bool{}
	var n uint32
	if vk.EnumerateInstanceExtensionProperties("", &n, nil) != vk.Success || n == 0 {
		return out
	}
	es := make([]vk.ExtensionProperties, n)
	vk.EnumerateInstanceExtensionProperties("", &n, es)
	for _, e := range es[:n] {
		e.Deref()
		out[vk.ToString(e.ExtensionName[:])] = true
	}
	return out
}

func newInstance(validate bool, valID uintptr) (*instance, error) {
	api := vk.MakeVersion(1, 2, 0)
	if v := instanceVersion(gipa); v < api {
		return nil, fmt.Errorf("vulkan: loader supports Vulkan %s, vrun needs 1.2: %w", versionString(v), rt.ErrUnavailable)
	}
	exts := instanceExtensions()
	var enabledExt, layers []string
	var flags vk.InstanceCreateFlags
	if exts["VK_KHR_portability_enumeration"] {
		enabledExt = append(enabledExt, "VK_KHR_portability_enumeration\x00")
		flags |= 0x00000001 // VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
	}
	in := &instance{valID: valID}
	if validate {
		if !hasInstanceLayer("VK_LAYER_KHRONOS_validation") {
			return nil, fmt.Errorf("vulkan: VRUN_VK_VALIDATION is set but VK_LAYER_KHRONOS_validation is not installed")
		}
		if !exts["VK_EXT_debug_utils"] {
			return nil, fmt.Errorf("vulkan: VRUN_VK_VALIDATION is set but VK_EXT_debug_utils is missing")
		}
		layers = append(layers, "VK_LAYER_KHRONOS_validation\x00")
		enabledExt = append(enabledExt, "VK_EXT_debug_utils\x00")
		in.msgInfo = messengerInfo(valID)
	}
	ci := vk.InstanceCreateInfo{
		SType: vk.StructureTypeInstanceCreateInfo,
		PNext: in.msgInfo,
		Flags: flags,
		PApplicationInfo: &vk.ApplicationInfo{
			SType:              vk.StructureTypeApplicationInfo,
			PApplicationName:   "vrun\x00",
			ApplicationVersion: 1,
			PEngineName:        "vrun\x00",
			EngineVersion:      1,
			ApiVersion:         api,
		},
		EnabledLayerCount:       uint32(len(layers)),
		PpEnabledLayerNames:     layers,
		EnabledExtensionCount:   uint32(len(enabledExt)),
		PpEnabledExtensionNames: enabledExt,
	}
	var inst vk.Instance
	if r := vk.CreateInstance(&ci, nil, &inst); r != vk.Success {
		if in.msgInfo != nil {
			cFree(in.msgInfo)
		}
		return nil, fmt.Errorf("vulkan: vkCreateInstance: %v: %w", vkErr(r), rt.ErrUnavailable)
	}
	in.inst = inst
	if err := vk.InitInstance(inst); err != nil {
		in.destroy()
		return nil, fmt.Errorf("vulkan: %v: %w", err, rt.ErrUnavailable)
	}
	if validate {
		m, r := createMessenger(gipa, unsafe.Pointer(inst), in.msgInfo)
		if r != 0 {
			in.destroy()
			return nil, fmt.Errorf("vulkan: vkCreateDebugUtilsMessengerEXT: %v", vkErr(vk.Result(r)))
		}
		in.messenger = m
	}
	return in, nil
}

func (in *instance) physicalDevices() ([]vk.PhysicalDevice, error) {
	var n uint32
	if r := vk.EnumeratePhysicalDevices(in.inst, &n, nil); r != vk.Success {
		return nil, fmt.Errorf("vulkan: vkEnumeratePhysicalDevices: %v: %w", vkErr(r), rt.ErrUnavailable)
	}
	pds := make([]vk.PhysicalDevice, n)
	if n > 0 {
		if r := vk.EnumeratePhysicalDevices(in.inst, &n, pds); r != vk.Success && r != vk.Incomplete {
			return nil, fmt.Errorf("vulkan: vkEnumeratePhysicalDevices: %v: %w", vkErr(r), rt.ErrUnavailable)
		}
	}
	return pds[:n], nil
}

func (in *instance) destroy() {
	if in.inst == nil {
		return
	}
	if in.messenger != 0 {
		destroyMessenger(gipa, unsafe.Pointer(in.inst), in.messenger)
		in.messenger = 0
	}
	vk.DestroyInstance(in.inst, nil)
	in.inst = nil
	if in.msgInfo != nil {
		cFree(in.msgInfo)
		in.msgInfo = nil
	}
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
