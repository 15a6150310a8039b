// Package onnxcorpus reads the ONNX backend node-test corpus and runs it
// through the importer and the engine on a device, comparing every output
// with the expected data. It is test plumbing: the conformance tests of
// the backends and cmd/vrun-onnxtest use it.
//
// [Open] reads the corpus straight from its .tgz, [OpenDir] a directory
// of cases laid out the same way (such as the vendored testdata/onnx/node),
// and [Find] locates the .tgz for tests ($VRUN_ONNX_CORPUS or
// ../shared/onnx-node-tests.tgz).
//
// [Run] runs the cases. A case passes when every output of every data set
// matches: floats within |got-want| <= Atol + Rtol*|want| (NaN matches NaN,
// infinities must be equal), integers and bools exactly, dtypes and shapes
// exactly. A case is skipped, with a reason, when its test data cannot be
// decoded, when the importer reports it unsupported (an operator the engine
// does not claim, a subgraph, an element type, ...), or when the engine or
// the device reports an unsupported feature of a claimed operator (an
// attribute value, an optional output, a dtype). Anything else is a
// failure: every operator of an imported case is claimed (the importer is
// given engine.SupportedOps), so a failure is a bug.
//
// The package's own tests run the vendored cases and, when present, the
// whole corpus on the CPU backend, and check that the corpus imports and
// decodes.
package onnxcorpus
