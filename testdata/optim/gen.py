#!/usr/bin/python3
"""Generate vrun's optimizer and learning-rate schedule references
(checked by engine/optim_test.go and nn/schedule_test.go).

Run with Debian's PyTorch and NumPy:  /usr/bin/python3 testdata/optim/gen.py

CI has no PyTorch, so the generated files are committed.

Optimizers. The model is loss = sum_i ReduceSum(w_i * c_i) with weights w_i
of odd shapes (SHAPES) and model inputs c_i, so that d loss / d w_i = c_i
exactly: the gradient of every step is a fed tensor, and the test checks
the optimizer alone. STEPS random gradients are drawn (scaled per step by a
factor in [0.1, 1], so that clipping by the global norm sometimes applies
and sometimes does not); torch.optim runs STEPS steps from the same initial
weights and the weights after every step are recorded. Where a case has
"clip", torch.nn.utils.clip_grad_norm_ runs before each step (the engine
clips the flat gradient buffer: the same global norm). Where a case has a
"schedule", the learning rate of each step comes from the named
torch.optim.lr_scheduler schedule (scheduler.step() after each
optimizer.step(); ReduceLROnPlateau is given the step's loss, computed
before the update).

Files, for dtype d in f32, f64 (f32 values are the f64 ones rounded):
  w<i>_<d>.npy             initial weight i
  c<i>_<d>.npy             [STEPS, *shape]: the gradient of weight i at each step
  cases/<case>_<d>/p<i>.npy [STEPS, *shape]: weight i after each step
  cases.json               the optimizer configurations, in the field names
                           of engine.Optimizer (lower case), and the schedule
                           references below

Schedules. For each schedule in cases.json "schedules", "lrs" holds the
learning rate of SCHED_STEPS consecutive optimizer steps (lrs[k] is the
rate after k calls of scheduler.step(), as param_groups[0]["lr"] reads it);
ReduceLROnPlateau cases also hold the "metrics" given to its step calls.
"Cosine with linear warm-up" is torch's SequentialLR of LinearLR (from
start_factor to 1 over warmup steps) and CosineAnnealingLR (T_max =
total - warmup, eta_min); OneCycleLR runs with cycle_momentum=False and
anneal_strategy "cos" (vrun's OneCycle does not cycle momentum).
"""

import json
import os
import shutil
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore", message="The epoch parameter")

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 20
SCHED_STEPS = 30
SHAPES = [(3, 5), (7,), (2, 1, 3)]

