//go:build cgo

package cudashim

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/internal/conformance"
	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/internal/gradconf"
	"github.com/vrun-go/vrun/rt"
)

// gpuSkip is why the GPU tests skip ("" when a CUDA device is present),
// decided once by TestMain.
var gpuSkip string

func TestMain(m *testing.M) {
	if _, err := (Backend{}).Devices(); err != nil {
		gpuSkip = fmt.Sprintf("no CUDA driver or device found, GPU tests skipped: %v", err)
		fmt.Fprintln(os.Stderr, "cudashim: "+gpuSkip)
	}
	os.Exit(m.Run())
}

// openTest opens device 0 (cublas selects cuBLAS or the built-in GEMM).
func openTest(t testing.TB, cublas bool) *Device {
	t.Helper()
	if gpuSkip != "" {
		t.Skip(gpuSkip)
	}
	d, err := openDevice(0, cublas)
	if err != nil {
		t.Fatalf("open cuda:0: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	d := openTest(t, true)
	conformance.Run(t, d)
}

// TestGradients checks the Trainer's gradients of every differentiable op
// (PyTorch references) on the CUDA device.
func TestGradients(t *testing.T) {
	d := openTest(t, true)
	gradconf.Run(t, d)
}

func TestE2E(t *testing.T) {
	d := openTest(t, true)
	e2e.Check(t, d)
}

// guard is the number of sentinel bytes around every output.
const guard = 256

// devTensor uploads t into a fresh buffer with sentinel bytes on both
// sides and returns the buffer and a ref of the payload.
func devTensor(t testing.TB, d *Device, x *rt.Tensor) (rt.Buffer, rt.Ref) {
	t.Helper()
	n := int64(len(x.Data))
	b, err := d.Alloc(n + 2*guard)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, n+2*guard)
	for i := range raw {
		raw[i] = 0xA5
	}
	copy(raw[guard:], x.Data)
	if err := d.Write(b, 0, raw); err != nil {
		t.Fatal(err)
	}
	return b, rt.Ref{Buf: b, Off: guard, DType: x.DType, Shape: append([]int(nil), x.Shape...)}
}

// readBack reads the payload of r and checks its sentinels.
func readBack(t testing.TB, d *Device, r rt.Ref, n int) []byte {
	t.Helper()
	raw := make([]byte, r.Buf.Size())
	if err := d.Read(raw, r.Buf, 0); err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		if (int64(i) < r.Off || int64(i) >= r.Off+int64(n)) && raw[i] != 0xA5 {
			t.Fatalf("sentinel byte %d (payload [%d,%d)) overwritten: %#x", i, r.Off, r.Off+int64(n), raw[i])
		}
	}
	return raw[r.Off : r.Off+int64(n)]
}

func randTensor(rng *rand.Rand, dt rt.DType, shape ...int) *rt.Tensor {
	x, _ := rt.NewTensor(dt, shape...)
	for i := 0; i < x.Len(); i++ {
		x.SetFloat64(i, rng.Float64()*2-1)
	}
	return x
}

// TestGEMMOddSizes checks MatMul against a float64 reference for odd
// sizes, every transpose, with bias and activation, in f32, f64 and f16,
// through cuBLAS and through the built-in tiled kernel.
func TestGEMMOddSizes(t *testing.T) {
	sizes := []int{1, 7, 33, 65, 129, 257}
	for _, cublas := range []bool{true, false} {
		d := openTest(t, cublas)
		for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
			for i, s := range sizes {
				m, n, k := s, sizes[(i+1)%len(sizes)], sizes[(i+2)%len(sizes)]
				for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
					name := fmt.Sprintf("cublas=%v/%s/%dx%dx%d/ta=%v,tb=%v", cublas, dt, m, n, k, tr[0], tr[1])
					t.Run(name, func(t *testing.T) { checkGEMM(t, d, dt, 2, m, n, k, tr[0], tr[1], s%2 == 1) })
				}
			}
			t.Run(fmt.Sprintf("cublas=%v/%s/square", cublas, dt), func(t *testing.T) {
				for _, s := range sizes {
					checkGEMM(t, d, dt, 1, s, s, s, false, false, false)
				}
			})
		}
	}
}

