//go:build cgo

package clshim

import (
	"fmt"
	"math"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/internal/indexconf"
	"github.com/vrun-go/vrun/rt"
)

// Differential tests of the index-driven primitives GatherElements,
// ScatterElements and TopK against the CPU backend: odd sizes, negative
// and out-of-range indices, duplicate scatter targets under every
// function, strided (zero and negative stride) Idx and Upd views, K = 1
// and K = N, and NaN and equal values for TopK.

// indexedDTypes are the dtypes the indexed ops are tested in.
var indexedDTypes = []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64, rt.U8, rt.I8, rt.Bool}

// vals uploads values as a contiguous buffer of dt.
func (e *env) vals(dt rt.DType, v []float64) rt.Buffer {
	return backendtest.Upload(e.t, e.dev, backendtest.Values(dt, v).Data)
}

// indexGen returns random indices in [-axis-2, axis+2), with extreme
// values mixed in for i64.
func (e *env) indexGen(it rt.DType, axis int) func() float64 {
	return func() float64 {
		if it == rt.I64 && e.rng.Intn(10) == 0 {
			return []float64{1 << 40, -(1 << 40), -9.223372036854775808e18, 1 << 62, math.MaxInt32 + 1, math.MinInt32}[e.rng.Intn(6)]
		}
		return float64(e.rng.Intn(2*axis+4) - axis - 2)
	}
}

func (e *env) valueGen(dt rt.DType) func() float64 {
	lo, hi := backendtest.ValueRange(dt)
	return func() float64 {
		v := lo + e.rng.Float64()*(hi-lo)
		if !dt.IsFloat() {
			v = math.Floor(v)
		}
		return v
	}
}

func TestDiffGatherElements(t *testing.T) {
	var cases []diffCase
	shapes := [][4]int{{3, 5, 7, 4}, {1, 9, 1, 1}, {2, 1, 3, 5}, {4, 6, 2, 1}, {2, 7, 11, 3}}
	for _, dt := range indexedDTypes {
		for _, it := range []rt.DType{rt.I32, rt.I64} {
			for si, s := range shapes {
				for _, l := range backendtest.Layouts {
					O, A, N, I := s[0], s[1], s[2], s[3]
					cases = append(cases, diffCase{fmt.Sprintf("gather_elements_%s_%s_%d_%s", dt, it, si, l.Name), 0, func(e *env) rt.Op {
						lo, hi := backendtest.ValueRange(dt)
						x := e.in(dt, O*A*I, lo, hi)
						idx := backendtest.Strided(e.t, e.dev, it, []int{O, N, I}, l.Strides(O, N, I), e.indexGen(it, A))
						y := e.out(dt, O*N*I)
						// AllowOutOfRange: the zeros of out-of-range indices (the
						// error is TestIndexOutOfRange's).
						return &rt.GatherElements{X: ref(x, dt, []int{O, A, I}), Idx: idx, Y: y.ref(dt, O, N, I), Outer: O, Axis: A, N: N, Inner: I,
							AllowOutOfRange: true}
					}})
				}
			}
		}
	}
	forEachDevice(t, func(t *testing.T, dev *device) { runDiff(t, dev, cases) })
}

func TestDiffScatterElements(t *testing.T) {
	var cases []diffCase
	// N > Axis: duplicate targets in every column.
	shapes := [][4]int{{2, 5, 13, 3}, {1, 4, 9, 1}, {3, 1, 4, 2}, {1, 3, 40, 7}}
	for _, dt := range indexedDTypes {
		for fn := rt.ScatterSet; fn <= rt.ScatterMin; fn++ {
			for _, it := range []rt.DType{rt.I32, rt.I64} {
				for si, s := range shapes {
					for li, l := range backendtest.Layouts {
						O, A, N, I := s[0], s[1], s[2], s[3]
						// Upd gets a different layout from Idx.
						ul := backendtest.Layouts[(li+1+si)%len(backendtest.Layouts)]
						cases = append(cases, diffCase{fmt.Sprintf("scatter_elements_%s_%s_%s_%d_%s_%s", fn, dt, it, si, l.Name, ul.Name), 0, func(e *env) rt.Op {
							y := e.out(dt, O*A*I)
							gen := e.valueGen(dt)
							if dt.IsFloat() && fn == rt.ScatterMul {
								gen = func() float64 { return (e.rng.Float64()*2 - 1) * 2.5 }
							}
							init := make([]float64, O*A*I)
							for k := range init {
								init[k] = gen()
							}
							if dt.IsFloat() && len(init) > 2 {
								init[1] = math.NaN()
								init[2] = math.Copysign(0, -1)
							}
							tt, _ := rt.NewTensor(dt, len(init))
							for k, v := range init {
								tt.SetFloat64(k, v)
							}
							if err := e.dev.Write(y.buf, y.pad, tt.Data); err != nil {
								e.t.Fatal(err)
							}
							k := 0
							ugen := gen
							if dt.IsFloat() {
								// NaN, infinities and zeros among the updates.
								ugen = func() float64 {
									k++
									switch k % 11 {
									case 3:
										return math.NaN()
									case 5:
										return math.Inf(1)
									case 7:
										return math.Inf(-1)
									case 9:
										return 0
									}
									return gen()
								}
							}
							idx := backendtest.Strided(e.t, e.dev, it, []int{O, N, I}, l.Strides(O, N, I), e.indexGen(it, A))
							upd := backendtest.Strided(e.t, e.dev, dt, []int{O, N, I}, ul.Strides(O, N, I), ugen)
							return &rt.ScatterElements{Fn: fn, Y: y.ref(dt, O, A, I), Idx: idx, Upd: upd, Outer: O, Axis: A, N: N, Inner: I,
								AllowOutOfRange: true} // skips; TestIndexOutOfRange checks the error
						}})
					}
				}
			}
		}
	}
	forEachDevice(t, func(t *testing.T, dev *device) { runDiff(t, dev, cases) })
}

