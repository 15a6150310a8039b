package data

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"
	"time"

	"github.com/vrun-go/vrun/rt"
)

// images makes n U8 images [C, H, W] whose pixels encode their position
// (pixel value = (c*H*W + y*W + x) % 251 + 1, never 0) and labels i % 10.
func images(n, c, h, w int) *Dataset {
	x := &rt.Tensor{DType: rt.U8, Shape: []int{n, c, h, w}, Data: make([]byte, n*c*h*w)}
	y := &rt.Tensor{DType: rt.U8, Shape: []int{n}, Data: make([]byte, n)}
	for i := range n {
		for k := range c * h * w {
			x.Data[i*c*h*w+k] = byte((k+i*3)%251 + 1)
		}
		y.Data[i] = byte(i % 10)
	}
	return &Dataset{X: x, Y: y, Classes: 10}
}

// epoch collects every batch of one epoch (copies).
func epoch(t *testing.T, l *Loader) []Batch {
	t.Helper()
	var out []Batch
	for {
		b, err := l.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c := Batch{X: &rt.Tensor{DType: b.X.DType, Shape: append([]int{}, b.X.Shape...), Data: append([]byte{}, b.X.Data...)},
			Y:     &rt.Tensor{DType: b.Y.DType, Shape: append([]int{}, b.Y.Shape...), Data: append([]byte{}, b.Y.Data...)},
			Epoch: b.Epoch, Index: b.Index, Samples: append([]int{}, b.Samples...)}
		out = append(out, c)
	}
}

func sameBatches(a, b []Batch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].X.Data, b[i].X.Data) || !bytes.Equal(a[i].Y.Data, b[i].Y.Data) ||
			!equalInts(a[i].X.Shape, b[i].X.Shape) || !equalInts(a[i].Samples, b[i].Samples) ||
			a[i].Epoch != b[i].Epoch || a[i].Index != b[i].Index {
			return false
		}
	}
	return true
}

func TestLoaderBatching(t *testing.T) {
	d := images(23, 1, 2, 2)
	for _, tc := range []struct {
		dropLast bool
		sizes    []int
	}{{false, []int{5, 5, 5, 5, 3}}, {true, []int{5, 5, 5, 5}}} {
		for _, prefetch := range []int{0, 1, 3} {
			l, err := NewLoader(d, LoaderOptions{BatchSize: 5, DropLast: tc.dropLast, Shuffle: true, Seed: 1, Prefetch: prefetch})
			if err != nil {
				t.Fatal(err)
			}
			if l.BatchesPerEpoch() != len(tc.sizes) {
				t.Fatalf("BatchesPerEpoch = %d", l.BatchesPerEpoch())
			}
			var orders [][]int
			for e := range 3 {
				bs := epoch(t, l)
				var order []int
				for i, b := range bs {
					if b.X.Shape[0] != tc.sizes[i] || !equalInts(b.X.Shape[1:], []int{1, 2, 2}) || b.Epoch != e || b.Index != i {
						t.Fatalf("epoch %d batch %d: shape %v, epoch %d, index %d", e, i, b.X.Shape, b.Epoch, b.Index)
					}
					if b.Y.DType != rt.I64 || !equalInts(b.Y.Shape, []int{tc.sizes[i]}) {
						t.Fatalf("y %s%v", b.Y.DType, b.Y.Shape)
					}
					for j, s := range b.Samples {
						if b.Y.Float64(j) != float64(s%10) {
							t.Fatalf("label of sample %d = %v", s, b.Y.Float64(j))
						}
						// The first pixel of sample s is (s*3)%251 + 1.
						if g, w := b.X.Float64(j*4), float64((s*3)%251+1)/255; math.Abs(g-w) > 1e-6 {
							t.Fatalf("pixel of sample %d = %v, want %v", s, g, w)
						}
					}
					order = append(order, b.Samples...)
				}
				seen := map[int]bool{}
				for _, s := range order {
					seen[s] = true
				}
				if len(seen) != len(order) || len(order) != l.Len() {
					t.Fatalf("epoch %d: %d samples, %d distinct, want %d", e, len(order), len(seen), l.Len())
				}
				orders = append(orders, order)
			}
			if equalInts(orders[0], orders[1]) || equalInts(orders[1], orders[2]) {
				t.Errorf("the shuffle order repeats across epochs")
			}
			l.Close()
		}
	}
	// Without shuffling the order is the dataset's.
	l, _ := NewLoader(d, LoaderOptions{BatchSize: 10})
	for i, b := range epoch(t, l) {
		for j, s := range b.Samples {
			if s != i*10+j {
				t.Fatalf("unshuffled batch %d has sample %d at %d", i, s, j)
			}
		}
	}
}

