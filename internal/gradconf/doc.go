// Package gradconf checks the gradients that the engine's Trainer computes
// for every differentiable op against PyTorch, on any device, the way
// package conformance checks forward outputs against NumPy.
//
// The table lives in testdata/grad at the repository root. It is generated
// by testdata/grad/gen.py (run it with Debian's Python, which has PyTorch
// 1.13 and NumPy: /usr/bin/python3 testdata/grad/gen.py; CI needs neither,
// the generated files are committed). Each case is a directory
// cases/<name>/ in the conformance table's layout (case.json, in_<i>.npy,
// out_<i>.npy; loaded with conformance.LoadCase) plus cot.npy, a random
// cotangent for output 0, and grad_<i>.npy for every input i listed in
// case.json's "grads": the gradient of sum(out_0 * cot) with respect to
// input i, computed by torch.autograd in float64 from the rounded inputs
// and cast to the case dtype. gen.py also checks its PyTorch formulations
// against NumPy references, torch.nn.LSTM/GRU and, in f64, central finite
// differences.
//
// For every case, [Run] builds the case's one-node model, appends
//
//	loss = ReduceSum(Mul(out_0, cot), keepdims=0)
//
// with cot a constant weight, and makes loss the only graph output. It
// plans a Trainer with the case's differentiated weights as Params and its
// differentiated runtime inputs as InputGrads, runs one Step (forward and
// backward, no optimizer), checks the loss against sum(out_0 * cot) from the
// reference outputs, and compares every gradient element with
// |got-want| <= atol + rtol*|want| (the case's tolerance, stated per class
// and dtype in gen.py).
//
// A case fails when the engine cannot plan or differentiate it: the error
// is the failure message. The exceptions are explicit: cases in f64 on a
// device without FP64, cases whose forward alone the device rejects with
// an error wrapping rt.ErrUnsupported, and the few cases listed, each with
// its reason, in the package's knownMissing table. [RunForward] runs the
// same cases forward only through the inference engine, which ties the
// PyTorch formulations of gen.py to the engine's ONNX semantics.
//
// A backend's test runs the table with one call:
//
//	func TestGradients(t *testing.T) {
//		dev, err := rt.Open("vulkan", nil)
//		if err != nil {
//			t.Skip(err)
//		}
//		defer dev.Close()
//		gradconf.Run(t, dev)
//	}
package gradconf
