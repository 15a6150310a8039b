package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestCommandHelper is the process of onnxtest: main with the arguments
// in $VRUN_ONNXTEST_ARGS.
func TestCommandHelper(t *testing.T) {
	if os.Getenv("VRUN_ONNXTEST_HELPER") != "1" {
		t.Skip("runs only as onnxtest's process")
	}
	os.Args = append([]string{"vrun-onnxtest"}, strings.Split(os.Getenv("VRUN_ONNXTEST_ARGS"), "\x1f")...)
	main()
	os.Exit(0)
}

func onnxtest(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommandHelper$")
	cmd.Env = append(os.Environ(), "VRUN_ONNXTEST_HELPER=1", "VRUN_ONNXTEST_ARGS="+strings.Join(args, "\x1f"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// The README's `go run ./cmd/vrun-onnxtest -device vulkan` runs the corpus
// on Vulkan (every backend is compiled in), here on a few vendored cases;
// and on the CPU.
func TestDocumentedCommand(t *testing.T) {
	corpus := filepath.Join("..", "..", "testdata", "onnx", "node")
	for _, device := range []string{"vulkan", "cpu"} {
		t.Run(device, func(t *testing.T) {
			if d, err := rt.Open(device, nil); err != nil {
				if errors.Is(err, rt.ErrUnavailable) {
					t.Skip(err)
				}
				if strings.Contains(err.Error(), "unknown backend") {
					t.Fatalf("%s is not compiled in: %v", device, err)
				}
				t.Skip(err)
			} else {
				d.Close()
			}
			out, code := onnxtest(t, "-device", device, "-corpus", corpus, "-run", "^test_(add|relu|softmax_axis_1)$")
			if code != 0 || !strings.Contains(out, "3 passed, 0 failed") {
				t.Errorf("exit %d:\n%s", code, out)
			}
		})
	}
	out, code := onnxtest(t, "-device", "nosuch", "-corpus", corpus)
	if code != 1 || !strings.Contains(out, `unknown backend "nosuch" (compiled in: `) {
		t.Errorf("an unknown backend: exit %d:\n%s", code, out)
	}
}
