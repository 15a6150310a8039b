// Package attntest checks a backend's rt.Attention against a float64
// reference: the fused attention op on strided and broadcast operands at
// odd sizes, with and without a mask, causal, and with a query row that
// attends to nothing. Each backend's test calls [Run] with its device.
package attntest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// Case is one Attention op of the table: sizes, layouts and options.
type Case struct {
	Name                string
	B, H, Lq, Lk, D, Dv int
	Mask                string // "", "full", "keys" (per batch, broadcast over heads and queries), "dead" (full, row 0 all -inf)
	Causal              bool
	QHeadsLast, KStored bool // Q as [B, Lq, H*D] rows; K stored as K^T [B, H, D, Lk]
	VShared             bool // V shared by all batches (zero batch stride)
	QSpread             bool // Q's elements two apart (no unit stride)
}

// Cases is the table.
var Cases = []Case{
	{Name: "plain", B: 2, H: 3, Lq: 37, Lk: 37, D: 24, Dv: 24},
	{Name: "mask_full", B: 2, H: 3, Lq: 37, Lk: 37, D: 24, Dv: 24, Mask: "full"},
	{Name: "mask_keys", B: 2, H: 2, Lq: 29, Lk: 37, D: 64, Dv: 40, Mask: "keys"},
	{Name: "causal", B: 1, H: 3, Lq: 29, Lk: 37, D: 24, Dv: 24, Causal: true},
	{Name: "causal_mask", B: 2, H: 1, Lq: 37, Lk: 37, D: 64, Dv: 64, Causal: true, Mask: "full"},
	{Name: "layouts", B: 2, H: 3, Lq: 37, Lk: 41, D: 64, Dv: 24, QHeadsLast: true, KStored: true, VShared: true},
	{Name: "dead_row", B: 1, H: 2, Lq: 5, Lk: 37, D: 24, Dv: 24, Mask: "dead"},
	{Name: "decode", B: 3, H: 2, Lq: 1, Lk: 200, D: 64, Dv: 64, Mask: "keys"},
	{Name: "blocks", B: 1, H: 2, Lq: 130, Lk: 131, D: 64, Dv: 64, Causal: true},
	{Name: "tiny", B: 1, H: 1, Lq: 3, Lk: 2, D: 1, Dv: 3},
	{Name: "spread", B: 2, H: 2, Lq: 19, Lk: 23, D: 24, Dv: 8, QSpread: true, Mask: "full"},
	{Name: "wide_heads", B: 1, H: 2, Lq: 33, Lk: 45, D: 96, Dv: 128, Mask: "keys"},
	{Name: "many_rows", B: 4, H: 12, Lq: 50, Lk: 70, D: 32, Dv: 32, Causal: true},        // 8 rows per Vulkan workgroup
	{Name: "causal_fewer_keys", B: 1, H: 2, Lq: 45, Lk: 23, D: 20, Dv: 28, Causal: true}, // rows 0-21 see no key: Y = 0
}

// Tolerance returns the accepted error for an expected value in dt:
// |got-want| <= tol*(1+|want|), with tol 2e-5 for f32 (accumulation in
// f32, exp of a few ulps), 1e-12 for f64 and 2e-3 for f16 (inputs and
// output in f16, accumulation in f32).
func Tolerance(dt rt.DType) float64 {
	switch dt {
	case rt.F64:
		return 1e-12
	case rt.F16:
		return 2e-3
	}
	return 2e-5
}

// Run runs every case of the table in f32, f16 and f64 on d (skipping the
// dtypes d does not support for Attention) and compares Y with the
// float64 reference.
func Run(t *testing.T, d rt.Device) {
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64} {
		for _, c := range Cases {
			t.Run(dt.String()+"/"+c.Name, func(t *testing.T) { runCase(t, d, dt, c) })
		}
	}
}

// view builds a strided [B, H, L, W] operand of random non-zero values
// and returns it with its values by multi-index.
func view(t *testing.T, d rt.Device, dt rt.DType, rng *rand.Rand, shape, st []int, lo, hi float64) (rt.Ref, func(b, h, i, w int) float64) {
	gen := func() float64 {
		v := lo + (hi-lo)*rng.Float64()
		if rng.IntN(2) == 0 {
			v = -v
		}
		return v
	}
	r := backendtest.Strided(t, d, dt, shape, st, gen)
	all := backendtest.Read(t, d, r.Buf, dt)
	base := int(r.Off) / dt.Size()
	stc := r.StridesOrContiguous()
	return r, func(b, h, i, w int) float64 { return all[base+backendtest.Offset([]int{b, h, i, w}, stc)] }
}

