//go:build cgo

package vulkan

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// lowered returns the shader names op lowers to on d.
func lowered(t *testing.T, d rt.Device, op rt.Op) []string {
	t.Helper()
	ds, err := d.(*device).lower(op)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range ds {
		names = append(names, x.shader)
	}
	return names
}

// TestSplitKGEMM forces split-K MatMul (S = 2, 3, 7; K not a multiple of
// S or BK) on every tile: batches with shared and padded strides, both
// transposes, 2-D bias strides, activations, f32/f16/f64, sentinels.
func TestSplitKGEMM(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(31))
	cases := []gemmCase{
		{1, 129, 131, 37, false, false, -1, -1, [2]int{0, 1}, true, rt.Relu},
		{2, 67, 45, 100, true, false, -1, 0, [2]int{1, 0}, true, 0},
		{3, 45, 67, 83, false, true, 7000, -1, [2]int{67, 1}, true, rt.Gelu},
		{2, 130, 70, 131, true, true, -1, -1, [2]int{0, 0}, true, rt.LeakyRelu},
		{1, 33, 40, 300, false, false, -1, -1, [2]int{}, false, rt.Tanh},
		{1, 20, 20, 17, false, false, -1, -1, [2]int{}, false, 0},       // 2 BK slices at most
		{1, 128, 128, 320, false, false, -1, -1, [2]int{0, 1}, true, 0}, // whole tiles and BK slices
	}
	defer func() { forceSplitK, forceGemmTile = 0, "" }()
	for _, s := range []int{2, 3, 7} {
		forceSplitK = s
		for _, tile := range append([]gemmTile{{}}, gemmTiles...) {
			forceGemmTile = tile.name
			for _, dt := range floatDTypes {
				for _, c := range cases {
					checkGEMM(t, d, r, dt, c)
				}
			}
		}
	}
	forceGemmTile = ""
	forceSplitK = 3
	op := &rt.MatMul{A: newBuf(t, d, rt.F32, 40*50, nil).ref([]int{40 * 50}, nil), B: newBuf(t, d, rt.F32, 50*60, nil).ref([]int{50 * 60}, nil),
		Y: newBuf(t, d, rt.F32, 40*60, nil).ref([]int{40 * 60}, nil), Batch: 1, M: 40, N: 60, K: 50, StrideA: 2000, StrideB: 3000, StrideY: 2400, Alpha: 1}
	if got := lowered(t, d, op); len(got) != 2 || !strings.HasPrefix(got[0], "matmulk_f32_") || got[1] != "splitk_f32" {
		t.Errorf("forced split-K MatMul lowers to %v", got)
	}
}

// TestSplitKConv forces split-K implicit-GEMM convolutions: batch > 1,
// groups, stride, dilation, padding, 1x1, with and without bias, fused
// activations, every tile.
func TestSplitKConv(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(32))
	cases := []convCase{
		{3, 5, 11, 9, 9, 3, 3, 2, 2, 1, 0, 2, 1, 1, 1, 1, true, rt.Relu},
		{1, 6, 10, 12, 10, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1, 2, true, rt.LeakyRelu},
		{2, 12, 9, 8, 36, 2, 3, 2, 1, 0, 1, 1, 1, 1, 2, 4, false, rt.Tanh},
		{3, 37, 5, 7, 17, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, 0},
		{2, 20, 13, 17, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},
		{1, 64, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Sigmoid}, // layer4-like, KD = 576
	}
	defer func() { forceSplitK, forceGemmTile, forceConvPath = 0, "", "" }()
	forceConvPath = "gemm"
	for _, s := range []int{2, 5} {
		forceSplitK = s
		for _, dt := range floatDTypes {
			for _, c := range cases {
				for _, tile := range append([]gemmTile{{}}, convTiles...) {
					forceGemmTile = tile.name
					checkConv(t, d, r, dt, c, "split-K tile "+tile.name)
				}
			}
		}
	}
	forceGemmTile = ""
	forceSplitK = 4
	c := cases[4]
	OH, OW := c.out()
	op := &rt.Conv{X: newBuf(t, d, rt.F32, c.N*c.C*c.H*c.W, nil).ref([]int{c.N * c.C * c.H * c.W}, nil),
		W: newBuf(t, d, rt.F32, c.K*c.C*9, nil).ref([]int{c.K * c.C * 9}, nil), Y: newBuf(t, d, rt.F32, c.N*c.K*OH*OW, nil).ref([]int{c.N * c.K * OH * OW}, nil),
		N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1}
	if got := lowered(t, d, op); len(got) != 2 || !strings.HasPrefix(got[0], "convgemmk_f32_") || got[1] != "splitk_f32" {
		t.Errorf("forced split-K Conv lowers to %v", got)
	}
}

