package onnx

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/model/onnx/onnxpb"
	"github.com/vrun-go/vrun/rt"
)

func dt(t onnxpb.TensorProto_DataType) int32 { return int32(t) }

func TestDecodeTensorTyped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tp    *onnxpb.TensorProto
		dtype rt.DType
		shape []int
		want  []float64
	}{
		{"float", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{2}, FloatData: []float32{1.5, -2}}, rt.F32, []int{2}, []float64{1.5, -2}},
		{"scalar", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), FloatData: []float32{7}}, rt.F32, []int{}, []float64{7}},
		{"double", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_DOUBLE), Dims: []int64{1, 2}, DoubleData: []float64{0.25, 3}}, rt.F64, []int{1, 2}, []float64{0.25, 3}},
		{"int64", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_INT64), Dims: []int64{3}, Int64Data: []int64{-1, 0, 5}}, rt.I64, []int{3}, []float64{-1, 0, 5}},
		{"int32", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_INT32), Dims: []int64{2}, Int32Data: []int32{-7, 9}}, rt.I32, []int{2}, []float64{-7, 9}},
		{"uint8", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT8), Dims: []int64{2}, Int32Data: []int32{0, 255}}, rt.U8, []int{2}, []float64{0, 255}},
		{"int8", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_INT8), Dims: []int64{2}, Int32Data: []int32{-128, 127}}, rt.I8, []int{2}, []float64{-128, 127}},
		{"bool", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_BOOL), Dims: []int64{3}, Int32Data: []int32{0, 1, 2}}, rt.Bool, []int{3}, []float64{0, 1, 1}},
		{"float16", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT16), Dims: []int64{2}, Int32Data: []int32{0x3c00, 0xc000}}, rt.F16, []int{2}, []float64{1, -2}},
		{"bfloat16", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_BFLOAT16), Dims: []int64{2}, Int32Data: []int32{0x3f80, 0xc040}}, rt.F32, []int{2}, []float64{1, -3}},
		{"int16", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_INT16), Dims: []int64{2}, Int32Data: []int32{-300, 300}}, rt.I32, []int{2}, []float64{-300, 300}},
		{"uint16", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT16), Dims: []int64{1}, Int32Data: []int32{65535}}, rt.I32, []int{1}, []float64{65535}},
		{"uint32", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT32), Dims: []int64{1}, Uint64Data: []uint64{4294967295}}, rt.I64, []int{1}, []float64{4294967295}},
		{"uint64", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT64), Dims: []int64{1}, Uint64Data: []uint64{1 << 40}}, rt.I64, []int{1}, []float64{1 << 40}},
		{"empty", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{0, 3}}, rt.F32, []int{0, 3}, []float64{}},
		// raw_data
		{"raw float", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{1}, RawData: binary.LittleEndian.AppendUint32(nil, math.Float32bits(2.5))}, rt.F32, []int{1}, []float64{2.5}},
		{"raw int16", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_INT16), Dims: []int64{2}, RawData: []byte{0xff, 0xff, 0x02, 0x00}}, rt.I32, []int{2}, []float64{-1, 2}},
		{"raw uint16", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT16), Dims: []int64{1}, RawData: []byte{0xff, 0xff}}, rt.I32, []int{1}, []float64{65535}},
		{"raw uint32", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT32), Dims: []int64{1}, RawData: []byte{0xff, 0xff, 0xff, 0xff}}, rt.I64, []int{1}, []float64{4294967295}},
		{"raw bf16", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_BFLOAT16), Dims: []int64{1}, RawData: []byte{0x80, 0x3f}}, rt.F32, []int{1}, []float64{1}},
		{"raw bool", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_BOOL), Dims: []int64{2}, RawData: []byte{0, 7}}, rt.Bool, []int{2}, []float64{0, 1}},
		{"raw scalar i64", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_INT64), RawData: binary.LittleEndian.AppendUint64(nil, 42)}, rt.I64, []int{}, []float64{42}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := DecodeTensor(tc.tp, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Check(); err != nil {
				t.Fatal(err)
			}
			if x.DType != tc.dtype || !reflect.DeepEqual(x.Shape, tc.shape) {
				t.Fatalf("got %s%v, want %s%v", x.DType, x.Shape, tc.dtype, tc.shape)
			}
			if got := x.Float64s(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecodeTensorErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		tp          *onnxpb.TensorProto
		unsupported bool
		msg         string
	}{
		{"string", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_STRING), Dims: []int64{1}, StringData: [][]byte{[]byte("a")}}, true, "STRING"},
		{"complex", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_COMPLEX64), Dims: []int64{1}}, true, "COMPLEX64"},
		{"float8", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT8E4M3FN), Dims: []int64{1}, RawData: []byte{1}}, true, "FLOAT8E4M3FN"},
		{"undefined", &onnxpb.TensorProto{Dims: []int64{1}}, false, "no data type"},
		{"short", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{3}, FloatData: []float32{1}}, false, "has 1 elements, want 3"},
		{"raw short", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{2}, RawData: []byte{1, 2, 3}}, false, "3 raw bytes, want 8"},
		{"neg dim", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{-1}}, false, "dim 0 is -1"},
		{"overflow", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{1 << 40, 1 << 40}}, false, "too many"},
		{"uint8 range", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT8), Dims: []int64{1}, Int32Data: []int32{256}}, false, "out of range"},
		{"uint64 range", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT64), Dims: []int64{1}, Uint64Data: []uint64{1 << 63}}, false, "out of range"},
		{"uint32 range", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT32), Dims: []int64{1}, Uint64Data: []uint64{1 << 32}}, false, "out of range"},
		{"raw uint64 range", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_UINT64), Dims: []int64{1}, RawData: []byte{0, 0, 0, 0, 0, 0, 0, 0x80}}, false, "out of range"},
		{"both", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{1}, RawData: []byte{0, 0, 0, 0}, FloatData: []float32{1}}, false, "both"},
		{"segment", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Segment: &onnxpb.TensorProto_Segment{}}, true, "segment"},
		{"external no base", &onnxpb.TensorProto{DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{1}, DataLocation: onnxpb.TensorProto_EXTERNAL,
			ExternalData: []*onnxpb.StringStringEntryProto{{Key: "location", Value: "w.bin"}}}, false, "no base directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeTensor(tc.tp, "")
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported || errors.Is(err, ErrInvalid) == tc.unsupported {
				t.Errorf("error %v: unsupported=%v, want %v", err, errors.Is(err, ErrUnsupported), tc.unsupported)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", err, tc.msg)
			}
		})
	}
}

