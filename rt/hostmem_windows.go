package rt

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// memoryStatusEx is Win32's MEMORYSTATUSEX.
type memoryStatusEx struct {
	length               uint32
	memoryLoad           uint32
	totalPhys            uint64
	availPhys            uint64
	totalPageFile        uint64
	availPageFile        uint64
	totalVirtual         uint64
	availVirtual         uint64
	availExtendedVirtual uint64
}

var procGlobalMemoryStatusEx = windows.NewLazySystemDLL("kernel32.dll").NewProc("GlobalMemoryStatusEx")

func hostMemory() (avail, total int64, ok bool) {
	if procGlobalMemoryStatusEx.Find() != nil {
		return 0, 0, false
	}
	st := memoryStatusEx{length: uint32(unsafe.Sizeof(memoryStatusEx{}))}
	r, _, _ := procGlobalMemoryStatusEx.Call(uintptr(unsafe.Pointer(&st)))
	if r == 0 || st.totalPhys == 0 || st.totalPhys > 1<<60 {
		return 0, 0, false
	}
	return int64(st.availPhys), int64(st.totalPhys), true
}
