//go:build cgo

package clshim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

const sentinel = 0xAB

// guarded is an output buffer with pad sentinel bytes on both sides of
// the n*size bytes at byte offset pad.
type guarded struct {
	buf  rt.Buffer
	pad  int64
	size int64
}

func newGuarded(t *testing.T, dev rt.Device, dt rt.DType, n int) guarded {
	t.Helper()
	const pad = 256
	sz := int64(n * dt.Size())
	b, err := dev.Alloc(sz + 2*pad)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Write(b, 0, bytes.Repeat([]byte{sentinel}, int(sz+2*pad))); err != nil {
		t.Fatal(err)
	}
	return guarded{b, pad, sz}
}

func (g guarded) ref(dt rt.DType, shape ...int) rt.Ref {
	return rt.Ref{Buf: g.buf, Off: g.pad, DType: dt, Shape: shape}
}

// read returns the payload, failing the test if a sentinel byte changed.
func (g guarded) read(t *testing.T, dev rt.Device) []byte {
	t.Helper()
	all := make([]byte, g.size+2*g.pad)
	if err := dev.Read(all, g.buf, 0); err != nil {
		t.Fatal(err)
	}
	for i, c := range all {
		if (int64(i) < g.pad || int64(i) >= g.pad+g.size) && c != sentinel {
			t.Fatalf("sentinel byte %d (payload is [%d,%d)) overwritten: %#x", i, g.pad, g.pad+g.size, c)
		}
	}
	return all[g.pad : g.pad+g.size]
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// TestGEMMOddSizes checks MatMul against a float64 reference for odd
// sizes, transposes, batch strides, alpha, beta*bias and a fused
// activation, with sentinels around the output.
func TestGEMMOddSizes(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev *device) {
		defer func() { dev.gemmForce = nil }()
		for _, s := range allGEMMShapes {
			dev.gemmForce = &s
			t.Run(fmt.Sprintf("%dx%dx%d/%dx%d", s.tm, s.tn, s.tk, s.wm, s.wn), func(t *testing.T) { gemmOddSizes(t, dev) })
		}
	})
}

func gemmOddSizes(t *testing.T, dev *device) {
	{
		rng := rand.New(rand.NewSource(1))
		for _, n := range []int{1, 7, 33, 65, 129} {
			for v := 0; v < 4; v++ {
				M, N, K := n, n+v%2, max(1, n-v)
				ta, tb := v&1 != 0, v&2 != 0
				batch := 2
				strideA, strideB := M*K, 0 // B broadcast over the batch
				A := make([]float32, batch*M*K)
				B := make([]float32, K*N)
				bias := make([]float32, N)
				for i := range A {
					A[i] = rng.Float32()*2 - 1
				}
				for i := range B {
					B[i] = rng.Float32()*2 - 1
				}
				for i := range bias {
					bias[i] = rng.Float32()*2 - 1
				}
				alpha, beta := 0.5, 2.0
				ab, bb, cb := backendtest.Upload(t, dev, f32bytes(A)), backendtest.Upload(t, dev, f32bytes(B)), backendtest.Upload(t, dev, f32bytes(bias))
				y := newGuarded(t, dev, rt.F32, batch*M*N)
				op := &rt.MatMul{
					A: rt.Ref{Buf: ab, DType: rt.F32, Shape: []int{batch * M * K}}, B: rt.Ref{Buf: bb, DType: rt.F32, Shape: []int{K * N}},
					Bias: rt.Ref{Buf: cb, DType: rt.F32, Shape: []int{M, N}, Strides: []int{0, 1}},
					Y:    y.ref(rt.F32, batch*M*N), Batch: batch, M: M, N: N, K: K, TransA: ta, TransB: tb,
					StrideA: strideA, StrideB: strideB, StrideY: M * N, Alpha: alpha, Beta: beta,
					Act: rt.Activation{Fn: rt.LeakyRelu, Alpha: 0.1},
				}
				backendtest.Run(t, dev, op)
				got := bytesF32(y.read(t, dev))
				for b := 0; b < batch; b++ {
					for i := 0; i < M; i++ {
						for j := 0; j < N; j++ {
							s, mag := 0.0, 0.0
							for k := 0; k < K; k++ {
								var a, bv float64
								if ta {
									a = float64(A[b*strideA+k*M+i])
								} else {
									a = float64(A[b*strideA+i*K+k])
								}
								if tb {
									bv = float64(B[j*K+k])
								} else {
									bv = float64(B[k*N+j])
								}
								s += a * bv
								mag += math.Abs(a * bv)
							}
							want := rt.LeakyRelu.Apply(alpha*s+beta*float64(bias[j]), 0.1, 0)
							g := float64(got[(b*M+i)*N+j])
							if math.Abs(g-want) > 1e-5*(mag+1) {
								t.Fatalf("M=%d N=%d K=%d ta=%v tb=%v: Y[%d][%d,%d] = %v, want %v", M, N, K, ta, tb, b, i, j, g, want)
							}
						}
					}
				}
				ab.Free()
				bb.Free()
				cb.Free()
				y.buf.Free()
			}
		}
	}
}

