package rt

import (
	"errors"
	"strings"
	"testing"
)

func TestFormatUUID(t *testing.T) {
	u := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}
	if got, want := FormatUUID(u), "12345678-9abc-def0-0102-030405060708"; got != want {
		t.Errorf("FormatUUID = %q, want %q", got, want)
	}
	if got := FormatUUID([16]byte{}); got != "" {
		t.Errorf("FormatUUID(zero) = %q, want empty", got)
	}
}

func TestSamePhysical(t *testing.T) {
	const u = "12345678-9abc-def0-0102-030405060708"
	vk0 := DeviceInfo{Backend: "vulkan", Index: 0, UUID: u}
	vk1 := DeviceInfo{Backend: "vulkan", Index: 1, UUID: "other"}
	cu0 := DeviceInfo{Backend: "cuda", Index: 0, UUID: u}
	cpu0 := DeviceInfo{Backend: "cpu", Index: 0}
	cl0 := DeviceInfo{Backend: "opencl", Index: 0}
	log0 := DeviceInfo{Backend: "cpu", Index: 0, Logical: true, Physical: 0}
	log1 := DeviceInfo{Backend: "cpu", Index: 1, Logical: true, Physical: 0}
	for _, c := range []struct {
		name string
		a, b DeviceInfo
		want bool
	}{
		{"vulkan and cuda, one UUID", vk0, cu0, true},
		{"two vulkan GPUs", vk0, vk1, false},
		{"cpu and opencl without UUIDs", cpu0, cl0, false},
		{"two logical cpus", log0, log1, true},
		{"itself", vk1, vk1, true},
		{"different UUID across APIs", vk1, cu0, false},
	} {
		if got := SamePhysical(c.a, c.b); got != c.want {
			t.Errorf("%s: SamePhysical = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{"", []string{"auto"}, ""},
		{"auto", []string{"auto"}, ""},
		{"cpu", []string{"cpu"}, ""},
		{"cuda:0,cuda:1", []string{"cuda:0", "cuda:1"}, ""},
		{" vulkan:0 , cuda:0 ", []string{"vulkan:0", "cuda:0"}, ""},
		{"cpu,opencl:0", []string{"cpu", "opencl:0"}, ""},
		{"cpu,,opencl:0", nil, "device 2 of 3 is empty"},
		{"cpu,", nil, "device 2 of 2 is empty"},
		{"auto,cpu", nil, `"auto" picks one device`},
		{"cpu,vulkan:x", nil, `bad device index "x"`},
		{"cpu,vulkan:-1", nil, `bad device index "-1"`},
	} {
		got, err := ParseList(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseList(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("ParseList(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// listBackend is a fake backend that counts opened and closed devices and
// can fail to open one device.
type listBackend struct {
	name   string
	devs   []DeviceInfo
	failAt int // index whose Open fails, or -1
	open   *int
}

func (b *listBackend) Name() string                   { return b.name }
func (b *listBackend) Devices() ([]DeviceInfo, error) { return b.devs, nil }
func (b *listBackend) Open(i int) (Device, error) {
	if i == b.failAt {
		return nil, errors.New(b.name + ": driver refused")
	}
	*b.open++
	return &countDevice{fakeDevice{b.devs[i]}, b.open}, nil
}

type countDevice struct {
	fakeDevice
	open *int
}

func (d *countDevice) Close() error { *d.open--; return nil }

func TestOpenList(t *testing.T) {
	const gpu = "12345678-9abc-def0-0102-030405060708"
	open := 0
	cpu := &listBackend{name: "cpu", failAt: -1, open: &open, devs: ExpandLogical([]DeviceInfo{{Backend: "cpu", Name: "host", Kind: KindCPU, FP16: true, FP64: true}}, 3)}
	vk := &listBackend{name: "vulkan", failAt: -1, open: &open, devs: []DeviceInfo{
		{Backend: "vulkan", Index: 0, Name: "GPU", Kind: KindDiscreteGPU, UUID: gpu, FP16: true},
		{Backend: "vulkan", Index: 1, Name: "GPU again (second ICD)", Kind: KindDiscreteGPU, UUID: gpu, FP16: true},
		{Backend: "vulkan", Index: 2, Name: "lavapipe", Kind: KindCPU, UUID: "lavapipe-uuid"},
	}}
	cuda := &listBackend{name: "cuda", failAt: 1, open: &open, devs: []DeviceInfo{
		{Backend: "cuda", Index: 0, Name: "GPU", Kind: KindDiscreteGPU, UUID: gpu},
		{Backend: "cuda", Index: 1, Name: "GPU 2", Kind: KindDiscreteGPU, UUID: "gpu2"},
	}}
	withBackends(t, cpu, vk, cuda)
	for _, c := range []struct {
		list  string
		specs []string // opened, in order
		err   string
		log   string
	}{
		{list: "cpu", specs: []string{"cpu:0"}},
		{list: "cpu:0,cpu:1,cpu:2", specs: []string{"cpu:0", "cpu:1", "cpu:2"}},
		{list: "cpu:2,vulkan:2", specs: []string{"cpu:2", "vulkan:2"}},
		{list: "vulkan:0,cuda:0", specs: []string{"vulkan:0", "cuda:0"}, log: "one physical device"},
		{list: "vulkan,cpu:1", specs: []string{"vulkan:0", "cpu:1"}},
		{list: "cpu:1,cpu:1", err: "cpu:1 is listed twice"},
		{list: "cpu:0,cpu", err: `cpu:0 is listed twice, as "cpu:0" and "cpu"`},
		{list: "vulkan:0,vulkan:1", err: "vulkan:0 and vulkan:1 are the same physical device (UUID " + gpu + ") through vulkan"},
		{list: "cpu:0,cpu:7", err: "cpu:7: device index 7 out of range"},
		{list: "cpu:0,metal:0", err: `unknown backend "metal"`},
		{list: "cpu:0,vulkan:0,cuda:1", err: "cuda:1: driver refused"},
		{list: "cpu,auto", err: `"auto" picks one device`},
	} {
		var log []string
		devs, err := OpenList(c.list, func(f string, a ...any) { log = append(log, f) })
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.list) {
				t.Errorf("OpenList(%q) = %d devices, %v; want an error with %q and the list", c.list, len(devs), err, c.err)
			}
			if open != 0 {
				t.Errorf("OpenList(%q) failed with %d devices left open", c.list, open)
				open = 0
			}
			continue
		}
		if err != nil {
			t.Errorf("OpenList(%q): %v", c.list, err)
			continue
		}
		var got []string
		for _, d := range devs {
			got = append(got, d.Info().Spec())
		}
		if strings.Join(got, ",") != strings.Join(c.specs, ",") {
			t.Errorf("OpenList(%q) opened %v, want %v", c.list, got, c.specs)
		}
		if c.log != "" && !strings.Contains(strings.Join(log, "\n"), c.log) {
			t.Errorf("OpenList(%q) logged %q, want %q", c.list, log, c.log)
		}
		if err := CloseAll(devs); err != nil || open != 0 {
			t.Errorf("CloseAll(%q) = %v, %d left open", c.list, err, open)
		}
	}
}

func TestCheckDTypes(t *testing.T) {
	cpu := DeviceInfo{Backend: "cpu", FP16: true, FP64: true}
	vk := DeviceInfo{Backend: "vulkan", FP16: true}
	cl := DeviceInfo{Backend: "opencl", Index: 0}
	for _, c := range []struct {
		devs []DeviceInfo
		need []DType
		err  string
	}{
		{[]DeviceInfo{cpu, vk}, []DType{F32, F16, I64}, ""},
		{[]DeviceInfo{cpu, vk}, []DType{F32, F64}, "disagree on f64, which the model needs: cpu:0 support it, vulkan:0 do not"},
		{[]DeviceInfo{cpu, vk, cl}, []DType{F16}, "cpu:0, vulkan:0 support it, opencl:0 do not"},
		{[]DeviceInfo{vk, cl}, []DType{F64}, ""}, // neither: the devices' own checks say so
		{[]DeviceInfo{cl}, []DType{F16}, ""},
	} {
		err := CheckDTypes(c.devs, c.need)
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("CheckDTypes(%v, %v) = %v, want %q", c.devs, c.need, err, c.err)
		}
	}
}

func TestLogicalDevices(t *testing.T) {
	for _, c := range []struct {
		env, cpuEnv, backend string
		want                 int
		err                  bool
	}{
		{"", "", "cpu", 1, false},
		{"", "4", "cpu", 4, false},
		{"cpu=3,vulkan=2", "", "vulkan", 2, false},
		{"cpu=3,vulkan=2", "", "cpu", 3, false},
		{"cpu=3, opencl = 2", "", "opencl", 2, false},
		{"vulkan=2", "", "cuda", 1, false},
		{"vulkan", "", "vulkan", 0, true},
		{"vulkan=0", "", "vulkan", 0, true},
		{"", "x", "cpu", 0, true},
	} {
		t.Setenv(LogicalDevicesEnv, c.env)
		t.Setenv("VRUN_CPU_DEVICES", c.cpuEnv)
		n, err := LogicalDevices(c.backend)
		if (err != nil) != c.err || n != c.want {
			t.Errorf("%s=%q VRUN_CPU_DEVICES=%q: LogicalDevices(%s) = %d, %v; want %d (error %v)", LogicalDevicesEnv, c.env, c.cpuEnv, c.backend, n, err, c.want, c.err)
		}
	}
	ds := ExpandLogical([]DeviceInfo{{Backend: "vulkan", Index: 0}, {Backend: "vulkan", Index: 1}}, 2)
	for i, d := range ds {
		if d.Index != i || d.Physical != i/2 || !d.Logical || PhysicalDevice(i, 2) != i/2 {
			t.Errorf("logical device %d = %+v", i, d)
		}
	}
	if !SamePhysical(ds[0], ds[1]) || SamePhysical(ds[1], ds[2]) {
		t.Error("SamePhysical of logical devices is wrong")
	}
}
