package model

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

var update = flag.Bool("update", false, "rewrite testdata/broken/*.bin")

// brokenCase is one file of the broken corpus and the error it must get.
type brokenCase struct {
	name     string
	want     string // substring of the error message
	checksum bool   // errors.Is(err, ErrChecksum)
	make     func(t *testing.T) []byte
}

// tinyFile is the encoded tinyModel: input x f32[2], weight w f32[2],
// node Add(x, w) -> "Add_0", an output.
func tinyFile(t *testing.T) []byte { return encode(t, tinyModel(t)) }

// tensorAt returns the file offset of tensor i's dtype byte.
func tensorAt(t *testing.T, b []byte, i int) int {
	h, err := parseHeader(b, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	d := &decoder{b: b, off: HeaderSize, end: HeaderSize + int(h.tablesSize)}
	m, pos := d.tables(h)
	if d.err != nil {
		t.Fatal(d.err)
	}
	return int(pos.tensors[i]) + 4 + len(m.Tensors[i].Name)
}

// weightFieldAt returns the offset of tiny's weight "w" data offset field.
func weightFieldAt(t *testing.T, b []byte) int { return tensorAt(t, b, 1) + 4 + 8 }

// patch applies f to a copy of the tiny file and fixes its checksums.
func patch(f func(t *testing.T, b []byte)) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		b := tinyFile(t)
		f(t, b)
		fixCRC(b)
		return b
	}
}

// raw encodes an invalid model built by f.
func raw(f func() *Model) func(t *testing.T) []byte {
	return func(t *testing.T) []byte { return encodeRaw(t, f()) }
}

func in(name string, shape ...int64) Tensor {
	return Tensor{Name: name, DType: rt.F32, Role: Input, Shape: shape}
}
func mid(name string) Tensor { return Tensor{Name: name, DType: rt.F32} }
func out(name string) Tensor { return Tensor{Name: name, DType: rt.F32, Role: Output} }
func node(op string, ins []int, outs ...int) Node {
	return Node{Name: strings.ToLower(op), Op: op, Inputs: ins, Outputs: outs}
}

