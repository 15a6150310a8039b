#!/usr/bin/python3
"""Generate vrun's gradient reference table (checked by internal/gradconf).

Run with Debian's PyTorch and NumPy:  /usr/bin/python3 testdata/grad/gen.py

CI has no PyTorch, so the generated files are committed. Every case is one
ONNX node (latest-opset semantics), written to testdata/grad/cases/<name>/
in exactly the layout of the conformance table (testdata/conformance/gen.py,
case.json version 1, in_<i>.npy, out_<i>.npy: the Go loader in
internal/conformance reads both), plus

  cot.npy       a random cotangent for output 0 (output 0's shape and dtype)
  grad_<i>.npy  d(sum(out_0 * cot)) / d(input i), for each i in "grads"

and one more case.json field:

  "grads": [i, ...]   the inputs (float, present) that have an expected
                      gradient; the others (integer indices, shapes, Clip
                      bounds, BatchNormalization statistics, Pad's constant,
                      Where's condition) are constants of the graph.

How the references are made. Inputs are random, non-zero, in odd shapes,
from a generator seeded by a hash of the case name (the conformance
helpers, imported from ../conformance/gen.py), rounded to the case dtype.
Each op is written out in PyTorch (float64) with ONNX's equations; the
forward outputs and the gradients from torch.autograd are computed in
float64 from the rounded inputs, then cast to the case dtype. Inputs stay
away from points where a derivative jumps: |x| >= 0.1 at Relu/Abs/LeakyRelu/
PRelu kinks, Clip/HardSigmoid/HardSwish inputs >= 0.05 from their corners,
Max/Min operands >= 0.05 apart, MaxPool windows and ReduceMax/ReduceMin
groups without ties (values on a grid at least 0.03 apart).

Float attributes are float32 in ONNX: the f64 cases use attribute values
that float32 holds exactly (alpha 0.125, not 0.1), and the two cases whose
defaults are not such values (LeakyRelu 0.01, HardSigmoid 0.2) are f32 only.

Independent checks done on every run (the script fails if one does not hold):
  * the PyTorch forward is compared with the NumPy reference of the
    conformance table (conv, pool, gemm, softmax, layer_norm, reduce,
    batch_norm, slice, ...) where one exists, and with NumPy LSTM/GRU
    implementations of ONNX's equations written here;
  * LSTM and GRU (linear_before_reset 1) outputs and gradients are compared
    with torch.nn.LSTM / torch.nn.GRU with the gate blocks reordered;
  * f64 cases: central finite differences (h = 1e-6) of the NumPy forward
    (PyTorch's where no NumPy one exists) at up to 12 elements of every
    differentiated input; the largest error is printed.
  * f32 cases: the same PyTorch formulation run in float32 must stay
    within half of the stated tolerance (the printed figure is the largest
    fraction used), so the tolerances leave room for any float32 engine.
The Go side also runs the cases' forward outputs through the conformance
runner, which ties these PyTorch formulations to the engine's ONNX ops.

Tolerances (|got - want| <= atol + rtol*|want|), for the forward outputs
and the gradients alike, by class:
            f32 rtol  f32 atol   f64 rtol  f64 atol
  elem       1e-4      1e-5       1e-9      1e-10   one function per element
  reduce     2e-4      2e-5       1e-9      1e-10   sums over <= ~100 elements
  matmul     5e-4      5e-5       1e-9      1e-10   MatMul/Gemm/Conv/norms/attention
  seq        1e-3      1e-4       1e-9      1e-10   LSTM/GRU (4 steps through time)

Multi-node composites are not expressible in this one-node schema; the
attention composite (MatMul + Softmax + MatMul with an additive mask) is
covered by ONNX's single Attention node instead.
"""

import importlib.util
import json
import math
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cases")

_spec = importlib.util.spec_from_file_location(
    "confgen", os.path.join(HERE, "..", "conformance", "gen.py"))
cg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cg)

DT, NP2DT, rng_for, R, attr, f32attr = cg.DT, cg.NP2DT, cg.rng_for, cg.R, cg.attr, cg.f32attr

F64TOL = (1e-9, 1e-10)
TOL = {
    ("elem", "f32"): (1e-4, 1e-5), ("elem", "f64"): F64TOL,
    ("reduce", "f32"): (2e-4, 2e-5), ("reduce", "f64"): F64TOL,
    ("matmul", "f32"): (5e-4, 5e-5), ("matmul", "f64"): F64TOL,
    ("seq", "f32"): (1e-3, 1e-4), ("seq", "f64"): F64TOL,
}

FD_H = 1e-6
FD_SAMPLES = 12   # elements per differentiated input
FD_LIMIT = 1e-6   # |fd - autograd| / max(1, |autograd|)

CASES = []

# Cases whose default float attribute (0.01, 0.2) is not a float32 value.
F32_ONLY = {"leakyrelu_default", "hardsigmoid_default"}


def gcase(base, op, cls, make, fwd, attrs=(), domain="", note="", dtypes=("f32", "f64"),
          npref=None, nograd=(), check=None):
    """Register base_f32 and base_f64.

    make(r, dt) returns the inputs, a list of (name, kind, array-or-None);
    fwd(*tensors) computes the outputs in PyTorch (float64 tensors, None for
    absent inputs); npref(*arrays), if given, is an independent NumPy
    reference of the outputs; check(tensors, outs, grads), if given, runs an
    extra cross-check. Float inputs not named in nograd get gradients.
    """
    for dt in dtypes:
        CASES.append(dict(name="%s_%s" % (base, dt), op=op, cls=cls, dtype=dt, make=make, fwd=fwd,
                          attrs=list(attrs), domain=domain, note=note, npref=npref,
                          nograd=set(nograd), check=check))


# ---------------------------------------------------------------- input helpers

def away(x, points, margin=0.05):
    """Moves elements of x that lie within margin of a point to 2*margin
    from it (on their side), keeping the dtype."""
    y = np.asarray(x, dtype=np.float64).copy()
    for p in points:
        d = y - p
        near = np.abs(d) < margin
        y[near] = p + np.where(d[near] >= 0, 2 * margin, -2 * margin)
    return y.astype(x.dtype)


def distinct(r, shape, dt, step=0.031):
    """Values on a grid step apart, randomly permuted: no two are closer
    than step (no ties for max-like ops), none is zero."""
    n = int(np.prod(shape)) if len(shape) else 1
    v = r.rng.permutation(n) - (n - 1) / 2.0
    v = np.where(v >= 0, v + 0.5, v - 0.5) * step
    v = v * (2.0 / max(1.0, np.abs(v).max())) if np.abs(v).max() > 2.0 else v
    return np.asarray(v.reshape(shape)).astype(DT[dt])


def grid(r, shape, dt, offset):
    """Values k*0.1 + offset, k in +-[1, 20]: two grids with offsets 0 and
    0.05 never come closer than 0.05."""
    k = r.rng.integers(1, 21, size=shape) * np.where(r.rng.random(size=shape) < 0.5, -1, 1)
    return np.asarray(k * 0.1 + offset).astype(DT[dt])


def i64(v):
    return np.array(v, dtype=np.int64)


def t(a):
    return torch.as_tensor(a)


# ---------------------------------------------------------------- unary

