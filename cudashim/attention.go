//go:build cgo

package cudashim

import (
	"fmt"
	"os"
	"strings"

	"github.com/vrun-go/vrun/internal/attnrule"
	"github.com/vrun-go/vrun/rt"
)

// attnRows is the number of query rows per block of the attention kernels
// (NT / AT_LANES in kernels/attention.cu).
const attnRows = nt / 16

// attentionSupported accepts the rt.Attention ops that kernels/attention.cu
// runs: f32 and f16, head sizes up to 128, non-negative strides. Others
// are unsupported, and the engine lowers attention to MatMul and Softmax.
// VRUN_CUDA_ATTENTION=0 turns the fused kernels off (the engine then
// lowers attention to MatMul and Softmax), to compare the two.
func attentionSupported(o *rt.Attention) error {
	dt := o.Y.DType
	if attnForce == "0" {
		return unsupported(o, dt, "turned off by VRUN_CUDA_ATTENTION=0")
	}
	if dt != rt.F32 && dt != rt.F16 {
		return unsupported(o, dt, "only f32 and f16 are implemented")
	}
	if max(o.D, o.Dv) > 128 {
		return unsupported(o, dt, fmt.Sprintf("head sizes %d and %d (at most 128)", o.D, o.Dv))
	}
	for _, r := range []rt.Ref{o.Q, o.K, o.V, o.Mask, o.Y} {
		if r.Buf == nil {
			continue
		}
		for _, s := range r.StridesOrContiguous() {
			if s < 0 {
				return unsupported(o, dt, "negative strides")
			}
		}
	}
	return nil
}

// attnForce forces one kind of attention kernel for tests and A/B runs:
// "rows" (the row-team kernels), or "tiled", "tiled64" or "tiled128"
// (where D and Dv allow; the last two with that many threads per block). It
// starts as $VRUN_CUDA_ATTENTION, where "0" turns the fused kernels off.
var attnForce = strings.TrimSpace(os.Getenv("VRUN_CUDA_ATTENTION"))

// attention lowers rt.Attention to one launch: of attention_{h,f}t where
// attnrule.Tiled takes it, else of attention_{h,f}{64,128}.
func (l *lowering) attention(o *rt.Attention) {
	if o.B*o.H == 0 || o.Lq == 0 || o.Dv == 0 {
		return
	}
	st := func(r rt.Ref) []int {
		if r.Buf == nil {
			return []int{0, 0, 0, 0}
		}
		return r.StridesOrContiguous()
	}
	rows, block := attnRows, uint32(0)
	k := kAttentionF64
	switch {
	case o.Y.DType == rt.F16 && max(o.D, o.Dv) <= 64:
		k = kAttentionH64
	case o.Y.DType == rt.F16:
		k = kAttentionH128
	case max(o.D, o.Dv) > 64:
		k = kAttentionF128
	}
	if ok, threads := attnrule.Tiled(o, attnForce); ok {
		rows, block = threads/4, uint32(threads)
		k = byFloat(o.Y.DType, kAttentionHT, kAttentionFT, kAttentionFT)
	}
	nqb := (o.Lq + rows - 1) / rows
	a := (&argw{}).u(l.ptr(o.Q)).u(l.ptr(o.K)).u(l.ptr(o.V)).u(l.ptr(o.Mask)).u(l.ptr(o.Y)).
		ints(o.Lq, o.Lk, o.D, o.Dv, o.H, nqb).i(b2i(o.Causal)).i(b2i(o.Mask.Buf != nil)).f(o.Scale)
	for _, r := range []rt.Ref{o.Q, o.K, o.V, o.Mask, o.Y} {
		a.ints(st(r)...)
	}
	blocks := int64(o.B) * int64(o.H) * int64(nqb)
	x := min(blocks, 65535)
	l.out = append(l.out, launch{kernel: k, grid: [3]uint32{uint32(x), uint32((blocks + x - 1) / x), 1}, block: block, args: a.b})
}
