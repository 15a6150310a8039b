package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// attnView addresses a strided [B, H, L, D] operand of an Attention op.
type attnView[T floatT] struct {
	v              []T
	off            int
	sb, sh, si, sd int
}

func newAttnView[T floatT](r rt.Ref) attnView[T] {
	if r.Buf == nil {
		return attnView[T]{}
	}
	st := r.StridesOrContiguous()
	return attnView[T]{v: elems[T](data(r)), off: int(r.Off) / r.DType.Size(), sb: st[0], sh: st[1], si: st[2], sd: st[3]}
}

// at is the element index of [b, h, i, 0].
func (a attnView[T]) at(b, h, i int) int { return a.off + b*a.sb + h*a.sh + i*a.si }

// attentionOp runs Attention. In f32, when the GEMM kernels can address
// the operands (each has a unit stride along the row or the column, Y
// along the column), it runs blocks of query rows through them: the
// scores of the block (kept in scratch), the mask, a softmax and P V, with
// the GEMM's and Softmax's f32 accumulation, as the unfused ops would. In
// f64 and other layouts it runs the reference (attentionF).
func attentionOp(o *rt.Attention) {
	if o.Y.DType == rt.F64 {
		attentionF[float64](o)
		return
	}
	if !attentionGEMM(o) {
		attentionF[float32](o)
	}
}

// attnBlock is the number of query rows whose scores attentionGEMM holds
// at once.
const attnBlock = 64

// gemmOperand returns how the GEMM reads an [L, W] matrix of a view whose
// element (i, w) is at i*si + w*sw: row-major with leading dim ld, or
// transposed (trans). ok is false when neither stride is 1.
func gemmOperand(si, sw, l, w int) (ld int, trans, ok bool) {
	switch {
	case sw == 1 || w == 1:
		return max(si, w), false, true
	case si == 1 || l == 1:
		return max(sw, l), true, true
	}
	return 0, false, false
}

func attentionGEMM(o *rt.Attention) bool {
	if _, ok := sumF32(nil); !ok {
		return false
	}
	q, k, v, m, y := newAttnView[float32](o.Q), newAttnView[float32](o.K), newAttnView[float32](o.V), newAttnView[float32](o.Mask), newAttnView[float32](o.Y)
	lq, lk := o.Lq, o.Lk
	qld, qt, ok1 := gemmOperand(q.si, q.sd, lq, o.D)
	// K as the GEMM's B (D × Lk): B(d, j) = K[j, d].
	kld, kn, ok2 := gemmOperand(k.si, k.sd, lk, o.D)
	vld, vt, ok3 := gemmOperand(v.si, v.sd, lk, o.Dv)
	if !ok1 || !ok2 || !ok3 || (y.sd != 1 && o.Dv != 1) || lq == 0 || lk == 0 || o.D == 0 || o.Dv == 0 {
		return false
	}
	nb := (lq + attnBlock - 1) / attnBlock
	jobs := o.B * o.H * nb
	per := min(lq, attnBlock) * lk * (o.D + o.Dv)
	parallelFor(jobs, max(1, attnWork/max(per, 1)), func(lo, hi int) {
		s := make([]float32, min(lq, attnBlock)*lk)
		for job := lo; job < hi; job++ {
			bh, blk := job/nb, job%nb
			b, h := bh/o.H, bh%o.H
			i0 := blk * attnBlock
			rows := min(attnBlock, lq-i0)
			// Row i0 of Q starts at q.at(b, h, i0) in either layout.
			g := gemm[float32]{m: rows, n: lk, k: o.D, a: q.v[q.at(b, h, i0):], lda: qld, ta: qt,
				b: k.v[k.at(b, h, 0):], ldb: kld, tb: !kn, c: s, ldc: lk, alpha: float32(o.Scale), threads: 1}
			g.runOne()
			for r := range rows {
				i := i0 + r
				sr := s[r*lk : (r+1)*lk]
				if m.v != nil {
					mi := m.at(b, h, i)
					for j := range sr {
						sr[j] += m.v[mi+j*m.sd]
					}
				}
				if o.Causal {
					for j := max(0, i+lk-lq+1); j < lk; j++ {
						sr[j] = float32(math.Inf(-1))
					}
				}
				if mx, _ := maxF32(sr); math.IsInf(float64(mx), -1) {
					clear(sr) // attends to nothing
					continue
				}
				softmaxRange(sr, sr, lk, false, 0, 1)
			}
			g2 := gemm[float32]{m: rows, n: o.Dv, k: lk, a: s, lda: lk, b: v.v[v.at(b, h, 0):], ldb: vld, tb: vt,
				c: y.v[y.at(b, h, i0):], ldc: max(y.si, o.Dv), alpha: 1, threads: 1}
			g2.runOne()
		}
	})
	return true
}

// attnWork is the score count (rows × keys × head size) from which the
// rows are split between workers.
const attnWork = 1 << 15

func attentionF[T floatT](o *rt.Attention) {
	q, k, v, m, y := newAttnView[T](o.Q), newAttnView[T](o.K), newAttnView[T](o.V), newAttnView[T](o.Mask), newAttnView[T](o.Y)
	rows := o.B * o.H * o.Lq
	if rows == 0 || o.Dv == 0 {
		return
	}
	per := max(1, o.Lk*max(o.D, o.Dv))
	parallelFor(rows, max(1, attnWork/per), func(lo, hi int) {
		s := make([]float64, o.Lk)
		acc := make([]float64, o.Dv)
		for r := lo; r < hi; r++ {
			i := r % o.Lq
			b, h := r/o.Lq/o.H, r/o.Lq%o.H
			qi := q.at(b, h, i)
			mx := math.Inf(-1)
			for j := range s {
				if o.Causal && j > i+o.Lk-o.Lq {
					s[j] = math.Inf(-1)
					continue
				}
				kj := k.at(b, h, j)
				dot := 0.0
				for d := 0; d < o.D; d++ {
					dot += float64(q.v[qi+d*q.sd]) * float64(k.v[kj+d*k.sd])
				}
				dot *= o.Scale
				if m.v != nil {
					dot += float64(m.v[m.at(b, h, i)+j*m.sd])
				}
				s[j] = dot
				mx = max(mx, dot)
			}
			clear(acc)
			yi := y.at(b, h, i)
			if math.IsInf(mx, -1) {
				for e := range acc {
					y.v[yi+e*y.sd] = 0
				}
				continue
			}
			sum := 0.0
			for j, sj := range s {
				p := math.Exp(sj - mx)
				if p == 0 {
					continue
				}
				sum += p
				vj := v.at(b, h, j)
				for e := range acc {
					acc[e] += p * float64(v.v[vj+e*v.sd])
				}
			}
			for e, a := range acc {
				y.v[yi+e*y.sd] = T(a / sum)
			}
		}
	})
}
