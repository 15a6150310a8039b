package model

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"runtime/debug"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// LoadOption configures [Load], [Read] and [Decode].
type LoadOption func(*loadConfig)

type loadConfig struct {
	verifyWeights bool
	mmap          bool
}

// VerifyWeights sets whether the CRC-32C of the weights region is checked
// (default true). Turning it off makes [Load] of a large memory-mapped
// model fast, since the weights are then only paged in when used; the
// header and tables checksum is always checked.
func VerifyWeights(on bool) LoadOption { return func(c *loadConfig) { c.verifyWeights = on } }

// UseMmap sets whether [Load] memory-maps the file (default true). When
// off, or when mapping fails, Load reads the file into memory.
func UseMmap(on bool) LoadOption { return func(c *loadConfig) { c.mmap = on } }

func loadOptions(opts []LoadOption) loadConfig {
	c := loadConfig{verifyWeights: true, mmap: true}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// Load reads a model.bin file. Where the OS allows (Linux, macOS, Windows)
// the file is memory-mapped read-only and weight Data slices point into
// the mapping: call [Model.Close] to unmap it once the weights are no
// longer used. Otherwise, or when mapping fails or is turned off with
// UseMmap(false), the file is read into memory. The whole file is
// validated (see docs/format.md); errors about its contents are
// *FormatError with Path set.
func Load(path string, opts ...LoadOption) (*Model, error) {
	cfg := loadOptions(opts)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if cfg.mmap && size >= HeaderSize && size <= math.MaxInt {
		if data, unmap, err := mmapFile(f, size); err == nil {
			m, err := decodeMapped(data, cfg)
			if err != nil {
				unmap()
				return nil, withPath(err, path)
			}
			m.closer = func() error {
				for i := range m.Tensors {
					if m.Tensors[i].Role == Weight {
						m.Tensors[i].Data = nil
					}
				}
				return unmap()
			}
			return m, nil
		}
	}
	m, err := Read(f, size, opts...)
	return m, withPath(err, path)
}

// decodeMapped decodes a memory-mapped file, turning a memory fault (the
// file was truncated by another process while mapped) into an error.
func decodeMapped(data []byte, cfg loadConfig) (m *Model, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, &FormatError{Offset: -1, Section: secFile, Msg: fmt.Sprintf("fault reading the mapped file: %v", r)}
		}
	}()
	return decode(data, cfg)
}

func withPath(err error, path string) error {
	var fe *FormatError
	if errors.As(err, &fe) && fe.Path == "" {
		fe.Path = path
	}
	return err
}

// Read reads a model of size bytes from r into memory (64-byte aligned, so
// weights are aligned in memory as in the file) and validates it.
// Errors about the contents are *FormatError; I/O errors are returned
// wrapped.
func Read(r io.ReaderAt, size int64, opts ...LoadOption) (*Model, error) {
	if size < 0 {
		return nil, fmt.Errorf("model: negative size %d", size)
	}
	// Check the header first, so that a bogus size is caught before
	// allocating a buffer for it.
	n := min(size, HeaderSize)
	hdr := make([]byte, n)
	if err := readAt(r, hdr, 0); err != nil {
		return nil, err
	}
	if _, err := parseHeader(hdr, size); err != nil {
		return nil, err
	}
	if size > math.MaxInt-Alignment {
		return nil, ferr(-1, secFile, "file of %d bytes is too large for this platform", size)
	}
	buf := alignedBytes(int(size))
	copy(buf, hdr)
	const chunk = 4 << 20
	for off := int64(len(hdr)); off < size; off += chunk {
		end := min(off+chunk, size)
		if err := readAt(r, buf[off:end], off); err != nil {
			return nil, err
		}
	}
	return decode(buf, loadOptions(opts))
}

func readAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		return &FormatError{Offset: off + int64(n), Section: secFile, Msg: fmt.Sprintf("file ends early: read %d of %d bytes at byte %d", n, len(p), off), Err: io.ErrUnexpectedEOF}
	}
	return fmt.Errorf("model: reading at byte %d: %w", off+int64(n), err)
}

// alignedBytes returns a zeroed slice of n bytes whose first byte is
// Alignment-aligned in memory.
func alignedBytes(n int) []byte {
	buf := make([]byte, n+Alignment)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & (Alignment - 1))
	return buf[skip : skip+n : skip+n]
}

// Decode decodes and validates a model held in memory. Weight Data slices
// alias b, which must therefore not be modified while the model is in use.
// Errors are *FormatError.
func Decode(b []byte, opts ...LoadOption) (*Model, error) {
	return decode(b, loadOptions(opts))
}

// header is the parsed fixed header.
type header struct {
	tablesSize int64
	weightsOff int64
	weightsLen int64
	tablesCRC  uint32
	weightsCRC uint32
}

