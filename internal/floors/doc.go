// Package floors records how many cases of each shared test suite pass on
// each device class, so that a regression into skips fails a test instead
// of passing quietly. A case that starts to skip (an op no longer claimed,
// a feature now refused, a dtype dropped) leaves every assertion green but
// lowers the pass count; [Check] fails the test when the count falls below
// the floor.
//
// Floors are today's counts, measured on the devices CI runs: the CPU
// backend, lavapipe (Mesa's CPU Vulkan driver) and pocl (CPU OpenCL),
// and on the NVIDIA H200 of the GPU test machine through CUDA, Vulkan and
// OpenCL.
// Raise a floor when more cases pass; never lower one to make a test pass.
// A device with no recorded floor (a GPU that CI does not have) is logged
// with its count, so that its floor can be added here once measured.
package floors
