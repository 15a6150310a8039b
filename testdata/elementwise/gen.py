#!/usr/bin/env python3
"""NumPy references for the elementwise functions of package rt (rt.UnaryFn,
rt.BinaryFn), used by the CPU backend's elementwise tests and by rt's own
test of UnaryFn.Apply and BinaryFn.Apply.

Writes elementwise.npz. For every float dtype (f32, f64, f16) and function:
  unary  "<dt>/<Fn>.x" (256 inputs) and "<dt>/<Fn>.y" = Fn(x)
  binary "<dt>/<Fn>.a" (64), "<dt>/<Fn>.b" (32) and "<dt>/<Fn>.y", the
         64x32 table Fn(a[i], b[j]) (bool for comparisons and logic)
and for the integer dtypes (i32, i64, i8, u8, bool) the unary functions the
CPU backend supports on them (Copy, Neg, Abs, Sign, Not, Relu; bools: Copy
and Not): "<dt>/<Fn>.x" and "<dt>/<Fn>.y".

Inputs are drawn with a fixed seed in each function's domain and rounded
to the dtype; outputs are computed in float64 from the rounded inputs and
rounded to the dtype once. The unary functions take Alpha = 0.7 and
Beta = 1.3 where they have parameters. Run with Debian's python3-numpy:
  /usr/bin/python3 testdata/elementwise/gen.py
"""
import math
import os

import numpy as np

ALPHA, BETA = 0.7, 1.3
FLOATS = {"f32": np.float32, "f64": np.float64, "f16": np.float16}
INTS = {"i32": np.int32, "i64": np.int64, "i8": np.int8, "u8": np.uint8, "bool": np.bool_}

erf = np.vectorize(math.erf, otypes=[np.float64])


def sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def softplus(x):
    return np.logaddexp(0.0, x)


# rt.UnaryFn in declaration order (rt/ops.go), with its input range.
UNARY = [
    ("Copy", lambda x: x, (-3, 3)),
    ("Neg", lambda x: -x, (-3, 3)),
    ("Abs", np.abs, (-3, 3)),
    ("Relu", lambda x: np.maximum(x, 0), (-3, 3)),
    ("LeakyRelu", lambda x: np.where(x >= 0, x, ALPHA * x), (-3, 3)),
    ("Elu", lambda x: np.where(x >= 0, x, ALPHA * np.expm1(x)), (-3, 3)),
    ("Selu", lambda x: BETA * np.where(x > 0, x, ALPHA * np.expm1(x)), (-3, 3)),
    ("Celu", lambda x: np.maximum(0, x) + np.minimum(0, ALPHA * np.expm1(x / ALPHA)), (-3, 3)),
    ("Sigmoid", sigmoid, (-3, 3)),
    ("HardSigmoid", lambda x: np.clip(ALPHA * x + BETA, 0, 1), (-3, 3)),
    ("HardSwish", lambda x: x * np.clip(x / 6 + 0.5, 0, 1), (-3, 3)),
    ("Tanh", np.tanh, (-3, 3)),
    ("Gelu", lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))), (-3, 3)),
    ("GeluTanh", lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), (-3, 3)),
    ("Silu", lambda x: x * sigmoid(x), (-3, 3)),
    ("Mish", lambda x: x * np.tanh(softplus(x)), (-3, 3)),
    ("Softplus", softplus, (-3, 3)),
    ("Softsign", lambda x: x / (1 + np.abs(x)), (-3, 3)),
    ("Exp", np.exp, (-3, 3)),
    ("Log", np.log, (0.1, 3)),
    ("Sqrt", np.sqrt, (0.1, 3)),
    ("Rsqrt", lambda x: 1 / np.sqrt(x), (0.1, 3)),
    ("Reciprocal", lambda x: 1 / x, (-3, 3)),
    ("Floor", np.floor, (-3, 3)),
    ("Ceil", np.ceil, (-3, 3)),
    ("Round", np.rint, (-3, 3)),  # half to even
    ("Sign", np.sign, (-3, 3)),
    ("Sin", np.sin, (-3, 3)),
    ("Cos", np.cos, (-3, 3)),
    ("Erf", erf, (-3, 3)),
    ("Clip", lambda x: np.minimum(np.maximum(x, ALPHA), BETA), (-3, 3)),
    ("Affine", lambda x: ALPHA * x + BETA, (-3, 3)),
    ("Not", lambda x: (x == 0).astype(np.float64), None),  # inputs 0, 1, 2
    ("Square", lambda x: x * x, (-3, 3)),
]


def truthy(v):
    return v != 0


