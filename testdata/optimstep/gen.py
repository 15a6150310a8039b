#!/usr/bin/python3
"""Generate the conformance table of the fused optimizer primitive
rt.OptimStep (checked on every backend by internal/optimconf).

Run with Debian's PyTorch and NumPy:  /usr/bin/python3 testdata/optimstep/gen.py

CI has no PyTorch, so the generated files are committed.

Every case runs STEPS consecutive steps of one torch.optim optimizer
(single-tensor implementation, foreach=False) on one flat parameter of
each size in SIZES, in float32 and in float64 (torch computes in the
parameter's dtype, and so must the primitive). The parameter, the
gradients of each step and the initial optimizer state are random and
non-zero, so every term of the update matters:

  init "random": the optimizer state is set to the shared random state
                 arrays (as if T0 = 4 steps had run: Adam's and AdaGrad's
                 step counts start at 4, SGD's momentum buffer exists);
  init "fresh":  torch's own initial state (zeros, AdaGrad's
                 initial_accumulator_value, no SGD momentum buffer: the
                 first step copies the gradient), T0 = 0.

Where a case has "scale", each step's gradient is first multiplied in
place by a one-element tensor of the dtype (SCALES[k]), as
torch.nn.utils.clip_grad_norm_ does with its clipping coefficient; the
gradient after that multiplication is recorded too.

The learning rate of step k is lr * LR_FACTORS[k] (a schedule changing the
rate between steps).

Files:
  cases.json     steps, sizes, t0 of each init, scales, lr factors, and
                 the cases: name, fn (sgd, adam, adagrad, rmsprop) and the
                 rt.OptimStep fields (momentum, dampening, nesterov,
                 weight_decay, beta1, beta2, eps, alpha, centered,
                 decoupled), lr, lr_decay, initial_accumulator_value, init,
                 scale, and "states": for S1, S2, S3 the name of the
                 initial array in the .npz (null where the rule has no
                 such state)
  <dtype>.npz    for dtype f32, f64 and each size N:
                   n<N>_p          initial parameter [N]
                   n<N>_g          gradients [STEPS, N]
                   n<N>_<state>    initial state arrays [N]: rand1 (in
                                   [0.5, 1.5]), rand2 (in [0.1, 0.6]),
                                   rand3 (in [-1, 1]), zero, accum
                                   (initial_accumulator_value of the
                                   fresh AdaGrad case)
                 and for each case:
                   <case>__n<N>__p   parameter after each step [STEPS, N]
                   <case>__n<N>__s1 (s2, s3)  state after each step
                   <case>__n<N>__g   scaled gradient of each step (scale)

The random states keep RMSProp's centered variance positive:
square_avg >= 0.5 > 0.36 >= grad_avg^2, and the update keeps it so.
"""

import json
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 3
SIZES = [1, 37, 300]
T0 = {"random": 4, "fresh": 0}
SCALES = [0.7, 1.0, 0.35]
LR_FACTORS = [1.0, 0.4, 0.8]
ACCUM = 0.5  # initial_accumulator_value of the fresh AdaGrad case

