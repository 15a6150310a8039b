package rt

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// FormatUUID formats a 16-byte device UUID as
// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", or "" when every byte is zero (an
// API that has no UUID for the device).
func FormatUUID(u [16]byte) string {
	if u == ([16]byte{}) {
		return ""
	}
	const hex = "0123456789abcdef"
	var b strings.Builder
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b.WriteByte('-')
		}
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// physIndex is the index of d's physical device in its backend's list.
func physIndex(d DeviceInfo) int {
	if d.Logical {
		return d.Physical
	}
	return d.Index
}

// SamePhysical reports whether a and b are the same physical device: two
// logical devices of one physical device of a backend, or devices (of one
// backend or two, such as vulkan:0 and cuda:0 on one GPU) with the same
// UUID. Devices without a UUID of different backends are never the same.
func SamePhysical(a, b DeviceInfo) bool {
	if a.Backend == b.Backend && physIndex(a) == physIndex(b) {
		return true
	}
	return a.UUID != "" && a.UUID == b.UUID
}

// ParseList splits a device list "cuda:0,cuda:1", "cpu,opencl:0" into its
// selectors, each checked with [ParseSpec]. Spaces around a selector are
// dropped. "auto" (or "") is a list of one; it cannot be part of a longer
// list, because it picks one device.
func ParseList(list string) ([]string, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "auto" {
		return []string{"auto"}, nil
	}
	parts := strings.Split(list, ",")
	out := make([]string, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("rt: device list %q: device %d of %d is empty", list, i+1, len(parts))
		}
		if p == "auto" {
			if len(parts) > 1 {
				return nil, fmt.Errorf("rt: device list %q: \"auto\" picks one device and cannot be part of a list; name the devices (see vrun devices)", list)
			}
		} else if _, _, err := ParseSpec(p); err != nil {
			return nil, fmt.Errorf("rt: device list %q: %s", list, strings.TrimPrefix(err.Error(), "rt: "))
		}
		out = append(out, p)
	}
	return out, nil
}

// resolve finds the backend and device that spec (not "auto") names,
// without opening it.
func resolve(spec string) (Backend, DeviceInfo, error) {
	name, idx, err := ParseSpec(spec)
	if err != nil {
		return nil, DeviceInfo{}, err
	}
	b, ok := Lookup(name)
	if !ok {
		var names []string
		for _, b := range Backends() {
			names = append(names, b.Name())
		}
		return nil, DeviceInfo{}, fmt.Errorf("rt: unknown backend %q (compiled in: %s)", name, strings.Join(names, ", "))
	}
	ds, err := b.Devices()
	if err != nil {
		return nil, DeviceInfo{}, &deviceError{spec: spec, backend: name, err: err}
	}
	if len(ds) == 0 {
		return nil, DeviceInfo{}, fmt.Errorf("%s: no devices: %w", spec, ErrUnavailable)
	}
	if idx < 0 {
		idx = bestDevice(ds)
	}
	if idx >= len(ds) {
		return nil, DeviceInfo{}, fmt.Errorf("%s: device index %d out of range (backend has %d devices)", spec, idx, len(ds))
	}
	return b, ds[idx], nil
}

