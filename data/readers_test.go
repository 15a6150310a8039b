package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/gomnist"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// idxBytes encodes an IDX file by the format's definition (big-endian
// dims and data), independently of the reader.
func idxBytes(code byte, dims []uint32, data []byte) []byte {
	b := []byte{0, 0, code, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return append(b, data...)
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadIDXTypes(t *testing.T) {
	dir := t.TempDir()
	be16 := func(v ...int16) []byte {
		var b []byte
		for _, x := range v {
			b = binary.BigEndian.AppendUint16(b, uint16(x))
		}
		return b
	}
	be32 := func(v ...uint32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.BigEndian.AppendUint32(b, x)
		}
		return b
	}
	be64 := func(v ...uint64) []byte {
		var b []byte
		for _, x := range v {
			b = binary.BigEndian.AppendUint64(b, x)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		file []byte
		dt   rt.DType
		dims []int
		want []float64
	}{
		{"u8", idxBytes(0x08, []uint32{2, 3}, []byte{0, 1, 2, 253, 254, 255}), rt.U8, []int{2, 3}, []float64{0, 1, 2, 253, 254, 255}},
		{"i8", idxBytes(0x09, []uint32{3}, []byte{0x80, 0xff, 7}), rt.I8, []int{3}, []float64{-128, -1, 7}},
		{"i16", idxBytes(0x0B, []uint32{3}, be16(-32768, -2, 300)), rt.I32, []int{3}, []float64{-32768, -2, 300}},
		{"i32", idxBytes(0x0C, []uint32{1, 2}, be32(0xfffffffe, 70000)), rt.I32, []int{1, 2}, []float64{-2, 70000}},
		{"f32", idxBytes(0x0D, []uint32{2}, be32(math.Float32bits(1.5), math.Float32bits(-0.25))), rt.F32, []int{2}, []float64{1.5, -0.25}},
		{"f64", idxBytes(0x0E, []uint32{1}, be64(math.Float64bits(math.Pi))), rt.F64, []int{1}, []float64{math.Pi}},
		{"empty", idxBytes(0x08, []uint32{0, 28, 28}, nil), rt.U8, []int{0, 28, 28}, []float64{}},
	} {
		for _, z := range []bool{false, true} {
			file, name := tc.file, tc.name
			if z {
				file, name = gz(file), name+".gz"
			}
			got, err := ReadIDX(writeFile(t, dir, name, file))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got.DType != tc.dt || !equalInts(got.Shape, tc.dims) {
				t.Fatalf("%s: %s%v, want %s%v", name, got.DType, got.Shape, tc.dt, tc.dims)
			}
			for i, w := range tc.want {
				if got.Float64(i) != w {
					t.Errorf("%s: element %d = %v, want %v", name, i, got.Float64(i), w)
				}
			}
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReadIDXErrors checks that a wrong or truncated file is a
// *FormatError naming the file and the offset of the problem.
func TestReadIDXErrors(t *testing.T) {
	dir := t.TempDir()
	good := idxBytes(0x08, []uint32{2, 2, 3}, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	for _, tc := range []struct {
		name   string
		file   []byte
		offset int64
		msg    string
		eof    bool
	}{
		{"empty", nil, 0, "inside the 4-byte IDX magic", true},
		{"short magic", good[:3], 3, "inside the 4-byte IDX magic", true},
		{"not idx", []byte("P5\n28 28\n255\n"), 0, "not an IDX file", false},
		{"bad type", idxBytes(0x07, []uint32{1}, []byte{0}), 2, "unknown IDX type code 0x07", false},
		{"no dims", []byte{0, 0, 8, 0}, 3, "0 dims", false},
		{"many dims", []byte{0, 0, 8, 9}, 3, "9 dims", false},
		{"short dims", good[:9], 9, "inside dim 1 of 3", true},
		{"short data", good[:20], 20, "after 4 of the 12 data bytes", true},
		{"long data", append(append([]byte{}, good...), 0, 0), 28, "2 bytes after the data", false},
		{"huge dims", idxBytes(0x0E, []uint32{0xffffffff, 0xffffffff, 0xffffffff}, nil), 8, "too large", false},
	} {
		p := writeFile(t, dir, tc.name, tc.file)
		_, err := ReadIDX(p)
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: err = %v, want a *FormatError", tc.name, err)
		}
		if fe.File != p || fe.Offset != tc.offset || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v (offset %d), want offset %d and %q", tc.name, err, fe.Offset, tc.offset, tc.msg)
		}
		if tc.eof != errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: errors.Is(err, io.ErrUnexpectedEOF) = %v", tc.name, !tc.eof)
		}
	}
	// Gzipped: offsets are in the decompressed data.
	for _, tc := range []struct {
		name   string
		file   []byte
		offset int64
		msg    string
	}{
		{"short data.gz", gz(good[:20]), 20, "after 4 of the 12 data bytes"},
		{"long data.gz", gz(append(append([]byte{}, good...), 9)), 28, "data continues after the 12 bytes"},
		{"cut stream.gz", gz(good)[:30], -1, "decompressed"},
		{"bad header.gz", []byte{0x1f, 0x8b, 0, 0}, 0, "bad gzip header"},
	} {
		p := writeFile(t, dir, tc.name, tc.file)
		_, err := ReadIDX(p)
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.msg) || (tc.offset >= 0 && fe.Offset != tc.offset) {
			t.Errorf("%s: err = %v, want offset %d and %q", tc.name, err, tc.offset, tc.msg)
		}
	}
}

// TestMNISTReal reads the real MNIST files of the GoMNIST module and
// checks them against figures computed with NumPy from the same files
// (sample counts, the first labels, per-class counts, pixel sums).
func TestMNISTReal(t *testing.T) {
	dir, err := gomnist.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		train  bool
		n      int
		first  []int64
		counts []int
		sum    int64 // of every pixel
		sum0   int64 // of the first image
	}{
		{true, 60000, []int64{5, 0, 4, 1, 9, 2, 1, 3, 1, 4}, []int{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}, 1567298545, 27525},
		{false, 10000, []int64{7, 2, 1, 0, 4, 1, 4, 9, 5, 9}, []int{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}, 264923200, 18454},
	} {
		d, err := ReadMNISTDir(dir, tc.train)
		if err != nil {
			t.Fatal(err)
		}
		if !equalInts(d.X.Shape, []int{tc.n, 1, 28, 28}) || d.X.DType != rt.U8 || !equalInts(d.Y.Shape, []int{tc.n}) || d.Y.DType != rt.I64 || d.Classes != 10 {
			t.Fatalf("train=%v: x %s%v, y %s%v, %d classes", tc.train, d.X.DType, d.X.Shape, d.Y.DType, d.Y.Shape, d.Classes)
		}
		for i, w := range tc.first {
			if g := int64(d.Y.Float64(i)); g != w {
				t.Errorf("train=%v: label %d = %d, want %d", tc.train, i, g, w)
			}
		}
		counts := make([]int, 10)
		for i := range tc.n {
			counts[int(d.Y.Float64(i))]++
		}
		if !equalInts(counts, tc.counts) {
			t.Errorf("train=%v: class counts %v, want %v", tc.train, counts, tc.counts)
		}
		var sum, sum0 int64
		for i, v := range d.X.Data {
			sum += int64(v)
			if i < 784 {
				sum0 += int64(v)
			}
		}
		if sum != tc.sum || sum0 != tc.sum0 {
			t.Errorf("train=%v: pixel sums %d, %d, want %d, %d", tc.train, sum, sum0, tc.sum, tc.sum0)
		}
	}
}

func TestReadMNISTErrors(t *testing.T) {
	dir := t.TempDir()
	img := writeFile(t, dir, "img", idxBytes(0x08, []uint32{2, 2, 2}, make([]byte, 8)))
	lab := writeFile(t, dir, "lab", idxBytes(0x08, []uint32{2}, []byte{3, 9}))
	if d, err := ReadMNIST(img, lab); err != nil || d.Len() != 2 || !equalInts(d.X.Shape, []int{2, 1, 2, 2}) {
		t.Fatalf("good files: %v", err)
	}
	for _, tc := range []struct {
		name     string
		img, lab []byte
		file     string
		offset   int64
		msg      string
	}{
		{"bad label", nil, idxBytes(0x08, []uint32{2}, []byte{3, 10}), "lab", 9, "label 10 of sample 1 is out of range [0, 10)"},
		{"labels as images", idxBytes(0x08, []uint32{2}, []byte{3, 1}), nil, "img", 2, "want unsigned bytes [N, rows, cols]"},
		{"float labels", nil, idxBytes(0x0D, []uint32{2}, make([]byte, 8)), "lab", 2, "want unsigned bytes [N]"},
		{"count mismatch", nil, idxBytes(0x08, []uint32{3}, []byte{1, 2, 3}), "", 0, "holds 2 images but"},
	} {
		ip, lp := img, lab
		if tc.img != nil {
			ip = writeFile(t, dir, "img2", tc.img)
		}
		if tc.lab != nil {
			lp = writeFile(t, dir, "lab2", tc.lab)
		}
		_, err := ReadMNIST(ip, lp)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("%s: err = %v, want %q", tc.name, err, tc.msg)
		}
		var fe *FormatError
		if tc.file != "" {
			if !errors.As(err, &fe) || fe.Offset != tc.offset || filepath.Base(fe.File) != tc.file+"2" {
				t.Errorf("%s: err = %v, want file %s2 offset %d", tc.name, err, tc.file, tc.offset)
			}
		}
	}
	if _, err := ReadMNISTDir(dir, true); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "train-images-idx3-ubyte") {
		t.Errorf("missing files: err = %v", err)
	}
}

