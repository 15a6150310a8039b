//go:build cgo

package vulkan

import (
	"encoding/json"
	"math/rand"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// useTuner gives d a fresh tuner under a cache directory of the test's
// own and VRUN_VK_TUNE=mode, and a fresh one again after the test (which
// then reads the environment restored by t.Setenv's cleanup).
func useTuner(t *testing.T, d *device, mode string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("VRUN_CACHE_DIR", dir)
	t.Setenv(TuneEnv, mode)
	d.tune = tuner{}
	t.Cleanup(func() { d.tune = tuner{} })
	return d.tunePath()
}

// writeTune writes picks as d's tuning cache and makes d read it anew.
func writeTune(t *testing.T, d *device, path string, picks map[string]gemmPick) {
	t.Helper()
	b, err := json.Marshal(tuneFile{Version: tuneVersion, Kernels: tuneKernels(), Picks: picks})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	d.tune = tuner{}
}

// readTune returns the picks of d's tuning cache.
func readTune(t *testing.T, path string) map[string]gemmPick {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseTune(b, tuneKernels())
}

// loweredSpecs returns the shader names and specialization constants
// that op lowers to on d.
func loweredSpecs(t *testing.T, d *device, op rt.Op) ([]string, [][]uint32) {
	t.Helper()
	ds, err := d.lower(op)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var specs [][]uint32
	for _, x := range ds {
		names, specs = append(names, x.shader), append(specs, x.spec)
	}
	return names, specs
}

// TestTuneMatMul tunes a MatMul (VRUN_VK_TUNE=1: the tuner times its
// candidates on this device while lowering it) and checks the values of
// the tuned run, the cache file and its key, that a later lowering uses
// the cached pick, and that VRUN_VK_TUNE=0 ignores it.
func TestTuneMatMul(t *testing.T) {
	d := testDevice(t).(*device)
	path := useTuner(t, d, "1")
	r := rand.New(rand.NewSource(41))
	c := gemmCase{1, 37, 70, 300, false, true, -1, -1, [2]int{0, 1}, true, rt.Relu}
	checkGEMM(t, d, r, rt.F32, c)
	rep := d.TuneReport()
	if !strings.Contains(rep, "tuned 1 GEMM shape:") {
		t.Errorf("TuneReport after tuning one shape: %q", rep)
	}
	picks := readTune(t, path)
	const key = "matmul f32 m37 n70 k300 b1 f2"
	p, ok := picks[key]
	if len(picks) != 1 || !ok || p.Path != "" {
		t.Fatalf("tuning cache %s holds %v, want one pick under %q", path, picks, key)
	}
	if p.US <= 0 || p.RuleUS <= 0 || (!p.Default && p.US >= p.RuleUS) {
		t.Errorf("pick %+v: want positive times, the pick's below the rule's", p)
	}

	op := &rt.MatMul{A: newBuf(t, d, rt.F32, 37*300, nil).ref([]int{37 * 300}, nil), B: newBuf(t, d, rt.F32, 300*70, nil).ref([]int{300 * 70}, nil),
		Y: newBuf(t, d, rt.F32, 37*70, nil).ref([]int{37 * 70}, nil), Batch: 1, M: 37, N: 70, K: 300, TransB: true, Alpha: 1}
	t.Setenv(TuneEnv, "0")
	ruleNames, ruleSpecs := loweredSpecs(t, d, op)

	// From the cache alone: the pick's tile, split and FIXED.
	t.Setenv(TuneEnv, "")
	d.tune = tuner{}
	names, specs := loweredSpecs(t, d, op)
	if p.Default {
		if !reflect.DeepEqual(names, ruleNames) || !reflect.DeepEqual(specs, ruleSpecs) {
			t.Errorf("a Default pick lowers to %v %v, the rules to %v %v", names, specs, ruleNames, ruleSpecs)
		}
	} else {
		wantName := "matmul_f32_" + p.Tile
		if p.Split > 1 {
			wantName = "matmulk_f32_" + p.Tile
		}
		if names[0] != wantName || (len(names) == 2) != (p.Split > 1) || (len(specs[0]) == 2) != p.Fixed {
			t.Errorf("pick %+v lowers to %v %v", p, names, specs)
		}
	}

	// A pick written by hand is followed, and computes the right values.
	writeTune(t, d, path, map[string]gemmPick{key: {Tile: "t", Split: 3, Fixed: true, US: 1, RuleUS: 2}})
	names, specs = loweredSpecs(t, d, op)
	if want := []string{"matmulk_f32_t", "splitk_f32"}; !reflect.DeepEqual(names, want) || !reflect.DeepEqual(specs[0], []uint32{64, 1<<31 | 2}) {
		t.Errorf("pick t/3/fixed lowers to %v %v, want %v with FIXED 0x80000002", names, specs, want)
	}
	checkGEMM(t, d, r, rt.F32, c)
	if rep := d.TuneReport(); !strings.Contains(rep, "tuned no GEMM shapes") {
		t.Errorf("TuneReport with the cached pick: %q", rep)
	}

	// VRUN_VK_TUNE=0 ignores the pick.
	t.Setenv(TuneEnv, "0")
	if names, specs := loweredSpecs(t, d, op); !reflect.DeepEqual(names, ruleNames) || !reflect.DeepEqual(specs, ruleSpecs) {
		t.Errorf("VRUN_VK_TUNE=0 lowers to %v %v, the rules to %v %v", names, specs, ruleNames, ruleSpecs)
	}

	// Picks that do not fit the shape or the device are ignored.
	t.Setenv(TuneEnv, "")
	for _, bad := range []gemmPick{
		{Tile: "zz", Split: 1},
		{Tile: "t", Split: 0},
		{Tile: "t", Split: 500}, // K = 300 makes 19 slices of 16 at most
		{Tile: "t", Split: 7},   // 7 slices of 48: exact, followed
	} {
		writeTune(t, d, path, map[string]gemmPick{key: bad})
		names, specs := loweredSpecs(t, d, op)
		followed := names[0] == "matmulk_f32_t" || names[0] == "matmul_f32_t"
		if want := bad.Split == 7; followed != want {
			t.Errorf("pick %+v: lowers to %v %v, followed %v, want %v", bad, names, specs, followed, want)
		}
	}
	// Picks timed with other kernels (another build's SPIR-V) are dropped.
	b, _ := json.Marshal(tuneFile{Version: tuneVersion, Kernels: "another build", Picks: map[string]gemmPick{key: {Tile: "t", Split: 3}}})
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	d.tune = tuner{}
	if names, _ := loweredSpecs(t, d, op); names[0] == "matmulk_f32_t" {
		t.Errorf("a pick of another build's kernels was followed: %v", names)
	}
	// A tile too large for the device.
	if !d.tileFits("l") {
		writeTune(t, d, path, map[string]gemmPick{key: {Tile: "l", Split: 1}})
		if names, _ := loweredSpecs(t, d, op); names[0] == "matmul_f32_l" {
			t.Errorf("a pick of tile l, which does not fit %s, was followed", d.phys.info.Name)
		}
	}
}

// tileFits reports whether matmul.comp's f32 tile name fits d.
func (d *device) tileFits(name string) bool {
	tl, ok := tileNamed(gemmTiles, name)
	lim := d.phys.limits
	return ok && tl.fits(rt.F32, lim.MaxComputeSharedMemorySize, lim.MaxComputeWorkGroupInvocations)
}

// TestTuneConv tunes a 3x3 convolution (candidates: the implicit GEMM's
// tiles and splits, and the Winograd kernels) and checks the tuned run's
// values, then follows hand-written picks: tile u in 2 K slices, and the
// Winograd path with winoTile's tile, with t, and with l (which lavapipe
// cannot fit: winoTile's).
func TestTuneConv(t *testing.T) {
	d := testDevice(t).(*device)
	path := useTuner(t, d, "1")
	r := rand.New(rand.NewSource(42))
	c := convCase{2, 20, 13, 17, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu}
	checkConv(t, d, r, rt.F32, c, "tuned")
	picks := readTune(t, path)
	const key = "conv f32 n2 c20 h13 w17 k70 r3x3 s1x1 p1x1 d1x1 g1"
	if _, ok := picks[key]; len(picks) != 1 || !ok {
		t.Fatalf("tuning cache holds %v, want one pick under %q", picks, key)
	}
	t.Setenv(TuneEnv, "")
	writeTune(t, d, path, map[string]gemmPick{key: {Tile: "u", Split: 2, US: 1, RuleUS: 2}})
	OH, OW := c.out()
	op := &rt.Conv{X: newBuf(t, d, rt.F32, 2*20*13*17, nil).ref([]int{2, 20, 13, 17}, nil), W: newBuf(t, d, rt.F32, 70*20*9, nil).ref([]int{70, 20, 3, 3}, nil),
		Y: newBuf(t, d, rt.F32, 2*70*OH*OW, nil).ref([]int{2, 70, OH, OW}, nil), N: 2, C: 20, H: 13, Width: 17, K: 70, OH: OH, OW: OW,
		KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1}
	if names, _ := loweredSpecs(t, d, op); !reflect.DeepEqual(names, []string{"convgemmk_f32_u", "splitk_f32"}) {
		t.Errorf("pick u/2 lowers to %v", names)
	}
	checkConv(t, d, r, rt.F32, c, "pick u/2")
	for _, tile := range []string{"", "t", "l"} {
		writeTune(t, d, path, map[string]gemmPick{key: {Path: "wino", Tile: tile, US: 1, RuleUS: 2}})
		names, _ := loweredSpecs(t, d, op)
		want := "matmul_f32_" + tile
		if tile == "" || !d.tileFits(tile) {
			want = "" // winoTile's
		}
		if len(names) != 4 || names[0] != "winow_f32" || names[3] != "winoy_f32" || (want != "" && names[2] != want) {
			t.Errorf("pick wino/%q lowers to %v, want its GEMMs on %q", tile, names, want)
		}
		checkConv(t, d, r, rt.F32, c, "pick wino/"+tile)
	}
	cands := d.lowering(op).convCands(op, rt.F32)()
	var wino, tiled int
	for _, p := range cands {
		if p.Path == "wino" {
			wino++
		} else {
			tiled++
		}
	}
	if wino < 2 || tiled < 2 {
		t.Errorf("candidates of a 3x3 convolution %v: want tiled GEMMs and Winograd with several tiles", cands)
	}
}

// TestTuneGEMV tunes a column-mode GEMV (x·W) and checks the tuned run's
// values and the cached geometry, then follows a hand-written one (128
// invocations, 16 lanes, 4 K slices: the GEMV and a split-K reduction).
func TestTuneGEMV(t *testing.T) {
	d := testDevice(t).(*device)
	path := useTuner(t, d, "1")
	r := rand.New(rand.NewSource(43))
	c := gemmCase{1, 1, 300, 1000, false, false, -1, -1, [2]int{0, 1}, true, rt.Relu}
	checkGEMM(t, d, r, rt.F32, c)
	const key = "gemv f32 m1 n300 k1000 b1 f0 o0,0"
	picks := readTune(t, path)
	if p, ok := picks[key]; len(picks) != 1 || !ok || (!p.Default && (p.GEMV == nil || !p.GEMV.valid())) {
		t.Fatalf("tuning cache holds %v, want one GEMV pick under %q", picks, key)
	}
	t.Setenv(TuneEnv, "")
	writeTune(t, d, path, map[string]gemmPick{key: {GEMV: &gemvConfig{WG: 128, Rows: 2, Lanes: 16, Split: 4, Unroll: 8}, US: 1, RuleUS: 2}})
	op := &rt.MatMul{A: newBuf(t, d, rt.F32, 1000, nil).ref([]int{1000}, nil), B: newBuf(t, d, rt.F32, 1000*300, nil).ref([]int{1000 * 300}, nil),
		Y: newBuf(t, d, rt.F32, 300, nil).ref([]int{300}, nil), Batch: 1, M: 1, N: 300, K: 1000, Alpha: 1}
	names, specs := loweredSpecs(t, d, op)
	if len(names) != 2 || !strings.HasPrefix(names[0], "gemv") || names[1] != "splitk_f32" || len(specs[0]) < 5 ||
		specs[0][0] != 128 || specs[0][2] != 16 || specs[0][4] != 8 {
		t.Errorf("GEMV pick wg128/16 lanes/4 slices/unroll 8 lowers to %v %v", names, specs)
	}
	checkGEMM(t, d, r, rt.F32, c)
}

// TestTuneUnsupported: an op the device rejects (a 3x3 convolution with a
// residual on the direct kernel, 4 output channels) is not tuned and
// leaves no error in the report; Supports still says why.
func TestTuneUnsupported(t *testing.T) {
	d := testDevice(t).(*device)
	path := useTuner(t, d, "1")
	ref := func(shape ...int) rt.Ref {
		n := 1
		for _, v := range shape {
			n *= v
		}
		return newBuf(t, d, rt.F32, n, nil).ref(shape, nil)
	}
	op := &rt.Conv{X: ref(1, 8, 9, 9), W: ref(4, 8, 3, 3), Y: ref(1, 4, 9, 9), Res: ref(1, 4, 9, 9), N: 1, C: 8, H: 9, Width: 9, K: 4,
		OH: 9, OW: 9, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1}
	if err := d.Supports(op); err == nil || !strings.Contains(err.Error(), "residual") {
		t.Fatalf("Supports of a Conv with Res on the direct kernel: %v, want an error naming the residual", err)
	}
	if rep := d.TuneReport(); rep != "" {
		t.Errorf("TuneReport after an unsupported op: %q, want none", rep)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a tuning cache was written for an unsupported op (%v)", err)
	}
}

// lowering returns a lowering of op on d, for calling its methods.
func (d *device) lowering(op rt.Op) *lowering { return &lowering{d: d, op: op} }

// TestGemmCandidates checks the tuner's candidate list: tiles that fit
// and are not twice the output, splits that keep 64-deep slices and
// reach the slices they name.
func TestGemmCandidates(t *testing.T) {
	const shared, inv, maxRange = 48 << 10, 1024, 1 << 30
	for _, c := range []struct{ m, n, k, batch int }{{37, 70, 300, 1}, {1024, 1024, 1024, 1}, {8, 8, 8, 1}, {4096, 4096, 4096, 1}, {128, 3072, 768, 8}} {
		ps := gemmCandidates(gemmTiles, rt.F32, c.m, c.n, c.k, c.batch, shared, inv, maxRange)
		if len(ps) == 0 {
			t.Errorf("%+v: no candidates", c)
		}
		seen := map[gemmPick]bool{}
		for _, p := range ps {
			tl, ok := tileNamed(gemmTiles, p.Tile)
			if !ok || !tl.fits(rt.F32, shared, inv) || seen[p] {
				t.Errorf("%+v: candidate %+v: unknown, too large or repeated", c, p)
			}
			seen[p] = true
			if p.Split > 1 && (c.k/p.Split < 64 || splitExact(tl, rt.F32, c.m, c.n, c.k, c.batch, p.Split, maxRange).s != p.Split) {
				t.Errorf("%+v: candidate %+v: split too shallow or not exact", c, p)
			}
		}
	}
	// 4096³ fills the GPU with any tile: no splits.
	for _, p := range gemmCandidates(gemmTiles, rt.F32, 4096, 4096, 4096, 1, shared, inv, maxRange) {
		if p.Split > 1 {
			t.Errorf("4096³: split candidate %+v", p)
		}
	}
}

// FuzzParseTune: parseTune takes any bytes without panicking and keeps
// only picks of known tiles and sane splits.
func FuzzParseTune(f *testing.F) {
	f.Add([]byte(`{"version":1,"device":"x","kernels":"k","picks":{"matmul f32 m1 n2 k3 b1 f0":{"tile":"l","split":2,"fixed":true,"us":1,"rule_us":2}}}`))
	f.Add([]byte(`{"version":1,"kernels":"k","picks":{"a":{"default":true,"us":1,"rule_us":1},"b":{"tile":"?","split":1}}}`))
	f.Add([]byte(`{"version":1,"kernels":"k","picks":{"c":{"path":"wino","tile":"l","us":1,"rule_us":2},"d":{"path":"x","tile":"l","split":1}}}`))
	f.Add([]byte(`{"version":1,"kernels":"k","picks":{"g":{"gemv":{"wg":128,"rows":2,"lanes":16,"split":4,"unroll":8},"us":1,"rule_us":2},"h":{"gemv":{"wg":128,"lanes":3}}}}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for k, p := range parseTune(b, "k") {
			if p.Default || p.Path == "wino" || p.GEMV != nil {
				_, wt := tileNamed(gemmTiles, p.Tile)
				if (p.Tile != "" && !(p.Path == "wino" && wt)) || p.Split != 0 || p.Fixed || (p.Default && (p.Path != "" || p.GEMV != nil)) ||
					(p.GEMV != nil && (p.Path != "" || !p.GEMV.valid())) {
					t.Errorf("%q: kept %+v", k, p)
				}
				continue
			}
			_, g := tileNamed(gemmTiles, p.Tile)
			_, c := tileNamed(convTiles, p.Tile)
			if !(g || c) || p.Split < 1 || p.Split > 64 || p.Path != "" {
				t.Errorf("%q: kept %+v", k, p)
			}
		}
	})
}
