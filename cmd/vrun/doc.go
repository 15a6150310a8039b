// Command vrun runs neural-network models on a GPU (Vulkan, CUDA, OpenCL)
// or the CPU.
//
// Usage:
//
//	vrun                       run the embedded demo (a digits classifier)
//	vrun [flags] model.bin     run a model on random or given inputs (or model.onnx,
//	                           converted in memory)
//	vrun convert m.onnx -o m.bin  convert an ONNX model to model.bin (vrun convert -h)
//	vrun devices               list backends and devices, and why any is unavailable
//	vrun info model.bin        show metadata, ops, parameters and the planned arena
//	vrun version               the version, the Go toolchain and the backends (also -version)
//	vrun train MODEL (-x X.npy -y Y.npy | -data mnist:DIR | -data cifar10:DIR) [train flags]
//	                           train an ONNX model, a model.bin or a built-in
//	                           architecture (mlp, lenet, cifar-cnn)
//
// Run flags:
//
//	-device SPEC     auto (default), cpu, vulkan, vulkan:1, cuda:0, opencl:0
//	-i name=x.npy    feed an input from a .npy file (repeatable)
//	-shape name=1x3x224x224  bind a dynamic input shape (repeatable)
//	-o DIR           write every output to DIR/<name>.npy
//	-bench N         warm up, then time N runs (1 to 1000000): min/median/p90 and throughput
//	-profile         print the slowest ops of the last run and the device memory
//	                 (arenas, weights, pool statistics)
//	-precision f16   store the Conv, Gemm and MatMul weights in f16 on the device
//	                 (activations and accumulation stay f32, but for convolutions
//	                 that Vulkan runs on f16 tensor cores; default f32)
//	-json            print the results (of a run, info, devices, version) as JSON
//	-seed N          seed of the random inputs (default 1)
//	-v               verbose: why "auto" skipped a backend, planning details
//
// Train flags (vrun train -h lists them all; docs/training.md describes them):
//
//	-loss cross_entropy|mse|bce|huber|nll   -optim sgd|adam|adamw|adagrad|rmsprop
//	-lr F -momentum F -weight-decay F       (PyTorch's defaults when not given)
//	-batch N -epochs N -shuffle=true|false -seed N -device D
//	-o OUT.bin (or OUT.onnx; the curves go to OUT.png) -log STEPS.csv
//	-checkpoint DIR -resume DIR -freeze a,b -val F -limit N -detect-nan -profile
//
// The statistics of each output count NaNs and infinities apart (min and
// max skip NaNs, mean and std take the finite values), and the top-5 never
// ranks a NaN. A size that does not fit the device or the host memory is
// an error that names the tensor and the sizes, before anything is
// allocated; a batch that only exceeds what one op of the device may
// address, or its memory, runs in chunks of rows.
//
// Exit status: 0 on success, 1 on failure, 2 on a usage error; vrun train
// stopped by Ctrl-C (after writing a checkpoint) exits with 130.
package main
