package rt

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDType(t *testing.T) {
	for _, tc := range []struct {
		dt   DType
		name string
		size int
	}{{F32, "f32", 4}, {F16, "f16", 2}, {F64, "f64", 8}, {I32, "i32", 4}, {I64, "i64", 8}, {U8, "u8", 1}, {Bool, "bool", 1}, {I8, "i8", 1}} {
		if tc.dt.String() != tc.name || tc.dt.Size() != tc.size || !tc.dt.Valid() {
			t.Errorf("%d: got %s size %d", tc.dt, tc.dt, tc.dt.Size())
		}
		if got, err := ParseDType(tc.name); err != nil || got != tc.dt {
			t.Errorf("ParseDType(%q) = %v, %v", tc.name, got, err)
		}
	}
	if _, err := ParseDType("complex64"); err == nil {
		t.Error("ParseDType accepted complex64")
	}
	if DType(99).Valid() || DType(99).Size() != 0 {
		t.Error("dtype 99 is valid")
	}
	for _, f := range []float32{0, 1, -2.5, 65504, 1e-4} {
		if got := F16Float(F16Bits(f)); math.Abs(float64(got-f)) > 1e-3*math.Abs(float64(f)) {
			t.Errorf("f16 round trip %v -> %v", f, got)
		}
	}
}

func TestNumElements(t *testing.T) {
	if NumElements([]int{2, 3, 4}) != 24 || NumElements(nil) != 1 || NumElements([]int{3, 0}) != 0 {
		t.Error("NumElements wrong")
	}
	if NumElements([]int{-1, 2}) != -1 || NumElements([]int{1 << 40, 1 << 40}) != -1 {
		t.Error("NumElements accepts negative or overflowing shapes")
	}
}

func TestTensorConversions(t *testing.T) {
	for _, dt := range []DType{F32, F16, F64, I32, I64, U8, I8, Bool} {
		x := FromFloat64(dt, []float64{1, 0, 3}, 3)
		if err := x.Check(); err != nil {
			t.Fatal(err)
		}
		want := []float64{1, 0, 3}
		if dt == Bool {
			want = []float64{1, 0, 1}
		}
		for i, v := range x.Float64s() {
			if v != want[i] {
				t.Errorf("%s element %d = %v, want %v", dt, i, v, want[i])
			}
		}
	}
	bad := &Tensor{DType: F32, Shape: []int{2}, Data: make([]byte, 7)}
	if err := bad.Check(); err == nil {
		t.Error("Check accepted 7 bytes for f32[2]")
	}
}

type fakeBuf struct{ n int64 }

func (b fakeBuf) Size() int64 { return b.n }
func (b fakeBuf) Free()       {}

