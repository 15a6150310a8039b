package dist

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// ReduceOp combines the shards of a replicated array.
type ReduceOp int

// Reductions.
const (
	// Sum adds the shards, each scaled by its weight (1 by default).
	Sum ReduceOp = iota
	// Mean is Sum divided by the sum of the weights: the plain mean by
	// default, the weighted mean with ReduceOptions.Weights.
	Mean
)

func (op ReduceOp) String() string {
	switch op {
	case Sum:
		return "sum"
	case Mean:
		return "mean"
	}
	return fmt.Sprintf("ReduceOp(%d)", int(op))
}

// DefaultBucketBytes is the bucket size of a reduction when
// ReduceOptions.BucketBytes is zero.
const DefaultBucketBytes = 4 << 20

// DefaultGradBucketBytes is the size of the gradient buckets of a
// data-parallel trainer when its options leave it zero: about 25 MB, as
// PyTorch DistributedDataParallel's bucket_cap_mb.
const DefaultGradBucketBytes = 25 << 20

// ReduceOptions tunes a reduction.
type ReduceOptions struct {
	// Weights scale each shard (one per device, finite, at least one
	// non-zero); nil means 1 each. With Mean and the shards' batch sizes
	// as weights, the mean of per-shard mean gradients is the gradient of
	// the whole batch.
	Weights []float64
	// BucketBytes is the size of the slices that are read, reduced and
	// written as a pipeline: the reads of bucket b+1 overlap the host
	// reduction of bucket b and the writes of bucket b-1. Zero means
	// DefaultBucketBytes.
	BucketBytes int64
	// Buckets, if set, are the slices themselves, in the order they are
	// processed (BucketsByParam's, for gradients), instead of BucketBytes'
	// even cut. Each lies within the array and holds whole elements;
	// together they should cover it (bytes outside every bucket are left
	// as they are).
	Buckets []Bucket
	// Staging keeps pinned staging buffers between calls; nil allocates
	// them for the call.
	Staging *Staging
	// Ready, if set, holds one channel per device: device k's data is read
	// only after a value arrives on Ready[k], so that the reduction of
	// devices that are done overlaps the work of the others. A non-nil
	// error received there ends the reduction with that error.
	Ready []<-chan error
}

// Bucket is a byte range [Off, Off+Len) of a flat buffer.
type Bucket struct{ Off, Len int64 }

// Buckets cuts n bytes of elements of elemSize bytes into buckets of at
// most bucketBytes (rounded down to whole elements, at least one
// element); zero or negative bucketBytes means DefaultBucketBytes.
func Buckets(n int64, elemSize int, bucketBytes int64) []Bucket {
	if bucketBytes <= 0 {
		bucketBytes = DefaultBucketBytes
	}
	es := int64(max(elemSize, 1))
	bucketBytes = max(bucketBytes/es*es, es)
	var out []Bucket
	for off := int64(0); off < n; off += bucketBytes {
		out = append(out, Bucket{Off: off, Len: min(bucketBytes, n-off)})
	}
	return out
}

// AllReduce combines the shards of a replicated array with op and writes
// the result to every shard.
func (a *Array) AllReduce(op ReduceOp, opts ReduceOptions) error {
	targets := make([]int, len(a.Shards))
	for k := range targets {
		targets[k] = k
	}
	return a.reduce(op, opts, targets, "all-reduce")
}

// Reduce combines the shards of a replicated array with op and writes the
// result to shard root only.
func (a *Array) Reduce(root int, op ReduceOp, opts ReduceOptions) error {
	if root < 0 || root >= len(a.Shards) {
		return fmt.Errorf("dist: reduce: root %d out of range (%d devices)", root, len(a.Shards))
	}
	return a.reduce(op, opts, []int{root}, "reduce")
}

