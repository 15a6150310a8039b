package rt

import "fmt"

// Attention is fused scaled dot-product attention: for each batch b < B
// and head h < H,
//
//	S = Scale * Q[b,h] K[b,h]^T + Mask[b,h]     (Lq × Lk)
//	Y[b,h] = softmax(S, over the keys) V[b,h]   (Lq × Dv)
//
// with key j hidden from query i when Causal and j > i + Lk - Lq (the
// queries are the last Lq of the Lk positions). Q is [B, H, Lq, D], K is
// [B, H, Lk, D], V is [B, H, Lk, Dv], the optional additive Mask is
// [B, H, Lq, Lk] and Y is [B, H, Lq, Dv]; every operand may be strided
// (zero strides broadcast a mask or a shared K and V, a transposed stride
// reads K^T as stored). A query row whose scores are all -inf attends to
// nothing and gets zeros. Kernels need not materialise S: backends
// compute it block by block with an online softmax, accumulating in at
// least f32. All operands share one float dtype, and Y must not overlap
// the inputs.
//
// It is an optional op, like [Fused]: the engine emits it only where
// Device.Supports accepts it, and lowers attention to MatMul, Softmax and
// elementwise ops elsewhere.
type Attention struct {
	Q, K, V, Mask, Y Ref
	B, H, Lq, Lk     int
	D, Dv            int
	Scale            float64
	Causal           bool
}

// OpName implements Op.
func (o *Attention) OpName() string { return "Attention" }

func (*Attention) isOp() {}

// attentionOperands lists the operands of an Attention op: strided views
// of the shapes its sizes give.
func attentionOperands(o *Attention) []Operand {
	op := func(name string, r *Ref, shape []int, out, optional bool) Operand {
		return Operand{Name: name, Ref: r, Output: out, Optional: optional, Strided: true, Shape: shape}
	}
	return []Operand{
		op("Q", &o.Q, []int{o.B, o.H, o.Lq, o.D}, false, false),
		op("K", &o.K, []int{o.B, o.H, o.Lk, o.D}, false, false),
		op("V", &o.V, []int{o.B, o.H, o.Lk, o.Dv}, false, false),
		op("Mask", &o.Mask, []int{o.B, o.H, o.Lq, o.Lk}, false, true),
		op("Y", &o.Y, []int{o.B, o.H, o.Lq, o.Dv}, true, false),
	}
}

// checkAttention checks an Attention op's dtypes and that Y overlaps no
// input.
func checkAttention(o *Attention) error {
	dt := o.Y.DType
	if !dt.IsFloat() {
		return fmt.Errorf("Attention: dtype %s, want a float dtype", dt)
	}
	for _, r := range []Ref{o.Q, o.K, o.V, o.Mask} {
		if r.Buf == nil {
			continue
		}
		if r.DType != dt {
			return fmt.Errorf("Attention: operands of dtypes %s and %s", dt, r.DType)
		}
		if r.Buf == o.Y.Buf && r.Len() > 0 && o.Y.Len() > 0 {
			lo, hi := r.Span()
			ylo, yhi := o.Y.Span()
			if lo < yhi && ylo < hi {
				return fmt.Errorf("Attention: Y overlaps an input")
			}
		}
	}
	return nil
}
