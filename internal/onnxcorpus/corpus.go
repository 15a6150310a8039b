package onnxcorpus

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/model/onnx/onnxpb"
	"github.com/vrun-go/vrun/rt"
)

// Env is the environment variable that overrides the location of the
// ONNX backend node-test corpus (see [Find]).
const Env = "VRUN_ONNX_CORPUS"

// Find returns the path of the ONNX node-test corpus .tgz: $VRUN_ONNX_CORPUS
// if set, else ../shared/onnx-node-tests.tgz relative to the root of the
// module containing the working directory. ok is false when the file does
// not exist (tests should then skip, quoting path).
func Find() (path string, ok bool) {
	if p := os.Getenv(Env); p != "" {
		_, err := os.Stat(p)
		return p, err == nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "../shared/onnx-node-tests.tgz", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "../shared/onnx-node-tests.tgz", false
		}
		dir = up
	}
	p := filepath.Join(dir, "..", "shared", "onnx-node-tests.tgz")
	_, err = os.Stat(p)
	return p, err == nil
}

// Corpus is the ONNX backend node-test corpus: one case per directory,
// each a model.onnx and test_data_set_N/{input,output}_K.pb files.
type Corpus struct {
	Cases []*Case // sorted by name
}

// Case is one test case of the corpus.
type Case struct {
	Name       string // directory name, e.g. "test_add_bcast"
	ModelBytes []byte // the serialized model.onnx
	// DataSets holds the decoded test data sets in order. It is nil when
	// DataErr is set.
	DataSets []DataSet
	// DataErr says why the test data could not be decoded: a malformed
	// model (errors.Is onnx.ErrInvalid), a non-tensor value (sequence,
	// optional, map), or a tensor of a type rt.Tensor cannot hold (errors.Is
	// onnx.ErrUnsupported).
	DataErr error
}

// DataSet is one test_data_set_N: the inputs to feed and the expected
// outputs, keyed by the model's graph input and output names.
type DataSet struct {
	Inputs      map[string]*rt.Tensor
	Outputs     map[string]*rt.Tensor
	InputNames  []string // names of Inputs in input_K order
	OutputNames []string // names of Outputs in output_K order
}

// Case returns the case with the given name, or nil.
func (c *Corpus) Case(name string) *Case {
	i := sort.Search(len(c.Cases), func(i int) bool { return c.Cases[i].Name >= name })
	if i < len(c.Cases) && c.Cases[i].Name == name {
		return c.Cases[i]
	}
	return nil
}

type rawCase struct {
	model []byte
	sets  map[int]*rawSet
}

type rawSet struct {
	in, out map[int][]byte
}

