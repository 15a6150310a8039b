#!/usr/bin/python3
"""Generate the PyTorch references of package nn (checked by nn/ref_test.go).

Run with Debian's PyTorch (1.13) and NumPy:  /usr/bin/python3 testdata/nn/gen.py

CI has no PyTorch, so the generated files are committed. Each case is one
layer or loss of torch.nn / torch.nn.functional, written to
testdata/nn/cases/<name>/:

  case.json       what the Go test needs (below)
  in_<name>.npy   inputs (float64, int64 or bool)
  p_<name>.npy    parameters and buffers, by their state_dict names with the
                  layer's prefix ("lin.weight", "0.bias", "bn.running_var")
  out_<k>.npy     forward outputs, in order
  g_<name>.npy    d loss / d parameter or input
  b_<name>.npy    buffers after the step (BatchNorm running statistics)
  t_<name>.npy    parameters after the SGD steps of a "train" case
  eval_<k>.npy    inference outputs after the step (BatchNorm: running
                  statistics), when case.json has "evals"

case.json fields: inputs [{name, file, grad}], params [names], outputs (count),
cot (bool: the loss is sum_k sum(out_k * cot_k) over extra inputs cot<k>;
otherwise output 0 is the loss), loss, grads {name: file}, zero_grads [params
that get no gradient: torch leaves .grad None], buffers {name: file}, train
{lr, steps, losses, params {name: file}}, tol {f32: [rtol, atol], f64: [...]}.

How the references are made. Inputs are random (seeded by a hash of the
case name) and every float (inputs and the parameters torch initialised) is
rounded to float32 first, so the Go test runs the same values in f32 and
f64. Forward and backward run in float64 on the CPU; the f32 Go run is
compared against these float64 values with the f32 tolerance. Inputs stay
away from kinks (|x| >= 0.1 at ReLU-like points, no MaxPool ties, Huber and
SmoothL1 differences away from delta/beta).

Independent checks on every run (the script fails if one does not hold):
  * f64 central finite differences (h = 1e-6) of the loss at up to 8
    elements of every differentiated input and parameter;
  * the layers that torch.nn has are run through torch.nn (not re-derived);
    the sinusoidal positional encoding, which torch.nn lacks, is computed
    with NumPy from its formula and with torch from the tutorial's code.
"""

import hashlib
import json
import math
import os
import shutil

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cases")

torch.set_default_dtype(torch.float64)

# Tolerances |got - want| <= atol + rtol*|want| (see nn/ref_test.go).
# The f32 runs are compared with these float64 references: the f32
# tolerance covers float32 arithmetic (the worst case seen on the CPU
# backend is 2% of it), with room for other summation orders.
TOL = {
    "elem": {"f32": [2e-5, 2e-6], "f64": [1e-9, 1e-10]},
    "matmul": {"f32": [5e-5, 5e-6], "f64": [1e-9, 1e-10]},
    "seq": {"f32": [1e-4, 1e-5], "f64": [1e-9, 1e-10]},
}

CASES = {}


def case(name, cls="matmul"):
    def reg(fn):
        CASES[name] = (fn, cls)
        return fn
    return reg


def rng_for(name):
    seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng(seed), seed % (2 ** 31)


def r32(a):
    """Round to float32 values, kept as float64."""
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


class Gen:
    def __init__(self, rng):
        self.rng = rng

    def nz(self, *shape, lo=0.1, hi=2.0):
        mag = self.rng.uniform(lo, hi, size=shape)
        return r32(mag * np.where(self.rng.random(size=shape) < 0.5, -1.0, 1.0))

    def u(self, *shape, lo=-1.0, hi=1.0):
        return r32(self.rng.uniform(lo, hi, size=shape))

    def distinct(self, *shape, step=0.0625):
        """Values on a grid step apart, permuted: no ties for max."""
        n = int(np.prod(shape))
        v = (self.rng.permutation(n) - (n - 1) / 2.0) * step
        return r32(v.reshape(shape))

    def ints(self, *shape, lo=0, hi=10):
        return self.rng.integers(lo, hi, size=shape).astype(np.int64)


def round_params(mod):
    with torch.no_grad():
        for p in mod.parameters():
            p.copy_(torch.as_tensor(r32(p.detach().numpy())))
    return mod


