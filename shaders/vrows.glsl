// Vector rows (VROWS variants of softmax.comp and normalize.comp): each
// contiguous row of n = 4*n4 items goes to a team of L lanes, L a power
// of two up to the subgroup size (several rows per subgroup, reduced with
// subgroupShuffleXor), or L >= WG, the whole workgroup (reduced through
// shared memory). A lane holds up to VC 4-item vectors of its row in
// registers (vector j at lane + j*L), loaded with one 128-bit load each
// (64-bit for f16), so X is read once. rt/vulkan's vrowLanes picks L,
// and vrowSpec the workgroup size (spec constant 0) for L >= WG and VC
// (spec constant 1, at most 8: the registers held for the row).
#extension GL_KHR_shader_subgroup_shuffle : require
#include "vec.glsl"

layout(constant_id = 1) const uint VC = 8u;

// vrows_team sets the team of this invocation, its lane in the team and
// the number of teams of the dispatch.
void vrows_team(uint L, out uint team, out uint lane, out uint nteams) {
	uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	if (L >= WG) {
		team = wg;
		lane = gl_LocalInvocationID.x;
		nteams = nwg;
		return;
	}
	uint per = gl_SubgroupSize / L;
	team = (wg * gl_NumSubgroups + gl_SubgroupID) * per + gl_SubgroupInvocationID / L;
	lane = gl_SubgroupInvocationID % L;
	nteams = nwg * gl_NumSubgroups * per;
}

// VROWS_REDUCE folds v over the L lanes of a team of at most a subgroup
// (butterfly: every lane gets the result) with OP.
#define VROWS_REDUCE(v, L, OP) for (uint s_ = (L) >> 1; s_ > 0u; s_ >>= 1) v = OP(v, subgroupShuffleXor(v, s_))
CT vrows_add(CT a, CT b) { return a + b; }
CT vrows_hsum(vec4 v) { return (CT(v.x) + CT(v.y)) + (CT(v.z) + CT(v.w)); }
CT vrows_hmax(vec4 v) { return CT(max(max(v.x, v.y), max(v.z, v.w))); }
