package rt

import "fmt"

// Ref is a strided view of device memory: the operand of a primitive op.
// Element i (a multi-index) lives at byte offset
// Off + sum(i[d]*Strides[d]) * DType.Size() of Buf. Strides are in
// elements and may be zero (broadcast) or negative (reversed slice).
type Ref struct {
	Buf     Buffer
	Off     int64 // byte offset of element [0, 0, ...]
	DType   DType
	Shape   []int
	Strides []int // nil means row-major contiguous
}

// Valid reports whether the ref names a buffer.
func (r Ref) Valid() bool { return r.Buf != nil }

// Len is the number of elements.
func (r Ref) Len() int64 { return NumElements(r.Shape) }

// StridesOrContiguous returns Strides, or row-major strides when nil.
func (r Ref) StridesOrContiguous() []int {
	if r.Strides != nil {
		return r.Strides
	}
	return ContiguousStrides(r.Shape)
}

// Contiguous reports whether the view is dense and row-major.
func (r Ref) Contiguous() bool {
	if r.Strides == nil {
		return true
	}
	want := 1
	for i := len(r.Shape) - 1; i >= 0; i-- {
		if r.Shape[i] != 1 && r.Strides[i] != want {
			return false
		}
		want *= r.Shape[i]
	}
	return true
}

// Span returns the lowest and one-past-highest byte offsets the view touches
// within its buffer. An empty view returns (Off, Off).
func (r Ref) Span() (lo, hi int64) {
	if r.Len() == 0 {
		return r.Off, r.Off
	}
	st := r.StridesOrContiguous()
	var mn, mx int64
	for i, d := range r.Shape {
		e := int64(d-1) * int64(st[i])
		if e < 0 {
			mn += e
		} else {
			mx += e
		}
	}
	sz := int64(r.DType.Size())
	return r.Off + mn*sz, r.Off + (mx+1)*sz
}

// Check validates the ref: a known dtype, non-negative dims, strides that
// match the rank, an aligned offset and every element inside the buffer.
func (r Ref) Check() error {
	if r.Buf == nil {
		return fmt.Errorf("no buffer")
	}
	if !r.DType.Valid() {
		return fmt.Errorf("invalid dtype %d", r.DType)
	}
	if r.Strides != nil && len(r.Strides) != len(r.Shape) {
		return fmt.Errorf("%d strides for rank %d", len(r.Strides), len(r.Shape))
	}
	if r.Len() < 0 {
		return fmt.Errorf("bad shape %v", r.Shape)
	}
	if r.Off%int64(r.DType.Size()) != 0 {
		return fmt.Errorf("offset %d not aligned to %s", r.Off, r.DType)
	}
	lo, hi := r.Span()
	if lo < 0 || hi > r.Buf.Size() {
		return fmt.Errorf("view [%d,%d) outside buffer of %d bytes", lo, hi, r.Buf.Size())
	}
	return nil
}