// cifarRecord builds one record of the CIFAR binary format by its
// definition: label byte(s), then 1024 red, 1024 green, 1024 blue bytes.
func cifarRecord(labels []byte, seed int) []byte {
	b := append([]byte{}, labels...)
	for i := range 3072 {
		b = append(b, byte(i*7+seed*13))
	}
	return b
}

func TestCIFAR10(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "cifar-10-batches-bin")
	os.Mkdir(sub, 0o755)
	var want []int64
	for f, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
		var file []byte
		for r := range 3 {
			lab := byte((f*3 + r) % 10)
			file = append(file, cifarRecord([]byte{lab}, f*3+r)...)
			if f < 5 {
				want = append(want, int64(lab))
			}
		}
		writeFile(t, sub, name, file)
	}
	d, err := ReadCIFAR10Dir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if !equalInts(d.X.Shape, []int{15, 3, 32, 32}) || d.Classes != 10 || d.Y.DType != rt.I64 {
		t.Fatalf("x %v, %d classes, y %s", d.X.Shape, d.Classes, d.Y.DType)
	}
	for i, w := range want {
		if g := int64(d.Y.Float64(i)); g != w {
			t.Errorf("label %d = %d, want %d", i, g, w)
		}
		rec := cifarRecord(nil, i)
		if !bytes.Equal(d.X.Data[i*3072:(i+1)*3072], rec) {
			t.Errorf("image %d differs", i)
		}
	}
	// Channel-major: pixel (c, y, x) of image 4 is byte 1 + c*1024 + y*32 + x of its record.
	if g, w := d.X.Data[4*3072+2*1024+5*32+7], byte(((2*1024+5*32+7)*7+4*13)%256); g != w {
		t.Errorf("pixel (2,5,7) of image 4 = %d, want %d", g, w)
	}
	test, err := ReadCIFAR10Dir(sub, false)
	if err != nil || test.Len() != 3 {
		t.Fatalf("test set: %v", err)
	}
}

