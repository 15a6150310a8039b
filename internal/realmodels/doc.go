// Package realmodels checks real exported models end to end on a device:
// ONNX files exported from PyTorch by testdata/models/export.py (torchvision
// architectures and small sequence models, fixed-seed random weights,
// opset 17), each with its input and the outputs PyTorch and onnxruntime
// computed for it. Every backend's tests can call [Check].
//
// The small models are committed to testdata/models. Larger ones (such as
// mobilenet_v2 or resnet18) are checked when the directory named by the
// VRUN_MODELS_DIR environment variable holds them, laid out the same way:
// NAME.onnx, NAME.x.npy, and NAME.torch.npy and/or NAME.ort.npy.
package realmodels
