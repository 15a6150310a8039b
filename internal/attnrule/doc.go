// Package attnrule holds the rule by which the GPU backends (rt/vulkan
// and cudashim) choose between their two fused attention kernels: the
// tiled one, 4 query rows per invocation in workgroups of 64 or 128, and
// the row-team one. Both backends implement the same scheme, so they share
// the rule and its knob values.
package attnrule
