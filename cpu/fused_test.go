package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// fusedInput is one input of a TestFused case: a region and a view of it
// with the case's shape.
type fusedInput struct {
	r    *region
	ref  rt.Ref
	vals []float64 // the region's stored values
}

// TestFused runs Fused programs on odd shapes with contiguous, broadcast,
// transposed and step-2 inputs, in place and not, and compares every
// output element with the program evaluated in float64 (rt.Fused.Eval,
// whose functions rt.TestApplyNumPy checks against NumPy). Tolerance:
// 1e-12 relative for f64; 1e-5 relative to max(|want|, 1) for f32 (the
// f32 transcendentals are within 3 ULP, the programs a few steps long).
func TestFused(t *testing.T) {
	shapes := [][]int{{1}, {7}, {3, 5, 7}, {100, 3}, {2, 48}, {2, 300}, {2, 1, 513}, {3, 11000}, {20000, 2}}
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, shape := range shapes {
			for _, prog := range []string{"lstm", "chain", "passthrough"} {
				for _, inPlace := range []bool{false, true} {
					name := dt.String() + "/" + prog + "/" + fmt.Sprint(shape)
					if inPlace {
						name += "/inplace"
					}
					t.Run(name, func(t *testing.T) { runFused(t, dt, shape, prog, inPlace) })
				}
			}
		}
	}
}

func runFused(t *testing.T, dt rt.DType, shape []int, prog string, inPlace bool) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(11, uint64(len(shape))))
	n := int(rt.NumElements(shape))
	rank := len(shape)
	mk := func(kind int) fusedInput {
		var in fusedInput
		switch kind {
		case 0: // contiguous
			in.vals = stored(dt, randVals(rng, n, -3, 3))
			in.r = e.region(dt, n, in.vals)
			in.ref = in.r.ref(shape...)
		case 1: // broadcast along the first dim (the only dim of a 1-D shape)
			m := n / shape[0]
			in.vals = stored(dt, randVals(rng, m, -3, 3))
			in.r = e.region(dt, m, in.vals)
			st := rt.ContiguousStrides(shape)
			st[0] = 0
			in.ref = in.r.view(0, shape, st)
		case 2: // transposed: the region holds the reversed shape
			in.vals = stored(dt, randVals(rng, n, -3, 3))
			in.r = e.region(dt, n, in.vals)
			rev := make([]int, rank)
			for i := range rev {
				rev[i] = shape[rank-1-i]
			}
			cst := rt.ContiguousStrides(rev)
			st := make([]int, rank)
			for i := range st {
				st[i] = cst[rank-1-i]
			}
			in.ref = in.r.view(0, shape, st)
		default: // every other element, from element 1
			in.vals = stored(dt, randVals(rng, 2*n+1, -3, 3))
			in.r = e.region(dt, 2*n+1, in.vals)
			st := rt.ContiguousStrides(shape)
			for i := range st {
				st[i] *= 2
			}
			in.ref = in.r.view(1, shape, st)
		}
		return in
	}
	ins := []fusedInput{mk(0), mk(1), mk(2), mk(3), mk(0)}
	var p rt.FusedProgram
	x := make([]rt.FusedValue, len(ins))
	for k, in := range ins {
		x[k] = p.Input(in.ref)
	}
	var outs []*region
	var results []rt.FusedValue
	out := func(v rt.FusedValue) {
		r := e.region(dt, n, nil)
		outs = append(outs, r)
		results = append(results, v)
	}
	switch prog {
	case "lstm": // c' = sig(f)*c + sig(i)*tanh(g); h' = sig(o)*tanh(c')
		i := p.Unary(rt.Sigmoid, 0, 0, x[0])
		g := p.Unary(rt.Tanh, 0, 0, x[1])
		f := p.Unary(rt.Sigmoid, 0, 0, x[2])
		c := p.Binary(rt.Add, p.Binary(rt.Mul, f, x[4]), p.Binary(rt.Mul, i, g))
		h := p.Binary(rt.Mul, p.Unary(rt.Sigmoid, 0, 0, x[3]), p.Unary(rt.Tanh, 0, 0, c))
		out(c)
		out(h)
	case "chain": // every kind of instruction: fast and slow binary functions, parameters
		a := p.Unary(rt.Affine, 0.5, -0.25, x[0])
		b := p.Unary(rt.Clip, -1, 1.5, p.Binary(rt.Sub, a, x[1]))
		c := p.Binary(rt.Max, b, p.Binary(rt.Div, x[2], p.Unary(rt.Affine, 1, 4, p.Unary(rt.Abs, 0, 0, x[3]))))
		d := p.Binary(rt.Pow, p.Unary(rt.Abs, 0, 0, c), p.Unary(rt.Relu, 0, 0, x[4]))
		out(p.Unary(rt.Gelu, 0, 0, d))
		out(p.Unary(rt.LeakyRelu, 0.1, 0, c))
	case "passthrough": // an input as a result, beside a computed one
		out(x[2])
		out(p.Binary(rt.Mul, x[0], x[3]))
	}
	refsOut := make([]rt.Ref, len(outs))
	for k, r := range outs {
		refsOut[k] = r.ref(shape...)
	}
	if inPlace {
		// The first output replaces the contiguous input 0, in place.
		refsOut[0] = ins[0].ref
	}
	for k := range outs {
		p.Output(refsOut[k], results[k])
	}
	op := p.Op()
	if err := e.dev.Supports(op); err != nil {
		t.Fatal(err)
	}
	// The expected values, from the inputs before the run.
	want := make([][]float64, len(outs))
	for k := range want {
		want[k] = make([]float64, n)
	}
	regs := make([]float64, op.Regs())
	idx := make([]int, rank)
	for j := range n {
		for k, in := range ins {
			regs[k] = at(in.vals, int(in.ref.Off/int64(dt.Size()))-guard/dt.Size(), in.ref.StridesOrContiguous(), idx)
		}
		op.Eval(regs)
		for k := range want {
			want[k][j] = regs[op.Result[k]]
		}
		for d := rank - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	e.run(op)
	tol := 1e-5
	if dt == rt.F64 {
		tol = 1e-12
	}
	for k := range outs {
		got := e.values(outs[k])
		if inPlace && k == 0 {
			got = e.values(ins[0].r)
		}
		w := stored(dt, want[k])
		checkVals(t, "Out"+string(rune('0'+k)), got, w, tol, func(int) float64 { return 1 })
	}
}

