//go:build cgo

package vulkan

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// gemvConfigs are the geometries TestGEMVConfigs forces: the two
// defaults, scalar loads, shared-memory reduction, 1/3/8 rows per lane
// group (8 is clamped to gemvMaxRows), 1, 2, 3, 5 and 8 loads per step
// (4 rows cap row mode's at 4),
// narrow and wide column lanes, one-subgroup, small and large
// workgroups, forced column-mode K splits (S = 2, 3, 7 and one per 64
// rows), and column mode's tree reduction.
var gemvConfigs = []gemvConfig{
	gemvRowDefault,
	gemvColumnDefault,
	{WG: 256, Rows: 2, Lanes: 64, Scalar: true},
	{WG: 256, Rows: 2, Lanes: 64, Unroll: 3, NoSubgroup: true},
	{WG: 128, Rows: 1, Lanes: 32, Split: 2, Unroll: 8},
	{WG: 32, Rows: 2, Lanes: 32, Unroll: 2},
	{WG: 64, Rows: 3, Lanes: 16, Split: 3, Unroll: 5, NoSubgroup: true},
	{WG: 512, Rows: 8, Lanes: 128, Split: 7, Unroll: 1},
	{WG: 512, Rows: 4, Lanes: 256, Split: 64, Scalar: true},
	// column mode's tree over more than 8 rows of K (128 and 32), and
	// 24 rows (not a power of two: in sequence)
	{WG: 1024, Rows: 2, Lanes: 8, Unroll: 4},
	{WG: 512, Rows: 2, Lanes: 16, Split: 3, Unroll: 8, NoSubgroup: true},
	{WG: 384, Rows: 2, Lanes: 16, Scalar: true},
}

// gemvCases are GEMV shapes for both modes: odd K (129, 1000 with odd
// rows, 4097; 1004, a multiple of 4 but not of 8, the f16 chunk), batches with packed, shared (0) and unaligned padded
// strides, both transposes, 2-D bias strides and activations. Row mode:
// x W^T (M = 1, B transposed), A x (N = 1), M = N = 1. Column mode: x W
// (M = 1), A^T x (N = 1), with L a multiple of 4 or not.
var gemvCases = []gemmCase{
	{1, 1, 300, 129, false, true, -1, -1, [2]int{0, 1}, true, rt.Relu},    // row, odd K
	{1, 1, 257, 1000, false, true, -1, -1, [2]int{}, false, 0},            // row, vec
	{1, 1, 67, 1004, false, true, -1, -1, [2]int{0, 1}, true, 0},          // row, vec f32, scalar f16
	{1, 1, 130, 2048, false, true, -1, -1, [2]int{}, false, rt.Relu},      // row, several steps
	{2, 1, 33, 4097, false, true, -1, 0, [2]int{0, 1}, true, rt.Gelu},     // row, shared B
	{3, 77, 1, 1000, false, false, 1003, -1, [2]int{1, 0}, true, rt.Tanh}, // row W = A, unaligned stride
	{2, 64, 1, 256, false, true, -1, -1, [2]int{}, false, 0},              // row W = A, vec, batch
	{1, 1, 1, 500, false, false, -1, -1, [2]int{}, false, 0},              // M = N = 1
	{1, 1, 300, 257, false, false, -1, -1, [2]int{0, 1}, true, rt.Relu},   // column, vec
	{1, 1, 301, 200, false, false, -1, -1, [2]int{}, false, 0},            // column, odd L
	{2, 1, 1028, 1000, true, false, -1, -1, [2]int{0, 1}, true, rt.LeakyRelu},
	{2, 1, 44, 4097, false, false, 0, 44 * 4097, [2]int{}, false, 0},   // column, shared A
	{1, 301, 1, 200, true, false, -1, -1, [2]int{1, 0}, true, rt.Tanh}, // column W = A
	{2, 300, 1, 130, true, true, -1, -1, [2]int{}, false, rt.Relu},     // column W = A, vec
}

// TestGEMVConfigs runs every gemvConfig on gemvCases in f32, f16 and f64,
// with aligned and unaligned operand offsets, against a float64
// reference (tolerance 1e-5, 2e-3, 1e-12 relative to sum |a*b| + 1).
func TestGEMVConfigs(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(15))
	defer func() { gemvForce = nil }()
	for _, cfg := range gemvConfigs {
		cfg := cfg
		gemvForce = &cfg
		t.Run(cfg.String(), func(t *testing.T) {
			for _, dt := range floatDTypes {
				for _, c := range gemvCases {
					checkGEMMAt(t, d, r, dt, c, 0, 0)
					checkGEMMAt(t, d, r, dt, c, 1, 3)
				}
			}
		})
	}
}

// TestGEMVCandidates runs every geometry the tuner may pick
// (gemvCandidates) against a float64 reference: each on one of the
// gemvCases of its mode in turn, in f32 (every fifth in f16 too).
// TestGEMVConfigs covers the same ranges of each parameter on every case.
func TestGEMVCandidates(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(16))
	defer func() { gemvForce = nil }()
	for _, column := range []bool{false, true} {
		var cases []gemmCase
		for _, c := range gemvCases {
			if column == (c.m == 1 && c.n != 1 && !c.tb || c.n == 1 && c.m != 1 && c.ta) {
				cases = append(cases, c)
			}
		}
		k := cases[0].k
		for _, c := range cases {
			k = min(k, c.k)
		}
		for i, cfg := range gemvCandidates(column, k) {
			gemvForce = &cfg
			c := cases[i%len(cases)]
			checkGEMMAt(t, d, r, rt.F32, c, 0, 0)
			if i%5 == 0 {
				checkGEMMAt(t, d, r, rt.F16, c, 0, 0)
			}
		}
	}
}

