package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/vrun-go/vrun/rt"
)

// MaxIDXDims is the largest number of dims ReadIDX accepts.
const MaxIDXDims = 8

// idxTypes maps an IDX type code to the element size in the file and the
// dtype it is read as (i16 widens to I32).
var idxTypes = map[byte]struct {
	name string
	size int
	dt   rt.DType
}{
	0x08: {"unsigned byte", 1, rt.U8},
	0x09: {"signed byte", 1, rt.I8},
	0x0B: {"short", 2, rt.I32},
	0x0C: {"int", 4, rt.I32},
	0x0D: {"float", 4, rt.F32},
	0x0E: {"double", 8, rt.F64},
}

// ReadIDX reads an IDX file (the format of the MNIST distribution),
// gzipped or not, as a tensor. See DecodeIDX.
func ReadIDX(path string) (*rt.Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return decodeIDX(f, path, size)
}

// DecodeIDX reads one IDX array from r; name is used in errors. A gzip
// stream (as distributed: train-images-idx3-ubyte.gz) is decompressed.
//
// The header is two zero bytes, a type code (0x08 unsigned byte, 0x09
// signed byte, 0x0B short, 0x0C int, 0x0D float, 0x0E double), the number
// of dims, and each dim as a big-endian uint32; the big-endian data
// follows and must end the file. Shorts are widened to I32. Errors are
// *FormatError values naming the offset.
func DecodeIDX(r io.Reader, name string) (*rt.Tensor, error) {
	return decodeIDX(r, name, -1)
}

// decodeIDX decodes; size, when known and the data is not compressed, is
// the input size, checked against the dims before allocating.
func decodeIDX(r io.Reader, name string, size int64) (*rt.Tensor, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	gz := false
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &FormatError{File: name, Msg: "bad gzip header", Err: err}
		}
		defer zr.Close()
		zr.Multistream(false)
		br, gz, size = bufio.NewReaderSize(zr, 1<<16), true, -1
	}
	fe := func(off int64, err error, format string, args ...any) error {
		return &FormatError{File: name, Offset: off, Decompressed: gz, Msg: fmt.Sprintf(format, args...), Err: err}
	}
	var head [4]byte
	if n, err := io.ReadFull(br, head[:]); err != nil {
		return nil, fe(int64(n), readErr(err), "file ends inside the 4-byte IDX magic")
	}
	if head[0] != 0 || head[1] != 0 {
		return nil, fe(0, nil, "not an IDX file: magic % x, want 00 00 TYPE NDIM", head)
	}
	typ, ok := idxTypes[head[2]]
	if !ok {
		return nil, fe(2, nil, "unknown IDX type code 0x%02x", head[2])
	}
	ndim := int(head[3])
	if ndim == 0 || ndim > MaxIDXDims {
		return nil, fe(3, nil, "%d dims, want 1 to %d", ndim, MaxIDXDims)
	}
	shape := make([]int, ndim)
	elems := int64(1)
	for i := range shape {
		var b [4]byte
		off := int64(4 + 4*i)
		if n, err := io.ReadFull(br, b[:]); err != nil {
			return nil, fe(off+int64(n), readErr(err), "file ends inside dim %d of %d", i, ndim)
		}
		d := int64(binary.BigEndian.Uint32(b[:]))
		if d > 0 && elems > math.MaxInt64/int64(typ.size)/d {
			return nil, fe(off, nil, "dims so far %v × %d are too large", shape[:i], d)
		}
		shape[i] = int(d)
		elems *= d
	}
	hdr := int64(4 + 4*ndim)
	nbytes := elems * int64(typ.size)
	if size >= 0 {
		switch {
		case size < hdr+nbytes:
			return nil, fe(size, io.ErrUnexpectedEOF, "file ends after %d of the %d data bytes that dims %v of %s need",
				size-hdr, nbytes, shape, typ.name)
		case size > hdr+nbytes:
			return nil, fe(hdr+nbytes, nil, "%d bytes after the data that dims %v of %s need (wrong dims, or not an IDX file)",
				size-hdr-nbytes, shape, typ.name)
		}
	}
	raw, got, err := readBounded(br, nbytes, size >= 0)
	if err != nil {
		return nil, fe(hdr+got, readErr(err), "file ends after %d of the %d data bytes that dims %v of %s need",
			got, nbytes, shape, typ.name)
	}
	if size < 0 {
		if n, _ := br.Read(make([]byte, 1)); n > 0 {
			return nil, fe(hdr+nbytes, nil, "data continues after the %d bytes that dims %v of %s need (wrong dims, or not an IDX file)",
				nbytes, shape, typ.name)
		}
	}
	out := &rt.Tensor{DType: typ.dt, Shape: shape}
	switch typ.size {
	case 1:
		out.Data = raw
	case 2:
		out.Data = make([]byte, 4*elems)
		for i := range elems {
			v := int32(int16(binary.BigEndian.Uint16(raw[2*i:])))
			binary.LittleEndian.PutUint32(out.Data[4*i:], uint32(v))
		}
	case 4:
		for i := int64(0); i < nbytes; i += 4 {
			binary.LittleEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
		}
		out.Data = raw
	case 8:
		for i := int64(0); i < nbytes; i += 8 {
			binary.LittleEndian.PutUint64(raw[i:], binary.BigEndian.Uint64(raw[i:]))
		}
		out.Data = raw
	}
	return out, nil
}

