package dist_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/vrun-go/vrun/clshim"
	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/rt"
	_ "github.com/vrun-go/vrun/rt/vulkan"
)

// devices returns n logical CPU devices, then, when they open, lavapipe
// (vulkan:0) and pocl (opencl:0) as extra members of a mixed list.
func devices(t *testing.T, n int, mixed bool) []rt.Device {
	t.Helper()
	var out []rt.Device
	for range n {
		d := cpu.NewDevice()
		t.Cleanup(func() { d.Close() })
		out = append(out, d)
	}
	if mixed {
		for _, spec := range []string{"vulkan:0", "opencl:0"} {
			d, err := rt.Open(spec, nil)
			if err != nil {
				t.Logf("%s not used: %v", spec, err)
				continue
			}
			t.Cleanup(func() { d.Close() })
			out = append(out, d)
		}
	}
	return out
}

// plainDevice hides a device's optional capabilities (Map, AllocHost,
// Copy), so that reductions take the staging path.
type plainDevice struct{ rt.Device }

func random(dt rt.DType, shape []int, seed uint64) *rt.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	n := int(rt.NumElements(shape))
	v := make([]float64, n)
	for i := range v {
		v[i] = r.Float64()*4 - 2 + 0.01
	}
	return rt.FromFloat64(dt, v, shape...)
}

// TestSplit checks the row shares.
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		n, parts int
		want     []int
	}{{10, 3, []int{4, 3, 3}}, {9, 3, []int{3, 3, 3}}, {2, 3, []int{1, 1, 0}}, {7, 1, []int{7}}, {5, 4, []int{2, 1, 1, 1}}} {
		if got := dist.Split(tc.n, tc.parts); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%d, %d) = %v, want %v", tc.n, tc.parts, got, tc.want)
		}
	}
}

// TestBuckets checks bucket planning: whole elements, full coverage.
func TestBuckets(t *testing.T) {
	for _, tc := range []struct {
		n      int64
		es     int
		bucket int64
		want   []dist.Bucket
	}{
		{40, 4, 16, []dist.Bucket{{0, 16}, {16, 16}, {32, 8}}},
		{40, 4, 18, []dist.Bucket{{0, 16}, {16, 16}, {32, 8}}},
		{12, 8, 3, []dist.Bucket{{0, 8}, {8, 4}}}, // at least one element (the tail is what is left)
		{0, 4, 16, nil},
		{100, 4, 0, []dist.Bucket{{0, 100}}},
	} {
		if got := dist.Buckets(tc.n, tc.es, tc.bucket); !slices.Equal(got, tc.want) {
			t.Errorf("Buckets(%d, %d, %d) = %v, want %v", tc.n, tc.es, tc.bucket, got, tc.want)
		}
	}
}

// TestSplitBuckets checks that buckets are cut in order into whole
// elements within the limit.
func TestSplitBuckets(t *testing.T) {
	bs := []dist.Bucket{{Off: 40, Len: 24}, {Off: 0, Len: 40}}
	got := dist.SplitBuckets(bs, 4, 18)
	want := []dist.Bucket{{40, 16}, {56, 8}, {0, 16}, {16, 16}, {32, 8}}
	if !slices.Equal(got, want) {
		t.Errorf("SplitBuckets = %v, want %v", got, want)
	}
	if got := dist.SplitBuckets(bs, 4, 100); !slices.Equal(got, bs) {
		t.Errorf("SplitBuckets with a large limit = %v, want %v", got, bs)
	}
}

