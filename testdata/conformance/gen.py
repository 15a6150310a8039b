#!/usr/bin/python3
"""Generate vrun's shared op conformance table.

Run with Debian's NumPy:  /usr/bin/python3 testdata/conformance/gen.py

Every case is one ONNX node (latest-opset semantics) with concrete inputs.
For each case this writes testdata/conformance/cases/<name>/ holding

  case.json   the op, attributes (with explicit types), inputs in order
              (runtime "input" or constant "weight", or "absent" for an
              omitted optional input), outputs, the dtype and the tolerance
  in_<i>.npy  input i (absent inputs have no file)
  out_<i>.npy expected output i

Expected outputs are computed by the NumPy reference implementations below
in float64 from the (already rounded) inputs, then cast to the output dtype.
Random data comes from a generator seeded by a hash of the case name, so the
output is deterministic and adding a case does not change the others.

case.json schema (version 1):

  {"version": 1, "name": str, "op": str, "domain": "" | "vrun",
   "dtype": "f32" | "f16" | "f64",        # the case's main element type
   "attrs": [{"name": str, "type": "int"|"float"|"string"|"ints"|"floats"|
              "strings", "value": ...}],
   "inputs": [{"name": str, "kind": "input"|"weight"|"absent",
               "file": "in_0.npy", "dtype": str, "shape": [int]}],
   "outputs": [{"name": str, "file": "out_0.npy", "dtype": str,
                "shape": [int]}],
   "tolerance": {"rtol": float, "atol": float},   # |got-want| <= atol + rtol*|want|
   "note": str}

Ops outside ONNX (domain "vrun") are vrun extensions: Silu(x) = x*sigmoid(x).
"""

import hashlib
import json
import math
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cases")

DT = {"f32": np.float32, "f16": np.float16, "f64": np.float64,
      "i32": np.int32, "i64": np.int64}
NP2DT = {np.dtype(v): k for k, v in DT.items()}

# Tolerances, |got - want| <= atol + rtol*|want|, by (class, dtype).
#   exact:   data movement and selection (no arithmetic): bit-exact.
#   elem:    one elementwise function evaluation, a few ulp.
#   reduce:  sums/normalisations over up to ~100 elements (Softmax,
#            LayerNorm, ReduceSum/Mean, AveragePool, BatchNorm).
#   matmul:  dot products (Gemm, MatMul, Conv), K <= ~40.
# f16 matmul allows accumulation in f16 (K*ulp near 8 is ~1e-2).
TOL = {
    ("exact", "f32"): (0.0, 0.0), ("exact", "f16"): (0.0, 0.0),
    ("exact", "f64"): (0.0, 0.0),
    ("elem", "f32"): (1e-5, 1e-6), ("elem", "f16"): (1e-2, 1e-3),
    ("elem", "f64"): (1e-10, 1e-12),
    ("reduce", "f32"): (1e-4, 1e-5), ("reduce", "f16"): (1e-2, 1e-3),
    ("reduce", "f64"): (1e-10, 1e-12),
    ("matmul", "f32"): (1e-4, 1e-5), ("matmul", "f16"): (1e-2, 1e-2),
    ("matmul", "f64"): (1e-10, 1e-12),
}

CASES = []


def rng_for(name):
    seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng(seed)


class R:
    """Random data helpers bound to one case's generator."""

    def __init__(self, rng):
        self.rng = rng

    def nz(self, shape, dt, lo=0.1, hi=2.0):
        """Uniform magnitude in [lo, hi] with random signs (never zero)."""
        mag = self.rng.uniform(lo, hi, size=shape)
        sgn = np.where(self.rng.random(size=shape) < 0.5, -1.0, 1.0)
        return np.asarray(mag * sgn).astype(DT[dt])

    def pos(self, shape, dt, lo=0.1, hi=2.0):
        return np.asarray(self.rng.uniform(lo, hi, size=shape)).astype(DT[dt])

    def ints(self, shape, lo, hi, dt="i64"):
        return np.asarray(self.rng.integers(lo, hi, size=shape)).astype(DT[dt])


def attr(name, typ, value):
    return {"name": name, "type": typ, "value": value}


def f32attr(v):
    """An ONNX float attribute is float32; the reference uses that value."""
    return float(np.float32(v))


def case(name, op, dtype, tol, inputs, ref, attrs=(), domain="", note=""):
    """Register a case.

    inputs: list of (name, kind, array-or-None); ref: function of the input
    arrays (None for absent) returning a list of float64/int outputs.
    """
    CASES.append(dict(name=name, op=op, dtype=dtype, tol=tol, inputs=inputs,
                      ref=ref, attrs=list(attrs), domain=domain, note=note))


def out_dtype_of(inputs):
    for _, kind, a in inputs:
        if a is not None and a.dtype.kind == "f":
            return a.dtype
    return inputs[0][2].dtype


def f64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


# ---------------------------------------------------------------- reference

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def erf(x):
    return np.vectorize(math.erf)(x)


def gemm(A, B, C, alpha=1.0, beta=1.0, transA=0, transB=0):
    A = A.T if transA else A
    B = B.T if transB else B
    y = alpha * (A @ B)
    if C is not None:
        y = y + beta * C
    return y


def softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def layer_norm(x, scale, bias, axis, eps):
    axis = axis % x.ndim
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * scale
    if bias is not None:
        y = y + bias
    return y


def batch_norm(x, scale, b, mean, var, eps):
    sh = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + eps) * scale.reshape(sh) + b.reshape(sh)


