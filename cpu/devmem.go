package cpu

import "github.com/vrun-go/vrun/rt"

// The CPU device implements the optional memory interfaces of rt: its
// buffers are host memory, so Map is the buffer itself (zero-copy), Copy
// is one memmove, and AllocHost is ordinary aligned memory (nothing needs
// pinning).
var _ rt.MemoryDevice = (*Device)(nil)

// Copy copies n bytes of src at srcOff into dst at dstOff.
func (d *Device) Copy(dst rt.Buffer, dstOff int64, src rt.Buffer, srcOff, n int64) error {
	return rt.CopyBuffers(BackendName, d.check, bytesOf, dst, dstOff, src, srcOff, n, func(t, s []byte) error {
		copy(t[dstOff:dstOff+n], s[srcOff:srcOff+n])
		dst.(*Buffer).written()
		return nil
	})
}

// Map returns the buffer's memory: CPU buffers are host memory. It
// returns nil for a freed buffer or one of another backend. Writes through
// the view are not seen by the constant hint (see [rt.ConstantBuffer]).
func (d *Device) Map(b rt.Buffer) []byte {
	cb, ok := b.(*Buffer)
	if !ok || cb == nil || cb.dev != d {
		return nil
	}
	return cb.Bytes()
}

// hostBuf is host memory from AllocHost.
type hostBuf struct {
	d    *Device
	data []byte
}

func (h *hostBuf) Bytes() []byte { return h.data }

// Size is the size asked of AllocHost (MemoryUsage counts it).
func (h *hostBuf) Size() int64 { return int64(len(h.data)) }

func (h *hostBuf) Free() {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if h.data != nil {
		delete(h.d.hosts, h)
		h.data = nil
	}
}

// AllocHost allocates size bytes of host memory, aligned like Alloc.
func (d *Device) AllocHost(size int64) (rt.HostBuffer, error) {
	b, err := d.Alloc(size) // same limits and alignment
	if err != nil {
		return nil, err
	}
	cb := b.(*Buffer)
	h := &hostBuf{d: d, data: cb.Bytes()}
	d.mu.Lock()
	delete(d.bufs, cb) // the memory now belongs to h
	d.hosts[h] = struct{}{}
	d.mu.Unlock()
	return h, nil
}

// MemoryUsage counts the live buffers and host buffers.
func (d *Device) MemoryUsage() rt.MemoryUsage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return rt.CountMemory(d.bufs, d.hosts)
}
