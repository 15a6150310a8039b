package rt

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestFromSliceAs(t *testing.T) {
	check := func(name string, got any, dt DType, wantDT DType, data, wantData []byte) {
		t.Helper()
		if dt != wantDT || !reflect.DeepEqual(data, wantData) {
			t.Errorf("%s: dtype %s data %v, want %s %v", name, dt, data, wantDT, wantData)
		}
	}
	// Little-endian bytes written out by hand, independent of the code under test.
	f32 := FromSlice([]float32{1, -2}, 2)
	check("f32", nil, f32.DType, F32, f32.Data, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0})
	f64 := FromSlice([]float64{0.5})
	check("f64", nil, f64.DType, F64, f64.Data, []byte{0, 0, 0, 0, 0, 0, 0xe0, 0x3f})
	i32 := FromSlice([]int32{-1, 2})
	check("i32", nil, i32.DType, I32, i32.Data, []byte{0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0})
	i64 := FromInt64([]int64{1 << 40, -3}, 2, 1)
	check("i64", nil, i64.DType, I64, i64.Data, []byte{0, 0, 0, 0, 0, 1, 0, 0, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	u8 := FromSlice([]uint8{7, 255})
	check("u8", nil, u8.DType, U8, u8.Data, []byte{7, 255})
	i8 := FromSlice([]int8{-128, 5})
	check("i8", nil, i8.DType, I8, i8.Data, []byte{0x80, 5})
	b := FromSlice([]bool{true, false, true})
	check("bool", nil, b.DType, Bool, b.Data, []byte{1, 0, 1})
	if !reflect.DeepEqual(i64.Shape, []int{2, 1}) || !reflect.DeepEqual(b.Shape, []int{3}) {
		t.Errorf("shapes %v %v", i64.Shape, b.Shape)
	}

	for _, tc := range []struct {
		name string
		got  func() (any, error)
		want any
	}{
		{"f32", func() (any, error) { return As[float32](f32) }, []float32{1, -2}},
		{"f64", func() (any, error) { return As[float64](f64) }, []float64{0.5}},
		{"i32", func() (any, error) { return As[int32](i32) }, []int32{-1, 2}},
		{"i64", func() (any, error) { return As[int64](i64) }, []int64{1 << 40, -3}},
		{"u8", func() (any, error) { return As[uint8](u8) }, []uint8{7, 255}},
		{"i8", func() (any, error) { return As[int8](i8) }, []int8{-128, 5}},
		{"bool", func() (any, error) { return As[bool](b) }, []bool{true, false, true}},
	} {
		got, err := tc.got()
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("As %s = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := As[int64](f32); !errors.Is(err, ErrDType) {
		t.Errorf("As[int64] of f32: %v, want ErrDType", err)
	}
	if _, err := As[float32](nil); err == nil {
		t.Error("As of nil succeeded")
	}
	bad := FromSlice([]float32{1, 2, 3}, 2, 2) // 3 values for 4 elements
	if _, err := As[float32](bad); err == nil || bad.Check() == nil {
		t.Errorf("a malformed tensor passed: %v", err)
	}
}

func TestInt64s(t *testing.T) {
	for _, tc := range []struct {
		t    *Tensor
		want []int64
	}{
		{FromInt64([]int64{math.MaxInt64, math.MinInt64, 0}), []int64{math.MaxInt64, math.MinInt64, 0}},
		{FromSlice([]int32{-5, 7}), []int64{-5, 7}},
		{FromSlice([]uint8{200}), []int64{200}},
		{FromSlice([]int8{-100}), []int64{-100}},
		{FromSlice([]bool{true, false}), []int64{1, 0}},
		{FromSlice([]float32{2.9, -2.9}), []int64{2, -2}},
		{FromSlice([]float64{math.NaN(), 1e300, -1e300}), []int64{0, math.MaxInt64, math.MinInt64}},
	} {
		if got := tc.t.Int64s(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Int64s = %v, want %v", tc.t.DType, got, tc.want)
		}
	}
}