def unary_cases():
    S = (3, 5, 7)

    def nz(lo=0.1, hi=2.0, pts=()):
        return lambda r, dt: [("x", "input", away(r.nz(S, dt, lo, hi), pts))]

    def pos(lo=0.1, hi=3.0):
        return lambda r, dt: [("x", "input", r.pos(S, dt, lo, hi))]

    a01, a001 = 0.125, f32attr(0.01)
    selu_a, selu_g = 1.67326319217681884765625, 1.05070102214813232421875
    celu_a = 0.75
    hs_a, hs_b = 0.25, 0.375
    specs = [
        # base, op, make, fwd, attrs, domain, note
        ("relu", "Relu", nz(), torch.relu, [], "", ""),
        ("leakyrelu_alpha0.125", "LeakyRelu", nz(), lambda x: torch.where(x >= 0, x, a01 * x),
         [attr("alpha", "float", 0.125)], "", ""),
        ("leakyrelu_default", "LeakyRelu", nz(), lambda x: torch.where(x >= 0, x, a001 * x), [], "",
         "alpha defaults to 0.01"),
        ("elu_alpha0.5", "Elu", nz(), lambda x: torch.where(x > 0, x, 0.5 * (torch.exp(x) - 1)),
         [attr("alpha", "float", 0.5)], "", ""),
        ("elu_default", "Elu", nz(), lambda x: torch.where(x > 0, x, torch.exp(x) - 1), [], "", "alpha 1"),
        ("selu_default", "Selu", nz(), lambda x: selu_g * torch.where(x > 0, x, selu_a * (torch.exp(x) - 1)),
         [], "", "alpha 1.67326319217681884765625, gamma 1.05070102214813232421875 (float32 defaults)"),
        ("selu_attrs", "Selu", nz(), lambda x: 2.0 * torch.where(x > 0, x, 1.5 * (torch.exp(x) - 1)),
         [attr("alpha", "float", 1.5), attr("gamma", "float", 2.0)], "", ""),
        ("celu_alpha0.75", "Celu", nz(),
         lambda x: torch.clamp(x, min=0) + torch.clamp(celu_a * (torch.exp(x / celu_a) - 1), max=0),
         [attr("alpha", "float", 0.75)], "", ""),
        ("sigmoid", "Sigmoid", nz(0.1, 4.0), torch.sigmoid, [], "", ""),
        ("hardsigmoid_default", "HardSigmoid", nz(0.1, 4.0, (-2.5, 2.5)),
         lambda x: torch.clamp(f32attr(0.2) * x + 0.5, 0, 1), [], "", "alpha 0.2, beta 0.5; kinks at +-2.5 avoided"),
        ("hardsigmoid_attrs", "HardSigmoid", nz(0.1, 4.0, (-1.5, 2.5)),
         lambda x: torch.clamp(hs_a * x + hs_b, 0, 1),
         [attr("alpha", "float", 0.25), attr("beta", "float", 0.375)], "", "kinks at -1.5 and 2.5 avoided"),
        ("hardswish", "HardSwish", nz(0.1, 5.0, (-3.0, 3.0)),
         lambda x: x * torch.clamp(x / 6 + 0.5, 0, 1), [], "", "x*max(0, min(1, x/6 + 1/2)); kinks at +-3 avoided"),
        ("tanh", "Tanh", nz(0.1, 3.0), torch.tanh, [], "", ""),
        ("gelu_none", "Gelu", nz(0.1, 4.0), lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))), [], "",
         "approximate none (erf form)"),
        ("gelu_tanh", "Gelu", nz(0.1, 4.0),
         lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
         [attr("approximate", "string", "tanh")], "", ""),
        ("silu", "Silu", nz(0.1, 6.0), lambda x: x * torch.sigmoid(x), [], "vrun",
         "vrun extension (not an ONNX op): Silu(x) = x * Sigmoid(x)"),
        ("mish", "Mish", nz(0.1, 4.0), lambda x: x * torch.tanh(torch.log1p(torch.exp(x))), [], "", ""),
        ("softplus", "Softplus", nz(0.1, 4.0), lambda x: torch.log1p(torch.exp(x)), [], "", ""),
        ("softsign", "Softsign", nz(0.1, 4.0), lambda x: x / (1 + torch.abs(x)), [], "", ""),
        ("exp", "Exp", nz(0.1, 3.0), torch.exp, [], "", ""),
        ("log", "Log", pos(0.1, 3.0), torch.log, [], "", "positive inputs"),
        ("sqrt", "Sqrt", pos(0.1, 3.0), torch.sqrt, [], "", "positive inputs"),
        ("reciprocal", "Reciprocal", nz(0.2, 2.0), torch.reciprocal, [], "", ""),
        ("neg", "Neg", nz(), torch.neg, [], "", ""),
        ("abs", "Abs", nz(), torch.abs, [], "", ""),
        ("sin", "Sin", nz(0.1, 3.0), torch.sin, [], "", ""),
        ("cos", "Cos", nz(0.1, 3.0), torch.cos, [], "", ""),
        ("erf", "Erf", nz(0.1, 2.5), torch.erf, [], "", ""),
    ]
    for base, op, make, fwd, attrs, domain, note in specs:
        # A float attribute is float32 in ONNX; an f64 case whose attribute
        # (or default) is not a float32 value would depend on whether the
        # runtime widens the float32 or uses the decimal value, so those
        # run in f32 only (the others use float32-exact values).
        dts = ("f32",) if base in F32_ONLY else ("f32", "f64")
        gcase(base, op, "elem", make, lambda x, fwd=fwd: [fwd(x)], attrs, domain, note, dtypes=dts)

    # Clip: bounds are constant inputs (not differentiated).
    for base, lo, hi in [("clip_minmax", -0.5, 0.75), ("clip_max_only", None, 0.5), ("clip_min_only", -0.25, None)]:
        def make(r, dt, lo=lo, hi=hi):
            pts = [p for p in (lo, hi) if p is not None]
            ins = [("x", "input", away(r.nz(S, dt), pts))]
            ins.append(("min", "weight", np.array(lo, DT[dt])) if lo is not None else ("min", "absent", None))
            if hi is not None:
                ins.append(("max", "weight", np.array(hi, DT[dt])))
            return ins

        def fwd(x, mn=None, mx=None):
            y = x
            if mn is not None:
                y = torch.maximum(y, mn)
            if mx is not None:
                y = torch.minimum(y, mx)
            return [y]
        gcase(base, "Clip", "elem", make, fwd, nograd=("min", "max"),
              note="min/max are constant inputs (not differentiated); x kept 0.05 from them")


# ---------------------------------------------------------------- binary

def binary_cases():
    ops = [
        ("Add", lambda a, b: a + b), ("Sub", lambda a, b: a - b), ("Mul", lambda a, b: a * b),
        ("Div", lambda a, b: a / b), ("Pow", torch.pow), ("Max", torch.maximum), ("Min", torch.minimum),
    ]
    shapes = [
        # tag, a shape, a kind, b shape, b kind
        ("b51", (3, 5, 7), "input", (5, 1), "weight"),
        ("b17", (3, 5, 7), "input", (1, 7), "input"),
        ("mutual", (3, 1, 7), "input", (5, 1), "input"),
        ("lhs_rank1", (7,), "weight", (3, 5, 7), "input"),
        ("scalar", (3, 5, 7), "input", (), "weight"),
    ]
    for op, fn in ops:
        for tag, sa, ka, sb, kb in shapes:
            def make(r, dt, op=op, sa=sa, ka=ka, sb=sb, kb=kb):
                if op == "Pow":
                    a, b = r.pos(sa, dt, 0.2, 2.5), r.nz(sb, dt, 0.1, 2.0)
                elif op == "Div":
                    a, b = r.nz(sa, dt), r.nz(sb, dt, 0.5, 2.0)
                elif op in ("Max", "Min"):
                    a, b = grid(r, sa, dt, 0.0), grid(r, sb, dt, 0.05)
                else:
                    a, b = r.nz(sa, dt), r.nz(sb, dt)
                return [("a", ka, a), ("b", kb, b)]
            note = "multidirectional broadcasting: the gradient of a broadcast operand is summed back to its shape"
            if op in ("Max", "Min"):
                note += "; operands at least 0.05 apart"
            gcase("%s_%s" % (op.lower(), tag), op, "elem", make, lambda a, b, fn=fn: [fn(a, b)],
                  npref=None, note=note)
    # PRelu: slope unidirectionally broadcast to X.
    for tag, ss in [("slope51", (5, 1)), ("slope7", (7,)), ("slope_full", (3, 5, 7)), ("slope1", (1,))]:
        def make(r, dt, ss=ss):
            return [("x", "input", r.nz((3, 5, 7), dt)), ("slope", "weight", r.nz(ss, dt, 0.05, 0.5))]
        gcase("prelu_%s" % tag, "PRelu", "elem", make, lambda x, s: [torch.where(x < 0, s * x, x)],
              note="slope broadcast to X; its gradient is summed back")
    # PRelu with a per-channel slope [C] as older PyTorch exports write it:
    # it does not broadcast to [N, C, H, W] (C != W), so it means [C, 1, 1].
    def make_c(r, dt):
        return [("x", "input", r.nz((2, 3, 4, 5), dt)), ("slope", "weight", r.nz((3,), dt, 0.05, 0.5))]
    gcase("prelu_slope_c", "PRelu", "elem", make_c, lambda x, s: [torch.where(x < 0, s.reshape(3, 1, 1) * x, x)],
          note="slope [C] of an older PyTorch export: per-channel; its gradient is summed over N, H, W")
    # Where: the condition is a constant.
    for tag, sc, sx, kx, sy, ky in [("y17", (3, 5, 7), (3, 5, 7), "input", (1, 7), "weight"),
                                    ("bcast", (5, 1), (3, 1, 7), "input", (5, 7), "input")]:
        def make(r, dt, sc=sc, sx=sx, kx=kx, sy=sy, ky=ky):
            cond = r.rng.random(size=sc) < 0.5
            return [("condition", "weight", cond), ("X", kx, r.nz(sx, dt)), ("Y", ky, r.nz(sy, dt))]
        gcase("where_%s" % tag, "Where", "elem", make, lambda c, x, y: [torch.where(c, x, y)],
              note="bool condition (constant); X and Y broadcast")


# ---------------------------------------------------------------- softmax, reduce

def softmax_cases():
    for op, fn, npf in [("Softmax", torch.softmax, cg.softmax), ("LogSoftmax", torch.log_softmax, cg.log_softmax)]:
        for axis in (-1, 0, 1):
            attrs = [] if axis == -1 else [attr("axis", "int", axis)]
            gcase("%s_axis%s" % (op.lower(), str(axis).replace("-", "m")), op, "reduce",
                  lambda r, dt: [("x", "input", r.nz((3, 5, 7), dt, 0.1, 3.0))],
                  lambda x, axis=axis, fn=fn: [fn(x, axis)], attrs,
                  npref=lambda x, axis=axis, npf=npf: [npf(x, axis)])


def reduce_cases():
    ops = [
        ("ReduceSum", lambda x, ax, k: torch.sum(x, ax, keepdim=k), np.sum),
        ("ReduceMean", lambda x, ax, k: torch.mean(x, ax, keepdim=k), np.mean),
        ("ReduceMax", lambda x, ax, k: torch.amax(x, ax, keepdim=k), np.max),
        ("ReduceMin", lambda x, ax, k: torch.amin(x, ax, keepdim=k), np.min),
        ("ReduceSumSquare", lambda x, ax, k: torch.sum(x * x, ax, keepdim=k), lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims)),
        ("ReduceL2", lambda x, ax, k: torch.sqrt(torch.sum(x * x, ax, keepdim=k)),
         lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims))),
        ("ReduceLogSumExp", lambda x, ax, k: torch.logsumexp(x, ax, keepdim=k),
         lambda x, axis, keepdims: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))),
    ]
    variants = [("axis1_keep", [1], 1), ("axes02_nokeep", [0, 2], 0), ("last_nokeep", [-1], 0), ("all_keep", None, 1)]
    for op, fn, npf in ops:
        for tag, axes, keep in variants:
            def make(r, dt, op=op, axes=axes):
                if op in ("ReduceMax", "ReduceMin"):
                    x = distinct(r, (3, 5, 7), dt)
                else:
                    x = r.nz((3, 5, 7), dt)
                ins = [("x", "input", x)]
                if axes is not None:
                    ins.append(("axes", "weight", i64(axes)))
                return ins

            def fwd(x, a=None, fn=fn, keep=keep):
                ax = tuple(range(x.dim())) if a is None else tuple(int(v) % x.dim() for v in a.tolist())
                return [fn(x, ax, bool(keep))]

            def npref(x, a=None, npf=npf, keep=keep):
                return [cg.reduce(x, npf, a, keep)]
            attrs = [attr("keepdims", "int", keep)] if keep == 0 else []
            gcase("%s_%s" % (op.lower(), tag), op, "reduce", make, fwd, attrs, npref=npref,
                  note="axes is an input (opset 18)" + ("; no axes: all dims" if axes is None else "")
                  + ("; values at least 0.03 apart (no ties)" if op in ("ReduceMax", "ReduceMin") else ""))


