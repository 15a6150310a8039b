// Package conformance runs the ONNX backend node-test corpus (or a
// directory of vendored cases) through the importer and the engine on a
// device, and compares every output with the expected data.
//
// A case passes when every output of every data set matches: floats within
// |got-want| <= Atol + Rtol*|want| (NaN matches NaN, infinities must be
// equal), integers and bools exactly, dtypes and shapes exactly. A case is
// skipped, with a reason, when its test data cannot be decoded, when the
// importer reports it unsupported (an operator the engine does not claim,
// a subgraph, an element type, ...), or when the engine or the device
// reports an unsupported feature of a claimed operator (an attribute
// value, an optional output, a dtype). Anything else is a failure: every
// operator of an imported case is claimed (the importer is given
// engine.SupportedOps), so a failure is a bug.
//
// cmd/vrun-onnxtest is the command-line front end; model/onnx's
// conformance test runs the vendored cases in testdata/onnx/node and, when
// present, the whole corpus.
package conformance