func TestCheckOp(t *testing.T) {
	buf := fakeBuf{400}
	ref := func(shape []int, strides []int, off int64) Ref {
		return Ref{Buf: buf, DType: F32, Shape: shape, Strides: strides, Off: off}
	}
	for _, tc := range []struct {
		name string
		op   Op
		want string
	}{
		{"ok", &Unary{Fn: Relu, X: ref([]int{10}, nil, 0), Y: ref([]int{10}, nil, 40)}, ""},
		{"broadcast ok", &Binary{Fn: Add, A: ref([]int{4, 5}, []int{0, 1}, 0), B: ref([]int{4, 5}, nil, 0), Y: ref([]int{4, 5}, nil, 80)}, ""},
		{"out of bounds", &Unary{X: ref([]int{10}, nil, 0), Y: ref([]int{10}, nil, 380)}, "outside buffer"},
		{"shape mismatch", &Unary{X: ref([]int{10}, nil, 0), Y: ref([]int{11}, nil, 0)}, "shape"},
		{"missing", &Unary{Y: ref([]int{10}, nil, 0)}, "has no buffer"},
		{"misaligned", &Unary{X: ref([]int{1}, nil, 2), Y: ref([]int{1}, nil, 0)}, "not aligned"},
		{"strided linear operand", &Softmax{X: ref([]int{16}, []int{0}, 0), Y: ref([]int{16}, nil, 0), Outer: 1, N: 16, Inner: 1}, "contiguous"},
		{"negative sizes", &Reduce{X: ref([]int{4}, nil, 0), Y: ref([]int{4}, nil, 0), Outer: -1, N: -1, Inner: 1}, "out of range"},
		{"matmul too small", &MatMul{A: ref([]int{6}, nil, 0), B: ref([]int{6}, nil, 0), Y: ref([]int{4}, nil, 0), Batch: 1, M: 2, N: 2, K: 4}, "needs"},
		{"matmul res in place", &MatMul{A: ref([]int{8}, nil, 0), B: ref([]int{8}, nil, 32), Y: ref([]int{4}, nil, 64), Res: ref([]int{4}, nil, 64), Batch: 1, M: 2, N: 2, K: 4}, ""},
		{"matmul res apart", &MatMul{A: ref([]int{8}, nil, 0), B: ref([]int{8}, nil, 32), Y: ref([]int{4}, nil, 64), Res: ref([]int{4}, nil, 80), Batch: 1, M: 2, N: 2, K: 4}, ""},
		{"matmul res overlaps", &MatMul{A: ref([]int{8}, nil, 0), B: ref([]int{8}, nil, 32), Y: ref([]int{4}, nil, 64), Res: ref([]int{4}, nil, 68), Batch: 1, M: 2, N: 2, K: 4}, "Res overlaps Y"},
		{"matmul res too small", &MatMul{A: ref([]int{8}, nil, 0), B: ref([]int{8}, nil, 32), Y: ref([]int{4}, nil, 64), Res: ref([]int{3}, nil, 80), Batch: 1, M: 2, N: 2, K: 4}, "Res has 3 elements"},
		{"matmul res dtype", &MatMul{A: ref([]int{8}, nil, 0), B: ref([]int{8}, nil, 32), Y: ref([]int{4}, nil, 64), Res: Ref{Buf: buf, DType: F64, Shape: []int{4}, Off: 80}, Batch: 1, M: 2, N: 2, K: 4}, "Res dtype"},
		{"gather index dtype", &Gather{X: ref([]int{4}, nil, 0), Idx: ref([]int{2}, nil, 0), Y: ref([]int{2}, nil, 0), Outer: 1, Axis: 4, Inner: 1}, "index dtype"},
	} {
		err := CheckOp(tc.op)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestReferenceFunctions(t *testing.T) {
	if Sigmoid.Apply(-800, 0, 0) != 0 || Sigmoid.Apply(800, 0, 0) != 1 {
		t.Error("sigmoid overflows")
	}
	if Softplus.Apply(1000, 0, 0) != 1000 {
		t.Error("softplus overflows")
	}
	if Mod.Apply(-7, 3) != 2 || Fmod.Apply(-7, 3) != -1 {
		t.Error("Mod/Fmod signs")
	}
	if Round.Apply(2.5, 0, 0) != 2 || Round.Apply(3.5, 0, 0) != 4 {
		t.Error("Round is not half-to-even")
	}
	for f := UnaryFn(0); int(f) < NumUnaryFns; f++ {
		if strings.HasPrefix(f.String(), "UnaryFn(") {
			t.Errorf("unary %d has no name", f)
		}
	}
}

// fakeBackend lets the registry be tested without devices.
type fakeBackend struct {
	name string
	devs []DeviceInfo
	err  error
}

func (b *fakeBackend) Name() string                   { return b.name }
func (b *fakeBackend) Devices() ([]DeviceInfo, error) { return b.devs, b.err }
func (b *fakeBackend) Open(i int) (Device, error)     { return fakeDevice{b.devs[i]}, nil }

type fakeDevice struct{ info DeviceInfo }

func (d fakeDevice) Info() DeviceInfo                        { return d.info }
func (d fakeDevice) Supports(Op) error                       { return nil }
func (d fakeDevice) Alloc(int64) (Buffer, error)             { return nil, nil }
func (d fakeDevice) Write(Buffer, int64, []byte) error       { return nil }
func (d fakeDevice) Read([]byte, Buffer, int64) error        { return nil }
func (d fakeDevice) NewStream(StreamOptions) (Stream, error) { return nil, nil }
func (d fakeDevice) Close() error                            { return nil }

func withBackends(t *testing.T, bs ...Backend) {
	t.Helper()
	regMu.Lock()
	saved := backends
	backends = bs
	regMu.Unlock()
	t.Cleanup(func() { regMu.Lock(); backends = saved; regMu.Unlock() })
}

func TestOpenSelection(t *testing.T) {
	gpu := DeviceInfo{Backend: "vulkan", Name: "GPU", Kind: KindDiscreteGPU}
	soft := DeviceInfo{Backend: "vulkan", Name: "lavapipe", Kind: KindCPU}
	host := DeviceInfo{Backend: "cpu", Name: "host", Kind: KindCPU}
	vk := &fakeBackend{name: "vulkan", devs: []DeviceInfo{soft, gpu}}
	cuda := &fakeBackend{name: "cuda", err: errors.New("no libcuda.so.1: " + ErrUnavailable.Error())}
	cpu := &fakeBackend{name: "cpu", devs: []DeviceInfo{host}}
	withBackends(t, cpu, cuda, vk)

	var log []string
	logf := func(f string, a ...any) { log = append(log, f) }
	d, err := Open("auto", logf)
	if err != nil || d.Info().Name != "GPU" {
		t.Fatalf("auto picked %v, %v; want the discrete GPU", d, err)
	}
	if d, err := Open("vulkan:0", nil); err != nil || d.Info().Name != "lavapipe" {
		t.Errorf("vulkan:0 = %v, %v", d, err)
	}
	if d, err := Open("vulkan", nil); err != nil || d.Info().Name != "GPU" {
		t.Errorf("vulkan = %v, %v; want the best device", d, err)
	}
	if _, err := Open("cuda:0", nil); err == nil || !strings.Contains(err.Error(), "libcuda") {
		t.Errorf("explicit cuda: got %v, want the reason", err)
	}
	if _, err := Open("vulkan:7", nil); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("vulkan:7: got %v", err)
	}
	if _, err := Open("metal", nil); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Errorf("metal: got %v", err)
	}
	if _, err := Open("vulkan:x", nil); err == nil {
		t.Error("vulkan:x accepted")
	}

	// Only software devices: auto skips them, says why, and uses the CPU.
	vk.devs = []DeviceInfo{soft}
	log = nil
	d, err = Open("auto", logf)
	if err != nil || d.Info().Name != "host" {
		t.Fatalf("auto picked %v, %v; want the CPU", d, err)
	}
	if len(log) < 3 {
		t.Errorf("auto logged %q, want one line per skipped backend and the choice", log)
	}
}