func runCase(t *testing.T, d rt.Device, dt rt.DType, c Case) {
	rng := rand.New(rand.NewPCG(uint64(c.Lq*1000+c.Lk), uint64(c.D)))
	shape := func(l, w int) []int { return []int{c.B, c.H, l, w} }
	var qst, kst, vst []int
	if c.QHeadsLast {
		qst = []int{c.Lq * c.H * c.D, c.D, c.H * c.D, 1}
	}
	if c.QSpread {
		qst = []int{2 * c.H * c.Lq * c.D, 2 * c.Lq * c.D, 2 * c.D, 2}
	}
	if c.KStored {
		kst = []int{c.H * c.D * c.Lk, c.D * c.Lk, 1, c.Lk}
	}
	if c.VShared {
		vst = []int{0, c.Lk * c.Dv, c.Dv, 1}
	}
	q, qv := view(t, d, dt, rng, shape(c.Lq, c.D), qst, 0.1, 1.5)
	k, kv := view(t, d, dt, rng, shape(c.Lk, c.D), kst, 0.1, 1.5)
	v, vv := view(t, d, dt, rng, shape(c.Lk, c.Dv), vst, 0.1, 1)
	op := &rt.Attention{Q: q, K: k, V: v, B: c.B, H: c.H, Lq: c.Lq, Lk: c.Lk, D: c.D, Dv: c.Dv,
		Scale: 1 / math.Sqrt(float64(c.D)), Causal: c.Causal}
	var mv func(b, h, i, j int) float64
	switch c.Mask {
	case "full", "dead":
		op.Mask, mv = view(t, d, dt, rng, shape(c.Lq, c.Lk), nil, 0.05, 3)
		if c.Mask == "dead" {
			ninf := backendtest.Values(dt, []float64{math.Inf(-1)}).Data
			st := op.Mask.StridesOrContiguous()
			es := int64(dt.Size())
			for h := 0; h < c.H; h++ {
				for j := 0; j < c.Lk; j++ {
					off := op.Mask.Off + int64(backendtest.Offset([]int{0, h, 0, j}, st))*es
					if err := d.Write(op.Mask.Buf, off, ninf); err != nil {
						t.Fatal(err)
					}
				}
			}
			full := mv
			mv = func(b, h, i, j int) float64 {
				if b == 0 && i == 0 {
					return math.Inf(-1)
				}
				return full(b, h, i, j)
			}
		}
	case "keys":
		op.Mask, mv = view(t, d, dt, rng, shape(c.Lq, c.Lk), []int{c.Lk, 0, 0, 1}, 0.05, 3)
	}
	yb, err := d.Alloc(int64(c.B * c.H * c.Lq * c.Dv * dt.Size()))
	if err != nil {
		t.Fatal(err)
	}
	op.Y = rt.Ref{Buf: yb, DType: dt, Shape: shape(c.Lq, c.Dv)}
	if err := d.Supports(op); err != nil {
		t.Skipf("unsupported: %v", err)
	}
	backendtest.Run(t, d, op)
	got := backendtest.Read(t, d, yb, dt)
	tol := Tolerance(dt)
	s := make([]float64, c.Lk)
	for b := range c.B {
		for h := range c.H {
			for i := range c.Lq {
				mx := math.Inf(-1)
				for j := range s {
					s[j] = math.Inf(-1)
					if c.Causal && j > i+c.Lk-c.Lq {
						continue
					}
					dot := 0.0
					for e := range c.D {
						dot += qv(b, h, i, e) * kv(b, h, j, e)
					}
					s[j] = dot * op.Scale
					if mv != nil {
						s[j] += mv(b, h, i, j)
					}
					mx = max(mx, s[j])
				}
				sum := 0.0
				for j := range s {
					if !math.IsInf(mx, -1) {
						s[j] = math.Exp(s[j] - mx)
						sum += s[j]
					}
				}
				for e := range c.Dv {
					want := 0.0
					if !math.IsInf(mx, -1) {
						for j := range s {
							want += s[j] * vv(b, h, j, e)
						}
						want /= sum
					}
					g := got[((b*c.H+h)*c.Lq+i)*c.Dv+e]
					if !(math.Abs(g-want) <= tol*(1+math.Abs(want))) {
						t.Fatalf("Y[%d,%d,%d,%d] = %v, want %v (tolerance %g)", b, h, i, e, g, want, tol)
					}
				}
			}
		}
	}
}
