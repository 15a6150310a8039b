package onnxcorpus

import (
	"math"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

func TestCompare(t *testing.T) {
	f32 := func(v ...float32) *rt.Tensor { return rt.FromFloat32(v, len(v)) }
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		name      string
		got, want *rt.Tensor
		bad       string // substring of the message; "" = match
	}{
		{"equal", f32(1, 2, 3), f32(1, 2, 3), ""},
		{"within rtol", f32(1000.5), f32(1000), ""},
		{"within atol", f32(5e-6), f32(0), ""},
		{"outside", f32(1.01), f32(1), "1 of 1 elements differ"},
		{"nan matches nan", f32(nan), f32(nan), ""},
		{"nan vs number", f32(nan), f32(1), "differ"},
		{"number vs nan", f32(1), f32(nan), "differ"},
		{"inf", f32(inf), f32(inf), ""},
		{"inf sign", f32(-inf), f32(inf), "differ"},
		{"shape", rt.FromFloat32([]float32{1, 2}, 2, 1), f32(1, 2), "shape"},
		{"dtype", rt.FromFloat64(rt.F64, []float64{1}, 1), f32(1), "dtype"},
		{"int exact", rt.FromFloat64(rt.I64, []float64{1, 2}, 2), rt.FromFloat64(rt.I64, []float64{1, 2}, 2), ""},
		{"int off by one", rt.FromFloat64(rt.I32, []float64{1, 3}, 2), rt.FromFloat64(rt.I32, []float64{1, 2}, 2), "first at 1"},
		{"bool", rt.FromFloat64(rt.Bool, []float64{1, 0}, 2), rt.FromFloat64(rt.Bool, []float64{1, 1}, 2), "differ"},
		{"f16 few ulps", rt.FromFloat64(rt.F16, []float64{0.468994140625}, 1), rt.FromFloat64(rt.F16, []float64{0.469482421875}, 1), ""},
	} {
		msg := Compare(tc.got, tc.want)
		if tc.bad == "" && msg != "" {
			t.Errorf("%s: got mismatch %q", tc.name, msg)
		}
		if tc.bad != "" && !strings.Contains(msg, tc.bad) {
			t.Errorf("%s: message %q, want it to contain %q", tc.name, msg, tc.bad)
		}
	}
}

func TestNormalise(t *testing.T) {
	for in, want := range map[string]string{
		`input "x" has shape [1 2 3]`: `input X has shape [..]`,
		`axis 3 out of range`:         `axis N out of range`,
	} {
		if got := normalise(in); got != want {
			t.Errorf("normalise(%q) = %q, want %q", in, got, want)
		}
	}
}
