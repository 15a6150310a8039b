//go:build cgo

package vulkan

// #include <stdint.h>
import "C"

import "unsafe"

// vrunDebugMessage receives the validation layer's messages (see
// vr_debug_cb in vkshim.h) with the handles of the objects they name.
//
//export vrunDebugMessage
func vrunDebugMessage(severity C.uint32_t, msg *C.char, handles *C.uint64_t, n C.uint32_t) {
	var hs []uint64
	if n > 0 && handles != nil {
		hs = append(hs, unsafe.Slice((*uint64)(unsafe.Pointer(handles)), int(n))...)
	}
	recordValidation(uint32(severity), C.GoString(msg), hs)
}
