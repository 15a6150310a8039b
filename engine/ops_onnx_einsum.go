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
	e, err := parseEinsum(c)
	if err != nil {
		return err
	}
	yshape := make([]int, len(e.out))
	for k, l := range e.out {
		yshape[k] = e.size[l]
	}
	y, err := c.define(0, e.dt, yshape)
	if err != nil {
		return err
	}
	yv := eview{t: y, labels: e.out, shape: y.shape, strides: rt.ContiguousStrides(y.shape)}
	if e.sumOut(c, y) {
		return nil
	}
	for len(e.views) > 1 {
		if e.contract(c, yv) {
			return nil
		}
	}
	c.copyInto(yv.ref(c), e.views[0].permute(e.out).ref(c))
	return nil
}

// einsum is an Einsum node being lowered: the operands as labelled views,
// the size of every label, and the output labels.
type einsum struct {
	dt    rt.DType
	views []eview     // the operands still to combine, in order
	size  map[int]int // label -> size
	out   []int       // output labels
}

// einsumTerm is one operand's term: its letter labels and where among them
// the ellipsis stands (-1: none).
type einsumTerm struct {
	letters []int
	at      int
}

// parseEinsum parses and checks the equation against the inputs and builds
// the operand views: repeated labels within an operand become diagonals,
// size-1 dims broadcast to their label's size.
func parseEinsum(c *nodeCtx) (*einsum, error) {
	eq := strings.ReplaceAll(c.attrString("equation", ""), " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != len(c.in) {
		return nil, c.shapeErr("equation %q has %d operands, node has %d inputs", eq, len(terms), len(c.in))
	}
	e := &einsum{dt: c.in[0].dtype, size: map[int]int{}}
	for _, t := range c.in {
		if t == nil || t.dtype != e.dt {
			return nil, c.shapeErr("Einsum inputs must all be present and of one dtype")
		}
	}
	if len(c.in) > 1 {
		if err := needFloat(c, c.in...); err != nil {
			return nil, err
		}
	}
	parsed, ell, err := parseEinsumTerms(c, eq, terms)
	if err != nil {
		return nil, err
	}
	count := map[int]int{}
	for i, p := range parsed {
		x := c.in[i]
		labels := p.letters
		if p.at >= 0 {
			ne := len(x.shape) - len(p.letters)
			labels = slices.Concat(p.letters[:p.at], ellipsisLabels(ell, ne), p.letters[p.at:])
		}
		v, err := diagonalView(c, x, labels, terms[i])
		if err != nil {
			return nil, err
		}
		for _, l := range labels {
			if l < ellipsisLabel {
				count[l]++
			}
		}
		for k, l := range v.labels {
			if s, ok := e.size[l]; ok && s != v.shape[k] && s != 1 && v.shape[k] != 1 {
				return nil, c.shapeErr("label %s has sizes %d and %d", labelName(l), s, v.shape[k])
			}
			e.size[l] = max(e.size[l], v.shape[k])
		}
		e.views = append(e.views, v)
	}
	// Broadcast size-1 dims to the label's size.
	for i := range e.views {
		for k, l := range e.views[i].labels {
			if e.views[i].shape[k] != e.size[l] {
				e.views[i].shape[k], e.views[i].strides[k] = e.size[l], 0
			}
		}
	}
	if e.out, err = e.outputLabels(c, explicit, rhs, ell, count); err != nil {
		return nil, err
	}
	return e, nil
}

// parseEinsumTerms parses the input terms and checks them against the
// input ranks. ell is the number of ellipsis dims.
func parseEinsumTerms(c *nodeCtx, eq string, terms []string) (parsed []einsumTerm, ell int, err error) {
	parsed = make([]einsumTerm, len(terms))
	for i, s := range terms {
		l, at, ok := parseEinsumTerm(s)
		if !ok {
			return nil, 0, c.shapeErr("bad einsum term %q in %q", s, eq)
		}
		r := len(c.in[i].shape)
		switch {
		case at < 0 && len(l) != r:
			return nil, 0, c.shapeErr("term %q has %d labels for input of shape %v", s, len(l), c.in[i].shape)
		case at >= 0 && len(l) > r:
			return nil, 0, c.shapeErr("term %q has too many labels for input of shape %v", s, c.in[i].shape)
		case at >= 0:
			ell = max(ell, r-len(l))
		}
		parsed[i] = einsumTerm{l, at}
	}
	return parsed, ell, nil
}

// ellipsisLabels returns the labels of the last n of ell ellipsis dims
// (ellipsis dims are right-aligned onto the shared ellipsis labels).
func ellipsisLabels(ell, n int) []int {
	out := make([]int, n)
	for k := range out {
		out[k] = ellipsisLabel + ell - n + k
	}
	return out
}