// parseHeader checks the header in b (which may be shorter than
// HeaderSize if the file is) against the file size.
func parseHeader(b []byte, size int64) (*header, error) {
	if len(b) < len(Magic) || string(b[:len(Magic)]) != Magic {
		if len(b) < len(Magic) && bytes.HasPrefix([]byte(Magic), b) {
			return nil, &FormatError{Offset: 0, Section: secHeader, Msg: fmt.Sprintf("file is %d bytes, truncated inside the magic", size), Err: io.ErrUnexpectedEOF}
		}
		n := min(len(b), len(Magic))
		return nil, ferr(0, secHeader, "bad magic %q: not a model.bin file", b[:n])
	}
	if len(b) < HeaderSize || size < HeaderSize {
		return nil, &FormatError{Offset: 0, Section: secHeader, Msg: fmt.Sprintf("file is %d bytes, truncated inside the %d-byte header", size, HeaderSize), Err: io.ErrUnexpectedEOF}
	}
	if v := le.Uint32(b[hdrVersion:]); v != Version {
		return nil, ferr(hdrVersion, secHeader, "unsupported version %d (this reader supports version %d)", v, Version)
	}
	if f := le.Uint32(b[hdrFlags:]); f != 0 {
		return nil, ferr(hdrFlags, secHeader, "unknown flags %#x", f)
	}
	ts := le.Uint64(b[hdrTablesSize:])
	wo := le.Uint64(b[hdrWeightsOff:])
	wl := le.Uint64(b[hdrWeightsLen:])
	if ts > uint64(size-HeaderSize) {
		return nil, &FormatError{Offset: hdrTablesSize, Section: secHeader, Msg: fmt.Sprintf("tables size %d runs past the end of the %d-byte file (truncated?)", ts, size), Err: io.ErrUnexpectedEOF}
	}
	h := &header{tablesSize: int64(ts), tablesCRC: le.Uint32(b[hdrTablesCRC:]), weightsCRC: le.Uint32(b[hdrWeightsCRC:])}
	if want := align(HeaderSize + h.tablesSize); wo != uint64(want) {
		return nil, ferr(hdrWeightsOff, secHeader, "weights offset %d, want %d (end of tables rounded up to %d)", wo, want, Alignment)
	}
	h.weightsOff = int64(wo)
	if wl > math.MaxInt64-wo || int64(wo+wl) > size {
		return nil, &FormatError{Offset: hdrWeightsLen, Section: secHeader, Msg: fmt.Sprintf("weights region [%d, +%d) runs past the end of the %d-byte file (truncated?)", wo, wl, size), Err: io.ErrUnexpectedEOF}
	}
	if end := int64(wo + wl); end != size {
		return nil, ferr(end, secFile, "%d trailing bytes after the weights region", size-end)
	}
	h.weightsLen = int64(wl)
	return h, nil
}

// decoder reads the tables region. Methods record the first error in err
// and return zero values afterwards. Error messages name the item being
// read, from the context fields, built only on failure.
type decoder struct {
	b   []byte // the whole file
	off int    // absolute offset of the next byte
	end int    // end of the tables region
	sec string
	err *FormatError

	// Context: the item being read ("entry", "tensor" or "node"), its
	// index, and what is known so far of its name, op and attribute.
	kind      string
	idx       int
	name      string
	named     bool
	op        string
	attrIdx   int // -1 outside attributes
	attrName  string
	attrNamed bool
}

func (d *decoder) enter(kind string, idx int) {
	d.kind, d.idx, d.name, d.named, d.op, d.attrIdx, d.attrName, d.attrNamed = kind, idx, "", false, "", -1, "", false
}

// label describes the current item: `tensor 3 "conv1.w"`,
// `node 2 "fc1" (Gemm) attribute "alpha"`, or "" at the top level.
func (d *decoder) label() string {
	if d.kind == "" {
		return ""
	}
	s := fmt.Sprintf("%s %d", d.kind, d.idx)
	if d.named {
		s += fmt.Sprintf(" %q", d.name)
	}
	if d.op != "" {
		s += " (" + d.op + ")"
	}
	if d.attrIdx >= 0 {
		if d.attrNamed {
			s += fmt.Sprintf(" attribute %q", d.attrName)
		} else {
			s += fmt.Sprintf(" attribute %d", d.attrIdx)
		}
	}
	return s
}

// subject is the label followed by what, as the subject of a message.
func (d *decoder) subject(what string) string {
	if l := d.label(); l != "" {
		return l + " " + what
	}
	return what
}

// fail records an error about the current item: "<label>: <msg>".
func (d *decoder) fail(off int, format string, args ...any) {
	if d.err != nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if l := d.label(); l != "" {
		msg = l + ": " + msg
	}
	d.err = ferr(int64(off), d.sec, "%s", msg)
}