def conv(x, w, b, strides, pads, dilations, group):
    """N-D convolution (cross-correlation), ONNX Conv semantics, float64."""
    nd = x.ndim - 2
    N, C = x.shape[:2]
    M = w.shape[0]
    Cg = C // group
    Mg = M // group
    assert w.shape[1] == Cg and M % group == 0
    k = w.shape[2:]
    padw = [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)]
    xp = np.pad(x, padw)
    outsz = [(xp.shape[2 + i] - dilations[i] * (k[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    y = np.zeros((N, M) + tuple(outsz))
    for kidx in np.ndindex(*k):
        sl = tuple(slice(kidx[i] * dilations[i],
                         kidx[i] * dilations[i] + strides[i] * (outsz[i] - 1) + 1,
                         strides[i]) for i in range(nd))
        patch = xp[(slice(None), slice(None)) + sl]  # N, C, out...
        for g in range(group):
            pg = patch[:, g * Cg:(g + 1) * Cg]
            wg = w[(slice(g * Mg, (g + 1) * Mg), slice(None)) + kidx]  # Mg, Cg
            y[:, g * Mg:(g + 1) * Mg] += np.einsum("nc...,mc->nm...", pg, wg)
    if b is not None:
        y += b.reshape((1, M) + (1,) * nd)
    return y


def conv_naive(x, w, b, strides, pads, dilations, group):
    """Direct scalar-loop 2-D convolution, used to cross-check conv()."""
    N, C, H, W = x.shape
    M, Cg, KH, KW = w.shape
    Mg = M // group
    oh = (H + pads[0] + pads[2] - dilations[0] * (KH - 1) - 1) // strides[0] + 1
    ow = (W + pads[1] + pads[3] - dilations[1] * (KW - 1) - 1) // strides[1] + 1
    y = np.zeros((N, M, oh, ow))
    for n in range(N):
        for m in range(M):
            g = m // Mg
            for i in range(oh):
                for j in range(ow):
                    s = 0.0 if b is None else b[m]
                    for c in range(Cg):
                        for p in range(KH):
                            for q in range(KW):
                                hi = i * strides[0] - pads[0] + p * dilations[0]
                                wi = j * strides[1] - pads[1] + q * dilations[1]
                                if 0 <= hi < H and 0 <= wi < W:
                                    s += x[n, g * Cg + c, hi, wi] * w[m, c, p, q]
                    y[n, m, i, j] = s
    return y


def conv_transpose(x, w, b, strides, pads, dilations, group, output_padding):
    """N-D ONNX ConvTranspose by scattering every input element's kernel
    products (the transpose of conv()), float64. pads are the begin and end
    pads [x1_begin, ..., x1_end, ...]; output_padding adds zeros at the end
    before the end pads are cropped."""
    nd = x.ndim - 2
    N, C = x.shape[:2]
    Cg = C // group
    Kg = w.shape[1]
    k = w.shape[2:]
    sp = x.shape[2:]
    full = [strides[i] * (sp[i] - 1) + (k[i] - 1) * dilations[i] + 1 + output_padding[i] for i in range(nd)]
    y = np.zeros((N, group * Kg) + tuple(full))
    for pos in np.ndindex(*sp):
        for kk in np.ndindex(*k):
            o = tuple(pos[i] * strides[i] + kk[i] * dilations[i] for i in range(nd))
            for g in range(group):
                xv = x[(slice(None), slice(g * Cg, (g + 1) * Cg)) + pos]      # N, Cg
                wv = w[(slice(g * Cg, (g + 1) * Cg), slice(None)) + kk]      # Cg, Kg
                y[(slice(None), slice(g * Kg, (g + 1) * Kg)) + o] += xv @ wv
    crop = tuple(slice(pads[i], full[i] - pads[i + nd]) for i in range(nd))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * nd)
    return y


def same_pads(sp, kernel, strides, dilations, upper):
    """ONNX auto_pad SAME_UPPER / SAME_LOWER pads of Conv and pooling:
    output ceil(in / stride), the odd pad at the end (upper) or begin."""
    nd = len(sp)
    pb, pe = [0] * nd, [0] * nd
    for i in range(nd):
        out = -(-sp[i] // strides[i])
        total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - sp[i])
        small, big = total // 2, total - total // 2
        pb[i], pe[i] = (small, big) if upper else (big, small)
    return pb + pe


def pool_out_size(n, k, s, pb, pe, d, ceil_mode):
    eff = d * (k - 1) + 1
    num = n + pb + pe - eff
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= n + pb:
        # The last window would start in the end padding: dropped (the rule
        # of ONNX's reference implementation and PyTorch). The cases below
        # avoid this situation so that the table does not depend on it.
        raise ValueError("ambiguous ceil_mode window")
    return out


def pool(x, kind, kernel, strides, pads, dilations=None, ceil_mode=0, count_include_pad=0):
    """ONNX MaxPool / AveragePool, naive loops, float64."""
    nd = x.ndim - 2
    dilations = dilations or [1] * nd
    sp = x.shape[2:]
    outsz = [pool_out_size(sp[i], kernel[i], strides[i], pads[i], pads[i + nd], dilations[i], ceil_mode)
             for i in range(nd)]
    y = np.zeros(x.shape[:2] + tuple(outsz))
    for o in np.ndindex(*outsz):
        vals = []
        inpad = 0
        for kk in np.ndindex(*kernel):
            pos = [o[i] * strides[i] - pads[i] + kk[i] * dilations[i] for i in range(nd)]
            inside = all(0 <= pos[i] < sp[i] for i in range(nd))
            in_padded = all(-pads[i] <= pos[i] < sp[i] + pads[i + nd] for i in range(nd))
            if inside:
                vals.append(x[(slice(None), slice(None)) + tuple(pos)])
            if in_padded:
                inpad += 1
        v = np.stack(vals, axis=-1)
        if kind == "max":
            y[(slice(None), slice(None)) + o] = v.max(axis=-1)
        else:
            div = inpad if count_include_pad else len(vals)
            y[(slice(None), slice(None)) + o] = v.sum(axis=-1) / div
    return y


def onnx_slice(x, starts, ends, axes, steps):
    sl = [slice(None)] * x.ndim
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = int(a) % x.ndim
        n = x.shape[a]
        s, e, st = int(s), int(e), int(st)
        s = s + n if s < 0 else s
        e = e + n if e < 0 else e
        if st > 0:
            s = min(max(s, 0), n)
            e = min(max(e, 0), n)
        else:
            s = min(max(s, 0), n - 1)
            e = min(max(e, -1), n - 1)
        # Python slicing treats a negative end as counting from the end; a
        # clamped end of -1 means "before index 0", so use None.
        sl[a] = slice(s, None if e < 0 else e, st)
    return x[tuple(sl)]


def reshape(x, shape):
    shape = [int(d) for d in shape]
    shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def reduce(x, fn, axes, keepdims):
    ax = None if axes is None else tuple(int(a) % x.ndim for a in axes)
    return fn(x, axis=ax, keepdims=bool(keepdims))


# ---------------------------------------------------------------- cases

def unary_cases():
    ops = [
        ("Relu", "exact", lambda x: np.maximum(x, 0), False, []),
        ("Neg", "exact", lambda x: -x, False, []),
        ("Abs", "exact", np.abs, False, []),
        ("Sigmoid", "elem", sigmoid, False, []),
        ("Tanh", "elem", np.tanh, False, []),
        ("Exp", "elem", np.exp, False, []),
        ("Log", "elem", np.log, True, []),
        ("Sqrt", "elem", np.sqrt, True, []),
    ]
    for op, cls, fn, positive, attrs in ops:
        for shape in [(3, 5, 7), (17,)]:
            nm = "%s_%s_f32" % (op.lower(), "x".join(map(str, shape)))
            r = R(rng_for(nm))
            x = r.pos(shape, "f32") if positive else r.nz(shape, "f32")
            case(nm, op, "f32", cls, [("x", "input", x)], lambda a, fn=fn: [fn(a)], attrs)
    # Wider range for Exp/Tanh/Sigmoid saturation.
    for op, fn in [("Exp", np.exp), ("Sigmoid", sigmoid), ("Tanh", np.tanh)]:
        nm = "%s_wide_f32" % op.lower()
        r = R(rng_for(nm))
        x = r.nz((4, 9), "f32", 0.1, 20.0)
        case(nm, op, "f32", "elem", [("x", "input", x)], lambda a, fn=fn: [fn(a)],
             note="inputs up to |20|: saturation and exp range")
    nm = "log_small_f32"
    r = R(rng_for(nm))
    case(nm, "Log", "f32", "elem", [("x", "input", r.pos((5, 6), "f32", 1e-3, 50.0))],
         lambda a: [np.log(a)])

    a = f32attr(0.1)
    nm = "leakyrelu_alpha0.1_f32"
    r = R(rng_for(nm))
    case(nm, "LeakyRelu", "f32", "elem", [("x", "input", r.nz((3, 4, 5), "f32"))],
         lambda x: [np.where(x >= 0, x, a * x)], [attr("alpha", "float", 0.1)])
    nm = "leakyrelu_default_f32"
    r = R(rng_for(nm))
    d = f32attr(0.01)
    case(nm, "LeakyRelu", "f32", "elem", [("x", "input", r.nz((2, 9), "f32"))],
         lambda x: [np.where(x >= 0, x, d * x)], note="alpha defaults to 0.01")
    nm = "elu_alpha0.5_f32"
    r = R(rng_for(nm))
    case(nm, "Elu", "f32", "elem", [("x", "input", r.nz((3, 4, 5), "f32"))],
         lambda x: [np.where(x > 0, x, 0.5 * (np.exp(x) - 1))], [attr("alpha", "float", 0.5)])
    nm = "elu_default_f32"
    r = R(rng_for(nm))
    case(nm, "Elu", "f32", "elem", [("x", "input", r.nz((11,), "f32"))],
         lambda x: [np.where(x > 0, x, np.exp(x) - 1)], note="alpha defaults to 1.0")
    nm = "gelu_erf_f32"
    r = R(rng_for(nm))
    case(nm, "Gelu", "f32", "elem", [("x", "input", r.nz((3, 5, 7), "f32", 0.1, 4.0))],
         lambda x: [0.5 * x * (1 + erf(x / math.sqrt(2)))], note="approximate defaults to none (erf form)")
    nm = "gelu_tanh_f32"
    r = R(rng_for(nm))
    case(nm, "Gelu", "f32", "elem", [("x", "input", r.nz((3, 5, 7), "f32", 0.1, 4.0))],
         lambda x: [0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))],
         [attr("approximate", "string", "tanh")])
    nm = "silu_f32"
    r = R(rng_for(nm))
    case(nm, "Silu", "f32", "elem", [("x", "input", r.nz((3, 5, 7), "f32", 0.1, 6.0))],
         lambda x: [x * sigmoid(x)], domain="vrun",
         note="vrun extension (not an ONNX op): Silu(x) = x * Sigmoid(x)")

    # f64 / f16 variants.
    nm = "exp_f64"
    r = R(rng_for(nm))
    case(nm, "Exp", "f64", "elem", [("x", "input", r.nz((3, 5, 7), "f64", 0.1, 5.0))], lambda x: [np.exp(x)])
    nm = "relu_f16"
    r = R(rng_for(nm))
    case(nm, "Relu", "f16", "exact", [("x", "input", r.nz((3, 5, 7), "f16"))], lambda x: [np.maximum(x, 0)])
    # Lengths past 4 items that are not multiples of 4: vector kernels
    # (GPU backends) with a scalar tail.
    for op, cls, fn, dt in [("Relu", "exact", lambda x: np.maximum(x, 0), "f32"), ("Sigmoid", "elem", sigmoid, "f32"),
                            ("Neg", "exact", lambda x: -x, "f16")]:
        nm = "%s_tail1027_%s" % (op.lower(), dt)
        r = R(rng_for(nm))
        case(nm, op, dt, cls, [("x", "input", r.nz((1027,), dt))], lambda a, fn=fn: [fn(a)],
             note="1027 items: 4-item vectors and a tail of 3")


def clip_cases():
    for nm, lo, hi in [("clip_minmax_f32", -0.5, 0.75), ("clip_max_only_f32", None, 0.5),
                       ("clip_min_only_f32", -0.25, None), ("clip_none_f32", None, None)]:
        r = R(rng_for(nm))
        x = r.nz((4, 7), "f32")
        ins = [("x", "input", x)]
        if lo is not None or hi is not None:
            ins.append(("min", "weight" if lo is not None else "absent",
                        None if lo is None else np.array(lo, np.float32)))
        if hi is not None:
            ins.append(("max", "weight", np.array(hi, np.float32)))

        def ref(x, mn=None, mx=None):
            y = x
            if mn is not None:
                y = np.maximum(y, mn)
            if mx is not None:
                y = np.minimum(y, mx)
            return [y]
        case(nm, "Clip", "f32", "exact", ins, ref,
             note="min/max are optional scalar inputs (opset 13); an absent one means no bound")
    nm = "clip_runtime_bounds_f32"
    r = R(rng_for(nm))
    case(nm, "Clip", "f32", "exact",
         [("x", "input", r.nz((2, 3, 5), "f32")), ("min", "input", np.array(-1.0, np.float32)),
          ("max", "input", np.array(0.3, np.float32))],
         lambda x, a, b: [np.minimum(np.maximum(x, a), b)], note="min/max as runtime inputs")


def binary_cases():
    ops = [
        ("Add", "elem", np.add), ("Sub", "elem", np.subtract), ("Mul", "elem", np.multiply),
        ("Div", "elem", np.divide), ("Pow", "elem", np.power),
        ("Max", "exact", np.maximum), ("Min", "exact", np.minimum),
    ]
    shapes = [
        ("same", (3, 4, 5), (3, 4, 5)),
        ("bcast", (3, 1, 5), (4, 1)),
        ("scalar", (2, 7), ()),
        ("scalarlhs", (), (5, 3)),
        ("rank1", (2, 3, 6), (6,)),
    ]
    for op, cls, fn in ops:
        for tag, sa, sb in shapes:
            nm = "%s_%s_f32" % (op.lower(), tag)
            r = R(rng_for(nm))
            if op == "Pow":
                a = r.pos(sa, "f32", 0.1, 3.0)
                b = r.nz(sb, "f32", 0.1, 2.5)
            else:
                a, b = r.nz(sa, "f32"), r.nz(sb, "f32")
            kb = "weight" if tag in ("scalar", "rank1") else "input"
            case(nm, op, "f32", cls, [("a", "input", a), ("b", kb, b)], lambda x, y, fn=fn: [fn(x, y)],
                 note="multidirectional (NumPy) broadcasting")
    for op, fn in [("Max", np.maximum), ("Min", np.minimum), ("Sum", None)]:
        if fn is None:
            continue
        nm = "%s_variadic3_f32" % op.lower()
        r = R(rng_for(nm))
        case(nm, op, "f32", "exact",
             [("a", "input", r.nz((3, 1, 4), "f32")), ("b", "input", r.nz((2, 1), "f32")),
              ("c", "input", r.nz((4,), "f32"))],
             lambda x, y, z, fn=fn: [fn(fn(x, y), z)], note="variadic, three broadcast inputs")
    nm = "max_single_f32"
    r = R(rng_for(nm))
    case(nm, "Max", "f32", "exact", [("a", "input", r.nz((2, 3), "f32"))], lambda x: [x],
         note="variadic with one input: identity")
    nm = "pow_int_exponent_f32"
    r = R(rng_for(nm))
    x = r.nz((3, 5), "f32")
    case(nm, "Pow", "f32", "elem", [("a", "input", x), ("b", "weight", np.array(3.0, np.float32))],
         lambda x, y: [np.power(x, y)], note="negative base with an integral exponent is defined")
    # Bias addition, Conv-style [C,1,1].
    nm = "add_bias_c11_f32"
    r = R(rng_for(nm))
    case(nm, "Add", "f32", "elem", [("x", "input", r.nz((2, 6, 5, 3), "f32")), ("bias", "weight", r.nz((6, 1, 1), "f32"))],
         lambda x, y: [x + y], note="bias addition after a conv: [C,1,1] broadcast")
    # Vector kernels (GPU backends): odd lengths with a scalar tail, a bias
    # row broadcast along the inner dim of 12, a column broadcast across
    # it, a scalar, and rows of 10 (no vectors).
    for tag, sa, sb, dt in [("tail1027", (1027,), (1027,), "f32"), ("bias12", (5, 12), (12,), "f32"),
                            ("col12", (5, 12), (5, 1), "f32"), ("scalar1027", (1027,), (), "f32"),
                            ("bias10", (3, 10), (10,), "f32"), ("bias12", (2, 3, 12), (12,), "f16")]:
        for op, fn in [("Add", np.add), ("Mul", np.multiply)]:
            nm = "%s_vec_%s_%s" % (op.lower(), tag, dt)
            if len(sa) == 3:
                nm += "_3d"
            r = R(rng_for(nm))
            case(nm, op, dt, "elem", [("a", "input", r.nz(sa, dt)), ("b", "input", r.nz(sb, dt))],
                 lambda x, y, fn=fn: [fn(x, y)], note="vector kernels: tails and broadcasts")
    # f64 and f16.
    for dt in ("f64", "f16"):
        for tag, sa, sb in [("same", (3, 4, 5), (3, 4, 5)), ("bcast", (3, 1, 5), (4, 1))]:
            nm = "add_%s_%s" % (tag, dt)
            r = R(rng_for(nm))
            case(nm, "Add", dt, "elem", [("a", "input", r.nz(sa, dt)), ("b", "input", r.nz(sb, dt))],
                 lambda x, y: [x + y])


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
    for dt in ("f32", "f64"):
        for tag, at, cs in variants:
            if dt == "f64" and tag not in ("plain", "transab_alpha_beta", "c_n"):
                continue
            nm = "gemm_%s_%s" % (tag, dt)
            r = R(rng_for(nm))
            ta, tb = at.get("transA", 0), at.get("transB", 0)
            A = r.nz((K, M) if ta else (M, K), dt)
            B = r.nz((N, K) if tb else (K, N), dt)
            cshape = {"MN": (M, N), "N": (N,), "1N": (1, N), "M1": (M, 1), "S": ()}.get(cs)
            ins = [("A", "input", A), ("B", "weight", B)]
            if cs is not None:
                ins.append(("C", "weight", r.nz(cshape, dt)))
            attrs = []
            for k in ("alpha", "beta"):
                if k in at:
                    attrs.append(attr(k, "float", at[k]))
            for k in ("transA", "transB"):
                if k in at:
                    attrs.append(attr(k, "int", at[k]))
            al, be = f32attr(at.get("alpha", 1.0)), f32attr(at.get("beta", 1.0))

            def ref(a, b, c=None, al=al, be=be, ta=ta, tb=tb):
                return [gemm(a, b, c, al, be, ta, tb)]
            case(nm, "Gemm", dt, "matmul", ins, ref, attrs,
                 note="C is unidirectionally broadcast to [M,N]" if cs not in ("MN", None) else "")


def matmul_cases():
    shapes = [
        ("2d", (5, 7), (7, 3)),
        ("2d_odd", (1, 13), (13, 9)),
        ("batch3d", (3, 4, 6), (3, 6, 5)),
        ("batch3d_bcast_rhs2d", (3, 4, 6), (6, 5)),
        ("batch4d_bcast", (2, 1, 3, 5), (4, 5, 6)),
        ("batch4d_lhs2d", (3, 5), (2, 3, 5, 4)),
        ("vec_lhs", (6,), (6, 4)),
        ("vec_rhs", (4, 6), (6,)),
        ("vec_rhs_batched", (2, 3, 6), (6,)),
        ("vec_lhs_batched", (6,), (2, 6, 3)),
        ("vec_vec", (9,), (9,)),
        ("k32", (3, 32), (32, 4)),
    ]
    for tag, sa, sb in shapes:
        nm = "matmul_%s_f32" % tag
        r = R(rng_for(nm))
        kb = "weight" if len(sb) == 2 else "input"
        case(nm, "MatMul", "f32", "matmul", [("A", "input", r.nz(sa, "f32")), ("B", kb, r.nz(sb, "f32"))],
             lambda a, b: [np.matmul(a, b)], note="NumPy matmul semantics (1-D operands promoted then squeezed)")
    for tag, sa, sb in [("2d", (5, 8), (8, 3)), ("batch3d", (2, 3, 8), (2, 8, 5))]:
        nm = "matmul_%s_f16" % tag
        r = R(rng_for(nm))
        case(nm, "MatMul", "f16", "matmul", [("A", "input", r.nz(sa, "f16")), ("B", "input", r.nz(sb, "f16"))],
             lambda a, b: [np.matmul(a, b)])


def softmax_cases():
    for op, fn in [("Softmax", softmax), ("LogSoftmax", log_softmax)]:
        for axis in (-1, 0, 1):
            nm = "%s_axis%s_f32" % (op.lower(), str(axis).replace("-", "m"))
            r = R(rng_for(nm))
            x = r.nz((3, 4, 5), "f32", 0.1, 3.0)
            attrs = [] if axis == -1 else [attr("axis", "int", axis)]
            case(nm, op, "f32", "reduce", [("x", "input", x)], lambda a, axis=axis, fn=fn: [fn(a, axis)],
                 attrs, note="axis defaults to -1" if axis == -1 else "")
        nm = "%s_large_f32" % op.lower()
        r = R(rng_for(nm))
        x = r.nz((4, 7), "f32").astype(np.float64)
        x += np.array([90.0, -90.0, 60.0, -1000.0])[:, None]
        x[2, 3] += 40.0  # one dominant element
        x = x.astype(np.float32)
        case(nm, op, "f32", "reduce", [("x", "input", x)], lambda a, fn=fn: [fn(a, -1)],
             [attr("axis", "int", -1)],
             note="rows offset by +90/-90/+60/-1000: exp overflows/underflows f32 unless the max is subtracted")
    nm = "softmax_axis1_f64"
    r = R(rng_for(nm))
    x = r.nz((2, 5, 3), "f64") + 800.0
    case(nm, "Softmax", "f64", "reduce", [("x", "input", x)], lambda a: [softmax(a, 1)], [attr("axis", "int", 1)],
         note="offset +800: exp overflows f64 unless the max is subtracted")
    nm = "softmax_axism1_f64"
    r = R(rng_for(nm))
    case(nm, "Softmax", "f64", "reduce", [("x", "input", r.nz((3, 7), "f64"))], lambda a: [softmax(a, -1)])


def attention(q, k, v, mask, scale, causal, heads=None):
    """ONNX Attention (opset 23) without a KV cache: softmax(scale * Q K^T +
    mask, causal masking j > i) V over [B, H, S, D] heads; 3-D [B, S, H*D]
    inputs are split into `heads` heads and the output merged back."""
    r3 = q.ndim == 3
    if r3:
        def split(x):
            b, s, hd = x.shape
            return x.reshape(b, s, heads, hd // heads).transpose(0, 2, 1, 3)
        q, k, v = split(q), split(k), split(v)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = scale * np.matmul(q, np.swapaxes(k, -1, -2))
    if mask is not None:
        s = s + mask
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], dtype=bool), 1), -np.inf, s)
    y = np.matmul(softmax(s, -1), v)
    if r3:
        b, h, sq, dv = y.shape
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, h * dv)
    return y


