//go:build cgo

package vulkan

import (
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// sepCase is a depthwise-separable pair: a depthwise KxK convolution of
// [N, C, H, W] with stride s and padding p, then a 1x1 to K channels.
type sepCase struct {
	N, C, H, W, K, KH, KW, s, p int
	dwBias, pwBias, res         bool
	dwAct, pwAct                rt.Activation
}

// TestSepConv checks rt.SepConv on every convgemm tile (the first case on
// a GPU; on lavapipe two tiles in f32; the others on the default tile), with and without split-K, in f32 and f16, against a float64 reference of the two
// convolutions; a dilated or 5x5 depthwise convolution, VRUN_VK_SEPCONV=0
// and an activation parameter not exact in f16 are refused.
func TestSepConv(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(61))
	relu6 := rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}
	cases := []sepCase{
		{1, 13, 9, 7, 20, 3, 3, 1, 1, true, true, true, relu6, rt.Activation{}},                                    // MobileNetV2's dw + projection with the shortcut
		{2, 17, 10, 11, 9, 3, 3, 2, 1, false, true, false, relu6, rt.Activation{Fn: rt.Relu}},                      // stride 2, no depthwise bias
		{1, 6, 8, 9, 33, 3, 3, 2, 0, true, false, true, rt.Activation{Fn: rt.Relu}, rt.Activation{Fn: rt.Sigmoid}}, // stride 2, no padding
		{1, 40, 5, 5, 24, 3, 3, 1, 0, true, true, false, rt.Activation{}, relu6},                                   // no padding
	}
	defer func() { forceGemmTile, forceSplitK = "", 0 }()
	for _, dt := range []rt.DType{rt.F32, rt.F16} {
		if dt == rt.F16 && !d.Info().FP16 {
			continue
		}
		for i, c := range cases {
			tiles := []gemmTile{{}}
			switch {
			case i == 0 && !isCPU(d):
				tiles = append(tiles, convTiles...) // every tile on the first case
			case i == 0 && dt == rt.F32:
				// lavapipe compiles each variant for seconds: two tiles
				tiles = append(tiles, convTiles[3], convTiles[5]) // "s", "n"
			}
			for _, tile := range tiles {
				for _, split := range []int{0, 3} {
					forceGemmTile, forceSplitK = tile.name, split
					checkSepConv(t, d, r, dt, c)
				}
			}
		}
	}
	forceGemmTile, forceSplitK = "", 0
	c := cases[0]
	op, _ := newSepConv(t, d, r, rt.F32, c)
	op.DW.DilH, op.DW.DilW, op.DW.PadT, op.DW.PadL = 2, 2, 2, 2
	var ue *rt.UnsupportedError
	if err := d.Supports(op); !errors.As(err, &ue) {
		t.Errorf("dilated depthwise: %v, want an *rt.UnsupportedError", err)
	}
	c5 := c
	c5.KH, c5.KW, c5.p = 5, 5, 2
	op, _ = newSepConv(t, d, r, rt.F32, c5)
	if err := d.Supports(op); !errors.As(err, &ue) {
		t.Errorf("5x5 depthwise: %v, want an *rt.UnsupportedError", err)
	}
	op, _ = newSepConv(t, d, r, rt.F32, c)
	t.Setenv(sepConvEnv, "0")
	if err := d.Supports(op); !errors.As(err, &ue) {
		t.Errorf("%s=0: %v, want an *rt.UnsupportedError", sepConvEnv, err)
	}
	t.Setenv(sepConvEnv, "")
	op.DW.Act = rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6.0001}
	if err := d.Supports(op); !errors.As(err, &ue) {
		t.Errorf("depthwise clip at 6.0001 (not exact in f16): %v, want an *rt.UnsupportedError", err)
	}
}

// sepData is the inputs of a SepConv test and its output buffer.
type sepData struct {
	x, dww, dwb, pww, pwb, res []float64
	y                          *tbuf
	oh, ow                     int
}