// failf records an error whose message is complete.
func (d *decoder) failf(off int, format string, args ...any) {
	if d.err == nil {
		d.err = ferr(int64(off), d.sec, format, args...)
	}
}

// need checks that n more bytes are left for the item what+suffix.
func (d *decoder) need(n int, what, suffix string) bool { return d.needAt(d.off, n, what, suffix) }

// needAt checks that n more bytes are left, reporting a failure at the
// offset at (the start of the item).
func (d *decoder) needAt(at, n int, what, suffix string) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || n > d.end-d.off {
		d.err = &FormatError{Offset: int64(at), Section: d.sec, Msg: fmt.Sprintf("%s%s needs %d bytes, %d left in the tables", d.subject(what), suffix, n, d.end-d.off), Err: io.ErrUnexpectedEOF}
		return false
	}
	return true
}

func (d *decoder) u8(what string) uint8 {
	return take(d, 1, what, func(b []byte) uint8 { return b[0] })
}

func (d *decoder) u32(what string) uint32 { return take(d, 4, what, le.Uint32) }

func (d *decoder) u64(what string) uint64 { return take(d, 8, what, le.Uint64) }

// take decodes the n bytes at d.off with get and moves past them; it
// returns the zero value (and records the error) when fewer are left.
func take[T any](d *decoder, n int, what string, get func([]byte) T) T {
	var zero T
	if !d.need(n, what, "") {
		return zero
	}
	v := get(d.b[d.off:])
	d.off += n
	return v
}

func (d *decoder) count(minSize int, what string) int {
	at := d.off
	if !d.need(4, what, " count") {
		return 0
	}
	n := d.u32("")
	if n > MaxCount {
		d.failf(at, "%s count %d exceeds the limit of %d", d.subject(what), n, MaxCount)
		return 0
	}
	if int64(n)*int64(minSize) > int64(d.end-d.off) {
		d.failf(at, "%s count %d cannot fit in the %d bytes left in the tables", d.subject(what), n, d.end-d.off)
		return 0
	}
	return int(n)
}