# ---------------------------------------------------------------- matmul, gemm

def matmul_cases():
    shapes = [
        ("2d", (5, 7), "input", (7, 3), "weight"),
        ("batch3d", (3, 4, 6), "input", (3, 6, 5), "input"),
        ("batch4d_bcast", (2, 1, 3, 5), "input", (4, 5, 6), "input"),
        ("batch3d_rhs2d", (3, 4, 6), "input", (6, 5), "weight"),
        ("batch4d_lhs2d", (3, 5), "weight", (2, 3, 5, 4), "input"),
        ("vec_lhs", (6,), "input", (6, 4), "weight"),
        ("vec_rhs", (4, 6), "weight", (6,), "input"),
        ("vec_rhs_batched", (2, 3, 6), "input", (6,), "weight"),
        ("vec_lhs_batched", (6,), "input", (2, 6, 3), "input"),
        ("vec_vec", (9,), "input", (9,), "weight"),
    ]
    for tag, sa, ka, sb, kb in shapes:
        def make(r, dt, sa=sa, ka=ka, sb=sb, kb=kb):
            return [("A", ka, r.nz(sa, dt)), ("B", kb, r.nz(sb, dt))]
        gcase("matmul_%s" % tag, "MatMul", "matmul", make, lambda a, b: [torch.matmul(a, b)],
              npref=lambda a, b: [np.matmul(a, b)],
              note="NumPy matmul semantics: 1-D operands promoted then squeezed; broadcast batch dims reduced back")


def gemm_cases():
    M, K, N = 5, 7, 3
    variants = [
        ("plain", dict(), "MN"),
        ("transa", dict(transA=1), "MN"),
        ("transb", dict(transB=1), "MN"),
        ("transab_alpha_beta", dict(transA=1, transB=1, alpha=0.5, beta=2.0), "MN"),
        ("c_n", dict(alpha=1.5), "N"),
        ("c_1n", dict(), "1N"),
        ("c_m1", dict(beta=0.25), "M1"),
        ("c_scalar", dict(), "S"),
        ("no_c", dict(alpha=2.0), None),
    ]
    for tag, at, cs in variants:
        ta, tb = at.get("transA", 0), at.get("transB", 0)
        cshape = {"MN": (M, N), "N": (N,), "1N": (1, N), "M1": (M, 1), "S": ()}.get(cs)

        def make(r, dt, ta=ta, tb=tb, cshape=cshape):
            ins = [("A", "input", r.nz((K, M) if ta else (M, K), dt)),
                   ("B", "weight", r.nz((N, K) if tb else (K, N), dt))]
            if cshape is not None:
                ins.append(("C", "weight", r.nz(cshape, dt)))
            return ins
        attrs = []
        for k in ("alpha", "beta"):
            if k in at:
                attrs.append(attr(k, "float", at[k]))
        for k in ("transA", "transB"):
            if k in at:
                attrs.append(attr(k, "int", at[k]))
        al, be = f32attr(at.get("alpha", 1.0)), f32attr(at.get("beta", 1.0))

        def fwd(a, b, c=None, al=al, be=be, ta=ta, tb=tb):
            y = al * ((a.T if ta else a) @ (b.T if tb else b))
            return [y if c is None else y + be * c]

        def npref(a, b, c=None, al=al, be=be, ta=ta, tb=tb):
            return [cg.gemm(a, b, c, al, be, ta, tb)]
        gcase("gemm_%s" % tag, "Gemm", "matmul", make, fwd, attrs, npref=npref,
              note="C unidirectionally broadcast to [M,N]; its gradient is summed back" if cs not in ("MN", None) else "")


# ---------------------------------------------------------------- conv, pool

def conv_torch(x, w, b, strides, pads, dilations, group):
    nd = x.dim() - 2
    # F.pad takes (last_begin, last_end, ..., first_begin, first_end).
    fp = []
    for i in reversed(range(nd)):
        fp += [pads[i], pads[i + nd]]
    xp = F.pad(x, fp)
    conv = [None, F.conv1d, F.conv2d, F.conv3d][nd]
    return conv(xp, w, b, stride=strides, dilation=dilations, groups=group)


def conv_transpose_torch(x, w, b, strides, pads, dilations, group, output_padding):
    """ONNX ConvTranspose: PyTorch's transposed convolution without padding,
    output_padding zeros appended at the end, then the pads cropped."""
    nd = x.dim() - 2
    ct = [None, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][nd]
    y = ct(x, w, None, stride=strides, dilation=dilations, groups=group)
    fp = []
    for i in reversed(range(nd)):
        fp += [0, output_padding[i]]
    y = F.pad(y, fp)
    crop = tuple(slice(pads[i], y.shape[2 + i] - pads[i + nd]) for i in range(nd))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * nd)
    return y


def conv_cases():
    specs = [
        # tag, x shape, w shape, bias, strides, pads, dilations, group
        ("basic3x3", (2, 3, 6, 5), (4, 3, 3, 3), True, [1, 1], [1, 1, 1, 1], [1, 1], 1),
        ("stride2", (1, 3, 8, 7), (4, 3, 3, 3), True, [2, 2], [0, 0, 0, 0], [1, 1], 1),
        ("stride2_pads", (1, 2, 8, 7), (3, 2, 3, 3), True, [2, 2], [1, 1, 1, 1], [1, 1], 1),
        ("asym_pads", (1, 2, 6, 7), (3, 2, 3, 2), True, [1, 1], [1, 0, 2, 1], [1, 1], 1),
        ("dilation2", (1, 2, 9, 8), (3, 2, 3, 3), False, [1, 1], [2, 2, 2, 2], [2, 2], 1),
        ("group2", (1, 4, 7, 5), (6, 2, 3, 3), True, [1, 2], [1, 1, 1, 1], [1, 1], 2),
        ("depthwise", (2, 3, 6, 5), (3, 1, 3, 3), True, [1, 1], [1, 1, 1, 1], [1, 1], 3),
        ("depthwise_mult2_s2", (1, 3, 7, 7), (6, 1, 3, 3), False, [2, 2], [1, 1, 1, 1], [1, 1], 3),
        ("nobias", (1, 3, 5, 5), (2, 3, 3, 3), False, [1, 1], [0, 0, 0, 0], [1, 1], 1),
        ("1x1", (2, 5, 4, 3), (4, 5, 1, 1), True, [1, 1], [0, 0, 0, 0], [1, 1], 1),
        ("rect_s21_dil", (1, 2, 8, 9), (3, 2, 2, 4), True, [2, 1], [0, 1, 1, 2], [1, 2], 1),
        ("conv1d", (2, 3, 11), (4, 3, 3), True, [2], [1, 2], [1], 1),
        ("conv1d_dil_group", (1, 4, 13), (4, 2, 4), False, [1], [0, 1], [3], 2),
        ("conv1d_k1_pad1", (2, 3, 6), (2, 3, 1), True, [1], [1, 1], [1], 1),
        ("conv3d_basic", (1, 2, 4, 5, 4), (3, 2, 3, 3, 3), True, [1, 1, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1], 1),
        ("conv3d_s2_asym_dil_group", (1, 4, 6, 5, 5), (4, 2, 2, 3, 2), True, [2, 1, 2], [1, 0, 1, 0, 1, 1],
         [2, 1, 1], 2),
    ]
    for tag, xs, ws, bias, st, pd, dl, g in specs:
        def make(r, dt, xs=xs, ws=ws, bias=bias):
            ins = [("x", "input", r.nz(xs, dt)), ("W", "weight", r.nz(ws, dt))]
            if bias:
                ins.append(("B", "weight", r.nz((ws[0],), dt)))
            return ins
        attrs = [attr("kernel_shape", "ints", list(ws[2:])), attr("strides", "ints", st),
                 attr("pads", "ints", pd), attr("dilations", "ints", dl)]
        if g != 1:
            attrs.append(attr("group", "int", g))
        gcase("conv_%s" % tag, "Conv", "matmul", make,
              lambda x, w, b=None, st=st, pd=pd, dl=dl, g=g: [conv_torch(x, w, b, st, pd, dl, g)], attrs,
              npref=lambda x, w, b=None, st=st, pd=pd, dl=dl, g=g: [cg.conv(x, w, b, st, pd, dl, g)],
              note="gradients for X, W and B; pads are [x1_begin, x2_begin, x1_end, x2_end]")