func TestCIFAR100(t *testing.T) {
	dir := t.TempDir()
	var file []byte
	for r := range 4 {
		file = append(file, cifarRecord([]byte{byte(19 - r), byte(99 - 7*r)}, r)...)
	}
	writeFile(t, dir, "train.bin", file)
	fine, err := ReadCIFAR100Dir(dir, true, Fine)
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := ReadCIFAR100Dir(dir, true, Coarse)
	if err != nil {
		t.Fatal(err)
	}
	if fine.Classes != 100 || coarse.Classes != 20 || fine.Len() != 4 {
		t.Fatalf("classes %d, %d; %d samples", fine.Classes, coarse.Classes, fine.Len())
	}
	for r := range 4 {
		if g, w := fine.Y.Float64(r), float64(99-7*r); g != w {
			t.Errorf("fine label %d = %v, want %v", r, g, w)
		}
		if g, w := coarse.Y.Float64(r), float64(19-r); g != w {
			t.Errorf("coarse label %d = %v, want %v", r, g, w)
		}
		if !bytes.Equal(fine.X.Data[r*3072:(r+1)*3072], cifarRecord(nil, r)) {
			t.Errorf("image %d differs", r)
		}
	}
}

func TestCIFARErrors(t *testing.T) {
	dir := t.TempDir()
	rec := cifarRecord([]byte{3}, 0)
	two := append(append([]byte{}, rec...), rec...)
	for _, tc := range []struct {
		name   string
		file   []byte
		c100   bool
		offset int64
		msg    string
	}{
		{"empty", nil, false, 0, "empty file"},
		{"truncated", two[:len(two)-5], false, 3073, "record 1 is truncated: 3068 of its 3073 bytes"},
		{"label", append(append([]byte{}, rec...), cifarRecord([]byte{10}, 1)...), false, 3073, "label 10 of record 1 is out of range [0, 10)"},
		{"cifar100 as 10", append(cifarRecord([]byte{1, 50}, 0), cifarRecord([]byte{1, 50}, 0)...), false, 6146, "record 2 is truncated: 2 of its 3073 bytes"},
		{"coarse", cifarRecord([]byte{20, 5}, 0), true, 0, "coarse label 20 of record 0"},
		{"fine", cifarRecord([]byte{2, 100}, 0), true, 1, "fine label 100 of record 0"},
	} {
		p := writeFile(t, dir, tc.name, tc.file)
		var err error
		if tc.c100 {
			_, err = ReadCIFAR100(Fine, p)
		} else {
			_, err = ReadCIFAR10(p)
		}
		var fe *FormatError
		if !errors.As(err, &fe) || fe.File != p || fe.Offset != tc.offset || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want offset %d and %q", tc.name, err, tc.offset, tc.msg)
		}
	}
	if _, err := ReadCIFAR10Dir(dir, true); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing files: %v", err)
	}
}

