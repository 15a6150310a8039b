// Command suite is vrun's benchmark suite: one run times GEMM, GEMV,
// convolutions and model latency on every device vrun finds, with the
// baselines beside it in the same run (NumPy, PyTorch on the CPU and
// through CUDA — cuBLAS and cuDNN — and onnxruntime on the CPU), and
// writes one JSON file; render turns results files into the tables of
// docs/benchmarks.md and a PNG chart.
//
//	suite run -out results.json [-backends cpu,vulkan:0,cuda:0,opencl:0] [-models dir|files] [-quick]
//	          [-baselines numpy,pytorch,onnxruntime|none] [-threads N] [-batches 32] [-section NAME]
//	          [-kinds gemm,gemv,conv,model] [-kernel-time 300ms] [-model-time 1s]
//	suite render -in results.json[,more.json] [-md docs/benchmarks.md] [-png docs/bench.png] [-append]
//
// # Run
//
// vrun is timed in process, through the rt and vrun packages (the GPU
// machine has no Go toolchain: the suite is one cross-compiled binary
// plus the Python scripts of bench/). Kernels are one rt.Op recorded
// enough times into one stream for a Submit to take about 2 ms, and the
// median over Submit+Wait of the time per op is kept (at least
// -kernel-time and 5 Submits). Models are planned on each device at their
// input's own batch, and on GPUs also at -batches where the batch dim is
// dynamic; the median of at least -model-time and 10 runs is kept, after
// 3 warm-up runs, with host inputs on a device of kind CPU (Run, as
// onnxruntime is timed) and with inputs and outputs kept on a GPU
// (RunDevice, as `vrun -bench -resident` and PyTorch's CUDA tensors).
// -quick shrinks every case and run count: a smoke test in seconds, not a
// measurement.
//
// The cases depend on the class of the device: a GPU gets GEMM at n =
// 1024, 4096, 8192, GEMV 4096×14336 and 4096×4096, and six batch-1
// convolution layers of ResNet-18/50 and MobileNetV2; the CPU backend
// GEMM at n = 256, 1024, 2048, GEMV 4096×4096 both ways and the same
// convolutions; a software driver of a GPU API (lavapipe, pocl) a subset
// of the CPU's.
//
// Baselines run on the same cases as the class of device they compare
// with, those of the CPU right after vrun's CPU backend (onnxruntime
// model by model, alternating with vrun), PyTorch on CUDA after every
// device: bench/numpy_baseline.py -suite (GEMM and GEMV, with
// OpenBLAS first on the library path where installed, as
// bench/compare.py), bench/torch_baseline.py suite on the CPU (-threads
// threads) and on CUDA (eager and CUDA-graph replay for models; models
// are the torch twins of testdata/models/export.py by file name), and
// onnxruntime (bench/internal/ortpeer: onnxruntime-node, or Python's
// onnxruntime) on the models at their own batch with -threads intra-op
// threads. The Python is $VRUN_BENCH_PYTHON, or the first of
// /usr/bin/python3 and python3 that imports the module. A baseline that
// cannot run is recorded with the reason.
//
// # Results file (schema 1)
//
// One JSON object:
//
//	schema     1
//	section    the name of the section in docs/benchmarks.md (-section; default
//	           cpu-HOST, or gpu-HOST when a GPU ran): letters, digits, '.', '_', '-'
//	date       start of the run, RFC 3339, UTC
//	commit     -ldflags "-X main.commit=..." or the build's vcs.revision ("+dirty"
//	           when modified), else git describe, else "unknown"
//	quick      true for -quick
//	threads    -threads
//	env        the VRUN_* environment variables of the run, sorted ("VRUN_VK_TUNE=1")
//	machine    {host, os, arch, cpu, cpus, load_avg (at the end), go}
//	devices    [{spec "vulkan:0", name, kind "discrete-gpu"|"cpu"|..., class "cpu"|"gpu",
//	           driver}] or {spec, skipped: why} for a backend or device that did not open
//	baselines  [{name "numpy"|"pytorch"|"onnxruntime", class "cpu"|"gpu", version,
//	           device (threads, GPU name, BLAS)} or {name, class, skipped: why}]
//	results    [{kind "gemm"|"gemv"|"conv"|"model", case "f32/n=1024" | "f32/4096x14336/xA"
//	           | "3x3 64-64 56" | model name, batch (models), impl "vrun"|"numpy"|"pytorch"
//	           |"pytorch-graph"|"onnxruntime", device "cpu:0"|"cuda:0"|... for vrun, "cpu"
//	           or "cuda" for a baseline, class "cpu"|"gpu", ms (median per op or run),
//	           rate (kernels: GFLOP/s or GB/s of the matrix), unit, runs, error}]
//
// A baseline's result compares with vrun's of the same kind, case, batch
// and class. Unknown fields are rejected on reading.
//
// # Render
//
// Each results file becomes the text between the lines
// "<!-- suite:begin SECTION -->" and "<!-- suite:end SECTION -->" of -md
// (each must appear once, begin first; nothing outside them changes;
// -append adds a missing pair at the end): a header naming the run,
// devices and baselines (and those skipped, with why), then a table per
// kind with vrun's value, each baseline's, and the ratio vrun / baseline
// of the value shown (rates for kernels: above 1, vrun is faster; ms for
// models: below 1, vrun is faster), then the failures. Without -md the
// sections are printed. -png draws one horizontal bar per vrun result
// and baseline: vrun's speed over the baseline's (baseline time / vrun
// time, for every kind), on a log scale with a line at 1.
package main
