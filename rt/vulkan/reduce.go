//go:build cgo

package vulkan

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

var intReduce = map[rt.ReduceFn]bool{rt.Sum: true, rt.RMax: true, rt.RMin: true, rt.Prod: true, rt.SumSquare: true, rt.L1: true}

// rowGroups picks how reduce.comp and softmax.comp walk total rows of
// stride inner: mode 0, one workgroup per row (contiguous rows, or few of
// them), or mode 1, one invocation per row.
func (l *lowering) rowGroups(inner int, total int64) (mode uint32, groups [3]uint32) {
	if inner == 1 || total < 1024 {
		return 0, groups2D(l.d, total)
	}
	return 1, groups1D(l.d, total, wgSize)
}

// rowCache is the number of elements per invocation that softmax.comp and
// normalize.comp keep in registers (their CACHE): a contiguous row of at
// most wgSize*rowCache elements is read from memory once.
const rowCache = 32

// noRowCache (tests, benchmarks) turns the register-held rows off.
var noRowCache bool

// noSubgroupRows (tests, benchmarks) keeps softmax.comp and
// normalize.comp on their shared-memory reductions where the device has
// subgroup arithmetic.
var noSubgroupRows bool

// rowShader returns the softmax.comp or normalize.comp variant for dt:
// the SUBGROUP one (subgroup reductions) for f32 and f16 where the device
// has subgroup arithmetic. sgRows reports whether it gives each
// contiguous row of n elements to one subgroup (at most rowCache
// elements per lane; workgroup-wide rows where a row fills most of a
// workgroup anyway, n > wgSize*rowCache/4).
func (l *lowering) rowShader(name string, dt rt.DType, n int) (shader string, sgRows bool) {
	if dt != rt.F64 && !noSubgroupRows && l.d.hasSubgroupArith() {
		sgs := int(l.d.phys.caps.subgroupSize)
		return name + "sg_" + dt.String(), !noRowCache && n <= sgs*rowCache && n <= wgSize*rowCache/4
	}
	return name + "_" + dt.String(), false
}

// sgShuffle is VK_SUBGROUP_FEATURE_SHUFFLE_BIT (subgroupShuffleXor).
const sgShuffle = 0x10

// vrowVectors is the 4-item vectors a lane of softmax.comp and
// normalize.comp's VROWS variants holds (vrows.glsl's VC), and
// vrowTarget the vectors per lane vrowLanes aims at.
const vrowVectors = 8

// vrowTarget is the vectors per lane vrowLanes aims at: 2 puts rows of
// 128 on 16 lanes and leaves rows of 768 on a subgroup's 32. H200,
// 2026-12-04 (BenchmarkBandwidth, one run; the copy kernel 3846 GB/s of
// GPU time): softmax rows of 128 on 16 lanes 3496, on 8 3423, on 4 (the
// former target 8) 3017; layer norm 3403, 3379, 3011.
var vrowTarget = 2

// Knobs of the row kernels' geometry (benchmarks; BenchmarkBandwidth
// times each against its default):
//   - vrowWG and reduceWG: the workgroup size of softmax and layer norm's
//     VROWS variants, and of reduce.comp's, for rows given to a whole
//     workgroup (0: wgSize; capped by the device and rounded down to a
//     multiple of the subgroup size);
//   - vrowFullVC: softmax and layer norm's VROWS variants hold vrowVectors
//     vectors per lane whatever the row needs (the former fixed VC),
//     instead of just the row's (vrows.glsl's VC, spec constant 1), which
//     frees registers for more rows in flight;
//   - reduceVecLoads: the vector loads in flight per lane of reduce.comp's
//     VROWS variants (its VU, spec constant 2; 1 to 16).
//
// H200, 2026-12-04 (BenchmarkBandwidth, one run; the copy kernel 3846 GB/s
// of GPU time): softmax and layer norm rows of 8192 on workgroups of 512
// 3267 and 3180 GB/s, of 256 3064 and 3057, of 1024 2879 and 2830; the
// full VC changed nothing (3067, 3052); sum rows with 4 loads in flight
// 3438, 8 2925, 16 751; reduce workgroups of 512 or 1024 lost (1012, 546).
var (
	vrowWG         = 512
	reduceWG       int
	vrowFullVC     bool
	reduceVecLoads = 4
)