func TestNPYDataset(t *testing.T) {
	dir := t.TempDir()
	x := rt.FromFloat64(rt.F32, []float64{1, 2, 3, 4, 5, 6}, 3, 2)
	y := rt.FromFloat64(rt.I64, []float64{0, 2, 1}, 3)
	xp, yp := filepath.Join(dir, "x.npy"), filepath.Join(dir, "y.npy")
	npy.WriteFile(xp, x)
	npy.WriteFile(yp, y)
	d, err := ReadNPY(xp, yp)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.X.Data, x.Data) || !bytes.Equal(d.Y.Data, y.Data) {
		t.Fatal("npy dataset differs")
	}
	if err := d.CheckLabels(3); err != nil || d.Classes != 3 {
		t.Fatalf("CheckLabels(3) = %v", err)
	}
	if err := d.CheckLabels(2); err == nil || !strings.Contains(err.Error(), "label 2 of sample 1 is out of range [0, 2)") {
		t.Fatalf("CheckLabels(2) = %v", err)
	}
	// x and y of different lengths.
	npy.WriteFile(yp, rt.FromFloat64(rt.I64, []float64{0, 1}, 2))
	if _, err := ReadNPY(xp, yp); err == nil || !strings.Contains(err.Error(), "x has 3 samples but y has 2") {
		t.Fatalf("length mismatch: %v", err)
	}
	// .npz, named and positional.
	zp := filepath.Join(dir, "d.npz")
	npy.WriteNPZFile(zp, map[string]*rt.Tensor{"x": x, "y": y}, true)
	if d, err := ReadNPZ(zp, "", ""); err != nil || !bytes.Equal(d.Y.Data, y.Data) {
		t.Fatalf("npz: %v", err)
	}
	npy.WriteNPZFile(zp, map[string]*rt.Tensor{"arr_0": x, "arr_1": y}, false)
	if d, err := ReadNPZ(zp, "", ""); err != nil || !bytes.Equal(d.X.Data, x.Data) {
		t.Fatalf("positional npz: %v", err)
	}
	if _, err := ReadNPZ(zp, "inputs", "labels"); err == nil || !strings.Contains(err.Error(), `["arr_0" "arr_1"]`) {
		t.Fatalf("missing names: %v", err)
	}
}

