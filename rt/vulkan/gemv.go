//go:build cgo

package vulkan

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// GEMV (MatMul with M == 1 or N == 1) runs gemv.comp, which is built for
// memory bandwidth: see its header for the row and column modes. The
// geometry is a gemvConfig; gemvRowDefault and gemvColumnDefault are what
// the lowering uses unless a test or benchmark sets gemvForce.

// gemvConfig is one gemv.comp geometry.
type gemvConfig struct {
	// WG is the workgroup size (rounded to a multiple of the lane group
	// and capped at the device's limit).
	WG int `json:"wg"`
	// Rows is the number of rows of W each lane group (a subgroup, or LG
	// invocations without subgroup arithmetic) owns in row mode, 1..4.
	Rows int `json:"rows"`
	// Lanes is the number of invocations across outputs in column mode
	// (a power of two); WG/Lanes rows of K run side by side in a
	// workgroup.
	Lanes int `json:"lanes"`
	// Split is the number of K slices of column mode: 0 picks one from
	// gemvTarget, 1 never splits.
	Split int `json:"split"`
	// Unroll is the number of loads per row and lane of one step, all
	// issued before their FMAs: 128-bit chunks of each of the Rows rows
	// in row mode (at most 16 loads of W per lane in all), rows of K in
	// column mode; 1..8, 0 takes gemvUnroll's choice.
	Unroll int `json:"unroll"`
	// Scalar turns off the 128-bit loads.
	Scalar bool `json:"scalar,omitempty"`
	// NoSubgroup reduces through shared memory even where the device
	// has subgroup arithmetic.
	NoSubgroup bool `json:"nosubgroup,omitempty"`
}

// valid reports whether c is a geometry gemv.comp can run (the lowering
// still rounds WG to the device).
func (c gemvConfig) valid() bool {
	pow2 := c.Lanes > 0 && c.Lanes&(c.Lanes-1) == 0
	return c.WG >= 1 && c.WG <= 1024 && c.Rows >= 1 && c.Rows <= gemvMaxRows && pow2 && c.Lanes <= 256 &&
		c.Split >= 0 && c.Split <= 4096 && c.Unroll >= 0 && c.Unroll <= gemvMaxUnroll
}

// gemvCandidates are the tuner's geometries of one mode (tune.go): in
// column mode workgroups of 128 to 1024 with 8 to 64 lanes, four or
// eight rows of K a step, the automatic K split and 1 to 32 slices of at
// least gemvSplitK rows (many rows of K in a workgroup may replace the
// split and its reduction pass); in row mode workgroups of 64 to 256
// owning 1 to 4 rows a lane group with 2 to 8 loads in flight.
func gemvCandidates(column bool, k int) []gemvConfig {
	var out []gemvConfig
	if !column {
		for _, wg := range []int{64, 128, 256} {
			for _, rows := range []int{1, 2, 4} {
				for _, u := range []int{2, 4, 8} {
					out = append(out, gemvConfig{WG: wg, Rows: rows, Lanes: 32, Unroll: u})
				}
			}
		}
		return out
	}
	for _, wg := range []int{128, 256, 512, 1024} {
		for _, lanes := range []int{8, 16, 32, 64} {
			for _, u := range []int{4, 8} {
				for _, s := range []int{0, 1, 2, 4, 8, 16, 32} {
					if s > 1 && k/s < gemvSplitK {
						continue
					}
					out = append(out, gemvConfig{WG: wg, Rows: 2, Lanes: lanes, Split: s, Unroll: u})
				}
			}
		}
	}
	return out
}

func (c gemvConfig) String() string {
	s := fmt.Sprintf("wg%d-r%d-l%d-s%d-u%d", c.WG, c.Rows, c.Lanes, c.Split, c.Unroll)
	if c.Scalar {
		s += "-scalar"
	}
	if c.NoSubgroup {
		s += "-nosg"
	}
	return s
}

// gemvRowDefault is row mode's geometry (W·x, the Linear layout): four
// subgroups per workgroup, one row each, eight 128-bit loads per lane in
// flight. On an H100 (2026-12-06, BenchmarkGEMVVariants Wx, 4096×14336
// f32, one geometry a process, three runs in each of two rounds) it read
// W at 2917-2922 gpu-GB/s, where two rows of four loads (the earlier
// default) gave 2824-2833, one row of four 2861-2864 and one row of two
// 1443-1469; 64 or 256 invocations with one row of eight 2912-2915.
// PyTorch's W·x read 2881 GB/s and its device copy 2992 in the same call.
var gemvRowDefault = gemvConfig{WG: 128, Rows: 1, Lanes: 32, Unroll: 8}

