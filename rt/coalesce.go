package rt

// Coalesce simplifies the iteration space of an elementwise op: shape with
// one element-stride list per operand. It drops dims of size 1 and merges
// each dim into the next outer one where that is contiguous for every
// operand (outer stride = inner stride * inner size). dims and st[k] are
// outermost first; a scalar space has no dims. A shape with a zero dim
// gives dims [0] and zero strides. The inputs are not modified.
//
// Every backend's elementwise kernels walk the coalesced space, so that
// strided views of any rank fit their fixed rank when they can.
func Coalesce(shape []int, strides ...[]int) (dims []int, st [][]int) {
	st = make([][]int, len(strides))
	for _, s := range shape {
		if s == 0 {
			dims = []int{0}
			for k := range st {
				st[k] = []int{0}
			}
			return dims, st
		}
	}
	for d, s := range shape {
		if s == 1 {
			continue
		}
		if n := len(dims); n > 0 && mergeable(st, strides, n-1, d, s) {
			dims[n-1] *= s
			for k := range strides {
				st[k][n-1] = strides[k][d]
			}
			continue
		}
		dims = append(dims, s)
		for k := range strides {
			st[k] = append(st[k], strides[k][d])
		}
	}
	return dims, st
}

// mergeable reports whether dim d (of size s) continues coalesced dim c in
// every operand.
func mergeable(st, strides [][]int, c, d, s int) bool {
	for k := range strides {
		if st[k][c] != strides[k][d]*s {
			return false
		}
	}
	return true
}
