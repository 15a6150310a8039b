package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/vrun-go/vrun/rt"
)

// RNG streams: the second word of each PCG seed, so that one seed's uses
// (split, shuffle, augmentation) never share a sequence.
const (
	streamSplit   = 0x73706c6974     // "split"
	streamShuffle = 0x73687566666c65 // "shuffle"
	streamAugment = 0x6175676d656e74 // "augment"
)

// mix is SplitMix64's finaliser: it turns counters into RNG seeds.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// LoaderOptions configures a Loader.
type LoaderOptions struct {
	// BatchSize is the number of samples per batch (> 0).
	BatchSize int
	// Shuffle draws a new order of the samples each epoch.
	Shuffle bool
	// Seed seeds the shuffling and the augmentation. The same seed gives
	// the same batches, with or without prefetching.
	Seed uint64
	// DropLast drops the last batch of an epoch when it is short.
	DropLast bool
	// Mean and Std normalise each input value: (v - Mean[c]) / Std[c],
	// where c indexes the first dim of a sample (the channel of a
	// [C, H, W] image). A single value applies to every channel; empty
	// means 0 and 1. U8 inputs are first divided by 255 (torchvision's
	// ToTensor), so the MNIST statistics are Mean 0.1307, Std 0.3081.
	Mean, Std []float64
	// CropPadding, when positive, crops each [C, H, W] image at a random
	// offset out of the image zero-padded by CropPadding on every side
	// (torchvision's RandomCrop(size, padding)). The padding is zero
	// before normalisation.
	CropPadding int
	// HFlip mirrors each [C, H, W] image left to right with probability
	// one half (after the crop, as torchvision's RandomHorizontalFlip).
	HFlip bool
	// Prefetch, when positive, fills up to that many batches ahead on a
	// background goroutine, into reusable buffers, while the caller runs
	// its step. Zero loads each batch inside Next.
	Prefetch int
}

// Batch is one batch of samples. Its tensors live in buffers the Loader
// reuses: they are valid until the next call of Next, SetState or Close.
type Batch struct {
	// X holds the inputs as F32, [B, ...] with the dataset's sample shape:
	// scaled, normalised and augmented.
	X *rt.Tensor
	// Y holds the targets: I64 for integer labels, F32 for float
	// targets, [B, ...].
	Y *rt.Tensor
	// Epoch and Index place the batch: its epoch (from 0) and its
	// position in the epoch (from 0).
	Epoch, Index int
	// Samples are the dataset indices of the batch's samples, in order.
	Samples []int

	xbuf, ybuf []byte
	idx        []int
}

// LoaderState is a loader's position, for checkpoints: the next batch
// Next returns is batch Batch of epoch Epoch. The shuffle order and the
// augmentation of every batch are functions of (Seed, Epoch, Batch), so
// these numbers are the whole random state. Samples and BatchSize
// identify the dataset and batching that the position refers to.
type LoaderState struct {
	Epoch     int    `json:"epoch"`
	Batch     int    `json:"batch"`
	Seed      uint64 `json:"seed"`
	Samples   int    `json:"samples"`
	BatchSize int    `json:"batch_size"`
}

// LoaderStats counts what the loader has done.
type LoaderStats struct {
	// Batches is the number of batches Next returned.
	Batches int
	// Waits is the number of calls of Next that found no batch ready and
	// blocked (with prefetching; the first call always does). Without
	// prefetching every call loads, and counts.
	Waits int
	// Wait is the time Next spent blocked waiting for a batch (with
	// prefetching), or loading batches (without).
	Wait time.Duration
	// Load is the time spent filling batches, on whichever goroutine.
	Load time.Duration
}