func (d *decoder) str(max int, what string) string {
	at := d.off
	if !d.need(4, what, " length") {
		return ""
	}
	n := d.u32("")
	if n > uint32(max) {
		d.failf(at, "%s length %d exceeds the limit of %d", d.subject(what), n, max)
		return ""
	}
	if !d.needAt(at, int(n), what, "") {
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

func decode(b []byte, cfg loadConfig) (*Model, error) {
	h, err := parseHeader(b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	tablesEnd := HeaderSize + int(h.tablesSize)
	if c := tablesCRC(b, b[HeaderSize:tablesEnd]); c != h.tablesCRC {
		return nil, &FormatError{Offset: hdrTablesCRC, Section: secHeader, Msg: fmt.Sprintf("header and tables checksum is %#08x, header says %#08x", c, h.tablesCRC), Err: ErrChecksum}
	}
	for i := tablesEnd; i < int(h.weightsOff); i++ {
		if b[i] != 0 {
			return nil, ferr(int64(i), secFile, "non-zero padding byte before the weights region")
		}
	}
	d := &decoder{b: b, off: HeaderSize, end: tablesEnd}
	m, pos := d.tables(h)
	if d.err != nil {
		return nil, d.err
	}
	if d.off != d.end {
		return nil, ferr(int64(d.off), secNodes, "%d unused bytes after the node list", d.end-d.off)
	}
	if cfg.verifyWeights {
		w := b[h.weightsOff : h.weightsOff+h.weightsLen]
		if c := crc32.Checksum(w, castagnoli); c != h.weightsCRC {
			return nil, &FormatError{Offset: hdrWeightsCRC, Section: secHeader, Msg: fmt.Sprintf("weights checksum is %#08x, header says %#08x", c, h.weightsCRC), Err: ErrChecksum}
		}
	}
	if err := validate(m, pos); err != nil {
		return nil, err
	}
	return m, nil
}

func (d *decoder) tables(h *header) (*Model, *positions) {
	m := &Model{}
	pos := &positions{}

	m.Meta, pos.meta = section(d, secMeta, minMetaEntry, "metadata entry", "entry", func(e *[2]string) {
		e[0] = d.str(MaxNameLen, "key")
		e[1] = d.str(MaxStringLen, "value")
	})
	m.Tensors, pos.tensors = section(d, secTensors, minTensorEntry, "tensor", "tensor", func(t *Tensor) { d.tensor(h, t) })
	m.Nodes, pos.nodes = section(d, secNodes, minNodeEntry, "node", "node", d.node)
	return m, pos
}

// section decodes section sec: its entry count (each entry at least
// minEntry bytes; what names them in errors), then each entry with read,
// recording where it starts. entry names one entry in error paths. Both
// slices are nil for an empty section.
func section[T any](d *decoder, sec string, minEntry int, what, entry string, read func(*T)) (items []T, pos []int64) {
	d.sec = sec
	n := d.count(minEntry, what)
	if n > 0 {
		items, pos = make([]T, n), make([]int64, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		pos[i] = int64(d.off)
		d.enter(entry, i)
		read(&items[i])
	}
	d.enter("", 0)
	return items, pos
}

func (d *decoder) tensor(h *header, t *Tensor) {
	at := d.off
	t.Name = d.str(MaxNameLen, "name")
	d.name, d.named = t.Name, d.err == nil
	t.DType = rt.DType(d.u8("dtype"))
	t.Role = Role(d.u8("role"))
	rank := int(d.u8("rank"))
	flags := d.u8("flags")
	if d.err != nil {
		return
	}
	if t.DType != rt.InvalidDType && !t.DType.Valid() {
		d.fail(at, "bad dtype code %d", uint8(t.DType))
		return
	}
	if t.Role > Weight {
		d.fail(at, "bad role code %d", uint8(t.Role))
		return
	}
	if rank > MaxRank {
		d.fail(at, "rank %d exceeds the limit of %d", rank, MaxRank)
		return
	}
	if flags&^tensorFlagsKnown != 0 {
		d.fail(at, "unknown flags %#x", flags)
		return
	}
	if rank > 0 {
		t.Shape = make([]int64, rank)
	}
	for k := range rank {
		t.Shape[k] = int64(d.u64("dim"))
		if d.err == nil && t.Shape[k] < -1 {
			d.fail(at, "dim %d is %d", k, t.Shape[k])
		}
	}
	if flags&tensorHasDimNames != 0 && rank > 0 {
		t.DimNames = make([]string, rank)
		for k := range rank {
			t.DimNames[k] = d.str(MaxNameLen, "dim name")
		}
	}
	if t.Role != Weight || d.err != nil {
		return
	}
	dataAt := d.off
	off := d.u64("data offset")
	n := d.u64("data length")
	if d.err != nil {
		return
	}
	wEnd := uint64(h.weightsOff + h.weightsLen)
	if off%Alignment != 0 {
		d.fail(dataAt, "data offset %d is not %d-byte aligned", off, Alignment)
		return
	}
	if off < uint64(h.weightsOff) || off > wEnd || n > wEnd-off {
		d.fail(dataAt, "data [%d, +%d) lies outside the weights region [%d, %d)", off, n, h.weightsOff, wEnd)
		return
	}
	t.Data = d.b[off : off+n : off+n]
}

func (d *decoder) node(n *Node) {
	n.Name = d.str(MaxNameLen, "name")
	d.name, d.named = n.Name, d.err == nil
	n.Op = d.str(MaxNameLen, "op")
	d.op = n.Op
	na := d.count(minAttr, "attribute")
	if na > 0 {
		n.Attrs = make([]Attr, na)
	}
	for k := 0; k < na && d.err == nil; k++ {
		d.attrIdx, d.attrName, d.attrNamed = k, "", false
		d.attr(&n.Attrs[k])
	}
	d.attrIdx = -1
	n.Inputs = d.indices("input")
	n.Outputs = d.indices("output")
}

func (d *decoder) indices(what string) []int {
	c := d.count(4, what)
	if c == 0 {
		return nil
	}
	v := make([]int, c)
	for k := range v {
		v[k] = int(int32(d.u32(what)))
	}
	return v
}

func (d *decoder) attr(a *Attr) {
	at := d.off
	a.Name = d.str(MaxNameLen, "name")
	d.attrName, d.attrNamed = a.Name, d.err == nil
	a.Kind = AttrKind(d.u8("kind"))
	if d.err != nil {
		return
	}
	switch a.Kind {
	case AttrInt:
		a.Int = int64(d.u64("value"))
	case AttrFloat:
		a.Float = math.Float64frombits(d.u64("value"))
	case AttrString:
		a.Str = d.str(MaxStringLen, "value")
	case AttrInts:
		a.Ints = make([]int64, d.count(8, "element"))
		for j := range a.Ints {
			a.Ints[j] = int64(d.u64("element"))
		}
	case AttrFloats:
		a.Floats = make([]float64, d.count(8, "element"))
		for j := range a.Floats {
			a.Floats[j] = math.Float64frombits(d.u64("element"))
		}
	case AttrStrings:
		a.Strings = make([]string, d.count(4, "element"))
		for j := range a.Strings {
			a.Strings[j] = d.str(MaxStringLen, "element")
		}
	default:
		d.fail(at, "bad attribute kind code %d", uint8(a.Kind))
	}
}