// rowWG is the workgroup size for rows given to a whole workgroup with
// the knob k (vrowWG or reduceWG).
func (l *lowering) rowWG(k int) int {
	wg := wgSize
	if k > 0 {
		wg = k
	}
	ns := max(int(l.d.phys.caps.subgroupSize), 1)
	wg = min(wg, int(l.d.phys.limits.MaxComputeWorkGroupInvocations))
	wg -= wg % ns
	return max(wg, ns)
}

// vrowSpec is the specialization of a VROWS variant of softmax.comp or
// normalize.comp for lanes per row of n items: the workgroup size
// (spec constant 0) and VC, the vectors a lane holds (spec constant 1).
func (l *lowering) vrowSpec(lanes, n int) []uint32 {
	wg := wgSize
	if lanes > int(l.d.phys.caps.subgroupSize) {
		wg = lanes
	}
	vc := vrowVectors
	if !vrowFullVC {
		vc = min(max((n/4+lanes-1)/lanes, 1), vrowVectors)
	}
	return []uint32{uint32(wg), uint32(vc)}
}

// noVecRows (tests, benchmarks) turns the VROWS variants off;
// vrowForceLanes, when > 0, sets their lanes per row (a power of two up
// to the subgroup size, or wgSize).
var (
	noVecRows      bool
	vrowForceLanes int
)

// vrowLanes picks the VROWS variant's lanes per contiguous row of n
// elements at element offsets offs within their bindings, for softmax
// and layer norm, which hold at most vrowVectors vectors per lane: 0 when
// it cannot run them (f64, no subgroup shuffles, n not a multiple of 4,
// an offset not a multiple of 4, a row past wgSize*vrowVectors*4
// elements). Otherwise the least power of two that gives each lane at
// most vrowTarget vectors, up to the subgroup size; rows that need more
// lanes than a subgroup go to a whole workgroup (wgSize).
func (l *lowering) vrowLanes(dt rt.DType, n int, offs ...uint32) int {
	wg := l.rowWG(vrowWG)
	if noRowCache || n > wg*vrowVectors*4 {
		return 0
	}
	return l.vecRowLanes(dt, n, vrowTarget, vrowVectors, wg, offs)
}

// vecRowLanes is vrowLanes for target vectors per lane, and a whole
// workgroup of wg invocations when a subgroup's lanes would take more
// than most each (vrowForceLanes == wgSize forces that): 0 unless the
// row is a multiple of 4 items at offsets that are multiples of 4.
func (l *lowering) vecRowLanes(dt rt.DType, n, target, most, wg int, offs []uint32) int {
	if n%4 != 0 {
		return 0
	}
	for _, o := range offs {
		if o%4 != 0 {
			return 0
		}
	}
	return l.rowLanes(dt, n/4, target, most, wg)
}

// rowLanes is the lanes per row of n items (4-item vectors or scalars)
// of a VROWS variant: the least power of two that gives each lane at
// most target items, up to the subgroup size, or wg (a whole workgroup)
// when a subgroup's lanes would take more than most each. 0 when the
// device cannot run the VROWS variants (f64, no subgroup shuffles).
func (l *lowering) rowLanes(dt rt.DType, n, target, most, wg int) int {
	c := l.d.phys.caps
	ns := int(c.subgroupSize)
	if noVecRows || noSubgroupRows || dt == rt.F64 || !l.d.hasSubgroupArith() || c.subgroupOps&sgShuffle == 0 ||
		ns < 1 || wgSize%ns != 0 || n == 0 {
		return 0
	}
	if f := vrowForceLanes; f > 0 {
		if f == wgSize {
			return wg
		}
		if f <= ns && f&(f-1) == 0 && n <= f*most {
			return f
		}
		return 0
	}
	lanes := 1
	for lanes*target < n && lanes < ns {
		lanes *= 2
	}
	if n > lanes*most {
		return wg
	}
	return lanes
}

