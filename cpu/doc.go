// Package cpu is vrun's pure-Go CPU backend. Importing it (usually for its
// side effect) registers the backend "cpu" with [rt.Register]; it has one
// device, "cpu:0", which is the host processor.
//
// Buffers are ordinary Go byte slices, aligned to 256 bytes, so the
// kernels view them as []float32, []float64, ... through unsafe.Slice.
// Streams record commands and run them synchronously: Submit executes every
// recorded command in order on the calling goroutine and Wait returns the
// error of the last Submit. Launch prepares each op once (elementwise ops
// get their loop nest planned then), so that replaying a recorded stream
// of elementwise ops allocates nothing. Large kernels split their work
// with a persistent pool of up to runtime.GOMAXPROCS-1 helper goroutines
// (no goroutine is started per op); small ones run on the calling
// goroutine.
//
// Every primitive op of package rt is implemented for f32 and f64, and,
// except OptimStep, for f16 by converting to f32 scratch memory, computing
// and converting back.
// Integer and bool dtypes are supported where the op makes sense (casts,
// arithmetic, comparisons, logic, Where, integer reductions, Gather, Fill);
// [Device.Supports] says exactly which.
//
// MatMul uses a cache-blocked, packed, goroutine-parallel GEMM with a
// register-blocked micro-kernel chosen at run time: AVX-512F assembly
// (12x32 f32, 12x16 f64) or AVX2+FMA assembly (6x16 f32, 6x8 f64) on amd64
// CPUs that have them, a portable 4x4 Go kernel elsewhere or with the purego
// build tag. M == 1 or N == 1 takes a GEMV path. f32 Conv runs, on amd64
// with AVX-512 or AVX2+FMA, on direct-convolution kernels (conv_direct.go),
// Winograd F(4,3) and F(2,3) for 3x3 stride-1 shapes where they pay
// (conv_wino.go), depthwise 3x3 plane kernels and, with AVX2 on planes of
// at most 256 outputs, 1x1 kernels over packed column panels
// (conv_pw.go); otherwise it lowers to
// the GEMM through im2col (or directly for 1x1 convolutions) and uses a
// direct loop for depthwise convolutions. f32 MaxPool has row kernels
// for 2x2 and 3x3 stride-2 windows (AVX-512 and AVX2), and f32 MaxPool and
// AveragePool otherwise run on the vectorised elementwise kernels where
// the CPU has them. The package has no cgo and builds on every
// GOOS/GOARCH.
//
// Deviations and choices where rt leaves room: integer division and
// modulo by zero give 0; float-to-integer casts truncate, map NaN to 0 and
// saturate to the int64 range before wrapping to narrower types; a pooling
// window with no input positions gives -Inf (Max) or 0 (Avg); integer
// Max/Min reductions over N == 0 give 0.
package cpu
