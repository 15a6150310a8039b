package rt

// Preparer is implemented by devices that compile their kernels ahead of
// the first run: a Vulkan device creates its compute pipelines, an OpenCL
// device builds its programs. The engine calls [Prepare] with every op of
// a plan once it is planned, so that the first run only records and
// submits.
type Preparer interface {
	// Prepare builds every kernel, program or pipeline that launching ops
	// would need, concurrently where the driver allows, and returns once
	// they are ready. The ops' operands may be placeholders, as for
	// Device.Supports: only their shapes, dtypes and offsets matter.
	// Prepare is an optimisation: an op it skips, or whose kernel fails
	// to build, is built (and its error reported) by Stream.Launch.
	Prepare(ops []Op) error
}

// Prepare asks dev to build the kernels of ops ahead of their launch
// when it implements [Preparer], and does nothing otherwise.
func Prepare(dev Device, ops []Op) error {
	if p, ok := dev.(Preparer); ok && len(ops) > 0 {
		return p.Prepare(ops)
	}
	return nil
}
