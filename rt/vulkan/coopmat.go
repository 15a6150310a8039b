//go:build cgo

package vulkan

import "github.com/vrun-go/vrun/rt"

func (l *lowering) coopMatMul(o *rt.MatMul, dt rt.DType, binds []bind, reads, writes []span, push []uint32, bz uint32) bool {
	return false
}