func checkGEMM(t *testing.T, d *Device, dt rt.DType, batch, m, n, k int, ta, tb, withBias bool) {
	rng := rand.New(rand.NewSource(int64(m*1000003 + n*1009 + k)))
	a := randTensor(rng, dt, batch*m*k)
	b := randTensor(rng, dt, batch*k*n)
	bias := randTensor(rng, dt, n)
	_, ra := devTensor(t, d, a)
	_, rb := devTensor(t, d, b)
	y0, _ := rt.NewTensor(dt, batch*m*n)
	_, ry := devTensor(t, d, y0)
	op := &rt.MatMul{A: ra, B: rb, Y: ry, Batch: batch, M: m, N: n, K: k, TransA: ta, TransB: tb,
		StrideA: m * k, StrideB: k * n, StrideY: m * n, Alpha: 0.75, Beta: 1.5,
		Act: rt.Activation{Fn: rt.LeakyRelu, Alpha: 0.1}}
	if withBias {
		_, rbias := devTensor(t, d, bias)
		rbias.Shape, rbias.Strides = []int{m, n}, []int{0, 1}
		op.Bias = rbias
	}
	backendtest.Run(t, d, op)
	got := &rt.Tensor{DType: dt, Shape: []int{batch * m * n}, Data: readBack(t, d, ry, len(y0.Data))}
	tol := map[rt.DType]float64{rt.F64: 1e-13, rt.F32: 3e-6, rt.F16: 2e-3}[dt]
	if useTF32() && dt == rt.F32 {
		tol = 2e-3
	}
	for bt := 0; bt < batch; bt++ {
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s, mag float64
				for p := 0; p < k; p++ {
					ai := bt*m*k + i*k + p
					if ta {
						ai = bt*m*k + p*m + i
					}
					bi := bt*k*n + p*n + j
					if tb {
						bi = bt*k*n + j*k + p
					}
					v := a.Float64(ai) * b.Float64(bi)
					s += v
					mag += math.Abs(v)
				}
				want := 0.75 * s
				if withBias {
					want += 1.5 * bias.Float64(j)
					mag = 0.75*mag + 1.5*math.Abs(bias.Float64(j))
				} else {
					mag *= 0.75
				}
				want = rt.LeakyRelu.Apply(want, 0.1, 0)
				g := got.Float64(bt*m*n + i*n + j)
				if e := math.Abs(g - want); e > tol*(mag+math.Abs(want))+1e-30 || math.IsNaN(g) {
					t.Fatalf("Y[%d][%d,%d] = %.10g, want %.10g (|err| %.3g > %.3g)", bt, i, j, g, want, e, tol*(mag+math.Abs(want)))
				}
			}
		}
	}
}

// TestGraphReplay records a stream once and replays it with changed
// inputs, then re-records after Reset.
func TestGraphReplay(t *testing.T) {
	d := openTest(t, true)
	const n = 1000
	xb, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]byte, 4*n)
	out := make([]byte, 4*n)
	s, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := rt.Ref{Buf: xb, DType: rt.F32, Shape: []int{n}}
	y := rt.Ref{Buf: yb, DType: rt.F32, Shape: []int{n}}
	record := func(fn rt.UnaryFn) {
		s.Reset()
		if err := s.Write(xb, 0, in); err != nil {
			t.Fatal(err)
		}
		if err := s.Launch(&rt.Unary{Fn: fn, X: x, Y: y}); err != nil {
			t.Fatal(err)
		}
		if err := s.Read(out, yb, 0); err != nil {
			t.Fatal(err)
		}
	}
	check := func(round int, fn rt.UnaryFn) {
		v := rt.FromFloat32(make([]float32, n), n)
		for i := 0; i < n; i++ {
			v.SetFloat64(i, float64(i+round)*0.01-3)
		}
		copy(in, v.Data)
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		got := &rt.Tensor{DType: rt.F32, Shape: []int{n}, Data: out}
		for i := 0; i < n; i++ {
			want := float64(float32(fn.Apply(v.Float64(i), 0, 0)))
			if g := got.Float64(i); math.Abs(g-want) > 1e-6*math.Abs(want)+1e-7 {
				t.Fatalf("round %d %s: y[%d] = %g, want %g", round, fn, i, g, want)
			}
		}
	}
	record(rt.Sigmoid)
	for r := 0; r < 5; r++ {
		check(r, rt.Sigmoid)
	}
	record(rt.Tanh) // re-capture after Reset
	for r := 5; r < 8; r++ {
		check(r, rt.Tanh)
	}
}