// scales returns each shard's factor in the sum.
func (a *Array) scales(op ReduceOp, w []float64) ([]float64, error) {
	n := len(a.Shards)
	if w == nil {
		w = make([]float64, n)
		for k := range w {
			w[k] = 1
		}
	}
	if len(w) != n {
		return nil, fmt.Errorf("%d weights for %d devices", len(w), n)
	}
	total := 0.0
	for _, v := range w {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("weight %g", v)
		}
		total += v
	}
	out := append([]float64(nil), w...)
	switch op {
	case Sum:
	case Mean:
		if total == 0 {
			return nil, fmt.Errorf("the weights %v add up to zero", w)
		}
		for k := range out {
			out[k] /= total
		}
	default:
		return nil, fmt.Errorf("unknown %v", op)
	}
	return out, nil
}

// Staging keeps the host staging buffers of reductions between calls:
// pinned memory from rt.AllocHost for devices that have it (CUDA
// cuMemHostAlloc, host-visible Vulkan memory), which their Read and Write
// use without a staging copy of their own. The zero value is ready to
// use; Free releases the buffers. A Staging may serve one reduction at a
// time.
type Staging struct {
	mu   sync.Mutex
	bufs map[rt.Device][]rt.HostBuffer
}

// take returns n buffers of at least size bytes for dev.
func (st *Staging) take(dev rt.Device, n int, size int64) ([]rt.HostBuffer, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.bufs == nil {
		st.bufs = map[rt.Device][]rt.HostBuffer{}
	}
	have := st.bufs[dev]
	if len(have) >= n && int64(len(have[0].Bytes())) >= size {
		return have[:n], nil
	}
	for _, hb := range have {
		hb.Free()
	}
	st.bufs[dev] = nil
	var out []rt.HostBuffer
	for range n {
		hb, err := rt.AllocHost(dev, size)
		if err != nil {
			for _, h := range out {
				h.Free()
			}
			return nil, err
		}
		out = append(out, hb)
	}
	st.bufs[dev] = out
	return out, nil
}

// Free releases the staging buffers.
func (st *Staging) Free() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, bs := range st.bufs {
		for _, hb := range bs {
			hb.Free()
		}
	}
	st.bufs = nil
}

// piece is one device's bucket on its way to the reducer: a slice of the
// device's mapped memory, or of staging buffer slot.
type piece struct {
	b    []byte
	slot int // -1: mapped memory
}

// stageDepth is the number of buckets in flight per device.
const stageDepth = 2