// gemvColumnDefault is column mode's geometry (x·W): the best of the
// H200 sweep of 2026-12-03 (docs/benchmarks.md: wg256, 32 lanes, 3510
// GB/s on 4096×14336 f32) with the automatic K split.
var gemvColumnDefault = gemvConfig{WG: 256, Rows: 2, Lanes: 32}

// gemvForce, when non-nil (tests, benchmarks), replaces both defaults.
var gemvForce *gemvConfig

// gemvGeometry returns the configuration of one mode.
func gemvGeometry(column bool) gemvConfig {
	switch {
	case gemvForce != nil:
		return *gemvForce
	case column:
		return gemvColumnDefault
	}
	return gemvRowDefault
}

// gemvUnroll returns the loads per row and lane of one step: cfg.Unroll
// clamped to 1..8 and, in row mode, to 16 loads of W per lane; 0 takes 4
// (f16 column mode 8: its loads are 64-bit).
func gemvUnroll(cfg gemvConfig, column bool, dt rt.DType, rows int64) int64 {
	u := int64(cfg.Unroll)
	if u <= 0 {
		u = 4
		if column && dt == rt.F16 {
			u = 8
		}
	}
	u = min(u, gemvMaxUnroll)
	if !column {
		u = min(u, max(16/rows, 1))
	}
	return u
}

// gemvTarget is the column-mode workgroups wanted on a GPU (H200: 132
// SMs): fewer split K into slices (a var for BenchmarkGEMVShapes).
var gemvTarget int64 = 132 * 8

const (
	gemvLG        = 32 // lanes per row group without subgroup arithmetic
	gemvMaxRows   = 4  // gemv.comp's RMAX
	gemvMaxUnroll = 8  // gemv.comp's UMAX
	gemvSplitK    = 64 // least K rows of one column-mode slice
)

// subgroup operation bits (VkSubgroupFeatureFlagBits)
const (
	sgBasic      = 0x1
	sgArithmetic = 0x4
)

// hasSubgroupArith reports whether compute shaders may use
// GL_KHR_shader_subgroup_arithmetic.
func (d *device) hasSubgroupArith() bool {
	ops := d.phys.caps.subgroupOps
	return ops&(sgBasic|sgArithmetic) == sgBasic|sgArithmetic && d.phys.caps.subgroupSize > 0
}

