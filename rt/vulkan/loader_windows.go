//go:build cgo && windows

package vulkan

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// loadLoader loads vulkan-1.dll and returns vkGetInstanceProcAddr.
func loadLoader() (unsafe.Pointer, error) {
	dll := windows.NewLazySystemDLL("vulkan-1.dll")
	proc := dll.NewProc("vkGetInstanceProcAddr")
	if err := proc.Find(); err != nil {
		return nil, fmt.Errorf("vulkan: no Vulkan loader (tried vulkan-1.dll): %v", err)
	}
	addr := proc.Addr()
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr)), nil
}