def attention_cases():
    # (name, dtype, Q shape, K shape, V shape, mask shape or None, attrs)
    specs = [
        ("attention_4d_f32", "f32", (2, 3, 37, 24), (2, 3, 37, 24), (2, 3, 37, 24), None, {}),
        ("attention_4d_mask_heads_bcast_f32", "f32", (2, 3, 29, 64), (2, 3, 37, 64), (2, 3, 37, 40), (2, 1, 29, 37), {}),
        ("attention_4d_causal_f32", "f32", (1, 2, 37, 24), (1, 2, 37, 24), (1, 2, 37, 24), None, {"is_causal": 1}),
        ("attention_4d_causal_mask_f32", "f32", (2, 2, 37, 64), (2, 2, 37, 64), (2, 2, 37, 64), (2, 2, 37, 37),
         {"is_causal": 1}),
        ("attention_3d_mask2d_scale_f32", "f32", (2, 37, 72), (2, 37, 72), (2, 37, 72), (37, 37),
         {"q_num_heads": 3, "kv_num_heads": 3, "scale": f32attr(0.3)}),
        ("attention_3d_f32", "f32", (2, 29, 48), (2, 37, 48), (2, 37, 80), None,
         {"q_num_heads": 2, "kv_num_heads": 2}),
        ("attention_4d_mask_f16", "f16", (1, 2, 37, 64), (1, 2, 37, 64), (1, 2, 37, 64), (1, 2, 37, 37), {}),
        ("attention_4d_causal_f64", "f64", (1, 2, 19, 24), (1, 2, 19, 24), (1, 2, 19, 20), (19, 19), {"is_causal": 1}),
    ]
    for nm, dt, qs, ks, vs, ms, at in specs:
        r = R(rng_for(nm))
        q, k, v = r.nz(qs, dt, 0.1, 1.5), r.nz(ks, dt, 0.1, 1.5), r.nz(vs, dt, 0.1, 1.0)
        ins = [("Q", "input", q), ("K", "input", k), ("V", "input", v)]
        if ms is not None:
            ins.append(("attn_mask", "input", r.nz(ms, dt, 0.05, 3.0)))
        attrs = [attr(a, "float" if a == "scale" else "int", val) for a, val in sorted(at.items())]
        scale, causal, heads = at.get("scale"), bool(at.get("is_causal", 0)), at.get("q_num_heads")
        case(nm, "Attention", dt, "matmul", ins,
             lambda q, k, v, m=None, scale=scale, causal=causal, heads=heads: [attention(q, k, v, m, scale, causal, heads)],
             attrs, note="ONNX Attention (opset 23) without a KV cache; vrun fuses it into rt.Attention where the device has it")


