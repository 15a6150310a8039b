//go:build linux || darwin

package model

import (
	"os"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestMappedFileTruncated checks that a file truncated by another process
// while mapped gives an error while decoding, not a crash (SIGBUS).
func TestMappedFileTruncated(t *testing.T) {
	b := NewBuilder()
	b.Output(b.Op("Add", []string{b.Input("x", rt.U8, 1<<16), b.Weight("w", rt.U8, []int64{1 << 16}, make([]byte, 1<<16))}, nil))
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	path := writeTemp(t, m)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	data, unmap, err := mmapFile(f, st.Size())
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer unmap()
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	_, err = decodeMapped(data, loadOptions(nil))
	if err == nil || !strings.Contains(err.Error(), "fault reading the mapped file") {
		t.Fatalf("got %v", err)
	}
}
