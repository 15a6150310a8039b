package mmres

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// Case is one MatMul with a residual.
type Case struct {
	Name           string
	Batch, M, N, K int
	TransA, TransB bool
	Bias           bool // a per-column bias
	Act            rt.UnaryFn
	InPlace        bool // Res is Y itself
	Gap            int  // StrideY = M*N + Gap (batches of Y and Res apart)
}

// Cases is the table: a transformer block's out-projection shape at odd
// sizes, and the variations.
var Cases = []Case{
	{Name: "bias_in_place", Batch: 1, M: 37, N: 45, K: 53, Bias: true, InPlace: true},
	{Name: "bias_apart", Batch: 1, M: 37, N: 45, K: 53, Bias: true},
	{Name: "no_bias_in_place", Batch: 1, M: 29, N: 33, K: 70, InPlace: true},
	{Name: "no_bias_apart", Batch: 1, M: 29, N: 33, K: 70},
	{Name: "relu", Batch: 1, M: 41, N: 36, K: 24, Bias: true, Act: rt.Relu, InPlace: true},
	{Name: "batched_gap", Batch: 3, M: 13, N: 17, K: 19, Bias: true, Gap: 5, TransB: true},
	{Name: "trans_a", Batch: 2, M: 21, N: 40, K: 35, TransA: true, InPlace: true},
	{Name: "large", Batch: 1, M: 130, N: 260, K: 300, Bias: true, InPlace: true},
}

// Tolerance is the accepted error in dt, relative to sum |a||b| + |bias|
// + |res| + 1 of the element: 2e-6 in f32 (accumulation in f32), 1e-12
// in f64, 2e-3 in f16 (inputs and output in f16).
func Tolerance(dt rt.DType) float64 {
	switch dt {
	case rt.F64:
		return 1e-12
	case rt.F16:
		return 2e-3
	}
	return 2e-6
}

// Run runs the table in f32, f16 and f64 on d, skipping the dtypes that d
// does not support for the MatMul without Res, and fails where d refuses
// a case it runs without Res.
func Run(t *testing.T, d rt.Device) {
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64} {
		for _, c := range Cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.Name), func(t *testing.T) { runCase(t, d, dt, c) })
		}
	}
}

// Refused checks that d refuses a MatMul with Res with an
// *rt.UnsupportedError (a backend that does not add residuals).
func Refused(t *testing.T, d rt.Device) {
	op, _ := build(t, d, rt.F32, Cases[0], rand.New(rand.NewPCG(1, 2)))
	var ue *rt.UnsupportedError
	if err := d.Supports(op); !errors.As(err, &ue) {
		t.Errorf("MatMul with Res: Supports = %v, want an *rt.UnsupportedError", err)
	}
}

type data struct {
	a, b, bias, res []float64
	y               rt.Buffer
	ny              int
}

func upload(t *testing.T, d rt.Device, dt rt.DType, v []float64) rt.Buffer {
	t.Helper()
	return backendtest.Upload(t, d, backendtest.Values(dt, v).Data)
}

func build(t *testing.T, d rt.Device, dt rt.DType, c Case, rng *rand.Rand) (*rt.MatMul, *data) {
	t.Helper()
	rnd := func(n int, scale float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = scale * (0.1 + 0.9*rng.Float64()) * float64(1-2*rng.IntN(2))
		}
		return v
	}
	sy := c.M*c.N + c.Gap
	ny := (c.Batch-1)*sy + c.M*c.N
	dd := &data{a: rnd(c.Batch*c.M*c.K, 1), b: rnd(c.Batch*c.K*c.N, 1), res: rnd(ny, 2), ny: ny}
	op := &rt.MatMul{Batch: c.Batch, M: c.M, N: c.N, K: c.K, TransA: c.TransA, TransB: c.TransB,
		StrideA: c.M * c.K, StrideB: c.K * c.N, StrideY: sy, Alpha: 1, Act: rt.Activation{Fn: c.Act}}
	op.A = rt.Ref{Buf: upload(t, d, dt, dd.a), DType: dt, Shape: []int{len(dd.a)}}
	op.B = rt.Ref{Buf: upload(t, d, dt, dd.b), DType: dt, Shape: []int{len(dd.b)}}
	resBuf := upload(t, d, dt, dd.res)
	op.Res = rt.Ref{Buf: resBuf, DType: dt, Shape: []int{ny}}
	if c.InPlace {
		dd.y = resBuf
	} else {
		dd.y = upload(t, d, dt, rnd(ny, 1))
	}
	op.Y = rt.Ref{Buf: dd.y, DType: dt, Shape: []int{ny}}
	if c.Bias {
		dd.bias = rnd(c.N, 1)
		op.Bias = rt.Ref{Buf: upload(t, d, dt, dd.bias), DType: dt, Shape: []int{c.M, c.N}, Strides: []int{0, 1}}
		op.Beta = 1
	}
	return op, dd
}

func runCase(t *testing.T, d rt.Device, dt rt.DType, c Case) {
	rng := rand.New(rand.NewPCG(uint64(c.M), uint64(dt)))
	op, dd := build(t, d, dt, c, rng)
	plain := *op
	plain.Res = rt.Ref{}
	if err := d.Supports(&plain); err != nil {
		t.Skipf("%s MatMul: %v", dt, err)
	}
	if err := d.Supports(op); err != nil {
		t.Fatalf("MatMul with Res: %v", err)
	}
	// The reference reads the operands as the device holds them (f16).
	a := backendtest.Read(t, d, op.A.Buf, dt)
	b := backendtest.Read(t, d, op.B.Buf, dt)
	res := backendtest.Read(t, d, op.Res.Buf, dt)
	var bias []float64
	if c.Bias {
		bias = backendtest.Read(t, d, op.Bias.Buf, dt)
	}
	before := backendtest.Read(t, d, dd.y, dt)
	backendtest.Run(t, d, op)
	got := backendtest.Read(t, d, dd.y, dt)
	sy := op.StrideY
	for bt := range c.Batch {
		for i := range c.M {
			for j := range c.N {
				s, mag := 0.0, 0.0
				for k := range c.K {
					ai := bt*c.M*c.K + i*c.K + k
					if c.TransA {
						ai = bt*c.M*c.K + k*c.M + i
					}
					bi := bt*c.K*c.N + k*c.N + j
					if c.TransB {
						bi = bt*c.K*c.N + j*c.K + k
					}
					s += a[ai] * b[bi]
					mag += math.Abs(a[ai] * b[bi])
				}
				yi := bt*sy + i*c.N + j
				if c.Bias {
					s += bias[j]
					mag += math.Abs(bias[j])
				}
				s += res[yi]
				mag += math.Abs(res[yi])
				want := c.Act.Apply(s, 0, 0)
				if math.Abs(got[yi]-want) > Tolerance(dt)*(mag+1) {
					t.Fatalf("Y[%d, %d, %d] = %v, want %v", bt, i, j, got[yi], want)
				}
			}
		}
		// The gap between batches is left alone.
		if bt+1 < c.Batch {
			for yi := bt*sy + c.M*c.N; yi < (bt+1)*sy; yi++ {
				if got[yi] != before[yi] {
					t.Fatalf("Y[%d] in the gap after batch %d: %v, was %v", yi, bt, got[yi], before[yi])
				}
			}
		}
	}
}
