// Package backendtest holds the plumbing that the tests of the backends
// (cpu, rt/vulkan, clshim, cudashim) share: running ops on a fresh stream,
// uploading bytes, building strided views over buffers exactly as large as
// their span, walking the elements of a shape, and the value ranges and
// [O, N, I] view layouts of the indexed-op tests.
//
// It holds no references: what a backend computes is still compared with
// float64 loops, NumPy data or the CPU backend by each backend's tests.
package backendtest