// reduceTarget and reduceMost are vecRowLanes' vectors per lane for
// reduce.comp's VROWS variants, which hold none: rows past a subgroup's
// reduceMost vectors a lane go to a whole workgroup.
const (
	reduceTarget = 8
	reduceMost   = 16
)

// vrowGroups is the workgroup grid of rows rows for lanes per row in
// workgroups of spec[0] invocations.
func (l *lowering) vrowGroups(rows int64, lanes int, spec []uint32) [3]uint32 {
	per := int64(max(int(spec[0])/lanes, 1))
	return groups2D(l.d, (rows+per-1)/per)
}

// sgRowGroups is the workgroup grid of rows rows, one per subgroup.
func (l *lowering) sgRowGroups(rows int64) [3]uint32 {
	per := max(int64(wgSize)/max(int64(l.d.phys.caps.subgroupSize), 1), 1)
	return groups2D(l.d, (rows+per-1)/per)
}

// cachedRow reports whether a contiguous row of n elements is held in
// registers by softmax.comp and normalize.comp.
func cachedRow(n int) bool { return !noRowCache && n <= wgSize*rowCache }

func (l *lowering) Reduce(o *rt.Reduce) {
	dt := o.X.DType
	arg := o.Fn == rt.ArgMax || o.Fn == rt.ArgMin
	if o.Fn >= rt.ReduceFn(rt.NumReduceFns) {
		l.err = l.unsupported(dt, "unknown reduce function %d", o.Fn)
		return
	}
	switch {
	case isFloat(dt):
		if err := l.needDType(dt); err != nil {
			l.err = err
			return
		}
	case (dt == rt.I32 || dt == rt.I64) && intReduce[o.Fn]:
		if err := l.needDType(dt); err != nil {
			l.err = err
			return
		}
	default:
		l.err = l.unsupported(dt, "reduce %s is implemented for f32, f16, f64 (and Sum/Max/Min/Prod/SumSquare/L1 for i32, i64)", o.Fn)
		return
	}
	want := dt
	if arg {
		want = rt.I64
	}
	if o.Y.DType != want {
		l.err = fmt.Errorf("%s: Y is %s, want %s", l.op.OpName(), o.Y.DType, want)
		return
	}
	total := int64(o.Outer) * int64(o.Inner)
	nx := total * int64(o.N)
	if total == 0 {
		return
	}
	if !fits32(nx) {
		l.err = fmt.Errorf("%s: %d elements exceed 2^32", l.op.OpName(), nx)
		return
	}
	if o.N == 0 && (arg || o.Fn == rt.Mean) {
		l.err = fmt.Errorf("%s: empty reduction axis", l.op.OpName())
		return
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "Y"}, []rt.Ref{o.X, o.Y}, []int64{nx, total}, 1)
	if !ok {
		return
	}
	shader := "reduce_" + dt.String()
	if arg {
		shader = "argreduce_" + dt.String()
	}
	mode, groups := l.rowGroups(o.Inner, total)
	sel := uint32(0)
	if o.SelectLast {
		sel = 1
	}
	spec := []uint32{wgSize}
	if o.Inner == 1 && !arg && o.Fn != rt.LogSumExp && isFloat(dt) {
		// 4-item vector loads (mode 0) where the rows allow, else scalar
		// ones (mode 1): a team of lanes a row beats mode 0's workgroup
		// (a shared-memory tree) on short rows, such as a global average
		// pool's 7×7 or 13×13.
		rwg := l.rowWG(reduceWG)
		lanes, vmode := l.vecRowLanes(dt, o.N, reduceTarget, reduceMost, rwg, offs[:1]), uint32(0)
		if lanes == 0 {
			lanes, vmode = l.rowLanes(dt, o.N, reduceTarget, reduceMost, rwg), 1
		}
		if lanes > 0 {
			// word 4 (selectLast) carries the lanes
			mode = vmode
			wg := wgSize
			if lanes > int(l.d.phys.caps.subgroupSize) {
				wg = lanes
			}
			spec = []uint32{uint32(wg), 1, uint32(min(max(reduceVecLoads, 1), 16))}
			shader, sel, groups = "reducev_"+dt.String(), uint32(lanes), l.vrowGroups(total, lanes, spec)
		}
	}
	l.add(dispatch{shader: shader, spec: spec, binds: binds, reads: reads, writes: writes, groups: groups,
		push: []uint32{uint32(o.Outer), uint32(o.N), uint32(o.Inner), uint32(o.Fn), sel, offs[0], offs[1], mode}})
}

