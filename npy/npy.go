package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vrun-go/vrun/rt"
)

// Magic is the first six bytes of every .npy file.
const Magic = "\x93NUMPY"

// MaxHeaderLen is the largest header Read accepts, in bytes. NumPy itself
// refuses headers over 10000 bytes by default; real headers are under 200.
const MaxHeaderLen = 1 << 16

// Errors that callers may test for with errors.Is.
var (
	// ErrNotNPY: the input does not start with the .npy magic string.
	ErrNotNPY = errors.New("npy: not a .npy file")
	// ErrUnsupported: a valid .npy file that this package cannot represent
	// (fortran_order, an unsupported descr, a format version other than
	// 1.0, 2.0 or 3.0).
	ErrUnsupported = errors.New("npy: unsupported")
)

// chunk is the unit in which array data is read when its size is not known
// to be backed by the input.
const chunk = 1 << 20

// header is the decoded .npy header.
type header struct {
	descr string
	shape []int
}

// dtypeInfo describes how a descr code is stored and what it becomes.
type descrInfo struct {
	dt      rt.DType // the vrun dtype it is read as
	size    int      // bytes per element in the file
	bigEnd  bool     // file data is big-endian
	convert byte     // 0: copy; else the source kind ('i','u') to widen
}

// Read reads one .npy array from r and returns it as a tensor. It consumes
// exactly the bytes of that array. See the package documentation for the
// accepted dtypes and the conversions applied.
func Read(r io.Reader) (*rt.Tensor, error) {
	return read(r, -1)
}

// ReadFile reads the .npy file at path.
func ReadFile(path string) (*rt.Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	t, err := read(bufio.NewReaderSize(f, 1<<16), size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// read reads one array; avail, when non-negative, is the total size of the
// input, used to reject truncated files before allocating.
func read(r io.Reader, avail int64) (*rt.Tensor, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w (file too short)", ErrNotNPY)
		}
		return nil, fmt.Errorf("npy: %w", err)
	}
	if string(pre[:6]) != Magic {
		return nil, ErrNotNPY
	}
	major, minor := pre[6], pre[7]
	var hlen int64
	consumed := int64(8)
	switch {
	case major == 1 && minor == 0:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", eofUnexpected(err))
		}
		hlen = int64(binary.LittleEndian.Uint16(b[:]))
		consumed += 2
	case (major == 2 || major == 3) && minor == 0:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", eofUnexpected(err))
		}
		hlen = int64(binary.LittleEndian.Uint32(b[:]))
		consumed += 4
	default:
		return nil, fmt.Errorf("%w: format version %d.%d", ErrUnsupported, major, minor)
	}
	if hlen > MaxHeaderLen {
		return nil, fmt.Errorf("npy: header length %d exceeds the limit of %d bytes", hlen, MaxHeaderLen)
	}
	if avail >= 0 && consumed+hlen > avail {
		return nil, fmt.Errorf("npy: header length %d exceeds the file size: %w", hlen, io.ErrUnexpectedEOF)
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, fmt.Errorf("npy: reading header: %w", eofUnexpected(err))
	}
	consumed += hlen
	hs := string(hb)
	if major == 3 {
		if !utf8.ValidString(hs) {
			return nil, fmt.Errorf("npy: version 3.0 header is not valid UTF-8")
		}
	} else {
		hs = latin1(hb)
	}
	h, err := parseHeader(hs)
	if err != nil {
		return nil, err
	}
	info, err := parseDescr(h.descr)
	if err != nil {
		return nil, err
	}
	n := rt.NumElements(h.shape)
	if n < 0 || n > math.MaxInt/int64(info.size) || n > math.MaxInt/int64(info.dt.Size()) {
		return nil, fmt.Errorf("npy: shape %v is too large", h.shape)
	}
	nbytes := n * int64(info.size)
	if avail >= 0 && consumed+nbytes > avail {
		return nil, fmt.Errorf("npy: shape %v of %s needs %d data bytes but the file has %d: %w",
			h.shape, h.descr, nbytes, avail-consumed, io.ErrUnexpectedEOF)
	}
	raw, err := readData(r, nbytes, avail >= 0)
	if err != nil {
		return nil, fmt.Errorf("npy: reading %d data bytes for shape %v: %w", nbytes, h.shape, err)
	}
	data, err := convert(raw, info)
	if err != nil {
		return nil, err
	}
	return &rt.Tensor{DType: info.dt, Shape: h.shape, Data: data}, nil
}

func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readData reads exactly n bytes. Unless the size is known to be backed by
// the input, it grows the buffer as data arrives so that a short stream
// cannot make it allocate the full claimed size.
func readData(r io.Reader, n int64, trusted bool) ([]byte, error) {
	if trusted || n <= chunk {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, eofUnexpected(err)
	}
	var buf bytes.Buffer
	buf.Grow(chunk)
	got, err := io.CopyN(&buf, r, n)
	if got != n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes()[:n:n], nil
}