// reduce runs the bucketed pipeline: a reader goroutine per device, the
// reduction on the calling goroutine, a writer goroutine per target.
// Devices whose buffers the host can map (the CPU, unified memory,
// lavapipe) are read and written in place; the others through staging
// buffers.
func (a *Array) reduce(op ReduceOp, opts ReduceOptions, targets []int, what string) error {
	if a.Axis != Replicated {
		return fmt.Errorf("dist: %s: the array is split along axis %d, not replicated", what, a.Axis)
	}
	sc, err := a.scales(op, opts.Weights)
	if err != nil {
		return fmt.Errorf("dist: %s: %w", what, err)
	}
	if opts.Ready != nil && len(opts.Ready) != len(a.Shards) {
		return fmt.Errorf("dist: %s: %d ready channels for %d devices", what, len(opts.Ready), len(a.Shards))
	}
	dt := a.DType
	if !dt.IsFloat() && dt != rt.I32 && dt != rt.I64 {
		return fmt.Errorf("dist: %s: dtype %s cannot be reduced", what, dt)
	}
	n := a.Shards[0].Bytes(dt)
	bs := Buckets(n, dt.Size(), opts.BucketBytes)
	if opts.Buckets != nil {
		bs = opts.Buckets
		es := int64(dt.Size())
		for _, b := range bs {
			if b.Off < 0 || b.Len <= 0 || b.Off+b.Len > n || b.Off%es != 0 || b.Len%es != 0 {
				return fmt.Errorf("dist: %s: bucket [%d, %d) does not lie in the %d bytes of %s elements", what, b.Off, b.Off+b.Len, n, dt)
			}
		}
	}
	if len(bs) == 0 {
		return nil
	}
	maxLen := int64(0)
	for _, b := range bs {
		maxLen = max(maxLen, b.Len)
	}
	st := opts.Staging
	if st == nil {
		st = &Staging{}
		defer st.Free()
	}
	views := make([][]byte, len(a.Shards))
	stage := make([][]rt.HostBuffer, len(a.Shards))
	for k, s := range a.Shards {
		if v := rt.MapBuffer(s.Dev, s.Buf); v != nil {
			views[k] = v[s.Off : s.Off+n]
			continue
		}
		if stage[k], err = st.take(s.Dev, stageDepth, maxLen); err != nil {
			return devErr(what+": staging", k, s.Dev, err)
		}
	}
	stop := make(chan struct{})
	var once sync.Once
	var first error
	fail := func(err error) {
		once.Do(func() { first = err; close(stop) })
	}
	var wg sync.WaitGroup
	// Readers: bucket b of device k arrives on in[k] in order; free[k]
	// returns staging slots.
	in := make([]chan piece, len(a.Shards))
	free := make([]chan int, len(a.Shards))
	for k, s := range a.Shards {
		in[k] = make(chan piece, stageDepth)
		free[k] = make(chan int, stageDepth)
		for i := range stageDepth {
			free[k] <- i
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if opts.Ready != nil {
				select {
				case err := <-opts.Ready[k]:
					if err != nil {
						fail(err)
						return
					}
				case <-stop:
					return
				}
			}
			for _, b := range bs {
				p := piece{slot: -1}
				if views[k] != nil {
					p.b = views[k][b.Off : b.Off+b.Len]
				} else {
					select {
					case p.slot = <-free[k]:
					case <-stop:
						return
					}
					p.b = stage[k][p.slot].Bytes()[:b.Len]
					if err := s.Dev.Read(p.b, s.Buf, s.Off+b.Off); err != nil {
						fail(devErr(what, k, s.Dev, err))
						return
					}
				}
				select {
				case in[k] <- p:
				case <-stop:
					return
				}
			}
		}()
	}
	// Writers: the reduced bucket goes to every target; each writer
	// processes every bucket it is sent (skipping the writes after an
	// error), so the reducer's wait for a result slot always ends.
	var slots [stageDepth]sync.WaitGroup
	res := make([][]byte, stageDepth)
	for i := range res {
		res[i] = make([]byte, maxLen)
	}
	type job struct {
		b    Bucket
		slot int
	}
	out := make([]chan job, len(targets))
	for j, k := range targets {
		out[j] = make(chan job, stageDepth)
		s := a.Shards[k]
		wg.Add(1)
		go func() {
			defer wg.Done()
			failed := false
			for jb := range out[j] {
				if !failed {
					src := res[jb.slot][:jb.b.Len]
					if views[k] != nil {
						copy(views[k][jb.b.Off:], src)
					} else if err := s.Dev.Write(s.Buf, s.Off+jb.b.Off, src); err != nil {
						fail(devErr(what, k, s.Dev, err))
						failed = true
					}
				}
				slots[jb.slot].Done()
			}
		}()
	}
	acc := make([]float64, maxLen/int64(dt.Size()))
loop:
	for bi, b := range bs {
		m := int(b.Len) / dt.Size()
		acc := acc[:m]
		clear(acc)
		for k := range a.Shards {
			var p piece
			select {
			case p = <-in[k]:
			case <-stop:
				break loop
			}
			accumulate(acc, p.b, dt, sc[k])
			if p.slot >= 0 {
				free[k] <- p.slot
			}
		}
		slot := bi % stageDepth
		slots[slot].Wait() // the writers are done with this slot's last bucket
		store(res[slot][:b.Len], acc, dt)
		slots[slot].Add(len(out))
		for j := range out {
			out[j] <- job{b, slot}
		}
	}
	for j := range out {
		close(out[j])
	}
	wg.Wait() // every goroutine ends: all buckets done, or stop closed
	return first
}

