package rt

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Tensor is a dense, row-major tensor in host memory: the type that crosses
// the API boundary (model inputs and outputs, .npy files). Data holds the
// little-endian elements; len(Data) == NumElements(Shape) * DType.Size().
type Tensor struct {
	DType DType
	Shape []int
	Data  []byte
}

// NewTensor allocates a zeroed host tensor.
func NewTensor(dt DType, shape ...int) (*Tensor, error) {
	n := NumElements(shape)
	if n < 0 || !dt.Valid() {
		return nil, fmt.Errorf("rt: bad tensor %s%v", dt, shape)
	}
	if n > math.MaxInt/int64(dt.Size()) {
		return nil, fmt.Errorf("rt: tensor %s%v too large", dt, shape)
	}
	return &Tensor{DType: dt, Shape: append([]int(nil), shape...), Data: make([]byte, n*int64(dt.Size()))}, nil
}

// Len is the number of elements.
func (t *Tensor) Len() int { return int(NumElements(t.Shape)) }

// Check verifies that Data's length matches DType and Shape.
func (t *Tensor) Check() error {
	n := NumElements(t.Shape)
	if n < 0 || !t.DType.Valid() {
		return fmt.Errorf("bad tensor %s%v", t.DType, t.Shape)
	}
	if int64(len(t.Data)) != n*int64(t.DType.Size()) {
		return fmt.Errorf("tensor %s%v has %d data bytes, want %d", t.DType, t.Shape, len(t.Data), n*int64(t.DType.Size()))
	}
	return nil
}

// FromFloat32 makes an F32 tensor holding a copy of v.
func FromFloat32(v []float32, shape ...int) *Tensor {
	t := &Tensor{DType: F32, Shape: append([]int(nil), shape...), Data: make([]byte, 4*len(v))}
	for i, x := range v {
		binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(x))
	}
	return t
}

// FromFloat64 makes a tensor of dtype dt (any numeric dtype) from v,
// converting each value (integers truncate, bool is v != 0).
func FromFloat64(dt DType, v []float64, shape ...int) *Tensor {
	t := &Tensor{DType: dt, Shape: append([]int(nil), shape...), Data: make([]byte, dt.Size()*len(v))}
	for i, x := range v {
		t.SetFloat64(i, x)
	}
	return t
}

// Float64 returns element i (flat index) converted to float64.
func (t *Tensor) Float64(i int) float64 {
	d := t.Data
	switch t.DType {
	case F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:])))
	case F16:
		return float64(F16Float(binary.LittleEndian.Uint16(d[2*i:])))
	case F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
	case I32:
		return float64(int32(binary.LittleEndian.Uint32(d[4*i:])))
	case I64:
		return float64(int64(binary.LittleEndian.Uint64(d[8*i:])))
	case U8, Bool:
		return float64(d[i])
	case I8:
		return float64(int8(d[i]))
	}
	return math.NaN()
}

// SetFloat64 stores v at flat index i, converted to the tensor's dtype.
func (t *Tensor) SetFloat64(i int, v float64) {
	d := t.Data
	switch t.DType {
	case F32:
		binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(float32(v)))
	case F16:
		binary.LittleEndian.PutUint16(d[2*i:], F16Bits(float32(v)))
	case F64:
		binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(v))
	case I32:
		binary.LittleEndian.PutUint32(d[4*i:], uint32(int32(v)))
	case I64:
		binary.LittleEndian.PutUint64(d[8*i:], uint64(int64(v)))
	case U8:
		d[i] = uint8(v)
	case I8:
		d[i] = uint8(int8(v))
	case Bool:
		if v != 0 {
			d[i] = 1
		} else {
			d[i] = 0
		}
	}
}

// Float64s returns all elements converted to float64.
func (t *Tensor) Float64s() []float64 {
	out := make([]float64, t.Len())
	for i := range out {
		out[i] = t.Float64(i)
	}
	return out
}

// Float32s returns all elements converted to float32.
func (t *Tensor) Float32s() []float32 {
	out := make([]float32, t.Len())
	for i := range out {
		out[i] = float32(t.Float64(i))
	}
	return out
}