// TestBucketsByParam checks DDP-style buckets: whole parameters, last
// first, contiguous, covering the block.
func TestBucketsByParam(t *testing.T) {
	for _, tc := range []struct {
		sizes  []int64
		bucket int64
		want   []dist.Bucket
	}{
		{[]int64{10, 20, 30, 40}, 70, []dist.Bucket{{30, 70}, {0, 30}}},
		{[]int64{10, 20, 30, 40}, 60, []dist.Bucket{{60, 40}, {0, 60}}},
		{[]int64{10, 20, 30, 40}, 100, []dist.Bucket{{0, 100}}},
		{[]int64{100, 5, 5}, 20, []dist.Bucket{{100, 10}, {0, 100}}}, // a large parameter alone
		{[]int64{8, 8, 8}, 8, []dist.Bucket{{16, 8}, {8, 8}, {0, 8}}},
		{nil, 8, nil},
		{[]int64{4, 4}, 0, []dist.Bucket{{0, 8}}},
	} {
		got := dist.BucketsByParam(tc.sizes, tc.bucket)
		if !slices.Equal(got, tc.want) {
			t.Errorf("BucketsByParam(%v, %d) = %v, want %v", tc.sizes, tc.bucket, got, tc.want)
		}
	}
	// Random sizes: every bucket is whole parameters, within the limit
	// unless it is one parameter, and the buckets tile the block from the end.
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		sizes := make([]int64, r.IntN(12))
		var total int64
		for i := range sizes {
			sizes[i] = int64(1 + r.IntN(50))
			total += sizes[i]
		}
		limit := int64(1 + r.IntN(120))
		bs := dist.BucketsByParam(sizes, limit)
		bounds := map[int64]bool{0: true}
		var off int64
		for _, s := range sizes {
			off += s
			bounds[off] = true
		}
		end := total
		for _, b := range bs {
			if b.Off+b.Len != end || !bounds[b.Off] || b.Len <= 0 {
				t.Fatalf("sizes %v limit %d: buckets %v do not tile whole parameters from the end", sizes, limit, bs)
			}
			if b.Len > limit {
				n := 0
				for o := b.Off + 1; o < b.Off+b.Len; o++ {
					if bounds[o] {
						n++
					}
				}
				if n > 0 {
					t.Fatalf("sizes %v limit %d: bucket %v holds several parameters over the limit", sizes, limit, b)
				}
			}
			end = b.Off
		}
		if end != 0 {
			t.Fatalf("sizes %v: buckets %v do not reach offset 0", sizes, bs)
		}
	}
}

// TestScatterGather splits odd shapes along each axis and joins them
// back; each shard must hold exactly its rows.
func TestScatterGather(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		mixed bool
		dt    rt.DType
		shape []int
		axis  int
	}{
		{"2cpu-axis0", 2, false, rt.F32, []int{7, 3}, 0},
		{"3cpu-axis1", 3, false, rt.F64, []int{2, 5, 3}, 1},
		{"3cpu-axis2", 3, false, rt.F16, []int{2, 3, 4}, 2},
		{"4cpu-exact", 4, false, rt.I64, []int{4}, 0},
		{"mixed-axis0", 1, true, rt.F32, []int{11, 5}, 0},
		{"mixed-axis1", 1, true, rt.F32, []int{3, 7, 2}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs := devices(t, tc.n, tc.mixed)
			x := random(tc.dt, tc.shape, 7)
			a, err := dist.Scatter(devs, x, tc.axis)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Free()
			rows := dist.Split(tc.shape[tc.axis], len(devs))
			starts := a.Offsets()
			inner := 1
			for _, d := range tc.shape[tc.axis+1:] {
				inner *= d
			}
			outer := int(rt.NumElements(tc.shape[:tc.axis]))
			for k, s := range a.Shards {
				if s.Shape[tc.axis] != rows[k] {
					t.Fatalf("shard %d has %d rows, want %d", k, s.Shape[tc.axis], rows[k])
				}
				got := &rt.Tensor{DType: tc.dt, Shape: s.Shape, Data: make([]byte, s.Bytes(tc.dt))}
				if err := s.Dev.Read(got.Data, s.Buf, s.Off); err != nil {
					t.Fatal(err)
				}
				for o := range outer {
					for r := range rows[k] {
						for i := range inner {
							want := x.Float64((o*tc.shape[tc.axis]+starts[k]+r)*inner + i)
							if g := got.Float64((o*rows[k]+r)*inner + i); g != want {
								t.Fatalf("shard %d [%d %d %d] = %g, want %g", k, o, r, i, g, want)
							}
						}
					}
				}
			}
			back, err := a.Gather()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(back.Shape, x.Shape) || string(back.Data) != string(x.Data) {
				t.Fatalf("gather differs from the scattered tensor")
			}
		})
	}
}

