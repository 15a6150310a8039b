package data

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vrun-go/vrun/rt"
)

// CIFAR image geometry: 3 channels of 32×32 bytes, channel-major.
const (
	cifarPixels = 3 * 32 * 32
)

// CIFAR100Labels picks which label of a CIFAR-100 record becomes Y.
type CIFAR100Labels int

// The two CIFAR-100 labels.
const (
	Fine   CIFAR100Labels = iota // 100 classes
	Coarse                       // 20 superclasses
)

// ReadCIFAR10 reads CIFAR-10 binary batches ("CIFAR-10 binary version":
// data_batch_1.bin … data_batch_5.bin, test_batch.bin) and concatenates
// them. Each record is one label byte in [0, 10) and 3072 pixel bytes
// (red, green, blue planes of 32×32, row-major). X is U8 [N, 3, 32, 32]
// and Y is I64 [N]. A file whose size is not a whole number of records,
// or a label out of range, is a *FormatError naming the file and offset.
func ReadCIFAR10(paths ...string) (*Dataset, error) {
	return readCIFAR(paths, 1, 10, 0)
}

// ReadCIFAR100 reads CIFAR-100 binary batches (train.bin, test.bin) and
// concatenates them. Each record is a coarse label byte in [0, 20), a
// fine label byte in [0, 100) and 3072 pixel bytes; which picks the label
// that becomes Y. X is U8 [N, 3, 32, 32] and Y is I64 [N].
func ReadCIFAR100(which CIFAR100Labels, paths ...string) (*Dataset, error) {
	switch which {
	case Fine:
		return readCIFAR(paths, 2, 100, 1)
	case Coarse:
		return readCIFAR(paths, 2, 20, 0)
	}
	return nil, fmt.Errorf("data: CIFAR100Labels %d", which)
}

func readCIFAR(paths []string, labelBytes, classes, pick int) (*Dataset, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("data: no CIFAR batch files given")
	}
	var xs, ys [][]byte
	n := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		x, y, err := decodeCIFAR(b, p, labelBytes)
		if err != nil {
			return nil, err
		}
		xs, ys = append(xs, x), append(ys, y)
		n += len(x) / cifarPixels
	}
	out := &Dataset{
		X:       &rt.Tensor{DType: rt.U8, Shape: []int{n, 3, 32, 32}, Data: make([]byte, 0, n*cifarPixels)},
		Y:       &rt.Tensor{DType: rt.I64, Shape: []int{n}, Data: make([]byte, 0, 8*n)},
		Classes: classes,
	}
	for i := range xs {
		out.X.Data = append(out.X.Data, xs[i]...)
		for k := pick; k < len(ys[i]); k += labelBytes {
			out.Y.Data = binary.LittleEndian.AppendUint64(out.Y.Data, uint64(ys[i][k]))
		}
	}
	return out, nil
}

// decodeCIFAR splits the records of one batch file into pixels and label
// bytes, validating the size and the labels: below 10 for CIFAR-10
// (labelBytes 1); coarse below 20 and fine below 100 for CIFAR-100
// (labelBytes 2).
func decodeCIFAR(b []byte, name string, labelBytes int) (x, labels []byte, err error) {
	rec := labelBytes + cifarPixels
	kind := "CIFAR-10"
	limits := []int{10}
	if labelBytes == 2 {
		kind, limits = "CIFAR-100", []int{20, 100}
	}
	if len(b) == 0 {
		return nil, nil, &FormatError{File: name, Msg: "empty file, want " + kind + " records"}
	}
	if r := len(b) % rec; r != 0 {
		n := len(b) / rec
		return nil, nil, &FormatError{File: name, Offset: int64(n * rec),
			Msg: fmt.Sprintf("record %d is truncated: %d of its %d bytes (a %s batch is a whole number of %d-byte records)", n, r, rec, kind, rec)}
	}
	n := len(b) / rec
	x = make([]byte, 0, n*cifarPixels)
	labels = make([]byte, 0, n*labelBytes)
	for i := range n {
		r := b[i*rec : (i+1)*rec]
		for k, lim := range limits {
			if int(r[k]) >= lim {
				what := "label"
				if labelBytes == 2 {
					what = []string{"coarse label", "fine label"}[k]
				}
				return nil, nil, &FormatError{File: name, Offset: int64(i*rec + k),
					Msg: fmt.Sprintf("%s %d of record %d is out of range [0, %d) (is this a %s batch?)", what, r[k], i, lim, kind)}
			}
		}
		labels = append(labels, r[:labelBytes]...)
		x = append(x, r[labelBytes:]...)
	}
	return x, labels, nil
}

// ReadCIFAR10Dir reads the training set (data_batch_1.bin …
// data_batch_5.bin) or the test set (test_batch.bin) of CIFAR-10 from
// dir, or from dir/cifar-10-batches-bin as the archive unpacks.
func ReadCIFAR10Dir(dir string, train bool) (*Dataset, error) {
	names := []string{"test_batch.bin"}
	if train {
		names = []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}
	}
	paths, err := findAll(dir, "cifar-10-batches-bin", names)
	if err != nil {
		return nil, err
	}
	return ReadCIFAR10(paths...)
}

// ReadCIFAR100Dir reads the training set (train.bin) or the test set
// (test.bin) of CIFAR-100 from dir, or from dir/cifar-100-binary as the
// archive unpacks.
func ReadCIFAR100Dir(dir string, train bool, which CIFAR100Labels) (*Dataset, error) {
	name := "test.bin"
	if train {
		name = "train.bin"
	}
	paths, err := findAll(dir, "cifar-100-binary", []string{name})
	if err != nil {
		return nil, err
	}
	return ReadCIFAR100(which, paths...)
}

// findAll finds every name in dir, or else every name in dir/sub.
func findAll(dir, sub string, names []string) ([]string, error) {
	for _, d := range []string{dir, filepath.Join(dir, sub)} {
		var paths []string
		for _, n := range names {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				paths = append(paths, p)
			}
		}
		if len(paths) == len(names) {
			return paths, nil
		}
	}
	return nil, fmt.Errorf("data: %s: %s (or %s/%s) %w", dir, names[0], sub, names[0], ErrNotFound)
}