class Case:
    """Collects one case: inputs, parameters, outputs and gradients."""

    def __init__(self, name):
        self.name = name
        self.inputs = []   # (name, array, grad)
        self.params = []   # (name, tensor)
        self.buffers = []  # (name, tensor)
        self.zero = []
        self.tol = None
        self.train = None
        self.buf_init = {}
        self.refwd = None
        self.fd_skip = set()
        self.evals = []

    def input(self, name, a, grad=True):
        a = np.asarray(a)
        t = torch.as_tensor(a.copy())
        if grad and a.dtype == np.float64:
            t.requires_grad_(True)
        else:
            grad = False
        self.inputs.append((name, a, grad, t))
        return t

    def module(self, prefix, mod):
        round_params(mod)
        for n, p in mod.named_parameters():
            self.params.append((prefix + n, p))
        for n, b in mod.named_buffers():
            if n.endswith("num_batches_tracked"):
                continue
            self.buffers.append((prefix + n, b))
            self.buf_init[prefix + n] = b.detach().numpy().copy()
        return mod

    def param(self, name, a):
        p = torch.nn.Parameter(torch.as_tensor(np.asarray(a, dtype=np.float64).copy()))
        self.params.append((name, p))
        return p


def save(name, c, outs, loss, cot, cls):
    d = os.path.join(OUT, name)
    os.makedirs(d)
    meta = {"name": name, "inputs": [], "params": [], "outputs": len(outs), "cot": cot,
            "loss": float(loss), "grads": {}, "zero_grads": c.zero, "buffers": {},
            "tol": c.tol or TOL[cls]}
    for n, a, grad, t in c.inputs:
        f = "in_%s.npy" % n
        np.save(os.path.join(d, f), a)
        meta["inputs"].append({"name": n, "file": f, "grad": grad})
        if grad:
            g = "g_%s.npy" % n
            np.save(os.path.join(d, g), t.grad.numpy())
            meta["grads"][n] = g
    init = getattr(c, "init", {})
    for n, p in c.params:
        np.save(os.path.join(d, "p_%s.npy" % n), init.get(n, p.detach().numpy()))
        meta["params"].append(n)
        if n in c.zero:
            assert p.grad is None or not p.grad.any(), (name, n)
            continue
        g = "g_%s.npy" % n
        np.save(os.path.join(d, g), c.grads[n] if hasattr(c, "grads") else p.grad.numpy())
        meta["grads"][n] = g
    for n, b in c.buffers:
        # Initial value as a parameter file; value after the step as b_.
        np.save(os.path.join(d, "p_%s.npy" % n), c.buf_init[n])
        meta["params"].append(n)
        f = "b_%s.npy" % n
        np.save(os.path.join(d, f), c.buf_after.get(n, b.detach().numpy()))
        meta["buffers"][n] = f
    for k, o in enumerate(outs):
        np.save(os.path.join(d, "out_%d.npy" % k), o.detach().numpy())
    for k, o in enumerate(c.evals):
        np.save(os.path.join(d, "eval_%d.npy" % k), o.detach().numpy())
    if c.evals:
        meta["evals"] = len(c.evals)
    if c.train is not None:
        tr = dict(c.train)
        files = {}
        for n, v in tr.pop("after").items():
            f = "t_%s.npy" % n
            np.save(os.path.join(d, f), v)
            files[n] = f
        tr["params"] = files
        meta["train"] = tr
    with open(os.path.join(d, "case.json"), "w") as fh:
        json.dump(meta, fh, indent=1, sort_keys=True)
        fh.write("\n")


def finite_diff(name, c, fwd, loss):
    """Central differences of loss at up to 8 elements of each
    differentiated tensor."""
    rng = np.random.default_rng(1)
    worst = 0.0
    targets = [(n, t, t.grad) for n, a, g, t in c.inputs if g]
    grads = getattr(c, "grads", None)
    targets += [(n, p, torch.as_tensor(grads[n]) if grads else p.grad) for n, p in c.params
                if n not in c.zero and n not in c.fd_skip]
    for n, t, g in targets:
        flat = t.detach().view(-1)
        for i in rng.choice(flat.numel(), size=min(8, flat.numel()), replace=False):
            with torch.no_grad():
                orig = flat[i].item()
                flat[i] = orig + 1e-6
                lp = fwd().item()
                flat[i] = orig - 1e-6
                lm = fwd().item()
                flat[i] = orig
            fd = (lp - lm) / 2e-6
            err = abs(fd - g.view(-1)[i].item()) / max(1.0, abs(fd))
            worst = max(worst, err)
            assert err < 1e-6, "%s: d loss/d %s[%d]: autograd %g, finite difference %g" % (
                name, n, i, g.view(-1)[i].item(), fd)
    return worst


