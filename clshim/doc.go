// Package clshim is vrun's OpenCL backend, registered with rt under the
// name "opencl".
//
// It is a thin cgo shim: the OpenCL ICD loader (libOpenCL.so.1 or
// libOpenCL.so on Unix, OpenCL.dll on Windows, the OpenCL framework on
// macOS) is opened at run time with dlopen/LoadLibrary the first time the
// backend is asked for its devices, and the ~30 functions it uses are
// resolved by name. The few OpenCL types and constants needed are declared
// in the package itself, so building needs neither OpenCL headers nor an
// OpenCL library. Without cgo, or without a loader, Devices returns an
// error wrapping rt.ErrUnavailable that says why.
//
// Every device of every platform is listed, flattened in platform order,
// as "opencl:0", "opencl:1", ... .
//
// Kernels are OpenCL C sources (kernels/*.cl) embedded in the binary and
// built at run time, specialised per dtype with -D defines: float, double
// (with cl_khr_fp64), half (storage only, through the core vload_half and
// vstore_half_rte, computing in float) and the integer types. Built
// program binaries are cached under os.UserCacheDir()/vrun/opencl (or
// $VRUN_CACHE_DIR/opencl), keyed by a hash of device name, driver version,
// source and options; a stale or corrupt cache entry is rebuilt from source.
//
// Cold start is mostly the driver's OpenCL C compiler. Prepare (called
// when a plan is made) builds only the programs of the plan's ops, on
// several goroutines (NVIDIA's driver still compiles them one at a time);
// on GPUs each program holds one kernel, with a MatMul's or Conv's
// activation, a GEMV's mode (column, column with vector loads, or row)
// and a Reduce's function fixed at build time, so that the compiler sees
// one path. Environment variables for measuring it (read at Open):
//
//   - VRUN_CL_SPLIT=0|1: whole kernel files or one kernel per program.
//   - VRUN_CL_OPTS: extra clBuildProgram options for every program (for
//     example -cl-mad-enable, -cl-fast-relaxed-math, or NVIDIA's
//     -cl-nv-opt-level=N); they are part of the binary cache's key.
//   - VRUN_CL_JOBS=N: programs Prepare builds at once (default GOMAXPROCS;
//     1 tells whether the driver's compiler runs builds in parallel).
//   - VRUN_CL_BUILDCTX=N: build programs from source in N extra contexts
//     of the device, then load each into the device's context from its
//     binary (for drivers that build one program at a time per context).
//   - VRUN_CL_BUILDLOG=FILE ("-": stderr): one tab-separated line per
//     program built or loaded from the cache: device, ms from Open to its
//     start and end, duration, "source", "source-ctx" or "cache", file,
//     source and binary bytes, options.
//   - VRUN_CL_CONV=wide: the former convolution tile rule (no narrow
//     tiles), for comparing speeds.
//
// MatMuls run on gemm.cl's register-blocked tiles, except those with
// M == 1 or N == 1, which run on its gemv kernel (four output columns
// per work-item with one vector load where the row length is a multiple
// of 4, or one output row per row of work-items loading four elements of
// K at a time; K split across work-groups for a GPU's
// compute units, the partials summed in order by the last work-group to
// arrive).
// Convs run on conv_gemm (implicit GEMM, split-K where the tiles are too
// few) or conv_direct; both write images rt.Conv.StrideY apart, so a
// Concat's Convs write into its output at batch > 1.
//
// Each Stream owns one in-order command queue. Launch creates and sets up
// one cl_kernel per recorded op, so that Submit only enqueues: writes and
// reads are non-blocking copies from and to the caller's (pinned) slices,
// and Wait is one clFinish. With StreamOptions.Profile, Timings come from
// OpenCL event profiling.
package clshim

// BackendName is the name under which the backend registers: "opencl".
const BackendName = "opencl"
