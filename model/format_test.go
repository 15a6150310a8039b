package model

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

func TestRoundTrip(t *testing.T) {
	for name, m := range testModels(t) {
		t.Run(name, func(t *testing.T) {
			b := encode(t, m)
			if string(b[:8]) != Magic {
				t.Fatalf("magic %q", b[:8])
			}
			m2, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffModels(m, m2); d != "" {
				t.Fatal(d)
			}
			// Deterministic and canonical: re-encoding gives the same bytes.
			if b2 := encode(t, m2); !bytes.Equal(b, b2) {
				t.Fatal("re-encoding the decoded model changed the bytes")
			}
			if b3 := encode(t, m); !bytes.Equal(b, b3) {
				t.Fatal("encoding twice gave different bytes")
			}
		})
	}
}

func TestAllKindsCovered(t *testing.T) {
	m := allKindsModel(t)
	dtypes := map[rt.DType]bool{}
	roles := map[Role]bool{}
	kinds := map[AttrKind]bool{}
	for _, tt := range m.Tensors {
		dtypes[tt.DType] = true
		roles[tt.Role] = true
	}
	for _, n := range m.Nodes {
		for _, a := range n.Attrs {
			kinds[a.Kind] = true
		}
	}
	for d := rt.DType(1); d.Valid(); d++ {
		if !dtypes[d] {
			t.Errorf("dtype %s not covered", d)
		}
	}
	if !dtypes[rt.InvalidDType] {
		t.Error("unknown dtype not covered")
	}
	for r := Intermediate; r <= Weight; r++ {
		if !roles[r] {
			t.Errorf("role %s not covered", r)
		}
	}
	for k := AttrInt; k <= AttrStrings; k++ {
		if !kinds[k] {
			t.Errorf("attr kind %d not covered", k)
		}
	}
	// Spot-check conversions.
	f16 := m.Tensors[m.TensorIndex("w.f16")].Data
	if got := rt.F16Float(le.Uint16(f16[2:])); got != 0.5 {
		t.Errorf("f16 element 1 = %v", got)
	}
	n := m.Nodes[0]
	if a, ok := n.Attr("flag"); !ok || a.Kind != AttrInt || a.Int != 1 {
		t.Errorf("flag attr = %+v", a)
	}
	for k := 1; k < len(n.Attrs); k++ {
		if n.Attrs[k-1].Name >= n.Attrs[k].Name {
			t.Errorf("attrs not sorted: %q before %q", n.Attrs[k-1].Name, n.Attrs[k].Name)
		}
	}
}

// weightOffsets parses the data offsets out of an encoded file.
func weightOffsets(t *testing.T, b []byte) []uint64 {
	t.Helper()
	h, err := parseHeader(b, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	d := &decoder{b: b, off: HeaderSize, end: HeaderSize + int(h.tablesSize)}
	m, _ := d.tables(h)
	if d.err != nil {
		t.Fatal(d.err)
	}
	var offs []uint64
	for _, tt := range m.Tensors {
		if tt.Role == Weight {
			offs = append(offs, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(tt.Data)))-uintptr(unsafe.Pointer(unsafe.SliceData(b)))))
		}
	}
	return offs
}

func TestWeightAlignment(t *testing.T) {
	for name, m := range testModels(t) {
		b := encode(t, m)
		if h, _ := parseHeader(b, int64(len(b))); h.weightsOff%Alignment != 0 {
			t.Errorf("%s: weights region at %d", name, h.weightsOff)
		}
		for i, off := range weightOffsets(t, b) {
			if off%Alignment != 0 {
				t.Errorf("%s: weight %d at offset %d", name, i, off)
			}
		}
	}
}

func writeTemp(t *testing.T, m *Model) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.bin")
	if err := WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadMmapVsRead(t *testing.T) {
	m := allKindsModel(t)
	path := writeTemp(t, m)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, encode(t, m)) {
		t.Fatal("WriteFile and WriteTo differ")
	}
	if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
	mapped, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	if runtime.GOOS == "linux" || runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		if mapped.closer == nil {
			t.Error("Load did not memory-map the file")
		}
	}
	plain, err := Load(path, UseMmap(false))
	if err != nil {
		t.Fatal(err)
	}
	if plain.closer != nil {
		t.Error("UseMmap(false) still mapped")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	read, err := Read(f, int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]*Model{"mapped": mapped, "plain": plain, "read": read} {
		if d := diffModels(m, got); d != "" {
			t.Errorf("%s: %s", name, d)
		}
		for _, tt := range got.Tensors {
			if tt.Role == Weight && len(tt.Data) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(tt.Data)))%Alignment != 0 {
				t.Errorf("%s: weight %q not %d-byte aligned in memory", name, tt.Name, Alignment)
			}
		}
	}
}

