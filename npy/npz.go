package npy

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/vrun-go/vrun/rt"
)

// MaxNPZMembers is the largest number of arrays ReadNPZ accepts in one
// archive.
const MaxNPZMembers = 1 << 16

// ErrNotNPZ: the input is not a zip archive.
var ErrNotNPZ = errors.New("npy: not a .npz file (zip archive)")

// ReadNPZ reads every array of a .npz archive, as numpy.savez and
// numpy.savez_compressed write it: a zip file whose members are .npy
// files, stored or deflated. The map is keyed by member name without the
// ".npy" suffix ("x" for x.npy), as numpy.load names them. A member that
// is not a .npy file, or a name given twice, is an error; errors name the
// member and its byte offset in the archive.
func ReadNPZ(r io.ReaderAt, size int64) (map[string]*rt.Tensor, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotNPZ, err)
	}
	if len(zr.File) > MaxNPZMembers {
		return nil, fmt.Errorf("npy: .npz has %d members, more than %d", len(zr.File), MaxNPZMembers)
	}
	out := map[string]*rt.Tensor{}
	for _, f := range zr.File {
		off, _ := f.DataOffset()
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok || f.FileInfo().IsDir() {
			return nil, fmt.Errorf("npy: .npz member %q (byte offset %d) is not a .npy file: %w", f.Name, off, ErrUnsupported)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("npy: .npz member %q (byte offset %d) appears twice", f.Name, off)
		}
		t, err := readMember(f)
		if err != nil {
			return nil, fmt.Errorf("npy: .npz member %q (byte offset %d): %w", f.Name, off, err)
		}
		out[name] = t
	}
	return out, nil
}

func readMember(f *zip.File) (*rt.Tensor, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// The sizes in the zip directory are not trusted for allocation: a
	// member is read as a stream, in bounded chunks.
	return read(rc, -1)
}

// ReadNPZFile reads the .npz file at path; see ReadNPZ.
func ReadNPZFile(path string) (map[string]*rt.Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m, err := ReadNPZ(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// WriteNPZ writes arrays to w as a .npz archive that numpy.load reads:
// one member NAME.npy per array, in sorted name order, deflated when
// compress is set (numpy.savez_compressed) and stored otherwise
// (numpy.savez).
func WriteNPZ(w io.Writer, arrays map[string]*rt.Tensor, compress bool) error {
	names := make([]string, 0, len(arrays))
	for name := range arrays {
		if name == "" {
			return fmt.Errorf("npy: .npz array with an empty name")
		}
		names = append(names, name)
	}
	slices.Sort(names)
	zw := zip.NewWriter(w)
	method := zip.Store
	if compress {
		method = zip.Deflate
	}
	for _, name := range names {
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: method})
		if err != nil {
			return fmt.Errorf("npy: .npz member %q: %w", name, err)
		}
		if err := Write(fw, arrays[name]); err != nil {
			return fmt.Errorf("npy: .npz member %q: %w", name, err)
		}
	}
	return zw.Close()
}

// WriteNPZFile writes arrays to the file at path; see WriteNPZ.
func WriteNPZFile(path string, arrays map[string]*rt.Tensor, compress bool) error {
	return writeFile(path, func(w io.Writer) error { return WriteNPZ(w, arrays, compress) })
}