def norm_cases():
    eps = f32attr(1e-5)
    nm = "layernorm_axism1_f32"
    r = R(rng_for(nm))
    x = r.nz((2, 3, 8), "f32")
    case(nm, "LayerNormalization", "f32", "reduce",
         [("x", "input", x), ("scale", "weight", r.nz((8,), "f32")), ("bias", "weight", r.nz((8,), "f32"))],
         lambda x, s, b: [layer_norm(x, s, b, -1, eps)], note="axis defaults to -1, epsilon to 1e-5; only output Y")
    nm = "layernorm_axis1_f32"
    r = R(rng_for(nm))
    x = r.nz((2, 3, 4, 5), "f32") + np.float32(3.0)
    e2 = f32attr(1e-3)
    case(nm, "LayerNormalization", "f32", "reduce",
         [("x", "input", x), ("scale", "weight", r.nz((3, 4, 5), "f32")), ("bias", "weight", r.nz((3, 4, 5), "f32"))],
         lambda x, s, b: [layer_norm(x, s, b, 1, e2)], [attr("axis", "int", 1), attr("epsilon", "float", 1e-3)],
         note="normalises over dims 1..3 (mean offset +3)")
    nm = "layernorm_nobias_f32"
    r = R(rng_for(nm))
    case(nm, "LayerNormalization", "f32", "reduce",
         [("x", "input", r.nz((5, 6), "f32")), ("scale", "weight", r.nz((6,), "f32"))],
         lambda x, s: [layer_norm(x, s, None, -1, eps)], note="bias omitted (optional)")

    nm = "batchnorm_f32"
    r = R(rng_for(nm))
    C = 4
    e3 = f32attr(1e-3)
    case(nm, "BatchNormalization", "f32", "reduce",
         [("x", "input", r.nz((2, C, 3, 5), "f32")), ("scale", "weight", r.nz((C,), "f32")),
          ("B", "weight", r.nz((C,), "f32")), ("input_mean", "weight", r.nz((C,), "f32")),
          ("input_var", "weight", r.pos((C,), "f32"))],
         lambda x, s, b, m, v: [batch_norm(x, s, b, m, v, e3)], [attr("epsilon", "float", 1e-3)],
         note="inference mode (training_mode 0): uses input_mean/input_var")
    nm = "batchnorm_default_eps_2d_f32"
    r = R(rng_for(nm))
    C = 6
    case(nm, "BatchNormalization", "f32", "reduce",
         [("x", "input", r.nz((3, C), "f32")), ("scale", "weight", r.nz((C,), "f32")),
          ("B", "weight", r.nz((C,), "f32")), ("input_mean", "weight", r.nz((C,), "f32")),
          ("input_var", "weight", r.pos((C,), "f32"))],
         lambda x, s, b, m, v: [batch_norm(x, s, b, m, v, eps)], note="rank-2 input [N,C]; epsilon default 1e-5")