def run(name, fn, cls):
    rng, seed = rng_for(name)
    torch.manual_seed(seed)
    c = Case(name)
    r = fn(c, Gen(rng))
    outs, cot = r if isinstance(r, tuple) else (r, True)
    if not isinstance(outs, (list, tuple)):
        outs = [outs]
    outs = list(outs)

    def total(os_):
        if not cot:
            return os_[0]
        s = 0
        for k, o in enumerate(os_):
            s = s + (o * c.cots[k]).sum()
        return s
    if cot:
        c.cots = []
        for k, o in enumerate(outs):
            rc = np.random.default_rng(seed + k)
            cv = r32(rc.uniform(-1, 1, size=tuple(o.shape)))
            c.cots.append(c.input("cot%d" % k, cv, grad=False))
    loss = total(outs)
    loss.backward()
    c.buf_after = {n: b.detach().numpy().copy() for n, b in c.buffers}
    if c.refwd is not None:
        worst = finite_diff(name, c, lambda: total(c.refwd()), loss)
    else:
        worst = float("nan")
    save(name, c, outs, loss.item(), cot, cls)
    print("%-28s loss %12.6g  fd err %.2g" % (name, loss.item(), worst))


# ---------------------------------------------------------------- layers
# Each case function fills c and returns the outputs (or (outputs, False)
# when output 0 is itself the loss). c.refwd, when set, recomputes the
# outputs without side effects, for the finite-difference check.

@case("linear")
def _(c, r):
    lin = c.module("lin.", nn.Linear(5, 4))
    x = c.input("x", r.nz(3, 5))
    c.refwd = lambda: [lin(x)]
    return lin(x)


@case("linear_nobias_3d")
def _(c, r):
    lin = c.module("lin.", nn.Linear(6, 3, bias=False))
    x = c.input("x", r.nz(2, 4, 6))
    c.refwd = lambda: [lin(x)]
    return lin(x)


@case("sequential_mlp")
def _(c, r):
    net = c.module("", nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)))
    x = c.input("x", r.nz(5, 4))
    c.refwd = lambda: [net(x)]
    return net(x)


@case("shared_linear")
def _(c, r):
    # One Linear applied twice: its gradients accumulate.
    lin = c.module("lin.", nn.Linear(4, 4))
    x = c.input("x", r.nz(3, 4))
    f = lambda: [lin(torch.tanh(lin(x)))]
    c.refwd = f
    return f()


@case("broadcast_params")
def _(c, r):
    # Parameters broadcast against the input: their gradients must be
    # reduced back to their shapes.
    x = c.input("x", r.nz(3, 4, 5))
    scale = c.param("scale", r.nz(1, 4, 1))
    bias = c.param("bias", r.nz(5))
    s = c.param("s", r.nz(1))
    m = c.param("m", r.nz(3, 1, 5))
    f = lambda: [x * scale + bias * s - m * x]
    c.refwd = f
    return f()


@case("conv2d")
def _(c, r):
    conv = c.module("conv.", nn.Conv2d(3, 4, 3, padding=1))
    x = c.input("x", r.nz(2, 3, 6, 5))
    c.refwd = lambda: [conv(x)]
    return conv(x)


@case("conv2d_stride_dil_groups")
def _(c, r):
    conv = c.module("conv.", nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2))
    x = c.input("x", r.nz(2, 4, 9, 7))
    c.refwd = lambda: [conv(x)]
    return conv(x)


@case("conv2d_same_nobias")
def _(c, r):
    conv = c.module("conv.", nn.Conv2d(2, 3, 4, padding="same", bias=False, dilation=(1, 2)))
    x = c.input("x", r.nz(1, 2, 7, 8))
    c.refwd = lambda: [conv(x)]
    return conv(x)


def pool_case(name, mod, shape):
    @case(name)
    def _(c, r):
        x = c.input("x", r.distinct(*shape))
        c.refwd = lambda: [mod(x)]
        return mod(x)


pool_case("maxpool", nn.MaxPool2d(2), (2, 3, 6, 6))
pool_case("maxpool_pad_stride_dil", nn.MaxPool2d(3, stride=2, padding=1, dilation=(1, 2)), (2, 2, 9, 10))
pool_case("maxpool_ceil", nn.MaxPool2d(2, stride=2, ceil_mode=True), (1, 2, 5, 7))
pool_case("avgpool", nn.AvgPool2d(2), (2, 3, 6, 6))
pool_case("avgpool_pad", nn.AvgPool2d(3, stride=2, padding=1), (2, 2, 7, 6))
pool_case("avgpool_pad_exclude", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (2, 2, 7, 6))
pool_case("avgpool_ceil", nn.AvgPool2d(2, stride=2, ceil_mode=True), (1, 2, 5, 7))
pool_case("globalavgpool", nn.AdaptiveAvgPool2d(1), (2, 3, 4, 5))


@case("flatten_linear")
def _(c, r):
    net = c.module("", nn.Sequential(nn.Flatten(), nn.Linear(12, 3)))
    x = c.input("x", r.nz(2, 3, 2, 2))
    c.refwd = lambda: [net(x)]
    return net(x)


