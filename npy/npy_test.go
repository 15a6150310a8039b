package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

var allDTypes = []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64, rt.U8, rt.I8, rt.Bool}

// sample makes a tensor of dt with distinctive values.
func sample(dt rt.DType, shape ...int) *rt.Tensor {
	t, err := rt.NewTensor(dt, shape...)
	if err != nil {
		panic(err)
	}
	for i := 0; i < t.Len(); i++ {
		v := float64(i%7) - 3.25
		switch {
		case dt == rt.Bool:
			v = float64(i % 2)
		case dt == rt.U8:
			v = float64(i * 37 % 256)
		case dt.IsInt():
			v = float64((i*37)%200 - 100)
		}
		t.SetFloat64(i, v)
	}
	return t
}

func sameTensor(a, b *rt.Tensor) bool {
	return a.DType == b.DType && reflect.DeepEqual(append([]int{}, a.Shape...), append([]int{}, b.Shape...)) &&
		bytes.Equal(a.Data, b.Data)
}

func TestRoundTrip(t *testing.T) {
	shapes := [][]int{{}, {0}, {1}, {5}, {2, 3}, {3, 1, 4}, {2, 0, 3}, {1, 2, 3, 2, 1}}
	for _, dt := range allDTypes {
		for _, sh := range shapes {
			t.Run(fmt.Sprintf("%s%v", dt, sh), func(t *testing.T) {
				in := sample(dt, sh...)
				var buf bytes.Buffer
				if err := Write(&buf, in); err != nil {
					t.Fatal(err)
				}
				if buf.Len()%64 != int(in.Len()*dt.Size())%64 {
					t.Errorf("header not padded to 64 bytes: total %d", buf.Len())
				}
				out, err := Read(&buf)
				if err != nil {
					t.Fatal(err)
				}
				if !sameTensor(in, out) {
					t.Fatalf("round trip: got %v %v %x, want %v %v %x", out.DType, out.Shape, out.Data, in.DType, in.Shape, in.Data)
				}
				if buf.Len() != 0 {
					t.Errorf("%d bytes left unread", buf.Len())
				}
			})
		}
	}
}

func TestWriteFileReadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.npy")
	in := sample(rt.F32, 4, 5)
	if err := WriteFile(p, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !sameTensor(in, out) {
		t.Fatal("mismatch")
	}
}

func TestConcatenated(t *testing.T) {
	var buf bytes.Buffer
	a, b := sample(rt.I64, 3), sample(rt.F16, 2, 2)
	if err := Write(&buf, a); err != nil {
		t.Fatal(err)
	}
	if err := Write(&buf, b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*rt.Tensor{a, b} {
		got, err := Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !sameTensor(got, want) {
			t.Fatal("mismatch")
		}
	}
}

func f64s(v ...float64) []float64 { return v }

// TestNumPyFiles reads files written by NumPy 1.24 (see testdata/).
func TestNumPyFiles(t *testing.T) {
	cases := []struct {
		file  string
		dt    rt.DType
		shape []int
		vals  []float64
	}{
		{"f32_2x3.npy", rt.F32, []int{2, 3}, f64s(-0.5, -0.25, 0, 0.25, 0.5, 0.75)},
		{"f16_5.npy", rt.F16, []int{5}, f64s(0, 1, -2.5, 65504, math.Inf(1))},
		{"f64_scalar.npy", rt.F64, []int{}, f64s(math.Pi)},
		{"i32_3x1x2.npy", rt.I32, []int{3, 1, 2}, f64s(1, -2, math.MaxInt32, math.MinInt32, 0, 7)},
		{"i64_4.npy", rt.I64, []int{4}, f64s(1<<62, -1, 0, math.MinInt64)},
		{"u8_2x2.npy", rt.U8, []int{2, 2}, f64s(0, 255, 128, 1)},
		{"i8_3.npy", rt.I8, []int{3}, f64s(-128, 127, 0)},
		{"bool_2x2.npy", rt.Bool, []int{2, 2}, f64s(1, 0, 0, 1)},
		{"f32_0x3.npy", rt.F32, []int{0, 3}, f64s()},
		{"f32_be_2x2.npy", rt.F32, []int{2, 2}, f64s(1.5, -2, 3, 4.25)},
		{"i16_3.npy", rt.I32, []int{3}, f64s(-32768, 32767, 5)},
		{"u16_3.npy", rt.I32, []int{3}, f64s(0, 65535, 5)},
		{"u32_2.npy", rt.I64, []int{2}, f64s(0, 1<<32-1)},
		{"f64_v2_3x4.npy", rt.F64, []int{3, 4}, f64s(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)},
		{"i64_v3_2.npy", rt.I64, []int{2}, f64s(5, -6)},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			got, err := ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if got.DType != c.dt || !reflect.DeepEqual(got.Shape, c.shape) {
				t.Fatalf("got %s%v, want %s%v", got.DType, got.Shape, c.dt, c.shape)
			}
			if err := got.Check(); err != nil {
				t.Fatal(err)
			}
			if v := got.Float64s(); !reflect.DeepEqual(v, c.vals) && !(len(v) == 0 && len(c.vals) == 0) {
				t.Fatalf("values %v, want %v", v, c.vals)
			}
		})
	}
	// Exact int64 extremes (float64 would hide low bits).
	got, err := ReadFile("testdata/i64_4.npy")
	if err != nil {
		t.Fatal(err)
	}
	if v := int64(binary.LittleEndian.Uint64(got.Data[24:])); v != math.MinInt64 {
		t.Errorf("i64[3] = %d", v)
	}
}

