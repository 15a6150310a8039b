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

// TestConvRes checks rt.Conv's residual (Y = Act(Bias + conv + Res)) on
// convgemm.comp, with every tile and with split-K forced (the residual is
// then added by splitk.comp), against a float64 reference; a Conv with a
// residual on the depthwise or direct kernel is refused.
func TestConvRes(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(57))
	cases := []convCase{
		{1, 13, 7, 7, 33, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, rt.Relu},  // MobileNetV2's 1x1 projection
		{2, 9, 9, 11, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, rt.Relu}, // ResNet's second 3x3, no bias
		{1, 12, 6, 5, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, true, 0},        // groups 2, no activation
	}
	defer func() { forceConvPath, forceGemmTile, forceSplitK = "", "", 0 }()
	for _, dt := range floatDTypes {
		for _, c := range cases {
			for _, tile := range append([]gemmTile{{}}, convTiles...) {
				for _, split := range []int{0, 3} {
					forceGemmTile, forceSplitK = tile.name, split
					checkConvRes(t, d, r, dt, c)
				}
			}
		}
	}
	forceGemmTile, forceSplitK = "", 0
	// depthwise: no residual
	c := convCase{1, 8, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8, true, rt.Relu}
	OH, OW := c.out()
	ny := c.K * OH * OW
	op := &rt.Conv{X: newBuf(t, d, rt.F32, 8*36, nil).ref([]int{8 * 36}, nil), W: newBuf(t, d, rt.F32, 72, nil).ref([]int{72}, nil),
		Y: newBuf(t, d, rt.F32, ny, nil).ref([]int{ny}, nil), Res: newBuf(t, d, rt.F32, ny, nil).ref([]int{ny}, nil),
		N: 1, C: 8, H: 6, Width: 6, K: 8, OH: OH, OW: OW, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 8}
	var ue *rt.UnsupportedError
	if err := d.Supports(op); !errors.As(err, &ue) {
		t.Errorf("depthwise Conv with Res: %v, want an *rt.UnsupportedError", err)
	}
}

func checkConvRes(t *testing.T, d rt.Device, r *rand.Rand, dt rt.DType, c convCase) {
	t.Helper()
	OH, OW := c.out()
	x := randVals(r, dt, c.N*c.C*c.H*c.W, -1, 1)
	w := randVals(r, dt, c.K*(c.C/c.G)*c.KH*c.KW, -1, 1)
	ny := c.N * c.K * OH * OW
	res := randVals(r, dt, ny, -2, 2)
	yb := newBuf(t, d, dt, ny, nil)
	op := &rt.Conv{X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), W: newBuf(t, d, dt, len(w), w).ref([]int{len(w)}, nil),
		Y: yb.ref([]int{ny}, nil), Res: newBuf(t, d, dt, ny, res).ref([]int{ny}, nil),
		N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: c.KH, KW: c.KW,
		StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.G,
		Act: rt.Activation{Fn: c.act}}
	var bias []float64
	if c.bias {
		bias = randVals(r, dt, c.K, -1, 1)
		op.Bias = newBuf(t, d, dt, c.K, bias).ref([]int{c.K}, nil)
	}
	if err := d.Supports(op); err != nil {
		t.Fatalf("Conv with Res on convgemm (tile %q, split %d): %v", forceGemmTile, forceSplitK, err)
	}
	backendtest.Run(t, d, op)
	got := yb.read(t, d)
	want, ab := convRef(x, w, bias, c.N, c.C, c.H, c.W, c.K, OH, OW, c.KH, c.KW, c.sh, c.sw, c.pt, c.pl, c.dh, c.dw, c.G)
	for i := range want {
		v := c.act.Apply(want[i]+res[i], 0, 0)
		if math.Abs(got[i]-v) > convTol(dt)*(ab[i]+math.Abs(res[i])+1) {
			t.Fatalf("%s %+v tile %q split %d: Y[%d] = %v, want %v", dt, c, forceGemmTile, forceSplitK, i, got[i], v)
		}
	}
}