# Optimizer cases: name -> engine.Optimizer fields (torch names where they
# differ are mapped in make_optimizer). "clip" is the max norm; "schedule"
# names an entry of SCHEDULES.
OPTIMIZERS = [
    ("sgd", dict(kind="sgd", lr=0.1)),
    ("sgd_wd", dict(kind="sgd", lr=0.1, weight_decay=0.05)),
    ("sgd_momentum", dict(kind="sgd", lr=0.05, momentum=0.9)),
    ("sgd_dampening", dict(kind="sgd", lr=0.05, momentum=0.9, dampening=0.3)),
    ("sgd_momentum_wd", dict(kind="sgd", lr=0.05, momentum=0.8, dampening=0.1, weight_decay=0.02)),
    ("sgd_nesterov", dict(kind="sgd", lr=0.05, momentum=0.8, nesterov=True)),
    ("sgd_nesterov_wd", dict(kind="sgd", lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.03)),
    ("adam", dict(kind="adam", lr=0.01)),
    ("adam_betas", dict(kind="adam", lr=0.02, beta1=0.8, beta2=0.95, eps=1e-6)),
    ("adam_wd", dict(kind="adam", lr=0.01, weight_decay=0.1)),
    ("adamw_wd", dict(kind="adamw", lr=0.01, weight_decay=0.1)),
    ("adamw_betas_wd", dict(kind="adamw", lr=0.03, beta1=0.85, beta2=0.9, eps=1e-5, weight_decay=0.5)),
    ("adagrad", dict(kind="adagrad", lr=0.1)),
    ("adagrad_full", dict(kind="adagrad", lr=0.1, lr_decay=0.05, initial_accumulator_value=0.5, weight_decay=0.02, eps=1e-6)),
    ("rmsprop", dict(kind="rmsprop", lr=0.01)),
    ("rmsprop_alpha", dict(kind="rmsprop", lr=0.01, alpha=0.9, eps=1e-6)),
    ("rmsprop_centered", dict(kind="rmsprop", lr=0.01, centered=True)),
    ("rmsprop_momentum", dict(kind="rmsprop", lr=0.01, momentum=0.9)),
    ("rmsprop_wd", dict(kind="rmsprop", lr=0.01, weight_decay=0.1)),
    ("rmsprop_all", dict(kind="rmsprop", lr=0.005, alpha=0.95, centered=True, momentum=0.7, weight_decay=0.05)),
    ("sgd_clip", dict(kind="sgd", lr=0.05, momentum=0.9, clip_norm=2.5)),
    ("adam_clip", dict(kind="adam", lr=0.01, clip_norm=3.0)),
    ("adamw_clip_wd", dict(kind="adamw", lr=0.01, weight_decay=0.2, clip_norm=2.0)),
    # With learning-rate schedules (Trainer.SetLR between steps).
    ("sgd_momentum_step", dict(kind="sgd", lr=0.1, momentum=0.9, schedule="step")),
    ("adam_warmup_cosine", dict(kind="adam", lr=0.05, schedule="warmup_cosine")),
    ("adamw_onecycle", dict(kind="adamw", lr=0.05, weight_decay=0.1, schedule="onecycle")),
    ("sgd_nesterov_multistep", dict(kind="sgd", lr=0.1, momentum=0.9, nesterov=True, schedule="multistep")),
    ("adagrad_exponential", dict(kind="adagrad", lr=0.2, lr_decay=0.1, schedule="exponential")),
    ("rmsprop_plateau", dict(kind="rmsprop", lr=0.02, centered=True, schedule="plateau_loss")),
]

# Schedules: name -> (kind, parameters). The base learning rate of a
# schedule used by an optimizer case is that case's lr.
SCHEDULES = [
    ("step", dict(kind="step", lr=0.1, step_size=7, gamma=0.5)),
    ("multistep", dict(kind="multistep", lr=0.1, milestones=[5, 12, 13, 25], gamma=0.3)),
    ("exponential", dict(kind="exponential", lr=0.1, gamma=0.9)),
    ("warmup_cosine", dict(kind="warmup_cosine", lr=0.1, warmup=5, start_factor=0.1, total=SCHED_STEPS, min_lr=0.001)),
    ("cosine", dict(kind="warmup_cosine", lr=0.1, warmup=0, start_factor=1, total=SCHED_STEPS, min_lr=0)),
    ("warmup_cosine_short", dict(kind="warmup_cosine", lr=0.3, warmup=3, start_factor=0.25, total=17, min_lr=0.01)),
    ("onecycle", dict(kind="onecycle", lr=0.1, total=SCHED_STEPS, pct_start=0.3, div_factor=25, final_div_factor=1e4)),
    ("onecycle_odd", dict(kind="onecycle", lr=0.4, total=31, pct_start=0.25, div_factor=10, final_div_factor=100)),
    ("plateau", dict(kind="plateau", lr=0.1, mode="min", factor=0.5, patience=2, threshold=0.01,
                     threshold_mode="rel", cooldown=1, min_lr=0.004)),
    ("plateau_abs_max", dict(kind="plateau", lr=0.1, mode="max", factor=0.3, patience=1, threshold=0.05,
                             threshold_mode="abs", cooldown=2, min_lr=0.001)),
    ("plateau_defaults", dict(kind="plateau", lr=0.1, mode="min", factor=0.1, patience=10, threshold=1e-4,
                              threshold_mode="rel", cooldown=0, min_lr=0)),
    # Driven by the loss of the optimizer case rmsprop_plateau.
    ("plateau_loss", dict(kind="plateau", lr=0.1, mode="min", factor=0.5, patience=1, threshold=0.0,
                          threshold_mode="rel", cooldown=0, min_lr=0.001)),
]


