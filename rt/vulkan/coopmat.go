//go:build cgo

package vulkan

import (
	"fmt"
	"os"
	"strings"

	"github.com/vrun-go/vrun/rt"
)

// The f16 cooperative-matrix GEMM (shaders/mmcm.comp) runs on devices with
// VK_NV_cooperative_matrix whose vkGetPhysicalDeviceCooperativeMatrixPropertiesNV
// lists a subgroup-scope f16 x f16 -> f32 shape that a variant is compiled
// for, with the cooperativeMatrix and vulkanMemoryModel features, f16
// arithmetic and storage, 32-wide subgroups and enough shared memory. The
// extension and features are enabled at device creation only then;
// VRUN_VK_COOPMAT=0 turns it off (the register-blocked matmul.comp runs
// instead).

const nvCoopExt = "VK_NV_cooperative_matrix"

// VkComponentTypeNV and VkScopeNV values.
const (
	coopF16      = 0
	coopF32      = 1
	coopSubgroup = 3
)

// coopMatProp mirrors VkCooperativeMatrixPropertiesNV.
type coopMatProp struct {
	M, N, K, A, B, C, D, Scope uint32
}

// coopShape is an MxNxK cooperative-matrix multiply shape.
type coopShape struct{ M, N, K uint32 }

func (s coopShape) String() string { return fmt.Sprintf("%dx%dx%d", s.M, s.N, s.K) }

// variant is the mmcm.comp variant compiled for the shape.
func (s coopShape) variant() string { return fmt.Sprintf("mmcm_f16_%dx%dx%d", s.M, s.N, s.K) }

// coopShapes are the shapes mmcm.comp is compiled for, preferred first.
var coopShapes = []coopShape{{16, 16, 16}, {16, 8, 16}}

// coopShared is mmcm.comp's shared memory: two stages of a 128x32 A tile
// and a 32x128 B tile of f16, rows padded by 8 halves.
const coopShared = 2 * (128*(32+8) + 32*(128+8)) * 2

// coopEnabled reports whether VRUN_VK_COOPMAT allows cooperative matrices.
func coopEnabled() bool {
	v := strings.TrimSpace(os.Getenv("VRUN_VK_COOPMAT"))
	return !(v == "0" || strings.EqualFold(v, "false") || strings.EqualFold(v, "off"))
}

// pickCoopMat chooses the cooperative-matrix shape for the f16 GEMM, or
// reports that the device cannot (or must not) use one.
func pickCoopMat(props []coopMatProp, c caps, hasExt bool, sharedLim uint32, enabled bool) (coopShape, bool) {
	if !enabled || !hasExt || !c.coopMatrix || !c.vkMemModel || !c.shaderFloat16 || !c.storage16 || !c.vk12 {
		return coopShape{}, false
	}
	if c.subgroupSize != 32 || sharedLim < coopShared {
		return coopShape{}, false
	}
	for _, s := range coopShapes {
		for _, p := range props {
			if p.M == s.M && p.N == s.N && p.K == s.K && p.A == coopF16 && p.B == coopF16 &&
				p.C == coopF32 && p.D == coopF32 && p.Scope == coopSubgroup {
				return s, true
			}
		}
	}
	return coopShape{}, false
}

// coopMatMul lowers an f16 MatMul to mmcm.comp when the device has a
// cooperative-matrix shape; it reports whether it did.
func (l *lowering) coopMatMul(o *rt.MatMul, dt rt.DType, binds []bind, reads, writes []span, push []uint32, bz uint32) bool {
	p := l.d.phys
	if dt != rt.F16 || !p.coopOK || o.M < 16 || o.N < 16 || o.K < 16 || p.limits.MaxComputeWorkGroupInvocations < 256 {
		return false
	}
	if l.d.coopFailed.Load() {
		return false
	}
	if !l.probe {
		// A driver that lists the shape but cannot build the pipeline
		// falls back to matmul.comp for the rest of the device's life.
		if _, err := l.d.getPipeline(p.coop.variant(), len(binds), []uint32{256}); err != nil {
			l.d.coopFailed.Store(true)
			return false
		}
	}
	gx, gy := (o.N+127)/128, (o.M+127)/128
	if gx > int(l.d.maxGroups[0]) || gy > int(l.d.maxGroups[1]) {
		return false
	}
	l.add(dispatch{shader: p.coop.variant(), spec: []uint32{256}, binds: binds, reads: reads, writes: writes, push: push,
		groups: [3]uint32{uint32(gx), uint32(gy), bz}})
	return true
}