# name -> configuration (rt.OptimStep's fields in lower case, plus lr,
# lr_decay, initial_accumulator_value and init).
CASES = [
    ("sgd", dict(fn="sgd", lr=0.1)),
    ("sgd_wd", dict(fn="sgd", lr=0.1, weight_decay=0.05)),
    ("sgd_mom", dict(fn="sgd", lr=0.05, momentum=0.9)),
    ("sgd_mom_damp", dict(fn="sgd", lr=0.05, momentum=0.9, dampening=0.3)),
    ("sgd_mom_wd", dict(fn="sgd", lr=0.05, momentum=0.8, weight_decay=0.02)),
    ("sgd_mom_damp_wd", dict(fn="sgd", lr=0.05, momentum=0.8, dampening=0.1, weight_decay=0.02)),
    ("sgd_nesterov", dict(fn="sgd", lr=0.05, momentum=0.8, nesterov=True)),
    ("sgd_nesterov_wd", dict(fn="sgd", lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.03)),
    ("sgd_mom_fresh", dict(fn="sgd", lr=0.05, momentum=0.9, init="fresh")),
    ("sgd_mom_damp_wd_fresh", dict(fn="sgd", lr=0.05, momentum=0.7, dampening=0.2, weight_decay=0.04, init="fresh")),
    ("sgd_nesterov_fresh", dict(fn="sgd", lr=0.05, momentum=0.8, nesterov=True, init="fresh")),
    ("adam", dict(fn="adam", lr=0.01)),
    ("adam_wd", dict(fn="adam", lr=0.01, weight_decay=0.1)),
    ("adam_betas", dict(fn="adam", lr=0.02, beta1=0.8, beta2=0.95, eps=1e-6)),
    ("adamw", dict(fn="adam", lr=0.01, weight_decay=0.1, decoupled=True)),
    ("adamw_wd0", dict(fn="adam", lr=0.01, weight_decay=0.0, decoupled=True)),
    ("adam_fresh", dict(fn="adam", lr=0.01, weight_decay=0.05, init="fresh")),
    ("adamw_fresh", dict(fn="adam", lr=0.03, beta1=0.85, beta2=0.9, eps=1e-5, weight_decay=0.5, decoupled=True, init="fresh")),
    ("adagrad", dict(fn="adagrad", lr=0.1)),
    ("adagrad_wd", dict(fn="adagrad", lr=0.1, weight_decay=0.02)),
    ("adagrad_decay", dict(fn="adagrad", lr=0.1, lr_decay=0.05, eps=1e-6)),
    ("adagrad_fresh", dict(fn="adagrad", lr=0.1, lr_decay=0.05, initial_accumulator_value=ACCUM,
                           weight_decay=0.02, eps=1e-6, init="fresh")),
    ("rmsprop", dict(fn="rmsprop", lr=0.01)),
    ("rmsprop_wd", dict(fn="rmsprop", lr=0.01, weight_decay=0.1)),
    ("rmsprop_mom", dict(fn="rmsprop", lr=0.01, momentum=0.9)),
    ("rmsprop_mom_wd", dict(fn="rmsprop", lr=0.01, momentum=0.9, weight_decay=0.05)),
    ("rmsprop_centered", dict(fn="rmsprop", lr=0.01, centered=True)),
    ("rmsprop_centered_wd", dict(fn="rmsprop", lr=0.01, centered=True, weight_decay=0.05)),
    ("rmsprop_centered_mom", dict(fn="rmsprop", lr=0.01, centered=True, momentum=0.7)),
    ("rmsprop_centered_mom_wd", dict(fn="rmsprop", lr=0.005, alpha=0.95, centered=True, momentum=0.7, weight_decay=0.05)),
    ("rmsprop_alpha", dict(fn="rmsprop", lr=0.01, alpha=0.9, eps=1e-6)),
    ("rmsprop_fresh", dict(fn="rmsprop", lr=0.005, alpha=0.95, centered=True, momentum=0.7, weight_decay=0.05, init="fresh")),
]

DEFAULTS = dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0, beta1=0.9, beta2=0.999,
                alpha=0.99, centered=False, decoupled=False, lr_decay=0.0, initial_accumulator_value=0.0,
                init="random")
DEFAULT_EPS = dict(sgd=0.0, adam=1e-8, adagrad=1e-10, rmsprop=1e-8)


def full(cfg):
    c = dict(DEFAULTS)
    c["eps"] = DEFAULT_EPS[cfg["fn"]]
    c.update(cfg)
    return c


def states(c):
    """The torch state names held in S1, S2, S3 (None where unused)."""
    fn = c["fn"]
    if fn == "sgd":
        return ["momentum_buffer" if c["momentum"] != 0 else None, None, None]
    if fn == "adam":
        return ["exp_avg", "exp_avg_sq", None]
    if fn == "adagrad":
        return ["sum", None, None]
    return ["square_avg", "grad_avg" if c["centered"] else None,
            "momentum_buffer" if c["momentum"] != 0 else None]


def init_names(c):
    """The .npz arrays of the initial S1, S2, S3 as the primitive gets them."""
    st = states(c)
    if c["init"] == "random":
        return [("rand%d" % (k + 1)) if s else None for k, s in enumerate(st)]
    out = []
    for s in st:
        if s is None:
            out.append(None)
        elif c["fn"] == "adagrad":
            out.append("accum")
        elif c["fn"] == "sgd":
            out.append("rand1")  # any value: the first step copies the gradient
        else:
            out.append("zero")
    return out