// TestReplay submits a recorded stream twice with changed input and
// checks profiling timings.
func TestReplay(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev *device) {
		const n = 1000
		in := make([]float32, n)
		host := make([]byte, 4*n)
		out := make([]byte, 4*n)
		x, _ := dev.Alloc(4 * n)
		y, _ := dev.Alloc(4 * n)
		s, err := dev.NewStream(rt.StreamOptions{Profile: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Write(x, 0, host); err != nil {
			t.Fatal(err)
		}
		for _, op := range []rt.Op{
			&rt.Unary{Fn: rt.Affine, Alpha: 2, Beta: 1, X: rt.Ref{Buf: x, DType: rt.F32, Shape: []int{n}}, Y: rt.Ref{Buf: y, DType: rt.F32, Shape: []int{n}}},
			&rt.Fill{Y: rt.Ref{Buf: x, DType: rt.F32, Shape: []int{0}}, Value: 1}, // empty launch
			&rt.Binary{Fn: rt.Mul, A: rt.Ref{Buf: y, DType: rt.F32, Shape: []int{n}}, B: rt.Ref{Buf: y, DType: rt.F32, Shape: []int{n}}, Y: rt.Ref{Buf: y, DType: rt.F32, Shape: []int{n}}},
		} {
			if err := s.Launch(op); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Read(out, y, 0); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 3; r++ {
			for i := range in {
				in[i] = float32(i%17) + float32(r)
			}
			copy(host, f32bytes(in))
			if err := s.Submit(); err != nil {
				t.Fatal(err)
			}
			if err := s.Wait(); err != nil {
				t.Fatal(err)
			}
			got := bytesF32(out)
			for i := range got {
				v := 2*in[i] + 1
				if got[i] != v*v {
					t.Fatalf("run %d: y[%d] = %v, want %v", r, i, got[i], v*v)
				}
			}
			if tm := s.Timings(); len(tm) != 3 || tm[1] != 0 {
				t.Fatalf("run %d: timings %v, want 3 with the empty launch 0", r, tm)
			}
		}
		s.Reset()
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCacheCorruption fills the binary cache with garbage and checks that
// programs are rebuilt from source, and that a good cache is used.
func TestCacheCorruption(t *testing.T) {
	for _, info := range testDevices(t) {
		dir := t.TempDir()
		t.Setenv(CacheDirEnv, dir)
		exp := func() *device {
			d, err := Backend{}.Open(info.Index)
			if err != nil {
				t.Fatal(err)
			}
			x := backendtest.Upload(t, d, f32bytes([]float32{0, 1, 2}))
			y := newGuarded(t, d, rt.F32, 3)
			backendtest.Run(t, d, &rt.Unary{Fn: rt.Exp, X: rt.Ref{Buf: x, DType: rt.F32, Shape: []int{3}}, Y: y.ref(rt.F32, 3)})
			got := bytesF32(y.read(t, d))
			for i, v := range got {
				if math.Abs(float64(v)-math.Exp(float64(i))) > 1e-5*math.Exp(float64(i)) {
					t.Fatalf("exp(%d) = %v", i, v)
				}
			}
			return d.(*device)
		}
		d1 := exp()
		d1.Close()
		files, _ := filepath.Glob(filepath.Join(dir, "opencl", "*.bin"))
		if len(files) == 0 {
			t.Logf("%s: driver returned no program binary; cache not exercised", info.Name)
			continue
		}
		d2 := exp()
		if d2.hits == 0 {
			t.Errorf("good cache not used: %d builds, %d hits", d2.builds, d2.hits)
		}
		d2.Close()
		for _, f := range files {
			if err := os.WriteFile(f, []byte("garbage, not a program binary"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		d3 := exp()
		if d3.builds == 0 {
			t.Errorf("corrupt cache entry not rebuilt: %d builds, %d hits", d3.builds, d3.hits)
		}
		d3.Close()
	}
}

// TestCacheKeySource checks that a program binary's cache key follows its
// source: a kernel file changed by one character (as a kernel signature
// change does) gets another key, so that no binary built from the former
// source is loaded for it.
func TestCacheKeySource(t *testing.T) {
	for _, file := range []string{"gemm.cl", "conv.cl"} {
		src := kernelSource(file)
		opts := "-DT=float -DACC=float"
		k := cacheKey("dev", "drv", src, opts)
		if k2 := cacheKey("dev", "drv", src, opts); k2 != k {
			t.Errorf("%s: key %s, then %s for the same source", file, k, k2)
		}
		i := strings.Index(src, "int hasRes")
		if i < 0 {
			t.Fatalf("%s: no hasRes argument in its source", file)
		}
		changed := src[:i] + "int hasRes, long SX" + src[i+len("int hasRes"):]
		if cacheKey("dev", "drv", changed, opts) == k {
			t.Errorf("%s: the same key %s for a changed source", file, k)
		}
	}
}

// TestBuildErrorLog checks that a compiler error is reported with its log.
func TestBuildErrorLog(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev *device) {
		dev.srcHook = func(file, src string) string {
			if file == "elementwise.cl" {
				return src + "\n__kernel void broken(void) { this_is_not_declared = 1; }\n"
			}
			return src
		}
		x, _ := dev.Alloc(16)
		s, _ := dev.NewStream(rt.StreamOptions{})
		defer s.Close()
		err := s.Launch(&rt.Unary{Fn: rt.Neg, X: rt.Ref{Buf: x, DType: rt.F32, Shape: []int{4}}, Y: rt.Ref{Buf: x, DType: rt.F32, Shape: []int{4}}})
		if err == nil {
			t.Fatal("broken source built")
		}
		if !strings.Contains(err.Error(), "this_is_not_declared") || !strings.Contains(err.Error(), "build log") {
			t.Fatalf("error lacks the build log: %v", err)
		}
		t.Logf("build error: %.300s", err)
	})
}

// TestOOM checks that an absurd allocation is an *rt.OOMError.
func TestOOM(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev *device) {
		_, err := dev.Alloc(1 << 60)
		var oom *rt.OOMError
		if !errors.As(err, &oom) || !errors.Is(err, rt.ErrOutOfMemory) || oom.Request != 1<<60 {
			t.Fatalf("Alloc(1<<60) = %v, want *rt.OOMError", err)
		}
		t.Log(err)
	})
}

// TestErrors checks invalid arguments and use after Close.
func TestErrors(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev *device) {
		x, _ := dev.Alloc(16)
		s, _ := dev.NewStream(rt.StreamOptions{})
		err := s.Launch(&rt.Unary{Fn: rt.Neg, X: rt.Ref{Buf: x, DType: rt.F32, Shape: []int{8}}, Y: rt.Ref{Buf: x, DType: rt.F32, Shape: []int{8}}})
		if err == nil || !strings.Contains(err.Error(), "Unary.Neg") || !strings.Contains(err.Error(), "X") {
			t.Fatalf("out-of-bounds view: %v", err)
		}
		err = s.Launch(&rt.Softmax{X: rt.Ref{Buf: x, DType: rt.I32, Shape: []int{4}}, Y: rt.Ref{Buf: x, DType: rt.I32, Shape: []int{4}}, Outer: 1, N: 4, Inner: 1})
		if !errors.Is(err, rt.ErrUnsupported) {
			t.Fatalf("softmax i32: %v", err)
		}
		dev.Close()
		dev.Close()
		if _, err := dev.Alloc(4); !errors.Is(err, rt.ErrClosed) {
			t.Fatalf("Alloc after Close: %v", err)
		}
		x.Free()
		s.Close()
	})
}

// TestGEMV runs gemm.cl's gemv kernel (MatMul with M == 1 or N == 1) in
// both modes and operand orders: x·W with W stored K x N (column mode) or
// N x K (row mode), and W·x with W stored M x K (row) or K x M (column);
// odd lengths, K below and past a split, batches with a shared or padded
// W, a 2-D bias and an activation, with the K split chosen by the device,
// and forced to 3 and 7 (the last work-group of an output group sums the
// partials), whole-file programs and split ones (one kernel a program,
// the mode fixed at build time: what GPUs get), against a float64
// reference (1e-5 of sum |a*b| + 1).
func TestGEMV(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev *device) {
		defer func() { dev.splitForce = 0 }()
		rng := rand.New(rand.NewSource(3))
		cases := []struct {
			M, N, K, batch int
			ta, tb, shared bool
		}{
			{1, 300, 257, 1, false, false, false}, // column, W = B
			{1, 301, 1000, 2, false, true, false}, // row, W = B
			{1, 33, 4099, 2, true, false, true},   // column, shared W
			{77, 1, 1000, 1, false, false, false}, // row, W = A
			{300, 1, 130, 2, true, true, false},   // column, W = A
			{1, 1, 500, 1, false, false, false},   // a dot product
			{1, 9, 5, 3, false, true, true},       // K below a split
			{1, 37, 1023, 2, false, true, false},  // row, W = B, K % 4 = 3
			{45, 1, 2053, 1, false, false, false}, // row, W = A, K % 4 = 1
		}
		defer func(split bool) { dev.split = split }(dev.split)
		for _, v := range []struct {
			progs bool // one kernel per program, the mode fixed at build time (GV_MODE)
			split int
		}{{false, 0}, {false, 3}, {false, 7}, {true, 0}, {true, 3}} {
			dev.split, dev.splitForce = v.progs, v.split
			split := v.split
			for _, c := range cases {
				strideA, strideB := c.M*c.K, c.K*c.N+5
				if c.shared {
					strideB = 0
				}
				A := make([]float32, c.batch*strideA)
				B := make([]float32, (c.batch-1)*strideB+c.K*c.N)
				bias := make([]float32, c.M*c.N)
				for _, v := range [][]float32{A, B, bias} {
					for i := range v {
						v[i] = rng.Float32()*2 - 1
					}
				}
				ab, bb, cb := backendtest.Upload(t, dev, f32bytes(A)), backendtest.Upload(t, dev, f32bytes(B)), backendtest.Upload(t, dev, f32bytes(bias))
				y := newGuarded(t, dev, rt.F32, c.batch*c.M*c.N)
				op := &rt.MatMul{
					A: rt.Ref{Buf: ab, DType: rt.F32, Shape: []int{len(A)}}, B: rt.Ref{Buf: bb, DType: rt.F32, Shape: []int{len(B)}},
					Bias: rt.Ref{Buf: cb, DType: rt.F32, Shape: []int{c.M, c.N}, Strides: []int{c.N, 1}},
					Y:    y.ref(rt.F32, c.batch*c.M*c.N), Batch: c.batch, M: c.M, N: c.N, K: c.K, TransA: c.ta, TransB: c.tb,
					StrideA: strideA, StrideB: strideB, StrideY: c.M * c.N, Alpha: 0.5, Beta: 2,
					Act: rt.Activation{Fn: rt.LeakyRelu, Alpha: 0.1},
				}
				backendtest.Run(t, dev, op)
				got := bytesF32(y.read(t, dev))
				for b := 0; b < c.batch; b++ {
					for i := 0; i < c.M; i++ {
						for j := 0; j < c.N; j++ {
							s, mag := 0.0, 0.0
							for k := 0; k < c.K; k++ {
								ai, bi := b*strideA+i*c.K+k, b*strideB+k*c.N+j
								if c.ta {
									ai = b*strideA + k*c.M + i
								}
								if c.tb {
									bi = b*strideB + j*c.K + k
								}
								p := float64(A[ai]) * float64(B[bi])
								s += p
								mag += math.Abs(p)
							}
							want := rt.LeakyRelu.Apply(0.5*s+2*float64(bias[i*c.N+j]), 0.1, 0)
							if g := float64(got[(b*c.M+i)*c.N+j]); math.Abs(g-want) > 1e-5*(mag+1) {
								t.Fatalf("split %d (split programs %v) %+v: Y[%d][%d,%d] = %v, want %v", split, v.progs, c, b, i, j, g, want)
							}
						}
					}
				}
				ab.Free()
				bb.Free()
				cb.Free()
				y.buf.Free()
			}
		}
	})
}
