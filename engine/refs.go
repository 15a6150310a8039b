package engine

import "github.com/vrun-go/vrun/rt"

// cloneOp returns a shallow copy of op (refs are values, so binding the
// copy leaves the plan's op untouched).
func cloneOp(op rt.Op) rt.Op {
	switch o := op.(type) {
	case *rt.Unary:
		c := *o
		return &c
	case *rt.Binary:
		c := *o
		return &c
	case *rt.Where:
		c := *o
		return &c
	case *rt.Reduce:
		c := *o
		return &c
	case *rt.Softmax:
		c := *o
		return &c
	case *rt.MatMul:
		c := *o
		return &c
	case *rt.Conv:
		c := *o
		return &c
	case *rt.ConvTranspose:
		c := *o
		return &c
	case *rt.Pool:
		c := *o
		return &c
	case *rt.Normalize:
		c := *o
		return &c
	case *rt.Gather:
		c := *o
		return &c
	case *rt.Fill:
		c := *o
		return &c
	case *rt.GatherElements:
		c := *o
		return &c
	case *rt.ScatterElements:
		c := *o
		return &c
	case *rt.TopK:
		c := *o
		return &c
	}
	panic("engine: unknown op type") // all rt op types are listed above
}

// mapRefs calls f on every ref field of op, present or not.
func mapRefs(op rt.Op, f func(*rt.Ref)) {
	each := func(rs ...*rt.Ref) {
		for _, r := range rs {
			if r.Buf != nil {
				f(r)
			}
		}
	}
	switch o := op.(type) {
	case *rt.Unary:
		each(&o.X, &o.Y)
	case *rt.Binary:
		each(&o.A, &o.B, &o.Y)
	case *rt.Where:
		each(&o.Cond, &o.A, &o.B, &o.Y)
	case *rt.Reduce:
		each(&o.X, &o.Y)
	case *rt.Softmax:
		each(&o.X, &o.Y)
	case *rt.MatMul:
		each(&o.A, &o.B, &o.Bias, &o.Y)
	case *rt.Conv:
		each(&o.X, &o.W, &o.Bias, &o.Y)
	case *rt.ConvTranspose:
		each(&o.X, &o.W, &o.Bias, &o.Y)
	case *rt.Pool:
		each(&o.X, &o.Y)
	case *rt.Normalize:
		each(&o.X, &o.Scale, &o.Bias, &o.Y)
	case *rt.Gather:
		each(&o.X, &o.Idx, &o.Y)
	case *rt.Fill:
		each(&o.Y)
	case *rt.GatherElements:
		each(&o.X, &o.Idx, &o.Y)
	case *rt.ScatterElements:
		each(&o.Y, &o.Idx, &o.Upd)
	case *rt.TopK:
		each(&o.X, &o.Values, &o.Indices)
	}
}
