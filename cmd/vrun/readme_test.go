package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/rt"
)

// Every command of the README's "The command" block runs as written, with
// its placeholder files (m.bin, model.onnx, in.npy, out/) replaced by test
// files. vrun train's commands are tested in train_test.go; `go run
// ./cmd/vrun-onnxtest -device vulkan` in cmd/vrun-onnxtest.
func TestREADMECommands(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "## The command\n\n```text\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README has no command block under \"## The command\"")
	}
	dir := t.TempDir()
	onnxModel := filepath.Join(dir, "model.onnx")
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "onnx", "node", "test_add", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(onnxModel, src, 0o644); err != nil {
		t.Fatal(err)
	}
	vulkan := true
	if d, err := rt.Open("vulkan", nil); err != nil {
		vulkan = false
		if !errors.Is(err, rt.ErrUnavailable) {
			t.Logf("vulkan: %v", err)
		}
	} else {
		d.Close()
	}
	n := 0
	for _, line := range strings.Split(block, "\n") {
		cmd, _, _ := strings.Cut(line, "  ") // the description follows two spaces
		fields := strings.Fields(cmd)
		if len(fields) == 0 || fields[0] != "vrun" || (len(fields) > 1 && fields[1] == "train") {
			continue
		}
		n++
		args := fields[1:]
		convert := len(args) > 0 && args[0] == "convert"
		for i, a := range args {
			switch {
			case a == "m.bin" && convert:
				args[i] = filepath.Join(dir, "converted.bin")
			case a == "m.bin" || a == "model.bin":
				args[i] = filepath.Join(e2e.Dir(), "mlp.bin")
			case a == "m.onnx" || a == "model.onnx":
				args[i] = onnxModel
			case a == "x=in.npy":
				args[i] = "x=" + filepath.Join(e2e.Dir(), "mlp", "x.npy")
			case a == "out/":
				args[i] = filepath.Join(dir, "out")
			case a == "vulkan" && i > 0 && args[i-1] == "-device" && !vulkan:
				args[i] = "cpu"
			}
		}
		t.Run(cmd, func(t *testing.T) {
			var out, errb bytes.Buffer
			if err := run(args, &out, &errb); err != nil {
				t.Fatalf("%v: %v\n%s%s", args, err, out.String(), errb.String())
			}
			if out.Len() == 0 {
				t.Errorf("%v printed nothing", args)
			}
		})
	}
	if n < 10 {
		t.Errorf("found %d commands in the README's block, want at least 10", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "converted.bin")); err != nil {
		t.Errorf("convert wrote nothing: %v", err)
	}
}