@case("cnn")
def _(c, r):
    net = c.module("", nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 4, 3, padding=1, groups=2), nn.GELU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(4, 3)))
    x = c.input("x", r.nz(3, 2, 6, 6))
    return net(x)


def bn_case(name, mod, shape):
    @case(name)
    def _(c, r):
        bn = c.module("bn.", mod)
        with torch.no_grad():
            if mod.affine:
                bn.weight.copy_(torch.as_tensor(r.nz(mod.num_features)))
                bn.bias.copy_(torch.as_tensor(r.nz(mod.num_features)))
            bn.running_mean.copy_(torch.as_tensor(r.u(mod.num_features)))
            bn.running_var.copy_(torch.as_tensor(r.u(mod.num_features, lo=0.5, hi=2.0)))
        c.buf_init = {n: b.detach().numpy().copy() for n, b in c.buffers}
        bn.train()
        x = c.input("x", r.nz(*shape))
        c.refwd = lambda: [F.batch_norm(x, None, None, bn.weight, bn.bias, training=True, eps=bn.eps)]
        y = bn(x)
        # Inference after the step: the updated running statistics.
        bn.eval()
        with torch.no_grad():
            c.evals = [bn(x)]
        bn.train()
        return y


bn_case("batchnorm1d", nn.BatchNorm1d(5), (6, 5))
bn_case("batchnorm1d_3d", nn.BatchNorm1d(3, momentum=0.25), (4, 3, 5))
bn_case("batchnorm2d", nn.BatchNorm2d(3, eps=1e-3, momentum=0.2), (2, 3, 4, 5))
bn_case("batchnorm2d_noaffine", nn.BatchNorm2d(3, affine=False), (2, 3, 3, 4))


@case("layernorm_noaffine")
def _(c, r):
    ln = c.module("ln.", nn.LayerNorm(5, elementwise_affine=False))
    x = c.input("x", r.nz(4, 5))
    c.refwd = lambda: [ln(x)]
    return ln(x)


@case("layernorm")
def _(c, r):
    ln = c.module("ln.", nn.LayerNorm(6))
    with torch.no_grad():
        ln.weight.copy_(torch.as_tensor(r.nz(6)))
        ln.bias.copy_(torch.as_tensor(r.nz(6)))
    x = c.input("x", r.nz(3, 4, 6))
    c.refwd = lambda: [ln(x)]
    return ln(x)


@case("layernorm_2d")
def _(c, r):
    ln = c.module("ln.", nn.LayerNorm((4, 6), eps=1e-3))
    with torch.no_grad():
        ln.weight.copy_(torch.as_tensor(r.nz(4, 6)))
        ln.bias.copy_(torch.as_tensor(r.nz(4, 6)))
    x = c.input("x", r.nz(3, 4, 6))
    c.refwd = lambda: [ln(x)]
    return ln(x)


@case("embedding")
def _(c, r):
    emb = c.module("emb.", nn.Embedding(10, 4))
    idx = np.array([[1, 3, 3, 9, 0], [3, 1, 7, 7, 7], [2, 2, 2, 2, 5]], dtype=np.int64)
    i = c.input("idx", idx)
    c.refwd = lambda: [emb(i)]
    return emb(i)


@case("embedding_padding")
def _(c, r):
    emb = c.module("emb.", nn.Embedding(8, 3, padding_idx=1))
    c.fd_skip = {"emb.weight"}  # the padding row gets no gradient by design
    idx = np.array([[1, 3, 1, 0], [4, 1, 7, 7]], dtype=np.int64)
    i = c.input("idx", idx)
    c.refwd = lambda: [emb(i)]
    return emb(i)


@case("lstm", "seq")
def _(c, r):
    lstm = c.module("lstm.", nn.LSTM(4, 5))
    x = c.input("x", r.nz(6, 2, 4))
    h0 = c.input("h0", r.u(1, 2, 5))
    c0 = c.input("c0", r.u(1, 2, 5))

    def f():
        y, (h, cc) = lstm(x, (h0, c0))
        return [y, h, cc]
    c.refwd = f
    return f()


@case("lstm_bi_2layer_batchfirst", "seq")
def _(c, r):
    lstm = c.module("lstm.", nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True))
    x = c.input("x", r.nz(2, 5, 3))

    def f():
        y, (h, cc) = lstm(x)
        return [y, h, cc]
    c.refwd = f
    return f()


@case("gru", "seq")
def _(c, r):
    gru = c.module("gru.", nn.GRU(4, 5))
    x = c.input("x", r.nz(6, 2, 4))
    h0 = c.input("h0", r.u(1, 2, 5))

    def f():
        y, h = gru(x, h0)
        return [y, h]
    c.refwd = f
    return f()


