// Package model holds vrun's model graph: the in-memory [Model], the
// model.bin v1 file format (read with memory-mapped, aligned weights;
// written by [Builder] or the ONNX importer), and its validation.
//
// The format is specified in docs/format.md.
package model
