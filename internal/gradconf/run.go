package gradconf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/conformance"
	"github.com/vrun-go/vrun/internal/floors"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Names of the tensors the harness appends to a case's graph.
const (
	cotName  = "gradconf_cot"
	prodName = "gradconf_prod"
	lossName = "loss"
)

// Case is one gradient case: a conformance case (op, inputs, expected
// outputs, tolerance) with the cotangent of output 0 and the expected
// gradients of the inputs listed in its Grads.
type Case struct {
	conformance.Case
	Cot   *rt.Tensor         // cotangent of output 0
	Want  map[int]*rt.Tensor // expected gradient by input index
	Input []string           // runtime inputs in Grads (TrainOptions.InputGrads)
	Param []string           // weights in Grads (TrainOptions.Params)
}

// DefaultDir returns the directory of the gradient cases in this checkout:
// $VRUN_GRAD_DIR if set, else testdata/grad/cases at the repository root.
func DefaultDir() (string, error) {
	if d := os.Getenv("VRUN_GRAD_DIR"); d != "" {
		return d, nil
	}
	return repo.Path("testdata/grad/cases")
}

// Cases loads every case under dir, sorted by name.
func Cases(dir string) ([]Case, error) {
	cs, err := conformance.Cases(dir)
	if err != nil {
		return nil, fmt.Errorf("gradconf: %w", err)
	}
	out := make([]Case, len(cs))
	for i := range cs {
		if err := load(&out[i], cs[i]); err != nil {
			return nil, fmt.Errorf("gradconf: case %s: %w", cs[i].Name, err)
		}
	}
	return out, nil
}

func load(g *Case, c conformance.Case) error {
	g.Case = c
	if len(c.Grads) == 0 {
		return errors.New("case.json lists no grads")
	}
	out0 := c.Outputs[0]
	var err error
	if g.Cot, err = readNpy(c.Dir, "cot.npy", out0.DType, out0.Shape); err != nil {
		return err
	}
	g.Want = map[int]*rt.Tensor{}
	for _, i := range c.Grads {
		in := c.Inputs[i]
		if g.Want[i], err = readNpy(c.Dir, fmt.Sprintf("grad_%d.npy", i), in.DType, in.Shape); err != nil {
			return err
		}
		switch in.Kind {
		case conformance.KindInput:
			g.Input = append(g.Input, in.Name)
		case conformance.KindWeight:
			g.Param = append(g.Param, in.Name)
		}
	}
	return nil
}

func readNpy(dir, file string, dt rt.DType, shape []int) (*rt.Tensor, error) {
	t, err := npy.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	if t.DType != dt || !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("%s holds %s%v, want %s%v", file, t.DType, t.Shape, dt, shape)
	}
	return t, nil
}

// Build returns c's one-node model extended with
// loss = ReduceSum(Mul(out_0, cot), keepdims=0), loss being the only graph
// output.
func Build(c *Case) (*model.Model, error) {
	for _, in := range c.Inputs {
		if in.Name == cotName || in.Name == prodName || in.Name == lossName {
			return nil, fmt.Errorf("case operand %q clashes with the harness's names", in.Name)
		}
	}
	b := model.NewBuilder()
	b.Meta("producer", "vrun gradconf")
	b.Meta("description", c.Name)
	outs, err := c.AddNode(b)
	if err != nil {
		return nil, err
	}
	cot := b.Weight(cotName, c.Cot.DType, int64s(c.Cot.Shape), c.Cot.Data)
	b.Node(prodName, "Mul", []string{outs[0], cot}, []string{prodName}, nil)
	b.Node(lossName, "ReduceSum", []string{prodName}, []string{lossName}, model.Attrs{"keepdims": int64(0)})
	b.Output(lossName)
	return b.Build()
}

// Result is what one case's training step produced.
type Result struct {
	Loss  float64
	Grads map[string]*rt.Tensor
}

