package indexconf

import (
	"errors"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// ref uploads v (of dtype dt) and returns a contiguous ref of shape.
func ref(t *testing.T, d rt.Device, dt rt.DType, v []float64, shape ...int) rt.Ref {
	t.Helper()
	return rt.Ref{Buf: backendtest.Upload(t, d, backendtest.Values(dt, v).Data), DType: dt, Shape: shape}
}

// read returns the elements of r (contiguous) as float64.
func read(t *testing.T, d rt.Device, r rt.Ref) []float64 {
	t.Helper()
	out, err := rt.NewTensor(r.DType, r.Shape...)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Read(out.Data, r.Buf, r.Off); err != nil {
		t.Fatal(err)
	}
	return out.Float64s()
}

// seq returns 1, 2, ..., n.
func seq(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i + 1)
	}
	return v
}

// wantIndexError checks that err is the IndexError of op at launch, with
// one of the indices in idx and the axis size.
func wantIndexError(t *testing.T, err error, op string, launch int, axis int, idx ...int64) {
	t.Helper()
	if !errors.Is(err, rt.ErrIndexOutOfRange) {
		t.Fatalf("Wait returned %v, want an error wrapping rt.ErrIndexOutOfRange", err)
	}
	var ie *rt.IndexError
	if !errors.As(err, &ie) {
		t.Fatalf("Wait returned %T %v, want an *rt.IndexError", err, err)
	}
	if !strings.HasPrefix(ie.Op, op) || ie.Launch != launch {
		t.Errorf("IndexError names %s at launch %d, want %s at launch %d (%v)", ie.Op, ie.Launch, op, launch, err)
	}
	if !ie.Known {
		t.Errorf("IndexError does not know the index: %v", err)
		return
	}
	ok := false
	for _, k := range idx {
		ok = ok || ie.Index == k
	}
	if !ok || ie.Axis != axis {
		t.Errorf("IndexError reports index %d of an axis of %d, want one of %v of an axis of %d", ie.Index, ie.Axis, idx, axis)
	}
}

func check(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: element %d = %v, want %v (got %v)", what, i, got[i], want[i], got)
		}
	}
}

// gatherWant is Gather's result over X [outer, axis, inner] = seq, zero
// for an index out of range.
func gatherWant(outer, axis, inner int, idx []int64) []float64 {
	var out []float64
	for o := 0; o < outer; o++ {
		for _, k := range idx {
			if k < 0 {
				k += int64(axis)
			}
			for i := 0; i < inner; i++ {
				v := 0.0
				if k >= 0 && k < int64(axis) {
					v = float64((o*axis+int(k))*inner + i + 1)
				}
				out = append(out, v)
			}
		}
	}
	return out
}

