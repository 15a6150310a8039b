// Package cpu is vrun's pure-Go CPU backend. Importing it (usually for its
// side effect) registers the backend "cpu" with [rt.Register]; it has one
// device, "cpu:0", which is the host processor.
//
// Buffers are ordinary Go byte slices, aligned to 256 bytes, so the
// kernels view them as []float32, []float64, ... through unsafe.Slice.
// Streams record commands and run them synchronously: Submit executes every
// recorded command in order on the calling goroutine (kernels fan out to
// runtime.GOMAXPROCS worker goroutines internally) and Wait returns the
// error of the last Submit.
//
// Every primitive op of package rt is implemented for f32 and f64, and for
// f16 by converting to f32 scratch memory, computing and converting back.
// Integer and bool dtypes are supported where the op makes sense (casts,
// arithmetic, comparisons, logic, Where, integer reductions, Gather, Fill);
// [Device.Supports] says exactly which.
//
// MatMul uses a cache-blocked, packed, goroutine-parallel GEMM with a
// register-blocked micro-kernel; Conv lowers to that GEMM through im2col
// (or directly for 1x1 convolutions) and uses a direct loop for depthwise
// convolutions. The package has no cgo and builds on every GOOS/GOARCH.
package cpu