// TestReduce checks all-reduce and reduce against float64 sums, with
// buckets that cut the data at odd places.
func TestReduce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		mixed   bool
		dt      rt.DType
		len     int
		op      dist.ReduceOp
		weights []float64
		bucket  int64
		root    int // -1: all-reduce
		tol     float64
		plain   bool  // through staging buffers, not mapped memory
		params  []int // parameter lengths (elements): explicit buckets by BucketsByParam
	}{
		{"staged-wmean-3cpu-f32", 3, false, rt.F32, 1001, dist.Mean, []float64{5, 4, 4}, 100, -1, 1e-6, true, nil},
		{"staged-reduce-2cpu-f64", 2, false, rt.F64, 77, dist.Sum, nil, 48, 1, 1e-15, true, nil},
		{"sum-2cpu-f64", 2, false, rt.F64, 37, dist.Sum, nil, 0, -1, 1e-15, false, nil},
		{"mean-3cpu-f32-buckets", 3, false, rt.F32, 1001, dist.Mean, nil, 28, -1, 1e-6, false, nil},
		{"wmean-3cpu-f64-buckets", 3, false, rt.F64, 99, dist.Mean, []float64{4, 3, 3}, 8 * 7, -1, 1e-15, false, nil},
		{"wsum-4cpu-f32", 4, false, rt.F32, 13, dist.Sum, []float64{0.5, 0.25, 0.25, 2}, 12, -1, 1e-6, false, nil},
		{"reduce-root1-f16", 3, false, rt.F16, 50, dist.Sum, nil, 6, 1, 2e-3, false, nil},
		{"mixed-mean-f32", 1, true, rt.F32, 333, dist.Mean, nil, 100, -1, 1e-6, false, nil},
		{"mixed-reduce-root0", 2, true, rt.F32, 64, dist.Mean, nil, 0, 0, 1e-6, false, nil},
		{"byparam-staged-wmean-3cpu-f32", 3, false, rt.F32, 1001, dist.Mean, []float64{5, 4, 4}, 400, -1, 1e-6, true, []int{7, 300, 1, 93, 500, 100}},
		{"byparam-wsum-2cpu-f64", 2, false, rt.F64, 99, dist.Sum, []float64{2, 3}, 8 * 20, 1, 1e-15, false, []int{50, 3, 3, 3, 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs := devices(t, tc.n, tc.mixed)
			if tc.plain {
				for k := range devs {
					devs[k] = plainDevice{devs[k]}
				}
			}
			var shards []dist.Shard
			var inputs []*rt.Tensor
			for k, d := range devs {
				x := random(tc.dt, []int{tc.len}, uint64(k+1))
				inputs = append(inputs, x)
				// A view at an odd place in a larger buffer.
				off := int64(256)
				b, err := d.Alloc(off + int64(len(x.Data)) + 64)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Free()
				if err := d.Write(b, off, x.Data); err != nil {
					t.Fatal(err)
				}
				shards = append(shards, dist.Shard{Dev: d, Buf: b, Off: off, Shape: []int{tc.len}})
			}
			a, err := dist.View(tc.dt, []int{tc.len}, dist.Replicated, shards)
			if err != nil {
				t.Fatal(err)
			}
			w := tc.weights
			if len(w) == 0 {
				w = nil
			}
			var st dist.Staging
			defer st.Free()
			opts := dist.ReduceOptions{Weights: w, BucketBytes: tc.bucket, Staging: &st}
			if tc.params != nil {
				sizes := make([]int64, len(tc.params))
				for i, n := range tc.params {
					sizes[i] = int64(n * tc.dt.Size())
				}
				opts.Buckets = dist.BucketsByParam(sizes, tc.bucket)
				if len(opts.Buckets) < 3 || opts.Buckets[0].Off == 0 {
					t.Fatalf("buckets %v: want several, the last parameters first", opts.Buckets)
				}
			}
			if tc.root < 0 {
				err = a.AllReduce(tc.op, opts)
			} else {
				err = a.Reduce(tc.root, tc.op, opts)
			}
			if err != nil {
				t.Fatal(err)
			}
			// float64 reference
			want := make([]float64, tc.len)
			total := 0.0
			for k := range devs {
				wk := 1.0
				if w != nil {
					wk = w[k]
				}
				total += wk
				for i := range want {
					want[i] += wk * inputs[k].Float64(i)
				}
			}
			if tc.op == dist.Mean {
				for i := range want {
					want[i] /= total
				}
			}
			for k, s := range a.Shards {
				got := &rt.Tensor{DType: tc.dt, Shape: []int{tc.len}, Data: make([]byte, s.Bytes(tc.dt))}
				if err := s.Dev.Read(got.Data, s.Buf, s.Off); err != nil {
					t.Fatal(err)
				}
				changed := tc.root < 0 || k == tc.root
				for i := range want {
					ref := want[i]
					if !changed {
						ref = inputs[k].Float64(i)
					}
					if d := math.Abs(got.Float64(i) - ref); d > tc.tol*(1+math.Abs(ref)) {
						t.Fatalf("device %d element %d = %g, want %g", k, i, got.Float64(i), ref)
					}
				}
			}
		})
	}
}