func TestReferenceSupport(t *testing.T) {
	b := fakeBuf{1 << 20}
	r := func(dt DType) Ref { return Ref{Buf: b, DType: dt, Shape: []int{4}} }
	for _, tc := range []struct {
		name        string
		op          Op
		unsupported bool // want *UnsupportedError; else want a plain error when wantErr
		wantErr     bool
	}{
		{"cast f16 to i64", &Unary{Fn: Copy, X: r(F16), Y: r(I64)}, false, false},
		{"int relu", &Unary{Fn: Relu, X: r(I32), Y: r(I32)}, false, false},
		{"int exp", &Unary{Fn: Exp, X: r(I32), Y: r(I32)}, true, true},
		{"compare writes bool", &Binary{Fn: Less, A: r(F32), B: r(F32), Y: r(Bool)}, false, false},
		{"compare writing f32", &Binary{Fn: Less, A: r(F32), B: r(F32), Y: r(F32)}, false, true},
		{"mixed matmul", &MatMul{A: r(F16), B: r(F32), Y: r(F16)}, false, true},
		{"int matmul", &MatMul{A: r(I32), B: r(I32), Y: r(I32)}, true, true},
		{"matmul with residual", &MatMul{A: r(F32), B: r(F32), Y: r(F32), Res: r(F32)}, true, true}, // optional: backends say so themselves
		{"argmax writes i64", &Reduce{Fn: ArgMax, X: r(F32), Y: r(I64)}, false, false},
		{"topk indices i32", &TopK{X: r(F32), Values: r(F32), Indices: r(I32)}, false, true},
		{"adam f64", &OptimStep{Fn: OptimAdam, P: r(F64), G: r(F64), S1: r(F64), S2: r(F64), H: r(F64)}, false, false},
		{"sgd f16", &OptimStep{Fn: OptimSGD, P: r(F16), G: r(F16), H: r(F16)}, true, true},
		{"sgd int", &OptimStep{Fn: OptimSGD, P: r(I32), G: r(I32), H: r(I32)}, true, true},
		{"sgd f32 with f64 H", &OptimStep{Fn: OptimSGD, P: r(F32), G: r(F32), H: r(F64)}, false, true},
		{"sgd f32 with f64 Scale", &OptimStep{Fn: OptimSGD, P: r(F32), G: r(F32), H: r(F32), Scale: r(F64)}, false, true},
	} {
		err := ReferenceSupport("test", tc.op)
		var ue *UnsupportedError
		switch {
		case !tc.wantErr && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr && err == nil:
			t.Errorf("%s: accepted", tc.name)
		case tc.wantErr && errors.As(err, &ue) != tc.unsupported:
			t.Errorf("%s: %v (UnsupportedError: %v, want %v)", tc.name, err, !tc.unsupported, tc.unsupported)
		}
	}
}
