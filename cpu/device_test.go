package cpu

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

func TestRegistered(t *testing.T) {
	b, ok := rt.Lookup("cpu")
	if !ok {
		t.Fatal("cpu backend not registered")
	}
	ds, err := b.Devices()
	if err != nil || len(ds) != 1 {
		t.Fatalf("Devices: %v %v", ds, err)
	}
	d := ds[0]
	if d.Kind != rt.KindCPU || !d.FP16 || !d.FP64 || !d.Unified || d.Spec() != "cpu:0" || !strings.HasPrefix(d.Name, "Go CPU (") {
		t.Errorf("bad info %+v", d)
	}
	t.Logf("%s, %d bytes", d.Name, d.Memory)
	if _, err := b.Open(1); err == nil {
		t.Error("Open(1) succeeded")
	}
}

func TestAllocAndClose(t *testing.T) {
	d := NewDevice()
	b, err := d.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	if p := &b.(*Buffer).data[0]; uintptrOf(p)%bufAlign != 0 {
		t.Error("buffer not aligned")
	}
	if _, err := d.Alloc(math.MaxInt64); !errors.Is(err, rt.ErrOutOfMemory) {
		t.Errorf("huge Alloc: %v", err)
	} else if _, ok := err.(*rt.OOMError); !ok {
		t.Errorf("huge Alloc error %T, want *rt.OOMError", err)
	}
	if _, err := d.Alloc(-1); err == nil {
		t.Error("negative Alloc succeeded")
	}
	if z, err := d.Alloc(0); err != nil || z.Size() != 0 {
		t.Errorf("Alloc(0): %v", err)
	}
	if err := d.Write(b, 990, make([]byte, 20)); err == nil {
		t.Error("out-of-range Write succeeded")
	}
	if err := d.Read(make([]byte, 4), b, -1); err == nil {
		t.Error("negative Read succeeded")
	}
	s, _ := d.NewStream(rt.StreamOptions{})
	b2, _ := d.Alloc(64)
	b2.Free()
	b2.Free()
	if err := s.Launch(&rt.Fill{Y: rt.Ref{Buf: b2, DType: rt.F32, Shape: []int{4}}}); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("Launch on freed buffer: %v", err)
	}
	if err := d.Write(b2, 0, []byte{1}); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("Write to freed buffer: %v", err)
	}
	// A recorded op whose buffer is freed before Submit.
	b3, _ := d.Alloc(64)
	if err := s.Launch(&rt.Fill{Y: rt.Ref{Buf: b3, DType: rt.F32, Shape: []int{4}}}); err != nil {
		t.Fatal(err)
	}
	b3.Free()
	if err := s.Submit(); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("Submit with freed buffer: %v", err)
	}
	if err := s.Wait(); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("Wait: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(8); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if err := d.Write(b, 0, []byte{1}); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := s.Submit(); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
	if _, err := d.NewStream(rt.StreamOptions{}); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("NewStream after Close: %v", err)
	}
	b.Free() // after Close: no-op
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLaunchErrors(t *testing.T) {
	e := newEnv(t)
	tight := func(dt rt.DType) *region {
		b, err := e.dev.Alloc(int64(16 * dt.Size()))
		if err != nil {
			t.Fatal(err)
		}
		return &region{buf: b, dt: dt, n: 16, noGuard: true}
	}
	r, ri := tight(rt.F32), tight(rt.I32)
	cases := []struct {
		name   string
		op     rt.Op
		unsupp bool
	}{
		{"oob", &rt.Unary{Fn: rt.Relu, X: r.ref(17), Y: r.ref(17)}, false},
		{"oob offset", &rt.Unary{Fn: rt.Relu, X: r.view(8, []int{16}, nil), Y: r.ref(16)}, false},
		{"neg stride oob", &rt.Unary{Fn: rt.Relu, X: r.view(0, []int{4}, []int{-1}), Y: r.ref(4)}, false},
		{"shape mismatch", &rt.Binary{Fn: rt.Add, A: r.ref(4), B: r.ref(5), Y: r.ref(4)}, false},
		{"dtype mismatch", &rt.Binary{Fn: rt.Add, A: r.ref(4), B: ri.ref(4), Y: r.ref(4)}, false},
		{"exp i32", &rt.Unary{Fn: rt.Exp, X: ri.ref(4), Y: ri.ref(4)}, true},
		{"softmax i32", &rt.Softmax{X: ri.ref(16), Y: ri.ref(16), Outer: 1, N: 16, Inner: 1}, true},
		{"matmul i32", &rt.MatMul{A: ri.ref(16), B: ri.ref(16), Y: ri.ref(16), Batch: 1, M: 4, N: 4, K: 4}, true},
		{"matmul oob", &rt.MatMul{A: r.ref(16), B: r.ref(16), Y: r.ref(16), Batch: 2, M: 4, N: 4, K: 4, StrideA: 16}, false},
		{"matmul neg", &rt.MatMul{A: r.ref(16), B: r.ref(16), Y: r.ref(16), Batch: 1, M: -4, N: -4, K: 4}, false},
		{"reduce neg", &rt.Reduce{Fn: rt.Sum, X: r.ref(16), Y: r.ref(16), Outer: -1, N: -1, Inner: 1}, false},
		{"linear extent", &rt.Reduce{Fn: rt.Sum, X: r.view(8, []int{16}, []int{0}), Y: r.ref(1), Outer: 1, N: 16, Inner: 1}, false},
		{"no X", &rt.Unary{Fn: rt.Relu, Y: r.ref(4)}, false},
		{"conv groups", &rt.Conv{X: r.ref(16), W: r.ref(16), Y: r.ref(16), N: 1, C: 3, H: 1, Width: 1, K: 2, OH: 1, OW: 1, KH: 1, KW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 2}, false},
		{"pool lp0", &rt.Pool{Fn: rt.LpPool, X: r.ref(16), Y: r.ref(16), NC: 1, H: 4, W: 4, OH: 4, OW: 4, KH: 1, KW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, false},
		{"gather f32 idx", &rt.Gather{X: r.ref(16), Idx: r.ref(2), Y: r.ref(2), Outer: 1, Axis: 16, Inner: 1}, false},
	}
	for _, c := range cases {
		err := e.launchErr(c.op)
		if err == nil {
			t.Errorf("%s: Launch succeeded", c.name)
			continue
		}
		if !strings.Contains(err.Error(), strings.SplitN(c.op.OpName(), ".", 2)[0]) {
			t.Errorf("%s: error %q does not name the op", c.name, err)
		}
		var ue *rt.UnsupportedError
		if got := errors.As(err, &ue); got != c.unsupp {
			t.Errorf("%s: unsupported=%v, want %v (%v)", c.name, got, c.unsupp, err)
		}
		if c.unsupp && e.dev.Supports(c.op) == nil {
			t.Errorf("%s: Supports says yes", c.name)
		}
	}
}

func TestStreamReplayAndProfile(t *testing.T) {
	e := newEnv(t)
	x, y := e.region(rt.F32, 4, nil), e.region(rt.F32, 4, nil)
	src := rt.FromFloat32([]float32{1, -2, 3, -4}, 4).Data
	dst := make([]byte, 16)
	s := e.st
	s.Reset()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Write(x.buf, guard, src))
	must(s.Launch(&rt.Unary{Fn: rt.Relu, X: x.ref(4), Y: y.ref(4)}))
	must(s.Launch(&rt.Unary{Fn: rt.Neg, X: y.ref(4), Y: y.ref(4)}))
	must(s.Read(dst, y.buf, guard))
	for run := 0; run < 3; run++ {
		copy(src, rt.FromFloat32([]float32{float32(run), -2, 3, -4}, 4).Data)
		must(s.Submit())
		must(s.Wait())
		got := (&rt.Tensor{DType: rt.F32, Shape: []int{4}, Data: dst}).Float64s()
		want := []float64{-float64(run), 0, -3, 0}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("run %d: %v, want %v", run, got, want)
			}
		}
		if n := len(s.Timings()); n != 2 {
			t.Fatalf("%d timings, want 2", n)
		}
	}
	if err := s.Write(x.buf, 1000, src); err == nil {
		t.Error("out-of-range stream Write accepted")
	}
	s.Reset()
	must(s.Submit())
	if n := len(s.Timings()); n != 0 {
		t.Errorf("%d timings after Reset", n)
	}
	must(s.Close())
	must(s.Close())
	if err := s.Launch(&rt.Fill{Y: x.ref(4)}); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("Launch after stream Close: %v", err)
	}
}