func (l *lowering) Softmax(o *rt.Softmax) {
	dt := o.X.DType
	if !l.floatOnly(dt) {
		return
	}
	if o.Y.DType != dt {
		l.err = fmt.Errorf("Softmax: Y is %s, want %s", o.Y.DType, dt)
		return
	}
	total := int64(o.Outer) * int64(o.Inner)
	n := total * int64(o.N)
	if n == 0 {
		return
	}
	if !fits32(n) {
		l.err = fmt.Errorf("Softmax: %d elements exceed 2^32", n)
		return
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "Y"}, []rt.Ref{o.X, o.Y}, []int64{n, n}, 1)
	if !ok {
		return
	}
	mode, groups := l.rowGroups(o.Inner, total)
	if o.Inner == 1 && cachedRow(o.N) {
		mode = 2
	}
	shader, sgRows := l.rowShader("softmax", dt, o.N)
	if o.Inner == 1 && sgRows {
		mode, groups = 3, l.sgRowGroups(total)
	}
	lanes := 0
	if o.Inner == 1 {
		lanes = l.vrowLanes(dt, o.N, offs...)
	}
	spec := []uint32{wgSize}
	if lanes > 0 {
		spec = l.vrowSpec(lanes, o.N)
		shader, mode, groups = "softmaxv_"+dt.String(), 4, l.vrowGroups(total, lanes, spec)
	}
	lg := uint32(0)
	if o.Log {
		lg = 1
	}
	l.add(dispatch{shader: shader, spec: spec, binds: binds, reads: reads, writes: writes, groups: groups,
		push: []uint32{uint32(o.Outer), uint32(o.N), uint32(o.Inner), lg, offs[0], offs[1], mode, uint32(lanes)}})
}

func (l *lowering) Normalize(o *rt.Normalize) {
	dt := o.X.DType
	if !l.floatOnly(dt) {
		return
	}
	n := int64(o.Outer) * int64(o.N)
	if n == 0 {
		return
	}
	if !fits32(n) {
		l.err = fmt.Errorf("Normalize: %d elements exceed 2^32", n)
		return
	}
	names := []string{"X", "Scale", "Bias", "Y"}
	refs := []rt.Ref{o.X, o.Scale, o.Bias, o.Y}
	elems := []int64{n, int64(o.N), int64(o.N), n}
	flags := uint32(0)
	if o.Scale.Buf != nil {
		flags |= 1
	} else {
		refs[1], elems[1] = o.X, 1
	}
	if o.Bias.Buf != nil {
		flags |= 2
	} else {
		refs[2], elems[2] = o.X, 1
	}
	for i, r := range refs {
		if r.DType != dt {
			l.err = fmt.Errorf("Normalize: %s is %s, want %s", names[i], r.DType, dt)
			return
		}
	}
	binds, offs, reads, writes, ok := l.bindsOf(names, refs, elems, 3)
	if !ok {
		return
	}
	if cachedRow(o.N) {
		flags |= 4
	}
	groups := groups2D(l.d, int64(o.Outer))
	shader, sgRows := l.rowShader("normalize", dt, o.N)
	if sgRows {
		flags |= 8
		groups = l.sgRowGroups(int64(o.Outer))
	}
	lanes := l.vrowLanes(dt, o.N, offs...)
	spec := []uint32{wgSize}
	if lanes > 0 {
		spec = l.vrowSpec(lanes, o.N)
		shader, groups = "normalizev_"+dt.String(), l.vrowGroups(int64(o.Outer), lanes, spec)
	}
	e := realBits(dt, o.Eps)
	l.add(dispatch{shader: shader, spec: spec, binds: binds, reads: reads, writes: writes,
		groups: groups,
		push:   []uint32{uint32(o.Outer), uint32(o.N), flags, uint32(lanes), offs[0], offs[1], offs[2], offs[3], e[0], e[1]}})
}
