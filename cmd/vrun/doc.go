// Command vrun runs neural-network models on a GPU (Vulkan, CUDA, OpenCL)
// or the CPU.
//
// Usage:
//
//	vrun                       run the embedded demo (a digits classifier)
//	vrun [flags] model.bin     run a model on random or given inputs (or model.onnx,
//	                           converted in memory)
//	vrun convert m.onnx -o m.bin  convert an ONNX model to model.bin
//	vrun devices               list backends and devices, and why any is unavailable
//	vrun info model.bin        show metadata, ops, parameters and the planned arena
//
// Run flags:
//
//	-device SPEC     auto (default), cpu, vulkan, vulkan:1, cuda:0, opencl:0
//	-i name=x.npy    feed an input from a .npy file (repeatable)
//	-shape name=1x3x224x224  bind a dynamic input shape (repeatable)
//	-o DIR           write every output to DIR/<name>.npy
//	-bench N         warm up, then time N runs: min/median/p90 and throughput
//	-profile         print the slowest ops of the last run
//	-seed N          seed of the random inputs (default 1)
//	-v               verbose: why "auto" skipped a backend, planning details
//
// Exit status: 0 on success, 1 on failure, 2 on a usage error.
package main