// Invalid programs fail Launch with an error, not a panic.
func TestFusedInvalid(t *testing.T) {
	e := newEnv(t)
	r := e.region(rt.F32, 8, make([]float64, 8))
	ri := e.region(rt.I32, 8, make([]float64, 8))
	ref := r.ref(8)
	for _, tc := range []struct {
		name string
		op   *rt.Fused
	}{
		{"no outputs", &rt.Fused{In: []rt.Ref{ref}}},
		{"results", &rt.Fused{In: []rt.Ref{ref}, Out: []rt.Ref{ref}}},
		{"forward read", &rt.Fused{In: []rt.Ref{ref}, Out: []rt.Ref{ref}, Code: []rt.FusedInstr{{A: 1}}, Result: []int{1}}},
		{"result range", &rt.Fused{In: []rt.Ref{ref}, Out: []rt.Ref{ref}, Result: []int{3}}},
		{"compare", &rt.Fused{In: []rt.Ref{ref}, Out: []rt.Ref{ref}, Code: []rt.FusedInstr{{Binary: true, Fn: rt.Less}}, Result: []int{1}}},
		{"int", &rt.Fused{In: []rt.Ref{ri.ref(8)}, Out: []rt.Ref{ri.ref(8)}, Result: []int{0}}},
		{"mixed", &rt.Fused{In: []rt.Ref{ri.ref(8)}, Out: []rt.Ref{ref}, Result: []int{0}}},
		{"shape", &rt.Fused{In: []rt.Ref{r.ref(4)}, Out: []rt.Ref{ref}, Result: []int{0}}},
	} {
		if err := e.launchErr(tc.op); err == nil {
			t.Errorf("%s: Launch accepted an invalid program", tc.name)
		}
	}
}