// OpenList opens every device of a device list (see [ParseList]): "cpu",
// "cuda:0,cuda:1", "vulkan:0,cuda:0", "cpu,opencl:0". A list of one is
// [Open] (so "auto" works as there). The devices are returned in list
// order; the caller must Close each (see [CloseAll]). If any device cannot
// be opened, those already opened are closed and the error names the
// device.
//
// A list that names one device twice is an error: the same selector
// ("cpu:0,cpu"), or one physical device through one backend twice (a GPU
// that a second driver lists again). Logical devices of one physical
// device ([DeviceInfo.Logical]) may be listed together, and so may one
// GPU through two APIs ("vulkan:0,cuda:0"): they are reported to logf.
func OpenList(list string, logf func(format string, args ...any)) ([]Device, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	specs, err := ParseList(list)
	if err != nil {
		return nil, err
	}
	if len(specs) == 1 {
		d, err := Open(specs[0], logf)
		if err != nil {
			return nil, err
		}
		return []Device{d}, nil
	}
	infos := make([]DeviceInfo, len(specs))
	bs := make([]Backend, len(specs))
	for i, s := range specs {
		b, info, err := resolve(s)
		if err != nil {
			return nil, fmt.Errorf("rt: device list %q: %w", list, err)
		}
		bs[i], infos[i] = b, info
		for j := range i {
			if err := checkPair(specs[j], infos[j], s, info); err != nil {
				return nil, fmt.Errorf("rt: device list %q: %w", list, err)
			}
			if infos[j].Backend != info.Backend && SamePhysical(infos[j], info) {
				logf("devices %s and %s are one physical device (UUID %s) through two APIs; they share its compute and memory", infos[j].Spec(), info.Spec(), info.UUID)
			}
		}
	}
	devs := make([]Device, 0, len(specs))
	for i, b := range bs {
		d, err := b.Open(infos[i].Index)
		if err != nil {
			cerr := CloseAll(devs)
			return nil, errors.Join(fmt.Errorf("rt: device list %q: %w", list, &deviceError{spec: infos[i].Spec(), backend: infos[i].Backend, err: err}), cerr)
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// checkPair refuses two entries of a device list that name one device.
func checkPair(sa string, a DeviceInfo, sb string, b DeviceInfo) error {
	name := func(s string, d DeviceInfo) string {
		if s == d.Spec() {
			return s
		}
		return fmt.Sprintf("%q (%s)", s, d.Spec())
	}
	if a.Spec() == b.Spec() {
		if sa == sb {
			return fmt.Errorf("%s is listed twice", sa)
		}
		return fmt.Errorf("%s is listed twice, as %q and %q", a.Spec(), sa, sb)
	}
	if a.Backend == b.Backend && SamePhysical(a, b) && !(a.Logical && b.Logical) {
		why := "the same physical device"
		if a.UUID != "" && a.UUID == b.UUID {
			why += " (UUID " + a.UUID + ")"
		}
		return fmt.Errorf("%s and %s are %s through %s: list it once", name(sa, a), name(sb, b), why, a.Backend)
	}
	return nil
}

// CloseAll closes every device of devs (in reverse order) and joins their
// errors, each prefixed with the device's selector.
func CloseAll(devs []Device) error {
	var errs []error
	for i := len(devs) - 1; i >= 0; i-- {
		if devs[i] == nil {
			continue
		}
		if err := devs[i].Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", devs[i].Info().Spec(), err))
		}
	}
	return errors.Join(errs...)
}

// CheckDTypes checks that the devices of a list agree on each dtype of
// need that not every device supports (f16 and f64, by
// DeviceInfo.FP16 and FP64): a list whose devices disagree cannot split one
// model between them, and the error names the dtype and the devices on
// each side. A dtype that no device supports is left to the devices' own
// checks.
func CheckDTypes(devs []DeviceInfo, need []DType) error {
	if len(devs) < 2 {
		return nil
	}
	for _, dt := range need {
		var with, without []string
		for _, d := range devs {
			ok := true
			switch dt {
			case F16:
				ok = d.FP16
			case F64:
				ok = d.FP64
			}
			if ok {
				with = append(with, d.Spec())
			} else {
				without = append(without, d.Spec())
			}
		}
		if len(with) > 0 && len(without) > 0 {
			return fmt.Errorf("rt: the devices disagree on %s, which the model needs: %s support it, %s do not", dt, strings.Join(with, ", "), strings.Join(without, ", "))
		}
	}
	return nil
}

// LogicalDevicesEnv is the environment variable that makes backends offer
// several logical devices per physical device, for testing device lists
// and data parallelism on one machine: "cpu=4,vulkan=2,opencl=2" makes the
// CPU backend list cpu:0..cpu:3 (four independent CPU devices) and each
// Vulkan and OpenCL device twice (each opened as its own VkDevice or
// cl_context). VRUN_CPU_DEVICES=N is a shorthand for cpu=N.
const LogicalDevicesEnv = "VRUN_LOGICAL_DEVICES"

// LogicalDevices returns how many logical devices backend makes of each
// physical device: the count for it in VRUN_LOGICAL_DEVICES (or
// VRUN_CPU_DEVICES for "cpu"), 1 when unset. Backends call it from
// Devices and Open, and use [ExpandLogical] and [PhysicalDevice]. Bad
// values are errors, so that a typo does not test one device silently.
func LogicalDevices(backend string) (int, error) {
	n := 1
	if backend == "cpu" {
		if v := strings.TrimSpace(os.Getenv("VRUN_CPU_DEVICES")); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil || k < 1 || k > 1024 {
				return 0, fmt.Errorf("rt: VRUN_CPU_DEVICES=%q: want a count from 1 to 1024", v)
			}
			n = k
		}
	}
	v := strings.TrimSpace(os.Getenv(LogicalDevicesEnv))
	if v == "" {
		return n, nil
	}
	for _, kv := range strings.Split(v, ",") {
		name, cnt, ok := strings.Cut(strings.TrimSpace(kv), "=")
		k, err := strconv.Atoi(strings.TrimSpace(cnt))
		if !ok || err != nil || k < 1 || k > 1024 {
			return 0, fmt.Errorf("rt: %s=%q: want backend=count pairs such as cpu=4,vulkan=2 (count 1 to 1024), not %q", LogicalDevicesEnv, v, kv)
		}
		if strings.TrimSpace(name) == backend {
			n = k
		}
	}
	return n, nil
}

// ExpandLogical returns the device list a backend shows with n logical
// devices per physical device: each of phys repeated n times in a row,
// Index counting the logical devices, Physical the physical one, and
// Logical set (when n > 1).
func ExpandLogical(phys []DeviceInfo, n int) []DeviceInfo {
	if n <= 1 {
		return phys
	}
	out := make([]DeviceInfo, 0, len(phys)*n)
	for _, d := range phys {
		for r := 0; r < n; r++ {
			l := d
			l.Physical, l.Index, l.Logical = physIndex(d), len(out), true
			l.Details = append(append([][2]string(nil), d.Details...), [2]string{"logical device", fmt.Sprintf("%d of %d on %s:%d (%s)", r+1, n, d.Backend, physIndex(d), LogicalDevicesEnv)})
			out = append(out, l)
		}
	}
	return out
}

// PhysicalDevice maps a logical device index of backend to the physical
// device index, with n logical devices per physical device.
func PhysicalDevice(index, n int) int {
	if n <= 1 {
		return index
	}
	return index / n
}

// SameAs maps each device spec of ls to the specs of the other devices
// (through other backends, or logical devices of one physical device)
// that are the same physical device, in listing order; devices that
// have no twin are absent. `vrun devices` shows it.
func SameAs(ls []DeviceList) map[string][]string {
	var all []DeviceInfo
	for _, l := range ls {
		all = append(all, l.Devices...)
	}
	out := map[string][]string{}
	for i, a := range all {
		for j, b := range all {
			if i != j && SamePhysical(a, b) {
				out[a.Spec()] = append(out[a.Spec()], b.Spec())
			}
		}
	}
	return out
}
