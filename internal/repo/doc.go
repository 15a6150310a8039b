// Package repo finds files of the vrun source tree for tests, whether the
// test binary runs where it was built or on another machine (the GPU
// machine runs cross-compiled test binaries from a copy of the tree).
package repo