def make_optimizer(p, c):
    fn, lr, wd = c["fn"], c["lr"], c["weight_decay"]
    if fn == "sgd":
        return torch.optim.SGD([p], lr=lr, momentum=c["momentum"], dampening=c["dampening"],
                               nesterov=c["nesterov"], weight_decay=wd, foreach=False)
    if fn == "adam":
        cls = torch.optim.AdamW if c["decoupled"] else torch.optim.Adam
        return cls([p], lr=lr, betas=(c["beta1"], c["beta2"]), eps=c["eps"], weight_decay=wd, foreach=False)
    if fn == "adagrad":
        return torch.optim.Adagrad([p], lr=lr, lr_decay=c["lr_decay"], weight_decay=wd,
                                   initial_accumulator_value=c["initial_accumulator_value"], eps=c["eps"],
                                   foreach=False)
    return torch.optim.RMSprop([p], lr=lr, alpha=c["alpha"], eps=c["eps"], weight_decay=wd,
                               momentum=c["momentum"], centered=c["centered"], foreach=False)


def run(c, data, n, dt):
    """Runs case c on size n in dtype dt; returns the recorded arrays."""
    p = torch.nn.Parameter(torch.tensor(data["n%d_p" % n], dtype=dt))
    opt = make_optimizer(p, c)
    st = states(c)
    if c["init"] == "random":
        s = opt.state[p]
        s["step"] = torch.tensor(float(T0["random"]))
        for k, name in enumerate(st):
            if name:
                s[name] = torch.tensor(data["n%d_rand%d" % (n, k + 1)], dtype=dt)
    out = {"p": [], "g": [], "s1": [], "s2": [], "s3": []}
    for k in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = c["lr"] * LR_FACTORS[k]
        p.grad = torch.tensor(data["n%d_g" % n][k], dtype=dt)
        if c["scale"]:
            p.grad.mul_(torch.tensor(SCALES[k], dtype=dt))
            out["g"].append(p.grad.detach().numpy().copy())
        opt.step()
        out["p"].append(p.detach().numpy().copy())
        for j, name in enumerate(st):
            if name:
                out["s%d" % (j + 1)].append(opt.state[p][name].detach().numpy().copy())
    return {k: np.stack(v) for k, v in out.items() if v}


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(20261203)
    base = {}
    for n in SIZES:
        base["n%d_p" % n] = rng.uniform(-2, 2, n)
        g = rng.standard_normal((STEPS, n)) * rng.uniform(0.1, 2, (1, n))
        g[g == 0] = 0.5
        base["n%d_g" % n] = g
        base["n%d_rand1" % n] = rng.uniform(0.5, 1.5, n)
        base["n%d_rand2" % n] = rng.uniform(0.1, 0.6, n)
        base["n%d_rand3" % n] = rng.uniform(-1, 1, n)
        base["n%d_zero" % n] = np.zeros(n)
        base["n%d_accum" % n] = np.full(n, ACCUM)
    cases = []
    for name, cfg in CASES:
        for scale in (False, True):
            c = full(cfg)
            c["scale"] = scale
            c["name"] = name + ("_scale" if scale else "")
            c["states"] = init_names(c)
            cases.append(c)
    for dname, dt, npdt in (("f32", torch.float32, np.float32), ("f64", torch.float64, np.float64)):
        # The f32 inputs are the f64 ones rounded; torch runs on them.
        data = {k: v.astype(npdt) for k, v in base.items()}
        arrays = dict(data)
        for c in cases:
            for n in SIZES:
                for k, v in run(c, data, n, dt).items():
                    arrays["%s__n%d__%s" % (c["name"], n, k)] = v.astype(npdt)
        np.savez_compressed(os.path.join(HERE, dname + ".npz"), **arrays)
    manifest = dict(steps=STEPS, sizes=SIZES, t0=T0, scales=SCALES, lr_factors=LR_FACTORS, cases=cases)
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote %d cases x %d sizes x 2 dtypes" % (len(cases), len(SIZES)))


if __name__ == "__main__":
    main()