func TestDiffTopK(t *testing.T) {
	var cases []diffCase
	shapes := [][3]int{{3, 17, 4}, {1, 1, 1}, {2, 33, 1}, {1, 300, 2}, {5, 8, 3}}
	for _, dt := range indexedDTypes {
		for si, s := range shapes {
			O, N, I := s[0], s[1], s[2]
			for _, K := range []int{1, (N + 1) / 2, N} {
				for _, largest := range []bool{true, false} {
					cases = append(cases, diffCase{fmt.Sprintf("topk_%s_%d_k%d_largest%v", dt, si, K, largest), 0, func(e *env) rt.Op {
						n := O * N * I
						v := make([]float64, n)
						lo, hi := backendtest.ValueRange(dt)
						if dt != rt.U8 && dt != rt.Bool {
							lo, hi = -6, 6 // many ties
						}
						for k := range v {
							v[k] = math.Floor(lo + e.rng.Float64()*(hi-lo))
							if dt.IsFloat() {
								switch e.rng.Intn(9) {
								case 0:
									v[k] = math.NaN()
								case 1:
									v[k] = math.Copysign(0, -1)
								case 2:
									v[k] += 0.5
								case 3:
									v[k] = math.Inf(2*e.rng.Intn(2) - 1)
								}
							}
						}
						x := e.vals(dt, v)
						vals := e.out(dt, O*K*I)
						ind := e.out(rt.I64, O*K*I)
						return &rt.TopK{X: ref(x, dt, []int{n}), Values: vals.ref(dt, O, K, I), Indices: ind.ref(rt.I64, O, K, I), Outer: O, N: N, Inner: I, K: K, Largest: largest}
					}})
				}
			}
		}
	}
	forEachDevice(t, func(t *testing.T, dev *device) { runDiff(t, dev, cases) })
}

// TestIndexedRejects checks that bad indexed ops are errors, not
// launches.
func TestIndexedRejects(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev *device) {
		e := &env{t: t, dev: dev}
		x := e.vals(rt.F32, make([]float64, 12))
		f := e.vals(rt.F32, make([]float64, 4))
		i64 := e.vals(rt.I64, make([]float64, 4))
		for name, op := range map[string]rt.Op{
			"float index":  &rt.GatherElements{X: ref(x, rt.F32, []int{2, 3, 2}), Idx: ref(f, rt.F32, []int{2, 1, 2}), Y: ref(f, rt.F32, []int{2, 1, 2}), Outer: 2, Axis: 3, N: 1, Inner: 2},
			"data too big": &rt.GatherElements{X: ref(x, rt.F32, []int{2, 3, 2}), Idx: ref(i64, rt.I64, []int{2, 1, 2}), Y: ref(f, rt.F32, []int{2, 1, 2}), Outer: 2, Axis: 9, N: 1, Inner: 2},
			"upd dtype":    &rt.ScatterElements{Y: ref(x, rt.F32, []int{1, 12, 1}), Idx: ref(i64, rt.I64, []int{1, 4, 1}), Upd: ref(i64, rt.I64, []int{1, 4, 1}), Outer: 1, Axis: 12, N: 4, Inner: 1},
			"bad fn":       &rt.ScatterElements{Fn: rt.ScatterMin + 1, Y: ref(x, rt.F32, []int{1, 12, 1}), Idx: ref(i64, rt.I64, []int{1, 4, 1}), Upd: ref(f, rt.F32, []int{1, 4, 1}), Outer: 1, Axis: 12, N: 4, Inner: 1},
			"upd span":     &rt.ScatterElements{Y: ref(x, rt.F32, []int{1, 12, 1}), Idx: ref(i64, rt.I64, []int{1, 4, 1}), Upd: ref(f, rt.F32, []int{1, 4, 1}, 0, 2, 0), Outer: 1, Axis: 12, N: 4, Inner: 1},
			"topk k > n":   &rt.TopK{X: ref(f, rt.F32, []int{1, 4, 1}), Values: ref(f, rt.F32, []int{1, 4, 1}), Indices: ref(i64, rt.I64, []int{1, 4, 1}), Outer: 1, N: 4, Inner: 1, K: 5},
			"topk indices": &rt.TopK{X: ref(f, rt.F32, []int{1, 4, 1}), Values: ref(f, rt.F32, []int{1, 4, 1}), Indices: ref(f, rt.F32, []int{1, 4, 1}), Outer: 1, N: 4, Inner: 1, K: 4},
		} {
			s, err := dev.NewStream(rt.StreamOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Launch(op); err == nil {
				t.Errorf("%s: Launch accepted a bad op", name)
			}
			s.Close()
		}
	})
}

// TestIndexOutOfRange checks that out-of-range indices of Gather,
// GatherElements and ScatterElements fail the run through the stream's
// status words on every OpenCL device (internal/indexconf).
func TestIndexOutOfRange(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { indexconf.Run(t, d) })
}
