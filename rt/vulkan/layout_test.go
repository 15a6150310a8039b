//go:build cgo

package vulkan

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/repo"
)

// TestShimLayouts compiles vkshim.h beside the Khronos vulkan_core.h that
// github.com/goki/vulkan ships and checks, with static assertions, that
// every mirror struct vr_X has VkX's size and each of its fields VkX's
// offset, that each constant VR_X equals VK_X, and that the feature
// indices point at the right VkBool32 members.
func TestShimLayouts(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/goki/vulkan").Output()
	if err != nil {
		t.Skipf("cannot locate github.com/goki/vulkan's headers: %v", err)
	}
	gokiDir := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(gokiDir, "vulkan", "vulkan_core.h")); err != nil {
		t.Skipf("no vulkan_core.h: %v", err)
	}
	shim, err := repo.Path("rt/vulkan/vkshim.h")
	if err != nil {
		t.Skipf("rt/vulkan/vkshim.h not found: %v", err)
	}
	src, err := os.ReadFile(shim)
	if err != nil {
		t.Fatal(err)
	}
	asserts, nStructs, nFields, nConsts := shimAsserts(string(src))
	if nStructs < 40 || nConsts < 40 {
		t.Fatalf("parsed only %d mirror structs and %d constants from vkshim.h", nStructs, nConsts)
	}
	var b strings.Builder
	b.WriteString("#define VK_NO_PROTOTYPES\n#include <stddef.h>\n#include \"vulkan/vulkan_core.h\"\n#include \"vkshim.h\"\n")
	b.WriteString("#define CHECK(c) _Static_assert(c, #c);\n")
	b.WriteString(asserts)
	// Feature indices (vr_PhysicalDeviceFeatures2 etc. are size-only mirrors).
	for _, f := range []struct{ idx, vkType, field string }{
		{"VR_F_SHADER_FLOAT64", "VkPhysicalDeviceFeatures", "shaderFloat64"},
		{"VR_F_SHADER_INT64", "VkPhysicalDeviceFeatures", "shaderInt64"},
		{"VR_F_SHADER_INT16", "VkPhysicalDeviceFeatures", "shaderInt16"},
		{"VR_F11_STORAGE_BUFFER_16BIT", "VkPhysicalDeviceVulkan11Features", "storageBuffer16BitAccess"},
		{"VR_F12_STORAGE_BUFFER_8BIT", "VkPhysicalDeviceVulkan12Features", "storageBuffer8BitAccess"},
		{"VR_F12_SHADER_FLOAT16", "VkPhysicalDeviceVulkan12Features", "shaderFloat16"},
		{"VR_F12_SHADER_INT8", "VkPhysicalDeviceVulkan12Features", "shaderInt8"},
		{"VR_F12_VULKAN_MEMORY_MODEL", "VkPhysicalDeviceVulkan12Features", "vulkanMemoryModel"},
		{"VR_F12_VULKAN_MEMORY_MODEL_DEVICE_SCOPE", "VkPhysicalDeviceVulkan12Features", "vulkanMemoryModelDeviceScope"},
	} {
		base := "0"
		if f.vkType != "VkPhysicalDeviceFeatures" {
			base = "offsetof(" + f.vkType + ", storageBuffer16BitAccess)"
			if strings.Contains(f.vkType, "12") {
				base = "offsetof(" + f.vkType + ", samplerMirrorClampToEdge)"
			}
		}
		fmt.Fprintf(&b, "CHECK(offsetof(%s, %s) == %s + 4 * %s)\n", f.vkType, f.field, base, f.idx)
	}
	b.WriteString("CHECK(offsetof(vr_PhysicalDeviceFeatures2, features) == offsetof(VkPhysicalDeviceFeatures2, features))\n")
	b.WriteString("CHECK(offsetof(vr_PhysicalDeviceVulkan11Features, f) == offsetof(VkPhysicalDeviceVulkan11Features, storageBuffer16BitAccess))\n")
	b.WriteString("CHECK(offsetof(vr_PhysicalDeviceVulkan12Features, f) == offsetof(VkPhysicalDeviceVulkan12Features, samplerMirrorClampToEdge))\n")
	dir := t.TempDir()
	file := filepath.Join(dir, "layout.c")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cc, "-std=c11", "-fsyntax-only", "-Wall", "-Wno-unused-function", "-I", filepath.Dir(shim), "-I", gokiDir, file)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, msg)
	}
	t.Logf("%d structs (%d fields) and %d constants match vulkan_core.h", nStructs, nFields, nConsts)
}

var (
	reStructEnd = regexp.MustCompile(`^\} (vr_[A-Z]\w*);(.*)$`)
	reField     = regexp.MustCompile(`(\w+)(\[\w+\])?;\s*(//.*)?$`)
	reConst     = regexp.MustCompile(`^#define VR_([A-Z0-9_]+) \(?-?(0x)?[0-9a-fA-F]+\)?$`)
)

// shimAsserts returns static assertions for the mirror structs (typedef
// struct { ... } vr_X;, VkX's mirror) and constants (#define VR_X n) of
// vkshim.h.
func shimAsserts(src string) (asserts string, structs, fields, consts int) {
	var b strings.Builder
	var body []string
	in := false
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "typedef struct {":
			in, body = true, nil
		case in && strings.HasPrefix(line, "}"):
			in = false
			m := reStructEnd.FindStringSubmatch(line)
			if m == nil {
				continue // one of vrun's own structs
			}
			name := m[1]
			vkName := "Vk" + strings.TrimPrefix(name, "vr_")
			structs++
			fmt.Fprintf(&b, "CHECK(sizeof(%s) == sizeof(%s))\n", name, vkName)
			if strings.Contains(m[2], "size only") {
				continue
			}
			for _, f := range body {
				fm := reField.FindStringSubmatch(f)
				if fm == nil {
					continue
				}
				fields++
				fmt.Fprintf(&b, "CHECK(offsetof(%s, %s) == offsetof(%s, %s))\n", name, fm[1], vkName, fm[1])
			}
		case in:
			body = append(body, line)
		default:
			if m := reConst.FindStringSubmatch(line); m != nil {
				consts++
				fmt.Fprintf(&b, "CHECK(VR_%s == VK_%s)\n", m[1], m[1])
			}
		}
	}
	return b.String(), structs, fields, consts
}
