package engine_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// devMLPModel is y = Relu(x·w + b), z = Sigmoid(x) for x of [n k]: two
// outputs, one of them computed straight from the input.
func devMLPModel(t *testing.T, rng *rand.Rand, n, k, m int) (*model.Model, []float32, []float32) {
	t.Helper()
	w := randTensor(rng, k, m).Float32s()
	bias := randTensor(rng, m).Float32s()
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, int64(n), int64(k))
	wt := b.Weight("w", rt.F32, []int64{int64(k), int64(m)}, w)
	bt := b.Weight("b", rt.F32, []int64{int64(m)}, bias)
	h := b.Op("MatMul", []string{x, wt}, nil)
	h = b.Op("Add", []string{h, bt}, nil)
	y := b.Op("Relu", []string{h}, nil)
	z := b.Op("Sigmoid", []string{x}, nil)
	b.Node("yname", "Identity", []string{y}, []string{"y"}, nil)
	b.Node("zname", "Identity", []string{z}, []string{"z"}, nil)
	b.Output("y", "z")
	mm, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return mm, w, bias
}

// tanhModel is u = Tanh(y) for y of [n m]: the second model of a chain.
func tanhModel(t *testing.T, n, m int) *model.Model {
	t.Helper()
	b := model.NewBuilder()
	y := b.Input("y", rt.F32, int64(n), int64(m))
	u := b.Op("Tanh", []string{y}, nil)
	b.Node("uname", "Identity", []string{u}, []string{"u"}, nil)
	b.Output("u")
	mm, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return mm
}

func closeTo(t *testing.T, what string, got *rt.Tensor, want []float64, tol float64) {
	t.Helper()
	g := got.Float64s()
	if len(g) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(g), len(want))
	}
	for i := range g {
		if math.Abs(g[i]-want[i]) > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, g[i], want[i])
		}
	}
}

// TestRunDevice chains two models through device tensors on every
// available device and compares with a float64 reference and with the
// host Run; it alternates Run and RunDevice (re-recording on devices
// with host transfers), checks the input errors, and that the device's
// live allocations return to their baseline after Close.
func TestRunDevice(t *testing.T) {
	const n, k, m = 7, 13, 5
	for _, spec := range []string{"cpu", "vulkan:0", "opencl:0"} {
		t.Run(spec, func(t *testing.T) {
			dev := dpDevices(t, spec)[0]
			mr, _ := dev.(rt.MemoryReporter)
			var base rt.MemoryUsage
			if mr != nil {
				base = mr.MemoryUsage()
			}
			rng := rand.New(rand.NewPCG(5, 6))
			ma, w, bias := devMLPModel(t, rng, n, k, m)
			mb := tanhModel(t, n, m)
			sa, err := engine.New(ma, dev, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			sb, err := engine.New(mb, dev, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for rep := 0; rep < 3; rep++ {
				x := randTensor(rng, n, k)
				xv := x.Float64s()
				wantY, wantZ, wantU := make([]float64, n*m), make([]float64, n*k), make([]float64, n*m)
				for i := range n {
					for j := range m {
						acc := float64(bias[j])
						for l := range k {
							acc += xv[i*k+l] * float64(w[l*m+j])
						}
						wantY[i*m+j] = math.Max(acc, 0)
						wantU[i*m+j] = math.Tanh(wantY[i*m+j])
					}
				}
				for i, v := range xv {
					wantZ[i] = 1 / (1 + math.Exp(-v))
				}
				// Host run (every other repetition, so that the two kinds
				// of run alternate on one recorded context).
				if rep%2 == 0 {
					out, err := sa.Run(ctx, map[string]*rt.Tensor{"x": x})
					if err != nil {
						t.Fatal(err)
					}
					closeTo(t, "Run y", out["y"], wantY, 1e-4)
					closeTo(t, "Run z", out["z"], wantZ, 1e-4)
				}
				dx, err := sa.Pool().ToDevice(x)
				if err != nil {
					t.Fatal(err)
				}
				outs, err := sa.RunDevice(ctx, map[string]*rt.DeviceTensor{"x": dx})
				if err != nil {
					t.Fatal(err)
				}
				dx.Free() // the run copied it: freeing it does not touch the outputs
				chained, err := sb.RunDevice(ctx, map[string]*rt.DeviceTensor{"y": outs["y"]})
				if err != nil {
					t.Fatal(err)
				}
				for name, want := range map[string][]float64{"y": wantY, "z": wantZ} {
					h, err := outs[name].ToHost()
					if err != nil {
						t.Fatal(err)
					}
					closeTo(t, "RunDevice "+name, h, want, 1e-4)
					if v := outs[name].Bytes(); v != nil && string(v) != string(h.Data) {
						t.Errorf("%s: the mapped view differs from ToHost", name)
					}
				}
				u, err := chained["u"].ToHost()
				if err != nil {
					t.Fatal(err)
				}
				closeTo(t, "chained u", u, wantU, 1e-4)
				for _, o := range outs {
					o.Free()
				}
				if rep == 2 {
					// Leave one output alive across Close: it stays valid.
					defer func() {
						if _, err := chained["u"].ToHost(); err != nil {
							t.Errorf("an output after its session closed: %v", err)
						}
						chained["u"].Free()
					}()
				} else {
					chained["u"].Free()
				}
			}
			if st := sa.Pool().Stats(); st.Reuses == 0 || st.InUse != 0 {
				t.Errorf("session pool after the runs: %+v", st)
			}
			if ms := sa.MemoryStats(); ms.Arenas <= 0 || ms.Weights <= 0 {
				t.Errorf("MemoryStats %+v", ms)
			}
			// Bad inputs.
			other, err := rt.ToDevice(dpDevices(t, "cpu")[0], randTensor(rng, n, k))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Free()
			if _, err := sa.RunDevice(ctx, map[string]*rt.DeviceTensor{"x": other}); dev != other.Device && !errors.Is(err, engine.ErrDevice) {
				t.Errorf("input on another device: %v, want ErrDevice", err)
			}
			bad, err := sa.Pool().NewDeviceTensor(rt.F64, n, k)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sa.RunDevice(ctx, map[string]*rt.DeviceTensor{"x": bad}); !errors.Is(err, engine.ErrDType) {
				t.Errorf("f64 input: %v, want ErrDType", err)
			}
			bad.Free()
			if _, err := sa.RunDevice(ctx, nil); !errors.Is(err, engine.ErrMissingInput) {
				t.Errorf("no input: %v, want ErrMissingInput", err)
			}
			if err := sa.Close(); err != nil {
				t.Fatal(err)
			}
			if err := sb.Close(); err != nil {
				t.Fatal(err)
			}
			if mr != nil {
				// The deferred output is still alive here: one buffer.
				if u := mr.MemoryUsage(); u.Buffers != base.Buffers+1 || u.HostBuffers != base.HostBuffers {
					t.Errorf("usage %+v after Close with one output alive, want the baseline %+v plus one buffer", u, base)
				}
				t.Cleanup(func() {
					if u := mr.MemoryUsage(); u != base {
						t.Errorf("usage %+v after Close and Free, want the baseline %+v", u, base)
					}
				})
			}
		})
	}
}
