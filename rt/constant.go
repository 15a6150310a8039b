package rt

// ConstantBuffer is an optional Buffer capability: a hint that the
// buffer's contents are constant (written once, at load, then only read),
// for backends that keep data derived from an operand's contents (the CPU
// backend's packed and Winograd-transformed convolution weights) and would
// otherwise compare the operand with their copy on every use.
//
// MarkConstant sets the hint and forgets whatever the backend had derived
// from the buffer before it. The hint lasts until the next write to the
// buffer through the backend: Device.Write, a Stream.Write at its Submit,
// Copier.Copy into it, or a launched op whose output is in it. Each of
// those drops the hint and the derived data, so a backend never uses data
// derived from stale contents. Writes through a host view (Mapper.Map) are
// not seen: a caller that writes through one must call MarkConstant again
// afterwards (or not mark the buffer). Buffers whose contents change at
// run time (trained weights) should not be marked; marking them is
// correct but only costs time.
type ConstantBuffer interface {
	Buffer
	// MarkConstant sets the hint.
	MarkConstant()
	// Constant reports whether the hint is set.
	Constant() bool
}

// MarkConstant marks b constant (see [ConstantBuffer]) when its backend
// takes the hint, and does nothing otherwise.
func MarkConstant(b Buffer) {
	if c, ok := b.(ConstantBuffer); ok {
		c.MarkConstant()
	}
}
