//go:build cgo

package cudashim

import (
	"regexp"
	"strconv"

	"github.com/vrun-go/vrun/rt"
)

// Lowering of the index-driven primitives Gather, GatherElements,
// ScatterElements and TopK. Gather runs on kernels.ptx; the other three
// run on the kernels of indexed.ptx, whose argument structs are
// GatherElArgs, ScatterElArgs and TopKArgs of kernels/indexed.cu.

// onIndexedPTX reports whether op runs on a kernel of indexed.ptx.
func onIndexedPTX(op rt.Op) bool {
	switch op.(type) {
	case *rt.GatherElements, *rt.ScatterElements, *rt.TopK:
		return true
	}
	return false
}

// indexedSupported refuses the ops of indexed.ptx while it is not loaded.
func (d *Device) indexedSupported(op rt.Op) error {
	if d.noIndexed != "" && onIndexedPTX(op) {
		return unsupported(op, rt.OpDType(op), d.noIndexed)
	}
	return nil
}

func (l *lowering) Gather(o *rt.Gather) {
	n := int64(o.Outer) * o.Idx.Len() * int64(o.Inner)
	if n <= 0 {
		return
	}
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Idx)).u(l.ptr(o.Y)).
		ints(o.Outer, o.Axis, o.Inner).i(o.Idx.Len()).i(int64(o.X.DType.Size())).i(b2i(o.Idx.DType == rt.I64)).
		u(0).i(0).b
	l.statusKernel(kGather, [3]uint32{grid1(n), 1, 1}, args)
}

// The argument struct sizes (bytes) of the index kernels with their
// trailing index-status fields (u64 status, i64 tag): GatherArgs of
// kernels/nn.cu, GatherElArgs and ScatterElArgs of kernels/indexed.cu.
const (
	gatherArgBytes    = 8 * 11
	gatherElArgBytes  = 8 * 14
	scatterElArgBytes = 8 * 19
)

// statusKernel records a launch of an index kernel whose arguments end
// with the index-status fields, which the stream fills in.
func (l *lowering) statusKernel(k int, grid [3]uint32, args []byte) {
	l.out = append(l.out, launch{kernel: k, grid: grid, args: args, statusAt: len(args) - 16})
}

var ptxParamRE = regexp.MustCompile(`\.entry (\w+)\(\s*\.param \.align \d+ \.b8 \w+_param_0\[(\d+)\]`)

// ptxParamBytes returns the size of each entry's by-value argument
// struct declared in ptx.
func ptxParamBytes(ptx string) map[string]int {
	out := map[string]int{}
	for _, m := range ptxParamRE.FindAllStringSubmatch(ptx, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}

// ptxHasIndexStatus reports whether the kernels' PTX and indexed.ptx
// declare the argument structs with the index-status fields (PTX built
// before them has smaller structs: the kernels ignore the trailing
// fields and never flag).
func ptxHasIndexStatus(kernels, indexed string) bool {
	k, x := ptxParamBytes(kernels), ptxParamBytes(indexed)
	return k["gather"] == gatherArgBytes && x["gather_elements"] == gatherElArgBytes && x["scatter_elements"] == scatterElArgBytes
}

// strides3 returns the element strides of a [outer, n, inner] view.
func strides3(r rt.Ref) (s0, s1, s2 int64) {
	st := r.StridesOrContiguous()
	return int64(st[0]), int64(st[1]), int64(st[2])
}

func (l *lowering) GatherElements(o *rt.GatherElements) {
	n := int64(o.Outer) * int64(o.N) * int64(o.Inner)
	if n == 0 {
		return
	}
	s0, s1, s2 := strides3(o.Idx)
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Idx)).u(l.ptr(o.Y)).
		ints(o.Outer, o.Axis, o.N, o.Inner).i(s0).i(s1).i(s2).
		i(int64(o.X.DType.Size())).i(b2i(o.Idx.DType == rt.I64)).u(0).i(0).b
	l.statusKernel(kGatherElements, [3]uint32{grid1(n), 1, 1}, args)
}

func (l *lowering) ScatterElements(o *rt.ScatterElements) {
	cols := int64(o.Outer) * int64(o.Inner)
	if cols == 0 || o.N == 0 || o.Axis == 0 {
		return
	}
	is0, is1, is2 := strides3(o.Idx)
	us0, us1, us2 := strides3(o.Upd)
	args := (&argw{}).u(l.ptr(o.Y)).u(l.ptr(o.Idx)).u(l.ptr(o.Upd)).
		ints(o.Outer, o.Axis, o.N, o.Inner).i(is0).i(is1).i(is2).i(us0).i(us1).i(us2).
		i(int64(o.Y.DType)).i(int64(o.Y.DType.Size())).i(b2i(o.Idx.DType == rt.I64)).i(int64(o.Fn)).u(0).i(0).b
	l.statusKernel(kScatterElements, [3]uint32{grid1(cols), 1, 1}, args)
}

func (l *lowering) TopK(o *rt.TopK) {
	n := int64(o.Outer) * int64(o.N) * int64(o.Inner)
	if n == 0 || o.K == 0 {
		return
	}
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Values)).u(l.ptr(o.Indices)).
		ints(o.Outer, o.N, o.Inner, o.K).i(int64(o.X.DType)).i(b2i(o.Largest)).b
	l.kernel(kTopK, [3]uint32{grid1(n), 1, 1}, args)
}
