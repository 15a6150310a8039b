package rt

import (
	"fmt"
	"math"
	"slices"
)

// DeviceTensor is a dense, row-major tensor held in device memory: the
// device-resident counterpart of [Tensor]. engine.Session.RunDevice takes
// and returns them, so that chained models make no trip through host
// memory.
//
// Ownership: whoever made a DeviceTensor (ToDevice, NewDeviceTensor, or a
// RunDevice that returned it) owns it and must Free it; Free gives the
// buffer back to its pool, or to the device when it has none. The tensor
// stays valid after the pool closes (Free then releases it to the
// device), but not after its device closes.
//
// Synchronisation: the data is complete when the call that produced it
// returns (ToDevice, RunDevice); device work that reads or writes it is
// ordered by the caller, who may not Free it or touch its Bytes while a
// run that uses it is in flight.
type DeviceTensor struct {
	DType  DType
	Shape  []int
	Device Device
	// Buffer holds the elements from offset 0; its Size may exceed Bytes()
	// (pools round up to a size class).
	Buffer Buffer
	pool   *MemPool
}

// NumBytes is the size of the elements in bytes.
func (t *DeviceTensor) NumBytes() int64 { return NumElements(t.Shape) * int64(t.DType.Size()) }

// Len is the number of elements.
func (t *DeviceTensor) Len() int { return int(NumElements(t.Shape)) }

// Pool is the pool the tensor's buffer came from, or nil.
func (t *DeviceTensor) Pool() *MemPool { return t.pool }

func deviceTensorSize(dt DType, shape []int) (int64, error) {
	n := NumElements(shape)
	if n < 0 || !dt.Valid() {
		return 0, fmt.Errorf("rt: bad device tensor %s%v", dt, shape)
	}
	if n > math.MaxInt64/16 || n*int64(dt.Size()) > MaxTensorBytes {
		return 0, &SizeError{What: fmt.Sprintf("device tensor %s%v", dt, shape), Need: n * int64(dt.Size()), Limit: MaxTensorBytes, Of: "that vrun allows for one tensor"}
	}
	return n * int64(dt.Size()), nil
}

// NewDeviceTensor allocates a device tensor from pool p. Its contents are
// unspecified.
func (p *MemPool) NewDeviceTensor(dt DType, shape ...int) (*DeviceTensor, error) {
	n, err := deviceTensorSize(dt, shape)
	if err != nil {
		return nil, err
	}
	b, err := p.Alloc(n)
	if err != nil {
		return nil, err
	}
	return &DeviceTensor{DType: dt, Shape: append([]int(nil), shape...), Device: p.dev, Buffer: b, pool: p}, nil
}

// ToDevice copies host tensor t to a new device tensor from pool p and
// returns when the copy is done.
func (p *MemPool) ToDevice(t *Tensor) (*DeviceTensor, error) {
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("rt: ToDevice: %w", err)
	}
	dt, err := p.NewDeviceTensor(t.DType, t.Shape...)
	if err != nil {
		return nil, fmt.Errorf("rt: ToDevice: %w", err)
	}
	if err := dt.Upload(t); err != nil {
		dt.Free()
		return nil, err
	}
	return dt, nil
}

// ToDevice copies host tensor t to a new device tensor on dev, in a
// buffer of its own (no pool), and returns when the copy is done.
func ToDevice(dev Device, t *Tensor) (*DeviceTensor, error) {
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("rt: ToDevice: %w", err)
	}
	n, err := deviceTensorSize(t.DType, t.Shape)
	if err != nil {
		return nil, err
	}
	b, err := dev.Alloc(n)
	if err != nil {
		return nil, fmt.Errorf("rt: ToDevice: %w", err)
	}
	dt := &DeviceTensor{DType: t.DType, Shape: append([]int(nil), t.Shape...), Device: dev, Buffer: b}
	if err := dt.Upload(t); err != nil {
		dt.Free()
		return nil, err
	}
	return dt, nil
}

// Upload copies host tensor src, of the same dtype and shape, into t and
// returns when done. Where t's memory is host-visible it is one copy into
// the mapped memory; otherwise the backend stages it (through pinned
// memory).
func (t *DeviceTensor) Upload(src *Tensor) error {
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.same(src); err != nil {
		return fmt.Errorf("rt: Upload: %w", err)
	}
	if err := t.Device.Write(t.Buffer, 0, src.Data); err != nil {
		return fmt.Errorf("rt: Upload: %w", err)
	}
	return nil
}

// ToHost copies t to a new host tensor and returns when done.
func (t *DeviceTensor) ToHost() (*Tensor, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	out, err := NewTensor(t.DType, t.Shape...)
	if err != nil {
		return nil, err
	}
	if err := t.Download(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Download copies t into host tensor dst, of the same dtype and shape,
// and returns when done.
func (t *DeviceTensor) Download(dst *Tensor) error {
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.same(dst); err != nil {
		return fmt.Errorf("rt: Download: %w", err)
	}
	if err := t.Device.Read(dst.Data, t.Buffer, 0); err != nil {
		return fmt.Errorf("rt: Download: %w", err)
	}
	return nil
}

// CopyFrom copies device tensor src, of the same dtype and shape and on
// the same device, into t without a host round trip (see [CopyBuffer]).
func (t *DeviceTensor) CopyFrom(src *DeviceTensor) error {
	if err := t.usable(); err != nil {
		return err
	}
	if err := src.usable(); err != nil {
		return err
	}
	if src.Device != t.Device {
		return fmt.Errorf("rt: CopyFrom: tensors on different devices (%s, %s)", src.Device.Info().Spec(), t.Device.Info().Spec())
	}
	if src.DType != t.DType || !slices.Equal(src.Shape, t.Shape) {
		return fmt.Errorf("rt: CopyFrom: %s%v into %s%v", src.DType, src.Shape, t.DType, t.Shape)
	}
	if err := CopyBuffer(t.Device, t.Buffer, 0, src.Buffer, 0, t.NumBytes()); err != nil {
		return fmt.Errorf("rt: CopyFrom: %w", err)
	}
	return nil
}

// Bytes returns the tensor's elements in place, without a copy, where its
// device memory is host-visible (the CPU, unified memory, lavapipe,
// ReBAR; see [Mapper]), or nil. The view may be read and written only
// while no submitted work uses the tensor.
func (t *DeviceTensor) Bytes() []byte {
	if t.Buffer == nil {
		return nil
	}
	v := MapBuffer(t.Device, t.Buffer)
	if v == nil {
		return nil
	}
	return v[:t.NumBytes()]
}

// Free releases the tensor's memory to its pool, or to the device. It is
// safe to call more than once.
func (t *DeviceTensor) Free() {
	if t == nil || t.Buffer == nil {
		return
	}
	if t.pool != nil {
		t.pool.Free(t.Buffer)
	} else {
		t.Buffer.Free()
	}
	t.Buffer = nil
}

func (t *DeviceTensor) usable() error {
	if t == nil || t.Buffer == nil {
		return fmt.Errorf("rt: device tensor: %w", ErrClosed)
	}
	return nil
}

func (t *DeviceTensor) same(h *Tensor) error {
	if err := h.Check(); err != nil {
		return err
	}
	if h.DType != t.DType || !slices.Equal(h.Shape, t.Shape) {
		return fmt.Errorf("host tensor %s%v does not match device tensor %s%v", h.DType, h.Shape, t.DType, t.Shape)
	}
	return nil
}