func TestFortranRejected(t *testing.T) {
	_, err := ReadFile("testdata/f32_fortran_2x3.npy")
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "fortran_order") {
		t.Fatalf("err = %v, want fortran_order ErrUnsupported", err)
	}
}

// raw builds a version 1.0 file from a header and data.
func raw(h string, data []byte) []byte {
	b := []byte(Magic + "\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h)))
	return append(append(b, h...), data...)
}

func TestHeaderVariants(t *testing.T) {
	four := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	ok := []struct {
		h     string
		shape []int
		dt    rt.DType
	}{
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }`, []int{2}, rt.I32},
		{`{"shape":(2,),"fortran_order":False,"descr":"<i4"}` + "\n", []int{2}, rt.I32},
		{"{'descr':'<i4','fortran_order':False,'shape':(2L,)}", []int{2}, rt.I32},
		{"  {'descr': '|u1', 'fortran_order': True, 'shape': (1, 8, 1)}  \n", []int{1, 8, 1}, rt.U8},
		{"{'descr': '<i8', 'fortran_order': False, 'shape': ((1),)}", []int{1}, rt.I64},
		{"{'descr': '<u8', 'fortran_order': False, 'shape': (1,)}", []int{1}, rt.I64},
		{"{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2)}", []int{2, 2}, rt.F16},
		{"{'descr': '|?', 'fortran_order': False, 'shape': (8,)}", []int{8}, rt.Bool},
		{"{'descr': '>i2', 'fortran_order': False, 'shape': (4,)}", []int{4}, rt.I32},
		{"{'descr': '=f4', 'fortran_order': False, 'shape': (2,)}", []int{2}, rt.F32},
	}
	for _, c := range ok {
		got, err := Read(bytes.NewReader(raw(c.h, four)))
		if err != nil {
			t.Errorf("%s: %v", c.h, err)
			continue
		}
		if got.DType != c.dt || !reflect.DeepEqual(got.Shape, c.shape) {
			t.Errorf("%s: got %s%v", c.h, got.DType, got.Shape)
		}
	}
	bad := []struct{ h, want string }{
		{`{'descr': '<i4', 'fortran_order': False}`, "lacks"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'x': 1}`, "unexpected header key"},
		{`{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (2,)}`, "duplicate"},
		{`{'descr': '<i4', 'fortran_order': 0, 'shape': (2,)}`, "not a bool"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': [2]}`, "not a tuple"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (-2,)}`, "bad dimension"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (2.0,)}`, "decimal integers"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,)}`, "out of range"},
		{`{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}`, "unsupported"},
		{`{'descr': '<U3', 'fortran_order': False, 'shape': (1,)}`, "unsupported"},
		{`{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}`, "structured"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2)}`, "needs 16 data bytes"},
		{`{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2)}`, "fortran_order"},
		{`{'descr': __import__('os'), 'fortran_order': False, 'shape': (1,)}`, "unsupported name"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (1,)`, "expected ',' or '}'"},
		{`{'descr': '<i4' 'fortran_order': False, 'shape': (1,)}`, "expected"},
		{`[1, 2]`, "not a dict"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (1,)} x`, "trailing"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (` + strings.Repeat("(", 100) + `1` + strings.Repeat(")", 100) + `,)}`, "nested too deeply"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (01,)}`, "leading zeros"},
		{`{'descr': '<i4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}`, "too large"},
	}
	for _, c := range bad {
		data := four
		_, err := ReadFile(writeTemp(t, raw(c.h, data)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.h, err, c.want)
		}
	}
}