var brokenCases = []brokenCase{
	{"empty", "file is 0 bytes, truncated inside the magic", false, func(t *testing.T) []byte { return nil }},
	{"truncated_magic", "file is 5 bytes, truncated inside the magic", false, func(t *testing.T) []byte { return tinyFile(t)[:5] }},
	{"truncated_header", "file is 30 bytes, truncated inside the 48-byte header", false, func(t *testing.T) []byte { return tinyFile(t)[:30] }},
	{"truncated_tables", "runs past the end of the 70-byte file (truncated?)", false, func(t *testing.T) []byte { return tinyFile(t)[:70] }},
	{"truncated_weights", "weights region [192, +8) runs past the end of the 197-byte file (truncated?)", false, func(t *testing.T) []byte { b := tinyFile(t); return b[:len(b)-3] }},
	{"bad_magic", `bad magic "GGUF\x03\x00\x00\x00": not a model.bin file`, false, func(t *testing.T) []byte {
		b := tinyFile(t)
		copy(b, "GGUF\x03\x00\x00\x00")
		return b
	}},
	{"bad_version", "header at byte 8: unsupported version 2 (this reader supports version 1)", false, patch(func(t *testing.T, b []byte) { le.PutUint32(b[hdrVersion:], 2) })},
	{"bad_flags", "header at byte 12: unknown flags 0x4", false, patch(func(t *testing.T, b []byte) { le.PutUint32(b[hdrFlags:], 4) })},
	{"bad_tables_checksum", "header at byte 40: header and tables checksum is", true, func(t *testing.T) []byte {
		b := tinyFile(t)
		b[tensorAt(t, b, 0)-1] = 'y' // rename "x"
		return b
	}},
	{"bad_weights_checksum", "header at byte 44: weights checksum is", true, func(t *testing.T) []byte {
		b := tinyFile(t)
		b[len(b)-1] ^= 1
		return b
	}},
	{"trailing_bytes", "file at byte 200: 64 trailing bytes after the weights region", false, func(t *testing.T) []byte {
		return append(tinyFile(t), make([]byte, 64)...)
	}},
	{"bad_weights_offset", "header at byte 24: weights offset 256, want 192 (end of tables rounded up to 64)", false, patch(func(t *testing.T, b []byte) { le.PutUint64(b[hdrWeightsOff:], 256) })},
	{"nonzero_padding", "file at byte 191: non-zero padding byte before the weights region", false, patch(func(t *testing.T, b []byte) { b[191] = 1 })},
	{"huge_tensor_count", "tensor table at byte 52: tensor count 2147483648 exceeds the limit of 16777216", false, patch(func(t *testing.T, b []byte) { le.PutUint32(b[52:], 1<<31) })},
	{"tensor_count_past_end", "tensor count 1000000 cannot fit in the", false, patch(func(t *testing.T, b []byte) { le.PutUint32(b[52:], 1000000) })},
	{"huge_metadata_count", "metadata at byte 48: metadata entry count 4294967295 exceeds the limit", false, patch(func(t *testing.T, b []byte) { le.PutUint32(b[48:], 0xffffffff) })},
	{"huge_string_length", "tensor table at byte 56: tensor 0 name length 4294967280 exceeds the limit of 4096", false, patch(func(t *testing.T, b []byte) { le.PutUint32(b[56:], 0xfffffff0) })},
	{"string_past_end", "tensor table at byte 56: tensor 0 name needs 4000 bytes, 103 left in the tables", false, patch(func(t *testing.T, b []byte) { le.PutUint32(b[56:], 4000) })},
	{"negative_dim", `tensor table at byte 56: tensor 0 "x": dim 0 is -7`, false, patch(func(t *testing.T, b []byte) { le.PutUint64(b[tensorAt(t, b, 0)+4:], uint64(1<<64-7)) })},
	{"rank_too_big", `tensor 0 "x": rank 9 exceeds the limit of 8`, false, patch(func(t *testing.T, b []byte) { b[tensorAt(t, b, 0)+2] = 9 })},
	{"bad_dtype", `tensor 1 "w": bad dtype code 99`, false, patch(func(t *testing.T, b []byte) { b[tensorAt(t, b, 1)] = 99 })},
	{"bad_role", `tensor 2 "Add_0": bad role code 7`, false, patch(func(t *testing.T, b []byte) { b[tensorAt(t, b, 2)+1] = 7 })},
	{"bad_tensor_flags", `tensor 0 "x": unknown flags 0x2`, false, patch(func(t *testing.T, b []byte) { b[tensorAt(t, b, 0)+3] = 2 })},
	{"misaligned_offset", `tensor 1 "w": data offset 132 is not 64-byte aligned`, false, patch(func(t *testing.T, b []byte) { le.PutUint64(b[weightFieldAt(t, b):], 132) })},
	{"offset_out_of_range", `tensor 1 "w": data [640, +8) lies outside the weights region [192, 200)`, false, patch(func(t *testing.T, b []byte) { le.PutUint64(b[weightFieldAt(t, b):], 640) })},
	{"data_length_past_end", `tensor 1 "w": data [192, +4294967296) lies outside the weights region`, false, patch(func(t *testing.T, b []byte) { le.PutUint64(b[weightFieldAt(t, b)+8:], 1<<32) })},
	{"data_length_mismatch", `tensor 1 "w": data is 4 bytes, want 8 (2 elements of f32)`, false, patch(func(t *testing.T, b []byte) { le.PutUint64(b[weightFieldAt(t, b)+8:], 4) })},
	{"huge_dims", `tensor 0 "x": shape [1099511627776 1099511627776] is too large`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x", 1<<40, 1<<40)}}
	})},
	{"huge_weight_dims", `tensor 0 "w": data is 8 bytes, want 4398046511104`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{{Name: "w", DType: rt.F32, Role: Weight, Shape: []int64{1 << 20, 1 << 20}, Data: make([]byte, 8)}}}
	})},
	{"dynamic_weight", `tensor 0 "w": a weight must have a static shape, has [-1]`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{{Name: "w", DType: rt.F32, Role: Weight, Shape: []int64{-1}}}}
	})},
	{"untyped_input", `tensor 0 "x": an input needs a dtype`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{{Name: "x", Role: Input}}}
	})},
	{"empty_tensor_name", "tensor 1: name is empty", false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), in("")}}
	})},
	{"invalid_utf8", `tensor 0: name "\xff\xfe" is not valid UTF-8`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("\xff\xfe")}}
	})},
	{"duplicate_tensor_name", `tensor 2 "x": duplicate name (also tensor 0)`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), in("y"), in("x")}}
	})},
	{"duplicate_meta_key", `metadata at byte 62: entry 1: duplicate key "k" (also entry 0)`, false, raw(func() *Model {
		return &Model{Meta: [][2]string{{"k", "a"}, {"k", "b"}}}
	})},
	{"bad_attr_kind", `node 0 "relu" (Relu) attribute "a": bad attribute kind code 9`, false, raw(func() *Model {
		n := node("Relu", []int{0}, 1)
		n.Attrs = []Attr{{Name: "a", Kind: 9}}
		return &Model{Tensors: []Tensor{in("x"), out("y")}, Nodes: []Node{n}}
	})},
	{"duplicate_attr", `node 0 "relu" (Relu): duplicate attribute "a"`, false, raw(func() *Model {
		n := node("Relu", []int{0}, 1)
		n.Attrs = []Attr{{Name: "a", Kind: AttrInt}, {Name: "a", Kind: AttrFloat}}
		return &Model{Tensors: []Tensor{in("x"), out("y")}, Nodes: []Node{n}}
	})},
	{"node_input_out_of_range", `node 0 "add" (Add): input 1 is tensor index 5, out of range [0, 2)`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), out("y")}, Nodes: []Node{node("Add", []int{0, 5}, 1)}}
	})},
	{"node_output_negative", `node 0 "relu" (Relu): output 0 is tensor index -3, out of range [0, 2)`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), out("y")}, Nodes: []Node{node("Relu", []int{0}, -3)}}
	})},
	{"node_without_outputs", `node 0 "relu" (Relu): has no outputs`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x")}, Nodes: []Node{node("Relu", []int{0}, -1)}}
	})},
	{"use_before_def", `node 0 "neg" (Neg): input 0 tensor 1 "a" is used before it is produced`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), mid("a"), out("y")}, Nodes: []Node{
			node("Neg", []int{1}, 2),
			node("Relu", []int{0}, 1),
		}}
	})},
	{"cycle", `node 0 "add" (Add): input 1 tensor 2 "b" is used before it is produced`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), mid("a"), out("b")}, Nodes: []Node{
			node("Add", []int{0, 2}, 1),
			node("Relu", []int{1}, 2),
		}}
	})},
	{"self_loop", `node 0 "add" (Add): input 1 tensor 1 "y" is used before it is produced`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), out("y")}, Nodes: []Node{node("Add", []int{0, 1}, 1)}}
	})},
	{"two_producers", `node 1 "neg" (Neg): output 0 tensor 1 "y" is already produced by node 0`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), out("y")}, Nodes: []Node{node("Relu", []int{0}, 1), node("Neg", []int{0}, 1)}}
	})},
	{"writes_input", `node 0 "relu" (Relu): output 0 writes tensor 0 "x", which is an input`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x")}, Nodes: []Node{node("Relu", []int{0}, 0)}}
	})},
	{"writes_weight", `output 0 writes tensor 1 "w", which is a weight`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), {Name: "w", DType: rt.U8, Role: Weight, Shape: []int64{1}, Data: []byte{1}}},
			Nodes: []Node{node("Relu", []int{0}, 1)}}
	})},
	{"output_not_produced", `tensor 2 "z": graph output is not produced by any node`, false, raw(func() *Model {
		return &Model{Tensors: []Tensor{in("x"), out("y"), out("z")}, Nodes: []Node{node("Relu", []int{0}, 1)}}
	})},
	{"unused_table_bytes", "node list at byte 69: 4 unused bytes after the node list", false, func(t *testing.T) []byte {
		// A weightless model whose tables region has 4 extra bytes.
		b := encode(t, &Model{Tensors: []Tensor{in("x")}})
		ts := le.Uint64(b[hdrTablesSize:])
		tables := append(slices.Clone(b[HeaderSize:HeaderSize+ts]), 1, 2, 3, 4)
		ts += 4
		wo := align(HeaderSize + int64(ts))
		out := make([]byte, wo)
		copy(out, b[:HeaderSize])
		copy(out[HeaderSize:], tables)
		le.PutUint64(out[hdrTablesSize:], ts)
		le.PutUint64(out[hdrWeightsOff:], uint64(wo))
		fixCRC(out)
		return out
	}},
}

