//go:build cgo

package vulkan

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// TestConvStrideY checks rt.Conv.StrideY, the images of Y (and Res) apart
// in a wider tensor (a channel Concat's output at batch > 1): on
// convgemm.comp with each tile, with split-K forced (splitk.comp writes
// Y), with and without a residual laid out like Y, and on the Winograd
// kernels, against a float64 reference, with the elements between the
// images (the Concat's other parts) left as they were. The depthwise and
// direct kernels refuse such a Conv.
func TestConvStrideY(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(83))
	cases := []convCase{
		{3, 5, 9, 11, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, rt.Relu},       // 3x3, Winograd applies
		{2, 13, 5, 7, 17, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, rt.Relu},     // SqueezeNet's expand 1x1
		{3, 6, 11, 9, 10, 3, 3, 2, 2, 1, 0, 1, 2, 1, 1, 2, true, rt.LeakyRelu}, // stride 2, groups 2
	}
	defer func() { forceConvPath, forceGemmTile, forceSplitK = "", "", 0 }()
	for _, dt := range floatDTypes {
		for _, c := range cases {
			for _, res := range []bool{false, true} {
				for _, tile := range append([]gemmTile{{}}, convTiles...) {
					for _, split := range []int{0, 3} {
						forceConvPath, forceGemmTile, forceSplitK = "gemm", tile.name, split
						checkConvStrideY(t, d, r, dt, c, res, true)
					}
				}
				// Winograd where it applies, else the rules' kernel
				forceConvPath, forceGemmTile, forceSplitK = "wino", "", 0
				wino := dt == rt.F32 && c.KH == 3 && c.KW == 3 && c.sh == 1 && c.sw == 1 && c.G == 1
				checkConvStrideY(t, d, r, dt, c, res, wino || convPath(c.C/c.G, c.K/c.G, c.KH*c.KW) == "gemm")
				forceConvPath = "direct"
				checkConvStrideY(t, d, r, dt, c, res, false)
			}
		}
	}
	forceConvPath = ""
	c := convCase{2, 8, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8, true, rt.Relu} // depthwise
	checkConvStrideY(t, d, r, rt.F32, c, false, false)
}

// checkConvStrideY runs c with Y (and Res, with res) at channel offset 3
// of images K+5 channels wide, and checks Y against convRef and the rest
// of the buffer against its fill; with ok false the device must refuse
// the op instead.
func checkConvStrideY(t *testing.T, d rt.Device, r *rand.Rand, dt rt.DType, c convCase, res, ok bool) {
	t.Helper()
	what := fmt.Sprintf("%s %+v path %q tile %q split %d res %v", dt, c, forceConvPath, forceGemmTile, forceSplitK, res)
	OH, OW := c.out()
	ohw := OH * OW
	wide, pre := (c.K+5)*ohw, 3*ohw // elements per image of the wider tensor, Y's offset in it
	total := c.N * wide
	x := randVals(r, dt, c.N*c.C*c.H*c.W, -1, 1)
	w := randVals(r, dt, c.K*(c.C/c.G)*c.KH*c.KW, -1, 1)
	fill := randVals(r, dt, total, -3, 3)
	yb := newBuf(t, d, dt, total, fill)
	ext := (c.N-1)*wide + c.K*ohw
	ref := func(b *tbuf) rt.Ref {
		rf := b.ref([]int{ext}, nil)
		rf.Off += int64(pre * dt.Size())
		return rf
	}
	op := &rt.Conv{X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), W: newBuf(t, d, dt, len(w), w).ref([]int{len(w)}, nil),
		Y: ref(yb), N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: c.KH, KW: c.KW,
		StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.G,
		Act: rt.Activation{Fn: c.act, Alpha: 0.1}, StrideY: wide}
	var bias, rv []float64
	if c.bias {
		bias = randVals(r, dt, c.K, -1, 1)
		op.Bias = newBuf(t, d, dt, c.K, bias).ref([]int{c.K}, nil)
	}
	if res {
		rv = randVals(r, dt, total, -2, 2)
		op.Res = ref(newBuf(t, d, dt, total, rv))
	}
	if err := d.Supports(op); !ok {
		var ue *rt.UnsupportedError
		if !errors.As(err, &ue) {
			t.Errorf("%s: Supports = %v, want an *rt.UnsupportedError", what, err)
		}
		return
	} else if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	backendtest.Run(t, d, op)
	got := yb.read(t, d)
	want, ab := convRef(x, w, bias, c.N, c.C, c.H, c.W, c.K, OH, OW, c.KH, c.KW, c.sh, c.sw, c.pt, c.pl, c.dh, c.dw, c.G)
	checkWideY(t, what, c, convTol(dt), got, fill, want, ab, rv, wide, pre)
}

// checkWideY compares got, a tensor holding c's output images wide
// elements apart from element pre on, with the dense reference want (ab:
// its sums of |terms|) plus the residual rv (laid out as got; nil: none)
// through c's activation (alpha 0.1), within tol of the sums; the
// elements outside the images must have kept their values in fill.
func checkWideY(t *testing.T, what string, c convCase, tol float64, got, fill, want, ab, rv []float64, wide, pre int) {
	t.Helper()
	OH, OW := c.out()
	ohw := OH * OW
	for i := range got {
		n, e := i/wide, i%wide-pre
		if e < 0 || e >= c.K*ohw {
			if got[i] != fill[i] {
				t.Fatalf("%s: element %d outside Y = %v, was %v", what, i, got[i], fill[i])
			}
			continue
		}
		j := n*c.K*ohw + e
		v, s := want[j], ab[j]+1
		if rv != nil {
			v += rv[i]
			s += math.Abs(rv[i])
		}
		v = c.act.Apply(v, 0.1, 0)
		if math.Abs(got[i]-v) > tol*s {
			t.Fatalf("%s: Y image %d [%d] = %v, want %v", what, n, e, got[i], v)
		}
	}
}

// TestConvStrideYShared runs the check of rt.Conv.StrideY that every
// backend runs, against this backend's own dense results.
func TestConvStrideYShared(t *testing.T) {
	backendtest.ConvStrideY(t, testDevice(t))
}