// latin1 decodes ISO 8859-1 bytes (the header encoding of versions 1 and 2).
func latin1(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = rune(c)
	}
	return string(rs)
}

// parseHeader decodes the header dict.
func parseHeader(s string) (*header, error) {
	v, err := parseLiteral(s)
	if err != nil {
		return nil, fmt.Errorf("npy: bad header: %w", err)
	}
	d, ok := v.(pyDict)
	if !ok {
		return nil, fmt.Errorf("npy: header is not a dict: %q", clip(strings.TrimSpace(s)))
	}
	var (
		h                   header
		seenD, seenF, seenS bool
		fortran             bool
		descrVal, shapeVal  any
	)
	for _, it := range d {
		k, _ := it.key.(string)
		switch k {
		case "descr":
			if seenD {
				return nil, fmt.Errorf("npy: duplicate header key 'descr'")
			}
			seenD, descrVal = true, it.val
		case "fortran_order":
			if seenF {
				return nil, fmt.Errorf("npy: duplicate header key 'fortran_order'")
			}
			b, ok := it.val.(bool)
			if !ok {
				return nil, fmt.Errorf("npy: fortran_order is not a bool")
			}
			seenF, fortran = true, b
		case "shape":
			if seenS {
				return nil, fmt.Errorf("npy: duplicate header key 'shape'")
			}
			seenS, shapeVal = true, it.val
		default:
			return nil, fmt.Errorf("npy: unexpected header key %v", it.key)
		}
	}
	if !seenD || !seenF || !seenS {
		return nil, fmt.Errorf("npy: header lacks one of 'descr', 'fortran_order', 'shape'")
	}
	switch dv := descrVal.(type) {
	case string:
		h.descr = dv
	case pyList:
		return nil, fmt.Errorf("%w: structured dtype (descr is a list of fields)", ErrUnsupported)
	default:
		return nil, fmt.Errorf("npy: descr is not a string")
	}
	tup, ok := shapeVal.(pyTuple)
	if !ok {
		return nil, fmt.Errorf("npy: shape is not a tuple")
	}
	h.shape = make([]int, len(tup))
	for i, x := range tup {
		d, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("npy: shape %d is not an integer", i)
		}
		if d < 0 || d > math.MaxInt {
			return nil, fmt.Errorf("npy: bad dimension %d in shape", d)
		}
		h.shape[i] = int(d)
	}
	if fortran {
		// A Fortran-order array of rank <= 1 (or with at most one dim
		// greater than 1) is also C-contiguous, but NumPy never writes
		// such headers with fortran_order True; be strict and clear.
		nbig := 0
		for _, d := range h.shape {
			if d > 1 {
				nbig++
			}
		}
		if nbig > 1 {
			return nil, fmt.Errorf("%w: fortran_order arrays (save with np.ascontiguousarray(a) first)", ErrUnsupported)
		}
	}
	return &h, nil
}

// parseDescr decodes a simple descr string such as "<f4".
func parseDescr(s string) (descrInfo, error) {
	if s == "" {
		return descrInfo{}, fmt.Errorf("npy: empty descr")
	}
	order := byte('=')
	code := s
	switch s[0] {
	case '<', '>', '|', '=':
		order, code = s[0], s[1:]
	}
	big := order == '>' || (order == '=' && !nativeLittle())
	var kind byte
	var size int
	if code == "?" {
		kind, size = 'b', 1
	} else {
		if len(code) < 2 {
			return descrInfo{}, fmt.Errorf("%w: descr %q", ErrUnsupported, s)
		}
		kind = code[0]
		sz, err := strconv.Atoi(code[1:])
		if err != nil || sz <= 0 || code[1] == '+' || code[1] == '0' {
			return descrInfo{}, fmt.Errorf("%w: descr %q", ErrUnsupported, s)
		}
		size = sz
	}
	k, ok := descrKinds[descrKey{kind, size}]
	if !ok {
		return descrInfo{}, fmt.Errorf("%w: descr %q (vrun reads f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)", ErrUnsupported, s)
	}
	info := descrInfo{dt: k.dt, size: size, bigEnd: big && size > 1}
	if k.widen {
		info.convert = kind
	}
	return info, nil
}

// descrKey is a descr's kind character and element size in bytes.
type descrKey struct {
	kind byte
	size int
}

// descrKinds are the element types vrun reads: the dtype each becomes, and
// whether it is widened to that dtype (i2, u2, u4, u8) rather than copied.
var descrKinds = map[descrKey]struct {
	dt    rt.DType
	widen bool
}{
	{'f', 2}: {rt.F16, false}, {'f', 4}: {rt.F32, false}, {'f', 8}: {rt.F64, false},
	{'i', 1}: {rt.I8, false}, {'i', 4}: {rt.I32, false}, {'i', 8}: {rt.I64, false},
	{'u', 1}: {rt.U8, false}, {'b', 1}: {rt.Bool, false},
	{'i', 2}: {rt.I32, true}, {'u', 2}: {rt.I32, true},
	{'u', 4}: {rt.I64, true}, {'u', 8}: {rt.I64, true},
}

