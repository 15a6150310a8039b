//go:build cgo

package vulkan

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"sync"
	"testing"

	_ "github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/internal/indexconf"
	"github.com/vrun-go/vrun/rt"
)

// The index-driven primitives are checked against the CPU backend (the
// reference implementation of rt/ops.go): every buffer, including the
// sentinel bytes around each view, must come back identical (NaN-aware
// for floats).

var (
	cpuOnce sync.Once
	cpuDev  rt.Device
	cpuErr  error
)

// refDevice returns the CPU backend's device (kept open for the process).
func refDevice(t testing.TB) rt.Device {
	t.Helper()
	cpuOnce.Do(func() {
		b, ok := rt.Lookup("cpu")
		if !ok {
			cpuErr = fmt.Errorf("cpu backend not registered")
			return
		}
		cpuDev, cpuErr = b.Open(0)
	})
	if cpuErr != nil {
		t.Fatal(cpuErr)
	}
	return cpuDev
}

// hostBuf is a tensor's elements with guard bytes on each side.
type hostBuf struct {
	dt  rt.DType
	raw []byte
}

func newHost(dt rt.DType, v []float64) hostBuf {
	raw := bytes.Repeat([]byte{0xCD}, 2*guard+len(v)*dt.Size())
	copy(raw[guard:], encode(dt, v))
	return hostBuf{dt, raw}
}

// runOn allocates and fills bufs on d, runs mk's op and returns the
// buffers' bytes.
func runOn(t *testing.T, d rt.Device, bufs []hostBuf, mk func(b []rt.Buffer) rt.Op) ([][]byte, bool) {
	t.Helper()
	var dbs []rt.Buffer
	for _, h := range bufs {
		b, err := d.Alloc(int64(len(h.raw)))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		if err := d.Write(b, 0, h.raw); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, b)
	}
	op := mk(dbs)
	if !supported(t, d, op) {
		return nil, false
	}
	backendtest.Run(t, d, op)
	var out [][]byte
	for i, b := range dbs {
		raw := make([]byte, len(bufs[i].raw))
		if err := d.Read(raw, b, 0); err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out, true
}

func crossCheck(t *testing.T, what string, bufs []hostBuf, mk func(b []rt.Buffer) rt.Op) {
	t.Helper()
	got, ok := runOn(t, testDevice(t), bufs, mk)
	if !ok {
		return
	}
	want, _ := runOn(t, refDevice(t), bufs, mk)
	for i := range got {
		if bytes.Equal(got[i], want[i]) {
			continue
		}
		dt := bufs[i].dt
		if !bytes.Equal(got[i][:guard], want[i][:guard]) || !bytes.Equal(got[i][len(got[i])-guard:], want[i][len(got[i])-guard:]) {
			t.Errorf("%s: buffer %d: sentinel bytes overwritten", what, i)
			continue
		}
		g, w := decode(dt, got[i][guard:len(got[i])-guard]), decode(dt, want[i][guard:len(want[i])-guard])
		bad := 0
		for j := range g {
			if g[j] == w[j] || math.IsNaN(g[j]) && math.IsNaN(w[j]) {
				continue
			}
			if bad < 5 {
				t.Errorf("%s: buffer %d (%s) [%d] = %v, want %v", what, i, dt, j, g[j], w[j])
			}
			bad++
		}
	}
}

func ref3(b rt.Buffer, dt rt.DType, shape [3]int, strides []int) rt.Ref {
	return rt.Ref{Buf: b, Off: guard, DType: dt, Shape: shape[:], Strides: strides}
}

// idxViews are index (or update) layouts of an [o, n, i] view: contiguous,
// shared over o (zero stride), and column-major.
func idxViews(o, n, i int) []struct {
	name    string
	strides []int
	extent  int
} {
	return []struct {
		name    string
		strides []int
		extent  int
	}{
		{"contiguous", nil, o * n * i},
		{"bcast-o", []int{0, i, 1}, n * i},
		{"colmajor", []int{1, o, o * n}, o * n * i},
	}
}

func randIdx(r *rand.Rand, n, axis int, dt rt.DType) []float64 {
	v := make([]float64, n)
	for j := range v {
		v[j] = float64(r.Intn(axis+4) - axis - 2) // negatives and a few out of range
		if r.Intn(3) == 0 {
			v[j] = float64(r.Intn(axis))
		}
	}
	if dt == rt.I64 && n > 2 {
		v[n/2] = 1 << 40 // outside the int32 range: skipped / zero
	}
	return v
}

func TestGatherElements(t *testing.T) {
	testDevice(t)
	r := rand.New(rand.NewSource(11))
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.I64, rt.U8} {
		for _, idt := range []rt.DType{rt.I32, rt.I64} {
			for _, sh := range [][4]int{{3, 5, 4, 7}, {1, 9, 13, 1}, {2, 1, 3, 5}} {
				O, A, N, I := sh[0], sh[1], sh[2], sh[3]
				for _, v := range idxViews(O, N, I) {
					x := newHost(dt, randVals(r, dt, O*A*I, -5, 5))
					idx := newHost(idt, randIdx(r, v.extent, A, idt))
					y := newHost(dt, make([]float64, O*N*I))
					what := fmt.Sprintf("GatherElements %s idx %s %v %s", dt, idt, sh, v.name)
					crossCheck(t, what, []hostBuf{x, idx, y}, func(b []rt.Buffer) rt.Op {
						return &rt.GatherElements{X: ref3(b[0], dt, [3]int{O, A, I}, nil), Idx: ref3(b[1], idt, [3]int{O, N, I}, v.strides),
							Y: ref3(b[2], dt, [3]int{O, N, I}, nil), Outer: O, Axis: A, N: N, Inner: I,
							AllowOutOfRange: true} // the zeros of out-of-range indices; TestIndexOutOfRange checks the error
					})
				}
			}
		}
	}
}

