package onnx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/vrun-go/vrun/model/onnx/onnxpb"
	"github.com/vrun-go/vrun/rt"
)

// ErrUnsupported is wrapped by every error that reports a valid ONNX
// feature vrun does not handle (an element type, an operator, a domain, a
// subgraph, ...), as opposed to a malformed model. Test with errors.Is.
var ErrUnsupported = errors.New("unsupported by vrun")

// ErrInvalid is wrapped by every error that reports a malformed model or
// tensor: bad protobuf, inconsistent lengths, dangling names, cycles.
var ErrInvalid = errors.New("invalid ONNX")

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// DataTypeName returns the ONNX name of a TensorProto data type ("FLOAT",
// "INT64", ...), or "DataType(n)" for an unknown code.
func DataTypeName(dt int32) string {
	if s, ok := onnxpb.TensorProto_DataType_name[dt]; ok {
		return s
	}
	return fmt.Sprintf("DataType(%d)", dt)
}

// DType maps an ONNX element type to the vrun dtype that holds it
// natively, and reports false for types without an exact vrun equivalent
// (INT16, UINT16, UINT32, UINT64, BFLOAT16, STRING, the complex, 8-, 4- and
// 2-bit types). Graph inputs must have such a native type; weights of the
// other integer types and BFLOAT16 are converted by [DecodeTensor].
func DType(dt int32) (rt.DType, bool) {
	switch onnxpb.TensorProto_DataType(dt) {
	case onnxpb.TensorProto_FLOAT:
		return rt.F32, true
	case onnxpb.TensorProto_FLOAT16:
		return rt.F16, true
	case onnxpb.TensorProto_DOUBLE:
		return rt.F64, true
	case onnxpb.TensorProto_INT32:
		return rt.I32, true
	case onnxpb.TensorProto_INT64:
		return rt.I64, true
	case onnxpb.TensorProto_UINT8:
		return rt.U8, true
	case onnxpb.TensorProto_INT8:
		return rt.I8, true
	case onnxpb.TensorProto_BOOL:
		return rt.Bool, true
	}
	return rt.InvalidDType, false
}

// ONNXType is the inverse of [DType]: the ONNX TensorProto data type code
// of a vrun dtype, or 0 (UNDEFINED).
func ONNXType(d rt.DType) int32 {
	switch d {
	case rt.F32:
		return int32(onnxpb.TensorProto_FLOAT)
	case rt.F16:
		return int32(onnxpb.TensorProto_FLOAT16)
	case rt.F64:
		return int32(onnxpb.TensorProto_DOUBLE)
	case rt.I32:
		return int32(onnxpb.TensorProto_INT32)
	case rt.I64:
		return int32(onnxpb.TensorProto_INT64)
	case rt.U8:
		return int32(onnxpb.TensorProto_UINT8)
	case rt.I8:
		return int32(onnxpb.TensorProto_INT8)
	case rt.Bool:
		return int32(onnxpb.TensorProto_BOOL)
	}
	return 0
}

// decodedType returns the vrun dtype DecodeTensor produces for an ONNX
// element type: the native one, or the widened one for INT16/UINT16 (i32),
// UINT32/UINT64 (i64) and BFLOAT16 (f32).
func decodedType(dt int32) (rt.DType, error) {
	if d, ok := DType(dt); ok {
		return d, nil
	}
	switch onnxpb.TensorProto_DataType(dt) {
	case onnxpb.TensorProto_INT16, onnxpb.TensorProto_UINT16:
		return rt.I32, nil
	case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		return rt.I64, nil
	case onnxpb.TensorProto_BFLOAT16:
		return rt.F32, nil
	case onnxpb.TensorProto_UNDEFINED:
		return rt.InvalidDType, invalidf("tensor has no data type")
	}
	return rt.InvalidDType, unsupportedf("element type %s", DataTypeName(dt))
}

// rawSize is the size in bytes of one element of ONNX type dt in raw_data.
func rawSize(dt int32) int {
	switch onnxpb.TensorProto_DataType(dt) {
	case onnxpb.TensorProto_UINT8, onnxpb.TensorProto_INT8, onnxpb.TensorProto_BOOL:
		return 1
	case onnxpb.TensorProto_INT16, onnxpb.TensorProto_UINT16, onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
		return 2
	case onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_INT32, onnxpb.TensorProto_UINT32:
		return 4
	case onnxpb.TensorProto_DOUBLE, onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT64:
		return 8
	}
	return 0
}

