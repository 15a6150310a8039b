//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/vrun-go/vrun/internal/attnrule"
	"github.com/vrun-go/vrun/rt"
)

// attention.comp runs a team of attnLanes invocations per query row, and
// attnMaxRows rows per workgroup at most.
const (
	attnLanes   = 32
	attnMaxRows = 8
)

// attnShared is attention.comp's shared memory in bytes for head sizes up
// to dmax: the scaled queries, one block of K and V rows, and the score
// tile (f32).
func attnShared(dmax int) int {
	return 4 * (attnMaxRows*(dmax+1) + attnLanes*(dmax+1) + attnLanes*dmax + attnMaxRows*(attnLanes+1))
}

// attnRows is the number of query rows per attention.comp workgroup for
// bh heads of lq queries: 8 where that still gives two workgroups per
// compute unit of a large GPU (132 on an H200), else 4 (BERT-base at
// batch 1: 12 heads of 128 queries run as 384 workgroups).
func attnRows(bh, lq int) int {
	if int64(bh)*int64((lq+attnMaxRows-1)/attnMaxRows) >= 264 {
		return attnMaxRows
	}
	return attnMaxRows / 2
}

// attnTiledShared is the tiled variant's shared memory in bytes (query,
// key, value, probability and row-sum tiles).
const attnTiledShared = 16 * (32*17 + 32*17 + 32*16 + 32*9 + 32*4)

// attnForce forces one variant of attention.comp for tests and A/B runs:
// "rows" (the row-team kernel), or "tiled", "tiled64" or "tiled128" (where
// D and Dv allow; the last two with that workgroup size). It
// starts as $VRUN_VK_ATTENTION, where "0" turns the fused kernel off.
var attnForce = strings.TrimSpace(os.Getenv("VRUN_VK_ATTENTION"))

// attentionOff reports whether VRUN_VK_ATTENTION=0 turns the fused
// kernel off (the engine then lowers attention to MatMul and Softmax), to
// compare the two.
func attentionOff() bool { return attnForce == "0" }

// attnTiled reports whether attention.comp's tiled variant takes o, and
// its workgroup size (attnrule.Tiled), where the device has the shared
// memory for it.
func attnTiled(o *rt.Attention, sharedLim uint32) (bool, int) {
	if attnTiledShared > sharedLim {
		return false, 0
	}
	return attnrule.Tiled(o, attnForce)
}

// attention lowers rt.Attention to one dispatch of attention.comp (a
// flash-attention kernel: no score tensor), for f32 and f16 with head
// sizes up to 128 and Y's head dim contiguous: the tiled variant where
// attnTiled takes it, else the row-team one. Other cases are
// unsupported, and the engine then lowers attention to MatMul and Softmax.
func (l *lowering) attention(o *rt.Attention) {
	dt := o.Y.DType
	if attentionOff() {
		l.err = l.unsupported(dt, "turned off by VRUN_VK_ATTENTION=0")
		return
	}
	if dt != rt.F32 && dt != rt.F16 {
		l.err = l.unsupported(dt, "only f32 and f16 are implemented")
		return
	}
	if err := l.needDType(dt); err != nil {
		l.err = err
		return
	}
	dmax := 64
	if max(o.D, o.Dv) > 64 {
		dmax = 128
	}
	if max(o.D, o.Dv) > 128 {
		l.err = l.unsupported(dt, "head sizes %d and %d (at most 128)", o.D, o.Dv)
		return
	}
	if sh := attnShared(dmax); sh > int(l.d.phys.limits.MaxComputeSharedMemorySize) {
		l.err = l.unsupported(dt, "head sizes %d and %d need %d bytes of shared memory, the device has %d", o.D, o.Dv, sh, l.d.phys.limits.MaxComputeSharedMemorySize)
		return
	}
	yst := o.Y.StridesOrContiguous()
	if o.Dv > 1 && yst[3] != 1 {
		l.err = l.unsupported(dt, "Y's head dim is strided")
		return
	}
	if o.B*o.H == 0 || o.Lq == 0 || o.Dv == 0 {
		return
	}
	strides := []rt.Ref{o.Q, o.K, o.V, o.Mask, o.Y}
	var st [5][]int
	for i, r := range strides {
		if r.Buf == nil {
			st[i] = []int{0, 0, 0, 0}
			continue
		}
		st[i] = r.StridesOrContiguous()
		for _, s := range st[i] {
			if s < 0 {
				l.err = l.unsupported(dt, "negative strides")
				return
			}
		}
	}
	mask := o.Mask
	flags := uint32(0)
	if o.Causal {
		flags |= 1
	}
	if mask.Buf != nil {
		flags |= 2
	} else {
		mask = o.Q // bound, never read
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"Q", "K", "V", "Mask", "Y"},
		[]rt.Ref{o.Q, o.K, o.V, mask, o.Y}, []int64{-1, -1, -1, -1, -1}, 4)
	if !ok {
		return
	}
	rows := attnRows(o.B*o.H, o.Lq)
	shader, wg := fmt.Sprintf("attention_%s_d%d", dt, dmax), rows*attnLanes
	if ok, tw := attnTiled(o, l.d.phys.limits.MaxComputeSharedMemorySize); ok {
		shader, wg, rows = fmt.Sprintf("attention_%s_t64", dt), tw, tw/4
	}
	nqb := (o.Lq + rows - 1) / rows
	groups := int64(o.B) * int64(o.H) * int64(nqb)
	if !fits32(groups) {
		l.err = fmt.Errorf("Attention: %d workgroups", groups)
		return
	}
	push := []uint32{uint32(o.Lq), uint32(o.Lk), uint32(o.D), uint32(o.Dv),
		uint32(o.H), uint32(nqb), flags, math.Float32bits(float32(o.Scale)),
		offs[0], offs[1], offs[2], offs[3], offs[4]}
	for i := 0; i < 4; i++ {
		for _, s := range st[i] {
			push = append(push, uint32(s))
		}
	}
	push = append(push, uint32(st[4][0]), uint32(st[4][1]), uint32(st[4][2]))
	l.add(dispatch{shader: shader, spec: []uint32{uint32(wg)}, binds: binds,
		reads: reads, writes: writes, groups: groups2D(l.d, groups), push: push})
}
