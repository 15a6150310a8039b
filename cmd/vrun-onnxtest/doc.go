// Command vrun-onnxtest runs the ONNX backend node-test corpus on a vrun
// device and reports how many cases pass, fail and are skipped, with the
// failures and the skip reasons grouped and counted.
//
// Usage:
//
//	vrun-onnxtest [-device cpu] [-corpus PATH] [-run REGEXP] [-v] [-list pass|fail|skip]
//
// PATH is the corpus .tgz or a directory of cases (such as
// testdata/onnx/node); the default is $VRUN_ONNX_CORPUS or
// ../shared/onnx-node-tests.tgz next to the module. -list prints only the
// names of the cases with that outcome, one a line (testdata/onnx/vendor.sh
// uses it). The exit status is 1 when a case fails that is not in
// onnxcorpus.KnownFailures (package internal/onnxcorpus does the work).
package main
