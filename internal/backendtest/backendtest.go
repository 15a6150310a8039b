package backendtest

import (
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// Run records ops on a new stream of d, submits it once, waits and closes
// it. Any error fails t.
func Run(t testing.TB, d rt.Device, ops ...rt.Op) {
	t.Helper()
	if err := RunErr(t, d, ops...); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

// RunErr is [Run] that returns Wait's error instead of failing t (for
// tests of errors found while the stream runs). An error of NewStream,
// Launch or Submit still fails t.
func RunErr(t testing.TB, d rt.Device, ops ...rt.Op) error {
	t.Helper()
	s, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, op := range ops {
		if err := s.Launch(op); err != nil {
			t.Fatalf("Launch %s: %v", op.OpName(), err)
		}
	}
	if err := s.Submit(); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return s.Wait()
}

// Upload allocates a buffer of len(data) bytes on d and writes data into
// it. Any error fails t.
func Upload(t testing.TB, d rt.Device, data []byte) rt.Buffer {
	t.Helper()
	b, err := d.Alloc(int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(b, 0, data); err != nil {
		t.Fatal(err)
	}
	return b
}

// Read returns every element of buffer b, as values of dt. Any error
// fails t.
func Read(t testing.TB, d rt.Device, b rt.Buffer, dt rt.DType) []float64 {
	t.Helper()
	host := make([]byte, b.Size())
	if err := d.Read(host, b, 0); err != nil {
		t.Fatal(err)
	}
	return (&rt.Tensor{DType: dt, Shape: []int{len(host) / dt.Size()}, Data: host}).Float64s()
}

// Values returns v as a one-dimensional tensor of dt, with one zero
// element when v is empty (a buffer is never empty).
func Values(dt rt.DType, v []float64) *rt.Tensor {
	tt, _ := rt.NewTensor(dt, max(len(v), 1))
	for i, x := range v {
		tt.SetFloat64(i, x)
	}
	return tt
}

// Span returns the element offsets, relative to a view's first element,
// of the lowest (lo <= 0, negative strides) and highest (hi >= 0) elements
// the view of shape with element strides st reaches.
func Span(shape, st []int) (lo, hi int) {
	for d, n := range shape {
		if x := (n - 1) * st[d]; x < 0 {
			lo += x
		} else {
			hi += x
		}
	}
	return lo, hi
}

// Strided uploads a view of shape with element strides st (nil:
// contiguous) over a buffer of d exactly as large as the view's span, so
// that a kernel reading outside it reads out of bounds. gen gives the
// buffer's elements in memory order.
func Strided(t testing.TB, d rt.Device, dt rt.DType, shape, st []int, gen func() float64) rt.Ref {
	t.Helper()
	if st == nil {
		st = rt.ContiguousStrides(shape)
	}
	lo, hi := Span(shape, st)
	v := make([]float64, hi-lo+1)
	for i := range v {
		v[i] = gen()
	}
	b := Upload(t, d, Values(dt, v).Data)
	return rt.Ref{Buf: b, Off: int64(-lo * dt.Size()), DType: dt, Shape: shape, Strides: st}
}

// Offset returns the element offset of multi-index idx in a view with
// element strides st.
func Offset(idx, st []int) int {
	o := 0
	for d, i := range idx {
		o += i * st[d]
	}
	return o
}

// ForEach calls f with every multi-index of shape in row-major order. f
// must not keep idx, which is reused.
func ForEach(shape []int, f func(idx []int)) {
	n := rt.NumElements(shape)
	idx := make([]int, len(shape))
	for k := int64(0); k < n; k++ {
		f(idx)
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// ValueRange is the range [lo, hi) of random data values of dt in the
// indexed-op tests: the whole range of the narrow integer types, [-50, 50)
// otherwise.
func ValueRange(dt rt.DType) (lo, hi float64) {
	switch dt {
	case rt.U8:
		return 0, 256
	case rt.Bool:
		return 0, 2
	case rt.I8:
		return -128, 128
	}
	return -50, 50
}

// Layout is how an index or update view of shape [O, N, I] is laid out.
type Layout struct {
	Name string
	// Strides returns the view's element strides, or nil for contiguous.
	Strides func(O, N, I int) []int
}

// Layouts are the [O, N, I] layouts the indexed-op tests run: contiguous,
// broadcasts (zero strides), reversed along N, and transposed.
var Layouts = []Layout{
	{"contig", func(O, N, I int) []int { return nil }},
	{"bcast_i", func(O, N, I int) []int { return []int{N, 1, 0} }},
	{"bcast_o", func(O, N, I int) []int { return []int{0, I, 1} }},
	{"scalar", func(O, N, I int) []int { return []int{0, 0, 0} }},
	{"rev_j", func(O, N, I int) []int { return []int{N * I, -I, 1} }},
	{"transposed", func(O, N, I int) []int { return []int{1, O * I, O} }}, // stored as [N, I, O]
}