// Exec plans c's loss model as a Trainer on dev (c's Params and Input as
// TrainOptions.Params and InputGrads, no optimizer), runs one Step with c's
// runtime inputs and returns the loss and the gradients.
func Exec(ctx context.Context, c *Case, dev rt.Device) (*Result, error) {
	m, err := Build(c)
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	defer m.Close()
	// Every other float weight (the cotangent, Clip bounds, Pad's constant,
	// BatchNormalization statistics) is frozen: an empty Params would
	// otherwise train them all.
	frozen := []string{cotName}
	for _, in := range c.Inputs {
		if in.Kind == conformance.KindWeight && in.DType.IsFloat() && !slices.Contains(c.Param, in.Name) {
			frozen = append(frozen, in.Name)
		}
	}
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: lossName, Params: c.Param, Frozen: frozen, InputGrads: c.Input})
	if err != nil {
		return nil, fmt.Errorf("engine.NewTrainer: %w", err)
	}
	defer tr.Close()
	feed := map[string]*rt.Tensor{}
	for _, in := range c.Inputs {
		if in.Kind == conformance.KindInput {
			feed[in.Name] = in.Tensor
		}
	}
	res, err := tr.Step(ctx, feed)
	if err != nil {
		return nil, fmt.Errorf("Step: %w", err)
	}
	grads, err := tr.Grads()
	if err != nil {
		return nil, fmt.Errorf("Grads: %w", err)
	}
	return &Result{Loss: res.Loss, Grads: grads}, nil
}

// WantLoss returns sum(out_0 * cot) from the expected output 0 and the
// accepted error: atol per element plus rtol times sum(|out_0 * cot|), the
// bound when every element of out_0 is within the case's tolerance.
func (c *Case) WantLoss() (want, allowed float64) {
	y := c.Outputs[0].Tensor
	var abs float64
	for i := 0; i < y.Len(); i++ {
		p := y.Float64(i) * c.Cot.Float64(i)
		want += p
		abs += math.Abs(p)
	}
	return want, c.Tol.ATol*float64(y.Len()) + c.Tol.RTol*abs
}

// Check runs c on dev and returns every difference from the reference,
// nil when the loss and all gradients match.
func Check(ctx context.Context, c *Case, dev rt.Device) ([]error, error) {
	res, err := Exec(ctx, c, dev)
	if err != nil {
		return nil, err
	}
	var errs []error
	want, allowed := c.WantLoss()
	if d := math.Abs(res.Loss - want); !(d <= allowed) {
		errs = append(errs, fmt.Errorf("loss %.9g, want %.9g (|diff| %.3g > allowed %.3g)", res.Loss, want, d, allowed))
	}
	for _, i := range c.Grads {
		name := c.Inputs[i].Name
		got, ok := res.Grads[name]
		if !ok {
			errs = append(errs, fmt.Errorf("gradient of %q (input %d): missing from Grads()", name, i))
			continue
		}
		if err := conformance.Compare(got, c.Want[i], c.Tol); err != nil {
			errs = append(errs, fmt.Errorf("gradient of %q (input %d): %w", name, i, err))
		}
	}
	return errs, nil
}

// Run checks the gradients of every case in [DefaultDir] on dev, one
// subtest per case, and logs a summary: N passed, M failed, K skipped. It
// also fails when fewer cases pass than the floor recorded for the device
// in internal/floors, so that cases which start to skip are noticed.
func Run(t *testing.T, dev rt.Device) {
	t.Helper()
	floors.Run(t, floors.Gradients, dev, DefaultDir, RunDir)
}