@case("gru_bi_2layer_nobias", "seq")
def _(c, r):
    gru = c.module("gru.", nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True, bias=False))
    x = c.input("x", r.nz(2, 5, 3))
    h0 = c.input("h0", r.u(4, 2, 4))

    def f():
        y, h = gru(x, h0)
        return [y, h]
    c.refwd = f
    return f()


@case("mha_self")
def _(c, r):
    mha = c.module("attn.", nn.MultiheadAttention(8, 2))
    with torch.no_grad():  # non-zero biases, so their gradients mean something
        mha.in_proj_bias.copy_(torch.as_tensor(r.u(24, lo=-0.3, hi=0.3)))
        mha.out_proj.bias.copy_(torch.as_tensor(r.u(8, lo=-0.3, hi=0.3)))
    x = c.input("x", r.nz(5, 3, 8))

    def f():
        y, w = mha(x, x, x, need_weights=True)
        return [y, w]
    c.refwd = f
    return f()


@case("mha_cross_bool_masks")
def _(c, r):
    mha = c.module("attn.", nn.MultiheadAttention(8, 2, batch_first=True))
    with torch.no_grad():
        mha.in_proj_bias.copy_(torch.as_tensor(r.u(24, lo=-0.3, hi=0.3)))
    q = c.input("q", r.nz(2, 4, 8))
    kv = c.input("kv", r.nz(2, 6, 8))
    am = np.zeros((4, 6), dtype=bool)
    am[0, 1] = am[2, 4] = am[3, 0] = am[1, 5] = True
    kp = np.zeros((2, 6), dtype=bool)
    kp[0, 5] = kp[1, 2] = kp[1, 3] = True
    m = c.input("mask", am)
    k = c.input("kpm", kp)

    def f():
        y, _ = mha(q, kv, kv, attn_mask=m, key_padding_mask=k, need_weights=False)
        return [y]
    c.refwd = f
    return f()


@case("mha_float_mask_kvdim")
def _(c, r):
    mha = c.module("attn.", nn.MultiheadAttention(6, 3, kdim=4, vdim=5, bias=False))
    q = c.input("q", r.nz(3, 2, 6))
    k = c.input("k", r.nz(4, 2, 4))
    v = c.input("v", r.nz(4, 2, 5))
    m = c.input("mask", r.u(2 * 3, 3, 4, lo=-2, hi=1), grad=False)

    def f():
        y, w = mha(q, k, v, attn_mask=m)
        return [y, w]
    c.refwd = f
    return f()


@case("mha_causal")
def _(c, r):
    mha = c.module("attn.", nn.MultiheadAttention(4, 2, batch_first=True))
    x = c.input("x", r.nz(2, 5, 4))
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)

    def f():
        y, _ = mha(x, x, x, attn_mask=causal)
        return [y]
    c.refwd = f
    return f()


def tutorial_pe(d, max_len):
    # PyTorch's transformer tutorial (float64 here).
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d // 2])
    return pe


@case("posenc", "elem")
def _(c, r):
    d, n = 6, 16
    pe = tutorial_pe(d, n)
    pos = np.arange(n)[:, None]
    ref = np.zeros((n, d))
    for i in range(0, d, 2):
        ref[:, i] = np.sin(pos[:, 0] / 10000 ** (i / d))
        ref[:, i + 1] = np.cos(pos[:, 0] / 10000 ** (i / d))
    assert np.allclose(pe.numpy(), ref, atol=1e-12)
    x = c.input("x", r.nz(2, 5, d))
    f = lambda: [x + pe[:5]]
    c.refwd = f
    return f()


@case("posenc_seqfirst_odd", "elem")
def _(c, r):
    d = 5
    pe = tutorial_pe(d, 12)
    x = c.input("x", r.nz(7, 2, d))
    f = lambda: [x + pe[:7].unsqueeze(1)]
    c.refwd = f
    return f()


ACTS = [
    ("relu", nn.ReLU()), ("leakyrelu", nn.LeakyReLU()), ("leakyrelu_0.2", nn.LeakyReLU(0.2)),
    ("elu", nn.ELU()), ("elu_0.5", nn.ELU(0.5)), ("gelu", nn.GELU()), ("gelu_tanh", nn.GELU(approximate="tanh")),
    ("silu", nn.SiLU()), ("mish", nn.Mish()), ("sigmoid", nn.Sigmoid()), ("tanh", nn.Tanh()),
    ("softmax", nn.Softmax(dim=1)), ("logsoftmax", nn.LogSoftmax(dim=-1)),
]
for _n, _m in ACTS:
    def _act(c, r, m=_m):
        x = c.input("x", r.nz(3, 4, 5, hi=3.0))
        c.refwd = lambda: [m(x)]
        return m(x)
    CASES["act_" + _n] = (_act, "elem")