def conv_cases():
    specs = [
        # name, x shape, w shape, bias, strides, pads, dilations, group
        ("basic3x3", (1, 3, 7, 6), (4, 3, 3, 3), True, [1, 1], [1, 1, 1, 1], [1, 1], 1),
        ("stride2", (2, 3, 9, 8), (5, 3, 3, 3), True, [2, 2], [0, 0, 0, 0], [1, 1], 1),
        ("asym_pads", (1, 2, 6, 7), (3, 2, 3, 2), True, [1, 1], [1, 0, 2, 1], [1, 1], 1),
        ("dilation2", (1, 2, 9, 9), (3, 2, 3, 3), False, [1, 1], [2, 2, 2, 2], [2, 2], 1),
        ("group2", (1, 4, 7, 5), (6, 2, 3, 3), True, [1, 2], [1, 1, 1, 1], [1, 1], 2),
        ("depthwise", (2, 5, 8, 7), (5, 1, 3, 3), True, [1, 1], [1, 1, 1, 1], [1, 1], 5),
        ("depthwise_mult2_s2", (1, 3, 9, 9), (6, 1, 5, 5), False, [2, 2], [2, 2, 2, 2], [1, 1], 3),
        ("nobias", (1, 3, 5, 5), (2, 3, 3, 3), False, [1, 1], [0, 0, 0, 0], [1, 1], 1),
        ("1x1", (2, 7, 5, 3), (4, 7, 1, 1), True, [1, 1], [0, 0, 0, 0], [1, 1], 1),
        ("rect_kernel_s21", (1, 2, 8, 9), (3, 2, 2, 4), True, [2, 1], [0, 1, 1, 2], [1, 2], 1),
        ("conv1d", (2, 3, 11), (4, 3, 3), True, [2], [1, 2], [1], 1),
        ("conv1d_dil", (1, 2, 13), (3, 2, 4), False, [1], [0, 0], [3], 1),
        # PyTorch's Conv1d(kernel_size=1, padding=1), as exported: one output
        # channel (a GEMM with one row) and several.
        ("conv1d_k1_pad1_out1", (2, 3, 7), (1, 3, 1), True, [1], [1, 1], [1], 1),
        ("conv1d_k1_pad1", (2, 3, 7), (4, 3, 1), True, [1], [1, 1], [1], 1),
        ("conv1d_k1_pad1_n1_c1", (1, 1, 5), (1, 1, 1), False, [1], [1, 1], [1], 1),
    ]
    for dt in ("f32", "f64"):
        for tag, xs, ws, bias, st, pd, dl, g in specs:
            if dt == "f64" and tag not in ("basic3x3", "group2", "asym_pads"):
                continue
            nm = "conv_%s_%s" % (tag, dt)
            r = R(rng_for(nm))
            x, w = r.nz(xs, dt), r.nz(ws, dt)
            ins = [("x", "input", x), ("W", "weight", w)]
            if bias:
                ins.append(("B", "weight", r.nz((ws[0],), dt)))
            attrs = [attr("kernel_shape", "ints", list(ws[2:])), attr("strides", "ints", st),
                     attr("pads", "ints", pd), attr("dilations", "ints", dl)]
            if g != 1:
                attrs.append(attr("group", "int", g))

            def ref(x, w, b=None, st=st, pd=pd, dl=dl, g=g):
                y = conv(x, w, b, st, pd, dl, g)
                if x.ndim == 4:
                    y2 = conv_naive(x, w, b, st, pd, dl, g)
                    assert np.allclose(y, y2, rtol=1e-12, atol=1e-12), "conv cross-check failed"
                return [y]
            case(nm, "Conv", dt, "matmul", ins, ref, attrs,
                 note="pads are [x1_begin, x2_begin, x1_end, x2_end]")


def pool_cases():
    specs = [
        # name, op, x shape, kernel, strides, pads, ceil, count_include_pad, dilations
        ("k3s2", "MaxPool", (1, 3, 9, 8), [3, 3], [2, 2], [0, 0, 0, 0], 0, None, None),
        ("k3s2_pads", "MaxPool", (2, 2, 8, 7), [3, 3], [2, 2], [1, 1, 1, 1], 0, None, None),
        ("k3s2_asym_pads", "MaxPool", (1, 2, 7, 7), [3, 3], [2, 2], [1, 0, 0, 1], 0, None, None),
        ("k3s2_ceil", "MaxPool", (1, 2, 8, 10), [3, 3], [2, 2], [0, 0, 0, 0], 1, None, None),
        ("k2s2", "MaxPool", (1, 3, 6, 5), [2, 2], [2, 2], [0, 0, 0, 0], 0, None, None),
        ("k3_dil2", "MaxPool", (1, 2, 9, 9), [3, 3], [1, 1], [0, 0, 0, 0], 0, None, [2, 2]),
        ("1d", "MaxPool", (2, 3, 11), [3], [2], [1, 1], 0, None, None),
        ("k3s2", "AveragePool", (1, 3, 9, 8), [3, 3], [2, 2], [0, 0, 0, 0], 0, None, None),
        ("k3s2_pads_excl", "AveragePool", (2, 2, 8, 7), [3, 3], [2, 2], [1, 1, 1, 1], 0, 0, None),
        ("k3s2_pads_incl", "AveragePool", (2, 2, 8, 7), [3, 3], [2, 2], [1, 1, 1, 1], 0, 1, None),
        ("k3s2_asym_pads_incl", "AveragePool", (1, 2, 7, 7), [3, 3], [2, 2], [1, 0, 2, 1], 0, 1, None),
        ("k3s2_ceil_excl", "AveragePool", (1, 2, 8, 10), [3, 3], [2, 2], [0, 0, 0, 0], 1, 0, None),
        ("k3s2_ceil_pads_excl", "AveragePool", (1, 2, 8, 10), [3, 3], [2, 2], [1, 1, 1, 1], 1, 0, None),
        ("1d_pads_incl", "AveragePool", (2, 3, 11), [3], [2], [1, 1], 0, 1, None),
    ]
    for tag, op, xs, k, st, pd, ceil, cip, dl in specs:
        nm = "%s_%s_f32" % (op.lower(), tag)
        r = R(rng_for(nm))
        x = r.nz(xs, "f32")
        attrs = [attr("kernel_shape", "ints", k), attr("strides", "ints", st), attr("pads", "ints", pd)]
        if ceil:
            attrs.append(attr("ceil_mode", "int", 1))
        if cip is not None:
            attrs.append(attr("count_include_pad", "int", cip))
        if dl is not None:
            attrs.append(attr("dilations", "ints", dl))
        kind = "max" if op == "MaxPool" else "avg"

        def ref(x, kind=kind, k=k, st=st, pd=pd, dl=dl, ceil=ceil, cip=cip):
            return [pool(x, kind, k, st, pd, dl, ceil, cip or 0)]
        note = ""
        if ceil:
            note = ("ceil_mode: the last window runs past the end of the input (but starts inside it); "
                    "out-of-range positions are ignored")
        if cip == 1:
            note = "count_include_pad 1: the divisor counts pad positions (always the full kernel here)"
        case(nm, op, "f32", "exact" if kind == "max" else "reduce", [("x", "input", x)], ref, attrs, note=note)
    for xs in [(2, 3, 5, 7), (1, 4, 6)]:
        nm = "globalaveragepool_%s_f32" % "x".join(map(str, xs))
        r = R(rng_for(nm))
        case(nm, "GlobalAveragePool", "f32", "reduce", [("x", "input", r.nz(xs, "f32"))],
             lambda x: [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)])


