// Package export writes a trained network for inference: model.bin, which
// vrun runs on any device, and ONNX (opset 17) for other runtimes.
//
//	m2, err := export.Trained(trainer, m, "logits") // trained weights, without the loss
//	err = model.WriteFile("model.bin", m2)
//	err = export.ONNX("model.onnx", m2)
//
// Trained copies the model with the trainer's current parameters and
// BatchNorm running statistics, and prunes it to the outputs that
// inference needs (a training graph's loss and targets go). ONNX plans
// the model on the CPU to learn its outputs' element types and shapes,
// which ONNX declares and vrun's graph does not record, then writes it
// with onnx.ExportFile. Both writers replace the target atomically.
package export
