//go:build cgo

package vulkan

import (
	"fmt"
	"os"
	"strings"

	vk "github.com/goki/vulkan"
	"github.com/vrun-go/vrun/rt"
)

// The f16 GEMM on workgroup-scope cooperative matrices (shaders/mmcm2.comp,
// SPIR-V 1.6 from glslang 15) runs on Vulkan 1.3 devices with
// VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 whose
// cooperativeMatrix, cooperativeMatrixWorkgroupScope,
// cooperativeMatrixFlexibleDimensions, cooperativeMatrixPerElementOperations
// and cooperativeMatrixTensorAddressing features are there, with
// vulkanMemoryModel and f16 arithmetic and storage, and whose
// vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV lists a
// workgroup-scope f16 x f16 -> f32 entry for a block's invocation count with
// granularities that divide the block. The two extensions and those features
// are enabled at device creation only then (and if vkCreateDevice fails with
// them, the device is created again without). It is chosen over mmcm.comp;
// VRUN_VK_COOPMAT2=0 turns it off (mmcm.comp runs where the device has
// VK_NV_cooperative_matrix), VRUN_VK_COOPMAT=0 turns off both.

// coop2Caps are the VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2
// features and properties vrun reads.
type coop2Caps struct {
	khrCoopMatrix, workgroupScope, flexibleDimensions, perElementOps, tensorAddressing, conversions bool
	maxWorkgroupSize, maxDimension, reservedShared                                                  uint32
	// enable asks createDevice to enable both extensions and the features
	// above that are set.
	enable bool
}

// coopFlexProp mirrors VkCooperativeMatrixFlexibleDimensionsPropertiesNV.
type coopFlexProp struct {
	MGran, NGran, KGran, A, B, C, D, Scope, Invocations uint32
}

// coopWorkgroup is VK_SCOPE_WORKGROUP_KHR.
const coopWorkgroup = 2

// coop2Block is an mmcm2.comp workgroup block: bm x bn outputs, K walked in
// slices of bk, wg invocations, the aligned K loop unrolled unroll times.
type coop2Block struct{ bm, bn, bk, wg, unroll int }

func (b coop2Block) String() string {
	if b.unroll != 4 {
		return fmt.Sprintf("%dx%dk%du%d", b.bm, b.bn, b.bk, b.unroll)
	}
	return fmt.Sprintf("%dx%dk%d", b.bm, b.bn, b.bk)
}

// variant is mmcm2.comp's variant for the block and the operands'
// transposition.
func (b coop2Block) variant(ta, tb bool) string {
	tr := []byte("nn")
	if ta {
		tr[0] = 't'
	}
	if tb {
		tr[1] = 't'
	}
	return fmt.Sprintf("mmcm2_f16_%s_%s", b, tr)
}

// coop2Blocks are the blocks mmcm2.comp is compiled for (shaders/gen's
// coop2Blocks). pickCoop2Block chooses among coop2Rule; the others run only
// when forced (the sweep of BenchmarkGEMMCoop2).
var coop2Blocks = []coop2Block{
	{128, 256, 64, 256, 4}, {128, 128, 64, 256, 4}, {64, 64, 64, 128, 4},
	{128, 256, 32, 256, 4}, {256, 128, 64, 256, 4}, {128, 128, 32, 256, 4},
	{128, 256, 64, 256, 1}, {128, 128, 64, 256, 1},
}

// coop2Rule are the blocks pickCoop2Block chooses from, largest first:
// 128x128 with K slices of 64 and no unrolling, and 64x64 (128
// invocations). On the H200 (driver 580, BenchmarkGEMMCoop2, gpu-TFLOP/s
// at n = 1024/2048/4096/8192) 128x128k64u1 ran 57/149/151/159, 64x64k64
// 74/103/104/106, 128x256k32 34/149/147/155, 128x256k64 26/79/93/95,
// 256x128k64 22/65/73/74.
var coop2Rule = []coop2Block{{128, 128, 64, 256, 1}, {64, 64, 64, 128, 4}}

// forceCoop2Block, when set (tests, benchmarks), selects that block.
var forceCoop2Block coop2Block

// coop2Enabled reports whether VRUN_VK_COOPMAT2 allows mmcm2.comp.
func coop2Enabled() bool {
	v := strings.TrimSpace(os.Getenv("VRUN_VK_COOPMAT2"))
	return !(v == "0" || strings.EqualFold(v, "false") || strings.EqualFold(v, "off"))
}

