//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// gemmCase is one MatMul checked against a float64 reference.
type gemmCase struct {
	b, m, n, k int
	ta, tb     bool
	sa, sb     int    // batch strides; -1 = packed
	bias       [2]int // Bias strides (bs0, bs1) of a [m, n] view; nil bias when both 0 and !hasBias
	hasBias    bool
	act        rt.UnaryFn
}

func (c gemmCase) String() string {
	return fmt.Sprintf("b%d m%d n%d k%d ta%v tb%v sa%d sb%d bias%v%v act%v", c.b, c.m, c.n, c.k, c.ta, c.tb, c.sa, c.sb, c.hasBias, c.bias, c.act)
}

func checkGEMM(t *testing.T, d rt.Device, r *rand.Rand, dt rt.DType, c gemmCase) {
	t.Helper()
	checkGEMMAt(t, d, r, dt, c, 0, 0)
}

// checkGEMMAt is checkGEMM with A and B starting offA and offB elements
// into their buffers (unaligned views).
func checkGEMMAt(t *testing.T, d rt.Device, r *rand.Rand, dt rt.DType, c gemmCase, offA, offB int) {
	t.Helper()
	checkGEMMW(t, d, r, dt, dt, c, offA, offB)
}

// checkGEMMW is checkGEMMAt with B of dtype wdt: f16 with dt f32 is an
// rt.HalfWeights op, held to f32's tolerance (B's values are f16's).
func checkGEMMW(t *testing.T, d rt.Device, r *rand.Rand, dt, wdt rt.DType, c gemmCase, offA, offB int) {
	t.Helper()
	sa, sb, sy := c.m*c.k, c.k*c.n, c.m*c.n
	if c.sa >= 0 {
		sa = c.sa
	}
	if c.sb >= 0 {
		sb = c.sb
	}
	na, nb, ny := (c.b-1)*sa+c.m*c.k, (c.b-1)*sb+c.k*c.n, (c.b-1)*sy+c.m*c.n
	a := randVals(r, dt, na, -1, 1)
	bv := randVals(r, wdt, nb, -1, 1)
	ab, bb, yb := newBuf(t, d, dt, offA+na, append(make([]float64, offA), a...)), newBuf(t, d, wdt, offB+nb, append(make([]float64, offB), bv...)), newBuf(t, d, dt, ny, nil)
	aref, bref := ab.ref([]int{na}, nil), bb.ref([]int{nb}, nil)
	aref.Off += int64(offA * dt.Size())
	bref.Off += int64(offB * wdt.Size())
	op := &rt.MatMul{A: aref, B: bref, Y: yb.ref([]int{ny}, nil),
		Batch: c.b, M: c.m, N: c.n, K: c.k, TransA: c.ta, TransB: c.tb, StrideA: sa, StrideB: sb, StrideY: sy,
		Alpha: 0.75, Beta: 1.5, Act: rt.Activation{Fn: c.act, Alpha: 0.1}}
	var bias []float64
	if c.hasBias {
		nbias := (c.m-1)*c.bias[0] + (c.n-1)*c.bias[1] + 1
		bias = randVals(r, dt, nbias, -1, 1)
		op.Bias = newBuf(t, d, dt, nbias, bias).ref([]int{c.m, c.n}, []int{c.bias[0], c.bias[1]})
	}
	if !supported(t, d, op) {
		return
	}
	if gemmWantShader != "" {
		ds, err := d.(*device).lowerOp(op, true)
		if err != nil || len(ds) == 0 || !strings.HasPrefix(ds[0].shader, gemmWantShader) {
			t.Fatalf("%s %v: lowered to %v (%v), want %s", dt, c, ds, err, gemmWantShader)
		}
	}
	backendtest.Run(t, d, op)
	got := yb.read(t, d)
	tol := 1e-5
	switch dt {
	case rt.F16:
		tol = 2e-3
	case rt.F64:
		tol = 1e-12
	}
	bad := 0
	for bt := 0; bt < c.b; bt++ {
		for i := 0; i < c.m; i++ {
			for j := 0; j < c.n; j++ {
				s, sabs := 0.0, 0.0
				for k := 0; k < c.k; k++ {
					var x, y float64
					if c.ta {
						x = a[bt*sa+k*c.m+i]
					} else {
						x = a[bt*sa+i*c.k+k]
					}
					if c.tb {
						y = bv[bt*sb+j*c.k+k]
					} else {
						y = bv[bt*sb+k*c.n+j]
					}
					s += x * y
					sabs += math.Abs(x * y)
				}
				v := 0.75 * s
				if c.hasBias {
					bz := bias[i*c.bias[0]+j*c.bias[1]]
					v += 1.5 * bz
					sabs += 1.5 * math.Abs(bz)
				}
				v = c.act.Apply(v, 0.1, 0)
				e := bt*sy + i*c.n + j
				if math.Abs(got[e]-v) > tol*(sabs+1) {
					if bad < 3 {
						t.Errorf("%s (B %s) %v: Y[%d,%d,%d] = %v, want %v", dt, wdt, c, bt, i, j, got[e], v)
					}
					bad++
				}
			}
		}
	}
}

