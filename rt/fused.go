package rt

import (
	"fmt"
	"strconv"
)

// Fused evaluates a short program of elementwise functions in one pass
// over its operands, instead of one pass (and one launch) per function:
// the gate arithmetic of a recurrent cell, or a chain of activations and
// bias adds. It is an optional op: the engine emits it only where
// Device.Supports accepts it, and lowers the same arithmetic to Unary and
// Binary ops elsewhere.
//
// Registers 0 to len(In)-1 hold the elements of the inputs; instruction i
// of Code writes register len(In)+i; Out[k] receives register Result[k].
// Every operand has Out[0]'s shape (inputs broadcast through zero strides;
// all may be strided) and one float dtype. An output may alias an input
// exactly (the same view, in place) but must not overlap it otherwise, nor
// overlap another output.
type Fused struct {
	In, Out []Ref
	Code    []FusedInstr
	Result  []int
}

// FusedInstr is one instruction of a Fused program: the register it
// writes gets Unary(A) (with Alpha and Beta), or Fn(A, B) when Binary.
type FusedInstr struct {
	Binary      bool
	Unary       UnaryFn
	Fn          BinaryFn
	Alpha, Beta float64
	A, B        int
}

// Limits of a Fused program.
const (
	MaxFusedOperands = 16 // inputs, and outputs
	MaxFusedCode     = 64 // instructions
)

// OpName implements Op.
func (o *Fused) OpName() string { return "Fused" }

func (*Fused) isOp() {}

// Regs is the number of registers of the program.
func (o *Fused) Regs() int { return len(o.In) + len(o.Code) }

// fusedOperands lists the operands of a Fused op.
func fusedOperands(o *Fused) []Operand {
	var shape []int
	if len(o.Out) > 0 {
		shape = o.Out[0].Shape
	}
	ops := make([]Operand, 0, len(o.In)+len(o.Out))
	for i := range o.In {
		ops = append(ops, Operand{Name: "In" + strconv.Itoa(i), Ref: &o.In[i], Strided: true, Shape: shape})
	}
	for i := range o.Out {
		ops = append(ops, Operand{Name: "Out" + strconv.Itoa(i), Ref: &o.Out[i], Output: true, Strided: true, Shape: shape})
	}
	return ops
}

// checkFused checks a Fused program: its sizes, that every instruction
// reads registers written before it and computes a float function of
// float operands, and that all operands share one float dtype.
func checkFused(o *Fused) error {
	if len(o.Out) == 0 || len(o.In) > MaxFusedOperands || len(o.Out) > MaxFusedOperands || len(o.Code) > MaxFusedCode {
		return fmt.Errorf("Fused: %d inputs, %d outputs and %d instructions (want 1 to %d outputs, at most %d inputs and %d instructions)",
			len(o.In), len(o.Out), len(o.Code), MaxFusedOperands, MaxFusedOperands, MaxFusedCode)
	}
	if len(o.Result) != len(o.Out) {
		return fmt.Errorf("Fused: %d results for %d outputs", len(o.Result), len(o.Out))
	}
	dt := o.Out[0].DType
	if !dt.IsFloat() {
		return fmt.Errorf("Fused: dtype %s, want a float dtype", dt)
	}
	for _, rs := range [][]Ref{o.In, o.Out} {
		for _, r := range rs {
			if r.DType != dt {
				return fmt.Errorf("Fused: operands of dtypes %s and %s", dt, r.DType)
			}
		}
	}
	for i, in := range o.Code {
		reg := len(o.In) + i
		if in.A < 0 || in.A >= reg || in.Binary && (in.B < 0 || in.B >= reg) {
			return fmt.Errorf("Fused: instruction %d reads a register not yet written", i)
		}
		if in.Binary {
			if int(in.Fn) >= NumBinaryFns || in.Fn.IsCompare() || in.Fn.IsLogical() {
				return fmt.Errorf("Fused: instruction %d: binary function %s", i, in.Fn)
			}
		} else if int(in.Unary) >= NumUnaryFns || in.Unary == Not {
			return fmt.Errorf("Fused: instruction %d: unary function %s", i, in.Unary)
		}
	}
	for k, r := range o.Result {
		if r < 0 || r >= o.Regs() {
			return fmt.Errorf("Fused: result %d is register %d of %d", k, r, o.Regs())
		}
	}
	return nil
}

// cloneFused copies o with its own operand, code and result slices, so
// that rebinding the copy's refs leaves o alone.
func cloneFused(o *Fused) *Fused {
	c := *o
	c.In = append([]Ref(nil), o.In...)
	c.Out = append([]Ref(nil), o.Out...)
	c.Code = append([]FusedInstr(nil), o.Code...)
	c.Result = append([]int(nil), o.Result...)
	return &c
}

// FusedProgram builds a Fused op: Input adds an input, Unary and Binary
// add instructions, Output binds a value to an output. Values are handles
// (FusedValue) that Op turns into registers, so inputs and instructions
// may be added in any order.
type FusedProgram struct {
	in     []Ref
	code   []FusedInstr // A and B hold handles
	out    []Ref
	result []FusedValue
}

// FusedValue is a value of a FusedProgram: input k is -k-1, the result
// of instruction i is i.
type FusedValue int

// Input adds r as an input and returns its value.
func (p *FusedProgram) Input(r Ref) FusedValue {
	p.in = append(p.in, r)
	return FusedValue(-len(p.in))
}

// Unary adds fn(a) and returns its value.
func (p *FusedProgram) Unary(fn UnaryFn, alpha, beta float64, a FusedValue) FusedValue {
	p.code = append(p.code, FusedInstr{Unary: fn, Alpha: alpha, Beta: beta, A: int(a)})
	return FusedValue(len(p.code) - 1)
}

// Binary adds fn(a, b) and returns its value.
func (p *FusedProgram) Binary(fn BinaryFn, a, b FusedValue) FusedValue {
	p.code = append(p.code, FusedInstr{Binary: true, Fn: fn, A: int(a), B: int(b)})
	return FusedValue(len(p.code) - 1)
}

// Output writes value v to r.
func (p *FusedProgram) Output(r Ref, v FusedValue) {
	p.out = append(p.out, r)
	p.result = append(p.result, v)
}

// Len is the number of instructions so far.
func (p *FusedProgram) Len() int { return len(p.code) }

// Op returns the program as an op, with its handles turned into
// registers.
func (p *FusedProgram) Op() *Fused {
	n := len(p.in)
	reg := func(v FusedValue) int {
		if v < 0 {
			return int(-v - 1)
		}
		return n + int(v)
	}
	o := &Fused{In: append([]Ref(nil), p.in...), Out: append([]Ref(nil), p.out...)}
	for _, in := range p.code {
		in.A = reg(FusedValue(in.A))
		if in.Binary {
			in.B = reg(FusedValue(in.B))
		} else {
			in.B = 0
		}
		o.Code = append(o.Code, in)
	}
	for _, v := range p.result {
		o.Result = append(o.Result, reg(v))
	}
	return o
}

// Eval computes the program at one point: regs holds the input values in
// its first len(In) entries and receives the others. It is the reference
// the backends are tested against, in float64.
func (o *Fused) Eval(regs []float64) {
	for i, in := range o.Code {
		r := len(o.In) + i
		if in.Binary {
			regs[r] = in.Fn.Apply(regs[in.A], regs[in.B])
		} else {
			regs[r] = in.Unary.Apply(regs[in.A], in.Alpha, in.Beta)
		}
	}
}