# ---------------------------------------------------------------- losses

def loss_case(name, make):
    def fn(c, r):
        f = make(c, r)
        c.refwd = lambda: [f()]
        return [f()], False
    CASES["loss_" + name] = (fn, "elem")


def regression(fn, **kw):
    def make(c, r):
        x = c.input("x", r.nz(4, 5))
        y = c.input("y", r.nz(4, 5))
        return lambda: fn(x, y, **kw)
    return make


def away_from(delta):
    def make_fn(fn, **kw):
        def make(c, r):
            x = r.nz(4, 5)
            y = r.nz(4, 5)
            d = np.abs(x - y)
            near = np.abs(d - delta) < 0.05
            y = np.where(near, x - np.sign(x - y) * (delta + 0.1), y)
            xi, yi = c.input("x", x), c.input("y", r32(y))
            return lambda: fn(xi, yi, **kw)
        return make
    return make_fn


loss_case("mse_mean", regression(F.mse_loss))
loss_case("mse_sum", regression(F.mse_loss, reduction="sum"))
loss_case("l1_mean", regression(F.l1_loss))
loss_case("huber_mean", away_from(1.0)(F.huber_loss))
loss_case("huber_delta0.5_sum", away_from(0.5)(F.huber_loss, delta=0.5, reduction="sum"))
loss_case("smoothl1_mean", away_from(1.0)(F.smooth_l1_loss))
loss_case("smoothl1_beta0.25_sum", away_from(0.25)(F.smooth_l1_loss, beta=0.25, reduction="sum"))
loss_case("smoothl1_beta0", regression(F.smooth_l1_loss, beta=0.0))


def bce(weighted, reduction):
    def make(c, r):
        p = c.input("p", r.u(4, 5, lo=0.05, hi=0.95))
        y = c.input("y", r.u(4, 5, lo=0.0, hi=1.0), grad=False)
        w = c.input("w", r.u(1, 5, lo=0.5, hi=2.0), grad=False) if weighted else None
        return lambda: F.binary_cross_entropy(p, y, weight=w, reduction=reduction)
    return make


loss_case("bce_mean", bce(False, "mean"))
loss_case("bce_weight_sum", bce(True, "sum"))


def bce_logits(weighted, posw, reduction):
    def make(c, r):
        x = r.nz(4, 5, hi=4.0)
        x[0, 0], x[1, 1], x[2, 2] = 40.0, -40.0, 0.0  # stability and x = 0
        x = c.input("x", x)
        y = c.input("y", r.u(4, 5, lo=0.0, hi=1.0), grad=False)
        w = c.input("w", r.u(4, 1, lo=0.5, hi=2.0), grad=False) if weighted else None
        pw = c.input("pw", r.u(5, lo=0.5, hi=3.0), grad=False) if posw else None
        return lambda: F.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=pw, reduction=reduction)
    return make


loss_case("bcelogits_mean", bce_logits(False, False, "mean"))
loss_case("bcelogits_weight_posweight_sum", bce_logits(True, True, "sum"))
loss_case("bcelogits_posweight_mean", bce_logits(False, True, "mean"))

W5 = [0.5, 2.0, 1.0, 0.25, 1.5]


def cls_loss(fn, logits_shape, targets, **kw):
    def make(c, r):
        x = r.nz(*logits_shape, hi=3.0)
        if fn is F.nll_loss:
            x = F.log_softmax(torch.as_tensor(x), dim=1).numpy()
            x = r32(x)
        xi = c.input("x", x)
        t = c.input("t", np.array(targets, dtype=np.int64))
        kw2 = dict(kw)
        if "weight" in kw2:
            kw2["weight"] = torch.as_tensor(kw2["weight"])
        return lambda: fn(xi, t, **kw2)
    return make


T6 = [0, 3, 4, 1, 1, 2]
T6_IGN = [0, 3, -100, 1, 1, 2]
T6_IGN2 = [0, 2, 4, 2, 1, 3]
loss_case("nll_mean", cls_loss(F.nll_loss, (6, 5), T6))
loss_case("nll_sum", cls_loss(F.nll_loss, (6, 5), T6, reduction="sum"))
loss_case("nll_weight_ignore_mean", cls_loss(F.nll_loss, (6, 5), T6_IGN, weight=W5))
loss_case("nll_ignore2_mean_3d", cls_loss(F.nll_loss, (2, 5, 3), [[0, 2, 4], [2, 1, 3]], ignore_index=2))
loss_case("ce_mean", cls_loss(F.cross_entropy, (6, 5), T6))
loss_case("ce_sum", cls_loss(F.cross_entropy, (6, 5), T6, reduction="sum"))
loss_case("ce_weight_ignore_mean", cls_loss(F.cross_entropy, (6, 5), T6_IGN, weight=W5))
loss_case("ce_smooth_mean", cls_loss(F.cross_entropy, (6, 5), T6, label_smoothing=0.1))
loss_case("ce_smooth_ignore_mean", cls_loss(F.cross_entropy, (6, 5), T6_IGN, label_smoothing=0.2))
loss_case("ce_smooth_weight_ignore_mean",
          cls_loss(F.cross_entropy, (6, 5), T6_IGN2, weight=W5, ignore_index=2, label_smoothing=0.15))