def make_optimizer(params, cfg):
    kind = cfg["kind"]
    lr = cfg["lr"]
    wd = cfg.get("weight_decay", 0.0)
    eps = cfg.get("eps")
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=cfg.get("momentum", 0.0),
                               dampening=cfg.get("dampening", 0.0), nesterov=cfg.get("nesterov", False),
                               weight_decay=wd)
    if kind in ("adam", "adamw"):
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        return cls(params, lr=lr, betas=(cfg.get("beta1", 0.9), cfg.get("beta2", 0.999)),
                   eps=eps or 1e-8, weight_decay=wd)
    if kind == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, lr_decay=cfg.get("lr_decay", 0.0), weight_decay=wd,
                                   initial_accumulator_value=cfg.get("initial_accumulator_value", 0.0),
                                   eps=eps or 1e-10)
    if kind == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, alpha=cfg.get("alpha", 0.99), eps=eps or 1e-8,
                                   weight_decay=wd, momentum=cfg.get("momentum", 0.0),
                                   centered=cfg.get("centered", False))
    raise ValueError(kind)


def make_scheduler(opt, cfg):
    L = torch.optim.lr_scheduler
    kind = cfg["kind"]
    if kind == "step":
        return L.StepLR(opt, step_size=cfg["step_size"], gamma=cfg["gamma"])
    if kind == "multistep":
        return L.MultiStepLR(opt, milestones=cfg["milestones"], gamma=cfg["gamma"])
    if kind == "exponential":
        return L.ExponentialLR(opt, gamma=cfg["gamma"])
    if kind == "warmup_cosine":
        w, total = cfg["warmup"], cfg["total"]
        cos = L.CosineAnnealingLR(opt, T_max=total - w, eta_min=cfg["min_lr"])
        if w == 0:
            return cos
        lin = L.LinearLR(opt, start_factor=cfg["start_factor"], end_factor=1.0, total_iters=w)
        return L.SequentialLR(opt, [lin, cos], milestones=[w])
    if kind == "onecycle":
        return L.OneCycleLR(opt, max_lr=cfg["lr"], total_steps=cfg["total"], pct_start=cfg["pct_start"],
                            anneal_strategy="cos", cycle_momentum=False, div_factor=cfg["div_factor"],
                            final_div_factor=cfg["final_div_factor"])
    if kind == "plateau":
        return L.ReduceLROnPlateau(opt, mode=cfg["mode"], factor=cfg["factor"], patience=cfg["patience"],
                                   threshold=cfg["threshold"], threshold_mode=cfg["threshold_mode"],
                                   cooldown=cfg["cooldown"], min_lr=cfg["min_lr"])
    raise ValueError(kind)


def plateau_metrics(name, n):
    """A metric sequence that improves, stalls, wiggles and improves again,
    so that patience, threshold and cooldown all matter."""
    rng = np.random.default_rng(sum(name.encode()))
    v, out = 1.0, []
    if name.endswith("defaults"):  # improve, then stall within 1e-4
        for k in range(n):
            v *= 0.9 if k < 5 else 1.0 + 0.00003 * rng.standard_normal()
            out.append(float(v))
        return out
    for k in range(n):
        if k < 6 or 17 <= k < 21:
            v *= 0.9  # clear improvement
        elif k % 4 == 1:
            v *= 0.995  # below a 1% relative threshold
        else:
            v *= 1.0 + 0.02 * rng.standard_normal()
        out.append(float(v))
    if name.endswith("max"):
        out = [2.0 - m for m in out]
    return out


def schedule_lrs(cfg, n, metrics=None):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=cfg["lr"])
    sch = make_scheduler(opt, cfg)
    lrs = []
    for k in range(n):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if cfg["kind"] == "plateau":
            sch.step(metrics[k])
        else:
            sch.step()
    return lrs


