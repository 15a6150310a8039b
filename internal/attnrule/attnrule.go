package attnrule

import "github.com/vrun-go/vrun/rt"

const (
	// MaxHead bounds D and Dv of the tiled kernels.
	MaxHead = 64
	// MinRows is the fewest query rows the tiled kernels take: below that
	// most of their 16 or 32 rows per workgroup would idle, and the
	// row-team kernels fill the GPU better (decoding, Lq = 1).
	MinRows = 16
	// MinGroups is the fewest workgroups (of 16 query rows) the tiled
	// kernels take: two per compute unit of a large GPU (an H200 has
	// 132). With fewer, each walks its keys with too little beside it to
	// hide the latency: BERT-base at batch 1 (96 workgroups) took 1.81 ms
	// on an H100's CUDA with the tiled kernel and 1.63 with the row-team
	// one (Vulkan 2.85 and 2.73), while at batch 8 the tiled one was
	// ahead (6.08 against 6.53 ms; Vulkan 7.72 against 8.34).
	MinGroups = 264
)

// Tiled reports whether the tiled kernel takes o, and its workgroup size:
// 128 where that still gives MinGroups workgroups, else 64. force is a
// backend's knob value: "rows" forces the row-team kernel, "tiled64" and
// "tiled128" the tiled one with that size, and "tiled" the tiled one
// below MinRows and MinGroups; head sizes above MaxHead always go to the
// row-team kernel.
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
	heads := int64(o.B) * int64(o.H)
	if force != "tiled" && (o.Lq < MinRows || heads*int64((o.Lq+15)/16) < MinGroups) {
		return false, 0
	}
	if heads*int64((o.Lq+31)/32) >= MinGroups {
		return true, 128
	}
	return true, 64
}
