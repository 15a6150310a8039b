//go:build cgo

package cudashim

/*
#include <stdlib.h>
#include <string.h>
#include "cuda_shim.h"

// CUuuid is a struct of 16 bytes (cuda.h: struct CUuuid_st { char bytes[16]; }).
typedef struct { char bytes[16]; } vr_CUuuid;
typedef CUresult(VR_API* pfn_cuDeviceGetUuid)(vr_CUuuid*, CUdevice);

static pfn_cuDeviceGetUuid vr_uuid_fn;

// vr_load_uuid resolves cuDeviceGetUuid_v2 (CUDA 11.4+), else
// cuDeviceGetUuid (9.2+), in the driver library already loaded; 0 if
// neither is there.
static int vr_load_uuid(const char* lib) {
	void* h = vr_open(lib);
	if (!h) return 0;
	void* p = vr_sym(h, "cuDeviceGetUuid_v2");
	if (!p) p = vr_sym(h, "cuDeviceGetUuid");
	vr_uuid_fn = (pfn_cuDeviceGetUuid)p;
	return p != NULL;
}

static CUresult vr_cuDeviceGetUuid(unsigned char* out, CUdevice d) {
	vr_CUuuid u;
	memset(&u, 0, sizeof u);
	if (!vr_uuid_fn) return 1;
	CUresult r = vr_uuid_fn(&u, d);
	memcpy(out, u.bytes, 16);
	return r;
}
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

var uuidOnce sync.Once

// cuDeviceUUID returns the device's UUID (the one nvidia-smi and Vulkan's
// deviceUUID report) formatted by rt.FormatUUID, or "" when the driver
// lacks cuDeviceGetUuid. It is called after loadDriver, with the driver
// library's name.
//
// Untested on hardware in this change (no GPU on the machine it was
// written on); it follows cuda.h's declarations of cuDeviceGetUuid_v2.
func cuDeviceUUID(driver string, d C.CUdevice) string {
	uuidOnce.Do(func() {
		cs := C.CString(driver)
		defer C.free(unsafe.Pointer(cs))
		C.vr_load_uuid(cs)
	})
	var u [16]byte
	if C.vr_cuDeviceGetUuid((*C.uchar)(unsafe.Pointer(&u[0])), d) != 0 {
		return ""
	}
	return rt.FormatUUID(u)
}
