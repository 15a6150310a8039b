//go:build cgo

package clshim

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// gemmShape is one GEMM tile variant of gemm.cl: a work-group of
// (tn/wn, tm/wm) work-items computes tm x tn outputs, tk deep per step,
// wm x wn outputs per work-item.
type gemmShape struct{ tm, tn, tk, wm, wn int }

func (s gemmShape) defs(dt rt.DType) string {
	return fmt.Sprintf("%s -DTM=%d -DTN=%d -DTK=%d -DWM=%d -DWN=%d", typeDefs(dt), s.tm, s.tn, s.tk, s.wm, s.wn)
}

// gemmDefs are the defines of the gemm.cl program of a MatMul or Conv
// with epilogue activation act: on a device with split, act is fixed
// at build time, so that the compiler keeps one case of act's switch in
// the unrolled epilogue (NVIDIA's compiler takes seconds on all of them).
func (d *device) gemmDefs(s gemmShape, dt rt.DType, act rt.UnaryFn) string {
	return s.defs(dt) + d.buildConst("ACT_FN", int(act))
}

// buildConst returns the define " -Dname=v" on a device with split,
// where a kernel's runtime selector argument (an activation, a
// reduction) is fixed at build time so that the compiler keeps the one
// path it takes; "" elsewhere (the argument chooses at run time).
func (d *device) buildConst(name string, v int) string {
	if !d.split {
		return ""
	}
	return fmt.Sprintf(" -D%s=%d", name, v)
}

// halfWeightDefs returns the define that makes a program's weight
// operand half (gemm's B, the convolutions' W) for an rt.HalfWeights op,
// and "" otherwise.
func halfWeightDefs(op rt.Op) string {
	if rt.HalfWeights(op) {
		return " -DW_HALF=1"
	}
	return ""
}

// local is the work-group shape (x, y).
func (s gemmShape) local() (rn, rm int) { return s.tn / s.wn, s.tm / s.wm }

// groups is the number of work-groups covering m x n outputs, batch times.
func (s gemmShape) groups(m, n, batch int) int {
	return (m + s.tm - 1) / s.tm * ((n + s.tn - 1) / s.tn) * batch
}

// gemmShapes returns the tile variants for dt, largest first: the
// device's tile, then smaller ones for problems whose large tiles would
// leave compute units idle.
func (d *device) gemmShapes(dt rt.DType) []gemmShape {
	c := d.cfg
	if dt == rt.F64 {
		out := []gemmShape{{c.tm64, c.tn64, c.tk, c.wm64, c.wn64}}
		if c.tm64 > 32 {
			out = append(out, gemmShape{32, 32, c.tk, 4, 4})
		}
		return out
	}
	out := []gemmShape{{c.tm, c.tn, c.tk, c.wm, c.wn}}
	if c.tm >= 128 {
		out = append(out, gemmShape{64, 64, c.tk, 4, 4})
	}
	if c.tm > 32 {
		out = append(out, gemmShape{32, 32, c.tk, 4, 4})
	}
	return out
}

// pickGEMM chooses the largest tile variant whose work-groups cover the
// device's compute units for an m x n output, batch times.
func (d *device) pickGEMM(dt rt.DType, m, n, batch int) gemmShape {
	if d.gemmForce != nil {
		return *d.gemmForce
	}
	sh := d.gemmShapes(dt)
	for _, s := range sh {
		if s.groups(m, n, batch) >= d.ent.caps.computeUnits {
			return s
		}
	}
	return sh[len(sh)-1]
}

