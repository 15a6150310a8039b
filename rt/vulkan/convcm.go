//go:build cgo

package vulkan

import (
	"os"
	"strings"
	"sync"

	"github.com/vrun-go/vrun/rt"
)

// Convolutions with f16 weights (rt.HalfWeights, precision f16) run on
// convcm.comp where the device has the f16 cooperative-matrix GEMM
// (coopOK, pickCoopMat) and the convolution is deep enough to gain
// (coopConvWins): the implicit GEMM of convgemm.comp with its products on
// the tensor cores. X is rounded to f16 as it is loaded, so a product
// differs from the f32 kernels' by that rounding (a relative 2^-11 of
// each term); the sums stay f32. On such a device the other implicit-GEMM
// convolutions are refused their f16 weights (halfConvSlower): the f32
// kernels with 16-bit weight loads (convgemm.comp's f32w16 tiles, the
// Winograd path) were slower than with f32 weights at batch 1
// (docs/benchmarks.md, the twelfth and thirteenth sessions).
// VRUN_VK_CONVCM=0 turns both off.

// coopConvTile is convcm.comp's block as a gemmTile: 64 x 64 outputs, K
// slices of 64, 128 invocations (threads(): 64/8 x 64/4).
var coopConvTile = gemmTile{name: "cm", bm: 64, bn: 64, bk: 64, tm: 8, tn: 4}

// coopConvSplit is convcm.comp's split-K rule: toward 256 workgroups, in
// slices at least 64 deep, at most 16 of them.
var coopConvSplit = splitRule{256, 64, 16}

// coopConvOff reports whether VRUN_VK_CONVCM=0 turns convcm.comp off;
// read once.
var coopConvOff = sync.OnceValue(func() bool { return strings.TrimSpace(os.Getenv("VRUN_VK_CONVCM")) == "0" })

// coopConvSplitEnv is convcm.comp's split rule given by VRUN_VK_CMSPLIT
// as "TARGET/MINK" (see parseSplitRule), to time rules against each
// other in one binary; read once.
var coopConvSplitEnv = sync.OnceValues(func() (splitRule, bool) { return parseSplitRule(os.Getenv("VRUN_VK_CMSPLIT")) })

// coopConvVariant names the convcm.comp pipeline of the device's
// cooperative-matrix shape, with split set the split-K partial pass.
func (p *physInfo) coopConvVariant(split bool) string {
	n := "convcm_f32w16_"
	if split {
		n = "convcmk_f32w16_"
	}
	return n + p.coop.String()
}

// coopReady reports whether the device runs convcm.comp at all.
func (d *device) coopReady() bool {
	return d.phys.coopOK && !d.coopFailed.Load() && !coopConvOff()
}

// coopCandidate reports whether Conv o is one convcm.comp could run: an
// f16-weight convolution on the implicit-GEMM path (convPath), on a
// device that runs convcm.comp.
func (d *device) coopCandidate(o *rt.Conv) bool {
	return rt.HalfWeights(o) && d.coopReady() && o.Groups > 0 && convPath(o.C/o.Groups, o.K/o.Groups, o.KH*o.KW) == "gemm"
}

// coopConv reports whether Conv o runs on convcm.comp: a coopCandidate
// that coopConvWins, or any coopCandidate when a test forces the kernel
// (forceConvPath "coop").
func (d *device) coopConv(o *rt.Conv) bool {
	return d.coopCandidate(o) && (forceConvPath == "coop" || forceConvPath == "" && forceGemmTile == "" && coopConvWins(o))
}

// coopConvWins reports whether convcm.comp beats the f32 kernels on Conv
// o: a GEMM depth of at least 192, at least 64 output channels and 8
// input channels per group, and for a 3x3 stride-1 convolution (which
// the f32 kernels run on Winograd F(4,3)) a depth of at least 512. Per
// node on an H100 at batch 1 (docs/benchmarks.md), convcm.comp ran
// resnet50's convolutions 1-12 µs faster than f32 but for conv1 (depth
// 147), and lost 1-8 µs on shallow ones: mobilenet_v2's expansions
// (depth 16-160), squeezenet1_1's expand convolutions (1x1 of depth
// 16-64, Winograd 3x3 of depth 144-432) and its squeezes to 16-48
// channels.
func coopConvWins(o *rt.Conv) bool {
	cg, kg := o.C/o.Groups, o.K/o.Groups
	kd := cg * o.KH * o.KW
	return kd >= 192 && kg >= 64 && cg >= 8 && !(winoApplies(o, rt.F32) && kd < 512)
}

// halfConvSlower reports whether the device refuses f16 weights for Conv
// o because they would run slower than f32 weights: on a device that runs
// convcm.comp, an implicit-GEMM convolution that coopConvWins rejects
// (convgemm.comp's f32w16 tiles are slower than its f32 ones). The
// engine then keeps o's weights in f32 and says so (engine.Info's
// PrecisionNotes). Tests that force a kernel or a split get the f32w16
// kernels.
func (d *device) halfConvSlower(o *rt.Conv) bool {
	if forceConvPath != "" || forceGemmTile != "" || forceSplitK != 0 {
		return false
	}
	return d.coopCandidate(o) && !coopConvWins(o)
}

// coopConvPlan is coopConv for a lowering, which also builds the pipeline
// (unless probing): a driver that lists the shape but cannot build it
// falls back to convgemm.comp for the rest of the device's life.
func (l *lowering) coopConvPlan(o *rt.Conv) bool {
	if !l.d.coopConv(o) {
		return false
	}
	if !l.probe {
		if _, err := l.d.getPipeline(l.d.phys.coopConvVariant(false), 5, []uint32{uint32(coopConvTile.threads())}); err != nil {
			l.d.coopFailed.Store(true)
			return false
		}
	}
	return true
}

// coopConvSplitRule is coopConvSplit, or VRUN_VK_CMSPLIT's rule.
func coopConvSplitRule() splitRule {
	if r, ok := coopConvSplitEnv(); ok {
		return r
	}
	return coopConvSplit
}