// TestGEMMTiles runs every matmul.comp tile (forced) on odd shapes, both
// transposes, shared (0) and padded batch strides, 2-D bias strides and
// fused activations.
func TestGEMMTiles(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(3))
	defer func() { forceGemmTile, gemmVec4 = "", true }()
	for _, vec := range []bool{true, false} {
		gemmVec4 = vec
		for _, tile := range gemmTiles {
			forceGemmTile = tile.name
			for _, dt := range floatDTypes {
				if !vec && dt != rt.F32 {
					continue // only f32 has the vec4 path
				}
				for _, c := range gemmTileCases {
					checkGEMM(t, d, r, dt, c)
				}
			}
		}
	}
}

// TestGEMMFixed is TestGEMMTiles in f32 with the load path fixed by the
// pipeline (FIXED, which the tuner may pick), unsplit and in 3 K slices:
// a wrong FIXED reads A or B in the wrong layout.
func TestGEMMFixed(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(4))
	defer func() { forceGemmTile, gemmVec4, forceFixed, forceSplitK = "", true, false, 0 }()
	forceFixed = true
	for _, split := range []int{0, 3} {
		forceSplitK = split
		for _, vec := range []bool{true, false} {
			gemmVec4 = vec
			for _, tile := range gemmTiles {
				forceGemmTile = tile.name
				for _, c := range gemmTileCases {
					checkGEMM(t, d, r, rt.F32, c)
				}
			}
		}
	}
}

// gemmTileCases are TestGEMMTiles' shapes.
var gemmTileCases = []gemmCase{
	{1, 1, 1, 1, false, false, -1, -1, [2]int{}, false, 0},
	{1, 129, 131, 33, false, false, -1, -1, [2]int{0, 1}, true, rt.Relu},
	{2, 67, 45, 17, true, false, -1, 0, [2]int{1, 0}, true, 0},
	{3, 45, 67, 40, false, true, 2900, -1, [2]int{67, 1}, true, rt.Gelu},
	{2, 130, 70, 31, true, true, -1, -1, [2]int{0, 0}, true, rt.LeakyRelu},
	{1, 33, 129, 1, false, false, -1, -1, [2]int{}, false, rt.Tanh},
	{1, 16, 16, 0, false, false, -1, -1, [2]int{0, 1}, true, 0}, // K = 0: beta*bias only
	{1, 256, 128, 48, false, false, -1, -1, [2]int{}, false, 0},
	// multiples of 4 but not of the tiles: f32's vec4 loads, with edges
	{2, 132, 68, 36, false, false, -1, -1, [2]int{0, 1}, true, rt.Relu},
	{1, 68, 132, 20, true, false, -1, -1, [2]int{}, false, 0},
	{2, 36, 100, 44, false, true, 3700, 4404, [2]int{}, false, 0},
	{2, 100, 36, 52, true, true, 5204, 0, [2]int{1, 0}, true, 0},
	// whole tiles of every size, alone and beside edge tiles
	{2, 256, 384, 80, false, false, -1, -1, [2]int{0, 1}, true, rt.Relu},
	{1, 260, 132, 64, false, false, -1, -1, [2]int{}, false, 0},
	{2, 128, 256, 36, false, false, 33000, 0, [2]int{1, 0}, true, 0},
}

