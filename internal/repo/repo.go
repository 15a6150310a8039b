package repo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Path returns the absolute path of rel (slash-separated, relative to the
// module root): next to this source file when that tree exists, else in
// the first directory at or above the working directory with a go.mod.
func Path(rel string) (string, error) {
	rel = filepath.FromSlash(rel)
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", "..", rel)
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			p := filepath.Join(d, rel)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("repo: %s not found under module root %s", rel, d)
			}
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("repo: cannot find %s: no go.mod at or above %s", rel, wd)
		}
	}
}

// LoadJSON decodes the JSON file rel (as Path) into a new T: the
// manifests of the reference data sets.
func LoadJSON[T any](rel string) (*T, error) {
	p, err := Path(rel)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	return v, nil
}
