package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Constants of the model.bin v1 format; docs/format.md is the full
// specification.
const (
	// Magic is the 8-byte signature every model.bin file starts with.
	Magic = "VRUNMDL\x00"
	// Version is the format version this package reads and writes.
	Version = 1
	// HeaderSize is the size in bytes of the fixed header.
	HeaderSize = 48
	// Alignment is the alignment in bytes of the weights region and of
	// every weight's data, as an absolute file offset.
	Alignment = 64
)

// Limits enforced by the reader, the writer and [Model.Validate].
const (
	// MaxRank is the largest tensor rank.
	MaxRank = 8
	// MaxNameLen bounds the byte length of names: tensor, node, op,
	// attribute and dim names, and metadata keys.
	MaxNameLen = 4096
	// MaxStringLen bounds the byte length of other strings: metadata
	// values and string attribute values.
	MaxStringLen = 1 << 24
	// MaxCount bounds every count in the file: metadata entries, tensors,
	// nodes, attributes of a node, inputs and outputs of a node and
	// elements of an attribute list.
	MaxCount = 1 << 24
)

// Tensor entry flag bits.
const (
	tensorHasDimNames = 1 << 0
	tensorFlagsKnown  = tensorHasDimNames
)

// Header field offsets.
const (
	hdrVersion    = 8
	hdrFlags      = 12
	hdrTablesSize = 16
	hdrWeightsOff = 24
	hdrWeightsLen = 32
	hdrTablesCRC  = 40
	hdrWeightsCRC = 44
)

// Minimum encoded sizes, used to bound counts before allocating.
const (
	minMetaEntry   = 4 + 4
	minTensorEntry = 4 + 4
	minNodeEntry   = 4 + 4 + 4 + 4 + 4
	minAttr        = 4 + 1 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var le = binary.LittleEndian

// ErrChecksum is wrapped by the *FormatError returned when a CRC-32C
// checksum of the file does not match: test with errors.Is.
var ErrChecksum = errors.New("checksum mismatch")

// FormatError describes a malformed or invalid model, read from a file or
// built in memory.
type FormatError struct {
	// Offset is the absolute file offset of the faulty item, or -1 when
	// unknown (a model validated in memory).
	Offset int64
	// Section is the part of the file: "header", "metadata",
	// "tensor table", "node list", "weights" or "file".
	Section string
	// Msg says what is wrong.
	Msg string
	// Err is an underlying cause such as ErrChecksum or
	// io.ErrUnexpectedEOF, or nil.
	Err error
	// Path is the file name when the model came from [Load]; "" otherwise.
	Path string
}

// Error formats the error as
// `model.bin: tensor table at byte 1234: tensor 3 "conv1.w": dim 2 is -7`.
// When Path is set it replaces the "model.bin" prefix.
func (e *FormatError) Error() string {
	prefix := "model.bin"
	if e.Path != "" {
		prefix = e.Path
	}
	if e.Offset >= 0 {
		return fmt.Sprintf("%s: %s at byte %d: %s", prefix, e.Section, e.Offset, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", prefix, e.Section, e.Msg)
}

// Unwrap returns the underlying cause, so that errors.Is(err, ErrChecksum)
// reports a checksum failure.
func (e *FormatError) Unwrap() error { return e.Err }

// Section names used in FormatError.
const (
	secHeader  = "header"
	secMeta    = "metadata"
	secTensors = "tensor table"
	secNodes   = "node list"
	secWeights = "weights"
	secFile    = "file"
)

func ferr(off int64, section, format string, args ...any) *FormatError {
	return &FormatError{Offset: off, Section: section, Msg: fmt.Sprintf(format, args...)}
}

// align rounds n up to a multiple of Alignment; n must be non-negative and
// small enough not to overflow.
func align(n int64) int64 { return (n + Alignment - 1) &^ (Alignment - 1) }

// tablesCRC is the checksum stored at header offset 40: CRC-32C over header
// bytes [0, 40) followed by the tables region.
func tablesCRC(header, tables []byte) uint32 {
	c := crc32.Update(0, castagnoli, header[:hdrTablesCRC])
	return crc32.Update(c, castagnoli, tables)
}
