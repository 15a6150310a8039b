package dist

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/vrun-go/vrun/rt"
)

// Replicated is the Axis of an Array that holds a whole copy of the
// tensor on every device.
const Replicated = -1

// Shard is one device's part of an Array: Shape elements of the array's
// dtype at byte offset Off of Buf on Dev.
type Shard struct {
	Dev   rt.Device
	Buf   rt.Buffer
	Off   int64
	Shape []int
}

// Bytes is the shard's size in bytes for elements of dtype dt.
func (s Shard) Bytes(dt rt.DType) int64 { return rt.NumElements(s.Shape) * int64(dt.Size()) }

// Array is a tensor spread over several devices (a DeviceArray): split
// along dimension Axis, shard k holding rows [Offsets[k], Offsets[k+1]) of
// that dimension, or, with Axis Replicated, a whole copy on every device.
//
// An Array's methods are not safe for concurrent use on one Array.
type Array struct {
	DType  rt.DType
	Shape  []int // the whole tensor's shape
	Axis   int   // the split dimension, or Replicated
	Shards []Shard
	owned  bool // Free releases the shards' buffers
}

// Split divides n rows into parts nearly equal shares, the first n % parts
// one row larger: Split(10, 3) is [4 3 3]. Shares are zero when n < parts.
func Split(n, parts int) []int {
	if parts <= 0 {
		return nil
	}
	out := make([]int, parts)
	for k := range out {
		out[k] = n / parts
		if k < n%parts {
			out[k]++
		}
	}
	return out
}

// checkDevices rejects an empty list, nil devices and a device listed
// twice.
func checkDevices(devs []rt.Device) error {
	if len(devs) == 0 {
		return errors.New("dist: no devices")
	}
	for i, d := range devs {
		if d == nil {
			return fmt.Errorf("dist: device %d is nil", i)
		}
		for j := range i {
			if devs[j] == d {
				return fmt.Errorf("dist: device %s is listed twice (positions %d and %d); open it again for a second logical device", d.Info().Spec(), j, i)
			}
		}
	}
	return nil
}