def convtranspose_cases():
    specs = [
        # tag, x shape, w shape, bias, strides, pads, dilations, group, output_padding
        ("2d_s2_outpad", (1, 2, 3, 4), (2, 3, 3, 3), True, [2, 2], [1, 1, 1, 1], [1, 1], 1, [1, 0]),
        ("3d_s2_pads_outpad", (1, 2, 3, 3, 2), (2, 2, 3, 2, 3), True, [2, 1, 2], [1, 0, 1, 1, 0, 0], [1, 1, 1], 1,
         [1, 0, 1]),
        ("3d_group2_dil", (1, 4, 2, 3, 3), (4, 1, 2, 3, 2), False, [1, 2, 1], [0, 1, 1, 1, 0, 0], [2, 1, 2], 2,
         [0, 0, 0]),
    ]
    for tag, xs, ws, bias, st, pd, dl, g, op_ in specs:
        def make(r, dt, xs=xs, ws=ws, bias=bias, g=g):
            ins = [("x", "input", r.nz(xs, dt)), ("W", "weight", r.nz(ws, dt))]
            if bias:
                ins.append(("B", "weight", r.nz((ws[1] * g,), dt)))
            return ins
        attrs = [attr("kernel_shape", "ints", list(ws[2:])), attr("strides", "ints", st),
                 attr("pads", "ints", pd), attr("dilations", "ints", dl)]
        if any(op_):
            attrs.append(attr("output_padding", "ints", op_))
        if g != 1:
            attrs.append(attr("group", "int", g))
        gcase("convtranspose_%s" % tag, "ConvTranspose", "matmul", make,
              lambda x, w, b=None, st=st, pd=pd, dl=dl, g=g, op_=op_: [conv_transpose_torch(x, w, b, st, pd, dl, g, op_)],
              attrs,
              npref=lambda x, w, b=None, st=st, pd=pd, dl=dl, g=g, op_=op_: [cg.conv_transpose(x, w, b, st, pd, dl, g, op_)],
              note="gradients for X, W and B; W is [C, K/group, k...]")


def pool_torch(x, kind, kernel, strides, pads, dilations=None, ceil_mode=0, count_include_pad=0):
    """ONNX MaxPool/AveragePool by gathering every window's elements (an
    out-of-range position reads a -inf (max) or 0 (average) slot)."""
    nd = x.dim() - 2
    dilations = dilations or [1] * nd
    sp = list(x.shape[2:])
    outsz = [cg.pool_out_size(sp[i], kernel[i], strides[i], pads[i], pads[i + nd], dilations[i], ceil_mode)
             for i in range(nd)]
    nsp = int(np.prod(sp))
    K = int(np.prod(kernel))
    idx = np.full(outsz + [K], nsp, dtype=np.int64)
    div = np.zeros(outsz)
    for o in np.ndindex(*outsz):
        inside_n = inpad = 0
        for j, kk in enumerate(np.ndindex(*kernel)):
            pos = [o[i] * strides[i] - pads[i] + kk[i] * dilations[i] for i in range(nd)]
            if all(0 <= pos[i] < sp[i] for i in range(nd)):
                idx[o + (j,)] = np.ravel_multi_index(pos, sp)
                inside_n += 1
            if all(-pads[i] <= pos[i] < sp[i] + pads[i + nd] for i in range(nd)):
                inpad += 1
        div[o] = inpad if count_include_pad else inside_n
    N, C = x.shape[:2]
    fill = float("-inf") if kind == "max" else 0.0
    xf = torch.cat([x.reshape(N, C, nsp), torch.full((N, C, 1), fill)], dim=2)
    g = xf[:, :, torch.as_tensor(idx.reshape(-1))].reshape(N, C, -1, K)
    if kind == "max":
        y = g.max(dim=-1).values
    else:
        y = g.sum(dim=-1) / torch.as_tensor(div.reshape(-1))
    return y.reshape([N, C] + outsz)


def pool_cases():
    specs = [
        # tag, op, x shape, kernel, strides, pads, ceil, count_include_pad, dilations
        ("k2s2", "MaxPool", (1, 3, 6, 5), [2, 2], [2, 2], [0, 0, 0, 0], 0, None, None),
        ("k3s1_overlap", "MaxPool", (1, 2, 5, 6), [3, 3], [1, 1], [0, 0, 0, 0], 0, None, None),
        ("k3s2_pads", "MaxPool", (2, 2, 7, 6), [3, 3], [2, 2], [1, 1, 1, 1], 0, None, None),
        ("k3s2_asym_pads", "MaxPool", (1, 2, 7, 7), [3, 3], [2, 2], [1, 0, 0, 1], 0, None, None),
        ("k3s2_ceil", "MaxPool", (1, 2, 8, 10), [3, 3], [2, 2], [0, 0, 0, 0], 1, None, None),
        ("k3_dil2", "MaxPool", (1, 2, 7, 7), [3, 3], [1, 1], [0, 0, 0, 0], 0, None, [2, 2]),
        ("1d", "MaxPool", (2, 3, 11), [3], [2], [1, 1], 0, None, None),
        ("k3s2", "AveragePool", (1, 3, 7, 8), [3, 3], [2, 2], [0, 0, 0, 0], 0, None, None),
        ("k3s2_pads_excl", "AveragePool", (2, 2, 7, 6), [3, 3], [2, 2], [1, 1, 1, 1], 0, 0, None),
        ("k3s2_pads_incl", "AveragePool", (2, 2, 7, 6), [3, 3], [2, 2], [1, 1, 1, 1], 0, 1, None),
        ("k3s2_asym_pads_incl", "AveragePool", (1, 2, 7, 7), [3, 3], [2, 2], [1, 0, 2, 1], 0, 1, None),
        ("k3s2_ceil_excl", "AveragePool", (1, 2, 8, 10), [3, 3], [2, 2], [0, 0, 0, 0], 1, 0, None),
        ("k3s2_ceil_pads_excl", "AveragePool", (1, 2, 8, 10), [3, 3], [2, 2], [1, 1, 1, 1], 1, 0, None),
        ("k2s1_overlap", "AveragePool", (1, 2, 5, 6), [2, 2], [1, 1], [0, 0, 0, 0], 0, None, None),
        ("1d_pads_incl", "AveragePool", (2, 3, 11), [3], [2], [1, 1], 0, 1, None),
        ("3d_k3s2_pads", "MaxPool", (1, 2, 5, 6, 5), [3, 3, 3], [2, 2, 2], [1, 1, 1, 1, 1, 1], 0, None, None),
        ("3d_ceil_dil", "MaxPool", (1, 2, 6, 5, 7), [2, 2, 3], [2, 1, 2], [0, 0, 0, 0, 0, 0], 1, None, [2, 1, 1]),
        ("3d_same_upper", "MaxPool", (1, 2, 5, 4, 5), [3, 2, 3], [2, 2, 2], "SAME_UPPER", 0, None, None),
        ("3d_k3s2_asym_pads_incl", "AveragePool", (1, 2, 6, 5, 5), [3, 3, 2], [2, 2, 1], [1, 0, 1, 2, 1, 0], 0, 1,
         None),
        ("3d_ceil_pads_excl", "AveragePool", (1, 2, 6, 5, 6), [3, 2, 3], [2, 2, 2], [1, 0, 1, 1, 0, 1], 1, 0, None),
        ("3d_dil_same_lower", "AveragePool", (1, 2, 6, 4, 5), [2, 3, 2], [2, 1, 2], "SAME_LOWER", 0, 0, None),
    ]
    for tag, op, xs, k, st, pd, ceil, cip, dl in specs:
        kind = "max" if op == "MaxPool" else "avg"

        def make(r, dt, kind=kind, xs=xs):
            return [("x", "input", distinct(r, xs, dt) if kind == "max" else r.nz(xs, dt))]
        attrs = [attr("kernel_shape", "ints", k), attr("strides", "ints", st)]
        if isinstance(pd, str):
            attrs.append(attr("auto_pad", "string", pd))
            pd = cg.same_pads(xs[2:], k, st, dl or [1] * len(k), pd == "SAME_UPPER")
        else:
            attrs.append(attr("pads", "ints", pd))
        if ceil:
            attrs.append(attr("ceil_mode", "int", 1))
        if cip is not None:
            attrs.append(attr("count_include_pad", "int", cip))
        if dl is not None:
            attrs.append(attr("dilations", "ints", dl))
        note = "gradient routed to each window's argmax (no ties: values 0.03 apart)" if kind == "max" else ""
        if ceil:
            note += "; ceil_mode: the last window runs past the end (but starts inside)"
        if cip == 1:
            note += "; count_include_pad 1: the divisor counts pad positions"
        gcase("%s_%s" % (op.lower(), tag), op, "reduce", make,
              lambda x, kind=kind, k=k, st=st, pd=pd, dl=dl, ceil=ceil, cip=cip:
                  [pool_torch(x, kind, k, st, pd, dl, ceil, cip or 0)], attrs,
              npref=lambda x, kind=kind, k=k, st=st, pd=pd, dl=dl, ceil=ceil, cip=cip:
                  [cg.pool(x, kind, k, st, pd, dl, ceil, cip or 0)],
              note=note.lstrip("; "))
    for xs in [(2, 3, 4, 5), (1, 4, 6)]:
        gcase("globalaveragepool_%s" % "x".join(map(str, xs)), "GlobalAveragePool", "reduce",
              lambda r, dt, xs=xs: [("x", "input", r.nz(xs, dt))],
              lambda x: [x.mean(dim=tuple(range(2, x.dim())), keepdim=True)],
              npref=lambda x: [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)])


# ---------------------------------------------------------------- normalisation

def layer_norm_torch(x, scale, bias, axis, eps):
    axis = axis % x.dim()
    axes = tuple(range(axis, x.dim()))
    mean = x.mean(dim=axes, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=axes, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps) * scale
    return y if bias is None else y + bias


