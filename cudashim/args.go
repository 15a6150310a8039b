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

// coalesce drops size-1 dims and merges dims that are contiguous for
// every operand, like the CPU backend's plan. ok is false when the result
// has more than maxRank dims.
func coalesce(shape []int, strides ...[]int) (sp ewSpace, ok bool) {
	var cs []int64
	var cst [maxOps][]int64
	sp.n = 1
	for d, s := range shape {
		sp.n *= int64(s)
		if s == 1 {
			continue
		}
		if k := len(cs); k > 0 && s != 0 {
			merge := true
			for o := range strides {
				if cst[o][k-1] != int64(strides[o][d])*int64(s) {
					merge = false
					break
				}
			}
			if merge {
				cs[k-1] *= int64(s)
				for o := range strides {
					cst[o][k-1] = int64(strides[o][d])
				}
				continue
			}
		}
		cs = append(cs, int64(s))
		for o := range strides {
			cst[o] = append(cst[o], int64(strides[o][d]))
		}
	}
	if sp.n == 0 {
		return sp, true
	}
	if len(cs) > maxRank {
		return sp, false
	}
	r := len(cs)
	sp.shape = make([]int64, r)
	for i := range cs {
		sp.shape[i] = cs[r-1-i]
	}
	for o := range strides {
		sp.st[o] = make([]int64, r)
		for i := range cs {
			sp.st[o][i] = cst[o][r-1-i]
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

// fillBits encodes v in dtype dt like the CPU backend's Fill.
func fillBits(dt int64, v float64) uint64 {
	f2i := func(v float64) int64 {
		switch {
		case v != v:
			return 0
		case v >= 9.223372036854775807e18:
			return math.MaxInt64
		case v <= -9.223372036854775808e18:
			return math.MinInt64
		}
		return int64(v)
	}
	switch dt {
	case 1: // f32
		return uint64(math.Float32bits(float32(v)))
	case 2: // f16
		return uint64(rt.F16Bits(float32(v)))
	case 3: // f64
		return math.Float64bits(v)
	case 4: // i32
		return uint64(uint32(int32(f2i(v))))
	case 5: // i64
		return uint64(f2i(v))
	case 6: // u8
		return uint64(uint8(f2i(v)))
	case 8: // i8
		return uint64(uint8(int8(f2i(v))))
	case 7: // bool
		if v != 0 {
			return 1
		}
	}
	return 0
}