func f64s(v []int64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// Run runs the checks on d.
func Run(t *testing.T, d rt.Device) {
	const outer, axis, inner = 2, 5, 3
	x := func() rt.Ref { return ref(t, d, rt.F32, seq(outer*axis*inner), outer, axis, inner) }

	// Gather with i64 and i32 indices: 5 and -6 are out of range, as is
	// 2^33+1 (which must not wrap to 1).
	for _, c := range []struct {
		name string
		dt   rt.DType
		idx  []int64
		bad  []int64
	}{
		{"gather_i64", rt.I64, []int64{1, -1, 5, -6, 0}, []int64{5, -6}},
		{"gather_i32", rt.I32, []int64{4, 7, -5}, []int64{7}},
		{"gather_i64_beyond_32_bits", rt.I64, []int64{2, 1<<33 + 1}, []int64{1<<33 + 1}},
		{"gather_i64_negative_beyond_32_bits", rt.I64, []int64{-(1 << 40)}, []int64{-(1 << 40)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, allow := range []bool{false, true} {
				idx := ref(t, d, c.dt, f64s(c.idx), len(c.idx))
				y := ref(t, d, rt.F32, make([]float64, outer*len(c.idx)*inner), outer, len(c.idx), inner)
				fill := &rt.Fill{Y: ref(t, d, rt.F32, []float64{0}, 1), Value: 1}
				err := backendtest.RunErr(t, d, fill, &rt.Gather{X: x(), Idx: idx, Y: y, Outer: outer, Axis: axis, Inner: inner, AllowOutOfRange: allow})
				if allow {
					if err != nil {
						t.Fatalf("AllowOutOfRange: Wait returned %v, want nil", err)
					}
				} else {
					wantIndexError(t, err, "Gather", 1, axis, c.bad...)
				}
				check(t, "Y", read(t, d, y), gatherWant(outer, axis, inner, c.idx))
			}
		})
	}

	// GatherElements with a strided i32 index view [outer, 2, inner]
	// shared over outer (stride 0): 5 is out of range.
	t.Run("gather_elements_strided", func(t *testing.T) {
		iv := []int64{0, 4, -1, 2, 5, -5}
		for _, allow := range []bool{false, true} {
			idx := ref(t, d, rt.I32, f64s(iv), 2, inner)
			idx.Shape, idx.Strides = []int{outer, 2, inner}, []int{0, inner, 1}
			y := ref(t, d, rt.F32, make([]float64, outer*2*inner), outer, 2, inner)
			err := backendtest.RunErr(t, d, &rt.GatherElements{X: x(), Idx: idx, Y: y, Outer: outer, Axis: axis, N: 2, Inner: inner, AllowOutOfRange: allow})
			if allow {
				if err != nil {
					t.Fatalf("AllowOutOfRange: Wait returned %v, want nil", err)
				}
			} else {
				wantIndexError(t, err, "GatherElements", 0, axis, 5)
			}
			var want []float64
			for o := 0; o < outer; o++ {
				for j := 0; j < 2; j++ {
					for i := 0; i < inner; i++ {
						k := iv[j*inner+i]
						if k < 0 {
							k += axis
						}
						v := 0.0
						if k >= 0 && k < axis {
							v = float64((o*axis+int(k))*inner + i + 1)
						}
						want = append(want, v)
					}
				}
			}
			check(t, "Y", read(t, d, y), want)
		}
	})

	// ScatterElements (add) over Y [1, 3, 2]: -4 and 3 are skipped.
	t.Run("scatter_elements_add", func(t *testing.T) {
		iv := []int64{0, -4, 3, 2, -1, 1}
		for _, allow := range []bool{false, true} {
			y := ref(t, d, rt.F32, seq(6), 1, 3, 2)
			idx := ref(t, d, rt.I64, f64s(iv), 1, 3, 2)
			upd := ref(t, d, rt.F32, []float64{10, 20, 30, 40, 50, 60}, 1, 3, 2)
			err := backendtest.RunErr(t, d, &rt.ScatterElements{Fn: rt.ScatterAdd, Y: y, Idx: idx, Upd: upd, Outer: 1, Axis: 3, N: 3, Inner: 2, AllowOutOfRange: allow})
			if allow {
				if err != nil {
					t.Fatalf("AllowOutOfRange: Wait returned %v, want nil", err)
				}
			} else {
				wantIndexError(t, err, "ScatterElements", 0, 3, -4, 3)
			}
			// Column 0 takes j=0 (+10 at row 0) and j=2 (+50 at row 2);
			// column 1 takes j=1 (+40 at row 2) and j=2 (+60 at row 1).
			check(t, "Y", read(t, d, y), []float64{11, 2, 3, 64, 55, 46})
		}
	})

	// One recording run again and again: the status is per run, so a run
	// with indices in range after a failing one succeeds.
	t.Run("status_per_run", func(t *testing.T) {
		idx := ref(t, d, rt.I64, []float64{1, 2}, 2)
		y := ref(t, d, rt.F32, make([]float64, outer*2*inner), outer, 2, inner)
		s, err := d.NewStream(rt.StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// Two checked ops; only the second one (launch 2) goes out of
		// range, in the second run.
		idx2 := ref(t, d, rt.I64, []float64{0}, 1)
		y2 := ref(t, d, rt.F32, make([]float64, outer*inner), outer, 1, inner)
		for _, op := range []rt.Op{
			&rt.Gather{X: x(), Idx: idx, Y: y, Outer: outer, Axis: axis, Inner: inner},
			&rt.Fill{Y: ref(t, d, rt.F32, []float64{0}, 1), Value: 2},
			&rt.Gather{X: x(), Idx: idx2, Y: y2, Outer: outer, Axis: axis, Inner: inner},
		} {
			if err := s.Launch(op); err != nil {
				t.Fatal(err)
			}
		}
		for i, v := range []int64{3, 9, -5, -6, 4} {
			if err := d.Write(idx2.Buf, 0, backendtest.Values(rt.I64, []float64{float64(v)}).Data); err != nil {
				t.Fatal(err)
			}
			if err := s.Submit(); err != nil {
				t.Fatal(err)
			}
			err := s.Wait()
			if v >= -axis && v < axis {
				if err != nil {
					t.Fatalf("run %d (index %d): Wait returned %v, want nil", i, v, err)
				}
			} else {
				wantIndexError(t, err, "Gather", 2, axis, v)
			}
			check(t, "Y2", read(t, d, y2), gatherWant(outer, axis, inner, []int64{v}))
		}
		check(t, "Y", read(t, d, y), gatherWant(outer, axis, inner, []int64{1, 2}))
	})
}