// gemv lowers a MatMul with M == 1 or N == 1 (and K >= 128) to gemv.comp,
// followed by splitk.comp where column mode splits K across workgroups.
// push holds matmul.comp's 24 words; offs the element offsets of A, B,
// Bias, Y within their bindings.
func (l *lowering) gemv(o *rt.MatMul, dt rt.DType, kdt string, binds []bind, reads, writes []span, push []uint32, offs []uint32) {
	M, N, K, B := int64(o.M), int64(o.N), int64(o.K), int64(o.Batch)
	// Row mode where both operands run along K; column mode otherwise.
	column := M == 1 && N != 1 && !o.TransB || N == 1 && M != 1 && o.TransA
	cfg := gemvGeometry(column)
	if gemvForce == nil {
		key := fmt.Sprintf("gemv %s m%d n%d k%d b%d f%d o%d,%d", kdt, M, N, K, B, push[3]&3, offs[0]%8, offs[1]%8)
		cands := func() []gemmPick {
			var out []gemmPick
			for _, c := range gemvCandidates(column, o.K) {
				out = append(out, gemmPick{GEMV: &c})
			}
			return out
		}
		if p, ok := l.tunedPick(key, cands); ok && p.GEMV != nil {
			cfg = *p.GEMV
		}
	}
	lim := l.d.phys.limits
	cpu := l.d.phys.info.Kind == rt.KindCPU
	sg := !cfg.NoSubgroup && l.d.hasSubgroupArith()
	shader := "gemv_" + kdt
	half := kdt != dt.String() // f16 weights (gemv_f32w16): loaded like f16
	unit := int64(gemvLG)
	if sg {
		shader = "gemvsg_" + kdt
		unit = max(int64(l.d.phys.caps.subgroupSize), 1)
	}
	lanes := int64(max(cfg.Lanes, 1))
	unit = max(unit, lanes) // WG is a multiple of both (both powers of two)
	wg := max(int64(cfg.WG), unit) / unit * unit
	for wg > unit && wg > int64(lim.MaxComputeWorkGroupInvocations) {
		wg -= unit
	}
	rows := int64(min(max(cfg.Rows, 1), gemvMaxRows))
	udt := dt
	if half {
		udt = rt.F16
	}
	unroll := gemvUnroll(cfg, column, udt, rows)
	spec := []uint32{uint32(wg), uint32(rows), uint32(lanes), gemvLG, uint32(unroll)}

	p := append(append([]uint32(nil), push...), 1, uint32(K))
	wisA := M != 1
	if wisA {
		p[3] |= 16
	}
	aligned := func(n int64, xs ...int64) bool {
		for _, x := range xs {
			if x%n != 0 {
				return false
			}
		}
		return true
	}
	sa, sb := int64(o.StrideA), int64(o.StrideB)
	if B == 1 {
		sa, sb = 0, 0
	}
	vec := !cfg.Scalar && dt != rt.F64
	bz := uint32(min(B, int64(l.d.maxGroups[2])))
	if !column {
		// W rows start at multiples of K; V and W at their offsets. A
		// chunk (one 128-bit load) is four f32 or eight f16 (f16
		// weights: eight, two 128-bit loads of the f32 operand).
		chunk := int64(4)
		if dt == rt.F16 || half {
			chunk = 8
		}
		if vec && aligned(chunk, K, int64(offs[0]), int64(offs[1]), sa, sb) {
			p[3] |= 32
		}
		ng := wg / unit * rows // rows per workgroup
		g := groups2D(l.d, (M*N+ng-1)/ng)
		g[2] = bz
		l.add(dispatch{shader: shader, spec: spec,
			binds: binds, reads: reads, writes: writes, push: p, groups: g})
		return
	}
	p[3] |= 8
	L, offW, sw := N, int64(offs[1]), sb
	if wisA {
		L, offW, sw = M, int64(offs[0]), sa
	}
	per := lanes
	if vec && aligned(4, L, offW, sw) {
		p[3] |= 32
		per *= 4
	}
	ngroups := (L + per - 1) / per
	s := int64(1)
	switch {
	case cfg.Split > 0:
		s = min(int64(cfg.Split), K)
	case !cpu && ngroups*B < gemvTarget:
		s = min((gemvTarget+ngroups*B-1)/(ngroups*B), K/gemvSplitK)
	}
	s = max(min(s, int64(l.d.maxGroups[1])), 1)
	ks := (K + s - 1) / s
	s = (K + ks - 1) / ks
	es := int64(4)
	if dt == rt.F64 {
		es = 8
	}
	scratch := B * s * L * es
	if s > 1 && (!fits32(B*s*L) || scratch > l.d.maxRange) {
		s, ks = 1, K
	}
	gx := uint32(min(ngroups, int64(l.d.maxGroups[0])))
	if s == 1 {
		l.add(dispatch{shader: shader, spec: spec, binds: binds, reads: reads, writes: writes, push: p,
			groups: [3]uint32{gx, 1, bz}})
		return
	}
	// partial pass: V, W -> scratch; reduction: scratch, Bias -> Y
	p[24], p[25] = uint32(s), uint32(ks)
	sbd, ss := splitPlan{s: int(s), ks: int(ks), bytes: scratch}.scratch()
	l.add(dispatch{shader: shader, spec: spec, binds: []bind{binds[0], binds[1], binds[2], sbd},
		reads: reads[:2], writes: []span{ss}, push: p, groups: [3]uint32{gx, uint32(s), bz}, scratch: scratch})
	rflags := uint32(0)
	rreads := []span{ss}
	if o.Bias.Buf != nil {
		rflags = 1
		rreads = append(rreads, reads[2])
	}
	rp := []uint32{uint32(M), uint32(N), uint32(s), uint32(B),
		uint32(N), 0, uint32(N), uint32(o.StrideY),
		offs[3], offs[2], 0, rflags, push[12], push[13], uint32(o.Act.Fn), 0,
		push[16], push[17], push[18], push[19], push[20], push[21], push[22], push[23]}
	l.add(dispatch{shader: "splitk_" + dt.String(), spec: []uint32{wgSize}, binds: []bind{sbd, binds[2], binds[3], sbd}, // Res: a dummy
		reads: rreads, writes: writes, push: rp, groups: groups1D(l.d, B*M*N, wgSize), scratch: scratch})
}