func external(loc string, kv ...string) *onnxpb.TensorProto {
	tp := &onnxpb.TensorProto{Name: "w", DataType: dt(onnxpb.TensorProto_FLOAT), Dims: []int64{2}, DataLocation: onnxpb.TensorProto_EXTERNAL,
		ExternalData: []*onnxpb.StringStringEntryProto{{Key: "location", Value: loc}}}
	for i := 0; i+1 < len(kv); i += 2 {
		tp.ExternalData = append(tp.ExternalData, &onnxpb.StringStringEntryProto{Key: kv[i], Value: kv[i+1]})
	}
	return tp
}

func TestDecodeTensorExternal(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "model")
	if err := os.MkdirAll(filepath.Join(base, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 0, 16)
	for _, f := range []float32{9, 1, 2, 3} {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(f))
	}
	if err := os.WriteFile(filepath.Join(base, "sub", "w.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.bin"), data[:8], 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := DecodeTensor(external("sub/w.bin", "offset", "4", "length", "8"), base)
	if err != nil {
		t.Fatal(err)
	}
	if got := x.Float64s(); !reflect.DeepEqual(got, []float64{1, 2}) {
		t.Fatalf("got %v", got)
	}
	if x, err = DecodeTensor(external("sub/w.bin", "offset", "8"), base); err != nil || x.Float64s()[1] != 3 {
		t.Fatalf("to end: %v %v", x, err)
	}
	symlinkOK := os.Symlink(filepath.Join(dir, "secret.bin"), filepath.Join(base, "link.bin")) == nil
	for _, tc := range []struct {
		tp  *onnxpb.TensorProto
		msg string
	}{
		{external("../secret.bin"), "escapes"},
		{external("/etc/passwd"), "escapes"},
		{external("sub/../../secret.bin"), "escapes"},
		{external("missing.bin"), "missing.bin"},
		{external("sub/w.bin", "offset", "20"), "beyond"},
		{external("sub/w.bin", "offset", "12", "length", "8"), "beyond"},
		{external("sub/w.bin", "length", "12"), "needs 8 bytes"},
		{external("sub/w.bin", "offset", "-1"), "bad offset"},
		{external("sub/w.bin", "offset", "x"), "bad offset"},
		{external(""), "no location"},
	} {
		_, err := DecodeTensor(tc.tp, base)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: error %v, want %q", tc.tp.ExternalData, err, tc.msg)
		}
	}
	if symlinkOK {
		if _, err := DecodeTensor(external("link.bin"), base); err == nil {
			t.Error("a symbolic link out of the base directory was followed")
		}
	}
}
