//go:build windows

package model

import (
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// mmapFile maps the first size bytes of f read-only. The mapping outlives
// f; unmap releases it.
func mmapFile(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READONLY, uint32(uint64(size)>>32), uint32(size), nil)
	if err != nil {
		return nil, nil, err
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(size))
	// The view keeps the mapping object alive once mapped.
	windows.CloseHandle(h)
	if err != nil {
		return nil, nil, err
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	data = unsafe.Slice((*byte)(p), int(size))
	return data, func() error { return windows.UnmapViewOfFile(addr) }, nil
}