// TestConcurrentStreams runs two streams of one device from two goroutines
// (meant for -race).
func TestConcurrentStreams(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.dev.NewStream(rt.StreamOptions{})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			n := 64
			a, _ := e.dev.Alloc(int64(4 * n * n))
			c, _ := e.dev.Alloc(int64(4 * n * n))
			defer a.Free()
			ones := make([]float32, n*n)
			for i := range ones {
				ones[i] = float32(g + 1)
			}
			ref := func(b rt.Buffer) rt.Ref { return rt.Ref{Buf: b, DType: rt.F32, Shape: []int{n * n}} }
			s.Write(a, 0, asBytes(ones))
			s.Launch(&rt.MatMul{A: ref(a), B: ref(a), Y: ref(c), Batch: 1, M: n, N: n, K: n, Alpha: 1})
			s.Launch(&rt.Binary{Fn: rt.Add, A: ref(c), B: ref(c), Y: ref(c)})
			out := make([]float32, n*n)
			s.Read(asBytes(out), c, 0)
			for it := 0; it < 5; it++ {
				if err := s.Submit(); err != nil {
					errs <- err
					return
				}
				want := float32(2 * n * (g + 1) * (g + 1))
				for _, v := range out {
					if v != want {
						errs <- errors.New("wrong concurrent result")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
