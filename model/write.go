package model

import (
	"hash/crc32"
	"io"
	"math"

	"github.com/vrun-go/vrun/internal/atomicfile"
)

// encoder appends little-endian values to a byte slice.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = le.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = le.AppendUint64(e.b, v) }
func (e *encoder) i64(v int64)  { e.u64(uint64(v)) }
func (e *encoder) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *encoder) count(n int)  { e.u32(uint32(n)) }

// layout computes the absolute data offset of every weight and the end of
// the weights region, for a tables region of tablesSize bytes.
func layout(m *Model, weightsOff int64) (offs []int64, end int64) {
	offs = make([]int64, len(m.Tensors))
	cur := weightsOff
	for i := range m.Tensors {
		t := &m.Tensors[i]
		if t.Role != Weight {
			continue
		}
		if len(t.Data) == 0 {
			offs[i] = weightsOff
			continue
		}
		offs[i] = align(cur)
		cur = offs[i] + int64(len(t.Data))
	}
	return offs, cur
}

// encodeTables returns the tables region (metadata, tensor table, node
// list) given the weight offsets.
func encodeTables(m *Model, offs []int64) []byte {
	e := &encoder{}
	e.count(len(m.Meta))
	for _, kv := range m.Meta {
		e.str(kv[0])
		e.str(kv[1])
	}
	e.count(len(m.Tensors))
	for i := range m.Tensors {
		t := &m.Tensors[i]
		e.str(t.Name)
		e.u8(uint8(t.DType))
		e.u8(uint8(t.Role))
		e.u8(uint8(len(t.Shape)))
		var flags uint8
		if len(t.DimNames) > 0 {
			flags |= tensorHasDimNames
		}
		e.u8(flags)
		for _, d := range t.Shape {
			e.i64(d)
		}
		if flags&tensorHasDimNames != 0 {
			for _, s := range t.DimNames {
				e.str(s)
			}
		}
		if t.Role == Weight {
			e.u64(uint64(offs[i]))
			e.u64(uint64(len(t.Data)))
		}
	}
	e.count(len(m.Nodes))
	for i := range m.Nodes {
		n := &m.Nodes[i]
		e.str(n.Name)
		e.str(n.Op)
		e.count(len(n.Attrs))
		for k := range n.Attrs {
			a := &n.Attrs[k]
			e.str(a.Name)
			e.u8(uint8(a.Kind))
			switch a.Kind {
			case AttrInt:
				e.i64(a.Int)
			case AttrFloat:
				e.u64(math.Float64bits(a.Float))
			case AttrString:
				e.str(a.Str)
			case AttrInts:
				e.count(len(a.Ints))
				for _, v := range a.Ints {
					e.i64(v)
				}
			case AttrFloats:
				e.count(len(a.Floats))
				for _, v := range a.Floats {
					e.u64(math.Float64bits(v))
				}
			case AttrStrings:
				e.count(len(a.Strings))
				for _, s := range a.Strings {
					e.str(s)
				}
			}
		}
		e.count(len(n.Inputs))
		for _, v := range n.Inputs {
			e.u32(uint32(int32(v)))
		}
		e.count(len(n.Outputs))
		for _, v := range n.Outputs {
			e.u32(uint32(int32(v)))
		}
	}
	return e.b
}

var zeros [Alignment]byte

// WriteTo writes m to w in the model.bin v1 format, after checking it with
// [Model.Validate]. The output is deterministic: the same model always
// gives the same bytes. Weights are laid out in tensor-table order, each at
// a 64-byte-aligned file offset. It returns the number of bytes written.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	return writeModel(w, m)
}

// writeModel encodes m without validating it: m must be valid, or at least
// have Shape ranks below 256 (tests use it to make broken files).
func writeModel(w io.Writer, m *Model) (int64, error) {
	// The header and tables do not depend on the weight offsets' values for
	// their size, so encode once with zero offsets to learn the size.
	tablesSize := int64(len(encodeTables(m, make([]int64, len(m.Tensors)))))
	weightsOff := align(HeaderSize + tablesSize)
	offs, end := layout(m, weightsOff)
	tables := encodeTables(m, offs)

	// Weights checksum, over the region exactly as it will be written.
	var wcrc uint32
	cur := weightsOff
	for i := range m.Tensors {
		t := &m.Tensors[i]
		if t.Role != Weight || len(t.Data) == 0 {
			continue
		}
		wcrc = crc32.Update(wcrc, castagnoli, zeros[:offs[i]-cur])
		wcrc = crc32.Update(wcrc, castagnoli, t.Data)
		cur = offs[i] + int64(len(t.Data))
	}

	hdr := make([]byte, HeaderSize)
	copy(hdr, Magic)
	le.PutUint32(hdr[hdrVersion:], Version)
	le.PutUint32(hdr[hdrFlags:], 0)
	le.PutUint64(hdr[hdrTablesSize:], uint64(tablesSize))
	le.PutUint64(hdr[hdrWeightsOff:], uint64(weightsOff))
	le.PutUint64(hdr[hdrWeightsLen:], uint64(end-weightsOff))
	le.PutUint32(hdr[hdrTablesCRC:], tablesCRC(hdr, tables))
	le.PutUint32(hdr[hdrWeightsCRC:], wcrc)

	cw := &countWriter{w: w}
	cw.write(hdr)
	cw.write(tables)
	cw.write(zeros[:weightsOff-HeaderSize-tablesSize])
	cur = weightsOff
	for i := range m.Tensors {
		t := &m.Tensors[i]
		if t.Role != Weight || len(t.Data) == 0 {
			continue
		}
		cw.write(zeros[:offs[i]-cur])
		cw.write(t.Data)
		cur = offs[i] + int64(len(t.Data))
	}
	return cw.n, cw.err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) write(p []byte) {
	if c.err != nil || len(p) == 0 {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	c.err = err
}

// WriteFile writes m to the named file. It writes to a temporary file in
// the same directory and renames it into place, so that readers never see
// a partly written model. The file gets mode 0644.
func WriteFile(path string, m *Model) error {
	if err := m.Validate(); err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := writeModel(w, m)
		return err
	})
}