// parallel runs f(k) for k in [0, n) in goroutines and joins the errors.
func parallel(n int, f func(k int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = f(k)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// devErr names the device of shard k in err.
func devErr(what string, k int, d rt.Device, err error) error {
	return fmt.Errorf("dist: %s: device %d (%s): %w", what, k, d.Info().Spec(), err)
}

// alloc allocates one buffer per shard shape; on failure it frees what it
// allocated.
func alloc(devs []rt.Device, dt rt.DType, shapes [][]int) ([]Shard, error) {
	shards := make([]Shard, len(devs))
	for k, d := range devs {
		n := max(rt.NumElements(shapes[k])*int64(dt.Size()), 1)
		b, err := d.Alloc(n)
		if err != nil {
			for _, s := range shards[:k] {
				s.Buf.Free()
			}
			return nil, devErr("alloc", k, d, err)
		}
		shards[k] = Shard{Dev: d, Buf: b, Shape: shapes[k]}
	}
	return shards, nil
}

// rowBlock returns the outer count and the byte size of one row block
// along axis: the tensor is outer × shape[axis] × inner.
func rowBlock(shape []int, axis int, size int) (outer int, inner int) {
	outer = 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	inner = size
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	return outer, inner
}

// Scatter splits host tensor t along axis over devs (rows as [Split]
// gives them) into new device buffers, which Free releases.
func Scatter(devs []rt.Device, t *rt.Tensor, axis int) (*Array, error) {
	if err := checkDevices(devs); err != nil {
		return nil, err
	}
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("dist: scatter: %w", err)
	}
	if axis < 0 || axis >= len(t.Shape) {
		return nil, fmt.Errorf("dist: scatter: axis %d out of range for shape %v", axis, t.Shape)
	}
	if t.Shape[axis] < len(devs) {
		return nil, fmt.Errorf("dist: scatter: %d rows along axis %d cannot be split over %d devices", t.Shape[axis], axis, len(devs))
	}
	rows := Split(t.Shape[axis], len(devs))
	shapes := make([][]int, len(devs))
	for k, r := range rows {
		shapes[k] = slices.Clone(t.Shape)
		shapes[k][axis] = r
	}
	shards, err := alloc(devs, t.DType, shapes)
	if err != nil {
		return nil, err
	}
	a := &Array{DType: t.DType, Shape: slices.Clone(t.Shape), Axis: axis, Shards: shards, owned: true}
	outer, inner := rowBlock(t.Shape, axis, t.DType.Size())
	starts := a.Offsets()
	err = parallel(len(devs), func(k int) error {
		src := t.Data
		if outer > 1 { // gather the shard's rows of each outer block
			src = make([]byte, 0, shards[k].Bytes(t.DType))
			for o := range outer {
				base := (o*t.Shape[axis] + starts[k]) * inner
				src = append(src, t.Data[base:base+rows[k]*inner]...)
			}
		} else {
			src = src[starts[k]*inner : starts[k+1]*inner]
		}
		if len(src) == 0 {
			return nil
		}
		if err := devs[k].Write(shards[k].Buf, 0, src); err != nil {
			return devErr("scatter", k, devs[k], err)
		}
		return nil
	})
	if err != nil {
		a.Free()
		return nil, err
	}
	return a, nil
}

// Replicate copies host tensor t to every device of devs, into new
// buffers that Free releases.
func Replicate(devs []rt.Device, t *rt.Tensor) (*Array, error) {
	if err := checkDevices(devs); err != nil {
		return nil, err
	}
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("dist: replicate: %w", err)
	}
	shapes := make([][]int, len(devs))
	for k := range shapes {
		shapes[k] = slices.Clone(t.Shape)
	}
	shards, err := alloc(devs, t.DType, shapes)
	if err != nil {
		return nil, err
	}
	a := &Array{DType: t.DType, Shape: slices.Clone(t.Shape), Axis: Replicated, Shards: shards, owned: true}
	if len(t.Data) == 0 {
		return a, nil
	}
	if err := parallel(len(devs), func(k int) error {
		if err := devs[k].Write(shards[k].Buf, 0, t.Data); err != nil {
			return devErr("replicate", k, devs[k], err)
		}
		return nil
	}); err != nil {
		a.Free()
		return nil, err
	}
	return a, nil
}

// View wraps existing device memory as an Array (Free leaves it alone):
// with axis Replicated every shard must have shape; otherwise the shards
// must agree with shape on every dimension but axis, along which their
// sizes add up to shape[axis].
func View(dt rt.DType, shape []int, axis int, shards []Shard) (*Array, error) {
	devs := make([]rt.Device, len(shards))
	for k, s := range shards {
		devs[k] = s.Dev
		if s.Buf == nil {
			return nil, fmt.Errorf("dist: view: shard %d has no buffer", k)
		}
	}
	if err := checkDevices(devs); err != nil {
		return nil, err
	}
	if !dt.Valid() {
		return nil, fmt.Errorf("dist: view: bad dtype %s", dt)
	}
	if axis != Replicated && (axis < 0 || axis >= len(shape)) {
		return nil, fmt.Errorf("dist: view: axis %d out of range for shape %v", axis, shape)
	}
	rows := 0
	for k, s := range shards {
		if len(s.Shape) != len(shape) {
			return nil, fmt.Errorf("dist: view: shard %d has shape %v, want rank %d", k, s.Shape, len(shape))
		}
		for i := range shape {
			if i != axis && s.Shape[i] != shape[i] {
				return nil, fmt.Errorf("dist: view: shard %d has shape %v, incompatible with %v along axis %d", k, s.Shape, shape, axis)
			}
		}
		if axis != Replicated {
			rows += s.Shape[axis]
		}
		if s.Off < 0 || s.Off+s.Bytes(dt) > s.Buf.Size() {
			return nil, fmt.Errorf("dist: view: shard %d (%d bytes at %d) overruns its %d-byte buffer", k, s.Bytes(dt), s.Off, s.Buf.Size())
		}
	}
	if axis != Replicated && rows != shape[axis] {
		return nil, fmt.Errorf("dist: view: shards hold %d rows along axis %d, want %d", rows, axis, shape[axis])
	}
	return &Array{DType: dt, Shape: slices.Clone(shape), Axis: axis, Shards: slices.Clone(shards)}, nil
}

