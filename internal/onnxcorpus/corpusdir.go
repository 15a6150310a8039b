package onnxcorpus

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OpenDir reads node-test cases from a directory laid out like the
// unpacked corpus: dir/<case>/model.onnx and
// dir/<case>/test_data_set_<N>/{input,output}_<K>.pb. Subdirectories
// without a model.onnx are ignored. As with [Open], a case whose
// data cannot be decoded gets Case.DataErr; only an unreadable directory
// is an error.
func OpenDir(dir string) (*Corpus, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("onnx corpus: %w", err)
	}
	corpus := &Corpus{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		cdir := filepath.Join(dir, e.Name())
		mb, err := os.ReadFile(filepath.Join(cdir, "model.onnx"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("onnx corpus: %w", err)
		}
		rc := &rawCase{model: mb, sets: map[int]*rawSet{}}
		sub, err := os.ReadDir(cdir)
		if err != nil {
			return nil, fmt.Errorf("onnx corpus: %w", err)
		}
		for _, s := range sub {
			num, ok := strings.CutPrefix(s.Name(), "test_data_set_")
			if !s.IsDir() || !ok {
				continue
			}
			id, err := strconv.Atoi(num)
			if err != nil {
				continue
			}
			files, err := os.ReadDir(filepath.Join(cdir, s.Name()))
			if err != nil {
				return nil, fmt.Errorf("onnx corpus: %w", err)
			}
			rs := &rawSet{in: map[int][]byte{}, out: map[int][]byte{}}
			for _, f := range files {
				base, ok := strings.CutSuffix(f.Name(), ".pb")
				if !ok {
					continue
				}
				dst := rs.out
				num, isIn := strings.CutPrefix(base, "input_")
				if isIn {
					dst = rs.in
				} else if num, ok = strings.CutPrefix(base, "output_"); !ok {
					continue
				}
				k, err := strconv.Atoi(num)
				if err != nil {
					continue
				}
				b, err := os.ReadFile(filepath.Join(cdir, s.Name(), f.Name()))
				if err != nil {
					return nil, fmt.Errorf("onnx corpus: %w", err)
				}
				dst[k] = b
			}
			rc.sets[id] = rs
		}
		corpus.add(e.Name(), rc)
	}
	corpus.sort()
	return corpus, nil
}