func writeTemp(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "x.npy")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBigEndianAndWidening(t *testing.T) {
	cases := []struct {
		descr string
		data  []byte
		dt    rt.DType
		want  []float64
	}{
		{">f4", []byte{0x3f, 0xc0, 0, 0}, rt.F32, f64s(1.5)},
		{">f8", []byte{0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18}, rt.F64, f64s(math.Pi)},
		{">f2", []byte{0x3c, 0x00}, rt.F16, f64s(1)},
		{">i4", []byte{0xff, 0xff, 0xff, 0xfe}, rt.I32, f64s(-2)},
		{">i8", []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, rt.I64, f64s(math.MinInt64)},
		{"<i2", []byte{0xfe, 0xff}, rt.I32, f64s(-2)},
		{">u2", []byte{0xff, 0xfe}, rt.I32, f64s(65534)},
		{">u4", []byte{0xff, 0xff, 0xff, 0xff}, rt.I64, f64s(1<<32 - 1)},
		{"<u8", []byte{1, 0, 0, 0, 0, 0, 0, 0x7f}, rt.I64, f64s(0x7f00000000000001)},
		{">b1", []byte{7}, rt.Bool, f64s(1)},
		{"|i1", []byte{0xff}, rt.I8, f64s(-1)},
	}
	for _, c := range cases {
		h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (1,)}", c.descr)
		got, err := Read(bytes.NewReader(raw(h, c.data)))
		if err != nil {
			t.Errorf("%s: %v", c.descr, err)
			continue
		}
		if got.DType != c.dt || !reflect.DeepEqual(got.Float64s(), c.want) {
			t.Errorf("%s: got %s %v, want %s %v", c.descr, got.DType, got.Float64s(), c.dt, c.want)
		}
	}
	h := "{'descr': '<u8', 'fortran_order': False, 'shape': (1,)}"
	if _, err := Read(bytes.NewReader(raw(h, []byte{0, 0, 0, 0, 0, 0, 0, 0x80}))); !errors.Is(err, ErrUnsupported) {
		t.Errorf("u8 overflow: err = %v", err)
	}
}

func TestBadPreamble(t *testing.T) {
	for _, c := range []struct {
		in   string
		want error
	}{
		{"", ErrNotNPY},
		{"\x93NUM", ErrNotNPY},
		{"PK\x03\x04zipzip", ErrNotNPY},
		{Magic + "\x04\x00\x00\x00", ErrUnsupported},
		{Magic + "\x01\x00\x10", io.ErrUnexpectedEOF},
		{Magic + "\x01\x00\x10\x00{'de", io.ErrUnexpectedEOF},
		{Magic + "\x02\x00\xff\xff\xff\xff", nil},
	} {
		_, err := Read(strings.NewReader(c.in))
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%q: err = %v, want %v", c.in, err, c.want)
		}
	}
}