// DecodeTensor converts an ONNX TensorProto to a host tensor.
//
// Supported element types: FLOAT, FLOAT16, DOUBLE, INT32, INT64, UINT8,
// INT8 and BOOL map to the same vrun dtype; INT16 and UINT16 widen to i32,
// UINT32 and UINT64 to i64 (a UINT64 value above MaxInt64 is an error), and
// BFLOAT16 to f32, all exactly. Other types (STRING, COMPLEX64/128, the
// FLOAT8, 4-bit and 2-bit types) give an error wrapping [ErrUnsupported].
//
// The data may be in raw_data (little-endian), in the typed field the ONNX
// schema assigns to the type (float_data; int32_data, which also holds
// FLOAT16/BFLOAT16 bit patterns, BOOL, 8- and 16-bit integers; int64_data;
// double_data; uint64_data, which holds UINT32 and UINT64), or external
// (data_location EXTERNAL): the file named by the "location" key, relative
// to baseDir, from byte "offset" for "length" bytes (default: to the end).
// The location must stay inside baseDir (no absolute paths, no "..", no
// symbolic link leading out); an empty baseDir refuses external data.
//
// The element count given by dims must match the data exactly; a tensor
// with no dims is a scalar. Errors that are not ErrUnsupported wrap
// [ErrInvalid], except I/O errors reading external data.
func DecodeTensor(tp *onnxpb.TensorProto, baseDir string) (*rt.Tensor, error) {
	t, err := decodeTensor(tp, baseDir)
	if err != nil {
		if tp.GetName() != "" {
			return nil, fmt.Errorf("tensor %q: %w", tp.GetName(), err)
		}
		return nil, err
	}
	return t, nil
}

func decodeTensor(tp *onnxpb.TensorProto, baseDir string) (*rt.Tensor, error) {
	dt := tp.GetDataType()
	out, err := decodedType(dt)
	if err != nil {
		return nil, err
	}
	if tp.Segment != nil {
		return nil, unsupportedf("segmented tensors")
	}
	shape := make([]int, len(tp.Dims))
	for i, d := range tp.Dims {
		if d < 0 {
			return nil, invalidf("dims %v: dim %d is %d", tp.Dims, i, d)
		}
		shape[i] = int(d)
	}
	n := rt.NumElements(shape)
	if n < 0 || n > math.MaxInt/8 {
		return nil, invalidf("dims %v: too many elements", tp.Dims)
	}
	t := &rt.Tensor{DType: out, Shape: shape}
	count := func(have int) error {
		if int64(have) != n {
			return invalidf("%s tensor with dims %v has %d elements, want %d", DataTypeName(dt), tp.Dims, have, n)
		}
		return nil
	}

	raw := tp.RawData
	hasRaw := raw != nil
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		if hasRaw {
			return nil, invalidf("external tensor also has raw_data")
		}
		raw, err = readExternal(tp, baseDir, n*int64(rawSize(dt)))
		if err != nil {
			return nil, err
		}
		hasRaw = true
	}
	if hasRaw {
		if len(tp.FloatData)+len(tp.Int32Data)+len(tp.Int64Data)+len(tp.DoubleData)+len(tp.Uint64Data)+len(tp.StringData) != 0 {
			return nil, invalidf("tensor has both raw_data and a typed data field")
		}
		sz := rawSize(dt)
		if int64(len(raw)) != n*int64(sz) {
			return nil, invalidf("%s tensor with dims %v has %d raw bytes, want %d", DataTypeName(dt), tp.Dims, len(raw), n*int64(sz))
		}
		return t, fromRaw(t, dt, raw)
	}

	switch onnxpb.TensorProto_DataType(dt) {
	case onnxpb.TensorProto_FLOAT:
		if err := count(len(tp.FloatData)); err != nil {
			return nil, err
		}
		t.Data = make([]byte, 4*n)
		for i, v := range tp.FloatData {
			binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(v))
		}
	case onnxpb.TensorProto_DOUBLE:
		if err := count(len(tp.DoubleData)); err != nil {
			return nil, err
		}
		t.Data = make([]byte, 8*n)
		for i, v := range tp.DoubleData {
			binary.LittleEndian.PutUint64(t.Data[8*i:], math.Float64bits(v))
		}
	case onnxpb.TensorProto_INT64:
		if err := count(len(tp.Int64Data)); err != nil {
			return nil, err
		}
		t.Data = make([]byte, 8*n)
		for i, v := range tp.Int64Data {
			binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(v))
		}
	case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		if err := count(len(tp.Uint64Data)); err != nil {
			return nil, err
		}
		limit := uint64(math.MaxInt64)
		if dt == int32(onnxpb.TensorProto_UINT32) {
			limit = math.MaxUint32
		}
		t.Data = make([]byte, 8*n)
		for i, v := range tp.Uint64Data {
			if v > limit {
				return nil, rangeErr(dt, i, strconv.FormatUint(v, 10))
			}
			binary.LittleEndian.PutUint64(t.Data[8*i:], v)
		}
	default:
		// Everything else lives in int32_data, one element per int32.
		if err := count(len(tp.Int32Data)); err != nil {
			return nil, err
		}
		lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
		switch onnxpb.TensorProto_DataType(dt) {
		case onnxpb.TensorProto_UINT8:
			lo, hi = 0, math.MaxUint8
		case onnxpb.TensorProto_INT8:
			lo, hi = math.MinInt8, math.MaxInt8
		case onnxpb.TensorProto_INT16:
			lo, hi = math.MinInt16, math.MaxInt16
		case onnxpb.TensorProto_UINT16, onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
			lo, hi = 0, math.MaxUint16
		}
		t.Data = make([]byte, int(n)*out.Size())
		for i, v := range tp.Int32Data {
			if dt == int32(onnxpb.TensorProto_BOOL) {
				if v != 0 {
					t.Data[i] = 1
				}
				continue
			}
			if int64(v) < lo || int64(v) > hi {
				return nil, rangeErr(dt, i, strconv.Itoa(int(v)))
			}
			switch onnxpb.TensorProto_DataType(dt) {
			case onnxpb.TensorProto_UINT8, onnxpb.TensorProto_INT8:
				t.Data[i] = byte(v)
			case onnxpb.TensorProto_FLOAT16:
				binary.LittleEndian.PutUint16(t.Data[2*i:], uint16(v))
			case onnxpb.TensorProto_BFLOAT16:
				binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(v)<<16)
			default: // INT32, INT16, UINT16 -> i32
				binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(v))
			}
		}
	}
	return t, nil
}