# rt.BinaryFn in declaration order, with the ranges of a and b.
BINARY = [
    ("Add", np.add, (-5, 5), (-5, 5)),
    ("Sub", np.subtract, (-5, 5), (-5, 5)),
    ("Mul", np.multiply, (-5, 5), (-5, 5)),
    ("Div", np.divide, (-5, 5), (-5, 5)),
    ("Pow", np.power, (0.1, 3), (-2, 2)),
    ("Max", np.maximum, (-5, 5), (-5, 5)),
    ("Min", np.minimum, (-5, 5), (-5, 5)),
    ("Mod", np.mod, (-5, 5), (-5, 5)),  # sign of the divisor
    ("Fmod", np.fmod, (-5, 5), (-5, 5)),  # sign of the dividend
    ("PRelu", lambda a, b: np.where(a >= 0, a, a * b), (-5, 5), (-5, 5)),
    ("Equal", np.equal, (-5, 5), (-5, 5)),
    ("Less", np.less, (-5, 5), (-5, 5)),
    ("LessEq", np.less_equal, (-5, 5), (-5, 5)),
    ("Greater", np.greater, (-5, 5), (-5, 5)),
    ("GreaterEq", np.greater_equal, (-5, 5), (-5, 5)),
    ("And", lambda a, b: np.logical_and(truthy(a), truthy(b)), (0, 1.99), (0, 1.99)),
    ("Or", lambda a, b: np.logical_or(truthy(a), truthy(b)), (0, 1.99), (0, 1.99)),
    ("Xor", lambda a, b: np.logical_xor(truthy(a), truthy(b)), (0, 1.99), (0, 1.99)),
]
LOGIC = {"Equal", "Less", "LessEq", "Greater", "GreaterEq", "And", "Or", "Xor"}

# Unary functions on integers, with inputs per dtype.
INT_UNARY = {
    "Copy": lambda x: x,
    "Neg": np.negative,
    "Abs": np.abs,
    "Sign": np.sign,
    "Relu": lambda x: np.maximum(x, np.zeros_like(x)),
}
INT_INPUTS = {
    "i32": [-3, 0, 5, -100, 100, 1, -1, 2147483647, -2147483647],
    "i64": [-3, 0, 5, -100, 100, 1, -1, 9007199254740993, -9007199254740993],
    "i8": [-3, 0, 5, -100, 100, 1, -1, 127, -127],
    "u8": [0, 3, 200, 255, 1, 9, 7],
    "bool": [0, 1, 1, 0, 1, 0, 1],
}


def draw(rng, n, lo, hi, dt):
    """n values in [lo, hi) rounded to dt, away from 0 unless lo >= 0
    (small denominators and logs of tiny numbers say nothing), plus the
    ends of the range and, for signed ranges, 0 and +-0.5."""
    v = rng.uniform(lo, hi, n)
    if lo < 0:
        v = np.where(np.abs(v) < 0.05, 0.5, v)
        v[:4] = [lo, hi, 0.5, -0.5]
        v[4] = 0.0
        v[5] = 2.5  # ties of Round
        v[6] = -1.5
    return v.astype(dt)


def main():
    out = {}
    for dname, dt in FLOATS.items():
        rng = np.random.default_rng(20240611)
        for name, f, rng_ in UNARY:
            if rng_ is None:
                x = rng.integers(0, 3, 256).astype(dt)
            else:
                x = draw(rng, 256, *rng_, dt)
            with np.errstate(all="ignore"):
                y = f(x.astype(np.float64))
            out[f"{dname}/{name}.x"] = x
            out[f"{dname}/{name}.y"] = np.asarray(y, np.float64).astype(dt)
        for name, f, ra, rb in BINARY:
            a = draw(rng, 64, *ra, dt)
            b = draw(rng, 32, *rb, dt)
            if name not in ("And", "Or", "Xor"):
                b[8:24] = a[8:24]  # equal pairs for the comparisons
            with np.errstate(all="ignore"):
                y = f(a.astype(np.float64)[:, None], b.astype(np.float64)[None, :])
            out[f"{dname}/{name}.a"] = a
            out[f"{dname}/{name}.b"] = b
            out[f"{dname}/{name}.y"] = y.astype(np.bool_) if name in LOGIC else y.astype(dt)
    for dname, dt in INTS.items():
        x = np.array(INT_INPUTS[dname], dtype=dt)
        out[f"{dname}/Not.x"] = x
        out[f"{dname}/Not.y"] = (x == 0).astype(dt)
        if dname == "bool":  # only Copy and Not take bools
            out["bool/Copy.x"], out["bool/Copy.y"] = x, x.copy()
            continue
        for name, f in INT_UNARY.items():
            if dname == "u8" and name in ("Neg",):
                y = (-(x.astype(np.int64))).astype(dt)  # wraps, as uint8 does
            else:
                y = f(x)
            out[f"{dname}/{name}.x"] = x
            out[f"{dname}/{name}.y"] = np.asarray(y, dtype=dt)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "elementwise.npz")
    np.savez_compressed(path, **out)
    print(f"wrote {path}: {len(out)} arrays")


if __name__ == "__main__":
    main()