func nativeLittle() bool {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	return b[0] == 1
}

// convert turns file data into little-endian vrun data.
func convert(raw []byte, info descrInfo) ([]byte, error) {
	var order binary.ByteOrder = binary.LittleEndian
	if info.bigEnd {
		order = binary.BigEndian
	}
	switch {
	case info.dt == rt.Bool:
		for i, c := range raw {
			if c != 0 {
				raw[i] = 1
			}
		}
		return raw, nil
	case info.convert == 0:
		if info.bigEnd {
			swap(raw, info.size)
		}
		return raw, nil
	}
	n := len(raw) / info.size
	out := make([]byte, n*info.dt.Size())
	le := binary.LittleEndian
	for i := 0; i < n; i++ {
		src := raw[i*info.size:]
		switch {
		case info.convert == 'i' && info.size == 2:
			le.PutUint32(out[4*i:], uint32(int32(int16(order.Uint16(src)))))
		case info.convert == 'u' && info.size == 2:
			le.PutUint32(out[4*i:], uint32(order.Uint16(src)))
		case info.convert == 'u' && info.size == 4:
			le.PutUint64(out[8*i:], uint64(order.Uint32(src)))
		case info.convert == 'u' && info.size == 8:
			v := order.Uint64(src)
			if v > math.MaxInt64 {
				return nil, fmt.Errorf("%w: u8 value %d at index %d does not fit in i64", ErrUnsupported, v, i)
			}
			le.PutUint64(out[8*i:], v)
		}
	}
	return out, nil
}

// swap reverses the bytes of each size-byte element of b in place.
func swap(b []byte, size int) {
	for i := 0; i+size <= len(b); i += size {
		e := b[i : i+size]
		for l, r := 0, size-1; l < r; l, r = l+1, r-1 {
			e[l], e[r] = e[r], e[l]
		}
	}
}

// descrOf returns the descr Write uses for dt.
func descrOf(dt rt.DType) (string, error) {
	switch dt {
	case rt.F32:
		return "<f4", nil
	case rt.F16:
		return "<f2", nil
	case rt.F64:
		return "<f8", nil
	case rt.I32:
		return "<i4", nil
	case rt.I64:
		return "<i8", nil
	case rt.U8:
		return "|u1", nil
	case rt.I8:
		return "|i1", nil
	case rt.Bool:
		return "|b1", nil
	}
	return "", fmt.Errorf("npy: cannot write dtype %s", dt)
}

// Header returns the .npy preamble (magic, version, header length and
// padded header) for a C-order array of dtype dt and the given shape. The
// total length is a multiple of 64, as NumPy writes it.
func Header(dt rt.DType, shape []int) ([]byte, error) {
	descr, err := descrOf(dt)
	if err != nil {
		return nil, err
	}
	var sb strings.Builder
	sb.WriteString("{'descr': '")
	sb.WriteString(descr)
	sb.WriteString("', 'fortran_order': False, 'shape': (")
	for i, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("npy: negative dimension in shape %v", shape)
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString("), }")
	h := sb.String()
	// Version 1.0: 10-byte preamble, 16-bit length. Version 2.0: 12 bytes,
	// 32-bit length. Pad with spaces and end with '\n' to a multiple of 64.
	pad := func(pre int) int { return (64 - (pre+len(h)+1)%64) % 64 }
	major, pre := byte(1), 10
	if pre+len(h)+1+pad(pre) > math.MaxUint16+pre {
		major, pre = 2, 12
	}
	hl := len(h) + pad(pre) + 1
	out := make([]byte, 0, pre+hl)
	out = append(out, Magic...)
	out = append(out, major, 0)
	if major == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(hl))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(hl))
	}
	out = append(out, h...)
	out = append(out, bytes.Repeat([]byte{' '}, pad(pre))...)
	out = append(out, '\n')
	return out, nil
}

// Write writes t to w as a C-order, little-endian .npy file (format 1.0,
// or 2.0 for a header over 64 KiB).
func Write(w io.Writer, t *rt.Tensor) error {
	if t == nil {
		return fmt.Errorf("npy: nil tensor")
	}
	if err := t.Check(); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	h, err := Header(t.DType, t.Shape)
	if err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	data := t.Data
	if t.DType == rt.Bool {
		data = make([]byte, len(t.Data))
		for i, c := range t.Data {
			if c != 0 {
				data[i] = 1
			}
		}
	}
	_, err = w.Write(data)
	return err
}

// WriteFile writes t to the file at path, creating or truncating it.
func WriteFile(path string, t *rt.Tensor) error {
	return writeFile(path, func(w io.Writer) error { return Write(w, t) })
}

// writeFile creates or truncates the file at path and writes it through a
// buffer with write.
func writeFile(path string, write func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	if err := write(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