// TestReduceReady reduces as devices become ready, one late, and stops
// with a device's error.
func TestReduceReady(t *testing.T) {
	devs := devices(t, 3, false)
	x := random(rt.F64, []int{50}, 9)
	for _, fail := range []bool{false, true} {
		a, err := dist.Replicate(devs, x)
		if err != nil {
			t.Fatal(err)
		}
		ready := make([]chan error, 3)
		rd := make([]<-chan error, 3)
		for k := range ready {
			ready[k] = make(chan error, 1)
			rd[k] = ready[k]
		}
		ready[0] <- nil
		ready[2] <- nil
		go func() {
			time.Sleep(50 * time.Millisecond)
			if fail {
				ready[1] <- errors.New("device 1 broke")
			} else {
				ready[1] <- nil
			}
		}()
		err = a.AllReduce(dist.Sum, dist.ReduceOptions{Ready: rd, BucketBytes: 80})
		if fail {
			if err == nil || !strings.Contains(err.Error(), "device 1 broke") {
				t.Errorf("error %v, want device 1's", err)
			}
		} else {
			g, gerr := a.Gather()
			if err != nil || gerr != nil {
				t.Fatal(err, gerr)
			}
			for i := range 50 {
				if g.Float64(i) != 3*x.Float64(i) {
					t.Fatalf("element %d = %g, want %g", i, g.Float64(i), 3*x.Float64(i))
				}
			}
		}
		a.Free()
	}
}

// TestBroadcastReplicate replicates a tensor, changes shard 0 and
// broadcasts it.
func TestBroadcastReplicate(t *testing.T) {
	devs := devices(t, 3, true)
	x := random(rt.F32, []int{5, 3}, 3)
	a, err := dist.Replicate(devs, x)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	y := random(rt.F32, []int{5, 3}, 4)
	if err := devs[1].Write(a.Shards[1].Buf, 0, y.Data); err != nil {
		t.Fatal(err)
	}
	if err := a.Broadcast(1); err != nil {
		t.Fatal(err)
	}
	for k, s := range a.Shards {
		got := make([]byte, len(y.Data))
		if err := s.Dev.Read(got, s.Buf, s.Off); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(y.Data) {
			t.Errorf("device %d (%s) does not hold the broadcast value", k, s.Dev.Info().Spec())
		}
	}
	g, err := a.Gather()
	if err != nil || string(g.Data) != string(y.Data) {
		t.Errorf("gather of a replicated array: %v", err)
	}
}