// TestVec4Loads checks when matmul.comp's vec4 load path is chosen.
func TestVec4Loads(t *testing.T) {
	f32 := rt.Ref{DType: rt.F32}
	for i, c := range []struct {
		o          rt.MatMul
		offA, offB uint32
		want       bool
	}{
		{rt.MatMul{A: f32, Batch: 1, M: 4, N: 8, K: 12}, 0, 4, true},
		{rt.MatMul{A: f32, Batch: 1, M: 4, N: 8, K: 12}, 2, 0, false},
		{rt.MatMul{A: f32, Batch: 1, M: 4, N: 8, K: 12}, 0, 6, false},
		{rt.MatMul{A: f32, Batch: 1, M: 5, N: 8, K: 12}, 0, 0, false},
		{rt.MatMul{A: f32, Batch: 1, M: 4, N: 9, K: 12}, 0, 0, false},
		{rt.MatMul{A: f32, Batch: 1, M: 4, N: 8, K: 13}, 0, 0, false},
		{rt.MatMul{A: f32, Batch: 2, M: 4, N: 8, K: 12, StrideA: 48, StrideB: 0}, 0, 0, true},
		{rt.MatMul{A: f32, Batch: 2, M: 4, N: 8, K: 12, StrideA: 50, StrideB: 96}, 0, 0, false},
		{rt.MatMul{A: rt.Ref{DType: rt.F16}, Batch: 1, M: 4, N: 8, K: 12}, 0, 0, false},
	} {
		if got := vec4Loads(&c.o, c.offA, c.offB); got != c.want {
			t.Errorf("case %d: vec4Loads = %v, want %v", i, got, c.want)
		}
	}
}

// TestGEMV covers both gemv modes: row (operands contiguous along K) and
// column (the matrix contiguous along the outputs).
func TestGEMV(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(4))
	cases := []gemmCase{
		{1, 1, 300, 257, false, false, -1, -1, [2]int{0, 1}, true, rt.Relu}, // column, W = B
		{2, 1, 45, 130, true, false, -1, -1, [2]int{}, false, 0},            // column
		{2, 1, 33, 129, false, true, -1, 0, [2]int{0, 1}, true, 0},          // row
		{1, 301, 1, 200, true, false, -1, -1, [2]int{1, 0}, true, rt.Tanh},  // column, W = A
		{3, 77, 1, 131, false, true, -1, -1, [2]int{}, false, 0},            // row
		{1, 1, 1, 500, false, false, -1, -1, [2]int{}, false, 0},
	}
	for _, dt := range floatDTypes {
		for _, c := range cases {
			checkGEMM(t, d, r, dt, c)
		}
	}
}

// TestPickTile checks the tile selection against device limits.
func TestPickTile(t *testing.T) {
	for _, c := range []struct {
		dt        rt.DType
		m, n, k   int
		b         int
		shared    uint32
		inv       uint32
		cpu       bool
		want      string
		wantFound bool
	}{
		{rt.F32, 4096, 4096, 4096, 1, 49152, 1024, false, "l", true},
		{rt.F16, 2048, 2048, 2048, 1, 49152, 1024, false, "l", true},
		{rt.F32, 1024, 1024, 1024, 1, 49152, 1024, false, "l", true}, // l: 64 groups, in two K slices
		{rt.F32, 1024, 1024, 512, 1, 49152, 1024, false, "w", true},  // too shallow for two: small-GEMM rule
		{rt.F32, 1024, 768, 3072, 1, 49152, 1024, false, "w", true},  // BERT batch 8, 48 l groups
		{rt.F32, 1536, 1536, 1536, 1, 49152, 1024, false, "w", true},
		{rt.F32, 128, 768, 768, 1, 49152, 1024, false, "u", true}, // BERT batch 1
		{rt.F32, 128, 2304, 768, 1, 49152, 1024, false, "s", true},
		{rt.F32, 1024, 3072, 768, 1, 49152, 1024, false, "w", true}, // batch 8
		{rt.F32, 2048, 2048, 2048, 1, 49152, 1024, false, "l", true},
		{rt.F32, 1024, 1024, 1024, 4, 49152, 1024, false, "l", true}, // batch fills the GPU
		{rt.F32, 4096, 4096, 4096, 1, 16384, 1024, false, "s", true}, // l and m exceed 16 KiB
		{rt.F32, 8, 4096, 4096, 1, 49152, 1024, false, "t", true},    // skinny
		{rt.F64, 4096, 4096, 4096, 1, 49152, 1024, false, "s", true},
		{rt.F64, 4096, 4096, 4096, 1, 16384, 1024, false, "t", true},
		{rt.F32, 4096, 4096, 4096, 1, 32768, 1024, true, "m", true}, // lavapipe: l needs 32.5 KiB
		{rt.F32, 4096, 4096, 4096, 1, 65536, 1024, true, "l", true},
		{rt.F32, 4096, 4096, 4096, 1, 4096, 1024, false, "", false},
		{rt.F32, 4096, 4096, 4096, 1, 49152, 128, false, "s", true},
	} {
		got, _, ok := pickTile(c.dt, c.m, c.n, c.k, c.b, c.shared, c.inv, c.cpu)
		if ok != c.wantFound || got.name != c.want {
			t.Errorf("pickTile(%v, %d, %d, %d, %d, %d, %d, %v) = %q, %v; want %q", c.dt, c.m, c.n, c.k, c.b, c.shared, c.inv, c.cpu, got.name, ok, c.want)
		}
	}
	// 1024³ splits "l" in two slices of 512
	l, rule, _ := pickTile(rt.F32, 1024, 1024, 1024, 1, 49152, 1024, false)
	if p := splitFor(l, rt.F32, 1024, 1024, 1024, 1, false, 1<<31, rule); p.s != 2 || p.ks != 512 {
		t.Errorf("1024³ on %s: split %+v, want s 2 ks 512", l.name, p)
	}
}