// RunDir is [Run] with the cases in dir, without a floor. It returns how
// many cases passed (a case that -run filters out counts as passed).
func RunDir(t *testing.T, dev rt.Device, dir string) int {
	t.Helper()
	return eachCase(t, dev, dir, "gradients", func(t *testing.T, ctx context.Context, c *Case, skip func(string, ...any)) {
		errs, err := Check(ctx, c, dev)
		if err != nil {
			// Skip only what the device cannot even run forward; a
			// missing gradient rule is a failure.
			if errors.Is(err, rt.ErrUnsupported) {
				if _, ferr := conformance.Exec(ctx, &c.Case, dev); errors.Is(ferr, rt.ErrUnsupported) {
					skip("unsupported forward: %v", ferr)
				}
			}
			t.Fatalf("%v\n  %s", err, c.Describe())
		}
		for _, e := range errs {
			t.Errorf("%v\n  %s", e, c.Describe())
		}
	})
}

// RunForward runs every gradient case forward only through the inference
// engine (conformance.Exec) and compares all outputs with the reference:
// the check that gen.py's PyTorch formulations have the ONNX semantics the
// engine implements.
func RunForward(t *testing.T, dev rt.Device) {
	t.Helper()
	dir, err := DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	eachCase(t, dev, dir, "gradient cases forward", func(t *testing.T, ctx context.Context, c *Case, skip func(string, ...any)) {
		outs, err := conformance.Exec(ctx, &c.Case, dev)
		if err != nil {
			if errors.Is(err, rt.ErrUnsupported) {
				skip("unsupported: %v", err)
			}
			t.Fatalf("%v\n  %s", err, c.Describe())
		}
		for _, o := range c.Outputs {
			if err := conformance.Compare(outs[o.Name], o.Tensor, c.Tol); err != nil {
				t.Errorf("output %q: %v\n  %s", o.Name, err, c.Describe())
			}
		}
	})
}

// eachCase runs check on every case in dir, one subtest per case, skipping
// what the device lacks the capability for, logs the summary under what
// and returns how many passed.
func eachCase(t *testing.T, dev rt.Device, dir, what string, check func(t *testing.T, ctx context.Context, c *Case, skip func(string, ...any))) int {
	t.Helper()
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	info := dev.Info()
	var sum summary
	for i := range cases {
		c := &cases[i]
		skipped := ""
		ok := t.Run(c.Name, func(t *testing.T) {
			skip := func(format string, args ...any) {
				skipped = fmt.Sprintf(format, args...)
				t.Skipf("%s\n  %s", skipped, c.Describe())
			}
			if reason := conformance.CapabilitySkip(info, &c.Case); reason != "" {
				skip("%s", reason)
			}
			check(t, context.Background(), c, skip)
		})
		sum.add(c, skipped, ok)
	}
	t.Logf("%s on %s (%s): %s", what, info.Spec(), info.Name, sum.String(len(cases)))
	return sum.pass
}

// summary counts the outcomes of a run.
type summary struct {
	pass   int
	failed map[string][]string // op -> case names
	skips  map[string][]string // reason -> case names
}

func (s *summary) add(c *Case, skipped string, ok bool) {
	switch {
	case skipped != "":
		if s.skips == nil {
			s.skips = map[string][]string{}
		}
		s.skips[skipped] = append(s.skips[skipped], c.Name)
	case ok:
		s.pass++
	default:
		if s.failed == nil {
			s.failed = map[string][]string{}
		}
		s.failed[c.Op] = append(s.failed[c.Op], c.Name)
	}
}

func (s *summary) String(total int) string {
	var nfail, nskip int
	var lines []string
	for op, names := range s.failed {
		nfail += len(names)
		lines = append(lines, fmt.Sprintf("  %d failed: %s (%s)", len(names), op, strings.Join(names, " ")))
	}
	for r, names := range s.skips {
		nskip += len(names)
		lines = append(lines, fmt.Sprintf("  %d skipped: %s (%s)", len(names), r, strings.Join(names, " ")))
	}
	sort.Strings(lines)
	head := fmt.Sprintf("%d cases: %d passed, %d failed, %d skipped", total, s.pass, nfail, nskip)
	if len(lines) == 0 {
		return head
	}
	return head + "\n" + strings.Join(lines, "\n")
}

func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}