// Loader yields a dataset's samples in batches, epoch after epoch: see
// LoaderOptions. A Loader is not safe for concurrent use.
type Loader struct {
	d    *Dataset
	opts LoaderOptions

	n, nb        int   // samples, batches per epoch
	sample       []int // shape of one sample of X
	xRow, yRow   int   // elements per sample
	chans, perCh int   // normalisation channels, elements per channel
	mean, inv    []float64
	lut          [][256]float32 // U8 inputs: per-channel value table
	yDT          rt.DType
	h, w         int // image geometry for augmentation
	augment      bool
	permE        int // epoch of perm (-1: none)
	perm         []int
	epoch, batch int // position
	seed         uint64
	syncBuf      *Batch
	bufs         []*Batch
	cur          *Batch
	pf           *prefetcher
	stats        LoaderStats
	loadNS       atomic.Int64
	closed       bool
}

// NewLoader makes a loader over d. The loader reads d's tensors while it
// runs: do not change them.
func NewLoader(d *Dataset, opts LoaderOptions) (*Loader, error) {
	if d == nil {
		return nil, errors.New("data: nil dataset")
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	if opts.BatchSize <= 0 {
		return nil, fmt.Errorf("data: batch size %d", opts.BatchSize)
	}
	if opts.Prefetch < 0 || opts.CropPadding < 0 {
		return nil, fmt.Errorf("data: negative Prefetch or CropPadding")
	}
	l := &Loader{d: d, opts: opts, n: d.Len(), sample: d.X.Shape[1:], seed: opts.Seed, permE: -1}
	l.nb = l.n / opts.BatchSize
	if !opts.DropLast && l.n%opts.BatchSize != 0 {
		l.nb++
	}
	if l.nb == 0 {
		return nil, fmt.Errorf("data: %d samples make no batch of %d (DropLast)", l.n, opts.BatchSize)
	}
	l.xRow = int(rt.NumElements(l.sample))
	l.yRow = int(rt.NumElements(d.Y.Shape[1:]))
	switch {
	case !d.X.DType.Valid() || d.X.DType == rt.Bool:
		return nil, fmt.Errorf("data: x has dtype %s, want a numeric type", d.X.DType)
	case d.Y.DType.IsFloat():
		l.yDT = rt.F32
	default:
		l.yDT = rt.I64
	}
	if err := l.setNorm(); err != nil {
		return nil, err
	}
	if opts.CropPadding > 0 || opts.HFlip {
		if len(l.sample) != 3 {
			return nil, fmt.Errorf("data: augmentation needs [C, H, W] image samples, x has samples of shape %v", l.sample)
		}
		l.h, l.w, l.augment = l.sample[1], l.sample[2], true
	}
	return l, nil
}

// setNorm checks Mean and Std and builds the per-channel tables.
func (l *Loader) setNorm() error {
	o := l.opts
	l.chans, l.perCh = 1, l.xRow
	if len(l.sample) > 0 {
		l.chans, l.perCh = l.sample[0], l.xRow/max(l.sample[0], 1)
	}
	if len(o.Mean) != len(o.Std) {
		return fmt.Errorf("data: %d means but %d standard deviations", len(o.Mean), len(o.Std))
	}
	if len(o.Mean) > 1 && len(o.Mean) != l.chans {
		return fmt.Errorf("data: %d means for %d channels (samples of shape %v)", len(o.Mean), l.chans, l.sample)
	}
	l.mean, l.inv = make([]float64, l.chans), make([]float64, l.chans)
	for c := range l.chans {
		m, s := 0.0, 1.0
		if len(o.Mean) == 1 {
			m, s = o.Mean[0], o.Std[0]
		} else if len(o.Mean) > 1 {
			m, s = o.Mean[c], o.Std[c]
		}
		if !(s > 0) || math.IsInf(s, 0) || math.IsNaN(m) || math.IsInf(m, 0) {
			return fmt.Errorf("data: channel %d: mean %g, std %g (std must be positive and both finite)", c, m, s)
		}
		l.mean[c], l.inv[c] = m, 1/s
	}
	if l.d.X.DType == rt.U8 {
		l.lut = make([][256]float32, l.chans)
		for c := range l.chans {
			for v := range 256 {
				l.lut[c][v] = float32((float64(v)/255 - l.mean[c]) * l.inv[c])
			}
		}
	}
	return nil
}

// BatchesPerEpoch is the number of batches in an epoch.
func (l *Loader) BatchesPerEpoch() int { return l.nb }

// Len is the number of samples per epoch (fewer than the dataset's with
// DropLast).
func (l *Loader) Len() int {
	if l.opts.DropLast {
		return l.nb * l.opts.BatchSize
	}
	return l.n
}

// Epoch is the epoch of the next batch.
func (l *Loader) Epoch() int { return l.epoch }

// Stats returns what the loader has done so far.
func (l *Loader) Stats() LoaderStats {
	s := l.stats
	s.Load = time.Duration(l.loadNS.Load())
	return s
}

// State returns the loader's position.
func (l *Loader) State() LoaderState {
	return LoaderState{Epoch: l.epoch, Batch: l.batch, Seed: l.seed, Samples: l.n, BatchSize: l.opts.BatchSize}
}

// SetState moves the loader to a position saved by State, possibly by
// another loader over the same dataset with the same options: the
// following batches are the ones that loader would have returned. It
// adopts the state's seed.
func (l *Loader) SetState(s LoaderState) error {
	if l.closed {
		return errors.New("data: loader is closed")
	}
	if s.Samples != l.n || s.BatchSize != l.opts.BatchSize {
		return fmt.Errorf("data: loader state is for %d samples in batches of %d; this loader has %d in batches of %d",
			s.Samples, s.BatchSize, l.n, l.opts.BatchSize)
	}
	if s.Epoch < 0 || s.Batch < 0 || s.Batch > l.nb {
		return fmt.Errorf("data: loader state epoch %d, batch %d is out of range (%d batches per epoch)", s.Epoch, s.Batch, l.nb)
	}
	l.stop()
	l.epoch, l.batch, l.seed = s.Epoch, s.Batch, s.Seed
	l.permE = -1
	return nil
}

// Next returns the next batch of the current epoch, or io.EOF at the end
// of the epoch, after which the following call starts the next epoch.
// The batch is valid until the next call.
func (l *Loader) Next() (*Batch, error) {
	if l.closed {
		return nil, errors.New("data: loader is closed")
	}
	if l.opts.Prefetch == 0 {
		start := time.Now()
		if l.batch >= l.nb {
			l.epoch, l.batch = l.epoch+1, 0
			return nil, io.EOF
		}
		if l.syncBuf == nil {
			l.syncBuf = l.newBatch()
		}
		l.fill(l.syncBuf, l.epoch, l.batch)
		l.batch++
		l.stats.Batches++
		l.stats.Waits++
		l.stats.Wait += time.Since(start)
		return l.syncBuf, nil
	}
	if l.pf == nil {
		l.start()
	}
	if l.cur != nil {
		l.pf.free <- l.cur
		l.cur = nil
	}
	var it item
	select {
	case it = <-l.pf.ready:
	default:
		l.stats.Waits++
		t0 := time.Now()
		it = <-l.pf.ready
		l.stats.Wait += time.Since(t0)
	}
	if it.b == nil {
		l.epoch, l.batch = it.epoch+1, 0
		return nil, io.EOF
	}
	l.epoch, l.batch = it.b.Epoch, it.b.Index+1
	l.cur = it.b
	l.stats.Batches++
	return it.b, nil
}

// Close stops the prefetching goroutine. Batches are invalid afterwards.
func (l *Loader) Close() error {
	l.stop()
	l.closed = true
	return nil
}

// newBatch allocates buffers for a full batch.
func (l *Loader) newBatch() *Batch {
	b := l.opts.BatchSize
	return &Batch{
		X:    &rt.Tensor{DType: rt.F32},
		Y:    &rt.Tensor{DType: l.yDT},
		xbuf: make([]byte, b*l.xRow*4),
		ybuf: make([]byte, b*l.yRow*l.yDT.Size()),
		idx:  make([]int, 0, b),
	}
}

// order returns the sample order of epoch e.
func (l *Loader) order(e int) []int {
	if l.permE == e {
		return l.perm
	}
	if l.perm == nil {
		l.perm = make([]int, l.n)
	}
	for i := range l.perm {
		l.perm[i] = i
	}
	if l.opts.Shuffle {
		r := rand.New(rand.NewPCG(l.seed, mix(streamShuffle^mix(uint64(e)))))
		r.Shuffle(l.n, func(i, j int) { l.perm[i], l.perm[j] = l.perm[j], l.perm[i] })
	}
	l.permE = e
	return l.perm
}

// fill loads batch bi of epoch e into b.
func (l *Loader) fill(b *Batch, e, bi int) {
	t0 := time.Now()
	bs := l.opts.BatchSize
	ord := l.order(e)
	lo, hi := bi*bs, min((bi+1)*bs, l.n)
	b.Epoch, b.Index = e, bi
	b.idx = append(b.idx[:0], ord[lo:hi]...)
	b.Samples = b.idx
	k := hi - lo
	b.X.Shape = append(append(b.X.Shape[:0], k), l.sample...)
	b.X.Data = b.xbuf[:k*l.xRow*4]
	b.Y.Shape = append(append(b.Y.Shape[:0], k), l.d.Y.Shape[1:]...)
	b.Y.Data = b.ybuf[:k*l.yRow*l.yDT.Size()]
	var rng *rand.Rand
	if l.augment {
		rng = rand.New(rand.NewPCG(l.seed, mix(streamAugment^mix(uint64(e)<<32|uint64(uint32(bi))))))
	}
	for j, i := range b.idx {
		l.fillX(b.X.Data[j*l.xRow*4:(j+1)*l.xRow*4], i, rng)
		l.fillY(b.Y.Data[j*l.yRow*l.yDT.Size():(j+1)*l.yRow*l.yDT.Size()], i)
	}
	l.loadNS.Add(int64(time.Since(t0)))
}

// value returns element k of sample i of X, normalised for channel c.
func (l *Loader) value(base, k, c int) float32 {
	x := l.d.X
	if l.lut != nil {
		return l.lut[c][x.Data[base+k]]
	}
	var v float64
	switch x.DType {
	case rt.F32:
		v = float64(math.Float32frombits(binary.LittleEndian.Uint32(x.Data[4*(base+k):])))
	default:
		v = x.Float64(base + k)
	}
	return float32((v - l.mean[c]) * l.inv[c])
}

// zero is the normalised value of a padding pixel of channel c.
func (l *Loader) zero(c int) float32 {
	if l.lut != nil {
		return l.lut[c][0]
	}
	return float32(-l.mean[c] * l.inv[c])
}

func (l *Loader) fillX(dst []byte, i int, rng *rand.Rand) {
	base := i * l.xRow
	if !l.augment {
		if l.lut != nil && l.chans > 0 {
			src := l.d.X.Data[base : base+l.xRow]
			for c := range l.chans {
				lut := &l.lut[c]
				for k := c * l.perCh; k < (c+1)*l.perCh; k++ {
					binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(lut[src[k]]))
				}
			}
			return
		}
		for k := range l.xRow {
			c := 0
			if l.perCh > 0 {
				c = k / l.perCh
			}
			binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(l.value(base, k, c)))
		}
		return
	}
	p := l.opts.CropPadding
	dy, dx := 0, 0
	if p > 0 {
		dy, dx = rng.IntN(2*p+1)-p, rng.IntN(2*p+1)-p
	}
	flip := l.opts.HFlip && rng.IntN(2) == 1
	h, w := l.h, l.w
	var src []byte
	if l.lut != nil {
		src = l.d.X.Data[base : base+l.xRow]
	}
	for c := range l.chans {
		z := l.zero(c)
		for y := range h {
			out := dst[4*(c*h+y)*w : 4*(c*h+y+1)*w]
			sy := y + dy
			if sy < 0 || sy >= h {
				for x := range w {
					binary.LittleEndian.PutUint32(out[4*x:], math.Float32bits(z))
				}
				continue
			}
			row := (c*h + sy) * w
			// Output columns [x0, x1) read inside the image.
			x0, x1 := max(0, -dx), min(w, w-dx)
			if flip {
				x0, x1 = max(0, dx), min(w, w+dx)
			}
			for x := 0; x < x0; x++ {
				binary.LittleEndian.PutUint32(out[4*x:], math.Float32bits(z))
			}
			for x := max(x1, 0); x < w; x++ {
				binary.LittleEndian.PutUint32(out[4*x:], math.Float32bits(z))
			}
			step, sx := 1, row+x0+dx
			if flip {
				step, sx = -1, row+w-1-x0+dx
			}
			switch {
			case src != nil:
				lut := &l.lut[c]
				for x := x0; x < x1; x++ {
					binary.LittleEndian.PutUint32(out[4*x:], math.Float32bits(lut[src[sx]]))
					sx += step
				}
			default:
				for x := x0; x < x1; x++ {
					binary.LittleEndian.PutUint32(out[4*x:], math.Float32bits(l.value(base, sx, c)))
					sx += step
				}
			}
		}
	}
}

