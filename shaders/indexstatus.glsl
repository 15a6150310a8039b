// indexstatus.glsl: the stream's index status words (rt.IndexStatusWords),
// binding 3 of gather.comp, gatherel.comp and scatter.comp. A checked op
// (push constant tag = its launch index + 1; 0 for ops with
// AllowOutOfRange) that meets an index outside [-axis, axis) claims word 0
// with a compare-and-swap from 0 and records the index (as given: low and
// high words) and the axis size; the stream zeroes the words before each
// run and reads them after it (rt.IndexStatusError).
layout(std430, binding = 3) buffer BS { uint status[]; };

void flag_index(uint tag, int lo, int hi, uint axis) {
	if (tag != 0u && atomicCompSwap(status[0], 0u, tag) == 0u) {
		status[1] = uint(lo);
		status[2] = uint(hi);
		status[3] = axis;
	}
}
