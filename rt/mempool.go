package rt

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"strings"
	"sync"
)

// MemPoolOptions configures a [MemPool].
type MemPoolOptions struct {
	// Limit caps the bytes the pool holds on the device (Reserved); an
	// allocation that would pass it first releases the cached blocks, then
	// fails with an *OOMError. 0 means no limit but the device's.
	Limit int64
}

// MemPool is a caching allocator of device buffers and pinned host buffers
// for everything outside a session's fixed inference arena: device
// tensors, training arenas across re-plans, staging. It hands out whole
// backend buffers rounded up to a size class ([SizeClass]), keeps freed
// ones for reuse by a later request of the same class, and gives them back
// to the device on [MemPool.Trim], when an allocation fails for want of
// memory, and on [MemPool.Close].
//
// Stream-aware reuse: a buffer freed with [MemPool.FreeAfter] while work
// submitted on a stream may still use it is handed again only to
// allocations on that stream ([MemPool.AllocOn]), whose later work the
// stream orders after the earlier, until [MemPool.Sync] says the stream's
// work is done.
//
// Buffers from a pool go back through MemPool.Free (or DeviceTensor.Free),
// never Buffer.Free. A MemPool is safe for concurrent use.
type MemPool struct {
	dev      Device
	opts     MemPoolOptions
	maxAlloc int64 // DeviceInfo.MaxAlloc

	mu      sync.Mutex
	closed  bool
	free    map[int64][]Buffer            // cached blocks by class
	pending map[Stream]map[int64][]Buffer // freed after work on a stream
	live    map[Buffer]int64              // in-use blocks: bytes asked for
	hfree   map[int64][]HostBuffer
	hlive   map[HostBuffer]int64
	st      MemPoolStats
}

// MemPoolStats is a snapshot of a pool's memory, in bytes.
type MemPoolStats struct {
	InUse        int64 // asked for by the live allocations
	InUseBlocks  int64 // held by the live allocations (their size classes)
	Cached       int64 // free blocks kept for reuse (including those pending on a stream)
	Reserved     int64 // InUseBlocks + Cached: all the pool holds on the device
	PeakInUse    int64 // the most InUse since the pool was made
	PeakReserved int64 // the most Reserved since the pool was made
	Blocks       int   // live blocks
	CachedBlocks int   // cached blocks
	Allocs       int64 // allocations served
	Reuses       int64 // of which from the cache
	DeviceAllocs int64 // backend Alloc calls
	DeviceFrees  int64 // backend buffers released
	HostInUse    int64 // pinned host bytes in use
	HostReserved int64 // pinned host bytes held (in use and cached)
	HostPeak     int64 // the most HostReserved
	Limit        int64 // MemPoolOptions.Limit
}

// Fragmentation is the share of Reserved that holds no requested data:
// rounding to size classes plus cached blocks. 0 when nothing is reserved.
func (s MemPoolStats) Fragmentation() float64 {
	if s.Reserved <= 0 {
		return 0
	}
	return 1 - float64(s.InUse)/float64(s.Reserved)
}

// String renders the stats on one line, as `vrun -profile` prints them.
func (s MemPoolStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "in use %s in %d blocks, reserved %s (cached %s in %d blocks), peak %s in use / %s reserved, fragmentation %.1f%%",
		FormatBytes(s.InUse), s.Blocks, FormatBytes(s.Reserved), FormatBytes(s.Cached), s.CachedBlocks, FormatBytes(s.PeakInUse), FormatBytes(s.PeakReserved), 100*s.Fragmentation())
	fmt.Fprintf(&b, "; %d allocations (%d reused, %d device allocs, %d device frees)", s.Allocs, s.Reuses, s.DeviceAllocs, s.DeviceFrees)
	if s.HostReserved > 0 || s.HostPeak > 0 {
		fmt.Fprintf(&b, "; pinned host %s in use, %s reserved, peak %s", FormatBytes(s.HostInUse), FormatBytes(s.HostReserved), FormatBytes(s.HostPeak))
	}
	if s.Limit > 0 {
		fmt.Fprintf(&b, "; limit %s", FormatBytes(s.Limit))
	}
	return b.String()
}

// SizeClass is the block size a pool allocates for a request of n bytes:
// 256 bytes at least, the next power of two up to 4 KiB, then n rounded up
// to an eighth of its power of two (at most 12.5% rounding). A pool does
// not round a request past the device's DeviceInfo.MaxAlloc: such a block
// has the request's own size.
func SizeClass(n int64) int64 {
	if n <= 256 {
		return 256
	}
	if n <= 4096 {
		return 1 << bits.Len64(uint64(n-1))
	}
	step := int64(1) << (bits.Len64(uint64(n)) - 1 - 3)
	return (n + step - 1) / step * step
}

