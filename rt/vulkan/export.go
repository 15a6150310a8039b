//go:build cgo

package vulkan

// #include <stdint.h>
import "C"

//export vrunDebugCallback
func vrunDebugCallback(severity, types C.uint32_t, msg *C.char, user C.uintptr_t) C.uint32_t {
	recordValidation(uintptr(user), uint32(severity), C.GoString(msg))
	return 0
}
