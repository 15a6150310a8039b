// Package atomicfile writes files so that readers never see a partial
// one: the data goes to a temporary file in the same directory, which is
// synced and renamed into place (os.Rename replaces the target on Unix
// and on Windows).
package atomicfile

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
)

// Write creates path with mode 0644 from what write writes (through a
// buffer). On any error the temporary file is removed and path is left as
// it was.
func Write(path string, write func(w io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	// CreateTemp makes the file 0600.
	if err = f.Chmod(0o644); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WriteBytes is [Write] of b.
func WriteBytes(path string, b []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
