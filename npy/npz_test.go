package npy

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestReadNPZNumPy reads archives written by numpy.savez and
// numpy.savez_compressed (testdata/*.npz) and checks the values NumPy
// stored.
func TestReadNPZNumPy(t *testing.T) {
	x := make([]float64, 12)
	for i := range x {
		x[i] = float64(i) / 4
	}
	for _, tc := range []struct {
		file string
		want map[string]*rt.Tensor
	}{
		{"xy_stored.npz", map[string]*rt.Tensor{"x": rt.FromFloat64(rt.F32, x, 3, 4), "y": rt.FromFloat64(rt.I64, []float64{2, 0, 1}, 3)}},
		{"xy_deflated.npz", map[string]*rt.Tensor{"x": rt.FromFloat64(rt.F32, x, 3, 4), "y": rt.FromFloat64(rt.I64, []float64{2, 0, 1}, 3)}},
		{"positional.npz", map[string]*rt.Tensor{"arr_0": rt.FromFloat64(rt.F64, []float64{1.5, -2}, 1, 2), "arr_1": rt.FromFloat64(rt.Bool, []float64{1, 0}, 2)}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ReadNPZFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d arrays, want %d", len(got), len(tc.want))
			}
			for name, w := range tc.want {
				if g := got[name]; g == nil || !sameTensor(g, w) {
					t.Errorf("%s = %+v, want %+v", name, g, w)
				}
			}
		})
	}
}

func TestNPZRoundTrip(t *testing.T) {
	arrays := map[string]*rt.Tensor{}
	for i, dt := range allDTypes {
		arrays[fmt.Sprint("a", i)] = sample(dt, 2, 3)
	}
	arrays["scalar"] = sample(rt.F64)
	arrays["empty"] = sample(rt.F32, 0, 4)
	for _, compress := range []bool{false, true} {
		var buf bytes.Buffer
		if err := WriteNPZ(&buf, arrays, compress); err != nil {
			t.Fatal(err)
		}
		got, err := ReadNPZ(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(arrays) {
			t.Fatalf("compress=%v: %d arrays, want %d", compress, len(got), len(arrays))
		}
		for name, w := range arrays {
			if !sameTensor(got[name], w) {
				t.Errorf("compress=%v: %s differs", compress, name)
			}
		}
	}
}

func zipOf(t testing.TB, members map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, b := range members {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadNPZErrors(t *testing.T) {
	good, err := os.ReadFile("testdata/xy_stored.npz")
	if err != nil {
		t.Fatal(err)
	}
	var arr bytes.Buffer
	Write(&arr, sample(rt.F32, 2))
	for _, tc := range []struct {
		name string
		b    []byte
		want string
		is   error
	}{
		{"empty", nil, "not a .npz", ErrNotNPZ},
		{"npy not npz", arr.Bytes(), "not a .npz", ErrNotNPZ},
		{"truncated", good[:len(good)-30], "not a .npz", ErrNotNPZ},
		{"not npy member", zipOf(t, map[string][]byte{"readme.txt": []byte("hi")}), `"readme.txt" (byte offset`, ErrUnsupported},
		{"bad member", zipOf(t, map[string][]byte{"x.npy": []byte("garbage")}), `"x.npy" (byte offset 35)`, ErrNotNPY},
		{"short member", zipOf(t, map[string][]byte{"x.npy": arr.Bytes()[:arr.Len()-1]}), `member "x.npy"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadNPZ(bytes.NewReader(tc.b), int64(len(tc.b)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want errors.Is %v", err, tc.is)
			}
		})
	}
	// A file error names the file.
	p := filepath.Join(t.TempDir(), "bad.npz")
	os.WriteFile(p, good[:100], 0o644)
	if _, err := ReadNPZFile(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want the path", err)
	}
}

// TestNumPyReadsOurNPZ checks that numpy.load reads WriteNPZ's archives.
func TestNumPyReadsOurNPZ(t *testing.T) {
	py := numpyPython(t)
	dir := t.TempDir()
	arrays := map[string]*rt.Tensor{
		"x": rt.FromFloat64(rt.F32, []float64{1, 2.5, -3, 4, 5, 6}, 2, 3),
		"y": rt.FromFloat64(rt.I64, []float64{7, -1}, 2),
	}
	for _, compress := range []bool{false, true} {
		p := filepath.Join(dir, fmt.Sprint(compress, ".npz"))
		if err := WriteNPZFile(p, arrays, compress); err != nil {
			t.Fatal(err)
		}
		script := `
import numpy as np, sys
z = np.load(sys.argv[1], allow_pickle=False)
assert sorted(z.files) == ['x', 'y'], z.files
assert z['x'].dtype == np.float32 and z['x'].shape == (2, 3)
assert np.array_equal(z['x'], np.array([[1, 2.5, -3], [4, 5, 6]], np.float32))
assert z['y'].dtype == np.int64 and list(z['y']) == [7, -1]
print('ok')
`
		if out, err := exec.Command(py, "-c", script, p).CombinedOutput(); err != nil {
			t.Fatalf("numpy: %v\n%s", err, out)
		}
	}
}

// FuzzNPZ checks that ReadNPZ never panics on arbitrary input and that
// what it accepts writes and reads back the same.
func FuzzNPZ(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.npz")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	var buf bytes.Buffer
	WriteNPZ(&buf, map[string]*rt.Tensor{"a": sample(rt.I32, 3), "b": sample(rt.F16, 2, 1)}, true)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		arrays, err := ReadNPZ(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for name, a := range arrays {
			if err := a.Check(); err != nil {
				t.Fatalf("%s: inconsistent tensor: %v", name, err)
			}
		}
		var out bytes.Buffer
		if err := WriteNPZ(&out, arrays, false); err != nil {
			// Names numpy cannot round-trip (empty) are the only excuse.
			if _, ok := arrays[""]; ok {
				return
			}
			t.Fatalf("WriteNPZ of read arrays: %v", err)
		}
		again, err := ReadNPZ(bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		for name, a := range arrays {
			if !sameTensor(a, again[name]) {
				t.Fatalf("%s differs after a round trip", name)
			}
		}
	})
}