def norm_cases():
    eps5, eps3 = f32attr(1e-5), f32attr(1e-3)
    for tag, xs, axis, ps, bias, eps in [("axism1", (3, 5, 7), -1, (7,), True, None),
                                         ("axism2", (3, 5, 7), -2, (5, 7), True, 1e-3),
                                         ("nobias", (4, 6), -1, (6,), False, None)]:
        e = eps5 if eps is None else f32attr(eps)

        def make(r, dt, xs=xs, ps=ps, bias=bias):
            ins = [("x", "input", r.nz(xs, dt)), ("scale", "weight", r.nz(ps, dt))]
            if bias:
                ins.append(("bias", "weight", r.nz(ps, dt)))
            return ins
        attrs = [] if axis == -1 else [attr("axis", "int", axis)]
        if eps is not None:
            attrs.append(attr("epsilon", "float", eps))
        gcase("layernorm_%s" % tag, "LayerNormalization", "matmul", make,
              lambda x, s, b=None, axis=axis, e=e: [layer_norm_torch(x, s, b, axis, e)], attrs,
              npref=lambda x, s, b=None, axis=axis, e=e: [cg.layer_norm(x, s, b, axis, e)],
              note="only output Y; gradients for X, scale and bias")

    def inorm(x, s, b, e):
        ax = tuple(range(2, x.dim()))
        sh = (1, -1) + (1,) * (x.dim() - 2)
        m = x.mean(dim=ax, keepdim=True)
        v = ((x - m) ** 2).mean(dim=ax, keepdim=True)
        return (x - m) / torch.sqrt(v + e) * s.reshape(sh) + b.reshape(sh)
    for tag, xs, eps in [("4d", (2, 3, 4, 5), None), ("3d_eps", (2, 4, 7), 1e-3)]:
        e = eps5 if eps is None else f32attr(eps)
        C = xs[1]
        gcase("instancenorm_%s" % tag, "InstanceNormalization", "matmul",
              lambda r, dt, xs=xs, C=C: [("x", "input", r.nz(xs, dt)), ("scale", "weight", r.nz((C,), dt)),
                                         ("B", "weight", r.nz((C,), dt))],
              lambda x, s, b, e=e: [inorm(x, s, b, e)],
              [attr("epsilon", "float", eps)] if eps is not None else [])

    # BatchNormalization. Training mode (training_mode 1): Y uses the batch
    # statistics (biased variance); the running statistics are inputs only.
    def bn_train(x, s, b, m, v, e):
        ax = (0,) + tuple(range(2, x.dim()))
        sh = (1, -1) + (1,) * (x.dim() - 2)
        bm = x.mean(dim=ax, keepdim=True)
        bv = ((x - bm) ** 2).mean(dim=ax, keepdim=True)
        return (x - bm) / torch.sqrt(bv + e) * s.reshape(sh) + b.reshape(sh)

    def bn_train_np(x, s, b, m, v, e):
        ax = (0,) + tuple(range(2, x.ndim))
        return cg.batch_norm(x, s, b, x.mean(axis=ax), x.var(axis=ax), e)

    def bn_infer(x, s, b, m, v, e):
        sh = (1, -1) + (1,) * (x.dim() - 2)
        return (x - m.reshape(sh)) / torch.sqrt(v.reshape(sh) + e) * s.reshape(sh) + b.reshape(sh)
    for tag, xs, train in [("train_4d", (4, 3, 2, 3), 1), ("train_2d", (6, 5), 1), ("infer_4d", (2, 3, 4, 5), 0)]:
        C = xs[1]

        def make(r, dt, xs=xs, C=C):
            return [("x", "input", r.nz(xs, dt)), ("scale", "weight", r.nz((C,), dt)),
                    ("B", "weight", r.nz((C,), dt)), ("input_mean", "weight", r.nz((C,), dt)),
                    ("input_var", "weight", r.pos((C,), dt, 0.5, 2.0))]
        fn = bn_train if train else bn_infer
        npf = bn_train_np if train else cg.batch_norm
        gcase("batchnorm_%s" % tag, "BatchNormalization", "matmul", make,
              lambda x, s, b, m, v, fn=fn: [fn(x, s, b, m, v, eps5)],
              [attr("training_mode", "int", train)],
              npref=lambda x, s, b, m, v, npf=npf: [npf(x, s, b, m, v, eps5)],
              nograd=("input_mean", "input_var"),
              note=("training_mode 1, only output Y: normalised with the batch mean and biased variance; "
                    "input_mean/input_var unused by Y" if train else
                    "inference mode: running statistics are constants") + "; gradients for X, scale, B")


# ---------------------------------------------------------------- gather, data movement

def onnx_slice_t(x, starts, ends, axes, steps):
    ids = {}
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = int(a) % x.dim()
        ids[a] = cg.onnx_slice(np.arange(x.shape[a]), [s], [e], [0], [st])
    for a, ix in ids.items():
        x = x.index_select(a, torch.as_tensor(np.ascontiguousarray(ix), dtype=torch.int64))
    return x


def gather_cases():
    def gather(x, idx, axis):
        axis = axis % x.dim()
        ii = idx.long()
        ii = torch.where(ii < 0, ii + x.shape[axis], ii)
        y = x.index_select(axis, ii.reshape(-1))
        return y.reshape(tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1:]))
    for tag, xs, kx, idx, ki, axis in [
        ("embedding", (10, 4), "weight", [[1, 3, 1], [9, 3, 3]], "weight", 0),
        ("axis0_input_neg", (5, 7), "input", [4, 0, 4, -1, 2, 4], "input", 0),
        ("axis1", (3, 6, 2), "weight", [[5, 1], [5, 5]], "weight", 1),
        ("scalar_idx_axis1", (4, 5), "input", 2, "weight", 1),
    ]:
        gcase("gather_%s" % tag, "Gather", "reduce",
              lambda r, dt, xs=xs, kx=kx, idx=idx, ki=ki: [("data", kx, r.nz(xs, dt)), ("indices", ki, i64(idx))],
              lambda x, i, axis=axis: [gather(x, i, axis)],
              [attr("axis", "int", axis)] if axis else [],
              npref=lambda x, i, axis=axis: [np.take(x, i, axis=axis)],
              note="repeated indices: the gradient scatter-adds; negative indices count from the end")

    def gather_el(x, idx, axis):
        axis = axis % x.dim()
        ii = idx.long()
        ii = torch.where(ii < 0, ii + x.shape[axis], ii)
        return torch.gather(x, axis, ii)
    for tag, xs, kx, ish, axis, neg in [("axis0", (4, 5), "input", (6, 5), 0, True),
                                        ("axis1", (3, 5, 4), "weight", (3, 7, 4), 1, False),
                                        ("axism1", (3, 6), "input", (3, 2), -1, False)]:
        def make(r, dt, xs=xs, kx=kx, ish=ish, axis=axis, neg=neg):
            n = xs[axis % len(xs)]
            return [("data", kx, r.nz(xs, dt)), ("indices", "weight", r.ints(ish, -n if neg else 0, n))]
        gcase("gatherelements_%s" % tag, "GatherElements", "reduce", make,
              lambda x, i, axis=axis: [gather_el(x, i, axis)],
              [attr("axis", "int", axis)] if axis else [],
              npref=lambda x, i, axis=axis: [np.take_along_axis(x, np.where(i < 0, i + x.shape[axis], i), axis)],
              note="random indices with repeats (negative ones count from the end)")


