// Package cudashim is vrun's CUDA backend. Importing it registers the
// backend "cuda" with [rt.Register]; its devices are "cuda:0", "cuda:1", ...
//
// # Building
//
// The package needs no CUDA headers or libraries to build: cuda_shim.h
// declares the handful of driver and cuBLAS types and entry points it
// uses, and the libraries are opened at run time (dlopen, or LoadLibrary
// on Windows): the driver libcuda.so.1 (nvcuda.dll) and cuBLAS
// libcublas.so.13, .12 or .11 (cublas64_13.dll, _12, _11). It cross-builds
// with cgo, e.g.
//
//	CGO_ENABLED=1 GOOS=windows GOARCH=amd64 CC=x86_64-w64-mingw32-gcc go build ./cudashim
//
// Without cgo the backend registers but reports rt.ErrUnavailable. A
// missing driver or library is an error wrapping rt.ErrUnavailable that
// names it; the libraries are loaded once, lazily, by the first Devices or
// Open call, and the outcome is remembered.
//
// # Kernels and PTX
//
// The kernels are CUDA C++ in kernels/*.cu (one translation unit,
// kernels.cu, includes the parts). kernels/build.sh compiles them with
// nvcc to kernels/kernels.ptx for the virtual architecture compute_75, so
// the driver JIT-compiles the PTX for any GPU from sm_75 (Turing) up, and
// writes kernels/kernels.ptx.sha256 with the hash of the sources and of
// the PTX. The PTX is embedded with go:embed and loaded with
// cuModuleLoadDataEx; TestPTXMatchesSources (no GPU needed) fails when
// the sources changed without rebuilding. To rebuild, on a machine with
// nvcc 13.0:
//
//	cudashim/kernels/build.sh
//	git add cudashim/kernels && git commit -m "cudashim: rebuild PTX" -- cudashim/kernels
//
// Where nvcc is unavailable, "build.sh --placeholder" writes a placeholder
// PTX (and the sources hash); devices then fail to open with "cudashim:
// embedded PTX is a placeholder; run cudashim/kernels/build.sh on a
// machine with nvcc". For kernel development, VRUN_CUDA_PTX=/path/to.ptx
// loads that file instead of the embedded PTX.
//
// GatherElements, ScatterElements and TopK live in a second module:
// kernels/indexed.cu compiles on its own to kernels/indexed.ptx, with its own
// kernels/indexed.ptx.sha256 (kernels.ptx's sources exclude indexed.cu), so
// adding them did not invalidate kernels.ptx. build.sh builds both
// modules ("build.sh --indexed" only indexed.ptx); "build.sh
// --indexed-placeholder" writes a placeholder indexed.ptx. While indexed.ptx is
// the placeholder, devices still open and run every other op, and report
// the three as *rt.UnsupportedError ("indexed.ptx not built; run
// cudashim/kernels/build.sh on a machine with nvcc").
// VRUN_CUDA_INDEXED_PTX=/path/to.ptx loads that file instead of the
// embedded indexed.ptx. ScatterElements runs one thread per output column
// (o, i) that applies its updates in order, so duplicates resolve like the
// CPU backend (the last Set wins) and results are deterministic; TopK
// ranks each element against its column, stopping once the rank reaches K.
//
// Gather, GatherElements and ScatterElements report an index out of range
// (rt.IndexError from Stream.Wait): their argument structs end with the
// stream's index status words and the op's tag (flag_index in
// common.cuh), which the stream fills in at Launch; each run copies zeros
// into the words first and reads them back last. PTX built before those
// fields (smaller argument structs, detected from the PTX's .param sizes)
// ignores them and never flags: the stream then keeps no status words.
//
// OptimStep lives in a third module the same way: kernels/optim.cu compiles
// to kernels/optim.ptx with its own kernels/optim.ptx.sha256 ("build.sh
// --optim" builds only it, "build.sh --optim-placeholder" writes the
// placeholder). While optim.ptx is the placeholder, devices open and
// report OptimStep as *rt.UnsupportedError ("optim.ptx not built; run
// cudashim/kernels/build.sh --optim on a machine with nvcc"), so training
// with an optimizer fails at planning. VRUN_CUDA_OPTIM_PTX=/path/to.ptx
// loads that file instead of the embedded optim.ptx.
//
// # SASS fatbins (cold start)
//
// JIT-compiling kernels.ptx takes seconds (most of a cold first run), so
// build.sh also compiles each module to a compressed fatbin holding SASS
// for sm_80 and sm_90 (kernels.fatbin, indexed.fatbin, optim.fatbin; nvcc
// -fatbin -gencode arch=compute_80,code=sm_80 -gencode
// arch=compute_90,code=sm_90 -Xfatbin -compress-all), from the same
// sources, with hash files of their own (module.fatbin.sha256: "sources
// <hash>", then "fatbin <sha256>" or "placeholder"), which
// TestPTXMatchesSources checks too. They are embedded next to the PTX.
// When a device opens, each module whose PTX is the embedded one loads
// its fatbin first (cuModuleLoadDataEx): GPUs of compute capability 8.x
// run the sm_80 cubin and 9.0 the sm_90 one, with no JIT. On any other GPU
// (7.5, 10.x, 12.x), or when the driver refuses the fatbin, the module
// falls back to the PTX JIT as before. A placeholder fatbin is empty and
// the module goes straight to the PTX; a module whose PTX is replaced
// (VRUN_CUDA_PTX, VRUN_CUDA_INDEXED_PTX, VRUN_CUDA_OPTIM_PTX) never loads
// the fatbin. VRUN_CUDA_FATBIN=0 makes every module JIT its PTX (testing
// the fallback or timing the JIT). DeviceInfo.Details says what the
// embedded fatbin holds ("fatbin": "SASS sm_80, sm_90; this GPU (sm_90)
// loads sm_90 without a PTX JIT") and, on an opened device, how the modules
// were loaded ("kernels": "SASS sm_90 (fatbin)" or "PTX JIT (why)").
// TestFatbinAndPTX opens a device both ways and compares them.
//
// PTX emitted by nvcc 13.0 declares PTX ISA 9.0 (".version 9.0" in its
// header; DeviceInfo.Details shows it), which the driver accepts from the
// CUDA 13.0 driver branch (r580) on: an older driver fails to load the
// module with CUDA_ERROR_UNSUPPORTED_PTX_VERSION.
//
// Every primitive op of package rt is implemented, with the CPU backend's
// dtype rules and semantics: f32, f64 and f16 (f16 storage, f32
// arithmetic) for float ops, and the integer and bool dtypes for casts,
// arithmetic, comparisons, logic, Where, integer reductions, Gather and
// Fill. Elementwise kernels take strided views of rank up to 8 after
// merging contiguous dims; sums accumulate in double.
//
// # Execution
//
// Each Device retains the GPU's primary context. Each Stream owns a
// CUstream; Write and Read commands are staged through pinned host memory
// (cuMemHostAlloc) with asynchronous copies. The first Submit after
// recording captures the whole command list into a CUDA graph (stream
// capture); later Submits copy the host inputs to the pinned memory and
// replay the graph with one cuGraphLaunch, until Reset or a new record
// forces a new capture. Wait is one cuStreamSynchronize. A Profile stream
// issues its commands directly, without a graph, and records CUDA events
// around each op for Timings.
//
// MatMul runs on cuBLAS (cublasSgemmStridedBatched,
// cublasDgemmStridedBatched, and cublasGemmStridedBatchedEx with f16 data
// and f32 compute), with the row-major operands swapped (Y^T = B^T A^T).
// A bias is first broadcast-copied into Y and cuBLAS's beta scales it;
// the activation runs as an elementwise kernel afterwards. Each stream has
// its own cuBLAS handle with a 32 MiB workspace set by cublasSetWorkspace,
// so cuBLAS never allocates during graph capture. Shapes cuBLAS cannot take
// (K = 0, sizes over 2^31) use the built-in tiled GEMM kernel, as does
// every MatMul when VRUN_CUDA_CUBLAS=0 (which also skips loading cuBLAS).
//
// TF32: f32 GEMMs use full f32 arithmetic by default. Set VRUN_CUDA_TF32=1
// to opt in to TF32 tensor cores (cublasSetMathMode with
// CUBLAS_TF32_TENSOR_OP_MATH): much faster on Ampere and newer, with
// about 10 bits of mantissa in the products.
//
// Conv runs on cuDNN 9 when libcudnn.so.9 (cudnn64_9.dll) loads (opened
// lazily, declared in cudnn_shim.h like the rest) and cuDNN's semantics
// are exactly the op's: 2-D NCHW in f32, f64 or f16 (f32 compute), pads
// that cuDNN's symmetric padding reproduces (its output size equals
// OH×OW), 16-byte aligned tensors. It uses the legacy API
// (cudnnConvolutionForward, algorithm from the v7 heuristics at record
// time, FFT and non-fused Winograd excluded; f32 on FMA math only unless
// VRUN_CUDA_TF32=1), with descriptors made when the op is recorded and a
// handle and workspace per stream set up before capture. Bias is
// broadcast into Y and blended with beta = 1; the activation runs as an
// elementwise kernel. Every other Conv, and every Conv when cuDNN is
// missing or VRUN_CUDA_CUDNN=0, runs on the package's own implicit-GEMM
// kernel; DeviceInfo.Details says which ("cudnn", "conv"). A Conv whose
// output gives too few 64x64 tiles to fill the GPU (batch 1 from 28x28
// down) runs instead on narrow-tile implicit-GEMM kernels with the GEMM
// depth split across blocks (split-K into a per-stream scratch buffer,
// then a deterministic reduction applying bias, residual and activation),
// which also compute rt.Conv.Res; VRUN_CUDA_SPLITK=0 turns that path off
// (see convsk.go). ConvTranspose, Pool, Reduce, Softmax, Normalize and
// Gather have direct kernels.
//
// # Errors
//
// CUDA_ERROR_OUT_OF_MEMORY from Alloc is an *rt.OOMError naming the
// request. Errors that leave the context unusable (illegal address, launch
// failure, ...) wrap rt.ErrDeviceLost, and the device then refuses further
// work until it is closed and opened again. Close frees every buffer,
// stream, graph and handle and releases the primary context; it may be
// called more than once.
package cudashim
