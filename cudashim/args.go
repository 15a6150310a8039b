package cudashim

import (
	"encoding/binary"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// argw packs a kernel's by-value argument struct: every field of the
// structs in kernels/*.cu is 8 bytes (i64, u64 or double), so the struct
// is a flat little-endian array of 64-bit words in declaration order.
type argw struct{ b []byte }

func (a *argw) i(v int64) *argw {
	a.b = binary.LittleEndian.AppendUint64(a.b, uint64(v))
	return a
}

func (a *argw) u(v uint64) *argw {
	a.b = binary.LittleEndian.AppendUint64(a.b, v)
	return a
}

func (a *argw) f(v float64) *argw { return a.u(math.Float64bits(v)) }

func (a *argw) ints(v ...int) *argw {
	for _, x := range v {
		a.i(int64(x))
	}
	return a
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

const (
	maxRank = 8 // MAXR in common.cuh
	maxOps  = 4 // MAXOP
	nt      = 256
)

// ewSpace is a coalesced elementwise iteration space: dims innermost
// first, with one stride per operand and dim.
type ewSpace struct {
	n     int64
	shape []int64
	st    [maxOps][]int64
}

// coalesce merges dims with rt.Coalesce and turns the space innermost
// first, as the kernels walk it. ok is false when the result has more
// than maxRank dims.
func coalesce(shape []int, strides ...[]int) (sp ewSpace, ok bool) {
	sp.n = rt.NumElements(shape)
	if sp.n == 0 {
		return sp, true
	}
	dims, st := rt.Coalesce(shape, strides...)
	r := len(dims)
	if r > maxRank {
		return sp, false
	}
	sp.shape = make([]int64, r)
	for i := range dims {
		sp.shape[i] = int64(dims[r-1-i])
	}
	for o := range strides {
		sp.st[o] = make([]int64, r)
		for i := range dims {
			sp.st[o][i] = int64(st[o][r-1-i])
		}
	}
	return sp, true
}

// ewArgs packs an EwArgs struct (kernels/ew.cu).
func ewArgs(sp ewSpace, ptrs []uint64, dts []int64, fn int64, alpha, beta float64, bits uint64) []byte {
	a := &argw{b: make([]byte, 0, 54*8)}
	a.i(sp.n).i(int64(len(sp.shape)))
	for d := 0; d < maxRank; d++ {
		if d < len(sp.shape) {
			a.i(sp.shape[d])
		} else {
			a.i(1)
		}
	}
	for k := 0; k < maxOps; k++ {
		if k < len(ptrs) {
			a.u(ptrs[k])
		} else {
			a.u(0)
		}
	}
	for k := 0; k < maxOps; k++ {
		for d := 0; d < maxRank; d++ {
			if k < len(ptrs) && d < len(sp.st[k]) {
				a.i(sp.st[k][d])
			} else {
				a.i(0)
			}
		}
	}
	for k := 0; k < maxOps; k++ {
		if k < len(dts) {
			a.i(dts[k])
		} else {
			a.i(0)
		}
	}
	a.i(fn).f(alpha).f(beta).u(bits)
	return a.b
}

// grid1 is the block count of a grid-stride loop over n items.
func grid1(n int64) uint32 {
	g := (n + nt - 1) / nt
	return uint32(max(1, min(g, 1<<16)))
}