// TestStreamAfter orders three streams with After and no host wait: A
// adds 1 to x many times, B (empty) follows A, C follows B and reads x;
// C must see every addition (an empty stream passes the order on).
func TestStreamAfter(t *testing.T) {
	d := openTest(t, true)
	const n, adds = 1 << 20, 400
	xb, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	var st [3]rt.Stream
	for i := range st {
		if st[i], err = d.NewStream(rt.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
		defer st[i].Close()
	}
	x := rt.Ref{Buf: xb, DType: rt.F32, Shape: []int{n}}
	one := rt.Ref{Buf: ob, DType: rt.F32, Shape: []int{n}}
	for _, op := range []rt.Op{&rt.Fill{Y: x}, &rt.Fill{Y: one, Value: 1}} {
		if err := st[0].Launch(op); err != nil {
			t.Fatal(err)
		}
	}
	for range adds {
		if err := st[0].Launch(&rt.Binary{Fn: rt.Add, A: x, B: one, Y: x}); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]byte, 4*n)
	if err := st[2].Read(out, xb, 0); err != nil {
		t.Fatal(err)
	}
	for round := range 3 { // the second round replays the captured graphs
		if err := st[0].Submit(); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < 3; i++ {
			if err := st[i].(rt.OrderedStream).After(st[i-1]); err != nil {
				t.Fatal(err)
			}
			if err := st[i].Submit(); err != nil {
				t.Fatal(err)
			}
		}
		if err := st[2].Wait(); err != nil {
			t.Fatal(err)
		}
		got := &rt.Tensor{DType: rt.F32, Shape: []int{n}, Data: out}
		for _, i := range []int{0, n / 2, n - 1} {
			if v := got.Float64(i); v != adds {
				t.Fatalf("round %d: x[%d] = %g read after the adds, want %d", round, i, v, adds)
			}
		}
		for i := range 2 {
			if err := st[i].Wait(); err != nil {
				t.Fatal(err)
			}
		}
		clear(out)
	}
	if err := st[1].(rt.OrderedStream).After(st[1]); err == nil {
		t.Error("a stream waits for itself without an error")
	}
}

func TestProfileTimings(t *testing.T) {
	d := openTest(t, true)
	xb, _ := d.Alloc(4 << 20)
	s, err := d.NewStream(rt.StreamOptions{Profile: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := rt.Ref{Buf: xb, DType: rt.F32, Shape: []int{1 << 20}}
	for _, op := range []rt.Op{&rt.Fill{Y: x, Value: 1}, &rt.Unary{Fn: rt.Exp, X: x, Y: x}} {
		if err := s.Launch(op); err != nil {
			t.Fatal(err)
		}
	}
	for r := 0; r < 2; r++ {
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		tm := s.Timings()
		if len(tm) != 2 || tm[0] <= 0 || tm[1] <= 0 {
			t.Fatalf("timings %v, want two positive durations", tm)
		}
	}
	v := make([]byte, 4)
	if err := d.Read(v, xb, 0); err != nil {
		t.Fatal(err)
	}
	if g := (&rt.Tensor{DType: rt.F32, Shape: []int{1}, Data: v}).Float64(0); math.Abs(g-math.E) > 1e-6 {
		t.Fatalf("exp(1) = %g", g)
	}
}

func TestErrorsAndClose(t *testing.T) {
	d := openTest(t, true)
	_, err := d.Alloc(1 << 52)
	var oom *rt.OOMError
	if !errors.As(err, &oom) || oom.Request != 1<<52 || !errors.Is(err, rt.ErrOutOfMemory) {
		t.Fatalf("huge Alloc: %v, want *rt.OOMError", err)
	}
	b, _ := d.Alloc(64)
	b.Free()
	b.Free()
	s, _ := d.NewStream(rt.StreamOptions{})
	err = s.Launch(&rt.Fill{Y: rt.Ref{Buf: b, DType: rt.F32, Shape: []int{16}}})
	if !errors.Is(err, rt.ErrClosed) {
		t.Fatalf("Launch on a freed buffer: %v, want ErrClosed", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(16); !errors.Is(err, rt.ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGEMM times graph replay + sync of one n×n×n MatMul.
func BenchmarkGEMM(b *testing.B) {
	for _, dt := range []rt.DType{rt.F64, rt.F32, rt.F16} {
		for _, n := range []int{1024, 4096, 8192} {
			b.Run(fmt.Sprintf("%s/n=%d", dt, n), func(b *testing.B) {
				d := openTest(b, true)
				sz := int64(n) * int64(n) * int64(dt.Size())
				var refs [3]rt.Ref
				for i := range refs {
					buf, err := d.Alloc(sz)
					if err != nil {
						b.Skip(err)
					}
					refs[i] = rt.Ref{Buf: buf, DType: dt, Shape: []int{n, n}}
					backendtest.Run(b, d, &rt.Fill{Y: refs[i], Value: 0.5})
				}
				s, err := d.NewStream(rt.StreamOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if err := s.Launch(&rt.MatMul{A: refs[0], B: refs[1], Y: refs[2], Batch: 1, M: n, N: n, K: n, Alpha: 1}); err != nil {
					b.Fatal(err)
				}
				if err := s.Submit(); err != nil { // captures the graph
					b.Fatal(err)
				}
				if err := s.Wait(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				t0 := time.Now()
				for i := 0; i < b.N; i++ {
					if err := s.Submit(); err != nil {
						b.Fatal(err)
					}
					if err := s.Wait(); err != nil {
						b.Fatal(err)
					}
				}
				el := time.Since(t0).Seconds()
				b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/el/1e12, "TFLOP/s")
			})
		}
	}
}