def run_optimizer(cfg, w0, cs, dtype):
    ws = [torch.tensor(w, dtype=dtype, requires_grad=True) for w in w0]
    opt = make_optimizer(ws, cfg)
    sch = None
    if "schedule" in cfg:
        scfg = dict(SCHEDULES_BY_NAME[cfg["schedule"]], lr=cfg["lr"])
        sch = make_scheduler(opt, scfg)
    out = [[] for _ in ws]
    losses = []
    for k in range(STEPS):
        opt.zero_grad()
        loss = sum((w * torch.tensor(c[k], dtype=dtype)).sum() for w, c in zip(ws, cs))
        loss.backward()
        for w, c in zip(ws, cs):  # the gradient is exactly the fed tensor
            assert torch.equal(w.grad, torch.tensor(c[k], dtype=dtype))
        if "clip_norm" in cfg:
            torch.nn.utils.clip_grad_norm_(ws, cfg["clip_norm"])
        opt.step()
        if sch is not None:
            if isinstance(sch, torch.optim.lr_scheduler.ReduceLROnPlateau):
                sch.step(loss.item())
            else:
                sch.step()
        losses.append(loss.item())
        for i, w in enumerate(ws):
            out[i].append(w.detach().numpy().copy())
    return [np.stack(o) for o in out], losses


SCHEDULES_BY_NAME = dict(SCHEDULES)


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(20261209)
    w0 = [rng.standard_normal(s) for s in SHAPES]
    scale = rng.uniform(0.1, 1.0, size=STEPS)
    cs = [rng.standard_normal((STEPS,) + s) * scale.reshape((STEPS,) + (1,) * len(s)) for s in SHAPES]
    norms = np.sqrt(sum((c.reshape(STEPS, -1) ** 2).sum(1) for c in cs))

    shutil.rmtree(os.path.join(HERE, "cases"), ignore_errors=True)
    for d, npdt, tdt in (("f32", np.float32, torch.float32), ("f64", np.float64, torch.float64)):
        wd = [w.astype(npdt) for w in w0]
        cd = [c.astype(npdt) for c in cs]
        for i, (w, c) in enumerate(zip(wd, cd)):
            np.save(os.path.join(HERE, f"w{i}_{d}.npy"), w)
            np.save(os.path.join(HERE, f"c{i}_{d}.npy"), c)
        for name, cfg in OPTIMIZERS:
            ps, _ = run_optimizer(cfg, wd, cd, tdt)
            out = os.path.join(HERE, "cases", f"{name}_{d}")
            os.makedirs(out)
            for i, p in enumerate(ps):
                assert p.dtype == npdt
                np.save(os.path.join(out, f"p{i}.npy"), p)

    scheds = []
    for name, cfg in SCHEDULES:
        if name == "plateau_loss":
            continue  # only drives rmsprop_plateau
        e = dict(name=name, **cfg)
        n = SCHED_STEPS
        if cfg["kind"] == "warmup_cosine":
            n = min(n, cfg["total"])  # past T_max torch's cosine is periodic; vrun's stays at min_lr
        if cfg["kind"] == "plateau":
            e["metrics"] = plateau_metrics(name, n)
        e["lrs"] = schedule_lrs(cfg, n, e.get("metrics"))
        scheds.append(e)

    manifest = dict(
        steps=STEPS, shapes=[list(s) for s in SHAPES],
        optimizers=[dict(name=n, **c) for n, c in OPTIMIZERS],
        schedule_configs={n: c for n, c in SCHEDULES},
        schedules=scheds,
    )
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")

    # Report what the references exercise.
    print(f"gradient norms per step: min {norms.min():.3f} max {norms.max():.3f}")
    for name, cfg in OPTIMIZERS:
        if "clip_norm" in cfg:
            print(f"{name}: clipping applies at {int((norms > cfg['clip_norm']).sum())}/{STEPS} steps")
    for s in scheds:
        print(f"schedule {s['name']}: {len(set(s['lrs']))} distinct rates, first {s['lrs'][:4]}")


if __name__ == "__main__":
    main()