// TestLoaderDeterminism checks that the batches are a function of the
// seed only: the same with and without prefetching, and the same after a
// State/SetState round trip into a fresh loader, mid-epoch.
func TestLoaderDeterminism(t *testing.T) {
	d := images(37, 3, 6, 5)
	opts := LoaderOptions{BatchSize: 4, Shuffle: true, Seed: 9, CropPadding: 2, HFlip: true, Mean: []float64{0.5, 0.4, 0.3}, Std: []float64{0.2, 0.3, 0.25}}
	var runs [][]Batch
	for _, prefetch := range []int{0, 1, 4} {
		o := opts
		o.Prefetch = prefetch
		l, err := NewLoader(d, o)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, append(epoch(t, l), epoch(t, l)...))
		l.Close()
	}
	if !sameBatches(runs[0], runs[1]) || !sameBatches(runs[0], runs[2]) {
		t.Fatal("prefetching changes the batches")
	}
	o := opts
	o.Seed = 10
	l, _ := NewLoader(d, o)
	if sameBatches(runs[0][:10], epoch(t, l)) {
		t.Fatal("another seed gives the same batches")
	}
	for _, prefetch := range []int{0, 2} {
		o := opts
		o.Prefetch = prefetch
		l, _ := NewLoader(d, o)
		epoch(t, l)
		for range 3 {
			l.Next()
		}
		st := l.State()
		if st.Epoch != 1 || st.Batch != 3 || st.Seed != 9 {
			t.Fatalf("state %+v", st)
		}
		l.Close()
		o.Seed = 12345 // the state's seed wins
		l2, _ := NewLoader(d, o)
		if err := l2.SetState(st); err != nil {
			t.Fatal(err)
		}
		rest := epoch(t, l2)
		if !sameBatches(rest, runs[0][10+3:]) {
			t.Fatalf("prefetch %d: resumed batches differ", prefetch)
		}
		// SetState while prefetching: back to the start of epoch 0.
		l2.Next()
		l2.SetState(LoaderState{Seed: 9, Samples: 37, BatchSize: 4})
		if !sameBatches(epoch(t, l2), runs[0][:10]) {
			t.Fatalf("prefetch %d: SetState to epoch 0 differs", prefetch)
		}
		if err := l2.SetState(LoaderState{Samples: 36, BatchSize: 4}); err == nil {
			t.Error("state of another dataset accepted")
		}
		if err := l2.SetState(LoaderState{Batch: 11, Samples: 37, BatchSize: 4}); err == nil {
			t.Error("batch out of range accepted")
		}
		l2.Close()
	}
}