// pickCoop2 returns the mmcm2.comp blocks the device can run (none: it
// cannot, or must not). api is the Vulkan version the device runs at (the
// lower of the instance's and the device's).
func pickCoop2(flex []coopFlexProp, c caps, hasExts bool, api, sharedLim uint32, enabled bool) []coop2Block {
	c2 := c.coop2
	if !enabled || !hasExts || api < vk.MakeVersion(1, 3, 0) || !c.vk12 || !c.vkMemModel || !c.shaderFloat16 || !c.storage16 {
		return nil
	}
	if !c2.khrCoopMatrix || !c2.workgroupScope || !c2.flexibleDimensions || !c2.perElementOps || !c2.tensorAddressing {
		return nil
	}
	if c2.reservedShared > sharedLim {
		return nil
	}
	var out []coop2Block
	for _, b := range coop2Blocks {
		if uint32(max(b.bm, b.bn, b.bk)) > c2.maxDimension || uint32(b.wg) > c2.maxWorkgroupSize {
			continue
		}
		for _, p := range flex {
			if p.A == coopF16 && p.B == coopF16 && p.C == coopF32 && p.D == coopF32 && p.Scope == coopWorkgroup &&
				p.Invocations == uint32(b.wg) && p.MGran > 0 && p.NGran > 0 && p.KGran > 0 &&
				uint32(b.bm)%p.MGran == 0 && uint32(b.bn)%p.NGran == 0 && uint32(b.bk)%p.KGran == 0 {
				out = append(out, b)
				break
			}
		}
	}
	return out
}

// coop2Groups is the number of workgroups of block b for an m x n (x
// batch) output.
func coop2Groups(b coop2Block, m, n, batch int) int64 {
	return int64((m+b.bm-1)/b.bm) * int64((n+b.bn-1)/b.bn) * int64(batch)
}

// pickCoop2Block chooses among the device's blocks for an m x n (x batch)
// output: the first of coop2Rule that gives at least coop2MinGroups
// workgroups, else the last the device has (the one with most).
func pickCoop2Block(m, n, batch int, have []coop2Block) (coop2Block, bool) {
	in := func(b coop2Block) bool {
		for _, h := range have {
			if h == b {
				return true
			}
		}
		return false
	}
	if forceCoop2Block.bm != 0 {
		return forceCoop2Block, in(forceCoop2Block)
	}
	var last coop2Block
	for _, b := range coop2Rule {
		if !in(b) {
			continue
		}
		last = b
		if coop2Groups(b, m, n, batch) >= coop2MinGroups {
			return b, true
		}
	}
	return last, last.bm != 0
}

// coop2MinGroups is the workgroup count from which pickCoop2Block takes a
// larger block: about one per SM of a large GPU (the H200 has 132).
const coop2MinGroups = 128

// coop2MatMul lowers an f16 MatMul to mmcm2.comp when the device runs it;
// it reports whether it did.
func (l *lowering) coop2MatMul(o *rt.MatMul, binds []bind, reads, writes []span, push []uint32, bz uint32) bool {
	p := l.d.phys
	if len(p.coop2) == 0 || l.d.coop2Failed.Load() {
		return false
	}
	blk, ok := pickCoop2Block(o.M, o.N, o.Batch, p.coop2)
	if !ok || blk.wg > int(p.limits.MaxComputeWorkGroupInvocations) {
		return false
	}
	variant := blk.variant(o.TransA, o.TransB)
	if !l.probe {
		// A driver that lists the features but cannot build the pipeline
		// falls back to mmcm.comp (or matmul.comp) for the rest of the
		// device's life.
		if _, err := l.d.getPipeline(variant, len(binds), nil); err != nil {
			l.d.coop2Failed.Store(true)
			return false
		}
	}
	gx, gy := (o.N+blk.bn-1)/blk.bn, (o.M+blk.bm-1)/blk.bm
	if gx > int(l.d.maxGroups[0]) || gy > int(l.d.maxGroups[1]) {
		return false
	}
	push = append([]uint32(nil), push...)
	push[3] |= coopFlags(o, push[8], push[9], push[10])
	l.add(dispatch{shader: variant, binds: binds, reads: reads, writes: writes, push: push,
		groups: [3]uint32{uint32(gx), uint32(gy), bz}})
	return true
}

// isCoop2Variant reports whether a shader variant is one of mmcm2.comp's.
func isCoop2Variant(name string) bool { return strings.HasPrefix(name, "mmcm2_") }

// gemmPath describes the f16 GEMM kernel the device runs (DeviceInfo's
// details).
func (p *physInfo) gemmPath() string {
	switch {
	case len(p.coop2) > 0:
		bs := make([]string, len(p.coop2))
		for i, b := range p.coop2 {
			bs[i] = b.String()
		}
		return "mmcm2.comp (VK_NV_cooperative_matrix2, workgroup scope; blocks " + strings.Join(bs, " ") + ")"
	case p.coopOK:
		ext := nvCoopExt
		if p.coop.KHR {
			ext = "VK_KHR_cooperative_matrix"
		}
		return fmt.Sprintf("mmcm.comp (%s %dx%dx%d)", ext, p.coop.M, p.coop.N, p.coop.K)
	}
	return "matmul.comp"
}
