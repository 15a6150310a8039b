package rt

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// ErrTooLarge is wrapped when a tensor, an arena or an allocation is larger
// than a device or the host can hold, or than a device lets one op address.
// The wrapping error (usually *SizeError) names what and by how much.
var ErrTooLarge = errors.New("too large")

// MaxTensorBytes is the largest tensor vrun plans or allocates: 256 TiB,
// more than any device holds. Sizes below it can be summed many times over
// without overflowing int64.
const MaxTensorBytes = int64(1) << 48

// SizeError reports something larger than a limit of a device or of the
// host. It matches ErrTooLarge under errors.Is.
type SizeError struct {
	What  string // `input "x" f32[100000000000 37]`, "the arena"
	Need  int64  // bytes needed; -1 when the size overflows int64
	Limit int64  // bytes allowed
	Of    string // what sets the limit: "host memory available", "memory of vulkan:0 (llvmpipe)"
}

func (e *SizeError) Error() string {
	need := "more than 8 EiB"
	if e.Need >= 0 {
		need = FormatBytes(e.Need)
	}
	return fmt.Sprintf("%s needs %s, more than the %s %s", e.What, need, FormatBytes(e.Limit), e.Of)
}

// Unwrap makes errors.Is(err, ErrTooLarge) true.
func (e *SizeError) Unwrap() error { return ErrTooLarge }

// MulBytes returns a*b, or -1 when either is negative or the product
// overflows int64.
func MulBytes(a, b int64) int64 {
	if a < 0 || b < 0 {
		return -1
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return -1
	}
	return int64(lo)
}

// AddBytes returns a+b, or -1 when either is negative or the sum
// overflows int64.
func AddBytes(a, b int64) int64 {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return -1
	}
	return a + b
}

// TensorBytes returns the size in bytes of a tensor of dtype dt and shape,
// or -1 when a dim is negative or the size overflows int64.
func TensorBytes(dt DType, shape []int) int64 {
	return MulBytes(NumElements(shape), int64(dt.Size()))
}

// CheckTensorSize returns a *SizeError when a tensor of dtype dt and
// shape, described by what, is larger than MaxTensorBytes, or than the
// host memory available when host is set (the tensor is to be allocated
// in host memory).
func CheckTensorSize(what string, dt DType, shape []int, host bool) error {
	n := TensorBytes(dt, shape)
	if what == "" {
		what = "a tensor"
	}
	what = fmt.Sprintf("%s %s%v", what, dt, shape)
	if n < 0 || n > MaxTensorBytes {
		return &SizeError{What: what, Need: n, Limit: MaxTensorBytes, Of: "that vrun allows for one tensor"}
	}
	if host {
		return CheckHostAlloc(what, n)
	}
	return nil
}

// CheckHostAlloc returns a *SizeError when n bytes, described by what, are
// more than the host memory available (see HostMemory).
func CheckHostAlloc(what string, n int64) error {
	avail, _ := HostMemory()
	if n < 0 || n > avail {
		return &SizeError{What: what, Need: n, Limit: avail, Of: hostMemoryName()}
	}
	return nil
}

// FormatBytes formats a byte count with a binary unit: "1.5 MiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// trimPrefixes drops from msg the leading "name: " prefixes that repeat
// one already said by the wrapping error ("cuda: cuda: ..." reads "cuda: ...").
func trimPrefixes(msg string, names ...string) string {
	for {
		trimmed := false
		for _, n := range names {
			if n != "" && strings.HasPrefix(msg, n+": ") {
				msg = msg[len(n)+2:]
				trimmed = true
			}
		}
		if !trimmed {
			return msg
		}
	}
}
