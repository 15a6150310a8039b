#!/usr/bin/python3
"""Cross-check the conformance table's output shapes and dtypes with ONNX's
own shape inference (the `onnx` Python package, any version with opset 17+).

Run after gen.py: /usr/bin/python3 testdata/conformance/check_onnx.py

Each case becomes a one-node ONNX model (weights as initializers) that is
shape-inferred in strict mode; the inferred output shape must equal the
shape of out_<i>.npy. Ops newer than the installed onnx's opset (Gelu,
ReduceMean/ReduceMax with axes inputs) and vrun extensions are skipped.
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
OPSET = onnx.defs.onnx_opset_version()
NEWER = {"Gelu": 20, "ReduceMean": 18, "ReduceMax": 18}
ELEM = {"f32": onnx.TensorProto.FLOAT, "f16": onnx.TensorProto.FLOAT16, "f64": onnx.TensorProto.DOUBLE,
        "i32": onnx.TensorProto.INT32, "i64": onnx.TensorProto.INT64}


def attr_value(a):
    return a["value"]


def main():
    checked = skipped = compared = 0
    bad = []
    for name in sorted(os.listdir(CASES)):
        d = os.path.join(CASES, name)
        c = json.load(open(os.path.join(d, "case.json")))
        if c["domain"] or NEWER.get(c["op"], 0) > OPSET:
            skipped += 1
            continue
        inputs, inits, names = [], [], []
        for i in c["inputs"]:
            if i["kind"] == "absent":
                names.append("")
                continue
            names.append(i["name"])
            if i["kind"] == "weight":
                inits.append(numpy_helper.from_array(np.load(os.path.join(d, i["file"])), i["name"]))
            else:
                inputs.append(helper.make_tensor_value_info(i["name"], ELEM[i["dtype"]], i["shape"]))
        outs = [o["name"] for o in c["outputs"]]
        attrs = {a["name"]: attr_value(a) for a in c["attrs"]}
        node = helper.make_node(c["op"], names, outs, **attrs)
        g = helper.make_graph([node], name, inputs,
                              [helper.make_tensor_value_info(o["name"], ELEM[o["dtype"]], None) for o in c["outputs"]],
                              initializer=inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        ctx = onnx.checker.C.CheckerContext()
        ctx.ir_version = onnx.IR_VERSION
        ctx.opset_imports = {"": OPSET}
        try:
            onnx.checker.check_node(node, ctx)
            inf = shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
        except Exception as e:  # noqa: BLE001
            bad.append("%s: %s" % (name, str(e).splitlines()[0]))
            continue
        vi = {v.name: v for v in list(inf.graph.value_info) + list(inf.graph.output)}
        for o in c["outputs"]:
            t = vi[o["name"]].type.tensor_type
            if not t.HasField("shape"):
                bad.append("%s: no inferred shape" % name)
                continue
            dims = [x.dim_value if x.HasField("dim_value") else None for x in t.shape.dim]
            if None in dims:
                # Data-dependent (e.g. Slice/Reshape with values ONNX did not
                # propagate): nothing to compare.
                continue
            compared += 1
            if dims != o["shape"] or t.elem_type != ELEM[o["dtype"]]:
                bad.append("%s: onnx infers %s %s, table has %s %s" % (name, t.elem_type, dims, o["dtype"], o["shape"]))
        checked += 1
    print("onnx %s (opset %d): %d cases checked (%d output shapes fully inferred and equal), %d skipped, %d problems"
          % (onnx.__version__, OPSET, checked, compared, skipped, len(bad)))
    for b in bad:
        print("  " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