func TestCloseIdempotent(t *testing.T) {
	path := writeTemp(t, mlpModel(t))
	for _, mm := range []bool{true, false} {
		m, err := Load(path, UseMmap(mm))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := m.Close(); err != nil {
				t.Fatalf("mmap=%v: Close: %v", mm, err)
			}
		}
		if mm && m.closer == nil {
			// After unmapping, weights no longer point into the mapping.
			for _, tt := range m.Tensors {
				if tt.Role == Weight && tt.Data != nil {
					t.Errorf("weight %q still holds data after Close", tt.Name)
				}
			}
		}
	}
	var zero Model
	if err := zero.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	for _, mm := range []bool{true, false} {
		path := filepath.Join(dir, "bad.bin")
		b := encode(t, mlpModel(t))
		b[len(b)-1] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, UseMmap(mm))
		var fe *FormatError
		if !errors.As(err, &fe) || !errors.Is(err, ErrChecksum) || fe.Path != path || !strings.HasPrefix(err.Error(), path+": header at byte 44: weights checksum") {
			t.Errorf("mmap=%v: %v", mm, err)
		}
		// Close the model: on Windows a mapped file can be neither
		// rewritten (the next iteration) nor removed (TempDir's cleanup).
		m, err := Load(path, UseMmap(mm), VerifyWeights(false))
		if err != nil {
			t.Errorf("mmap=%v, VerifyWeights(false): %v", mm, err)
		} else if err := m.Close(); err != nil {
			t.Errorf("mmap=%v: Close: %v", mm, err)
		}
	}
}

func TestVerifyWeights(t *testing.T) {
	b := encode(t, mlpModel(t))
	b[len(b)-2]++
	if _, err := Decode(b); !errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupt weights: %v", err)
	}
	m, err := Decode(b, VerifyWeights(false))
	if err != nil {
		t.Fatal(err)
	}
	_ = m
	// The tables checksum is always checked.
	b = encode(t, mlpModel(t))
	b[HeaderSize+3]++
	if _, err := Decode(b, VerifyWeights(false)); !errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupt tables: %v", err)
	}
}

// shortReader serves only the first n bytes of b.
type shortReader struct {
	b []byte
	n int
}

func (r shortReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(r.n) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off:r.n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func TestReadShort(t *testing.T) {
	b := encode(t, mlpModel(t))
	// The reader lies about its size: an error, not a panic.
	_, err := Read(shortReader{b, len(b) - 10}, int64(len(b)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v", err)
	}
	// A huge claimed size is rejected from the header, before allocating.
	_, err = Read(shortReader{b, len(b)}, 1<<50)
	if err == nil || !strings.Contains(err.Error(), "trailing bytes") {
		t.Fatalf("got %v", err)
	}
	if _, err := Read(bytes.NewReader(b), -1); err == nil {
		t.Fatal("negative size accepted")
	}
}

func TestFormatErrorString(t *testing.T) {
	e := &FormatError{Offset: 1234, Section: "tensor table", Msg: `tensor 3 "conv1.w": dim 2 is -7`}
	if got, want := e.Error(), `model.bin: tensor table at byte 1234: tensor 3 "conv1.w": dim 2 is -7`; got != want {
		t.Errorf("got %s", got)
	}
	e.Offset, e.Path = -1, "/m/x.bin"
	if got, want := e.Error(), `/m/x.bin: tensor table: tensor 3 "conv1.w": dim 2 is -7`; got != want {
		t.Errorf("got %s", got)
	}
}

func TestNegativeDimMessage(t *testing.T) {
	m := &Model{Tensors: []Tensor{
		{Name: "a", DType: rt.F32, Role: Input},
		{Name: "b", DType: rt.F32, Role: Input},
		{Name: "c", DType: rt.F32, Role: Input},
		{Name: "conv1.w", DType: rt.F32, Role: Input, Shape: []int64{1, 2, -7}},
	}}
	b := encodeRaw(t, m)
	_, err := Decode(b)
	want := `tensor 3 "conv1.w": dim 2 is -7`
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Msg != want || fe.Section != "tensor table" || fe.Offset <= HeaderSize {
		t.Fatalf("got %#v", err)
	}
	if err := m.Validate(); err == nil || err.Error() != "model.bin: tensor table: "+want {
		t.Fatalf("Validate: %v", err)
	}
	if _, err := m.WriteTo(io.Discard); err == nil {
		t.Fatal("WriteTo wrote an invalid model")
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "x.bin"), m); err == nil {
		t.Fatal("WriteFile wrote an invalid model")
	}
}

// chainModel is a long chain of n Add nodes, each with its own weight.
func chainModel(tb testing.TB, n int) *Model {
	b := NewBuilder()
	h := b.Input("x", rt.F32, -1, 16)
	for i := range n {
		w := b.Weight("w"+strconv.Itoa(i), rt.F32, []int64{16}, seqF32(16))
		h = b.Op("Add", []string{h, w}, Attrs{"k": i, "name": "add"})
	}
	b.Output(h)
	m, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func BenchmarkDecode(b *testing.B) {
	data := encode(b, chainModel(b, 10000))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	m := chainModel(b, 10000)
	for b.Loop() {
		if _, err := m.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
