package vrun_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// available skips the test when a backend the list needs cannot start
// here (no lavapipe, no pocl).
func available(t *testing.T, list string) {
	t.Helper()
	specs, err := rt.ParseList(list)
	if err != nil {
		return
	}
	for _, s := range specs {
		name, _, _ := rt.ParseSpec(s)
		b, ok := rt.Lookup(name)
		if !ok {
			continue
		}
		if _, err := b.Devices(); errors.Is(err, rt.ErrUnavailable) {
			t.Skipf("%s: %v", s, err)
		}
	}
}

// Device lists open real devices of every backend: logical CPU devices,
// two VkDevices on one physical device (lavapipe), two OpenCL contexts on
// one pocl device, and mixed lists; each opened device works (a Write and
// Read round trip) and reports its logical spec.
func TestOpenListBackends(t *testing.T) {
	t.Setenv(rt.LogicalDevicesEnv, "cpu=3,vulkan=2,opencl=2")
	for _, c := range []struct {
		list  string
		specs string
		err   string
	}{
		{list: "cpu", specs: "cpu:0"},
		{list: "cpu:0,cpu:1,cpu:2", specs: "cpu:0,cpu:1,cpu:2"},
		{list: "vulkan:0,vulkan:1", specs: "vulkan:0,vulkan:1"},
		{list: "opencl:0,opencl:1", specs: "opencl:0,opencl:1"},
		{list: "cpu,opencl:0", specs: "cpu:0,opencl:0"},
		{list: "cpu:1,vulkan:0", specs: "cpu:1,vulkan:0"},
		{list: "vulkan:1,cpu:2,opencl:1", specs: "vulkan:1,cpu:2,opencl:1"},
		{list: "cpu:1,cpu:1", err: "cpu:1 is listed twice"},
		{list: "cpu,cpu:0", err: `cpu:0 is listed twice, as "cpu" and "cpu:0"`},
		{list: "cpu:0,cpu:3", err: "cpu:3: device index 3 out of range (backend has 3 devices)"},
		{list: "cpu,", err: "device 2 of 2 is empty"},
	} {
		t.Run(c.list, func(t *testing.T) {
			available(t, c.list)
			devs, err := rt.OpenList(c.list, nil)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					rt.CloseAll(devs)
					t.Fatalf("OpenList(%q) = %v, want an error with %q", c.list, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := rt.CloseAll(devs); err != nil {
					t.Error(err)
				}
			}()
			var got []string
			for i, d := range devs {
				info := d.Info()
				got = append(got, info.Spec())
				if !info.Logical && strings.Count(c.list, info.Backend+":") > 1 {
					t.Errorf("%s: not marked logical", info.Spec())
				}
				b, err := d.Alloc(64)
				if err != nil {
					t.Fatal(err)
				}
				src := []byte(strings.Repeat(string(rune('a'+i)), 64))
				if err := d.Write(b, 0, src); err != nil {
					t.Fatal(err)
				}
				dst := make([]byte, 64)
				if err := d.Read(dst, b, 0); err != nil || string(dst) != string(src) {
					t.Errorf("%s: round trip = %q, %v", info.Spec(), dst, err)
				}
				b.Free()
			}
			if strings.Join(got, ",") != c.specs {
				t.Errorf("opened %s, want %s", strings.Join(got, ","), c.specs)
			}
		})
	}
}

// Logical devices of one physical device are one physical device, and so
// are devices of other backends that report the same UUID (vulkan:0, cuda:0
// and NVIDIA's OpenCL device on one NVIDIA GPU); a Vulkan device and a CPU
// device are not.
func TestSamePhysicalBackends(t *testing.T) {
	t.Setenv(rt.LogicalDevicesEnv, "vulkan=2")
	ls := rt.ListDevices()
	same := rt.SameAs(ls)
	for _, l := range ls {
		if l.Backend != "vulkan" || l.Err != nil {
			continue
		}
		if len(l.Devices) < 2 {
			t.Fatalf("%s=vulkan=2 lists %d Vulkan devices", rt.LogicalDevicesEnv, len(l.Devices))
		}
		v0 := l.Devices[0]
		if v0.UUID == "" {
			t.Errorf("vulkan:0 (%s) has no UUID", v0.Name)
		}
		// vulkan:1 is vulkan:0's logical twin; a device of another backend
		// is the same GPU exactly when it reports vulkan:0's UUID.
		want := []string{"vulkan:1"}
		for _, o := range ls {
			if o.Backend == "vulkan" {
				continue
			}
			for _, d := range o.Devices {
				if v0.UUID != "" && d.UUID == v0.UUID {
					want = append(want, d.Spec())
				}
			}
		}
		got := append([]string(nil), same["vulkan:0"]...)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("vulkan:0 same as %v, want %v", got, want)
		}
		for _, s := range got {
			if !slices.Contains(same[s], "vulkan:0") {
				t.Errorf("vulkan:0 is the same as %s, but %s only as %v", s, s, same[s])
			}
		}
	}
	for _, s := range same["cpu:0"] {
		t.Errorf("cpu:0 same as %s", s)
	}
}