// Open reads the node-test corpus from a .tgz directly (no unpacking).
// Entries look like [prefix/]<case>/model.onnx and
// [prefix/]<case>/test_data_set_<N>/{input,output}_<K>.pb; other files are
// ignored. Only a broken archive is an error: a case whose data cannot be
// decoded gets Case.DataErr.
func Open(tgzPath string) (*Corpus, error) {
	f, err := os.Open(tgzPath)
	if err != nil {
		return nil, fmt.Errorf("onnx corpus: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("onnx corpus %s: %w", tgzPath, err)
	}
	defer zr.Close()
	cases := map[string]*rawCase{}
	get := func(name string) *rawCase {
		c := cases[name]
		if c == nil {
			c = &rawCase{sets: map[int]*rawSet{}}
			cases[name] = c
		}
		return c
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("onnx corpus %s: %w", tgzPath, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		parts := strings.Split(path.Clean(h.Name), "/")
		var caseName string
		var set, idx int
		var isIn bool
		switch {
		case len(parts) >= 2 && parts[len(parts)-1] == "model.onnx":
			caseName = parts[len(parts)-2]
			set = -1
		case len(parts) >= 3 && strings.HasPrefix(parts[len(parts)-2], "test_data_set_") && strings.HasSuffix(parts[len(parts)-1], ".pb"):
			caseName = parts[len(parts)-3]
			set, err = strconv.Atoi(strings.TrimPrefix(parts[len(parts)-2], "test_data_set_"))
			if err != nil {
				continue
			}
			base := strings.TrimSuffix(parts[len(parts)-1], ".pb")
			var num string
			switch {
			case strings.HasPrefix(base, "input_"):
				isIn, num = true, strings.TrimPrefix(base, "input_")
			case strings.HasPrefix(base, "output_"):
				num = strings.TrimPrefix(base, "output_")
			default:
				continue
			}
			if idx, err = strconv.Atoi(num); err != nil {
				continue
			}
		default:
			continue
		}
		if h.Size > 1<<30 {
			return nil, fmt.Errorf("onnx corpus %s: %s is too large (%d bytes)", tgzPath, h.Name, h.Size)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("onnx corpus %s: %s: %w", tgzPath, h.Name, err)
		}
		c := get(caseName)
		if set < 0 {
			c.model = data
			continue
		}
		s := c.sets[set]
		if s == nil {
			s = &rawSet{in: map[int][]byte{}, out: map[int][]byte{}}
			c.sets[set] = s
		}
		if isIn {
			s.in[idx] = data
		} else {
			s.out[idx] = data
		}
	}
	corpus := &Corpus{}
	for name, rc := range cases {
		if rc.model != nil {
			corpus.add(name, rc)
		}
	}
	corpus.sort()
	return corpus, nil
}

// add decodes a case's data sets and appends the case.
func (c *Corpus) add(name string, rc *rawCase) {
	cs := &Case{Name: name, ModelBytes: rc.model}
	cs.DataSets, cs.DataErr = decodeSets(rc)
	if cs.DataErr != nil {
		cs.DataSets = nil
	}
	c.Cases = append(c.Cases, cs)
}

// sort orders the cases by name, as [Corpus.Case] needs.
func (c *Corpus) sort() {
	sort.Slice(c.Cases, func(i, j int) bool { return c.Cases[i].Name < c.Cases[j].Name })
}

// valueNames returns the graph's non-initializer inputs and its outputs,
// with an error for non-tensor values.
func valueNames(mp *onnxpb.ModelProto) (ins, outs []string, err error) {
	g := mp.GetGraph()
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	check := func(vi *onnxpb.ValueInfoProto) error {
		if t := vi.GetType(); t != nil && t.GetTensorType() == nil {
			return fmt.Errorf("%w: value %q is %s", onnx.ErrUnsupported, vi.GetName(), valueKind(t))
		}
		return nil
	}
	for _, vi := range g.GetInput() {
		if inits[vi.GetName()] {
			continue
		}
		if err := check(vi); err != nil {
			return nil, nil, err
		}
		ins = append(ins, vi.GetName())
	}
	for _, vi := range g.GetOutput() {
		if err := check(vi); err != nil {
			return nil, nil, err
		}
		outs = append(outs, vi.GetName())
	}
	return ins, outs, nil
}

// valueKinds names the non-tensor members of TypeProto's value oneof.
var valueKinds = map[protoreflect.Name]string{
	"sequence_type":      "a sequence",
	"map_type":           "a map",
	"optional_type":      "an optional",
	"sparse_tensor_type": "a sparse tensor",
	"opaque_type":        "an opaque value",
}

// valueKind says what kind of value a non-tensor type is.
func valueKind(t *onnxpb.TypeProto) string {
	m := t.ProtoReflect()
	if f := m.WhichOneof(m.Descriptor().Oneofs().ByName("value")); f != nil {
		if k, ok := valueKinds[f.Name()]; ok {
			return k
		}
	}
	return "a value of unknown type"
}

// decodeSets decodes the data sets of a case against its model's graph
// inputs and outputs.
func decodeSets(rc *rawCase) ([]DataSet, error) {
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(rc.model, &mp); err != nil {
		return nil, fmt.Errorf("%w: model: %v", onnx.ErrInvalid, err)
	}
	ins, outs, err := valueNames(&mp)
	if err != nil {
		return nil, err
	}
	var ids []int
	for k := range rc.sets {
		ids = append(ids, k)
	}
	sort.Ints(ids)
	var sets []DataSet
	for _, id := range ids {
		rs := rc.sets[id]
		ds := DataSet{Inputs: map[string]*rt.Tensor{}, Outputs: map[string]*rt.Tensor{}}
		for _, part := range []struct {
			files map[int][]byte
			names []string
			dst   map[string]*rt.Tensor
			order *[]string
			what  string
		}{
			{rs.in, ins, ds.Inputs, &ds.InputNames, "input"},
			{rs.out, outs, ds.Outputs, &ds.OutputNames, "output"},
		} {
			for k := 0; k < len(part.files); k++ {
				b, ok := part.files[k]
				if !ok {
					return nil, fmt.Errorf("%w: test_data_set_%d: %s_%d.pb missing", onnx.ErrInvalid, id, part.what, k)
				}
				if k >= len(part.names) {
					return nil, fmt.Errorf("%w: test_data_set_%d: %s_%d.pb but the graph has %d %ss", onnx.ErrInvalid, id, part.what, k, len(part.names), part.what)
				}
				var tp onnxpb.TensorProto
				if err := proto.Unmarshal(b, &tp); err != nil {
					return nil, fmt.Errorf("%w: test_data_set_%d/%s_%d.pb: %v", onnx.ErrInvalid, id, part.what, k, err)
				}
				t, err := onnx.DecodeTensor(&tp, "")
				if err != nil {
					return nil, fmt.Errorf("test_data_set_%d/%s_%d.pb: %w", id, part.what, k, err)
				}
				name := part.names[k]
				part.dst[name] = t
				*part.order = append(*part.order, name)
			}
		}
		sets = append(sets, ds)
	}
	if len(sets) == 0 {
		return nil, errors.New("no test data sets")
	}
	return sets, nil
}
