package onnxcorpus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/model/onnx/onnxpb"
	"github.com/vrun-go/vrun/rt"
)

// Tolerances for float outputs. F16 outputs get a relative tolerance of
// a few f16 ulps (its epsilon is 2^-10), since a reordered f16 sum may
// round differently from the exporter's reference.
const (
	Rtol    = 1e-3
	Atol    = 1e-5
	RtolF16 = 1.0 / 256
)

// Status is the outcome of one case.
type Status int

// Outcomes.
const (
	Pass Status = iota
	Fail
	Skip
)

func (s Status) String() string {
	switch s {
	case Pass:
		return "pass"
	case Fail:
		return "FAIL"
	}
	return "skip"
}

// Result is the outcome of one case.
type Result struct {
	Case   string
	Status Status
	// Reason says why a case failed or was skipped.
	Reason string
	// Groups are the skip reasons reduced to grouping keys ("unsupported
	// op LSTM", "subgraphs", ...); a case may have several.
	Groups []string
	// Ops are the ONNX operator types of the case's graph.
	Ops []string
	// Bound names the graph inputs that the engine planned by value
	// (shapes, axes, sizes fed as inputs; see runSet): the case passes
	// only because the run gives them and the engine re-plans per value.
	Bound []string
}

// KnownFailures lists corpus cases that import (all their operators are
// claimed) but are known not to match, with the reason. The conformance
// test fails on any other failure, and on an entry that no longer fails.
var KnownFailures = map[string]string{}

// RunCase runs every data set of c on dev.
func RunCase(c *Case, dev rt.Device) (res Result) {
	res = Result{Case: c.Name, Ops: OpTypes(c.ModelBytes)}
	defer func() {
		if r := recover(); r != nil {
			res.Status, res.Reason = Fail, fmt.Sprintf("panic: %v", r)
		}
	}()
	skip := func(reason string, groups ...string) Result {
		res.Status, res.Reason, res.Groups = Skip, reason, groups
		return res
	}
	fail := func(format string, args ...any) Result {
		res.Status, res.Reason = Fail, fmt.Sprintf(format, args...)
		return res
	}
	if c.DataErr != nil {
		return skip(c.DataErr.Error(), "test data: "+normalise(lastPart(c.DataErr)))
	}
	m, err := onnx.Import(c.ModelBytes, onnx.Options{Supported: engine.SupportedOps})
	if err != nil {
		if errors.Is(err, onnx.ErrUnsupported) {
			return skip(err.Error(), importGroups(err)...)
		}
		return fail("import: %v", err)
	}
	defer m.Close()
	for k, ds := range c.DataSets {
		out, bound, err := runSet(m, dev, ds)
		for _, b := range bound {
			if !slices.Contains(res.Bound, b) {
				res.Bound = append(res.Bound, b)
			}
		}
		if err != nil {
			if errors.Is(err, rt.ErrUnsupported) || errors.Is(err, engine.ErrUnsupportedFeature) {
				return skip(err.Error(), "engine: "+normalise(unsupportedDetail(err)))
			}
			return fail("data set %d: %v", k, err)
		}
		for _, name := range ds.OutputNames {
			got, ok := out[name]
			if !ok {
				return fail("data set %d: output %q not produced", k, name)
			}
			if msg := Compare(got, ds.Outputs[name]); msg != "" {
				return fail("data set %d: output %q: %s", k, name, msg)
			}
		}
	}
	res.Status = Pass
	return res
}

// runSet plans and runs m on one data set, as an embedder would: a
// session for the data set's input shapes, run with all its inputs. The
// engine needs shapes, axes, sizes and the like at plan time, and the
// corpus often feeds them as graph inputs; the session then plans for the
// values of those inputs (engine.Session.ValueInputs), which bound lists.
func runSet(m *model.Model, dev rt.Device, ds DataSet) (out map[string]*rt.Tensor, bound []string, err error) {
	shapes := map[string][]int{}
	for name, t := range ds.Inputs {
		shapes[name] = t.Shape
	}
	s, err := engine.New(m, dev, engine.Options{Shapes: shapes})
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	out, err = s.Run(context.Background(), ds.Inputs)
	return out, s.ValueInputs(), err
}