// Devices lists the shards' devices in order.
func (a *Array) Devices() []rt.Device {
	out := make([]rt.Device, len(a.Shards))
	for k, s := range a.Shards {
		out[k] = s.Dev
	}
	return out
}

// Offsets returns where each shard starts along the split axis, with the
// axis length appended: shard k holds rows [Offsets()[k], Offsets()[k+1]).
// A replicated array gives all zeros.
func (a *Array) Offsets() []int {
	out := make([]int, len(a.Shards)+1)
	if a.Axis == Replicated {
		return out
	}
	for k, s := range a.Shards {
		out[k+1] = out[k] + s.Shape[a.Axis]
	}
	return out
}

// Gather reads the array into one host tensor: the shards' rows joined
// along the split axis in device order, or, replicated, shard 0's copy.
func (a *Array) Gather() (*rt.Tensor, error) {
	t, err := rt.NewTensor(a.DType, a.Shape...)
	if err != nil {
		return nil, fmt.Errorf("dist: gather: %w", err)
	}
	if a.Axis == Replicated {
		s := a.Shards[0]
		if err := s.Dev.Read(t.Data, s.Buf, s.Off); err != nil {
			return nil, devErr("gather", 0, s.Dev, err)
		}
		return t, nil
	}
	outer, inner := rowBlock(a.Shape, a.Axis, a.DType.Size())
	starts := a.Offsets()
	err = parallel(len(a.Shards), func(k int) error {
		s := a.Shards[k]
		rows := s.Shape[a.Axis]
		if rows == 0 {
			return nil
		}
		if outer == 1 {
			dst := t.Data[starts[k]*inner : starts[k+1]*inner]
			if err := s.Dev.Read(dst, s.Buf, s.Off); err != nil {
				return devErr("gather", k, s.Dev, err)
			}
			return nil
		}
		tmp := make([]byte, s.Bytes(a.DType))
		if err := s.Dev.Read(tmp, s.Buf, s.Off); err != nil {
			return devErr("gather", k, s.Dev, err)
		}
		for o := range outer {
			base := (o*a.Shape[a.Axis] + starts[k]) * inner
			copy(t.Data[base:base+rows*inner], tmp[o*rows*inner:])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Broadcast copies shard root of a replicated array to every other shard.
func (a *Array) Broadcast(root int) error {
	if a.Axis != Replicated {
		return fmt.Errorf("dist: broadcast: the array is split along axis %d, not replicated", a.Axis)
	}
	if root < 0 || root >= len(a.Shards) {
		return fmt.Errorf("dist: broadcast: root %d out of range (%d devices)", root, len(a.Shards))
	}
	r := a.Shards[root]
	buf := make([]byte, r.Bytes(a.DType))
	if len(buf) == 0 {
		return nil
	}
	if err := r.Dev.Read(buf, r.Buf, r.Off); err != nil {
		return devErr("broadcast", root, r.Dev, err)
	}
	return parallel(len(a.Shards), func(k int) error {
		if k == root {
			return nil
		}
		s := a.Shards[k]
		if err := s.Dev.Write(s.Buf, s.Off, buf); err != nil {
			return devErr("broadcast", k, s.Dev, err)
		}
		return nil
	})
}

// Free releases the buffers of an array made by Scatter or Replicate; an
// array made by View is left alone. It is safe to call more than once.
func (a *Array) Free() {
	if a.owned {
		for _, s := range a.Shards {
			s.Buf.Free()
		}
		a.owned = false
	}
}