func (d *device) lowerMatMul(o *rt.MatMul) (*launchSpec, error) {
	if o.M == 0 || o.N == 0 {
		return &launchSpec{}, nil
	}
	dt := o.A.DType
	s := d.pickGEMM(dt, o.M, o.N, o.Batch)
	name, defs := "gemm", ""
	if o.M == 1 || o.N == 1 {
		// gemv uses no tile: one program per dtype and activation (and
		// mode on split devices), built with the device's first tile's
		// defines whatever the shape
		name, s = "gemv", d.gemmShapes(dt)[0]
		mode, _ := gemvMode(o)
		defs = d.buildConst("GV_MODE", mode)
	}
	a, err := d.kernel(o, "gemm.cl", d.gemmDefs(s, dt, o.Act.Fn)+halfWeightDefs(o)+defs, name)
	if err != nil {
		return nil, err
	}
	a.ref(d, o.A, o.B)
	bs0, bs1 := 0, 0
	if o.Bias.Buf != nil {
		st := o.Bias.StridesOrContiguous()
		bs0, bs1 = st[0], st[1]
	}
	a.ref(d, o.Bias)
	a.i32(bs0)
	a.i32(bs1)
	a.ref(d, o.Y)
	a.i32(o.M)
	a.i32(o.N)
	a.i32(o.K)
	a.i32(b01(o.TransA))
	a.i32(b01(o.TransB))
	a.ints(o.StrideA, o.StrideB, o.StrideY)
	a.acc(dt, o.Alpha)
	a.acc(dt, o.Beta)
	a.i32(b01(o.Bias.Buf != nil))
	a.i32(int(o.Act.Fn))
	a.acc(dt, o.Act.Alpha)
	a.acc(dt, o.Act.Beta)
	if name == "gemv" {
		return d.finishGEMV(a, o)
	}
	rn, rm := s.local()
	gws := [3]int{(o.N + s.tn - 1) / s.tn * rn, (o.M + s.tm - 1) / s.tm * rm, o.Batch}
	return d.finishND(a, gws, [3]int{rn, rm, 1})
}

// gemv.cl's work-group (gemm.cl's GV_X x GV_Y) and the work-groups its
// split aims at per compute unit.
const (
	gemvX, gemvY  = 32, 8
	gemvPerCU     = 8
	gemvMinSplitK = 64 // least K of one split
)

// gemvSplit is the K split of a GEMV with groups output groups, batch
// times: enough work-groups for gemvPerCU per compute unit on a GPU
// (splitForce in tests), none on a CPU.
func (d *device) gemvSplit(groups, batch, k int) int {
	if d.splitForce > 0 {
		return max(min(d.splitForce, k), 1)
	}
	if d.ent.caps.cpu {
		return 1
	}
	want := d.ent.caps.computeUnits * gemvPerCU
	s := (want + groups*batch - 1) / (groups * batch)
	return max(min(s, k/gemvMinSplitK), 1)
}

// gemm.cl's gemv paths (its GV_MODE values).
const (
	gemvColumn4 = 0 // column mode, four adjacent outputs a work-item
	gemvColumn  = 1 // column mode, one output a work-item
	gemvRow     = 2 // row mode
)

// gemvMode returns gemm.cl's gemv path for o (M == 1 or N == 1), as the
// kernel computes it, and L, the number of outputs.
func gemvMode(o *rt.MatMul) (mode, L int) {
	wa := o.N == 1 && o.M != 1
	L, col := o.N, !o.TransB
	if wa {
		L, col = o.M, o.TransA
	}
	switch {
	case !col:
		return gemvRow, L
	case L%4 == 0:
		return gemvColumn4, L
	}
	return gemvColumn, L
}

// finishGEMV completes gemm.cl's gemv kernel for o (M == 1 or N == 1):
// its split, and one work-group per output group, batch and split.
func (d *device) finishGEMV(a *args, o *rt.MatMul) (*launchSpec, error) {
	mode, L := gemvMode(o)
	nout := gemvY // gemvRow
	switch mode {
	case gemvColumn4:
		nout = 4 * gemvX
	case gemvColumn:
		nout = gemvX
	}
	groups := (L + nout - 1) / nout
	S := d.gemvSplit(groups, o.Batch, o.K)
	return d.finishSplit(a, o.A.DType, S, groups*o.Batch, 4*gemvX, [3]int{groups * gemvX, gemvY, o.Batch * S}, [3]int{gemvX, gemvY, 1})
}

// allGEMMShapes lists the tile variants of every tuning (tests).
var allGEMMShapes = []gemmShape{{128, 128, 16, 8, 8}, {64, 64, 16, 8, 8}, {64, 64, 16, 4, 4}, {32, 32, 16, 4, 4}}