func brokenPath(name string) string { return filepath.Join("testdata", "broken", name+".bin") }

// TestBrokenCorpus checks that every file of testdata/broken is rejected
// with the expected error, through Decode and through Load (memory-mapped
// and read). Run with -update to regenerate the files.
func TestBrokenCorpus(t *testing.T) {
	if *update {
		os.MkdirAll(filepath.Join("testdata", "broken"), 0o755)
		for _, c := range brokenCases {
			if err := os.WriteFile(brokenPath(c.name), c.make(t), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	known := map[string]bool{}
	for _, c := range brokenCases {
		known[c.name+".bin"] = true
		t.Run(c.name, func(t *testing.T) {
			b, err := os.ReadFile(brokenPath(c.name))
			if err != nil {
				t.Fatalf("%v (run go test -run TestBrokenCorpus -update)", err)
			}
			if gen := c.make(t); !bytes.Equal(b, gen) {
				t.Errorf("committed file differs from its generator (run go test -run TestBrokenCorpus -update)")
			}
			check := func(how string, err error) {
				t.Helper()
				var fe *FormatError
				switch {
				case err == nil:
					t.Fatalf("%s: accepted", how)
				case !errors.As(err, &fe):
					t.Errorf("%s: %T is not *FormatError: %v", how, err, err)
				case !strings.Contains(err.Error(), c.want):
					t.Errorf("%s: error %q\n\tdoes not contain %q", how, err, c.want)
				case errors.Is(err, ErrChecksum) != c.checksum:
					t.Errorf("%s: errors.Is(err, ErrChecksum) = %v", how, !c.checksum)
				}
			}
			_, err = Decode(b)
			t.Log(err)
			check("Decode", err)
			_, err = Read(bytes.NewReader(b), int64(len(b)))
			check("Read", err)
			for _, mm := range []bool{true, false} {
				m, err := Load(brokenPath(c.name), UseMmap(mm))
				if err == nil {
					m.Close()
				}
				check("Load", err)
			}
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "broken", "*.bin"))
	for _, f := range files {
		if !known[filepath.Base(f)] {
			t.Errorf("%s has no test case", f)
		}
	}
}