loss_case("ce_smooth_weight_sum", cls_loss(F.cross_entropy, (6, 5), T6_IGN, weight=W5, label_smoothing=0.3,
                                           reduction="sum"))
loss_case("ce_smooth_weight_mean_3d", cls_loss(F.cross_entropy, (2, 5, 3), [[0, 2, 4], [-100, 1, 3]],
                                               weight=W5, label_smoothing=0.1))


def kl(reduction, log_target):
    def make(c, r):
        x = c.input("x", r32(F.log_softmax(torch.as_tensor(r.nz(4, 5)), dim=1).numpy()))
        t = F.softmax(torch.as_tensor(r.nz(4, 5, hi=3.0)), dim=1).numpy()
        t[0, 1] = t[2, 3] = 0.0  # 0 log 0 = 0
        if log_target:
            t = np.log(t + 0.01)
        ti = c.input("t", r32(t), grad=False)
        return lambda: F.kl_div(x, ti, reduction=reduction, log_target=log_target)
    return make


loss_case("kldiv_mean", kl("mean", False))
loss_case("kldiv_batchmean", kl("batchmean", False))
loss_case("kldiv_sum", kl("sum", False))
loss_case("kldiv_logtarget_batchmean", kl("batchmean", True))


def unreduced(name, make):
    """A loss with reduction none: its elementwise output goes through
    the cotangent sum like a layer's."""
    def fn(c, r):
        f = make(c, r)
        c.refwd = lambda: [f()]
        return [f()]
    CASES["loss_" + name] = (fn, "elem")


unreduced("mse_none", regression(F.mse_loss, reduction="none"))
unreduced("huber_none", away_from(1.0)(F.huber_loss, reduction="none"))
unreduced("bcelogits_posweight_none", bce_logits(False, True, "none"))
unreduced("nll_weight_ignore_none", cls_loss(F.nll_loss, (6, 5), T6_IGN, weight=W5, reduction="none"))
unreduced("ce_smooth_weight_ignore_none", cls_loss(F.cross_entropy, (6, 5), T6_IGN, weight=W5, label_smoothing=0.2,
                                                   reduction="none"))
unreduced("kldiv_none", kl("none", False))


# ---------------------------------------------------------------- training

@case("nograd")
def _(c, r):
    # lin1 runs under torch.no_grad(): no gradient reaches it, and SGD
    # leaves it unchanged; lin2 trains.
    lin1 = c.module("lin1.", nn.Linear(4, 6))
    lin2 = c.module("lin2.", nn.Linear(6, 3))
    c.zero = ["lin1.weight", "lin1.bias"]
    x = c.input("x", r.nz(5, 4), grad=False)
    c.init = {n: p.detach().numpy().copy() for n, p in c.params}

    def f():
        with torch.no_grad():
            h = lin1(x)
        return [lin2(torch.relu(h))]
    c.refwd = f
    c.train = sgd_steps(c, f, 0.1, 3)
    return f()


def sgd_steps(c, f, lr, steps, loss_of=None):
    """Runs SGD steps on a copy of the parameters and returns the losses
    and the parameters after them (the case's own gradients are computed
    separately, from the initial values)."""
    saved = {n: p.detach().clone() for n, p in c.params}
    bufs = {n: b.detach().clone() for n, b in c.buffers}
    rc = np.random.default_rng(99)
    losses = []
    params = [p for _, p in c.params]
    opt = torch.optim.SGD(params, lr=lr)
    cots = None
    for _ in range(steps):
        opt.zero_grad()
        outs = f()
        if loss_of is not None:
            loss = loss_of(outs)
        else:
            if cots is None:
                cots = [torch.as_tensor(r32(np.random.default_rng(c_seed(c) + k).uniform(-1, 1, size=tuple(o.shape))))
                        for k, o in enumerate(outs)]
            loss = sum((o * cv).sum() for o, cv in zip(outs, cots))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    after = {n: p.detach().numpy().copy() for n, p in c.params}
    for n, b in c.buffers:
        after[n] = b.detach().numpy().copy()
    with torch.no_grad():
        for n, p in c.params:
            p.copy_(saved[n])
            p.grad = None
        for n, b in c.buffers:
            b.copy_(bufs[n])
    return {"lr": lr, "steps": steps, "losses": losses, "after": after}