func rangeErr(dt int32, i int, v string) error {
	return invalidf("%s element %d is %s, out of range", DataTypeName(dt), i, v)
}

// fromRaw fills t.Data from little-endian raw data of ONNX type dt, whose
// length has been checked.
func fromRaw(t *rt.Tensor, dt int32, raw []byte) error {
	n := t.Len()
	switch onnxpb.TensorProto_DataType(dt) {
	case onnxpb.TensorProto_BOOL:
		t.Data = make([]byte, n)
		for i, b := range raw {
			if b != 0 {
				t.Data[i] = 1
			}
		}
	case onnxpb.TensorProto_INT16:
		t.Data = make([]byte, 4*n)
		for i := range n {
			v := int32(int16(binary.LittleEndian.Uint16(raw[2*i:])))
			binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(v))
		}
	case onnxpb.TensorProto_UINT16:
		t.Data = make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(binary.LittleEndian.Uint16(raw[2*i:])))
		}
	case onnxpb.TensorProto_BFLOAT16:
		t.Data = make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(binary.LittleEndian.Uint16(raw[2*i:]))<<16)
		}
	case onnxpb.TensorProto_UINT32:
		t.Data = make([]byte, 8*n)
		for i := range n {
			binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	case onnxpb.TensorProto_UINT64:
		for i := range n {
			if v := binary.LittleEndian.Uint64(raw[8*i:]); v > math.MaxInt64 {
				return rangeErr(dt, i, strconv.FormatUint(v, 10))
			}
		}
		t.Data = append([]byte(nil), raw...)
	default:
		// Same layout: copy, so that t does not alias the protobuf buffer.
		t.Data = append([]byte(nil), raw...)
	}
	if t.Data == nil {
		t.Data = []byte{}
	}
	return nil
}

// readExternal reads the data of an external tensor; want is the expected
// byte count (checked by the caller against the data it returns).
func readExternal(tp *onnxpb.TensorProto, baseDir string, want int64) ([]byte, error) {
	var loc string
	offset, length := int64(0), int64(-1)
	for _, kv := range tp.ExternalData {
		var err error
		switch kv.GetKey() {
		case "location":
			loc = kv.GetValue()
		case "offset":
			offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		}
		if err != nil || offset < 0 || length < -1 {
			return nil, invalidf("external data: bad %s %q", kv.GetKey(), kv.GetValue())
		}
	}
	if loc == "" {
		return nil, invalidf("external data has no location")
	}
	if baseDir == "" {
		return nil, invalidf("external data %q: no base directory (use ImportFile or Options.BaseDir)", loc)
	}
	rel := filepath.FromSlash(loc)
	if !filepath.IsLocal(rel) {
		return nil, invalidf("external data location %q escapes the model directory", loc)
	}
	root, err := os.OpenRoot(baseDir)
	if err != nil {
		return nil, fmt.Errorf("external data %q: %w", loc, err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		// os.Root refuses symbolic links that leave baseDir.
		return nil, fmt.Errorf("external data %q (base %s): %w", loc, baseDir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("external data %q: %w", loc, err)
	}
	size := st.Size()
	if offset > size {
		return nil, invalidf("external data %q: offset %d beyond the file's %d bytes", loc, offset, size)
	}
	if length < 0 {
		length = size - offset
	}
	if length > size-offset {
		return nil, invalidf("external data %q: offset %d + length %d beyond the file's %d bytes", loc, offset, length, size)
	}
	if length != want {
		return nil, invalidf("external data %q: length %d, the tensor needs %d bytes", loc, length, want)
	}
	buf := make([]byte, length)
	if _, err := f.ReadAt(buf, offset); err != nil && !(errors.Is(err, io.EOF) && length == 0) {
		return nil, fmt.Errorf("external data %q: %w", loc, err)
	}
	return buf, nil
}