// readErr maps a short read's EOF to io.ErrUnexpectedEOF.
func readErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readBounded reads n bytes. Unless trusted (the size is backed by the
// file), it grows the buffer as data arrives, so that a short stream
// claiming huge dims allocates little. It returns how many bytes it got.
func readBounded(r io.Reader, n int64, trusted bool) ([]byte, int64, error) {
	const chunk = 1 << 20
	if trusted || n <= chunk {
		b := make([]byte, n)
		got, err := io.ReadFull(r, b)
		return b, int64(got), err
	}
	var buf bytes.Buffer
	buf.Grow(chunk)
	got, err := io.CopyN(&buf, r, n)
	if got != n {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, got, err
	}
	return buf.Bytes()[:n:n], n, nil
}

// ReadMNIST reads an MNIST-format pair of IDX files (MNIST, Fashion-MNIST,
// EMNIST), gzipped or not: images [N, rows, cols] of unsigned bytes and
// labels [N] of unsigned bytes in [0, 10). X is U8 [N, 1, rows, cols]
// (one channel) and Y is I64 [N].
func ReadMNIST(imagesPath, labelsPath string) (*Dataset, error) {
	return readMNIST(imagesPath, labelsPath, 10)
}

func readMNIST(imagesPath, labelsPath string, classes int) (*Dataset, error) {
	img, err := ReadIDX(imagesPath)
	if err != nil {
		return nil, err
	}
	lab, err := ReadIDX(labelsPath)
	if err != nil {
		return nil, err
	}
	return mnistDataset(img, lab, imagesPath, labelsPath, classes)
}

func mnistDataset(img, lab *rt.Tensor, imagesPath, labelsPath string, classes int) (*Dataset, error) {
	if img.DType != rt.U8 || len(img.Shape) != 3 {
		return nil, &FormatError{File: imagesPath, Offset: 2, Msg: fmt.Sprintf("images are %s%v, want unsigned bytes [N, rows, cols]", img.DType, img.Shape)}
	}
	if lab.DType != rt.U8 || len(lab.Shape) != 1 {
		return nil, &FormatError{File: labelsPath, Offset: 2, Msg: fmt.Sprintf("labels are %s%v, want unsigned bytes [N]", lab.DType, lab.Shape)}
	}
	n := img.Shape[0]
	if lab.Shape[0] != n {
		return nil, fmt.Errorf("data: %s holds %d images but %s holds %d labels", imagesPath, n, labelsPath, lab.Shape[0])
	}
	y := &rt.Tensor{DType: rt.I64, Shape: []int{n}, Data: make([]byte, 8*n)}
	for i, v := range lab.Data {
		if int(v) >= classes {
			return nil, &FormatError{File: labelsPath, Offset: 8 + int64(i), Msg: fmt.Sprintf("label %d of sample %d is out of range [0, %d)", v, i, classes)}
		}
		binary.LittleEndian.PutUint64(y.Data[8*i:], uint64(v))
	}
	x := &rt.Tensor{DType: rt.U8, Shape: []int{n, 1, img.Shape[1], img.Shape[2]}, Data: img.Data}
	return &Dataset{X: x, Y: y, Classes: classes}, nil
}

// ReadMNISTDir reads the training (train) or test set of MNIST from dir,
// which holds the files as distributed: train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte, each possibly gzipped (.gz). The dot-separated
// names of some mirrors (train-images.idx3-ubyte) are found too.
func ReadMNISTDir(dir string, train bool) (*Dataset, error) {
	prefix := "t10k"
	if train {
		prefix = "train"
	}
	img, err := findFile(dir, prefix+"-images-idx3-ubyte", prefix+"-images.idx3-ubyte")
	if err != nil {
		return nil, err
	}
	lab, err := findFile(dir, prefix+"-labels-idx1-ubyte", prefix+"-labels.idx1-ubyte")
	if err != nil {
		return nil, err
	}
	return ReadMNIST(img, lab)
}

// ErrNotFound is wrapped by the errors of the directory readers when a
// file of the dataset is missing.
var ErrNotFound = errors.New("not found")

// findFile returns the first of names (or names.gz) that exists in dir.
func findFile(dir string, names ...string) (string, error) {
	for _, n := range names {
		for _, cand := range []string{n, n + ".gz"} {
			p := filepath.Join(dir, cand)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("data: %s: %s (or %s.gz) %w", dir, names[0], names[0], ErrNotFound)
}
