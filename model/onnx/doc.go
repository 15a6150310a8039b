// Package onnx imports ONNX models into vrun's graph IR ([model.Model]),
// and exports that IR to ONNX opset 17.
//
// [Import] (bytes), [ImportFile] (a path; external data next to it) and
// [ImportProto] (a decoded [onnxpb.ModelProto]) produce a model whose node
// ops are ONNX op names with latest-opset semantics, in topological order,
// that passes model.Validate. [DecodeTensor] converts one TensorProto to an
// [rt.Tensor]. (The ONNX backend node-test corpus, which tests this
// importer with the engine, is read and run by internal/onnxcorpus.)
//
// # What is imported
//
//   - Initializers and Constant nodes become Weight tensors (unused ones
//     are dropped). IR < 4 models that also list initializers as graph
//     inputs: those stay weights (not overridable); a declared input type
//     that differs from the initializer's is a type-mismatch error.
//   - Graph inputs that are not initializers become Input tensors with
//     their dtype and shape; a dim_param or unknown dim becomes -1, named
//     in DimNames when the model names it. Inputs must be tensors of a
//     native vrun dtype (FLOAT, FLOAT16, DOUBLE, INT32, INT64, UINT8, INT8,
//     BOOL) with a known rank.
//   - Graph outputs become Output tensors. Output and intermediate tensors
//     carry no dtype or shape (InvalidDType, nil): the engine infers them;
//     value_info is only used during import (see CastLike below).
//   - Node attributes INT, FLOAT, STRING, INTS, FLOATS and STRINGS map to
//     [model.Attr] (floats widen exactly to float64; strings are the raw
//     bytes). TENSOR attributes: Constant.value becomes a weight;
//     ConstantOfShape.value becomes a second input (a one-element weight,
//     f32 0 when the attribute is absent), so vrun's ConstantOfShape always
//     has inputs (shape, value). Any other TENSOR attribute, SPARSE_TENSOR,
//     TYPE_PROTO and GRAPH attributes (If/Loop/Scan) are unsupported.
//   - Absent optional inputs and outputs ("") are index -1; trailing
//     absent ones are trimmed.
//   - Nodes without a name get "Op_index" (index in the ONNX node list).
//   - Metadata: "producer", "description" (doc_string), "onnx.ir_version",
//     "onnx.opset_import" ("ai.onnx:13,..."), "onnx.graph", "onnx.domain",
//     "onnx.model_version", then the model's metadata_props.
//
// Tensor data (initializers, Constant values, test data) may be raw_data,
// the typed fields, or external (location/offset/length relative to the
// base directory, which it may not leave; see [DecodeTensor]). INT16 and
// UINT16 weights widen to i32, UINT32 and UINT64 to i64 (range-checked),
// BFLOAT16 to f32.
//
// # Graph rewrites
//
// Identity nodes and inference-mode Dropout nodes (mask output unused) are
// removed and their consumers rewired. When the removed node writes a graph
// output, the producer of its input writes the graph output directly; when
// that is impossible (the input is a graph input, a weight or another graph
// output) an Identity node remains, as it does for a graph output that is a
// weight (copied from a weight renamed "<name>_value"). Nodes are then
// sorted topologically, keeping the file order where valid.
//
// # Opset normalisation
//
// Every node is rewritten to the semantics of the latest opset of the
// default domain ("" or "ai.onnx"), based on the model's opset_import:
//
//	Operator            Opsets    Conversion
//	(all)               < 6       consumed_inputs attribute dropped
//	Add Sub Mul Div Pow < 7       broadcast attribute dropped; axis: B is
//	 And Or Xor Equal             Unsqueezed on the right so numpy
//	 Greater Less PRelu           broadcasting aligns it (needs declared
//	 Gemm                         ranks, else unsupported)
//	Split               < 13      split attribute -> input 1 (i64)
//	Split               < 18      no split input -> num_outputs = #outputs
//	Squeeze Unsqueeze   < 13      axes attribute -> input 1 (i64)
//	ReduceSum           < 13      axes attribute -> input 1 (i64)
//	Reduce{Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}
//	                    < 18      axes attribute -> input 1 (i64)
//	Reshape             < 5       shape attribute -> input 1 (i64)
//	Slice               < 10      starts/ends/axes attributes -> inputs 1-3
//	TopK                < 10      k attribute -> input 1 (i64, shape [1])
//	Clip                < 11      min/max attributes -> inputs 1, 2 (*)
//	Pad                 < 11      pads (Pad-1: paddings) -> input 1 (i64);
//	                              value -> constant_value input 2 (*)
//	Upsample            1, 7, 9   -> Resize(X, "", scales), mode nearest
//	                              (nearest_mode floor) or linear
//	                              (bilinear), coordinate_transformation_mode
//	                              asymmetric; Upsample-1 height/width_scale
//	                              -> scales [1, 1, h, w]
//	Resize              10        (X, scales) -> (X, "", scales), same
//	                              attributes as Upsample
//	Softmax LogSoftmax  < 13      2-D coercion at axis (default 1): axis is
//	 Hardmax                      last -> axis -1; else Flatten(axis) ->
//	                              op(axis 1) -> Reshape(Shape(X))
//	Cast                < 6       string "to" -> TensorProto type code
//	Concat              < 4       missing axis -> 1
//	BatchNormalization  < 9       spatial=1, is_test dropped (spatial=0
//	                              unsupported); unused training outputs
//	                              dropped (used ones, training_mode=1:
//	                              unsupported)
//	Dropout             all       removed (see above); ratio, is_test,
//	                              seed dropped when kept for its mask
//	Scatter             9, 10     -> ScatterElements
//	ConstantOfShape     all       value attribute -> input 1 (see above)
//	Constant            all       -> weight (value, value_float(s),
//	                              value_int(s)); sparse/string unsupported
//	Tile                < 6       unsupported
//	GroupNormalization  < 21      unsupported (per-group scale/bias)
//
// (*) The scalar takes the element type of the node's first input when the
// model declares it (graph input, initializer, Constant or value_info);
// otherwise it is an f32 weight converted by a CastLike(value, X) node.
//
// Operators of other versions need no conversion: their attributes are
// the same as, or a subset with the same defaults of, the latest opset.
// Ops introduced by rewriting (Resize, Flatten, Shape, Reshape, CastLike,
// Unsqueeze, Identity, ScatterElements) are checked against
// Options.Supported like the others.
//
// # Errors
//
// Errors wrap [ErrInvalid] for malformed models (bad protobuf, missing
// graph, duplicate or dangling names, naming the node and input, cycles,
// naming the nodes, type mismatches, bad tensor data, external data that
// is missing (naming the file), out of range or escaping the base
// directory), or [ErrUnsupported] for valid ONNX that vrun does not run.
// Unsupported things found in nodes and graph signatures are collected and
// returned together as an *[UnsupportedError]: operators rejected by
// Options.Supported (with node name and opset), operators of other domains
// (ai.onnx.ml, com.microsoft, ...) or of model-local functions,
// subgraphs, non-tensor inputs and outputs (sequence, map, optional),
// unsupported element types, sparse initializers.
//
// # Not supported
//
// Subgraphs (If, Loop, Scan), function inlining (model-local FunctionProto
// and function-bodied ops are kept as the op itself), sequence, map and
// optional values, sparse tensors, STRING, complex, FLOAT8, 4-bit and 2-bit
// element types, training (Dropout with training_mode, BatchNormalization
// training outputs), segmented tensors, graph outputs that are also graph
// inputs (a vrun tensor has one role).
//
// # Export
//
// [Export] (a ModelProto), [ExportBytes] and [ExportFile] (atomic: a
// temporary file renamed into place) write a model as ONNX opset
// [ExportOpset] (17) with IR version [ExportIRVersion] (8, ONNX 1.12):
// weights become initializers (raw data), inputs and outputs the graph's
// (dynamic dims as dim_param when named), nodes keep their names and
// attributes. A zero int or float attribute and an empty string are
// written explicitly, for proto2 readers that test presence. Graph outputs
// need their element type and shape, which the IR does not record:
// ExportOptions.Outputs gives them (package export asks the engine).
// No external data is written: ExportBytes refuses models of 2 GiB or
// more.
//
// vrun's IR has the latest opset's semantics; Export writes the opset-17
// forms:
//
//	Operator                  Conversion to opset 17
//	ReduceMean ReduceMax      axes input (a weight) -> axes attribute;
//	 ReduceMin ReduceProd     noop_with_empty_axes=1 without axes ->
//	 ReduceL1 ReduceL2         Identity, otherwise dropped; axes computed
//	 ReduceLogSum              at run time: unsupported
//	 ReduceLogSumExp
//	 ReduceSumSquare
//	ReduceMax ReduceMin bool  Cast to int64, ReduceSum, Greater (max) or
//	                          Not first and Equal (min) against 0
//	Split                     num_outputs -> split input: ceil(d/n) chunks
//	                          and the rest (constants when d is declared,
//	                          else computed from Shape)
//	ConstantOfShape           value input (a weight) -> value attribute
//	Pad                       axes input -> full-rank pads (constant pads
//	                          and axes, input of declared rank; else
//	                          unsupported); mode wrap: unsupported
//	Resize                    antialias=0, keep_aspect_ratio_policy=stretch
//	                          dropped; other values, axes and
//	                          half_pixel_symmetric: unsupported
//	AveragePool LpPool        dilations of 1 and LpPool ceil_mode=0
//	                          dropped; others unsupported
//	Cast CastLike             saturate dropped (float8 only)
//	SpaceToDepth              mode DCR dropped; CRD unsupported
//	Gelu                      0.5·x·(1+Erf(x/√2)); tanh approximation
//	                          0.5·x·(1+Tanh(√(2/π)·(x+0.044715·x³)))
//	Mish Silu Swish           x·Tanh(Softplus(x)), x·Sigmoid(x),
//	                          x·Sigmoid(alpha·x)
//	Celu (not float)          Max(0,x) + Min(0, α·(Exp(x/α)-1))
//	IsInf (float16)           Cast to float first
//	ScatterElements ScatterND reduction max/min: unsupported
//	Range (float16)           unsupported
//	GroupNormalization        unsupported (not in opset 17 with vrun's
//	 RMSNormalization          semantics)
//	 Attention
//
// Unsupported items are returned together in an *[UnsupportedError].
// Tests export the vendored ONNX node-test cases, import them back and
// check their expected outputs, run the ONNX checker on every file and
// onnxruntime on every file (internal/onnxcorpus).
package onnx
