package conformance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/floors"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Run runs every case of the table in [DefaultDir] on dev, one subtest per
// case (t.Run(case name)), and logs a summary. See the package
// documentation for what is skipped and what fails. It also fails when
// fewer cases pass than the floor recorded for the device in
// internal/floors, so that cases which start to skip are noticed.
func Run(t *testing.T, dev rt.Device) {
	t.Helper()
	floors.Run(t, floors.Conformance, dev, DefaultDir, RunDir)
}

// RunDir is [Run] with the cases in dir, without a floor. It returns how
// many cases passed (a case that -run filters out counts as passed).
func RunDir(t *testing.T, dev rt.Device, dir string) int {
	t.Helper()
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	info := dev.Info()
	var pass, fail int
	skips := map[string][]string{} // reason -> case names
	for i := range cases {
		c := &cases[i]
		skipped := ""
		ok := t.Run(c.Name, func(t *testing.T) {
			if reason := CapabilitySkip(info, c); reason != "" {
				skipped = reason
				t.Skip(reason)
			}
			outs, err := Exec(context.Background(), c, dev)
			if err != nil {
				if errors.Is(err, rt.ErrUnsupported) {
					skipped = "unsupported: " + err.Error()
					t.Skipf("%s\n  %s", skipped, c.Describe())
				}
				t.Fatalf("%v\n  %s", err, c.Describe())
			}
			for _, o := range c.Outputs {
				if err := Compare(outs[o.Name], o.Tensor, c.Tol); err != nil {
					t.Errorf("output %q: %v\n  %s", o.Name, err, c.Describe())
				}
			}
		})
		switch {
		case skipped != "":
			skips[skipped] = append(skips[skipped], c.Name)
		case ok:
			pass++
		default:
			fail++
		}
	}
	nskip := 0
	var reasons []string
	for r, names := range skips {
		nskip += len(names)
		reasons = append(reasons, fmt.Sprintf("  %d skipped: %s (%s)", len(names), r, strings.Join(names, " ")))
	}
	sort.Strings(reasons)
	t.Logf("conformance on %s (%s): %d cases: %d passed, %d failed, %d skipped\n%s",
		info.Spec(), info.Name, len(cases), pass, fail, nskip, strings.Join(reasons, "\n"))
	return pass
}

// CapabilitySkip returns why the device cannot run c at all, from its
// DeviceInfo (f64 or f16 operands without FP64 or FP16 support), or "".
func CapabilitySkip(info rt.DeviceInfo, c *Case) string {
	uses := map[rt.DType]bool{c.DType: true}
	for _, o := range append(append([]Operand{}, c.Inputs...), c.Outputs...) {
		if o.Kind != KindAbsent {
			uses[o.DType] = true
		}
	}
	switch {
	case uses[rt.F64] && !info.FP64:
		return fmt.Sprintf("device %s reports no f64 support", info.Spec())
	case uses[rt.F16] && !info.FP16:
		return fmt.Sprintf("device %s reports no f16 support", info.Spec())
	}
	return ""
}

// Build returns the one-node model for c: runtime inputs become graph
// inputs with their exact static shapes, weights become constant weights,
// absent inputs are "" (an omitted optional input), and the node's outputs
// are graph outputs named as in the case.
func Build(c *Case) (*model.Model, error) {
	b := model.NewBuilder()
	b.Meta("producer", "vrun conformance")
	b.Meta("description", c.Name)
	outs, err := c.AddNode(b)
	if err != nil {
		return nil, err
	}
	b.Output(outs...)
	return b.Build()
}

// AddNode adds c's operands and node to b as [Build] does, without marking
// any graph output, and returns the node's output names (those of
// c.Outputs). Callers that extend the one-node graph (the gradient harness
// appends a loss) use it.
func (c *Case) AddNode(b *model.Builder) ([]string, error) {
	names := make([]string, len(c.Inputs))
	for i, in := range c.Inputs {
		switch in.Kind {
		case KindAbsent:
			names[i] = ""
		case KindInput:
			names[i] = b.Input(in.Name, in.DType, int64s(in.Shape)...)
		case KindWeight:
			names[i] = b.Weight(in.Name, in.DType, int64s(in.Shape), in.Tensor.Data)
		default:
			return nil, fmt.Errorf("input %q: unknown kind %q", in.Name, in.Kind)
		}
	}
	attrs := model.Attrs{}
	for _, a := range c.Attrs {
		attrs[a.Name] = a.Value
	}
	outs := make([]string, len(c.Outputs))
	for i, o := range c.Outputs {
		outs[i] = o.Name
	}
	b.Node(c.Op, c.Op, names, outs, attrs)
	return outs, nil
}

// Exec builds c's model, plans it on dev with the engine and runs it once
// with c's runtime inputs, returning the outputs by name.
func Exec(ctx context.Context, c *Case, dev rt.Device) (map[string]*rt.Tensor, error) {
	m, err := Build(c)
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	defer m.Close()
	s, err := engine.New(m, dev, engine.Options{})
	if err != nil {
		return nil, fmt.Errorf("engine.New: %w", err)
	}
	defer s.Close()
	feed := map[string]*rt.Tensor{}
	for _, in := range c.Inputs {
		if in.Kind == KindInput {
			feed[in.Name] = in.Tensor
		}
	}
	out, err := s.Run(ctx, feed)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	return out, nil
}

// Describe summarises the case for failure messages: op, attributes,
// operand shapes and the note.
func (c *Case) Describe() string {
	var b strings.Builder
	if c.Domain != "" {
		b.WriteString(c.Domain + ".")
	}
	b.WriteString(c.Op)
	b.WriteString("(")
	for i, in := range c.Inputs {
		if i > 0 {
			b.WriteString(", ")
		}
		if in.Kind == KindAbsent {
			b.WriteString("<absent>")
			continue
		}
		fmt.Fprintf(&b, "%s:%s%v", in.Name, in.DType, in.Shape)
		if in.Kind == KindWeight {
			b.WriteString(" const")
			if len(in.Shape) <= 1 && in.Tensor.Len() <= 8 && in.DType.IsInt() {
				fmt.Fprintf(&b, "=%v", intValues(in.Tensor))
			}
		}
	}
	b.WriteString(")")
	for _, a := range c.Attrs {
		fmt.Fprintf(&b, " %s=%v", a.Name, a.Value)
	}
	for _, o := range c.Outputs {
		fmt.Fprintf(&b, " -> %s:%s%v", o.Name, o.DType, o.Shape)
	}
	fmt.Fprintf(&b, " [rtol %g atol %g]", c.Tol.RTol, c.Tol.ATol)
	if c.Note != "" {
		b.WriteString("; " + c.Note)
	}
	return b.String()
}

func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// intValues returns the elements of an integer tensor exactly.
func intValues(t *rt.Tensor) []int64 {
	out := make([]int64, t.Len())
	for i := range out {
		switch t.DType {
		case rt.I64:
			out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		default:
			out[i] = int64(t.Float64(i))
		}
	}
	return out
}