def c_seed(c):
    return rng_for(c.name)[1]


@case("train_norms_embedding")
def _(c, r):
    # Embedding -> LayerNorm -> Tanh -> BatchNorm1d -> Linear -> cross entropy,
    # three SGD steps: the norm and embedding weights must move as in
    # PyTorch.
    emb = c.module("emb.", nn.Embedding(12, 6))
    ln = c.module("ln.", nn.LayerNorm(6))
    bn = c.module("bn.", nn.BatchNorm1d(6))
    lin = c.module("lin.", nn.Linear(6, 3))
    idx = c.input("idx", np.array([0, 3, 3, 7, 11, 5, 3, 0], dtype=np.int64))
    t = c.input("t", np.array([0, 1, 1, 2, 0, 2, 1, 0], dtype=np.int64))

    def f():
        return [F.cross_entropy(lin(bn(torch.tanh(ln(emb(idx))))), t)]
    c.train = sgd_steps(c, f, 0.5, 3, loss_of=lambda o: o[0])
    return f(), False


# ---------------------------------------------------------------- init

def init_reference():
    """PyTorch's default initialisation of each layer's parameters, as
    torch.nn.init computes it: the distribution and its bound (uniform),
    standard deviation (normal) or value (constant). Every parameter
    torch initialises here is checked to fit the description."""
    out = {}

    def uniform(name, p, bound):
        v = p.detach().numpy()
        assert np.abs(v).max() <= bound, (name, np.abs(v).max(), bound)
        assert np.abs(v).max() > 0.9 * bound, (name, np.abs(v).max(), bound)
        out[name] = {"kind": "uniform", "bound": bound, "shape": list(v.shape)}

    def const(name, p, value):
        v = p.detach().numpy()
        assert (v == value).all(), name
        out[name] = {"kind": "constant", "value": value, "shape": list(v.shape)}

    def kaiming(w):  # kaiming_uniform_(w, a=sqrt(5)), mode fan_in
        fan = nn.init._calculate_correct_fan(w, "fan_in")
        return nn.init.calculate_gain("leaky_relu", math.sqrt(5)) * math.sqrt(3.0 / fan)

    def fan_in_bound(w):
        fan, _ = nn.init._calculate_fan_in_and_fan_out(w)
        return 1 / math.sqrt(fan)

    torch.manual_seed(0)
    lin = nn.Linear(300, 200)
    uniform("lin.weight", lin.weight, kaiming(lin.weight))
    uniform("lin.bias", lin.bias, fan_in_bound(lin.weight))
    conv = nn.Conv2d(6, 12, (3, 5), groups=3)
    uniform("conv.weight", conv.weight, kaiming(conv.weight))
    uniform("conv.bias", conv.bias, fan_in_bound(conv.weight))
    emb = nn.Embedding(1000, 20)
    v = emb.weight.detach().numpy()
    assert abs(v.mean()) < 0.02 and abs(v.std() - 1) < 0.02
    out["emb.weight"] = {"kind": "normal", "std": 1.0, "shape": list(v.shape)}
    for name, mod in [("lstm", nn.LSTM(30, 40, num_layers=2, bidirectional=True)), ("gru", nn.GRU(30, 40))]:
        for n, p in mod.named_parameters():
            uniform(name + "." + n, p, 1 / math.sqrt(mod.hidden_size))
    mha = nn.MultiheadAttention(64, 4)
    fi, fo = nn.init._calculate_fan_in_and_fan_out(mha.in_proj_weight)
    uniform("attn.in_proj_weight", mha.in_proj_weight, math.sqrt(6.0 / (fi + fo)))
    const("attn.in_proj_bias", mha.in_proj_bias, 0.0)
    uniform("attn.out_proj.weight", mha.out_proj.weight, kaiming(mha.out_proj.weight))
    const("attn.out_proj.bias", mha.out_proj.bias, 0.0)
    ln = nn.LayerNorm(10)
    const("ln.weight", ln.weight, 1.0)
    const("ln.bias", ln.bias, 0.0)
    bn = nn.BatchNorm2d(7)
    const("bn.weight", bn.weight, 1.0)
    const("bn.bias", bn.bias, 0.0)
    const("bn.running_mean", bn.running_mean, 0.0)
    const("bn.running_var", bn.running_var, 1.0)
    with open(os.path.join(HERE, "init.json"), "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print("init.json: %d parameters" % len(out))


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    for name in sorted(CASES):
        fn, cls = CASES[name]
        run(name, fn, cls)
    print("%d cases" % len(CASES))
    init_reference()


if __name__ == "__main__":
    main()
