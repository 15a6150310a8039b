//go:build cgo

package vulkan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/shaders"
)

// TestSPVOverride checks that VRUN_VK_SPV replaces an embedded variant by
// DIR/NAME.spv, leaves the others alone, and still validates the blob.
func TestSPVOverride(t *testing.T) {
	const name = "fill_b4"
	emb, ok := shaders.SPIRV(name)
	if !ok {
		t.Fatalf("no embedded %s", name)
	}
	other, ok := shaders.SPIRV("copy_b4")
	if !ok {
		t.Fatal("no embedded copy_b4")
	}
	dir := t.TempDir()
	t.Setenv(spvOverride, dir)
	words := func(b []byte) []uint32 {
		w := make([]uint32, len(b)/4)
		for i := range w {
			w[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
		}
		return w
	}
	got, err := spirv(name)
	if err != nil || !slices.Equal(got, words(emb)) {
		t.Fatalf("no override file: got %d words, %v; want the embedded blob", len(got), err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".spv"), other, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err = spirv(name); err != nil || !slices.Equal(got, words(other)) {
		t.Fatalf("override: got %d words, %v; want the file's", len(got), err)
	}
	if err := os.WriteFile(filepath.Join(dir, "only_here.spv"), other, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = spirv("only_here"); err != nil {
		t.Fatalf("a variant only in the folder: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".spv"), []byte("not spir-v at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = spirv(name); err == nil || !strings.Contains(err.Error(), "not valid SPIR-V") {
		t.Fatalf("a bad file: err %v, want not valid SPIR-V", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir.spv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err = spirv("adir"); err == nil || !strings.Contains(err.Error(), spvOverride) {
		t.Fatalf("an unreadable file: err %v, want an error naming %s", err, spvOverride)
	}
}
