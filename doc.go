// Package vrun runs neural-network models on whatever device a machine
// has: a GPU through Vulkan, CUDA or OpenCL, or the CPU.
//
// It is the convenience front of the runtime: importing it registers every
// backend compiled into this build, and [Load] opens a model file (model.bin
// or ONNX), picks a device and plans the model for it.
//
//	m, err := vrun.Load("model.bin", vrun.Options{Device: "auto"})
//	if err != nil { ... }
//	defer m.Close()
//	out, err := m.Run(ctx, map[string]*rt.Tensor{"x": x})
//
// Programs that want only some backends import the engine, model and
// backend packages directly instead.
package vrun