func TestScatterElements(t *testing.T) {
	testDevice(t)
	r := rand.New(rand.NewSource(12))
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64, rt.U8, rt.I8, rt.Bool} {
		for fn := rt.ScatterSet; fn <= rt.ScatterMin; fn++ {
			for _, sh := range [][4]int{{2, 5, 7, 3}, {1, 4, 9, 1}, {3, 1, 2, 2}} {
				O, A, N, I := sh[0], sh[1], sh[2], sh[3]
				views := idxViews(O, N, I)
				for vi, iv := range views {
					uv := views[(vi+1)%len(views)]
					idt := rt.I32
					if vi == 1 {
						idt = rt.I64
					}
					yv := randVals(r, dt, O*A*I, -3, 3)
					uvals := randVals(r, dt, uv.extent, -3, 3)
					if dt.IsFloat() && len(uvals) > 3 {
						uvals[3] = math.NaN()
						yv[0] = math.Copysign(0, -1)
					}
					y := newHost(dt, yv)
					idx := newHost(idt, randIdx(r, iv.extent, A, idt))
					upd := newHost(dt, uvals)
					what := fmt.Sprintf("ScatterElements.%s %s %v idx %s upd %s", fn, dt, sh, iv.name, uv.name)
					crossCheck(t, what, []hostBuf{y, idx, upd}, func(b []rt.Buffer) rt.Op {
						return &rt.ScatterElements{Fn: fn, Y: ref3(b[0], dt, [3]int{O, A, I}, nil),
							Idx: ref3(b[1], idt, [3]int{O, N, I}, iv.strides), Upd: ref3(b[2], dt, [3]int{O, N, I}, uv.strides),
							Outer: O, Axis: A, N: N, Inner: I, AllowOutOfRange: true} // skips; TestIndexOutOfRange checks the error
					})
				}
			}
		}
	}
}

func TestTopK(t *testing.T) {
	testDevice(t)
	r := rand.New(rand.NewSource(13))
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64} {
		for _, sh := range [][4]int{{2, 37, 3, 5}, {1, 300, 1, 300}, {3, 1, 2, 1}, {1, 64, 5, 64}, {2, 10, 1, 0}, {1, 700, 2, 7}} {
			O, N, I, K := sh[0], sh[1], sh[2], sh[3]
			for _, largest := range []bool{true, false} {
				xv := randVals(r, dt, O*N*I, -3, 3)
				for j := range xv {
					if dt.IsFloat() {
						xv[j] = math.Round(xv[j]*2) / 2 // ties
						if r.Intn(17) == 0 {
							xv[j] = math.NaN()
						}
					}
				}
				x := newHost(dt, xv)
				vals := newHost(dt, make([]float64, O*K*I))
				inds := newHost(rt.I64, make([]float64, O*K*I))
				what := fmt.Sprintf("TopK %s %v largest=%v", dt, sh, largest)
				crossCheck(t, what, []hostBuf{x, vals, inds}, func(b []rt.Buffer) rt.Op {
					return &rt.TopK{X: ref3(b[0], dt, [3]int{O, N, I}, nil), Values: ref3(b[1], dt, [3]int{O, K, I}, nil),
						Indices: ref3(b[2], rt.I64, [3]int{O, K, I}, nil), Outer: O, N: N, Inner: I, K: K, Largest: largest}
				})
			}
		}
	}
}

func TestGather(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(8))
	for _, dt := range allDTypes {
		for _, it := range []rt.DType{rt.I32, rt.I64} {
			outer, axis, inner := 3, 7, 5
			xs := randVals(r, dt, outer*axis*inner, -9, 9)
			idx := []float64{0, 6, -1, 3, -7, 2, 7, -8, 1}
			xb := newBuf(t, d, dt, len(xs), xs)
			ib := newBuf(t, d, it, len(idx), idx)
			yb := newBuf(t, d, dt, outer*len(idx)*inner, nil)
			op := &rt.Gather{X: xb.ref([]int{len(xs)}, nil), Idx: ib.ref([]int{len(idx)}, nil), Y: yb.ref([]int{outer * len(idx) * inner}, nil), Outer: outer, Axis: axis, Inner: inner,
				AllowOutOfRange: true} // zeros for 7 and -8; TestIndexOutOfRange checks the error
			if !supported(t, d, op) {
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			want := make([]float64, len(got))
			for o := 0; o < outer; o++ {
				for j, k := range idx {
					kk := int(k)
					if kk < 0 {
						kk += axis
					}
					for i := 0; i < inner; i++ {
						if kk >= 0 && kk < axis {
							want[(o*len(idx)+j)*inner+i] = xs[(o*axis+kk)*inner+i]
						}
					}
				}
			}
			compare(t, "gather "+dt.String()+" idx "+it.String(), got, want, 0)
		}
	}
}

// TestIndexOutOfRange checks that out-of-range indices of Gather,
// GatherElements and ScatterElements fail the run through the stream's
// status words (internal/indexconf).
func TestIndexOutOfRange(t *testing.T) { indexconf.Run(t, testDevice(t)) }
