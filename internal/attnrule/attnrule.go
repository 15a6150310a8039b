package attnrule

import "github.com/vrun-go/vrun/rt"

const (
	// MaxHead bounds D and Dv of the tiled kernels.
	MaxHead = 64
	// MinRows is the fewest query rows the tiled kernels take: below that
	// most of their 16 or 32 rows per workgroup would idle, and the
	// row-team kernels fill the GPU better (decoding, Lq = 1).
	MinRows = 16
)

// Tiled reports whether the tiled kernel takes o, and its workgroup size:
// 128 where that still gives two workgroups per compute unit of a large
// GPU (264 on an H200's 132), else 64. force is a backend's knob value:
// "rows" forces the row-team kernel, "tiled64" and "tiled128" the tiled
// one with that size, and "tiled" the tiled one below MinRows; head sizes
// above MaxHead always go to the row-team kernel.
func Tiled(o *rt.Attention, force string) (bool, int) {
	if max(o.D, o.Dv) > MaxHead || force == "rows" {
		return false, 0
	}
	switch force {
	case "tiled64":
		return true, 64
	case "tiled128":
		return true, 128
	}
	if o.Lq < MinRows && force != "tiled" {
		return false, 0
	}
	if int64(o.B)*int64(o.H)*int64((o.Lq+31)/32) >= 264 {
		return true, 128
	}
	return true, 64
}
