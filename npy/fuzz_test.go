package npy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead checks that Read never panics or over-allocates on arbitrary
// input, that what it accepts is a consistent tensor, and that Write then
// Read reproduces it exactly.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.npy")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, h := range []string{
		"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1), }",
		"{'descr': '>u2', 'fortran_order': False, 'shape': (3L,)}",
		"{'descr': '|?', 'fortran_order': True, 'shape': (1, 2)}",
		"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}",
		"{'descr': '<u8', 'fortran_order': False, 'shape': (1_0,)}",
		"{'descr': \"<i\\x38\", 'fortran_order': False, 'shape': ((1),)}",
	} {
		f.Add(raw(h, make([]byte, 24)))
	}
	f.Add([]byte(Magic + "\x03\x00\x04\x00\x00\x00{}  "))
	f.Fuzz(func(t *testing.T, b []byte) {
		tt, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		if err := tt.Check(); err != nil {
			t.Fatalf("Read returned an inconsistent tensor: %v", err)
		}
		if len(tt.Data) > len(b) {
			// Only widening conversions (i2/u2 -> i32, u4 -> i64) may
			// grow the data, by at most a factor of 2.
			if len(tt.Data) > 2*len(b) {
				t.Fatalf("%d data bytes from a %d-byte input", len(tt.Data), len(b))
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, tt); err != nil {
			t.Fatalf("Write of a read tensor: %v", err)
		}
		t2, err := Read(&buf)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if !sameTensor(tt, t2) {
			t.Fatalf("re-read differs")
		}
	})
}