// TestHugeShapeShortStream checks that a header claiming gigabytes backed by
// a few bytes fails without allocating the claimed size.
func TestHugeShapeShortStream(t *testing.T) {
	h := "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 100000)}"
	b := raw(h, make([]byte, 100))
	if _, err := Read(bytes.NewReader(b)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v", err)
	}
	var ms1, ms2 runtimeMem
	ms1.read()
	for i := 0; i < 3; i++ {
		Read(bytes.NewReader(b))
	}
	ms2.read()
	if d := ms2.total - ms1.total; d > 64<<20 {
		t.Errorf("allocated %d bytes for a 100-byte payload", d)
	}
}

func TestWriteErrors(t *testing.T) {
	if err := Write(io.Discard, &rt.Tensor{DType: rt.F32, Shape: []int{2}, Data: make([]byte, 7)}); err == nil {
		t.Error("short data accepted")
	}
	if err := Write(io.Discard, &rt.Tensor{DType: rt.InvalidDType, Shape: []int{0}}); err == nil {
		t.Error("invalid dtype accepted")
	}
	if err := Write(io.Discard, nil); err == nil {
		t.Error("nil accepted")
	}
}

func TestBoolNormalised(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, &rt.Tensor{DType: rt.Bool, Shape: []int{2}, Data: []byte{0, 9}}); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, []byte{0, 1}) {
		t.Fatalf("got %v", got.Data)
	}
}

func TestVersion2Header(t *testing.T) {
	// A rank-30000 shape of ones needs a header over 64 KiB: format 2.0.
	shape := make([]int, 30000)
	for i := range shape {
		shape[i] = 1
	}
	in := sample(rt.F32, shape...)
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	if buf.Bytes()[6] != 2 {
		t.Fatalf("version %d, want 2", buf.Bytes()[6])
	}
	if buf.Len()%64 != 4 {
		t.Errorf("preamble not aligned: %d", buf.Len())
	}
	// It exceeds MaxHeaderLen, so Read refuses it with a clear error.
	if _, err := Read(&buf); err == nil || !strings.Contains(err.Error(), "header length") {
		t.Fatalf("err = %v", err)
	}
}

func numpyPython(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no %s: cannot cross-check with NumPy", py)
	}
	if out, err := exec.Command(py, "-c", "import numpy").CombinedOutput(); err != nil {
		t.Skipf("%s has no numpy (%v: %s): cannot cross-check with NumPy", py, err, bytes.TrimSpace(out))
	}
	return py
}

// TestNumPyReadsOurFiles writes every dtype with Write and checks that
// NumPy loads the same dtype, shape and values.
func TestNumPyReadsOurFiles(t *testing.T) {
	py := numpyPython(t)
	dir := t.TempDir()
	var lines []string
	for _, dt := range allDTypes {
		for _, sh := range [][]int{{}, {3}, {2, 0}, {2, 3, 1}} {
			in := sample(dt, sh...)
			name := fmt.Sprintf("%s_%d.npy", dt, len(lines))
			if err := WriteFile(filepath.Join(dir, name), in); err != nil {
				t.Fatal(err)
			}
			descr, _ := descrOf(dt)
			vals := make([]string, in.Len())
			for i, v := range in.Float64s() {
				vals[i] = fmt.Sprint(v)
				if math.IsInf(v, 0) || math.IsNaN(v) {
					vals[i] = fmt.Sprintf("float('%v')", v)
				}
			}
			shape := "("
			for _, d := range sh {
				shape += fmt.Sprint(d) + ","
			}
			shape += ")"
			lines = append(lines, fmt.Sprintf("check(%q, %q, %s, [%s])", name, descr, shape, strings.Join(vals, ",")))
		}
	}
	script := `
import numpy as np, sys, os
os.chdir(sys.argv[1])
def check(name, descr, shape, vals):
    a = np.load(name, allow_pickle=False)
    assert a.dtype == np.dtype(descr), (name, a.dtype, descr)
    assert a.shape == shape, (name, a.shape, shape)
    assert a.flags.c_contiguous
    want = np.array(vals, dtype=np.float64).reshape(shape)
    assert np.array_equal(a.astype(np.float64), want), (name, a, want)
` + strings.Join(lines, "\n") + "\nprint('ok', " + fmt.Sprint(len(lines)) + ")\n"
	out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy check failed: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}
