package engine

import (
	"slices"
	"sort"
	"strings"

	"github.com/vrun-go/vrun/rt"
)

// Einsum lowered to strided views, transposing copies, Reduce(Sum) and
// batched MatMul: repeated labels within an operand become diagonal views
// (the strides add up), size-1 dims broadcast with stride 0, labels that
// only one operand carries and the output lacks are summed out, and the
// operands are contracted pairwise from the left, each pair as one MatMul
// over [batch, A-only, contracted] x [batch, contracted, B-only].

func init() {
	register("Einsum", 1, -1, lowerEinsum)
}

// ellipsisLabel is the first label of ellipsis dims (letters are their
// own runes, below it).
const ellipsisLabel = 1 << 16

// eview is a labelled strided view of a tensor: dim k has label labels[k].
type eview struct {
	t       *tensor
	labels  []int
	shape   []int
	strides []int
	off     int
}

// labelName names a label for errors.
func labelName(l int) string {
	if l >= ellipsisLabel {
		return "..."
	}
	return string(rune(l))
}

func (v eview) ref(c *nodeCtx) rt.Ref { return c.view(v.t, v.shape, v.strides, v.off) }

// permute returns v with its dims in the order of labels (which must be a
// permutation of v's labels).
func (v eview) permute(labels []int) eview {
	out := eview{t: v.t, labels: labels, off: v.off}
	for _, l := range labels {
		k := slices.Index(v.labels, l)
		out.shape = append(out.shape, v.shape[k])
		out.strides = append(out.strides, v.strides[k])
	}
	return out
}

// contiguous reports whether v is dense and row-major (from its offset).
func (v eview) contiguous() bool {
	return rt.Ref{Shape: v.shape, Strides: v.strides}.Contiguous()
}

// dense returns v's dims in the order of labels as a contiguous view,
// copying into a temporary when v's layout is not already that.
func (c *nodeCtx) dense(v eview, labels []int) eview {
	p := v.permute(labels)
	if p.contiguous() {
		return p
	}
	t := c.temp(v.t.dtype, p.shape)
	c.copyInto(c.ref(t), p.ref(c))
	return eview{t: t, labels: labels, shape: t.shape, strides: rt.ContiguousStrides(t.shape)}
}

// parseEinsumTerm splits one term into its letter labels and reports
// where among them an ellipsis stands (-1: none).
func parseEinsumTerm(term string) (letters []int, ellipsisAt int, ok bool) {
	ellipsisAt = -1
	for i := 0; i < len(term); i++ {
		ch := term[i]
		switch {
		case ch == '.':
			if ellipsisAt >= 0 || !strings.HasPrefix(term[i:], "...") {
				return nil, 0, false
			}
			ellipsisAt = len(letters)
			i += 2
		case ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z':
			letters = append(letters, int(ch))
		default:
			return nil, 0, false
		}
	}
	return letters, ellipsisAt, true
}