func (l *Loader) fillY(dst []byte, i int) {
	y := l.d.Y
	switch {
	case l.yDT == rt.I64 && y.DType == rt.I64:
		copy(dst, y.Data[i*l.yRow*8:(i+1)*l.yRow*8])
	case l.yDT == rt.I64:
		for k := range l.yRow {
			binary.LittleEndian.PutUint64(dst[8*k:], uint64(int64(y.Float64(i*l.yRow+k))))
		}
	default:
		for k := range l.yRow {
			binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(float32(y.Float64(i*l.yRow+k))))
		}
	}
}

// item is what the prefetching goroutine hands over: a batch, or the end
// of an epoch (b nil).
type item struct {
	b     *Batch
	epoch int
}

type prefetcher struct {
	free  chan *Batch
	ready chan item
	stop  chan struct{}
	done  chan struct{}
}

// start starts the prefetching goroutine at the current position.
func (l *Loader) start() {
	n := l.opts.Prefetch
	if l.bufs == nil {
		for range n + 1 {
			l.bufs = append(l.bufs, l.newBatch())
		}
	}
	pf := &prefetcher{free: make(chan *Batch, n+1), ready: make(chan item, n), stop: make(chan struct{}), done: make(chan struct{})}
	for _, b := range l.bufs {
		pf.free <- b
	}
	l.pf = pf
	go l.produce(pf, l.epoch, l.batch)
}

// produce fills batches in order from (e, bi) until stopped. It alone
// uses the loader's permutation cache while it runs.
func (l *Loader) produce(pf *prefetcher, e, bi int) {
	defer close(pf.done)
	for {
		var it item
		if bi >= l.nb {
			it = item{epoch: e}
			e, bi = e+1, 0
		} else {
			var b *Batch
			select {
			case b = <-pf.free:
			case <-pf.stop:
				return
			}
			l.fill(b, e, bi)
			it = item{b: b, epoch: e}
			bi++
		}
		select {
		case pf.ready <- it:
		case <-pf.stop:
			return
		}
	}
}

// stop ends the prefetching goroutine, if any; the batches it filled are
// dropped.
func (l *Loader) stop() {
	if l.pf == nil {
		return
	}
	close(l.pf.stop)
	<-l.pf.done
	l.pf, l.cur = nil, nil
}
