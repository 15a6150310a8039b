package data

import (
	"fmt"
)

// FormatError reports a file that is not in the format its reader
// expects: wrong magic, dims, sizes or label values, or truncated data.
// It names the file and the byte offset where the problem is.
type FormatError struct {
	// File is the path that was read (or the name given to a decoder).
	File string
	// Offset is the byte offset of the problem. For gzipped files it is
	// an offset in the decompressed stream (Decompressed is set).
	Offset       int64
	Decompressed bool
	// Msg describes the problem.
	Msg string
	// Err, if any, is the underlying error (io.ErrUnexpectedEOF for
	// truncated data).
	Err error
}

func (e *FormatError) Error() string {
	where := fmt.Sprintf("byte %d", e.Offset)
	if e.Decompressed {
		where += " of the decompressed data"
	}
	s := fmt.Sprintf("data: %s: %s: %s", e.File, where, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *FormatError) Unwrap() error { return e.Err }
