package rt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrDType is wrapped when a tensor's dtype is not the one wanted: a model
// input fed with another dtype, or As asked for another element type.
var ErrDType = errors.New("dtype mismatch")

// Element is a Go type that a tensor's elements can be read into and
// built from: one per dtype except F16 (use FromFloat64 and Float32s).
type Element interface {
	float32 | float64 | int32 | int64 | uint8 | int8 | bool
}

// DTypeOf returns the dtype whose elements are Go values of type T.
func DTypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return F32
	case float64:
		return F64
	case int32:
		return I32
	case int64:
		return I64
	case uint8:
		return U8
	case int8:
		return I8
	case bool:
		return Bool
	}
	return InvalidDType
}

// FromSlice makes a tensor of T's dtype (see DTypeOf) holding a copy of v,
// with the given shape, or [len(v)] when no shape is given. A shape whose
// element count is not len(v) gives a tensor that Check (and a model run)
// reports as malformed.
func FromSlice[T Element](v []T, shape ...int) *Tensor {
	if len(shape) == 0 {
		shape = []int{len(v)}
	}
	dt := DTypeOf[T]()
	t := &Tensor{DType: dt, Shape: append([]int(nil), shape...), Data: make([]byte, len(v)*dt.Size())}
	d := t.Data
	switch s := any(v).(type) {
	case []float32:
		for i, x := range s {
			binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(x))
		}
	case []float64:
		for i, x := range s {
			binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(x))
		}
	case []int32:
		for i, x := range s {
			binary.LittleEndian.PutUint32(d[4*i:], uint32(x))
		}
	case []int64:
		for i, x := range s {
			binary.LittleEndian.PutUint64(d[8*i:], uint64(x))
		}
	case []uint8:
		copy(d, s)
	case []int8:
		for i, x := range s {
			d[i] = uint8(x)
		}
	case []bool:
		for i, x := range s {
			if x {
				d[i] = 1
			}
		}
	}
	return t
}

// As returns a copy of t's elements as a []T. t's dtype must be T's (see
// DTypeOf): As never converts, and a mismatch is an error wrapping
// ErrDType. Float32s, Float64s and Int64s convert.
func As[T Element](t *Tensor) ([]T, error) {
	want := DTypeOf[T]()
	if t == nil {
		return nil, fmt.Errorf("rt: nil tensor")
	}
	if t.DType != want {
		return nil, fmt.Errorf("rt: tensor is %s, not %s: %w", t.DType, want, ErrDType)
	}
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("rt: %w", err)
	}
	out := make([]T, t.Len())
	d := t.Data
	switch s := any(out).(type) {
	case []float32:
		for i := range s {
			s[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case []float64:
		for i := range s {
			s[i] = math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
		}
	case []int32:
		for i := range s {
			s[i] = int32(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case []int64:
		for i := range s {
			s[i] = int64(binary.LittleEndian.Uint64(d[8*i:]))
		}
	case []uint8:
		copy(s, d)
	case []int8:
		for i := range s {
			s[i] = int8(d[i])
		}
	case []bool:
		for i := range s {
			s[i] = d[i] != 0
		}
	}
	return out, nil
}

// FromInt64 makes an I64 tensor holding a copy of v (token ids, indices).
func FromInt64(v []int64, shape ...int) *Tensor { return FromSlice(v, shape...) }

// Int64 returns element i (flat index) as an int64: exact for the integer
// dtypes and bool, truncated toward zero (saturating, NaN as 0) for floats.
func (t *Tensor) Int64(i int) int64 {
	d := t.Data
	switch t.DType {
	case I64:
		return int64(binary.LittleEndian.Uint64(d[8*i:]))
	case I32:
		return int64(int32(binary.LittleEndian.Uint32(d[4*i:])))
	case U8, Bool:
		return int64(d[i])
	case I8:
		return int64(int8(d[i]))
	}
	v := t.Float64(i)
	switch {
	case math.IsNaN(v):
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return int64(v)
}

// Int64s returns all elements as int64s, converted as Int64 does.
func (t *Tensor) Int64s() []int64 {
	out := make([]int64, t.Len())
	for i := range out {
		out[i] = t.Int64(i)
	}
	return out
}
