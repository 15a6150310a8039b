//go:build !linux && !darwin && !windows

package model

import (
	"errors"
	"os"
)

// mmapFile is not available on this OS: Load reads the file instead.
func mmapFile(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	return nil, nil, errors.ErrUnsupported
}