// diagonalView views x with dim k labelled labels[k], merging repeated
// labels into diagonals (their strides add up).
func diagonalView(c *nodeCtx, x *tensor, labels []int, term string) (eview, error) {
	v := eview{t: x}
	st := rt.ContiguousStrides(x.shape)
	for k, l := range labels {
		if j := slices.Index(v.labels, l); j >= 0 {
			if v.shape[j] != x.shape[k] {
				return eview{}, c.shapeErr("label %s has sizes %d and %d in %q", labelName(l), v.shape[j], x.shape[k], term)
			}
			v.strides[j] += st[k]
			continue
		}
		v.labels = append(v.labels, l)
		v.shape = append(v.shape, x.shape[k])
		v.strides = append(v.strides, st[k])
	}
	return v, nil
}

// outputLabels returns the output labels: the explicit output term, or
// the ellipsis dims then the letters used once, sorted.
func (e *einsum) outputLabels(c *nodeCtx, explicit bool, rhs string, ell int, count map[int]int) ([]int, error) {
	if !explicit {
		var once []int
		for l, n := range count {
			if n == 1 {
				once = append(once, l)
			}
		}
		sort.Ints(once)
		return append(ellipsisLabels(ell, ell), once...), nil
	}
	l, at, ok := parseEinsumTerm(rhs)
	if !ok {
		return nil, c.shapeErr("bad einsum output %q", rhs)
	}
	out := l
	if at >= 0 {
		out = slices.Concat(l[:at], ellipsisLabels(ell, ell), l[at:])
	}
	for k, lb := range out {
		if _, ok := e.size[lb]; !ok || slices.Index(out, lb) != k {
			return nil, c.shapeErr("output label %s is repeated or not in the inputs", labelName(lb))
		}
	}
	return out, nil
}

// needed reports whether label l is used by the output or by any operand
// other than those in skip.
func (e *einsum) needed(l int, skip ...int) bool {
	if slices.Contains(e.out, l) {
		return true
	}
	for i, v := range e.views {
		if !slices.Contains(skip, i) && slices.Contains(v.labels, l) {
			return true
		}
	}
	return false
}

// sumOut sums out of each operand the labels no other operand and not the
// output has. It reports whether that wrote the output y (a single operand
// summed straight into it).
func (e *einsum) sumOut(c *nodeCtx, y *tensor) bool {
	for i, v := range e.views {
		var keep, sum []int
		for _, l := range v.labels {
			if e.needed(l, i) {
				keep = append(keep, l)
			} else {
				sum = append(sum, l)
			}
		}
		if len(sum) == 0 {
			continue
		}
		var dst *tensor
		if len(e.views) == 1 && slices.Equal(keep, e.out) {
			dst = y
		}
		e.views[i] = c.einsumSum(v, keep, sum, dst)
		if dst != nil {
			return true
		}
	}
	return false
}

// contract replaces the first two operands with their contraction, one
// MatMul over [batch, A-only, contracted] x [batch, contracted, B-only].
// It reports whether that wrote the output (yv: the last pair, already in
// the output's label order).
func (e *einsum) contract(c *nodeCtx, yv eview) bool {
	a, b := e.views[0], e.views[1]
	rest := e.views[2:]
	var batch, aOnly, bOnly, contr []int
	for _, l := range a.labels {
		inB := slices.Contains(b.labels, l)
		keep := slices.Contains(e.out, l)
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
			n *= e.size[l]
		}
		return n
	}
	nb, m, n, k := dims(batch), dims(aOnly), dims(bOnly), dims(contr)
	res := slices.Concat(batch, aOnly, bOnly)
	op := &rt.MatMul{Batch: nb, M: m, N: n, K: k, StrideA: m * k, StrideB: k * n, StrideY: m * n, Alpha: 1}
	// Use an operand in place when it is already laid out as one of the
	// MatMul's orientations.
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
	if len(rest) == 0 && slices.Equal(res, e.out) {
		rv = yv
	} else {
		shape := make([]int, len(res))
		for j, l := range res {
			shape[j] = e.size[l]
		}
		t := c.temp(e.dt, shape)
		rv = eview{t: t, labels: res, shape: shape, strides: rt.ContiguousStrides(shape)}
	}
	op.Y = rv.ref(c)
	if nb*m*n > 0 {
		c.emit(op)
	}
	if rv.t == yv.t {
		return true
	}
	e.views = append([]eview{rv}, rest...)
	return false
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