// lowerEinsum implements ONNX Einsum (explicit "->" or implicit output,
// ellipsis, diagonals and broadcasting).
func lowerEinsum(c *nodeCtx) error {
	eq := strings.ReplaceAll(c.attrString("equation", ""), " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != len(c.in) {
		return c.shapeErr("equation %q has %d operands, node has %d inputs", eq, len(terms), len(c.in))
	}
	dt := c.in[0].dtype
	for _, t := range c.in {
		if t == nil || t.dtype != dt {
			return c.shapeErr("Einsum inputs must all be present and of one dtype")
		}
	}
	if len(c.in) > 1 {
		if err := needFloat(c, c.in...); err != nil {
			return err
		}
	}
	// Labels of each operand, with ellipsis dims right-aligned onto the
	// shared ellipsis labels.
	type term struct {
		letters []int
		at      int
	}
	parsed := make([]term, len(terms))
	ell := 0
	for i, s := range terms {
		l, at, ok := parseEinsumTerm(s)
		if !ok {
			return c.shapeErr("bad einsum term %q in %q", s, eq)
		}
		r := len(c.in[i].shape)
		switch {
		case at < 0 && len(l) != r:
			return c.shapeErr("term %q has %d labels for input of shape %v", s, len(l), c.in[i].shape)
		case at >= 0 && len(l) > r:
			return c.shapeErr("term %q has too many labels for input of shape %v", s, c.in[i].shape)
		case at >= 0:
			ell = max(ell, r-len(l))
		}
		parsed[i] = term{l, at}
	}
	ellLabels := func(n int) []int {
		out := make([]int, n)
		for k := range out {
			out[k] = ellipsisLabel + ell - n + k
		}
		return out
	}
	views := make([]eview, len(c.in))
	size := map[int]int{}
	count := map[int]int{}
	for i, p := range parsed {
		x := c.in[i]
		labels := p.letters
		if p.at >= 0 {
			ne := len(x.shape) - len(p.letters)
			labels = slices.Concat(p.letters[:p.at], ellLabels(ne), p.letters[p.at:])
		}
		// Merge repeated labels into diagonal views.
		v := eview{t: x}
		st := rt.ContiguousStrides(x.shape)
		for k, l := range labels {
			if l < ellipsisLabel {
				count[l]++
			}
			if j := slices.Index(v.labels, l); j >= 0 {
				if v.shape[j] != x.shape[k] {
					return c.shapeErr("label %s has sizes %d and %d in %q", labelName(l), v.shape[j], x.shape[k], terms[i])
				}
				v.strides[j] += st[k]
				continue
			}
			v.labels = append(v.labels, l)
			v.shape = append(v.shape, x.shape[k])
			v.strides = append(v.strides, st[k])
		}
		for k, l := range v.labels {
			if s, ok := size[l]; ok && s != v.shape[k] && s != 1 && v.shape[k] != 1 {
				return c.shapeErr("label %s has sizes %d and %d", labelName(l), s, v.shape[k])
			}
			size[l] = max(size[l], v.shape[k])
		}
		views[i] = v
	}
	// Broadcast size-1 dims to the label's size.
	for i := range views {
		for k, l := range views[i].labels {
			if views[i].shape[k] != size[l] {
				views[i].shape[k], views[i].strides[k] = size[l], 0
			}
		}
	}
	// The output labels.
	var out []int
	if explicit {
		l, at, ok := parseEinsumTerm(rhs)
		if !ok {
			return c.shapeErr("bad einsum output %q", rhs)
		}
		out = l
		if at >= 0 {
			out = slices.Concat(l[:at], ellLabels(ell), l[at:])
		}
		for k, lb := range out {
			if _, ok := size[lb]; !ok || slices.Index(out, lb) != k {
				return c.shapeErr("output label %s is repeated or not in the inputs", labelName(lb))
			}
		}
	} else {
		var once []int
		for l, n := range count {
			if n == 1 {
				once = append(once, l)
			}
		}
		sort.Ints(once)
		out = append(ellLabels(ell), once...)
	}
	yshape := make([]int, len(out))
	for k, l := range out {
		yshape[k] = size[l]
	}
	y, err := c.define(0, dt, yshape)
	if err != nil {
		return err
	}
	yv := eview{t: y, labels: out, shape: y.shape, strides: rt.ContiguousStrides(y.shape)}
	// needed reports whether label l is used by the output or by any
	// operand other than those in skip.
	needed := func(l int, skip ...int) bool {
		if slices.Contains(out, l) {
			return true
		}
		for i, v := range views {
			if !slices.Contains(skip, i) && slices.Contains(v.labels, l) {
				return true
			}
		}
		return false
	}
	// Sum out labels that only one operand has.
	for i, v := range views {
		var keep, sum []int
		for _, l := range v.labels {
			if needed(l, i) {
				keep = append(keep, l)
			} else {
				sum = append(sum, l)
			}
		}
		if len(sum) == 0 {
			continue
		}
		var dst *tensor
		if len(views) == 1 && slices.Equal(keep, out) {
			dst = y
		}
		views[i] = c.einsumSum(v, keep, sum, dst)
		if dst != nil {
			return nil
		}
	}
	// Contract pairwise from the left.
	for len(views) > 1 {
		a, b := views[0], views[1]
		rest := views[2:]
		var batch, aOnly, bOnly, contr []int
		for _, l := range a.labels {
			inB := slices.Contains(b.labels, l)
			keep := slices.Contains(out, l)
			for _, r := range rest {
				keep = keep || slices.Contains(r.labels, l)
			}
			switch {
			case inB && keep:
				batch = append(batch, l)
			case inB:
				contr = append(contr, l)
			default:
				aOnly = append(aOnly, l)
			}
		}
		for _, l := range b.labels {
			if !slices.Contains(a.labels, l) {
				bOnly = append(bOnly, l)
			}
		}
		dims := func(ls []int) int {
			n := 1
			for _, l := range ls {
				n *= size[l]
			}
			return n
		}
		nb, m, n, k := dims(batch), dims(aOnly), dims(bOnly), dims(contr)
		res := slices.Concat(batch, aOnly, bOnly)
		op := &rt.MatMul{Batch: nb, M: m, N: n, K: k, StrideA: m * k, StrideB: k * n, StrideY: m * n, Alpha: 1}
		// Use an operand in place when it is already laid out as one of
		// the MatMul's orientations.
		if p := a.permute(slices.Concat(batch, contr, aOnly)); p.contiguous() && len(contr) > 0 && len(aOnly) > 0 {
			op.A, op.TransA = p.ref(c), true
		} else {
			op.A = c.dense(a, slices.Concat(batch, aOnly, contr)).ref(c)
		}
		if p := b.permute(slices.Concat(batch, bOnly, contr)); p.contiguous() && len(contr) > 0 && len(bOnly) > 0 {
			op.B, op.TransB = p.ref(c), true
		} else {
			op.B = c.dense(b, slices.Concat(batch, contr, bOnly)).ref(c)
		}
		var rv eview
		if len(rest) == 0 && slices.Equal(res, out) {
			rv = yv
		} else {
			shape := make([]int, len(res))
			for j, l := range res {
				shape[j] = size[l]
			}
			t := c.temp(dt, shape)
			rv = eview{t: t, labels: res, shape: shape, strides: rt.ContiguousStrides(shape)}
		}
		op.Y = rv.ref(c)
		if nb*m*n > 0 {
			c.emit(op)
		}
		if rv.t == y {
			return nil
		}
		views = append([]eview{rv}, rest...)
	}
	c.copyInto(yv.ref(c), views[0].permute(out).ref(c))
	return nil
}

// einsumSum sums v over the sum labels, into dst (contiguous, with the
// keep labels in order) or a new temporary.
func (c *nodeCtx) einsumSum(v eview, keep, sum []int, dst *tensor) eview {
	src := c.dense(v, slices.Concat(keep, sum))
	outer := 1
	for _, l := range keep {
		outer *= src.shape[slices.Index(src.labels, l)]
	}
	if dst == nil {
		dst = c.temp(v.t.dtype, src.shape[:len(keep)])
	}
	n := rt.NumElements(src.shape[len(keep):])
	if outer > 0 {
		if n == 0 {
			c.emit(&rt.Fill{Y: c.ref(dst)})
		} else {
			c.emit(&rt.Reduce{Fn: rt.Sum, X: src.ref(c), Y: c.ref(dst), Outer: outer, N: int(n), Inner: 1})
		}
	}
	return eview{t: dst, labels: keep, shape: dst.shape, strides: rt.ContiguousStrides(dst.shape)}
}