// littleEndian is whether the host stores numbers as the tensors do, so
// that aligned tensor bytes can be read as Go floats in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// f32s and f64s view b as floats when the host is little-endian and b is
// aligned, else nil.
func f32s(b []byte) []float32 {
	if !littleEndian || len(b) < 4 || uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func f64s(b []byte) []float64 {
	if !littleEndian || len(b) < 8 || uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// accumulate adds s × the elements of buf (dtype dt) to acc.
func accumulate(acc []float64, buf []byte, dt rt.DType, s float64) {
	switch dt {
	case rt.F32:
		if v := f32s(buf); v != nil {
			v = v[:len(acc)]
			for i, x := range v {
				acc[i] += s * float64(x)
			}
			return
		}
		for i := range acc {
			acc[i] += s * float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])))
		}
	case rt.F64:
		if v := f64s(buf); v != nil {
			v = v[:len(acc)]
			for i, x := range v {
				acc[i] += s * x
			}
			return
		}
		for i := range acc {
			acc[i] += s * math.Float64frombits(binary.LittleEndian.Uint64(buf[8*i:]))
		}
	default:
		t := &rt.Tensor{DType: dt, Shape: []int{len(acc)}, Data: buf}
		for i := range acc {
			acc[i] += s * t.Float64(i)
		}
	}
}

// store writes acc into buf in dtype dt (rounding to nearest; integers
// truncate).
func store(buf []byte, acc []float64, dt rt.DType) {
	switch dt {
	case rt.F32:
		if y := f32s(buf); y != nil {
			y = y[:len(acc)]
			for i, v := range acc {
				y[i] = float32(v)
			}
			return
		}
		for i, v := range acc {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(v)))
		}
	case rt.F64:
		if y := f64s(buf); y != nil {
			copy(y, acc)
			return
		}
		for i, v := range acc {
			binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
		}
	default:
		t := &rt.Tensor{DType: dt, Shape: []int{len(acc)}, Data: buf}
		for i, v := range acc {
			t.SetFloat64(i, v)
		}
	}
}

// BucketsByParam groups the parameters of a flat gradient block (their
// sizes in bytes, in block order) into buckets of whole parameters of at
// most bucketBytes each (DefaultBucketBytes when zero or negative), from
// the last parameter to the first: the order in which the backward pass
// completes their gradients, so that a bucket can be reduced as soon as
// its parameters are done (PyTorch DDP's bucketing). A parameter larger
// than bucketBytes has a bucket of its own. The buckets are contiguous
// byte ranges of the block and together cover it.
func BucketsByParam(sizes []int64, bucketBytes int64) []Bucket {
	if bucketBytes <= 0 {
		bucketBytes = DefaultBucketBytes
	}
	offs := make([]int64, len(sizes)+1)
	for i, s := range sizes {
		offs[i+1] = offs[i] + s
	}
	var out []Bucket
	end := len(sizes) // the bucket being filled holds params [i, end)
	for i := len(sizes) - 1; i >= 0; i-- {
		if end > i+1 && offs[end]-offs[i] > bucketBytes {
			out = append(out, Bucket{Off: offs[i+1], Len: offs[end] - offs[i+1]})
			end = i + 1
		}
	}
	if end > 0 {
		out = append(out, Bucket{Off: 0, Len: offs[end]})
	}
	return out
}

// SplitBuckets cuts each bucket of bs into pieces of at most limit bytes
// of whole elements of elemSize bytes, keeping their order: the steps of
// a host pipeline within gradient buckets of whole parameters.
func SplitBuckets(bs []Bucket, elemSize int, limit int64) []Bucket {
	var out []Bucket
	for _, b := range bs {
		for _, p := range Buckets(b.Len, elemSize, limit) {
			out = append(out, Bucket{Off: b.Off + p.Off, Len: p.Len})
		}
	}
	return out
}