// TestLoaderNormalize checks normalisation against float64 arithmetic.
func TestLoaderNormalize(t *testing.T) {
	d := images(3, 2, 3, 4)
	mean, std := []float64{0.25, 0.5}, []float64{0.5, 2}
	l, err := NewLoader(d, LoaderOptions{BatchSize: 3, Mean: mean, Std: std})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := l.Next()
	for i := range b.X.Len() {
		c := (i / 12) % 2
		want := (float64(d.X.Data[i])/255 - mean[c]) / std[c]
		if g := b.X.Float64(i); math.Abs(g-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Fatalf("element %d = %v, want %v", i, g, want)
		}
	}
	// Float inputs are not scaled; a single mean applies to all channels;
	// float targets become F32.
	xf := rt.FromFloat64(rt.F64, []float64{1, 2, 3, 4, 5, 6}, 3, 2)
	yf := rt.FromFloat64(rt.F64, []float64{0.5, 1.5, 2.5}, 3, 1)
	l, err = NewLoader(&Dataset{X: xf, Y: yf}, LoaderOptions{BatchSize: 2, Mean: []float64{3}, Std: []float64{2}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = l.Next()
	if g := b.X.Float32s(); g[0] != -1 || g[3] != 0.5 || b.Y.DType != rt.F32 || b.Y.Float64(1) != 1.5 || !equalInts(b.Y.Shape, []int{2, 1}) {
		t.Fatalf("x %v y %s %v", g, b.Y.DType, b.Y.Float32s())
	}
	for _, o := range []LoaderOptions{
		{BatchSize: 0},
		{BatchSize: 1, Mean: []float64{1, 2}, Std: []float64{1}},
		{BatchSize: 1, Mean: []float64{1, 2, 3}, Std: []float64{1, 1, 1}},
		{BatchSize: 1, Mean: []float64{0}, Std: []float64{0}},
		{BatchSize: 1, HFlip: true},
		{BatchSize: 4, DropLast: true},
	} {
		if _, err := NewLoader(&Dataset{X: xf, Y: yf}, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

// TestLoaderAugment checks the crop and flip geometry: each output image
// is the input translated by some (dy, dx) within the padding and maybe
// mirrored, the same for every channel, with zero padding; and over many
// samples every offset and both flips occur.
func TestLoaderAugment(t *testing.T) {
	const n, c, h, w, pad = 400, 2, 5, 6, 2
	d := images(n, c, h, w)
	l, err := NewLoader(d, LoaderOptions{BatchSize: 50, CropPadding: pad, HFlip: true, Seed: 3, Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	offsets := map[[3]int]int{}
	for _, b := range epoch(t, l) {
		for j, s := range b.Samples {
			out := b.X.Float64s()[j*c*h*w : (j+1)*c*h*w]
			src := d.X.Data[s*c*h*w : (s+1)*c*h*w]
			found := 0
			for dy := -pad; dy <= pad; dy++ {
				for dx := -pad; dx <= pad; dx++ {
					for flip := range 2 {
						ok := true
						for k := 0; k < c*h*w && ok; k++ {
							ch, y, x := k/(h*w), k/w%h, k%w
							sx := x
							if flip == 1 {
								sx = w - 1 - x
							}
							sy, sx := y+dy, sx+dx
							want := 0.0
							if sy >= 0 && sy < h && sx >= 0 && sx < w {
								want = float64(src[(ch*h+sy)*w+sx]) / 255
							}
							ok = math.Abs(out[k]-want) < 1e-6
						}
						if ok {
							found++
							offsets[[3]int{dy, dx, flip}]++
						}
					}
				}
			}
			if found != 1 {
				t.Fatalf("sample %d: %d geometric explanations, want exactly 1", s, found)
			}
		}
	}
	if len(offsets) != (2*pad+1)*(2*pad+1)*2 {
		t.Errorf("%d of the %d (dy, dx, flip) combinations occur", len(offsets), (2*pad+1)*(2*pad+1)*2)
	}
}

// TestLoaderPrefetchOverlap checks that, with prefetching, a step slower
// than loading never waits for the loader after the first batch.
func TestLoaderPrefetchOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	d := images(512, 1, 28, 28)
	l, err := NewLoader(d, LoaderOptions{BatchSize: 16, Shuffle: true, Prefetch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for e := range 2 {
		for {
			_, err := l.Next()
			if err == io.EOF {
				break
			}
			time.Sleep(2 * time.Millisecond) // the "step"; loading 16 images takes ~20µs
		}
		_ = e
	}
	st := l.Stats()
	// The first Next always waits; allow a couple of scheduler hiccups
	// on a loaded machine.
	if st.Batches != 64 || st.Waits > 3 {
		t.Errorf("stats %+v: want 64 batches and at most 3 waits", st)
	}
	t.Logf("%+v", st)
}
