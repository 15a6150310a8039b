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

// coopBlock is an mmcm.comp workgroup block: 128 x bn outputs, K walked
// in slices of bk.
type coopBlock struct{ bn, bk int }

func (b coopBlock) String() string {
	if b.bk == 32 {
		return fmt.Sprint(b.bn)
	}
	return fmt.Sprintf("%dk%d", b.bn, b.bk)
}

// variant is the mmcm.comp variant compiled for the shape and block.
func (s coopShape) variant(b coopBlock) string {
	return fmt.Sprintf("mmcm_f16_%dx%dx%d_%s", s.M, s.N, s.K, b)
}

// shared is the block's shared memory in bytes (mmcm.comp's SHN): one
// stage of the A and B tiles (f16, rows padded by 8 halves), or the
// epilogue scratch of 8 subgroups x 16 x bn/4 floats if larger.
func (b coopBlock) shared() int {
	a := max(128*(b.bk+8), b.bk*(128+8))
	bt := max(b.bk*(b.bn+8), b.bn*(b.bk+8))
	return max(2*(a+bt), 8*16*b.bn)
}

// coopBlocks are the blocks mmcm.comp is compiled for (shaders/gen).
var coopBlocks = []coopBlock{{128, 32}, {256, 32}, {128, 64}}

// forceCoopBlock, when set (tests, the sweep of BenchmarkGEMMCoop),
// selects that block.
var forceCoopBlock coopBlock

// coopShapes are the shapes mmcm.comp and convcm.comp are compiled for
// (shaders/gen's coopShapes), preferred first.
var coopShapes = []coopShape{{16, 16, 16}, {16, 8, 16}}

// coopShared is the shared memory of the largest mmcm.comp variant (block
// 128 x 256): the epilogue scratch of 8 subgroups x 16 x 64 floats, more
// than the one stage of a 128x32 A tile and a 256x32 B tile of f16 with
// rows padded by 8 halves (30 KiB).
const coopShared = 8 * 16 * 64 * 4

// pickCoopBlock chooses the block for an m x n (x batch) output: 128 x 256
// (4x4 fragments per subgroup) when that still gives at least 128
// workgroups (about one per SM of a large GPU), else 128 x 128.
func pickCoopBlock(m, n, batch int) coopBlock {
	if forceCoopBlock.bn != 0 {
		return forceCoopBlock
	}
	if n > 128 && int64((m+127)/128)*int64((n+255)/256)*int64(batch) >= 128 {
		return coopBlock{256, 32}
	}
	return coopBlock{128, 32}
}

// coopFlags are the mmcm.comp flags beyond matmul.comp's: 32 (64) when
// every 8-half chunk of A (B) along its contiguous dimension is 16-byte
// aligned, so that chunks load as one uvec4, and 128 when the rows of Y
// are, so that full blocks store their fragments to Y directly. off* are
// the element offsets within the bindings (bound at 16-byte-aligned
// offsets or better).
func coopFlags(o *rt.MatMul, offA, offB, offY uint32) uint32 {
	al8 := func(vs ...int) bool {
		for _, v := range vs {
			if v%8 != 0 {
				return false
			}
		}
		return true
	}
	sa, sb, sy := o.StrideA, o.StrideB, o.StrideY
	if o.Batch == 1 {
		sa, sb, sy = 0, 0, 0
	}
	var f uint32
	lda, ldb := o.K, o.N
	if o.TransA {
		lda = o.M
	}
	if o.TransB {
		ldb = o.K
	}
	if al8(lda, sa, int(offA)) {
		f |= 32
	}
	if al8(ldb, sb, int(offB)) {
		f |= 64
	}
	if al8(o.N, sy, int(offY)) {
		f |= 128
	}
	return f
}

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

// coopMatMul lowers an f16 MatMul to mmcm2.comp where the device runs it
// (coop2MatMul), else to mmcm.comp when the device has a cooperative-matrix
// shape; it reports whether it did.
func (l *lowering) coopMatMul(o *rt.MatMul, dt rt.DType, binds []bind, reads, writes []span, push []uint32, bz uint32) bool {
	p := l.d.phys
	if dt != rt.F16 || o.M < 16 || o.N < 16 || o.K < 16 {
		return false
	}
	if l.coop2MatMul(o, binds, reads, writes, push, bz) {
		return true
	}
	if !p.coopOK || p.limits.MaxComputeWorkGroupInvocations < 256 {
		return false
	}
	if l.d.coopFailed.Load() {
		return false
	}
	blk := pickCoopBlock(o.M, o.N, o.Batch)
	if blk.shared() > int(p.limits.MaxComputeSharedMemorySize) {
		return false
	}
	bn := blk.bn
	variant := p.coop.variant(blk)
	if !l.probe {
		// A driver that lists the shape but cannot build the pipeline
		// falls back to matmul.comp for the rest of the device's life.
		if _, err := l.d.getPipeline(variant, len(binds), []uint32{256}); err != nil {
			l.d.coopFailed.Store(true)
			return false
		}
	}
	gx, gy := (o.N+bn-1)/bn, (o.M+127)/128
	if gx > int(l.d.maxGroups[0]) || gy > int(l.d.maxGroups[1]) {
		return false
	}
	push = append([]uint32(nil), push...)
	push[3] |= coopFlags(o, push[8], push[9], push[10])
	l.add(dispatch{shader: variant, spec: []uint32{256}, binds: binds, reads: reads, writes: writes, push: push,
		groups: [3]uint32{uint32(gx), uint32(gy), bz}})
	return true
}

// isCoopVariant reports whether a shader variant is one of mmcm.comp's.
func isCoopVariant(name string) bool { return strings.HasPrefix(name, "mmcm_") }
