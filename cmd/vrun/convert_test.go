package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConvertONNX(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "onnx", "node", "test_add", "model.onnx")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("vendored case missing: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "add.bin")
	for _, tc := range []struct {
		name string
		args []string
		want string // substring of stdout
		bad  bool
	}{
		{"convert", []string{"convert", src, "-o", bin}, "-> " + bin, false},
		{"run converted", []string{"-device", "cpu", bin}, "output", false},
		{"run onnx directly", []string{"-device", "cpu", src}, "output", false},
		{"info onnx", []string{"info", "-device", "cpu", src}, "nodes    1: Add", false},
		{"convert needs a file", []string{"convert"}, "", true},
		{"convert of a missing file", []string{"convert", filepath.Join(dir, "none.onnx"), "-o", bin}, "", true},
	} {
		var out, errb bytes.Buffer
		err := run(tc.args, &out, &errb)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: output %q lacks %q", tc.name, out.String(), tc.want)
		}
	}
}