// NewMemPool makes a pool over dev. The caller must Close it before closing
// dev.
func NewMemPool(dev Device, opts MemPoolOptions) *MemPool {
	return &MemPool{dev: dev, opts: opts, free: map[int64][]Buffer{}, pending: map[Stream]map[int64][]Buffer{},
		live: map[Buffer]int64{}, hfree: map[int64][]HostBuffer{}, hlive: map[HostBuffer]int64{},
		st: MemPoolStats{Limit: opts.Limit}, maxAlloc: dev.Info().MaxAlloc}
}

// Device returns the pool's device.
func (p *MemPool) Device() Device { return p.dev }

// Alloc returns a buffer of at least size bytes (its Size is the size
// class). The contents are unspecified. Failure wraps ErrOutOfMemory
// with an *OOMError that names the request, the pool's state and the
// device heap.
func (p *MemPool) Alloc(size int64) (Buffer, error) { return p.AllocOn(size, nil) }

// AllocOn is Alloc for use on stream s: it may also reuse blocks freed
// with FreeAfter on s whose work has not been synced.
func (p *MemPool) AllocOn(size int64, s Stream) (Buffer, error) {
	if size < 0 || size > MaxTensorBytes {
		return nil, fmt.Errorf("rt: pool: bad allocation size %d", size)
	}
	class := SizeClass(size)
	if ma := p.maxAlloc; ma > 0 && class > ma && size <= ma {
		class = size // the largest buffers the device allows are not rounded up past it
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("rt: pool: %w", ErrClosed)
	}
	var b Buffer
	if s != nil {
		if pl := p.pending[s]; len(pl[class]) > 0 {
			b = pop(pl, class)
		}
	}
	if b == nil && len(p.free[class]) > 0 {
		b = pop(p.free, class)
	}
	if b != nil {
		p.st.Cached -= class
		p.st.CachedBlocks--
		p.st.Reuses++
		p.use(b, size, class)
		p.mu.Unlock()
		return b, nil
	}
	if p.opts.Limit > 0 && p.st.Reserved+class > p.opts.Limit {
		p.trimLocked()
	}
	if p.opts.Limit > 0 && p.st.Reserved+class > p.opts.Limit {
		err := p.oom(size, class, "", fmt.Sprintf("over the pool limit of %d bytes", p.opts.Limit))
		p.mu.Unlock()
		return nil, err
	}
	p.mu.Unlock()
	b, err := p.dev.Alloc(class)
	if err != nil && errors.Is(err, ErrOutOfMemory) {
		p.Trim()
		b, err = p.dev.Alloc(class)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if !errors.Is(err, ErrOutOfMemory) {
			return nil, fmt.Errorf("rt: pool: alloc %d bytes: %w", size, err)
		}
		heap, detail := "", err.Error()
		var oe *OOMError
		if errors.As(err, &oe) {
			heap, detail = oe.Heap, oe.Detail
		}
		return nil, p.oom(size, class, heap, detail)
	}
	p.st.DeviceAllocs++
	p.st.Reserved += class
	p.use(b, size, class)
	p.st.PeakReserved = max(p.st.PeakReserved, p.st.Reserved)
	return b, nil
}

func pop[T any](m map[int64][]T, class int64) T {
	l := m[class]
	x := l[len(l)-1]
	if len(l) == 1 {
		delete(m, class)
	} else {
		m[class] = l[:len(l)-1]
	}
	return x
}

// use records b as live; p.mu is held.
func (p *MemPool) use(b Buffer, size, class int64) {
	p.live[b] = size
	p.st.Allocs++
	p.st.Blocks++
	p.st.InUse += size
	p.st.InUseBlocks += class
	p.st.PeakInUse = max(p.st.PeakInUse, p.st.InUse)
}

// oom builds the error of a failed allocation; p.mu is held.
func (p *MemPool) oom(size, class int64, heap, detail string) error {
	info := p.dev.Info()
	if heap == "" {
		heap = info.Spec() + " memory"
	}
	return &OOMError{Backend: info.Backend, Request: size, Heap: heap,
		Detail: fmt.Sprintf("%s; pool (size class %d bytes): %s", detail, class, p.st)}
}

// unuse removes b from the live set and returns its class; p.mu is held.
func (p *MemPool) unuse(b Buffer) (int64, bool) {
	size, ok := p.live[b]
	if !ok {
		return 0, false
	}
	delete(p.live, b)
	class := b.Size()
	p.st.Blocks--
	p.st.InUse -= size
	p.st.InUseBlocks -= class
	return class, true
}

