//go:build cgo

package vulkan

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// TestReplay records Write, two dependent launches and Read once, then
// submits twice with different input data.
func TestReplay(t *testing.T) {
	d := testDevice(t)
	const n = 1000
	x, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	y, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Free()
	s, err := d.NewStream(rt.StreamOptions{Profile: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := make([]float64, n)
	src := encode(rt.F32, in)
	out := make([]byte, 4*n)
	xr := rt.Ref{Buf: x, DType: rt.F32, Shape: []int{n}}
	yr := rt.Ref{Buf: y, DType: rt.F32, Shape: []int{n}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Write(x, 0, src))
	must(s.Launch(&rt.Unary{Fn: rt.Square, X: xr, Y: yr}))
	must(s.Launch(&rt.Binary{Fn: rt.Add, A: yr, B: xr, Y: yr})) // in place, reads what the first wrote
	must(s.Read(out, y, 0))
	for round := 0; round < 3; round++ {
		for i := range in {
			in[i] = float64(i%17) - 8 + float64(round)
		}
		copy(src, encode(rt.F32, in))
		must(s.Submit())
		must(s.Wait())
		got := decode(rt.F32, out)
		for i := range in {
			if want := in[i]*in[i] + in[i]; got[i] != want {
				t.Fatalf("round %d: [%d] = %v, want %v", round, i, got[i], want)
			}
		}
		tm := s.Timings()
		if d.(*device).phys.tsBits > 0 && len(tm) != 2 {
			t.Fatalf("timings %v, want 2", tm)
		}
	}
	// Reset and record something else on the same stream.
	s.Reset()
	must(s.Launch(&rt.Fill{Y: yr, Value: 2}))
	must(s.Read(out, y, 0))
	must(s.Submit())
	must(s.Wait())
	if v := decode(rt.F32, out)[n-1]; v != 2 {
		t.Fatalf("after Reset: %v", v)
	}
}

func TestUnsupported(t *testing.T) {
	d := testDevice(t)
	b := newBuf(t, d, rt.I32, 16, nil)
	op := &rt.Unary{Fn: rt.Exp, X: b.ref([]int{16}, nil), Y: b.ref([]int{16}, nil)}
	err := d.Supports(op)
	var ue *rt.UnsupportedError
	if !errors.As(err, &ue) || !errors.Is(err, rt.ErrUnsupported) {
		t.Fatalf("Exp on i32: %v", err)
	}
	s, _ := d.NewStream(rt.StreamOptions{})
	defer s.Close()
	if err := s.Launch(op); !errors.As(err, &ue) {
		t.Fatalf("Launch: %v", err)
	}
	// out of bounds view is an error, not a write
	bad := &rt.Fill{Y: rt.Ref{Buf: b.buf, Off: 0, DType: rt.F32, Shape: []int{1 << 20}}}
	if err := s.Launch(bad); err == nil {
		t.Fatal("out-of-bounds Fill accepted")
	}
}

func TestAllocLimits(t *testing.T) {
	d := testDevice(t)
	_, err := d.Alloc(1 << 62)
	if err == nil {
		t.Fatal("huge Alloc succeeded")
	}
	t.Log(err)
}

// TestOpenClose opens and closes a second device (its own instance), runs
// an op, and checks the pipeline cache file and that validation reported
// nothing (including leaked objects at vkDestroyDevice/Instance).
func TestOpenClose(t *testing.T) {
	testDevice(t)
	dir := t.TempDir()
	t.Setenv("VRUN_CACHE_DIR", dir)
	b, _ := rt.Lookup("vulkan")
	for round := 0; round < 2; round++ {
		d, err := b.Open(testIndex())
		if err != nil {
			t.Fatal(err)
		}
		x := newBuf(t, d, rt.F32, 33, nil)
		backendtest.Run(t, d, &rt.Fill{Y: x.ref([]int{33}, nil), Value: 1})
		if v := x.read(t, d)[32]; v != 1 {
			t.Fatalf("got %v", v)
		}
		s, _ := d.NewStream(rt.StreamOptions{}) // left open: Close must free it
		_ = s
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal("second Close:", err)
		}
		x.buf.Free() // after Close: must be harmless
		files, _ := filepath.Glob(filepath.Join(dir, "vulkan-*.bin"))
		if len(files) != 1 {
			t.Fatalf("pipeline cache files: %v", files)
		}
		if round == 0 {
			// corrupt the cache: the next Open must ignore it
			os.WriteFile(files[0], []byte("garbage"), 0o644)
		}
	}
	if msgs := ValidationMessages(); len(msgs) > 0 {
		t.Fatalf("validation messages: %v", msgs)
	}
}

// BenchmarkGEMM measures square MatMul (f32 and f16; 4096 and 8192 are
// skipped on CPU devices), reporting wall-clock and GPU-timestamp
// TFLOP/s.
func BenchmarkGEMM(b *testing.B) {
	d := testDevice(b)
	for _, dt := range []rt.DType{rt.F32, rt.F16} {
		for _, n := range []int{1024, 2048, 4096, 8192} {
			b.Run(dt.String()+"/"+itoa(n), func(b *testing.B) {
				if n > 1024 && isCPU(d) {
					b.Skip("large GEMM skipped on a CPU device")
				}
				if n > 512 && isCPU(d) && testing.Short() {
					b.Skip("short")
				}
				op := squareGEMM(b, d, dt, n)
				benchOp(b, d, op, 2*float64(n)*float64(n)*float64(n), 0)
			})
		}
	}
}

// squareGEMM is an n x n x n MatMul of dtype dt on new buffers of d,
// with deterministic non-zero operands.
func squareGEMM(b *testing.B, d rt.Device, dt rt.DType, n int) *rt.MatMul {
	vals := make([]float64, n*n)
	for i := range vals {
		vals[i] = math.Sin(float64(i))
	}
	x := newBuf(b, d, dt, n*n, vals)
	y := newBuf(b, d, dt, n*n, vals)
	z := newBuf(b, d, dt, n*n, nil)
	return &rt.MatMul{A: x.ref([]int{n * n}, nil), B: y.ref([]int{n * n}, nil), Y: z.ref([]int{n * n}, nil),
		Batch: 1, M: n, N: n, K: n, Alpha: 1}
}

// BenchmarkGEMMTiles sweeps the f32 tiles (forced, alternatives
// included) with and without vec4 loads, to pick the defaults on a GPU:
// go test -run XXX -bench GEMMTiles.
func BenchmarkGEMMTiles(b *testing.B) {
	d := testDevice(b)
	if isCPU(d) {
		b.Skip("a GPU tile sweep")
	}
	defer func() { forceGemmTile, gemmVec4 = "", true }()
	for _, n := range []int{1024, 2048, 4096, 8192} {
		op := squareGEMM(b, d, rt.F32, n)
		for _, tile := range gemmTiles {
			for _, vec := range []bool{true, false} {
				b.Run(fmt.Sprintf("%d/%s/vec4=%v", n, tile.name, vec), func(b *testing.B) {
					forceGemmTile, gemmVec4 = tile.name, vec
					benchOp(b, d, op, 2*float64(n)*float64(n)*float64(n), 0)
				})
			}
		}
	}
}

// BenchmarkGEMMSplit sweeps f32 tiles × forced K slices on the square
// GEMMs too small for "l" alone to fill a large GPU (n = 1024: 64 tiles of
// 128×128; n = 2048: 256), with the default ("auto") timed before each
// tile's row so that drift over the sweep shows: go test -run XXX -bench
// GEMMSplit.
func BenchmarkGEMMSplit(b *testing.B) {
	d := testDevice(b)
	if isCPU(d) {
		b.Skip("a GPU sweep")
	}
	defer func() { forceGemmTile, forceSplitK = "", 0 }()
	for _, n := range []int{1024, 2048} {
		op := squareGEMM(b, d, rt.F32, n)
		flop := 2 * float64(n) * float64(n) * float64(n)
		for _, tile := range gemmTiles {
			lim := d.(*device).phys.limits
			if !tile.fits(rt.F32, lim.MaxComputeSharedMemorySize, lim.MaxComputeWorkGroupInvocations) {
				continue
			}
			b.Run(fmt.Sprintf("%d/auto", n), func(b *testing.B) {
				forceGemmTile, forceSplitK = "", 0
				benchOp(b, d, op, flop, 0)
			})
			for _, s := range []int{1, 2, 3, 4, 6, 8} {
				b.Run(fmt.Sprintf("%d/%s/s%d", n, tile.name, s), func(b *testing.B) {
					forceGemmTile, forceSplitK = tile.name, s
					benchOp(b, d, op, flop, 0)
				})
			}
		}
	}
}

// BenchmarkGEMMCoop sweeps mmcm.comp's blocks and cooperative-matrix
// shapes (f16) on a device that has them: go test -run XXX -bench GEMMCoop.
func BenchmarkGEMMCoop(b *testing.B) {
	d := testDevice(b).(*device)
	if !d.phys.coopOK {
		b.Skip("no cooperative matrices")
	}
	shape, blocks2 := d.phys.coop, d.phys.coop2
	defer func() { forceCoopBlock, d.phys.coop, d.phys.coop2 = coopBlock{}, shape, blocks2 }()
	d.phys.coop2 = nil // else mmcm2.comp takes the GEMMs
	for _, n := range []int{1024, 2048, 4096, 8192} {
		op := squareGEMM(b, d, rt.F16, n)
		for _, sh := range coopShapes {
			// the shapes of the device's subgroup size and extensions
			// (NV2's devices have VK_KHR_cooperative_matrix enabled too)
			if sh.SGS != shape.SGS || sh.KHR != shape.KHR && !(sh.KHR && len(blocks2) > 0) {
				continue
			}
			for _, blk := range coopBlocks {
				b.Run(fmt.Sprintf("%d/%s/%s", n, sh, blk), func(b *testing.B) {
					forceCoopBlock, d.phys.coop = blk, sh
					benchOp(b, d, op, 2*float64(n)*float64(n)*float64(n), 0)
				})
			}
		}
	}
}

// BenchmarkGEMV measures y = x W for a 4096x14336 W (an LLM MLP
// projection, M = 1), reporting the GB/s of reading W: f32, and f32w16,
// f16 W with f32 x and y (rt.HalfWeights, precision f16), whose time
// against f32's is the speed-up of -precision f16 on such a layer.
func BenchmarkGEMV(b *testing.B) {
	d := testDevice(b)
	const k, n = 4096, 14336
	if isCPU(d) && testing.Short() {
		b.Skip("short")
	}
	dt := rt.F32
	w := make([]float64, k*n)
	for i := range w {
		w[i] = math.Sin(float64(i))
	}
	x := newBuf(b, d, dt, k, w[:k])
	y := newBuf(b, d, dt, n, nil)
	for _, wt := range []rt.DType{rt.F32, rt.F16} {
		name := "f32"
		if wt == rt.F16 {
			name = "f32w16"
		}
		wb := newBuf(b, d, wt, k*n, w)
		b.Run(name, func(b *testing.B) {
			op := &rt.MatMul{A: x.ref([]int{k}, nil), B: wb.ref([]int{k * n}, nil), Y: y.ref([]int{n}, nil),
				Batch: 1, M: 1, N: n, K: k, Alpha: 1}
			benchOp(b, d, op, 0, float64(k*n*wt.Size()))
		})
	}
}

// benchOp replays op; it reports TFLOP/s for flop > 0 and GB/s for
// bytes > 0, from wall time and from GPU timestamps, and returns the GB/s
// of GPU time (0 without timestamps or bytes).
func benchOp(b *testing.B, d rt.Device, op rt.Op, flop, bytes float64) float64 {
	if err := d.Supports(op); err != nil {
		b.Skip(err)
	}
	s, err := d.NewStream(rt.StreamOptions{Profile: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Launch(op); err != nil {
		b.Fatal(err)
	}
	if err := s.Submit(); err != nil { // warm up + record
		b.Fatal(err)
	}
	if err := s.Wait(); err != nil {
		b.Fatal(err)
	}
	var gpu float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Submit(); err != nil {
			b.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			b.Fatal(err)
		}
		if tm := s.Timings(); len(tm) == 1 {
			gpu += tm[0].Seconds()
		}
	}
	wall := b.Elapsed().Seconds()
	nb := float64(b.N)
	if flop > 0 {
		b.ReportMetric(flop*nb/wall/1e12, "TFLOP/s")
		if gpu > 0 {
			b.ReportMetric(flop*nb/gpu/1e12, "gpu-TFLOP/s")
		}
	}
	if bytes > 0 {
		b.ReportMetric(bytes*nb/wall/1e9, "GB/s")
		if gpu > 0 {
			b.ReportMetric(bytes*nb/gpu/1e9, "gpu-GB/s")
			return bytes * nb / gpu / 1e9
		}
	}
	return 0
}

func itoa(n int) string {
	return string(rune('0'+n/1000%10)) + string(rune('0'+n/100%10)) + string(rune('0'+n/10%10)) + string(rune('0'+n%10))
}

func TestDevices(t *testing.T) {
	d := testDevice(t)
	info := d.Info()
	if info.Backend != "vulkan" || info.Name == "" || info.Memory <= 0 || len(info.Details) == 0 {
		t.Fatalf("bad info %+v", info)
	}
	t.Logf("%s (%s) %s mem=%d fp16=%v fp64=%v unified=%v", info.Spec(), info.Kind, info.Name, info.Memory, info.FP16, info.FP64, info.Unified)
	for _, kv := range info.Details {
		t.Logf("  %s: %s", kv[0], kv[1])
	}
}