// TestGEMVLowering checks which path each GEMV takes: row or column mode,
// 128-bit loads only where K (row) or L (column), offsets and strides
// are multiples of 4, and the split-K reduction pass.
func TestGEMVLowering(t *testing.T) {
	d := testDevice(t)
	dev := d.(*device)
	defer func() { gemvForce = nil }()
	sg := "gemv_"
	if dev.hasSubgroupArith() {
		sg = "gemvsg_"
	}
	cases := []struct {
		c          gemmCase
		off        int
		split      int
		column     bool
		vec, wisA  bool
		reductions int
	}{
		{gemmCase{1, 1, 300, 128, false, true, -1, -1, [2]int{}, false, 0}, 0, 0, false, true, false, 0},
		{gemmCase{1, 1, 300, 129, false, true, -1, -1, [2]int{}, false, 0}, 0, 0, false, false, false, 0},
		{gemmCase{1, 1, 300, 128, false, true, -1, -1, [2]int{}, false, 0}, 1, 0, false, false, false, 0},
		{gemmCase{2, 1, 300, 128, false, true, -1, 130, [2]int{}, false, 0}, 0, 0, false, false, false, 0},
		{gemmCase{2, 7, 1, 128, false, false, -1, -1, [2]int{}, false, 0}, 0, 0, false, true, true, 0},
		{gemmCase{1, 1, 300, 128, false, false, -1, -1, [2]int{}, false, 0}, 0, 1, true, true, false, 0},
		{gemmCase{1, 1, 301, 128, false, false, -1, -1, [2]int{}, false, 0}, 0, 1, true, false, false, 0},
		{gemmCase{1, 1, 300, 128, false, false, -1, -1, [2]int{}, false, 0}, 0, 3, true, true, false, 1},
		{gemmCase{1, 300, 1, 128, true, false, -1, -1, [2]int{}, false, 0}, 0, 2, true, true, true, 1},
	}
	for _, x := range cases {
		c := x.c
		cfg := gemvRowDefault
		if x.column {
			cfg = gemvColumnDefault
		}
		cfg.Split = x.split
		gemvForce = &cfg
		dt := rt.F32
		sa, sb := c.m*c.k, c.k*c.n
		if c.sa >= 0 {
			sa = c.sa
		}
		if c.sb >= 0 {
			sb = c.sb
		}
		na, nb := (c.b-1)*sa+c.m*c.k, (c.b-1)*sb+c.k*c.n
		ab, bb, yb := newBuf(t, d, dt, na+x.off, nil), newBuf(t, d, dt, nb+x.off, nil), newBuf(t, d, dt, c.m*c.n*c.b, nil)
		aref, bref := ab.ref([]int{na}, nil), bb.ref([]int{nb}, nil)
		aref.Off += int64(x.off * 4)
		bref.Off += int64(x.off * 4)
		op := &rt.MatMul{A: aref, B: bref, Y: yb.ref([]int{c.m * c.n * c.b}, nil), Batch: c.b, M: c.m, N: c.n, K: c.k,
			TransA: c.ta, TransB: c.tb, StrideA: sa, StrideB: sb, StrideY: c.m * c.n, Alpha: 1}
		ds, err := dev.lower(op)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1+x.reductions || ds[0].shader != sg+"f32" {
			t.Errorf("%v off %d: %d dispatches, first %s", c, x.off, len(ds), ds[0].shader)
			continue
		}
		if x.reductions > 0 && !strings.HasPrefix(ds[1].shader, "splitk_") {
			t.Errorf("%v: second dispatch %s", c, ds[1].shader)
		}
		f := ds[0].push[3]
		if got := f&8 != 0; got != x.column {
			t.Errorf("%v off %d: column %v, want %v", c, x.off, got, x.column)
		}
		if got := f&32 != 0; got != x.vec {
			t.Errorf("%v off %d: 128-bit loads %v, want %v", c, x.off, got, x.vec)
		}
		if got := f&16 != 0; got != x.wisA {
			t.Errorf("%v off %d: W is A %v, want %v", c, x.off, got, x.wisA)
		}
	}
}

// TestGEMVDeterministic runs a column-mode GEMV split across workgroups
// twice and wants identical bits.
func TestGEMVDeterministic(t *testing.T) {
	d := testDevice(t)
	defer func() { gemvForce = nil }()
	cfg := gemvColumnDefault
	cfg.Split = 5
	gemvForce = &cfg
	r := rand.New(rand.NewSource(16))
	const k, n = 1000, 516
	ab := newBuf(t, d, rt.F32, k, randVals(r, rt.F32, k, -1, 1))
	bb := newBuf(t, d, rt.F32, k*n, randVals(r, rt.F32, k*n, -1, 1))
	var prev []byte
	for i := 0; i < 2; i++ {
		yb := newBuf(t, d, rt.F32, n, nil)
		op := &rt.MatMul{A: ab.ref([]int{k}, nil), B: bb.ref([]int{k * n}, nil), Y: yb.ref([]int{n}, nil),
			Batch: 1, M: 1, N: n, K: k, Alpha: 1}
		backendtest.Run(t, d, op)
		got := make([]byte, yb.size)
		if err := d.Read(got, yb.buf, 0); err != nil {
			t.Fatal(err)
		}
		if prev != nil && !bytes.Equal(prev, got) {
			t.Fatal("two runs of a split-K GEMV differ")
		}
		prev = got
	}
}
