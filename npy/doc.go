// Package npy reads and writes NumPy .npy files as [rt.Tensor] values.
//
// The .npy format is a magic string, a version, a header holding a Python
// dict literal (descr, fortran_order, shape), and the raw array data. Read
// accepts format versions 1.0, 2.0 and 3.0; Write produces version 1.0, or
// 2.0 when the header would not fit in 1.0's 16-bit length field. The header
// is parsed as a Python literal by a small recursive-descent parser; nothing
// is evaluated.
//
// # Element types
//
// These descr codes map directly onto vrun dtypes:
//
//	f4 -> F32   f2 -> F16   f8 -> F64
//	i4 -> I32   i8 -> I64   u1 -> U8   i1 -> I8   b1 (or ?) -> Bool
//
// Three more integer codes are accepted on read and widened losslessly:
// i2 and u2 become I32, u4 becomes I64. u8 becomes I64 when every value is at
// most 2^63-1, and is rejected otherwise. Any other descr (complex, strings,
// datetime, object, structured/record dtypes) is an error wrapping
// [ErrUnsupported]. Bool bytes other than 0 are read as 1.
//
// Big-endian data ('>' byte order) is converted to little-endian on read;
// '=' (native order) is taken to mean the byte order of the running machine.
// Write always writes little-endian ('<', or '|' for one-byte types).
//
// # Layout
//
// Only C-order (row-major) arrays are supported: a header with
// fortran_order True is rejected with an error wrapping [ErrUnsupported]
// that suggests np.ascontiguousarray. Shapes of any rank are accepted,
// including () (a scalar, a tensor with an empty Shape) and shapes with zero
// dims.
//
// # Robustness
//
// Read never trusts the header's shape for allocation: data is read in
// bounded chunks, so a short file claiming a huge shape fails with an
// io.ErrUnexpectedEOF-wrapping error after allocating no more than about
// twice what was actually present. Header length is capped at
// [MaxHeaderLen]. Read consumes exactly one array from the stream, so
// several arrays written back to back can be read in turn.
//
// # .npz archives
//
// ReadNPZ and WriteNPZ handle the archives of numpy.savez and
// numpy.savez_compressed: a zip file of .npy members, stored or deflated,
// keyed by member name without ".npy". Member sizes in the zip directory
// are not trusted for allocation; errors name the member and its byte
// offset in the archive.
package npy