// Free gives b back to the pool, which keeps it for reuse. No submitted
// work may still use b (use FreeAfter otherwise). After Close, Free
// releases b to the device. A buffer the pool did not hand out is freed
// directly.
func (p *MemPool) Free(b Buffer) { p.FreeAfter(b, nil) }

// FreeAfter gives b back to the pool while work submitted on s may still
// use it: only allocations on s reuse it until Sync(s). With s nil it is
// Free.
func (p *MemPool) FreeAfter(b Buffer, s Stream) {
	if b == nil {
		return
	}
	p.mu.Lock()
	class, ok := p.unuse(b)
	if !ok || p.closed {
		if ok {
			p.st.Reserved -= class
			p.st.DeviceFrees++
		}
		p.mu.Unlock()
		b.Free()
		return
	}
	if s == nil {
		p.free[class] = append(p.free[class], b)
	} else {
		pl := p.pending[s]
		if pl == nil {
			pl = map[int64][]Buffer{}
			p.pending[s] = pl
		}
		pl[class] = append(pl[class], b)
	}
	p.st.Cached += class
	p.st.CachedBlocks++
	p.mu.Unlock()
}

// Sync tells the pool that the work submitted on s so far is done (its
// Wait returned): the blocks freed after it become free for every
// allocation.
func (p *MemPool) Sync(s Stream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for class, l := range p.pending[s] {
		p.free[class] = append(p.free[class], l...)
	}
	delete(p.pending, s)
}

// Trim releases the cached blocks (not those pending on a stream) and
// pinned host blocks back to the device and returns the bytes released.
func (p *MemPool) Trim() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trimLocked()
}

func (p *MemPool) trimLocked() int64 {
	var n int64
	for class, l := range p.free {
		for _, b := range l {
			b.Free()
			n += class
			p.st.DeviceFrees++
			p.st.CachedBlocks--
		}
	}
	clear(p.free)
	p.st.Cached -= n
	p.st.Reserved -= n
	var h int64
	for class, l := range p.hfree {
		for _, b := range l {
			b.Free()
			h += class
		}
	}
	clear(p.hfree)
	p.st.HostReserved -= h
	return n + h
}

// Stats returns a snapshot of the pool's memory.
func (p *MemPool) Stats() MemPoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// Live returns the sizes asked for by the live device allocations,
// largest first: what holds the pool's memory.
func (p *MemPool) Live() []int64 {
	p.mu.Lock()
	out := make([]int64, 0, len(p.live))
	for _, n := range p.live {
		out = append(out, n)
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	return out
}

// AllocHost returns size bytes of pinned host memory for transfers to and
// from the pool's device (ordinary Go memory where the device has no
// pinned memory; see [AllocHost]), from the pool's host cache when it can.
// The slice to use is Bytes()[:size]. Give it back with FreeHost.
func (p *MemPool) AllocHost(size int64) (HostBuffer, error) {
	if size < 0 || size > MaxTensorBytes {
		return nil, fmt.Errorf("rt: pool: bad host allocation size %d", size)
	}
	class := SizeClass(size)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("rt: pool: %w", ErrClosed)
	}
	if len(p.hfree[class]) > 0 {
		hb := pop(p.hfree, class)
		p.hlive[hb] = class
		p.st.HostInUse += class
		p.mu.Unlock()
		return hb, nil
	}
	p.mu.Unlock()
	hb, err := AllocHost(p.dev, class)
	if err != nil {
		return nil, fmt.Errorf("rt: pool: pinned host memory (%d bytes): %w", size, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hlive[hb] = class
	p.st.HostInUse += class
	p.st.HostReserved += class
	p.st.HostPeak = max(p.st.HostPeak, p.st.HostReserved)
	return hb, nil
}

// FreeHost gives a host buffer from AllocHost back to the pool.
func (p *MemPool) FreeHost(hb HostBuffer) {
	if hb == nil {
		return
	}
	p.mu.Lock()
	class, ok := p.hlive[hb]
	if ok {
		delete(p.hlive, hb)
		p.st.HostInUse -= class
	}
	if !ok || p.closed {
		if ok {
			p.st.HostReserved -= class
		}
		p.mu.Unlock()
		hb.Free()
		return
	}
	p.hfree[class] = append(p.hfree[class], hb)
	p.mu.Unlock()
}

// Close releases every cached block, including those pending on streams
// (the caller has waited for its streams), and makes later allocations
// fail with ErrClosed. Blocks still in use stay valid: their Free (or
// DeviceTensor.Free) then releases them to the device. It is safe to call
// more than once.
func (p *MemPool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	for s := range p.pending {
		for class, l := range p.pending[s] {
			p.free[class] = append(p.free[class], l...)
		}
	}
	clear(p.pending)
	p.trimLocked()
	p.closed = true
	return nil
}