func TestSplitSubset(t *testing.T) {
	n := 103
	xs, ys := make([]float64, 2*n), make([]float64, n)
	for i := range n {
		xs[2*i], xs[2*i+1], ys[i] = float64(i), float64(-i), float64(i%7)
	}
	d, err := NewDataset(rt.FromFloat64(rt.F64, xs, n, 2), rt.FromFloat64(rt.I32, ys, n), 7)
	if err != nil {
		t.Fatal(err)
	}
	tr, va, err := d.Split(0.2, 42)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 82 || va.Len() != 21 || tr.Classes != 7 {
		t.Fatalf("split %d + %d", tr.Len(), va.Len())
	}
	seen := map[int]bool{}
	for _, part := range []*Dataset{tr, va} {
		for i := range part.Len() {
			id := int(part.X.Float64(2 * i))
			if seen[id] || part.X.Float64(2*i+1) != -float64(id) || part.Y.Float64(i) != float64(id%7) {
				t.Fatalf("sample %d duplicated or mixed up", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct samples, want %d", len(seen), n)
	}
	tr2, _, _ := d.Split(0.2, 42)
	tr3, _, _ := d.Split(0.2, 43)
	if !bytes.Equal(tr.X.Data, tr2.X.Data) || bytes.Equal(tr.X.Data, tr3.X.Data) {
		t.Error("split is not a function of the seed")
	}
	if _, _, err := d.Split(1.5, 0); err == nil {
		t.Error("fraction 1.5 accepted")
	}
	if _, err := d.Subset([]int{0, n}); err == nil {
		t.Error("index out of range accepted")
	}
}

// FuzzMNIST checks that the IDX decoder and the MNIST checks never panic
// and that what they accept is consistent.
func FuzzMNIST(f *testing.F) {
	f.Add(idxBytes(0x08, []uint32{2, 2, 2}, []byte{1, 2, 3, 4, 5, 6, 7, 8}), idxBytes(0x08, []uint32{2}, []byte{1, 9}))
	f.Add(gz(idxBytes(0x08, []uint32{1, 1, 3}, []byte{1, 2, 3})), gz(idxBytes(0x08, []uint32{1}, []byte{0})))
	f.Add(idxBytes(0x0B, []uint32{2}, []byte{0xff, 0xfe, 0, 1}), idxBytes(0x0E, []uint32{1}, make([]byte, 8)))
	f.Add(idxBytes(0x08, []uint32{0xffffffff, 0xffff}, nil), []byte{0, 0, 8})
	f.Fuzz(func(t *testing.T, img, lab []byte) {
		ti, err1 := DecodeIDX(bytes.NewReader(img), "img")
		tl, err2 := DecodeIDX(bytes.NewReader(lab), "lab")
		for _, tt := range []*rt.Tensor{ti, tl} {
			if tt != nil {
				if err := tt.Check(); err != nil {
					t.Fatalf("inconsistent tensor: %v", err)
				}
			}
		}
		if err1 != nil || err2 != nil {
			var fe *FormatError
			for _, err := range []error{err1, err2} {
				if err != nil && !errors.As(err, &fe) {
					t.Fatalf("error is not a *FormatError: %v", err)
				}
			}
			return
		}
		d, err := mnistDataset(ti, tl, "img", "lab", 10)
		if err != nil {
			return
		}
		if err := d.CheckLabels(10); err != nil {
			t.Fatalf("accepted labels fail CheckLabels: %v", err)
		}
	})
}

// FuzzCIFAR checks that the CIFAR-10 and CIFAR-100 decoders never panic
// and that what they accept is consistent.
func FuzzCIFAR(f *testing.F) {
	f.Add(cifarRecord([]byte{3}, 1))
	f.Add(cifarRecord([]byte{3, 77}, 2))
	f.Add(append(cifarRecord([]byte{9}, 1), 1, 2, 3))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, lb := range []int{1, 2} {
			x, y, err := decodeCIFAR(b, "batch", lb)
			if err != nil {
				var fe *FormatError
				if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(b)) {
					t.Fatalf("bad error %v", err)
				}
				continue
			}
			if len(x) != len(b)/(3072+lb)*3072 || len(y) != len(b)/(3072+lb)*lb || len(x) == 0 {
				t.Fatalf("%d pixel and %d label bytes from %d bytes", len(x), len(y), len(b))
			}
		}
	})
}