// TestSplitKStream chains split-K ops of growing scratch size on one
// stream (the scratch buffer grows at Launch; the partial pass of each op
// overwrites the scratch the previous reduction read, and reads the
// previous op's Y), then resubmits and resets, comparing with the same
// chain run unsplit.
func TestSplitKStream(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(33))
	const n = 48
	dt := rt.F32
	x := randVals(r, dt, n*n, -1, 1)
	w := randVals(r, dt, n*n, -1, 1)
	chain := func(split int) []float64 {
		defer func() { forceSplitK = 0 }()
		xb, wb := newBuf(t, d, dt, n*n, x), newBuf(t, d, dt, n*n, w)
		y1, y2, y3 := newBuf(t, d, dt, n*n, nil), newBuf(t, d, dt, n*n, nil), newBuf(t, d, dt, n*n, nil)
		mm := func(a, b, y *tbuf, m int) *rt.MatMul {
			return &rt.MatMul{A: a.ref([]int{m * n}, nil), B: b.ref([]int{n * n}, nil), Y: y.ref([]int{m * n}, nil),
				Batch: 1, M: m, N: n, K: n, StrideA: m * n, StrideB: n * n, StrideY: m * n, Alpha: 0.5, Act: rt.Activation{Fn: rt.Tanh}}
		}
		s, err := d.NewStream(rt.StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ops := []rt.Op{mm(xb, wb, y1, 8), mm(y1, wb, y2, n), mm(y2, wb, y3, n), mm(y3, wb, y1, 16)}
		for i, op := range ops {
			forceSplitK = split + i // S grows: 2, 3, 4, 5
			if split == 0 {
				forceSplitK = 0
			}
			if err := s.Launch(op); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if err := s.Submit(); err != nil {
				t.Fatal(err)
			}
			if err := s.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		got := append(y1.read(t, d), y3.read(t, d)...)
		s.Reset()
		if ss := s.(*stream); ss.scratch != nil || len(ss.retired) != 0 {
			t.Errorf("Reset kept the scratch buffers")
		}
		return got
	}
	want := chain(0)
	got := chain(2)
	compare(t, "split-K chain", got, want, 1e-5)
}

// TestSplitFor checks when split-K applies and its slices.
func TestSplitFor(t *testing.T) {
	tt := gemmTiles[3] // 32x32
	for _, c := range []struct {
		m, n, k, b int
		cpu        bool
		force      int
		s, ks      int
	}{
		{512, 49, 4608, 1, false, 0, 8, 576},  // resnet layer4 3x3: 32 tiles
		{256, 196, 2304, 1, false, 0, 5, 464}, // layer3 3x3: 56 tiles
		{2048, 49, 512, 1, false, 0, 2, 256},  // 1x1 expansion: 128 tiles
		{512, 49, 4608, 1, true, 0, 1, 4608},  // CPU device: never
		{1024, 1024, 1024, 1, false, 0, 1, 1024},
		{64, 64, 200, 1, false, 0, 1, 200}, // K too short
		{64, 64, 37, 1, true, 3, 3, 16},    // forced: 16+16+5
		{64, 64, 37, 1, true, 7, 3, 16},    // forced beyond K/BK
		{64, 64, 20, 1, false, 5, 2, 16},   // forced, 2 BK slices
		{64, 64, 16, 1, false, 5, 1, 16},   // one BK slice: no split
	} {
		forceSplitK = c.force
		p := splitFor(tt, rt.F32, c.m, c.n, c.k, c.b, c.cpu, 1<<31, wideSplit)
		forceSplitK = 0
		if p.s != c.s || p.ks != c.ks || (p.s > 1) != (p.bytes > 0) {
			t.Errorf("splitFor(%d, %d, %d, %d, cpu %v, force %d) = %+v, want s %d ks %d", c.m, c.n, c.k, c.b, c.cpu, c.force, p, c.s, c.ks)
		}
	}
	// convolutions on the narrow tiles: shallow slices, at most convSplitMax
	for _, c := range []struct {
		tile    string
		m, n, k int
		s, ks   int
	}{
		{"n", 512, 49, 4608, 16, 288}, // resnet layer4 3x3: 8 tiles
		{"u", 64, 3136, 576, 3, 192},  // resnet layer1 3x3: 98 tiles
		{"n", 256, 169, 576, 12, 48},  // squeezenet expand3x3 at 13x13: 12 tiles, 16 slices of 36 rounded to BK
		{"u", 160, 49, 960, 15, 64},   // mobilenet_v2 1x1 projection at 7x7: 6 tiles
		{"n", 256, 169, 64, 4, 16},    // squeezenet expand1x1 at 13x13: slices of one tile depth
		{"n", 128, 729, 32, 2, 16},    // squeezenet expand1x1 at 27x27: 23 tiles
		{"s", 512, 49, 4608, 18, 256}, // a wide tile keeps splitMinK
	} {
		var tl gemmTile
		for _, t := range convTiles {
			if t.name == c.tile {
				tl = t
			}
		}
		p := splitFor(tl, rt.F32, c.m, c.n, c.k, 1, false, 1<<31, convSplit(tl))
		if p.s != c.s || p.ks != c.ks {
			t.Errorf("conv split on %s of %dx%dx%d = %+v, want s %d ks %d", c.tile, c.m, c.n, c.k, p, c.s, c.ks)
		}
	}
	// the scratch must fit maxStorageBufferRange
	if p := splitFor(tt, rt.F32, 512, 49, 4608, 1, false, 512*49*4*3, wideSplit); p.s != 3 {
		t.Errorf("splitFor under a small maxStorageBufferRange: %+v, want s 3", p)
	}
}

// TestSplitKGrowInFlight grows the scratch buffer while a submission that
// uses the old one is in flight.
func TestSplitKGrowInFlight(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(34))
	dt := rt.F32
	a, b := randVals(r, dt, 64*64, -1, 1), randVals(r, dt, 64*64, -1, 1)
	runIt := func(split bool) []float64 {
		defer func() { forceSplitK = 0 }()
		ab, bb := newBuf(t, d, dt, 64*64, a), newBuf(t, d, dt, 64*64, b)
		y1, y2 := newBuf(t, d, dt, 8*64, nil), newBuf(t, d, dt, 64*64, nil)
		mm := func(y *tbuf, m int) *rt.MatMul {
			return &rt.MatMul{A: ab.ref([]int{m * 64}, nil), B: bb.ref([]int{64 * 64}, nil), Y: y.ref([]int{m * 64}, nil),
				Batch: 1, M: m, N: 64, K: 64, StrideA: m * 64, StrideB: 64 * 64, StrideY: m * 64, Alpha: 1}
		}
		s, err := d.NewStream(rt.StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if split {
			forceSplitK = 2
		}
		if err := s.Launch(mm(y1, 8)); err != nil {
			t.Fatal(err)
		}
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if split {
			forceSplitK = 4
		}
		if err := s.Launch(mm(y2, 64)); err != nil { // grows the scratch while in flight
			t.Fatal(err)
		}
		if split && len(s.(*stream).retired) != 1 {
			t.Errorf("outgrown scratch buffer not retired")
		}
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		if len(s.(*stream).retired) != 0 {
			t.Errorf("retired scratch buffer not released by re-recording")
		}
		return append(y1.read(t, d), y2.read(t, d)...)
	}
	compare(t, "grow in flight", runIt(true), runIt(false), 1e-5)
}