def shape_cases():
    S = (3, 5, 7)
    for tag, shape in [("m1", [-1, 7]), ("zero", [0, -1])]:
        gcase("reshape_%s" % tag, "Reshape", "elem",
              lambda r, dt, shape=shape: [("x", "input", r.nz(S, dt)), ("shape", "weight", i64(shape))],
              lambda x, s: [x.reshape(cg.reshape(np.zeros(tuple(x.shape)), s.numpy()).shape)],
              npref=lambda x, s: [cg.reshape(x, s)], note="0 copies the input dim; -1 is inferred")
    for tag, xs, perm in [("201", S, [2, 0, 1]), ("0231", (2, 3, 4, 5), [0, 2, 3, 1]), ("default", S, None)]:
        gcase("transpose_%s" % tag, "Transpose", "elem",
              lambda r, dt, xs=xs: [("x", "input", r.nz(xs, dt))],
              lambda x, perm=perm: [x.permute(*(perm if perm else list(reversed(range(x.dim())))))],
              [attr("perm", "ints", perm)] if perm else [])
    for tag, shapes, kinds, axis in [("axis1", [(3, 2, 7), (3, 4, 7), (3, 1, 7)], ["input", "weight", "input"], 1),
                                     ("axism1", [(3, 5, 2), (3, 5, 3)], ["weight", "input"], -1)]:
        gcase("concat_%s" % tag, "Concat", "elem",
              lambda r, dt, shapes=shapes, kinds=kinds: [("x%d" % i, k, r.nz(s, dt))
                                                        for i, (s, k) in enumerate(zip(shapes, kinds))],
              lambda *xs, axis=axis: [torch.cat(xs, axis)], [attr("axis", "int", axis)])
    # Split: only output 0 gets a cotangent, so the rest of x's gradient is 0.
    for tag, xs, split, axis, nout in [("sizes", (3, 7, 5), [2, 4, 1], 1, 3), ("num_outputs", (7, 4), None, 0, 3)]:
        def make(r, dt, xs=xs, split=split):
            ins = [("x", "input", r.nz(xs, dt))]
            if split is not None:
                ins.append(("split", "weight", i64(split)))
            return ins

        def fwd(x, s=None, axis=axis, nout=nout):
            n = x.shape[axis]
            sizes = s.tolist() if s is not None else [max(0, min(-(-n // nout), n - i * (-(-n // nout))))
                                                       for i in range(nout)]
            return list(torch.split(x, sizes, dim=axis))
        attrs = [attr("axis", "int", axis)] if axis else []
        if split is None:
            attrs.append(attr("num_outputs", "int", nout))
        gcase("split_%s" % tag, "Split", "elem", make, fwd, attrs,
              note="cotangent on output 0 only: the gradient of x is 0 outside it"
                   + ("; num_outputs 3 of 7: sizes 3,3,1" if split is None else ""))
    I64MAX = 2 ** 63 - 1
    for tag, xs, starts, ends, axes, steps in [
        ("basic", (5, 6), [1, 2], [4, 5], None, None),
        ("neg_starts", (5, 6, 4), [-3, -4], [I64MAX, -1], [0, 1], None),
        ("step2_two_axes", (9, 7, 3), [0, 1], [9, 7], [0, 1], [2, 3]),
        ("reverse", (4, 6), [-1], [-I64MAX - 1], [1], [-1]),
        ("reverse_step_m2", (7, 5), [5, 4], [0, -6], [0, 1], [-2, -1]),
    ]:
        def make(r, dt, xs=xs, starts=starts, ends=ends, axes=axes, steps=steps):
            ins = [("x", "input", r.nz(xs, dt)), ("starts", "weight", i64(starts)), ("ends", "weight", i64(ends))]
            if axes is not None or steps is not None:
                ins.append(("axes", "weight", i64(axes)) if axes is not None else ("axes", "absent", None))
            if steps is not None:
                ins.append(("steps", "weight", i64(steps)))
            return ins

        def fwd(x, s, e, a=None, st=None):
            return [onnx_slice_t(x, s.tolist(), e.tolist(), None if a is None else a.tolist(),
                                 None if st is None else st.tolist())]

        def npref(x, s, e, a=None, st=None):
            return [cg.onnx_slice(x, s, e, a, st)]
        gcase("slice_%s" % tag, "Slice", "elem", make, fwd, npref=npref,
              note="gradient scattered back into zeros; steps and negative starts/ends")
    for tag, xs, axis in [("axis2", (2, 3, 4, 5), 2), ("axis0", S, 0)]:
        gcase("flatten_%s" % tag, "Flatten", "elem", lambda r, dt, xs=xs: [("x", "input", r.nz(xs, dt))],
              lambda x, axis=axis: [x.reshape(int(np.prod(x.shape[:axis])), -1)], [attr("axis", "int", axis)])
    for tag, xs, axes in [("axis1", (3, 1, 7, 1), [1]), ("axes_m1_1", (3, 1, 7, 1), [-1, 1])]:
        gcase("squeeze_%s" % tag, "Squeeze", "elem",
              lambda r, dt, xs=xs, axes=axes: [("x", "input", r.nz(xs, dt)), ("axes", "weight", i64(axes))],
              lambda x, a: [x.reshape([d for i, d in enumerate(x.shape)
                                       if i not in [int(v) % x.dim() for v in a.tolist()]])])
    gcase("unsqueeze_axes03", "Unsqueeze", "elem",
          lambda r, dt: [("x", "input", r.nz((3, 5), dt)), ("axes", "weight", i64([0, 3]))],
          lambda x, a: [x.reshape(1, 3, 5, 1)])
    for tag, xs, shape in [("51_to_357", (5, 1), [3, 5, 7]), ("bidir", (3, 1, 7), [5, 1])]:
        gcase("expand_%s" % tag, "Expand", "elem",
              lambda r, dt, xs=xs, shape=shape: [("x", "input", r.nz(xs, dt)), ("shape", "weight", i64(shape))],
              lambda x, s: [torch.broadcast_to(x, np.broadcast_shapes(tuple(x.shape), tuple(s.tolist())))],
              note="bidirectional broadcast; the gradient sums the copies")
    for tag, xs, reps in [("212", (3, 5, 2), [2, 1, 3]), ("1d", (4,), [3])]:
        gcase("tile_%s" % tag, "Tile", "elem",
              lambda r, dt, xs=xs, reps=reps: [("x", "input", r.nz(xs, dt)), ("repeats", "weight", i64(reps))],
              lambda x, rp: [x.repeat(*rp.tolist())], note="the gradient sums the tiles")
    for tag, xs, pads, cval, axes in [("const", (3, 5, 4), [1, 0, 2, 0, 2, 1], 0.5, None),
                                      ("negative", (4, 6), [1, -1, -2, 2], None, None),
                                      ("axes", (3, 5, 7), [1, 2], 0.25, [2])]:
        def make(r, dt, xs=xs, pads=pads, cval=cval, axes=axes):
            ins = [("x", "input", r.nz(xs, dt)), ("pads", "weight", i64(pads))]
            if cval is not None or axes is not None:
                ins.append(("constant_value", "weight", np.array(cval, DT[dt])) if cval is not None
                           else ("constant_value", "absent", None))
            if axes is not None:
                ins.append(("axes", "weight", i64(axes)))
            return ins

        def fwd(x, p, cv=None, ax=None):
            p = p.tolist()
            axes = list(range(x.dim())) if ax is None else [int(a) % x.dim() for a in ax.tolist()]
            k = len(axes)
            fp = []
            for i in reversed(range(x.dim())):
                if i in axes:
                    j = axes.index(i)
                    fp += [p[j], p[j + k]]
                else:
                    fp += [0, 0]
            return [F.pad(x, fp, value=0.0 if cv is None else float(cv))]
        gcase("pad_%s" % tag, "Pad", "elem", make, fwd, nograd=("constant_value",),
              note="constant mode; constant_value is a constant (not differentiated); negative pads crop")


# ---------------------------------------------------------------- recurrent

def lstm_torch(X, W, R, B, h0, c0, direction):
    """ONNX LSTM (default activations, no peepholes), layout 0."""
    T, Bn, _ = X.shape
    dirs = W.shape[0]
    H = R.shape[2]
    Ys, Yh, Yc = [], [], []
    for d in range(dirs):
        rev = direction == "reverse" or d == 1
        wb = B[d, :4 * H] if B is not None else 0
        rb = B[d, 4 * H:] if B is not None else 0
        h = h0[d] if h0 is not None else torch.zeros(Bn, H)
        c = c0[d] if c0 is not None else torch.zeros(Bn, H)
        ys = [None] * T
        for step in range(T):
            tt = T - 1 - step if rev else step
            g = X[tt] @ W[d].T + h @ R[d].T + wb + rb
            i, o, f, cc = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
            i, o, f, cc = torch.sigmoid(i), torch.sigmoid(o), torch.sigmoid(f), torch.tanh(cc)
            c = f * c + i * cc
            h = o * torch.tanh(c)
            ys[tt] = h
        Ys.append(torch.stack(ys))
        Yh.append(h)
        Yc.append(c)
    return [torch.stack(Ys, 1), torch.stack(Yh), torch.stack(Yc)]


def gru_torch(X, W, R, B, h0, direction, lbr):
    """ONNX GRU (default activations), layout 0."""
    T, Bn, _ = X.shape
    dirs = W.shape[0]
    H = R.shape[2]
    Ys, Yh = [], []
    for d in range(dirs):
        rev = direction == "reverse" or d == 1
        wb = B[d, :3 * H] if B is not None else torch.zeros(3 * H)
        rb = B[d, 3 * H:] if B is not None else torch.zeros(3 * H)
        h = h0[d] if h0 is not None else torch.zeros(Bn, H)
        ys = [None] * T
        Wz, Wr, Wh = W[d, :H], W[d, H:2 * H], W[d, 2 * H:]
        Rz, Rr, Rh = R[d, :H], R[d, H:2 * H], R[d, 2 * H:]
        for step in range(T):
            tt = T - 1 - step if rev else step
            x = X[tt]
            z = torch.sigmoid(x @ Wz.T + h @ Rz.T + wb[:H] + rb[:H])
            r = torch.sigmoid(x @ Wr.T + h @ Rr.T + wb[H:2 * H] + rb[H:2 * H])
            if lbr:
                hh = torch.tanh(x @ Wh.T + r * (h @ Rh.T + rb[2 * H:]) + wb[2 * H:])
            else:
                hh = torch.tanh(x @ Wh.T + (r * h) @ Rh.T + rb[2 * H:] + wb[2 * H:])
            h = (1 - z) * hh + z * h
            ys[tt] = h
        Ys.append(torch.stack(ys))
        Yh.append(h)
    return [torch.stack(Ys, 1), torch.stack(Yh)]


def np_sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_np(X, W, R, B, h0, c0, direction):
    T, Bn, _ = X.shape
    dirs, H = W.shape[0], R.shape[2]
    Y = np.zeros((T, dirs, Bn, H))
    Yh, Yc = np.zeros((dirs, Bn, H)), np.zeros((dirs, Bn, H))
    for d in range(dirs):
        h = h0[d].copy() if h0 is not None else np.zeros((Bn, H))
        c = c0[d].copy() if c0 is not None else np.zeros((Bn, H))
        bias = (B[d, :4 * H] + B[d, 4 * H:]) if B is not None else np.zeros(4 * H)
        order = range(T - 1, -1, -1) if (direction == "reverse" or d == 1) else range(T)
        for tt in order:
            for n in range(Bn):
                g = W[d] @ X[tt, n] + R[d] @ h[n] + bias
                i, o, f, cc = np_sig(g[:H]), np_sig(g[H:2 * H]), np_sig(g[2 * H:3 * H]), np.tanh(g[3 * H:])
                c[n] = f * c[n] + i * cc
                h[n] = o * np.tanh(c[n])
            Y[tt, d] = h
        Yh[d], Yc[d] = h, c
    return [Y, Yh, Yc]


def gru_np(X, W, R, B, h0, direction, lbr):
    T, Bn, _ = X.shape
    dirs, H = W.shape[0], R.shape[2]
    Y = np.zeros((T, dirs, Bn, H))
    Yh = np.zeros((dirs, Bn, H))
    for d in range(dirs):
        h = h0[d].copy() if h0 is not None else np.zeros((Bn, H))
        wb = B[d, :3 * H] if B is not None else np.zeros(3 * H)
        rb = B[d, 3 * H:] if B is not None else np.zeros(3 * H)
        order = range(T - 1, -1, -1) if (direction == "reverse" or d == 1) else range(T)
        for tt in order:
            hn = np.zeros_like(h)
            for n in range(Bn):
                xw = W[d] @ X[tt, n] + wb
                hr = R[d] @ h[n] + rb
                z = np_sig(xw[:H] + hr[:H])
                r = np_sig(xw[H:2 * H] + hr[H:2 * H])
                if lbr:
                    hh = np.tanh(xw[2 * H:] + r * hr[2 * H:])
                else:
                    hh = np.tanh(xw[2 * H:] + R[d, 2 * H:] @ (r * h[n]) + rb[2 * H:])
                hn[n] = (1 - z) * hh + z * h[n]
            h = hn
            Y[tt, d] = h
        Yh[d] = h
    return [Y, Yh]


def blocks(a, order, H, axis=0):
    """Reorders the H-sized gate blocks of a along axis."""
    return torch.cat([a.narrow(axis, k * H, H) for k in order], axis)


def inv(order):
    out = [0] * len(order)
    for i, k in enumerate(order):
        out[k] = i
    return out


def check_with_nn(kind, direction):
    """Cross-checks the explicit-equation LSTM/GRU against torch.nn.LSTM /
    torch.nn.GRU (their gate orders are ifgo and rzn; ONNX's are iofc and
    zrh), outputs and gradients."""
    def check(ts, outs, grads):
        X, W, R, B, h0 = ts[0], ts[1], ts[2], ts[3], ts[5]
        c0 = ts[6] if kind == "lstm" else None
        dirs, H = W.shape[0], R.shape[2]
        order = [0, 2, 3, 1] if kind == "lstm" else [1, 0, 2]
        G = len(order)
        mod = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(
            X.shape[2], H, bidirectional=dirs == 2, dtype=torch.float64)
        leaves = [a.detach().clone().requires_grad_(True) for a in (X, W, R, B, h0) + ((c0,) if c0 is not None else ())]
        Xl, Wl, Rl, Bl, hl = leaves[:5]
        for d in range(dirs):
            sfx = "_reverse" if d == 1 else ""
            mod._parameters["weight_ih_l0" + sfx] = blocks(Wl[d], order, H)
            mod._parameters["weight_hh_l0" + sfx] = blocks(Rl[d], order, H)
            mod._parameters["bias_ih_l0" + sfx] = blocks(Bl[d, :G * H], order, H)
            mod._parameters["bias_hh_l0" + sfx] = blocks(Bl[d, G * H:], order, H)
        mod._flat_weights = [mod._parameters[n] for n in mod._flat_weights_names]
        state = (hl, leaves[5]) if kind == "lstm" else hl
        y, st = mod(Xl, state)
        T, Bn = X.shape[0], X.shape[1]
        Y = y.reshape(T, Bn, dirs, H).permute(0, 2, 1, 3)
        want = [Y] + (list(st) if kind == "lstm" else [st])
        for a, b in zip(want, outs):
            assert torch.allclose(a, b, rtol=1e-11, atol=1e-12), "%s vs torch.nn: forward differs" % kind
        # Same loss on output 0 as the reference: compare every gradient.
        cot = grads["__cot"]
        g = torch.autograd.grad((Y * cot).sum(), leaves)
        names = ["X", "W", "R", "B", "initial_h", "initial_c"]
        for nm, a in zip(names, g):
            b = grads.get(nm)
            assert b is not None and torch.allclose(a, b, rtol=1e-10, atol=1e-12), \
                "%s vs torch.nn: gradient of %s differs" % (kind, nm)
        CHECKS["torch.nn"] += 1
    return check


def recurrent_cases():
    T, Bn, I, H = 4, 2, 3, 4
    for tag, direction, withB, init in [("fwd", "forward", True, True), ("bidir", "bidirectional", True, True),
                                        ("reverse", "reverse", True, True), ("fwd_noinit", "forward", False, False)]:
        dirs = 2 if direction == "bidirectional" else 1

        def make(r, dt, dirs=dirs, withB=withB, init=init):
            ins = [("X", "input", r.nz((T, Bn, I), dt, 0.1, 1.0)),
                   ("W", "weight", r.nz((dirs, 4 * H, I), dt, 0.05, 0.6)),
                   ("R", "weight", r.nz((dirs, 4 * H, H), dt, 0.05, 0.6))]
            if withB or init:
                ins.append(("B", "weight", r.nz((dirs, 8 * H), dt, 0.05, 0.5)) if withB else ("B", "absent", None))
            if init:
                ins += [("sequence_lens", "absent", None),
                        ("initial_h", "input", r.nz((dirs, Bn, H), dt, 0.05, 0.8)),
                        ("initial_c", "input", r.nz((dirs, Bn, H), dt, 0.05, 0.8))]
            return ins

        def fwd(X, W, R, B=None, sl=None, h0=None, c0=None, direction=direction):
            return lstm_torch(X, W, R, B, h0, c0, direction)

        def npref(X, W, R, B=None, sl=None, h0=None, c0=None, direction=direction):
            return lstm_np(X, W, R, B, h0, c0, direction)
        attrs = [attr("hidden_size", "int", H)]
        if direction != "forward":
            attrs.append(attr("direction", "string", direction))
        gcase("lstm_%s" % tag, "LSTM", "seq", make, fwd, attrs, npref=npref,
              check=check_with_nn("lstm", direction) if withB and init and direction != "reverse" else None,
              note="ONNX layout 0, gates iofc, default activations; loss on Y only; gradients for X, W, R, B"
                   + (" and the initial states" if init else ""))
    for tag, direction, lbr in [("fwd", "forward", 0), ("fwd_lbr", "forward", 1), ("bidir_lbr", "bidirectional", 1),
                                ("bidir", "bidirectional", 0)]:
        dirs = 2 if direction == "bidirectional" else 1

        def make(r, dt, dirs=dirs):
            return [("X", "input", r.nz((T, Bn, I), dt, 0.1, 1.0)),
                    ("W", "weight", r.nz((dirs, 3 * H, I), dt, 0.05, 0.6)),
                    ("R", "weight", r.nz((dirs, 3 * H, H), dt, 0.05, 0.6)),
                    ("B", "weight", r.nz((dirs, 6 * H), dt, 0.05, 0.5)),
                    ("sequence_lens", "absent", None),
                    ("initial_h", "input", r.nz((dirs, Bn, H), dt, 0.05, 0.8))]

        def fwd(X, W, R, B, sl, h0, direction=direction, lbr=lbr):
            return gru_torch(X, W, R, B, h0, direction, lbr)

        def npref(X, W, R, B, sl, h0, direction=direction, lbr=lbr):
            return gru_np(X, W, R, B, h0, direction, lbr)
        attrs = [attr("hidden_size", "int", H)]
        if direction != "forward":
            attrs.append(attr("direction", "string", direction))
        if lbr:
            attrs.append(attr("linear_before_reset", "int", 1))
        gcase("gru_%s" % tag, "GRU", "seq", make, fwd, attrs, npref=npref,
              check=check_with_nn("gru", direction) if lbr else None,
              note="ONNX layout 0, gates zrh, linear_before_reset %d; loss on Y only; "
                   "gradients for X, W, R, B and initial_h" % lbr)


# ---------------------------------------------------------------- attention

def attention_cases():
    def attn(q, k, v, mask, heads, scale):
        three = q.dim() == 3
        if three:
            Bn, Sq, _ = q.shape
            q = q.reshape(Bn, Sq, heads, -1).permute(0, 2, 1, 3)
            k = k.reshape(Bn, k.shape[1], heads, -1).permute(0, 2, 1, 3)
            v = v.reshape(Bn, v.shape[1], heads, -1).permute(0, 2, 1, 3)
        sc = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
        s = (q @ k.transpose(-1, -2)) * sc + mask
        y = torch.softmax(s, -1) @ v
        if three:
            y = y.permute(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
        return y

    def mask_of(r, shape, dt):
        m = r.rng.uniform(-2.0, 0.0, size=shape)
        m[r.rng.random(size=shape) < 0.2] = -30.0  # effectively masked
        return m.astype(DT[dt])
    gcase("attention_4d_mask", "Attention", "matmul",
          lambda r, dt: [("Q", "input", r.nz((2, 2, 3, 4), dt, 0.1, 1.5)), ("K", "input", r.nz((2, 2, 5, 4), dt, 0.1, 1.5)),
                         ("V", "weight", r.nz((2, 2, 5, 3), dt)), ("attn_mask", "input", mask_of(r, (3, 5), dt))],
          lambda q, k, v, m: [attn(q, k, v, m, None, None)],
          note="softmax(Q K^T/sqrt(D) + attn_mask) V; float mask [Sq,Sk] broadcast (some entries -30); "
               "gradients for Q, K, V and the mask (the MatMul+Softmax+MatMul composite as one ONNX node)")
    sc = 0.375
    gcase("attention_3d_heads_scale", "Attention", "matmul",
          lambda r, dt: [("Q", "input", r.nz((2, 3, 8), dt, 0.1, 1.5)), ("K", "weight", r.nz((2, 5, 8), dt, 0.1, 1.5)),
                         ("V", "input", r.nz((2, 5, 6), dt)), ("attn_mask", "weight", mask_of(r, (2, 1, 3, 5), dt))],
          lambda q, k, v, m: [attn(q, k, v, m, 2, sc)],
          [attr("q_num_heads", "int", 2), attr("kv_num_heads", "int", 2), attr("scale", "float", 0.375)],
          note="3-D [B,S,heads*D] inputs, 2 heads, scale 0.375, mask [B,1,Sq,Sk]")


# ---------------------------------------------------------------- output

def to_torch(a, grad):
    if a is None:
        return None
    if a.dtype.kind == "f":
        return torch.tensor(a.astype(np.float64), requires_grad=grad)
    return torch.as_tensor(a)


def loss_np(c, arrays, cot):
    """sum(out0 * cot) from the NumPy reference, or PyTorch's forward."""
    if c["npref"] is not None:
        y = np.asarray(c["npref"](*arrays)[0], dtype=np.float64)
    else:
        with torch.no_grad():
            y = c["fwd"](*[to_torch(a, False) for a in arrays])[0].numpy()
    return float(np.sum(y * cot))


FD_ERR = {}
F32_HEADROOM = {}


def f32_autograd_ratio(c, arrays, grads, cot, g64, rtol, atol):
    """Runs the case's PyTorch formulation in float32 and returns the largest
    |grad - reference| / (atol + rtol*|reference|): how much of the stated
    tolerance a plain float32 implementation needs."""
    torch.set_default_dtype(torch.float32)
    try:
        ts = [None if a is None else (torch.tensor(a, requires_grad=i in grads) if a.dtype.kind == "f"
                                      else torch.as_tensor(a)) for i, a in enumerate(arrays)]
        outs = c["fwd"](*ts)
        gs = torch.autograd.grad((outs[0] * torch.tensor(cot)).sum(), [ts[i] for i in grads], allow_unused=True)
    finally:
        torch.set_default_dtype(torch.float64)
    worst = 0.0
    for i, g in zip(grads, gs):
        if g is None:
            g = torch.zeros(arrays[i].shape)
        if g.dtype != torch.float32:
            raise AssertionError("%s: float32 run computed in %s" % (c["name"], g.dtype))
        want = g64[i].astype(np.float32).astype(np.float64)
        worst = max(worst, float(np.max(np.abs(g.numpy().astype(np.float64) - want) / (atol + rtol * np.abs(want)))))
    return worst
CHECKS = {"numpy": 0, "torch.nn": 0}


def write_case(c):
    name, dt = c["name"], c["dtype"]
    r = R(rng_for(name))
    inputs = c["make"](r, dt)
    while inputs and inputs[-1][1] == "absent":
        inputs.pop()  # trailing absent inputs are meaningless
    d = os.path.join(OUT, name)
    os.makedirs(d)
    arrays, ins_json, grads = [], [], []
    for i, (iname, kind, a) in enumerate(inputs):
        entry = {"name": iname, "kind": kind}
        if kind == "absent":
            arrays.append(None)
        else:
            a = np.asarray(a, order="C")
            if a.dtype == np.bool_:
                dtn = "bool"
            elif a.dtype in NP2DT:
                dtn = NP2DT[a.dtype]
            else:
                raise ValueError("%s: input %s dtype %s" % (name, iname, a.dtype))
            if a.dtype.kind == "f" and a.dtype != DT[dt]:
                raise ValueError("%s: input %s is %s in a %s case" % (name, iname, a.dtype, dt))
            fn = "in_%d.npy" % i
            np.save(os.path.join(d, fn), a, allow_pickle=False)
            entry.update(file=fn, dtype=dtn, shape=list(a.shape))
            arrays.append(a)
            if a.dtype.kind == "f" and iname not in c["nograd"]:
                grads.append(i)
        ins_json.append(entry)
    ts = [to_torch(a, i in grads) for i, a in enumerate(arrays)]
    outs = c["fwd"](*ts)
    odt = DT[dt]
    outs_json, ys = [], []
    for i, y in enumerate(outs):
        y64 = y.detach().numpy()
        if not np.all(np.isfinite(y64)):
            raise ValueError("%s: non-finite output" % name)
        ys.append(y64)
        yc = np.asarray(y64.astype(odt), order="C")
        fn = "out_%d.npy" % i
        np.save(os.path.join(d, fn), yc, allow_pickle=False)
        outs_json.append({"name": "y" if len(outs) == 1 else "y%d" % i, "file": fn,
                          "dtype": dt, "shape": list(yc.shape)})
    f64s = [None if a is None else (a.astype(np.float64) if a.dtype.kind == "f" else a) for a in arrays]
    if c["npref"] is not None:
        for i, (a, b) in enumerate(zip(c["npref"](*f64s), ys)):
            a = np.asarray(a, dtype=np.float64)
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-10, atol=1e-12):
                raise AssertionError("%s: PyTorch output %d differs from the NumPy reference (max %g)"
                                     % (name, i, np.max(np.abs(a - b)) if a.shape == b.shape else -1))
        CHECKS["numpy"] += 1
    # Cotangent from its own generator so that it does not move the inputs.
    cot = R(rng_for(name + "/cot")).nz(ys[0].shape, dt, 0.1, 1.0)
    np.save(os.path.join(d, "cot.npy"), np.asarray(cot, order="C"), allow_pickle=False)
    cot64 = torch.tensor(cot.astype(np.float64))
    loss = (outs[0] * cot64).sum()
    gs = torch.autograd.grad(loss, [ts[i] for i in grads], allow_unused=True) if grads else []
    gmap = {"__cot": cot64}
    g64 = {}
    for i, g in zip(grads, gs):
        g = torch.zeros_like(ts[i]) if g is None else g
        g64[i] = g.detach().numpy()
        gmap[inputs[i][0]] = g.detach()
        gc = np.asarray(g64[i].astype(odt), order="C")
        if gc.shape != arrays[i].shape or not np.all(np.isfinite(gc)):
            raise ValueError("%s: bad gradient for input %d" % (name, i))
        np.save(os.path.join(d, "grad_%d.npy" % i), gc, allow_pickle=False)
    if c["check"] is not None:
        c["check"](ts, [o.detach() for o in outs], gmap)
    if dt == "f64" and grads:
        fr = np.random.default_rng(1)
        worst = 0.0
        cotf = cot.astype(np.float64)
        for i in grads:
            n = arrays[i].size
            for e in fr.choice(n, size=min(n, FD_SAMPLES), replace=False):
                pa = [None if a is None else a.copy() for a in f64s]
                flat = pa[i].reshape(-1)
                x0 = flat[e]
                flat[e] = x0 + FD_H
                lp = loss_np(c, pa, cotf)
                flat[e] = x0 - FD_H
                lm = loss_np(c, pa, cotf)
                fd = (lp - lm) / (2 * FD_H)
                ag = g64[i].reshape(-1)[e]
                err = abs(fd - ag) / max(1.0, abs(ag))
                worst = max(worst, err)
                if err > FD_LIMIT:
                    raise AssertionError("%s: finite difference of input %d element %d is %.12g, autograd %.12g"
                                         % (name, i, e, fd, ag))
        FD_ERR[name] = worst
    rtol, atol = TOL[(c["cls"], dt)]
    if dt == "f32" and grads:
        F32_HEADROOM[name] = f32_autograd_ratio(c, arrays, grads, cot, g64, rtol, atol)
        if F32_HEADROOM[name] > 0.5:
            raise AssertionError("%s: PyTorch's float32 autograd uses %.2f of the tolerance" % (name, F32_HEADROOM[name]))
    doc = {
        "version": 1,
        "name": name,
        "op": c["op"],
        "domain": c["domain"],
        "dtype": dt,
        "attrs": c["attrs"],
        "inputs": ins_json,
        "outputs": outs_json,
        "tolerance": {"rtol": rtol, "atol": atol, "class": c["cls"]},
        "note": c["note"],
        "grads": grads,
    }
    with open(os.path.join(d, "case.json"), "w") as f:
        json_dump(doc, f)


def json_dump(doc, f):
    json.dump(doc, f, indent=1)
    f.write("\n")


def main():
    torch.set_default_dtype(torch.float64)
    unary_cases()
    binary_cases()
    softmax_cases()
    reduce_cases()
    matmul_cases()
    gemm_cases()
    conv_cases()
    convtranspose_cases()
    pool_cases()
    norm_cases()
    gather_cases()
    shape_cases()
    recurrent_cases()
    attention_cases()
    names = [c["name"] for c in CASES]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        sys.exit("duplicate case names: %s" % sorted(dup))
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    for c in CASES:
        write_case(c)
    total = 0
    for root, _, files in os.walk(OUT):
        for fn in files:
            total += os.path.getsize(os.path.join(root, fn))
    by_op = {}
    for c in CASES:
        by_op[c["op"]] = by_op.get(c["op"], 0) + 1
    print("%d cases, %d bytes" % (len(CASES), total))
    for op in sorted(by_op):
        print("  %-22s %d" % (op, by_op[op]))
    print("forward outputs checked against NumPy references: %d cases; LSTM/GRU against torch.nn "
          "(outputs and gradients): %d cases" % (CHECKS["numpy"], CHECKS["torch.nn"]))
    hw = max(F32_HEADROOM.items(), key=lambda kv: kv[1])
    print("PyTorch float32 autograd against the f32 references: at most %.3g of the tolerance (%s)" % (hw[1], hw[0]))
    worst = max(FD_ERR.items(), key=lambda kv: kv[1])
    print("finite differences (h=%g, f64, %d cases, <= %d elements per input): max |fd - autograd|/max(1,|autograd|) "
          "= %.3g (%s)" % (FD_H, len(FD_ERR), FD_SAMPLES, worst[1], worst[0]))


if __name__ == "__main__":
    main()