def conv3d_cases():
    specs = [
        # name, x shape, w shape, bias, strides, pads (or auto_pad), dilations, group
        ("basic", (1, 2, 5, 6, 4), (3, 2, 3, 3, 3), True, [1, 1, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1], 1),
        ("stride_asym_pads", (2, 3, 7, 6, 5), (4, 3, 3, 2, 3), True, [2, 1, 2], [1, 0, 2, 2, 1, 0], [1, 1, 1], 1),
        ("dil_group2", (1, 4, 8, 5, 6), (6, 2, 2, 3, 2), False, [1, 2, 1], [2, 1, 0, 1, 1, 1], [3, 1, 2], 2),
        ("depthwise", (1, 3, 4, 5, 5), (3, 1, 3, 3, 3), True, [1, 1, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1], 3),
        ("k1", (2, 4, 3, 4, 5), (5, 4, 1, 1, 1), True, [1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1], 1),
        ("od1", (2, 2, 3, 4, 4), (2, 2, 3, 3, 3), True, [1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1], 1),
        ("kd_gt_d_pads", (1, 2, 2, 3, 3), (3, 2, 3, 2, 2), True, [1, 1, 1], [1, 0, 0, 1, 1, 1], [1, 1, 1], 1),
        ("same_upper", (1, 2, 5, 6, 7), (3, 2, 3, 2, 3), True, [2, 2, 1], "SAME_UPPER", [1, 1, 1], 1),
        ("same_lower", (1, 2, 6, 5, 4), (2, 2, 2, 3, 2), False, [2, 1, 3], "SAME_LOWER", [1, 1, 1], 1),
    ]
    for dt in ("f32", "f64"):
        for tag, xs, ws, bias, st, pd, dl, g in specs:
            if dt == "f64" and tag not in ("basic", "dil_group2", "same_upper"):
                continue
            nm = "conv3d_%s_%s" % (tag, dt)
            r = R(rng_for(nm))
            x, w = r.nz(xs, dt), r.nz(ws, dt)
            ins = [("x", "input", x), ("W", "weight", w)]
            if bias:
                ins.append(("B", "weight", r.nz((ws[0],), dt)))
            attrs = [attr("kernel_shape", "ints", list(ws[2:])), attr("strides", "ints", st),
                     attr("dilations", "ints", dl)]
            if isinstance(pd, str):
                attrs.append(attr("auto_pad", "string", pd))
                pads = same_pads(xs[2:], ws[2:], st, dl, pd == "SAME_UPPER")
            else:
                attrs.append(attr("pads", "ints", pd))
                pads = pd
            if g != 1:
                attrs.append(attr("group", "int", g))

            def ref(x, w, b=None, st=st, pads=pads, dl=dl, g=g):
                return [conv(x, w, b, st, pads, dl, g)]
            case(nm, "Conv", dt, "matmul", ins, ref, attrs,
                 note="3-D NCDHW; pads are [d_begin, h_begin, w_begin, d_end, h_end, w_end]"
                 + ("; auto_pad %s: the odd pad goes %s" % (pd, "at the end" if pd == "SAME_UPPER" else "first")
                    if isinstance(pd, str) else ""))


