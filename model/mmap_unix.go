//go:build linux || darwin

package model

import (
	"os"

	"golang.org/x/sys/unix"
)

// mmapFile maps the first size bytes of f read-only. The mapping outlives
// f; unmap releases it.
func mmapFile(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
