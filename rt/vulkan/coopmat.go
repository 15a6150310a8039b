//go:build cgo

package vulkan

import (
	"fmt"
	"os"
	"strings"

	"github.com/vrun-go/vrun/rt"
)

// The f16 cooperative-matrix GEMM (shaders/mmcm.comp) and convolution
// (shaders/convcm.comp) run on devices with VK_NV_cooperative_matrix or
// VK_KHR_cooperative_matrix whose shape query lists a subgroup-scope
// f16 x f16 -> f32 shape that a variant is compiled for (coopShapes; NV's
// first), with the extension's cooperativeMatrix feature,
// vulkanMemoryModel, f16 arithmetic and storage, the shape's subgroup size
// (the default, or for KHR's a size the device's pipelines can require;
// they then do, see coopPin) and enough shared memory. The extension and features are enabled at
// device creation only then. VRUN_VK_COOPMAT=0 turns it off (the
// register-blocked matmul.comp runs instead); on CPU devices (lavapipe,
// whose cooperative matrices are emulated) it is off unless
// VRUN_VK_COOPMAT=1.

const nvCoopExt = "VK_NV_cooperative_matrix"

// VkComponentTypeNV and VkScopeNV values (VkComponentTypeKHR and
// VkScopeKHR have the same).
const (
	coopF16      = 0
	coopF32      = 1
	coopSubgroup = 3
)

// coopMatProp mirrors VkCooperativeMatrixPropertiesNV (and the fields of
// VkCooperativeMatrixPropertiesKHR, saturatingAccumulation aside).
type coopMatProp struct {
	M, N, K, A, B, C, D, Scope uint32
}

// coopShape is an MxNxK cooperative-matrix multiply shape of
// VK_NV_cooperative_matrix, or of VK_KHR_cooperative_matrix (KHR), laid
// out for subgroups of SGS invocations.
type coopShape struct {
	M, N, K uint32
	KHR     bool
	SGS     uint32
}

// String is the shape as variant names spell it: MxNxK, or khrMxNxK.
func (s coopShape) String() string {
	p := ""
	if s.KHR {
		p = "khr"
	}
	return fmt.Sprintf("%s%dx%dx%d", p, s.M, s.N, s.K)
}

// isKHRCoopVariant reports whether a shader variant is one of mmcm.comp's
// or convcm.comp's for a KHR shape (its name holds "_khr", String's).
func isKHRCoopVariant(name string) bool { return strings.Contains(name, "_khr") }

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
	return fmt.Sprintf("mmcm_f16_%s_%s", s, b)
}

// shared is the block's shared memory in bytes for shape s (mmcm.comp's
// SHN): one stage of the A and B tiles (f16, rows padded by 8 halves), or
// the epilogue scratch if larger: a row of fragments of each subgroup's
// sub-block, 8 subgroups (a 2 x 4 grid) x 16 x bn/4 floats, or 32 (4 x 8)
// x 8 x bn/8 for 8-wide subgroups.
func (b coopBlock) shared(s coopShape) int {
	a := max(128*(b.bk+8), b.bk*(128+8))
	bt := max(b.bk*(b.bn+8), b.bn*(b.bk+8))
	sgc := 4 // subgroups along N
	if s.SGS == 8 {
		sgc = 8
	}
	return max(2*(a+bt), 256/int(s.SGS)*int(s.M)*(b.bn/sgc)*4)
}

// coopBlocks are the blocks mmcm.comp is compiled for (shaders/gen).
var coopBlocks = []coopBlock{{128, 32}, {256, 32}, {128, 64}}

// forceCoopBlock, when set (tests, the sweep of BenchmarkGEMMCoop),
// selects that block.
var forceCoopBlock coopBlock

// coopShapes are the shapes mmcm.comp and convcm.comp are compiled for
// (shaders/gen's coopShapes), preferred first: NV's, timed on NVIDIA
// GPUs; KHR's 16x16x16 for 32-wide subgroups (never run on hardware: the
// NVIDIA GPUs at hand take NV's), and 8x8x8 for lavapipe's 8-wide ones,
// where CI runs the kernels' tests.
var coopShapes = []coopShape{{16, 16, 16, false, 32}, {16, 8, 16, false, 32}, {16, 16, 16, true, 32}, {8, 8, 8, true, 8}}

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

// coopForced reports whether VRUN_VK_COOPMAT=1 asks for cooperative
// matrices on CPU devices too.
func coopForced() bool {
	v := strings.TrimSpace(os.Getenv("VRUN_VK_COOPMAT"))
	return v == "1" || strings.EqualFold(v, "true") || strings.EqualFold(v, "on")
}

// computeStage is VK_SHADER_STAGE_COMPUTE_BIT.
const computeStage = 0x20

// canPinSubgroup reports whether a compute pipeline of up to 256
// invocations on a device with caps c can require subgroups of sgs
// invocations (subgroup size control, Vulkan 1.3).
func canPinSubgroup(c caps, sgs uint32) bool {
	return c.sgsControl && c.sgsMin <= sgs && sgs <= c.sgsMax && c.sgsStages&computeStage != 0 && c.sgsMaxSubgroups >= 256/sgs
}

// pickCoopMat chooses the cooperative-matrix shape for the f16 GEMM and
// convolution among the device's VK_NV_cooperative_matrix shapes nv (nil
// without the extension) and VK_KHR_cooperative_matrix shapes khr (nil
// without it), or reports that the device cannot (or must not) use one.
// A shape's variants are laid out for subgroups of its SGS: the device's
// default, or for KHR's, a size its pipelines can require (AMD's RDNA
// defaults to 64 and can run 32; the KHR variants are SPIR-V 1.5, whose
// pipelines otherwise run with the default).
func pickCoopMat(nv, khr []coopMatProp, c caps, sharedLim uint32, enabled bool) (coopShape, bool) {
	if !enabled || !c.vkMemModel || !c.shaderFloat16 || !c.storage16 || !c.vk12 {
		return coopShape{}, false
	}
	for _, s := range coopShapes {
		props, feature := nv, c.coopMatrix
		if s.KHR {
			props, feature = khr, c.coop2.khrCoopMatrix
		}
		sizeOK := c.subgroupSize == s.SGS || s.KHR && canPinSubgroup(c, s.SGS)
		if !feature || !sizeOK || sharedLim < uint32(coopBlock{256, 32}.shared(s)) {
			continue
		}
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
	if blk.shared(p.coop) > int(p.limits.MaxComputeSharedMemorySize) {
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