// bindInputs returns a copy of m in which the named inputs are weights
// holding the given values.
func bindInputs(m *model.Model, vals map[string]*rt.Tensor, names []string) *model.Model {
	mm := &model.Model{Meta: m.Meta, Nodes: m.Nodes, Tensors: slices.Clone(m.Tensors)}
	for _, name := range names {
		i := mm.TensorIndex(name)
		v := vals[name]
		t := &mm.Tensors[i]
		t.Role, t.Data, t.DimNames = model.Weight, v.Data, nil
		t.Shape = make([]int64, len(v.Shape))
		for d, n := range v.Shape {
			t.Shape[d] = int64(n)
		}
	}
	return mm
}

// OpTypes returns the sorted operator types of a serialized model's main
// graph ("domain/op" outside the default domain).
func OpTypes(modelBytes []byte) []string {
	var mp onnxpb.ModelProto
	if proto.Unmarshal(modelBytes, &mp) != nil {
		return nil
	}
	seen := map[string]bool{}
	var ops []string
	for _, n := range mp.GetGraph().GetNode() {
		op := n.GetOpType()
		if d := n.GetDomain(); d != "" && d != "ai.onnx" {
			op = d + "/" + op
		}
		if !seen[op] {
			seen[op] = true
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	return ops
}

var (
	reQuoted = regexp.MustCompile(`"[^"]*"`)
	reNum    = regexp.MustCompile(`\b\d+\b`)
	reShape  = regexp.MustCompile(`\[[-0-9 ]*\]`)
)

func normalise(s string) string {
	s = reQuoted.ReplaceAllString(s, "X")
	s = reShape.ReplaceAllString(s, "[..]")
	return reNum.ReplaceAllString(s, "N")
}

func lastPart(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// unsupportedDetail strips the node prefix from an engine error.
func unsupportedDetail(err error) string {
	var ue *rt.UnsupportedError
	if errors.As(err, &ue) {
		s := fmt.Sprintf("device: %s %s", ue.Op, ue.DType)
		if ue.Reason != "" {
			s += ": " + ue.Reason
		}
		return s
	}
	var pe *engine.PlanError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// importGroups turns an import error into skip groups.
func importGroups(err error) []string {
	var ue *onnx.UnsupportedError
	if !errors.As(err, &ue) {
		return []string{"import: " + normalise(lastPart(err))}
	}
	seen := map[string]bool{}
	var out []string
	for _, u := range ue.Items {
		var g string
		switch {
		case strings.Contains(u.Op, "/"):
			g = "domain " + u.Op[:strings.LastIndex(u.Op, "/")]
		case u.Reason == "operator not supported":
			g = "unsupported op " + u.Op
		case strings.Contains(u.Reason, "subgraph"):
			g = "subgraphs (" + u.Op + ")"
		default:
			g = normalise(u.Reason)
		}
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}

// Compare checks got against want and returns "" or what differs.
func Compare(got, want *rt.Tensor) string {
	if got.DType != want.DType {
		return fmt.Sprintf("dtype %s, want %s", got.DType, want.DType)
	}
	if !slices.Equal(got.Shape, want.Shape) {
		return fmt.Sprintf("shape %v, want %v", got.Shape, want.Shape)
	}
	if len(got.Data) != len(want.Data) {
		return fmt.Sprintf("%d data bytes, want %d", len(got.Data), len(want.Data))
	}
	n := want.Len()
	if !want.DType.IsFloat() {
		es := want.DType.Size()
		bad, first := 0, -1
		for i := 0; i < n; i++ {
			if string(got.Data[i*es:(i+1)*es]) != string(want.Data[i*es:(i+1)*es]) {
				if first < 0 {
					first = i
				}
				bad++
			}
		}
		if bad > 0 {
			return fmt.Sprintf("%d of %d elements differ; first at %d: got %v, want %v", bad, n, first, got.Float64(first), want.Float64(first))
		}
		return ""
	}
	rtol := Rtol
	if want.DType == rt.F16 {
		rtol = RtolF16
	}
	bad, first, worst := 0, -1, 0.0
	for i := 0; i < n; i++ {
		g, w := got.Float64(i), want.Float64(i)
		if close(g, w, rtol) {
			continue
		}
		if first < 0 {
			first = i
		}
		bad++
		if d := math.Abs(g - w); d > worst || math.IsNaN(d) {
			worst = d
		}
	}
	if bad > 0 {
		return fmt.Sprintf("%d of %d elements differ (max abs diff %.3g); first at %d: got %v, want %v", bad, n, worst, first, got.Float64(first), want.Float64(first))
	}
	return ""
}

func close(g, w, rtol float64) bool {
	switch {
	case math.IsNaN(w) || math.IsNaN(g):
		return math.IsNaN(w) && math.IsNaN(g)
	case math.IsInf(w, 0) || math.IsInf(g, 0):
		return g == w
	}
	return math.Abs(g-w) <= Atol+rtol*math.Abs(w)
}

// Report is the outcome of a run over many cases.
type Report struct {
	Results []Result
}

// Run runs every case of c on dev whose name match accepts (nil: all).
func Run(c *Corpus, dev rt.Device, match func(name string) bool) *Report {
	r := &Report{}
	for _, cs := range c.Cases {
		if match != nil && !match(cs.Name) {
			continue
		}
		r.Results = append(r.Results, RunCase(cs, dev))
	}
	return r
}

// Count returns the number of results with status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

// Names returns the names of the cases with status s.
func (r *Report) Names(s Status) []string {
	var out []string
	for _, res := range r.Results {
		if res.Status == s {
			out = append(out, res.Case)
		}
	}
	return out
}

// SkipGroups returns the skip reasons with the cases under each, most
// frequent first. A case with several reasons is under each.
func (r *Report) SkipGroups() (keys []string, cases map[string][]string) {
	cases = map[string][]string{}
	for _, res := range r.Results {
		if res.Status != Skip {
			continue
		}
		for _, g := range res.Groups {
			cases[g] = append(cases[g], res.Case)
		}
	}
	return byCount(cases), cases
}

// byCount returns the keys of groups, the largest group first, then by
// name.
func byCount(groups map[string][]string) []string {
	var keys []string
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(groups[keys[i]]) != len(groups[keys[j]]) {
			return len(groups[keys[i]]) > len(groups[keys[j]])
		}
		return keys[i] < keys[j]
	})
	return keys
}

// writeGroups writes one line per key: the group's size, the key and up
// to three of its cases.
func writeGroups(b *strings.Builder, keys []string, groups map[string][]string) {
	for _, k := range keys {
		ex := groups[k]
		more := ""
		if len(ex) > 3 {
			ex, more = ex[:3], ", ..."
		}
		fmt.Fprintf(b, "  %4d  %s  (%s%s)\n", len(groups[k]), k, strings.Join(ex, ", "), more)
	}
}

// Summary is the one-line count: "N passed, M failed, K skipped", with
// how many passes needed graph inputs planned by value.
func (r *Report) Summary() string {
	bound := 0
	for _, res := range r.Results {
		if res.Status == Pass && len(res.Bound) > 0 {
			bound++
		}
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped (%d of the passes plan shape/axes inputs by value)",
		r.Count(Pass), r.Count(Fail), r.Count(Skip), bound)
}

// String formats the summary, the failures with their reasons and the
// skip reasons grouped and counted (with up to three example cases).
func (r *Report) String() string {
	var b strings.Builder
	b.WriteString(r.Summary())
	b.WriteString("\n")
	if n := r.Count(Fail); n > 0 {
		fmt.Fprintf(&b, "failures (%d):\n", n)
		for _, res := range r.Results {
			if res.Status == Fail {
				known := ""
				if why, ok := KnownFailures[res.Case]; ok {
					known = " [known: " + why + "]"
				}
				fmt.Fprintf(&b, "  %s: %s%s\n", res.Case, res.Reason, known)
			}
		}
	}
	keys, cases := r.SkipGroups()
	if len(keys) > 0 {
		fmt.Fprintf(&b, "skip reasons (a case may have several):\n")
		writeGroups(&b, keys, cases)
	}
	return b.String()
}