def convtranspose_cases():
    specs = [
        # name, x shape, w shape, bias, strides, pads (or auto_pad), dilations, group,
        # output_padding, output_shape
        ("2d_s2_outpad", (1, 2, 4, 5), (2, 3, 3, 3), True, [2, 2], [1, 1, 1, 1], [1, 1], 1, [1, 0], None),
        ("3d_basic", (1, 2, 3, 4, 3), (2, 3, 3, 3, 3), True, [1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1], 1, None, None),
        ("3d_s2_pads_outpad", (2, 3, 3, 4, 2), (3, 2, 3, 2, 3), True, [2, 1, 2], [1, 0, 1, 1, 0, 0], [1, 1, 1], 1,
         [1, 0, 1], None),
        ("3d_group2_dil", (1, 4, 3, 3, 4), (4, 2, 2, 3, 2), False, [1, 2, 1], [0, 1, 1, 1, 0, 0], [2, 1, 2], 2,
         None, None),
        ("3d_s3_k2", (1, 2, 3, 2, 2), (2, 2, 2, 2, 2), True, [3, 2, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1], 1, None, None),
        ("3d_same_upper", (1, 2, 3, 3, 2), (2, 2, 3, 3, 2), True, [2, 2, 2], "SAME_UPPER", [1, 1, 1], 1, None, None),
        ("3d_output_shape", (1, 2, 3, 2, 3), (2, 3, 3, 3, 3), False, [2, 2, 2], None, [1, 1, 1], 1, None, [5, 5, 7]),
    ]
    for dt in ("f32", "f64"):
        for tag, xs, ws, bias, st, pd, dl, g, op_, os_ in specs:
            if dt == "f64" and tag not in ("3d_s2_pads_outpad", "3d_group2_dil"):
                continue
            nm = "convtranspose_%s_%s" % (tag, dt)
            r = R(rng_for(nm))
            x, w = r.nz(xs, dt), r.nz(ws, dt)
            nd = len(xs) - 2
            ins = [("x", "input", x), ("W", "weight", w)]
            if bias:
                ins.append(("B", "weight", r.nz((ws[1] * g,), dt)))
            attrs = [attr("kernel_shape", "ints", list(ws[2:])), attr("strides", "ints", st),
                     attr("dilations", "ints", dl)]
            outpad = op_ or [0] * nd
            if op_ is not None:
                attrs.append(attr("output_padding", "ints", op_))
            full = [st[i] * (xs[2 + i] - 1) + outpad[i] + (ws[2 + i] - 1) * dl[i] + 1 for i in range(nd)]
            if isinstance(pd, str) or os_ is not None:
                # total padding = full - target; SAME_UPPER (and output_shape)
                # put the odd pad at the end (ONNX's reference).
                target = os_ if os_ is not None else [xs[2 + i] * st[i] for i in range(nd)]
                tot = [full[i] - target[i] for i in range(nd)]
                assert min(tot) >= 0
                pads = [t // 2 for t in tot] + [t - t // 2 for t in tot]
                if isinstance(pd, str):
                    attrs.append(attr("auto_pad", "string", pd))
                if os_ is not None:
                    attrs.append(attr("output_shape", "ints", os_))
                    assert all(t % 2 == 0 for t in tot), "output_shape case with an odd total pad"
            else:
                attrs.append(attr("pads", "ints", pd))
                pads = pd
            if g != 1:
                attrs.append(attr("group", "int", g))

            def ref(x, w, b=None, st=st, pads=pads, dl=dl, g=g, outpad=outpad):
                return [conv_transpose(x, w, b, st, pads, dl, g, outpad)]
            note = "W is [C, K/group, k...]; output = stride*(in-1) + output_padding + (k-1)*dilation + 1 - pads"
            if isinstance(pd, str):
                note += "; auto_pad SAME_UPPER: output = in*stride, the odd pad at the end"
            if os_ is not None:
                note += "; output_shape gives the spatial output, pads derived (even totals here)"
            case(nm, "ConvTranspose", dt, "matmul", ins, ref, attrs, note=note)


def pool3d_cases():
    specs = [
        # name, op, x shape, kernel, strides, pads (or auto_pad), ceil, count_include_pad, dilations
        ("k3s2_pads", "MaxPool", (1, 2, 7, 6, 5), [3, 3, 3], [2, 2, 2], [1, 1, 1, 1, 1, 1], 0, None, None),
        ("k2_asym_pads", "MaxPool", (2, 2, 5, 6, 7), [2, 3, 2], [1, 2, 2], [0, 1, 1, 1, 0, 1], 0, None, None),
        ("ceil_dil", "MaxPool", (1, 2, 8, 7, 9), [2, 2, 3], [2, 1, 2], [0, 0, 0, 0, 0, 0], 1, None, [2, 1, 1]),
        ("same_upper", "MaxPool", (1, 3, 5, 6, 7), [3, 2, 3], [2, 2, 2], "SAME_UPPER", 0, None, None),
        ("kd1", "MaxPool", (1, 2, 3, 6, 5), [1, 2, 2], [1, 2, 2], [0, 0, 0, 0, 0, 0], 0, None, None),
        ("khw1", "MaxPool", (1, 2, 6, 3, 4), [3, 1, 1], [2, 1, 1], [1, 0, 0, 0, 0, 0], 0, None, None),
        ("k3s2_pads_excl", "AveragePool", (1, 2, 7, 6, 5), [3, 3, 3], [2, 2, 2], [1, 1, 1, 1, 1, 1], 0, 0, None),
        ("k3s2_asym_pads_incl", "AveragePool", (2, 2, 6, 7, 5), [3, 3, 2], [2, 2, 1], [1, 0, 1, 2, 1, 0], 0, 1, None),
        ("ceil_excl", "AveragePool", (1, 2, 8, 6, 10), [3, 2, 3], [2, 2, 2], [0, 0, 0, 0, 0, 0], 1, 0, None),
        ("ceil_pads_incl", "AveragePool", (1, 2, 8, 7, 10), [3, 3, 3], [2, 2, 2], [1, 1, 1, 1, 1, 1], 1, 1, None),
        ("dil_pads_excl", "AveragePool", (1, 2, 9, 6, 7), [2, 3, 2], [1, 1, 2], [1, 1, 0, 0, 1, 1], 0, 0, [2, 1, 2]),
        ("same_lower_excl", "AveragePool", (1, 2, 6, 5, 7), [3, 3, 2], [2, 1, 2], "SAME_LOWER", 0, 0, None),
        ("same_upper_incl", "AveragePool", (1, 2, 5, 6, 4), [2, 3, 3], [2, 2, 1], "SAME_UPPER", 0, 1, None),
    ]
    for tag, op, xs, k, st, pd, ceil, cip, dl in specs:
        nm = "%s_3d_%s_f32" % (op.lower(), tag)
        r = R(rng_for(nm))
        x = r.nz(xs, "f32")
        attrs = [attr("kernel_shape", "ints", k), attr("strides", "ints", st)]
        if isinstance(pd, str):
            attrs.append(attr("auto_pad", "string", pd))
            pads = same_pads(xs[2:], k, st, dl or [1, 1, 1], pd == "SAME_UPPER")
        else:
            attrs.append(attr("pads", "ints", pd))
            pads = pd
        if ceil:
            attrs.append(attr("ceil_mode", "int", 1))
        if cip is not None:
            attrs.append(attr("count_include_pad", "int", cip))
        if dl is not None:
            attrs.append(attr("dilations", "ints", dl))
        kind = "max" if op == "MaxPool" else "avg"

        def ref(x, kind=kind, k=k, st=st, pads=pads, dl=dl, ceil=ceil, cip=cip):
            return [pool(x, kind, k, st, pads, dl, ceil, cip or 0)]
        note = "3-D NCDHW"
        if ceil:
            note += "; ceil_mode: last windows run past the end (but start inside)"
        if cip == 1:
            note += "; count_include_pad 1: the divisor counts pad positions (positions past the end pads never count)"
        if isinstance(pd, str):
            note += "; auto_pad %s" % pd
        case(nm, op, "f32", "exact" if kind == "max" else "reduce", [("x", "input", x)], ref, attrs, note=note)


def prelu_cases():
    specs = [
        # name, x shape, slope shape, slope kind, note
        ("slope_c11", (2, 3, 4, 5), (3, 1, 1), "weight", "ONNX's per-channel form: slope [C,1,1]"),
        ("slope_c", (2, 3, 4, 5), (3,), "weight",
         "slope [C] (older PyTorch exports): it does not broadcast to [N,C,H,W] (C != W), so it is per-channel"),
        ("slope_c_1d", (2, 3, 5), (3,), "input", "slope [C] for a Conv1d output [N,C,L], C != L: per-channel"),
        ("slope_c_eq_w", (2, 4, 3, 4), (4,), "weight",
         "slope [C] with C == W broadcasts as is (ONNX): along the last dim"),
        ("slope_scalar", (3, 4), (1,), "weight", "one shared slope"),
    ]
    for tag, xs, ss, kind, note in specs:
        nm = "prelu_%s_f32" % tag
        r = R(rng_for(nm))
        x = r.nz(xs, "f32")
        slope = r.nz(ss, "f32", 0.05, 0.5)

        def ref(x, sl, xs=xs):
            if sl.ndim == 1 and len(xs) >= 3 and sl.shape[0] == xs[1] and sl.shape[0] != xs[-1] and sl.shape[0] != 1:
                sl = sl.reshape((-1,) + (1,) * (len(xs) - 2))
            return [np.where(x < 0, x * sl, x)]
        case(nm, "PRelu", "f32", "elem", [("x", "input", x), ("slope", kind, slope)], ref, note=note)


def shape_cases():
    for tag, xs, shape in [("minus1", (2, 3, 4), [4, -1]), ("zero_copy", (2, 3, 4), [0, -1, 2]),
                           ("zero_keep", (2, 3, 4), [0, 3, 4]), ("to_scalar", (1, 1), []),
                           ("expand_rank", (6, 5), [3, 1, 2, 5])]:
        nm = "reshape_%s_f32" % tag
        r = R(rng_for(nm))
        sh = np.array(shape, dtype=np.int64)
        case(nm, "Reshape", "f32", "exact", [("x", "input", r.nz(xs, "f32")), ("shape", "weight", sh)],
             lambda x, s: [reshape(x, s)], note="0 copies the input dim (allowzero 0); -1 is inferred")
    for axis in (0, 1, 2, -1):
        nm = "flatten_axis%s_f32" % str(axis).replace("-", "m")
        r = R(rng_for(nm))
        x = r.nz((2, 3, 4, 5), "f32")
        a = axis % 4

        def ref(x, a=a):
            return [x.reshape(int(np.prod(x.shape[:a])), -1)]
        case(nm, "Flatten", "f32", "exact", [("x", "input", x)], ref,
             [attr("axis", "int", axis)] if axis != 1 else [], note="axis defaults to 1" if axis == 1 else "")
    for tag, xs, perm in [("rev3", (2, 3, 4), None), ("0213", (2, 3, 4, 5), [0, 2, 1, 3]),
                          ("2d", (7, 3), [1, 0]), ("0312", (2, 3, 4, 5), [0, 3, 1, 2]),
                          ("1203", (3, 5, 2, 4), [1, 2, 0, 3])]:
        nm = "transpose_%s_f32" % tag
        r = R(rng_for(nm))
        case(nm, "Transpose", "f32", "exact", [("x", "input", r.nz(xs, "f32"))],
             lambda x, p=perm: [np.transpose(x, p)], [attr("perm", "ints", perm)] if perm else [],
             note="no perm: reverse the dims" if perm is None else "")
    for tag, shapes, axis in [("axis0", [(2, 3), (4, 3), (1, 3)], 0),
                              ("axis1", [(2, 3, 4), (2, 1, 4), (2, 5, 4)], 1),
                              ("axism1", [(2, 3, 1), (2, 3, 4), (2, 3, 2)], -1),
                              ("axis3_4d", [(1, 2, 3, 2), (1, 2, 3, 5), (1, 2, 3, 1)], 3)]:
        nm = "concat_%s_f32" % tag
        r = R(rng_for(nm))
        ins = [("x%d" % i, "weight" if i == 1 else "input", r.nz(s, "f32")) for i, s in enumerate(shapes)]
        case(nm, "Concat", "f32", "exact", ins, lambda *xs, axis=axis: [np.concatenate(xs, axis)],
             [attr("axis", "int", axis)])
    I64MAX = 2 ** 63 - 1
    for tag, xs, starts, ends, axes, steps in [
        ("basic", (5, 6), [1, 2], [4, 5], None, None),
        ("neg_starts", (5, 6, 4), [-3, -4], [I64MAX, -1], [0, 1], None),
        ("step2", (9, 7), [1], [9], [1], [2]),
        ("step2_two_axes", (9, 7, 3), [0, 1], [9, 7], [0, 1], [2, 3]),
        ("reverse", (4, 6), [-1], [-I64MAX - 1], [1], [-1]),
        ("reverse_step_m2", (7, 5), [5, 4], [0, -6], [0, 1], [-2, -1]),
        ("axes_subset_neg", (3, 4, 5, 6), [1, 2], [3, 100], [-1, 1], None),
        ("clamp", (6,), [-100], [100], [0], [1]),
    ]:
        nm = "slice_%s_f32" % tag
        r = R(rng_for(nm))
        ins = [("x", "input", r.nz(xs, "f32")), ("starts", "weight", np.array(starts, np.int64)),
               ("ends", "weight", np.array(ends, np.int64))]
        if axes is not None or steps is not None:
            ins.append(("axes", "weight" if axes is not None else "absent",
                        None if axes is None else np.array(axes, np.int64)))
        if steps is not None:
            ins.append(("steps", "weight", np.array(steps, np.int64)))

        def ref(x, s, e, a=None, st=None):
            return [onnx_slice(x, s, e, a, st)]
        case(nm, "Slice", "f32", "exact", ins, ref,
             note="starts/ends/axes/steps are inputs (opset 13); out-of-range values clamp")
    for tag, xs, idx, axis, idt, kind in [
        ("axis0", (5, 4), [3, 0, 4, 4], 0, "i64", "weight"),
        ("axis1", (3, 6, 2), [5, 1, 2], 1, "i64", "weight"),
        ("negative", (5, 4), [-1, -5, 2], 0, "i64", "weight"),
        ("idx2d_axis0", (6, 3), [[0, 5], [-2, 1], [3, 3]], 0, "i64", "weight"),
        ("idx2d_axis1", (2, 7, 3), [[6, -7, 0]], 1, "i64", "input"),
        ("scalar_idx", (4, 5), 2, 1, "i64", "weight"),
        ("i32_idx", (6, 3), [4, -1, 0], 0, "i32", "input"),
    ]:
        nm = "gather_%s_f32" % tag
        r = R(rng_for(nm))
        ind = np.array(idx, dtype=DT[idt])
        attrs = [attr("axis", "int", axis)] if axis != 0 else []
        case(nm, "Gather", "f32", "exact", [("data", "input", r.nz(xs, "f32")), ("indices", kind, ind)],
             lambda x, i, axis=axis: [np.take(x, i.astype(np.int64), axis=axis)], attrs,
             note="negative indices count from the end; output rank = r + q - 1")


def reduce_cases():
    ops = [("ReduceSum", np.sum, "reduce"), ("ReduceMean", np.mean, "reduce"), ("ReduceMax", np.max, "exact")]
    variants = [
        ("axis1_keep", (3, 4, 5), [1], 1),
        ("axis1_nokeep", (3, 4, 5), [1], 0),
        ("axes02_keep", (3, 4, 5), [0, 2], 1),
        ("axes02_nokeep", (3, 4, 5), [0, 2], 0),
        ("axes_m1_m3_4d", (2, 3, 4, 5), [-1, -3], 0),
        ("last_keep", (6, 7), [-1], 1),
        ("all_noaxes", (3, 4, 5), None, 1),
        ("all_noaxes_nokeep", (2, 5), None, 0),
    ]
    for op, fn, cls in ops:
        for tag, xs, axes, keep in variants:
            nm = "%s_%s_f32" % (op.lower(), tag)
            r = R(rng_for(nm))
            ins = [("x", "input", r.nz(xs, "f32"))]
            if axes is not None:
                ins.append(("axes", "weight", np.array(axes, np.int64)))
            attrs = [attr("keepdims", "int", keep)] if keep == 0 else []

            def ref(x, a=None, fn=fn, keep=keep):
                return [reduce(x, fn, a, keep)]
            case(nm, op, "f32", cls, ins, ref, attrs,
                 note=("axes is an input (opset 18; 13 for ReduceSum); keepdims defaults to 1"
                       + ("; no axes input: reduce over all dims" if axes is None else "")))


# ---------------------------------------------------------------- output

def write_case(c):
    name = c["name"]
    d = os.path.join(OUT, name)
    os.makedirs(d)
    arrays = []
    ins_json = []
    for i, (iname, kind, a) in enumerate(c["inputs"]):
        entry = {"name": iname, "kind": kind}
        if kind == "absent":
            arrays.append(None)
        else:
            a = np.asarray(a, order="C")
            if a.dtype not in NP2DT:
                raise ValueError("%s: input %s dtype %s" % (name, iname, a.dtype))
            fn = "in_%d.npy" % i
            np.save(os.path.join(d, fn), a, allow_pickle=False)
            entry.update(file=fn, dtype=NP2DT[a.dtype], shape=list(a.shape))
            arrays.append(a)
        ins_json.append(entry)
    # Trailing absent inputs are meaningless: drop them.
    odt = out_dtype_of([x for x in c["inputs"] if x[1] != "absent"])
    outs = c["ref"](*[f64(a) if a is not None and a.dtype.kind == "f" else a for a in arrays])
    outs_json = []
    for i, y in enumerate(outs):
        y = np.asarray(np.asarray(y).astype(odt), order="C")
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            raise ValueError("%s: non-finite expected output" % name)
        fn = "out_%d.npy" % i
        np.save(os.path.join(d, fn), y, allow_pickle=False)
        outs_json.append({"name": "y" if len(outs) == 1 else "y%d" % i, "file": fn,
                          "dtype": NP2DT[y.dtype], "shape": list(y.shape)})
    rtol, atol = TOL[(c["tol"], c["dtype"])]
    doc = {
        "version": 1,
        "name": name,
        "op": c["op"],
        "domain": c["domain"],
        "dtype": c["dtype"],
        "attrs": c["attrs"],
        "inputs": ins_json,
        "outputs": outs_json,
        "tolerance": {"rtol": rtol, "atol": atol, "class": c["tol"]},
        "note": c["note"],
    }
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    unary_cases()
    clip_cases()
    binary_cases()
    gemm_cases()
    matmul_cases()
    softmax_cases()
    attention_cases()
    norm_cases()
    conv_cases()
    conv3d_cases()
    convtranspose_cases()
    pool_cases()
    pool3d_cases()
    prelu_cases()
    shape_cases()
    reduce_cases()
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
        print("  %-20s %d" % (op, by_op[op]))


if __name__ == "__main__":
    main()
