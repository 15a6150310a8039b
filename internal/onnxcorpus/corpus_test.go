package onnxcorpus

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/vrun-go/vrun/model/onnx"
)

var (
	corpusOnce sync.Once
	corpus     *Corpus
	corpusErr  error
	corpusPath string
)

// loadCorpus opens the node-test corpus once per test binary, or skips.
func loadCorpus(t testing.TB) *Corpus {
	t.Helper()
	p, ok := Find()
	if !ok {
		t.Skipf("ONNX node-test corpus not found at %s (set %s to its .tgz)", p, Env)
	}
	corpusOnce.Do(func() { corpusPath = p; corpus, corpusErr = Open(p) })
	if corpusErr != nil {
		t.Fatal(corpusErr)
	}
	return corpus
}

// category reduces an error to a grouping key.
func category(err error) []string {
	var ue *onnx.UnsupportedError
	if errors.As(err, &ue) {
		seen := map[string]bool{}
		var out []string
		for _, u := range ue.Items {
			r := reQuoted.ReplaceAllString(u.Reason, "X")
			if strings.Contains(u.Op, "/") {
				r = "domain " + u.Op[:strings.LastIndex(u.Op, "/")]
			}
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
		return out
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && errors.Is(err, onnx.ErrUnsupported) {
		s = "unsupported " + s[i+2:]
	}
	return []string{reNum.ReplaceAllString(reQuoted.ReplaceAllString(s, "%q"), "N")}
}

// TestCorpusImport imports every model of the corpus with all operators
// accepted and prints how many import, grouped by failure reason. Only a
// panic or an error that is not ErrUnsupported fails it: the corpus models
// are valid ONNX.
func TestCorpusImport(t *testing.T) {
	c := loadCorpus(t)
	ok := 0
	groups := map[string][]string{}
	for _, cs := range c.Cases {
		m, err := func() (m any, err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("PANIC: %v", r)
				}
			}()
			return onnx.Import(cs.ModelBytes, onnx.Options{})
		}()
		_ = m
		if err == nil {
			ok++
			continue
		}
		if !errors.Is(err, onnx.ErrUnsupported) {
			t.Errorf("%s: unexpected error: %v", cs.Name, err)
			continue
		}
		for _, k := range category(err) {
			groups[k] = append(groups[k], cs.Name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d models import\n", corpusPath, ok, len(c.Cases))
	writeGroups(&b, byCount(groups), groups)
	t.Log(b.String())
}

// TestCorpusData checks that the test data of every case decodes, or fails
// only for an unsupported value type.
func TestCorpusData(t *testing.T) {
	c := loadCorpus(t)
	ok, sets := 0, 0
	groups := map[string]int{}
	for _, cs := range c.Cases {
		if cs.DataErr != nil {
			if !errors.Is(cs.DataErr, onnx.ErrUnsupported) {
				t.Errorf("%s: %v", cs.Name, cs.DataErr)
			}
			groups[category(cs.DataErr)[0]]++
			continue
		}
		ok++
		sets += len(cs.DataSets)
		for _, ds := range cs.DataSets {
			for name, x := range ds.Inputs {
				if err := x.Check(); err != nil {
					t.Errorf("%s: input %s: %v", cs.Name, name, err)
				}
			}
		}
	}
	t.Logf("%d of %d cases have decodable data (%d data sets); failures: %v", ok, len(c.Cases), sets, groups)
}
