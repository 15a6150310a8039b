package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.bin")
	if err := WriteBytes(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(p, []byte("two")); err != nil { // replaces
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two" {
		t.Fatalf("read %q, %v; want \"two\"", b, err)
	}
	if fi, _ := os.Stat(p); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	// A failed write leaves the old file and no temporary behind.
	boom := errors.New("boom")
	if err := Write(p, func(w io.Writer) error { w.Write([]byte("partial")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Errorf("after a failed write the file holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the folder, want 1 (no temporary left)", len(ents))
	}
	if err := WriteBytes(filepath.Join(dir, "no", "such", "dir"), nil); err == nil {
		t.Errorf("writing into a missing folder: no error")
	}
}