func newSepConv(t testing.TB, d rt.Device, r *rand.Rand, dt rt.DType, c sepCase) (*rt.SepConv, *sepData) {
	t.Helper()
	oh, ow := (c.H+2*c.p-c.KH)/c.s+1, (c.W+2*c.p-c.KW)/c.s+1
	sd := &sepData{oh: oh, ow: ow}
	buf := func(v []float64) rt.Ref { return newBuf(t, d, dt, len(v), v).ref([]int{len(v)}, nil) }
	sd.x = randVals(r, dt, c.N*c.C*c.H*c.W, -1, 1)
	sd.dww = randVals(r, dt, c.C*c.KH*c.KW, -1, 1)
	sd.pww = randVals(r, dt, c.K*c.C, -1, 1)
	ny := c.N * c.K * oh * ow
	sd.y = newBuf(t, d, dt, ny, nil)
	op := &rt.SepConv{
		DW: rt.Conv{X: buf(sd.x), W: buf(sd.dww), N: c.N, C: c.C, H: c.H, Width: c.W, K: c.C, OH: oh, OW: ow, KH: c.KH, KW: c.KW,
			StrideH: c.s, StrideW: c.s, PadT: c.p, PadL: c.p, DilH: 1, DilW: 1, Groups: c.C, Act: c.dwAct},
		PW: rt.Conv{W: buf(sd.pww), Y: sd.y.ref([]int{ny}, nil), N: c.N, C: c.C, H: oh, Width: ow, K: c.K, OH: oh, OW: ow,
			KH: 1, KW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1, Act: c.pwAct},
	}
	if c.dwBias {
		sd.dwb = randVals(r, dt, c.C, -1, 1)
		op.DW.Bias = buf(sd.dwb)
	}
	if c.pwBias {
		sd.pwb = randVals(r, dt, c.K, -1, 1)
		op.PW.Bias = buf(sd.pwb)
	}
	if c.res {
		sd.res = randVals(r, dt, ny, -2, 2)
		op.PW.Res = buf(sd.res)
	}
	return op, sd
}

func checkSepConv(t *testing.T, d rt.Device, r *rand.Rand, dt rt.DType, c sepCase) {
	t.Helper()
	op, sd := newSepConv(t, d, r, dt, c)
	if err := d.Supports(op); err != nil {
		t.Fatalf("SepConv %+v (tile %q, split %d): %v", c, forceGemmTile, forceSplitK, err)
	}
	backendtest.Run(t, d, op)
	got := sd.y.read(t, d)
	// float64 reference: the depthwise output tm (and the sums of
	// absolute products behind it), then the pointwise one.
	tm, tab := convRef(sd.x, sd.dww, sd.dwb, c.N, c.C, c.H, c.W, c.C, sd.oh, sd.ow, c.KH, c.KW, c.s, c.s, c.p, c.p, 1, 1, c.C)
	for i := range tm {
		tm[i] = c.dwAct.Fn.Apply(tm[i], c.dwAct.Alpha, c.dwAct.Beta)
	}
	hw := sd.oh * sd.ow
	for n := 0; n < c.N; n++ {
		for k := 0; k < c.K; k++ {
			for p := 0; p < hw; p++ {
				v, ab := 0.0, 1.0
				if sd.pwb != nil {
					v, ab = sd.pwb[k], 1+math.Abs(sd.pwb[k])
				}
				for ch := 0; ch < c.C; ch++ {
					ti := (n*c.C+ch)*hw + p
					v += sd.pww[k*c.C+ch] * tm[ti]
					ab += math.Abs(sd.pww[k*c.C+ch]) * (math.Abs(tm[ti]) + tab[ti])
				}
				i := (n*c.K+k)*hw + p
				if sd.res != nil {
					v += sd.res[i]
					ab += math.Abs(sd.res[i])
				}
				v = c.pwAct.Fn.Apply(v, c.pwAct.Alpha, c.pwAct.Beta)
				if math.Abs(got[i]-v) > convTol(dt)*ab {
					t.Fatalf("%s %+v tile %q split %d: Y[%d] = %v, want %v", dt, c, forceGemmTile, forceSplitK, i, got[i], v)
				}
			}
		}
	}
}
