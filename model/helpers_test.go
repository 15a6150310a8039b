package model

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// mlpModel is a small 2-layer MLP with a dynamic batch dim.
func mlpModel(tb testing.TB) *Model {
	tb.Helper()
	b := NewBuilder()
	b.Meta("producer", "vrun test")
	b.Meta("description", "2-layer MLP")
	x := b.Input("x", rt.F32, -1, 8)
	b.DimNames(x, "batch", "")
	w1 := b.Weight("fc1.w", rt.F32, []int64{8, 4}, seqF32(32))
	b1 := b.Weight("fc1.b", rt.F32, []int64{4}, seqF32(4))
	w2 := b.Weight("fc2.w", rt.F32, []int64{4, 3}, seqF32(12))
	h := b.Op("Gemm", []string{x, w1, b1}, Attrs{"alpha": 1.0, "beta": 1.0})
	h = b.Op("Relu", []string{h}, nil)
	y := b.Op("MatMul", []string{h, w2}, nil)
	b.SetType(y, rt.F32, -1, 3)
	b.Output(y)
	m, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// allKindsModel uses every dtype, role, attribute kind and optional
// feature of the format.
func allKindsModel(tb testing.TB) *Model {
	tb.Helper()
	b := NewBuilder()
	b.Meta("labels", "cat\ndog\n\u00e9l\u00e9phant")
	b.Meta("empty", "")
	x := b.Input("x", rt.F32, -1, -1, 3)
	b.DimNames(x, "batch", "seq", "")
	ids := b.Input("ids", rt.I64, 2)
	scalar := b.Input("s", rt.F64)
	ws := []string{
		b.Weight("w.f32", rt.F32, []int64{3}, []float32{1, -2.5, float32(math.Inf(1))}),
		b.Weight("w.f16", rt.F16, []int64{2, 2}, []float32{1, 0.5, -2, 65504}),
		b.Weight("w.f16bits", rt.F16, []int64{1}, []uint16{0x3c00}),
		b.Weight("w.f64", rt.F64, []int64{2}, []float64{math.Pi, -0.0}),
		b.Weight("w.i32", rt.I32, []int64{2, 1}, []int32{-7, 1 << 30}),
		b.Weight("w.i64", rt.I64, []int64{3}, []int64{math.MinInt64, 0, math.MaxInt64}),
		b.Weight("w.u8", rt.U8, []int64{5}, []byte{0, 1, 2, 254, 255}),
		b.Weight("w.bool", rt.Bool, []int64{3}, []bool{true, false, true}),
		b.Weight("w.i8", rt.I8, []int64{2}, []int8{-128, 127}),
		b.Weight("w.empty", rt.F32, []int64{0, 4}, []float32{}),
		b.Weight("w.scalar", rt.F32, nil, []float32{42}),
		b.Weight("w.big", rt.U8, []int64{100}, make([]byte, 100)),
	}
	a := b.Op("Custom", append([]string{x, "", ids, scalar}, ws...), Attrs{
		"i":     7,
		"i32":   int32(-3),
		"i64":   int64(math.MinInt64),
		"flag":  true,
		"f32":   float32(0.25),
		"f64":   math.NaN(),
		"s":     "same",
		"is":    []int{1, -1, 3},
		"is32":  []int32{},
		"is64":  []int64{math.MaxInt64},
		"fs32":  []float32{0.5},
		"fs64":  []float64{math.Inf(-1), 1e300},
		"ss":    []string{"a", "", "\u4e2d"},
		"raw":   Attr{Kind: AttrInt, Int: 9},
		"empty": []string(nil),
	})
	outs := b.OpN("Split", []string{a}, 3, Attrs{"axis": 0})
	b.Node("dropout", "Dropout", []string{outs[0]}, []string{"dropped", ""}, nil)
	b.SetType("dropped", rt.F32, -1, 3)
	b.DimNames("dropped", "batch", "")
	b.Output("dropped", outs[2])
	m, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// tinyModel is the model of the worked example in docs/format.md.
func tinyModel(tb testing.TB) *Model {
	tb.Helper()
	b := NewBuilder()
	x := b.Input("x", rt.F32, 2)
	w := b.Weight("w", rt.F32, []int64{2}, []float32{1, 2})
	y := b.Op("Add", []string{x, w}, nil)
	b.Output(y)
	m, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func testModels(tb testing.TB) map[string]*Model {
	return map[string]*Model{
		"empty": {},
		"tiny":  tinyModel(tb),
		"mlp":   mlpModel(tb),
		"all":   allKindsModel(tb),
	}
}

func seqF32(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)*0.5 - 3
	}
	return v
}

func encode(tb testing.TB, m *Model) []byte {
	tb.Helper()
	var buf bytes.Buffer
	n, err := m.WriteTo(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	if n != int64(buf.Len()) {
		tb.Fatalf("WriteTo returned %d, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

// encodeRaw encodes m without validating it.
func encodeRaw(tb testing.TB, m *Model) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if _, err := writeModel(&buf, m); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// fixCRC recomputes both checksums of a file in place, where its header
// allows.
func fixCRC(b []byte) {
	if len(b) < HeaderSize {
		return
	}
	ts := le.Uint64(b[hdrTablesSize:])
	if ts <= uint64(len(b)-HeaderSize) {
		le.PutUint32(b[hdrTablesCRC:], tablesCRC(b, b[HeaderSize:HeaderSize+int(ts)]))
	}
	wo, wl := le.Uint64(b[hdrWeightsOff:]), le.Uint64(b[hdrWeightsLen:])
	if wo <= uint64(len(b)) && wl <= uint64(len(b))-wo {
		le.PutUint32(b[hdrWeightsCRC:], crc32.Checksum(b[wo:wo+wl], castagnoli))
	}
}

// diffModels returns "" if a and b hold the same model (nil and empty
// slices are the same; floats compare by bits), or the first difference.
func diffModels(a, b *Model) string {
	if len(a.Meta) != len(b.Meta) {
		return fmt.Sprintf("meta: %d vs %d entries", len(a.Meta), len(b.Meta))
	}
	for i := range a.Meta {
		if a.Meta[i] != b.Meta[i] {
			return fmt.Sprintf("meta %d: %q vs %q", i, a.Meta[i], b.Meta[i])
		}
	}
	if len(a.Tensors) != len(b.Tensors) {
		return fmt.Sprintf("tensors: %d vs %d", len(a.Tensors), len(b.Tensors))
	}
	for i := range a.Tensors {
		x, y := &a.Tensors[i], &b.Tensors[i]
		if x.Name != y.Name || x.DType != y.DType || x.Role != y.Role ||
			!slices.Equal(x.Shape, y.Shape) || !slices.Equal(x.DimNames, y.DimNames) || !bytes.Equal(x.Data, y.Data) {
			return fmt.Sprintf("tensor %d: %+v vs %+v", i, *x, *y)
		}
	}
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Sprintf("nodes: %d vs %d", len(a.Nodes), len(b.Nodes))
	}
	for i := range a.Nodes {
		x, y := &a.Nodes[i], &b.Nodes[i]
		if x.Name != y.Name || x.Op != y.Op || !slices.Equal(x.Inputs, y.Inputs) || !slices.Equal(x.Outputs, y.Outputs) || len(x.Attrs) != len(y.Attrs) {
			return fmt.Sprintf("node %d: %+v vs %+v", i, *x, *y)
		}
		for k := range x.Attrs {
			if !eqAttr(&x.Attrs[k], &y.Attrs[k]) {
				return fmt.Sprintf("node %d attr %d: %+v vs %+v", i, k, x.Attrs[k], y.Attrs[k])
			}
		}
	}
	return ""
}

func eqAttr(a, b *Attr) bool {
	if a.Name != b.Name || a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case AttrInt:
		return a.Int == b.Int
	case AttrFloat:
		return math.Float64bits(a.Float) == math.Float64bits(b.Float)
	case AttrString:
		return a.Str == b.Str
	case AttrInts:
		return slices.Equal(a.Ints, b.Ints)
	case AttrFloats:
		if len(a.Floats) != len(b.Floats) {
			return false
		}
		for i := range a.Floats {
			if math.Float64bits(a.Floats[i]) != math.Float64bits(b.Floats[i]) {
				return false
			}
		}
		return true
	case AttrStrings:
		return slices.Equal(a.Strings, b.Strings)
	}
	return false
}
