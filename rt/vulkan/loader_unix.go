//go:build cgo && !windows

package vulkan

/*
#cgo linux LDFLAGS: -ldl
#cgo freebsd LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
static void* vr_dlopen(const char* name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
static void* vr_dlsym(void* h, const char* s) { return dlsym(h, s); }
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

func loaderNames() []string {
	if runtime.GOOS == "darwin" {
		return []string{"libvulkan.1.dylib", "libMoltenVK.dylib"}
	}
	return []string{"libvulkan.so.1", "libvulkan.so"}
}

// loadLoader dlopens the Vulkan loader and returns vkGetInstanceProcAddr.
func loadLoader() (unsafe.Pointer, error) {
	names := loaderNames()
	for _, n := range names {
		cn := C.CString(n)
		h := C.vr_dlopen(cn)
		C.free(unsafe.Pointer(cn))
		if h == nil {
			continue
		}
		cs := C.CString("vkGetInstanceProcAddr")
		p := C.vr_dlsym(h, cs)
		C.free(unsafe.Pointer(cs))
		if p != nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("vulkan: no Vulkan loader (tried %s)", strings.Join(names, ", "))
}
