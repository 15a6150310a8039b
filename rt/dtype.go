package rt

import (
	"fmt"
	"math"
	"strings"

	"github.com/x448/float16"
)

// DType is the element type of a tensor.
type DType uint8

// The element types vrun supports. The numeric values are part of the
// model.bin format and must never change.
const (
	InvalidDType DType = 0
	F32          DType = 1
	F16          DType = 2
	F64          DType = 3
	I32          DType = 4
	I64          DType = 5
	U8           DType = 6 // unsigned byte
	Bool         DType = 7 // one byte, 0 or 1
	I8           DType = 8
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	InvalidDType: {"invalid", 0},
	F32:          {"f32", 4},
	F16:          {"f16", 2},
	F64:          {"f64", 8},
	I32:          {"i32", 4},
	I64:          {"i64", 8},
	U8:           {"u8", 1},
	Bool:         {"bool", 1},
	I8:           {"i8", 1},
}

// Valid reports whether d is a known dtype.
func (d DType) Valid() bool { return d > InvalidDType && int(d) < len(dtypeInfo) }

// Size is the size of one element in bytes; 0 for an invalid dtype.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// String returns the short name used by vrun: "f32", "f16", "i64", ...
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return dtypeInfo[d].name
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == F64 }

// IsInt reports whether d is an integer type (bool excluded).
func (d DType) IsInt() bool { return d == I32 || d == I64 || d == U8 || d == I8 }

// ParseDType parses a dtype name as String prints it ("f32"), also
// accepting the common long forms ("float32", "int64", "float16").
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "f32", "float32", "float":
		return F32, nil
	case "f16", "float16", "half":
		return F16, nil
	case "f64", "float64", "double":
		return F64, nil
	case "i32", "int32":
		return I32, nil
	case "i64", "int64":
		return I64, nil
	case "u8", "uint8":
		return U8, nil
	case "i8", "int8":
		return I8, nil
	case "bool":
		return Bool, nil
	}
	return InvalidDType, fmt.Errorf("rt: unknown dtype %q", s)
}

// F16Bits converts f to IEEE 754 binary16 bits (round to nearest even).
func F16Bits(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// F16Float converts IEEE 754 binary16 bits to float32 exactly.
func F16Float(b uint16) float32 { return float16.Frombits(b).Float32() }

// NumElements returns the product of shape, or -1 if any dim is negative or
// the product overflows int64.
func NumElements(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		if d != 0 && n > math.MaxInt64/int64(d) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

// ContiguousStrides returns row-major element strides for shape.
func ContiguousStrides(shape []int) []int {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= shape[i]
	}
	return st
}

// FloatToInt converts v to an integer by truncation toward zero, with NaN
// as 0 and saturation at the int64 range (Go leaves out-of-range
// conversions implementation-defined). Every backend converts floats to
// integers this way, then wraps to the narrower integer dtypes.
func FloatToInt(v float64) int64 {
	switch {
	case v != v:
		return 0
	case v >= 9.223372036854775807e18:
		return math.MaxInt64
	case v <= -9.223372036854775808e18:
		return math.MinInt64
	}
	return int64(v)
}

// FillBits returns v converted to dtype dt as the element's bit pattern,
// zero-extended to 64 bits: what Fill writes. Integer dtypes convert with
// FloatToInt and wrap; Bool is 1 for any non-zero v (NaN included).
func FillBits(dt DType, v float64) uint64 {
	switch dt {
	case F32:
		return uint64(math.Float32bits(float32(v)))
	case F16:
		return uint64(F16Bits(float32(v)))
	case F64:
		return math.Float64bits(v)
	case I32:
		return uint64(uint32(int32(FloatToInt(v))))
	case I64:
		return uint64(FloatToInt(v))
	case U8, I8:
		return uint64(uint8(FloatToInt(v)))
	case Bool:
		if v != 0 {
			return 1
		}
	}
	return 0
}