// TestPickCoopMat checks the cooperative-matrix selection with fake
// device properties (Debian 12's lavapipe has none).
func TestPickCoopMat(t *testing.T) {
	good := caps{vk12: true, coopMatrix: true, vkMemModel: true, shaderFloat16: true, storage16: true, subgroupSize: 32}
	good.coop2.khrCoopMatrix = true
	h200 := []coopMatProp{
		{16, 8, 16, coopF16, coopF16, coopF16, coopF16, coopSubgroup},
		{16, 8, 8, coopF16, coopF16, coopF32, coopF32, coopSubgroup},
		{16, 8, 16, coopF16, coopF16, coopF32, coopF32, coopSubgroup},
		{16, 16, 16, coopF16, coopF16, coopF32, coopF32, coopSubgroup},
	}
	onlyF16Acc := []coopMatProp{{16, 16, 16, coopF16, coopF16, coopF16, coopF16, coopSubgroup}}
	only168 := []coopMatProp{{16, 8, 16, coopF16, coopF16, coopF32, coopF32, coopSubgroup}}
	wrongScope := []coopMatProp{{16, 16, 16, coopF16, coopF16, coopF32, coopF32, 2}}
	// Mesa 26's lavapipe (256-bit): 8x8x8 in four type combinations
	lvp := []coopMatProp{
		{8, 8, 8, coopF16, coopF16, coopF16, coopF16, coopSubgroup},
		{8, 8, 8, coopF16, coopF16, coopF32, coopF32, coopSubgroup},
	}
	mod := func(f func(*caps)) caps { c := good; f(&c); return c }
	sg8 := mod(func(c *caps) { c.subgroupSize = 8; c.coopMatrix = false })
	rdna := mod(func(c *caps) {
		c.subgroupSize, c.coopMatrix = 64, false
		c.sgsControl, c.sgsMin, c.sgsMax, c.sgsMaxSubgroups, c.sgsStages = true, 32, 64, 32, computeStage
	})
	nv1616, nv168 := coopShape{16, 16, 16, false, 32}, coopShape{16, 8, 16, false, 32}
	for i, c := range []struct {
		nv, khr []coopMatProp
		caps    caps
		shared  uint32
		enabled bool
		want    coopShape
		ok      bool
	}{
		{h200, nil, good, 49152, true, nv1616, true},
		{only168, nil, good, 49152, true, nv168, true},
		{h200, h200, good, 49152, true, nv1616, true}, // NV's first
		{nil, h200, good, 49152, true, coopShape{16, 16, 16, true, 32}, true},
		{nil, only168, good, 49152, true, coopShape{}, false}, // no KHR 16x8x16 variant
		{nil, lvp, sg8, 32768, true, coopShape{8, 8, 8, true, 8}, true},
		{nil, lvp, good, 49152, true, coopShape{}, false}, // 8x8x8 is laid out for 8-wide subgroups
		{nil, lvp, mod(func(c *caps) { c.subgroupSize = 16 }), 49152, true, coopShape{}, false},
		{nil, lvp, mod(func(c *caps) { c.subgroupSize = 8; c.coop2.khrCoopMatrix = false }), 49152, true, coopShape{}, false},
		{nil, lvp, sg8, 16384, true, coopShape{}, false}, // the 128x256 block's 32 KiB
		// AMD's RDNA: default 64, 32 on request; KHR's shapes only
		{nil, h200, rdna, 65536, true, coopShape{16, 16, 16, true, 32}, true},
		{h200, nil, rdna, 65536, true, coopShape{}, false},
		{nil, h200, mod(func(c *caps) { *c = rdna; c.sgsControl = false }), 65536, true, coopShape{}, false},
		{nil, h200, mod(func(c *caps) { *c = rdna; c.sgsStages = 1 }), 65536, true, coopShape{}, false},       // not for compute
		{nil, h200, mod(func(c *caps) { *c = rdna; c.sgsMin = 64 }), 65536, true, coopShape{}, false},         // 64 only
		{nil, h200, mod(func(c *caps) { *c = rdna; c.sgsMaxSubgroups = 4 }), 65536, true, coopShape{}, false}, // 256 invocations are 8 subgroups of 32
		{h200, nil, good, 49152, false, coopShape{}, false},                                                   // VRUN_VK_COOPMAT=0
		{nil, nil, good, 49152, true, coopShape{}, false},                                                     // no extension
		{h200, nil, good, 24576, true, coopShape{}, false},                                                    // shared memory (the 128x256 block needs 32 KiB)
		{onlyF16Acc, nil, good, 49152, true, coopShape{}, false},
		{wrongScope, nil, good, 49152, true, coopShape{}, false},
		{h200, nil, mod(func(c *caps) { c.coopMatrix = false }), 49152, true, coopShape{}, false},
		{h200, nil, mod(func(c *caps) { c.vkMemModel = false }), 49152, true, coopShape{}, false},
		{h200, nil, mod(func(c *caps) { c.shaderFloat16 = false }), 49152, true, coopShape{}, false},
		{h200, nil, mod(func(c *caps) { c.subgroupSize = 64 }), 49152, true, coopShape{}, false},
	} {
		got, ok := pickCoopMat(c.nv, c.khr, c.caps, c.shared, c.enabled)
		if got != c.want || ok != c.ok {
			t.Errorf("case %d: pickCoopMat = %v, %v; want %v, %v", i, got, ok, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		s    coopShape
		blk  coopBlock
		want int
	}{
		// the scratch (8 x 16 x 64 floats; 32 x 8 x 32) or the tiles
		{nv1616, coopBlock{256, 32}, 32768}, {nv1616, coopBlock{128, 32}, 2 * (128*40 + 128*40)},
		{coopShape{8, 8, 8, true, 8}, coopBlock{256, 32}, 32768}, {coopShape{8, 8, 8, true, 8}, coopBlock{128, 32}, 20480},
		{nv168, coopBlock{128, 64}, 2 * (128*72 + 128*72)},
	} {
		if got := c.blk.shared(c.s); got != c.want {
			t.Errorf("block %v of %v: shared %d bytes, want %d", c.blk, c.s, got, c.want)
		}
	}
	for _, s := range coopShapes {
		for _, blk := range coopBlocks {
			if _, err := spirv(s.variant(blk)); err != nil {
				t.Error(err)
			}
		}
	}
	t.Setenv("VRUN_VK_COOPMAT", "0")
	if coopEnabled() {
		t.Error("VRUN_VK_COOPMAT=0 does not disable cooperative matrices")
	}
	t.Setenv("VRUN_VK_COOPMAT", "")
	if !coopEnabled() || coopForced() {
		t.Error("cooperative matrices disabled, or forced on CPU devices, by default")
	}
	t.Setenv("VRUN_VK_COOPMAT", "1")
	if !coopEnabled() || !coopForced() {
		t.Error("VRUN_VK_COOPMAT=1 does not force cooperative matrices")
	}
	t.Setenv("VRUN_VK_COOPMAT", "")
	d := testDevice(t).(*device)
	t.Logf("%s: cooperative matrix %v (%v), NV props %v, KHR props %v", d.phys.info.Name, d.phys.coopOK, d.phys.coop, d.phys.coopProps, d.phys.khrProps)
}

// gemmWantShader, when set, is the prefix of the shader variant that
// checkGEMMW requires its MatMul to lower to.
var gemmWantShader string

// TestMatMulCoop runs mmcm.comp (the f16 GEMM on subgroup-scope
// cooperative matrices), each block forced, against checkGEMM's float64
// reference at f16's tolerance (f16 inputs and output, f32 sums): full
// and partial blocks, every transposition, aligned operands (16-byte
// chunk loads, fragments stored straight to Y) and unaligned ones (A and
// B at odd offsets, odd leading dimensions), padded batch strides, 2-D
// bias strides with alpha, beta and an activation. It needs a device
// with a cooperative-matrix shape (an NVIDIA GPU, or Mesa 26's lavapipe
// with VRUN_VK_COOPMAT=1).
func TestMatMulCoop(t *testing.T) {
	d := testDevice(t)
	needCoop(t, d, "mmcm.comp")
	r := rand.New(rand.NewSource(91))
	defer func() { forceCoopBlock, gemmWantShader = coopBlock{}, "" }()
	gemmWantShader = "mmcm_"
	p := d.(*device).phys
	shapes := coopTestShapes(t, d)
	// mmcm2.comp would take the GEMMs on a VK_NV_cooperative_matrix2 device
	blocks2 := p.coop2
	p.coop2 = nil
	defer func() { p.coop2 = blocks2 }()
	for _, sh := range shapes {
		p.coop = sh
		for _, blk := range coopBlocks {
			if blk.shared(sh) > int(p.limits.MaxComputeSharedMemorySize) {
				t.Logf("%v block %v: needs %d bytes of shared memory, the device has %d", sh, blk, blk.shared(sh), p.limits.MaxComputeSharedMemorySize)
				continue
			}
			forceCoopBlock = blk
			for _, c := range []gemmCase{
				{1, 128, 256, 64, false, false, -1, -1, [2]int{}, false, 0},          // whole blocks, stored straight to Y
				{1, 136, 264, 72, true, true, -1, -1, [2]int{}, false, 0},            // aligned, both transposed, edges
				{2, 130, 270, 50, false, false, -1, -1, [2]int{}, false, rt.Relu},    // odd: chunks loaded half by half
				{3, 40, 72, 33, true, false, 3000, 2500, [2]int{}, false, 0},         // padded batch strides
				{2, 64, 96, 48, false, true, -1, -1, [2]int{96, 1}, true, rt.Gelu},   // bias, activation
				{1, 24, 200, 17, true, true, -1, -1, [2]int{1, 0}, true, rt.Sigmoid}, // column bias
			} {
				checkGEMM(t, d, r, rt.F16, c)
			}
			checkGEMMAt(t, d, r, rt.F16, gemmCase{1, 96, 128, 64, false, false, -1, -1, [2]int{}, false, 0}, 3, 5)
		}
		t.Logf("%v: passed (subgroup size required: %v)", sh, p.coopPin && sh.KHR)
	}
}

// TestPickCoopN checks mmcm.comp's block width and load/store flags.
func TestPickCoopN(t *testing.T) {
	for _, c := range []struct{ m, n, b, want int }{
		{4096, 4096, 1, 256}, {2048, 2048, 1, 256}, {1024, 1024, 1, 128}, {1024, 1024, 8, 256},
		{4096, 128, 1, 128}, {64, 8192, 1, 128}, {128, 4096, 16, 256},
	} {
		if got := pickCoopBlock(c.m, c.n, c.b).bn; got != c.want {
			t.Errorf("pickCoopBlock(%d, %d, %d) = %d, want %d", c.m, c.n, c.b, got, c.want)
		}
	}
	for _, c := range []struct {
		o                rt.MatMul
		offA, offB, offY uint32
		want             uint32
	}{
		{rt.MatMul{Batch: 1, M: 64, N: 64, K: 64}, 0, 0, 0, 32 | 64 | 128},
		{rt.MatMul{Batch: 1, M: 64, N: 64, K: 60}, 0, 0, 0, 64 | 128},                                           // K % 8 breaks A
		{rt.MatMul{Batch: 1, M: 64, N: 64, K: 60, TransB: true}, 0, 0, 0, 128},                                  // and B^T
		{rt.MatMul{Batch: 1, M: 60, N: 64, K: 64, TransA: true}, 0, 0, 0, 64 | 128},                             // A^T leading dim M
		{rt.MatMul{Batch: 1, M: 64, N: 60, K: 64}, 0, 0, 0, 32},                                                 // N breaks B and Y
		{rt.MatMul{Batch: 2, M: 64, N: 64, K: 64, StrideA: 4100, StrideB: 0, StrideY: 4096}, 0, 0, 0, 64 | 128}, // A batch stride
		{rt.MatMul{Batch: 1, M: 64, N: 64, K: 64, StrideA: 4100}, 8, 4, 16, 32 | 128},                           // batch 1 ignores strides; B offset
	} {
		if got := coopFlags(&c.o, c.offA, c.offB, c.offY); got != c.want {
			t.Errorf("coopFlags(%+v, %d, %d, %d) = %d, want %d", c.o, c.offA, c.offB, c.offY, got, c.want)
		}
	}
}

type mmCase struct {
	b, m, n, k     int
	ta, tb, bias   bool
	act            rt.UnaryFn
	strideA, bcast bool
}

func TestMatMul(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(9))
	cases := []mmCase{
		{1, 1, 1, 1, false, false, false, 0, false, false},
		{1, 7, 33, 65, false, false, true, rt.Relu, false, false},
		{2, 65, 127, 33, true, false, false, 0, false, false},
		{3, 33, 65, 7, false, true, true, rt.Gelu, false, true},
		{1, 130, 129, 70, true, true, true, rt.Tanh, false, false},
		{1, 1, 127, 300, false, false, false, 0, false, false}, // gemv M=1
		{2, 129, 1, 257, false, true, true, 0, false, false},   // gemv N=1
		{1, 200, 150, 1, false, false, false, 0, false, false},
	}
	for _, dt := range floatDTypes {
		for _, c := range cases {
			sa, sb, sy := c.m*c.k, c.k*c.n, c.m*c.n
			if c.bcast {
				sb = 0
			}
			na, nb, ny := (c.b-1)*sa+c.m*c.k, (c.b-1)*sb+c.k*c.n, (c.b-1)*sy+c.m*c.n
			a := randVals(r, dt, na, -1, 1)
			bv := randVals(r, dt, nb, -1, 1)
			bias := randVals(r, dt, c.n, -1, 1)
			ab, bb, yb := newBuf(t, d, dt, na, a), newBuf(t, d, dt, nb, bv), newBuf(t, d, dt, ny, nil)
			op := &rt.MatMul{A: ab.ref([]int{na}, nil), B: bb.ref([]int{nb}, nil), Y: yb.ref([]int{ny}, nil),
				Batch: c.b, M: c.m, N: c.n, K: c.k, TransA: c.ta, TransB: c.tb, StrideA: sa, StrideB: sb, StrideY: sy,
				Alpha: 0.75, Beta: 1.5, Act: rt.Activation{Fn: c.act}}
			if c.bias {
				op.Bias = newBuf(t, d, dt, c.n, bias).ref([]int{c.m, c.n}, []int{0, 1})
			}
			if !supported(t, d, op) {
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			want := make([]float64, ny)
			tols := make([]float64, ny)
			for b := 0; b < c.b; b++ {
				for i := 0; i < c.m; i++ {
					for j := 0; j < c.n; j++ {
						s, sabs := 0.0, 0.0
						for k := 0; k < c.k; k++ {
							var x, y float64
							if c.ta {
								x = a[b*sa+k*c.m+i]
							} else {
								x = a[b*sa+i*c.k+k]
							}
							if c.tb {
								y = bv[b*sb+j*c.k+k]
							} else {
								y = bv[b*sb+k*c.n+j]
							}
							s += x * y
							sabs += math.Abs(x * y)
						}
						v := 0.75 * s
						if c.bias {
							v += 1.5 * bias[j]
							sabs += 1.5 * math.Abs(bias[j])
						}
						v = c.act.Apply(v, 0, 0)
						want[b*sy+i*c.n+j] = v
						tols[b*sy+i*c.n+j] = sabs + 1
					}
				}
			}
			tol := 1e-4
			switch dt {
			case rt.F16:
				tol = 2e-3
			case rt.F64:
				tol = 1e-12
			}
			bad := 0
			for i := range want {
				if math.Abs(got[i]-want[i]) > tol*tols[i] {
					if bad < 3 {
						t.Errorf("matmul %s %+v: [%d] = %v, want %v", dt, c, i, got[i], want[i])
					}
					bad++
				}
			}
		}
	}
}
