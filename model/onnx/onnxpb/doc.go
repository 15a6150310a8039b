// Package onnxpb holds the Go protobuf bindings for the ONNX IR schema
// (onnx.proto, a proto3 transcription of the official onnx/onnx.proto3 at
// IR version 11 with the official field numbers).
//
// onnx.pb.go is generated; do not edit it. Regenerate with
//
//	go generate ./model/onnx/onnxpb
//
// which runs
//
//	protoc --go_out=. --go_opt=paths=source_relative onnx.proto
//
// The checked-in file was produced by protoc 3.21.12 (libprotoc, Debian
// package protobuf-compiler) and protoc-gen-go v1.36.12
// (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12),
// matching the google.golang.org/protobuf version in go.mod.
package onnxpb