// TestErrors checks the bad-input errors.
func TestErrors(t *testing.T) {
	devs := devices(t, 2, false)
	x := random(rt.F32, []int{3, 2}, 1)
	for _, tc := range []struct {
		name, want string
		f          func() error
	}{
		{"twice", "listed twice", func() error { _, err := dist.Scatter([]rt.Device{devs[0], devs[0]}, x, 0); return err }},
		{"few rows", "cannot be split", func() error { _, err := dist.Scatter(devs, random(rt.F32, []int{1, 2}, 1), 0); return err }},
		{"axis", "out of range", func() error { _, err := dist.Scatter(devs, x, 2); return err }},
		{"none", "no devices", func() error { _, err := dist.Replicate(nil, x); return err }},
		{"weights", "2 devices", func() error {
			a, err := dist.Replicate(devs, x)
			if err != nil {
				return err
			}
			defer a.Free()
			return a.AllReduce(dist.Mean, dist.ReduceOptions{Weights: []float64{1}})
		}},
		{"split reduce", "not replicated", func() error {
			a, err := dist.Scatter(devs, x, 0)
			if err != nil {
				return err
			}
			defer a.Free()
			return a.AllReduce(dist.Sum, dist.ReduceOptions{})
		}},
		{"zero weights", "add up to zero", func() error {
			a, err := dist.Replicate(devs, x)
			if err != nil {
				return err
			}
			defer a.Free()
			return a.AllReduce(dist.Mean, dist.ReduceOptions{Weights: []float64{1, -1}})
		}},
		{"bucket outside", "does not lie in", func() error {
			a, err := dist.Replicate(devs, x)
			if err != nil {
				return err
			}
			defer a.Free()
			return a.AllReduce(dist.Sum, dist.ReduceOptions{Buckets: []dist.Bucket{{Off: 16, Len: 16}}})
		}},
		{"bucket split element", "does not lie in", func() error {
			a, err := dist.Replicate(devs, x)
			if err != nil {
				return err
			}
			defer a.Free()
			return a.AllReduce(dist.Sum, dist.ReduceOptions{Buckets: []dist.Bucket{{Off: 2, Len: 4}}})
		}},
	} {
		err := tc.f()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// BenchmarkReduce reduces a 1 MiB f32 gradient block of 2 and 4 logical
// CPU devices into device 0 (the data-parallel trainer's reduction), in
// place through mapped memory and through staging buffers (the path of
// a device that cannot map its memory). B/s counts the bytes of every
// input block.
func BenchmarkReduce(b *testing.B) {
	const n = 1 << 18
	for _, plain := range []bool{false, true} {
		for _, nd := range []int{2, 4} {
			name := fmt.Sprintf("mapped/cpu*%d", nd)
			if plain {
				name = fmt.Sprintf("staged/cpu*%d", nd)
			}
			b.Run(name, func(b *testing.B) {
				var shards []dist.Shard
				for k := range nd {
					var d rt.Device = cpu.NewDevice()
					defer d.Close()
					if plain {
						d = plainDevice{d}
					}
					buf, err := d.Alloc(4 * n)
					if err != nil {
						b.Fatal(err)
					}
					if err := d.Write(buf, 0, random(rt.F32, []int{n}, uint64(k)).Data); err != nil {
						b.Fatal(err)
					}
					shards = append(shards, dist.Shard{Dev: d, Buf: buf, Shape: []int{n}})
				}
				a, err := dist.View(rt.F32, []int{n}, dist.Replicated, shards)
				if err != nil {
					b.Fatal(err)
				}
				var st dist.Staging
				defer st.Free()
				w := make([]float64, nd)
				for k := range w {
					w[k] = float64(k + 1)
				}
				b.SetBytes(int64(4 * n * nd))
				c0 := processCPU()
				for b.Loop() {
					if err := a.Reduce(0, dist.Mean, dist.ReduceOptions{Weights: w, BucketBytes: 256 << 10, Staging: &st}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
