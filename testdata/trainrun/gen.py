#!/usr/bin/python3
"""Generate vrun's whole-run training references (checked by
internal/traintest on every backend).

Run with Debian's PyTorch and NumPy:  /usr/bin/python3 testdata/trainrun/gen.py

CI has no PyTorch, so the generated files are committed.

Two small classifiers are trained with torch from torch's default
initialisation (seeded), on fixed batches, and the loss of every step is
recorded:

  mlp  Linear(20, 32) - ReLU - Linear(32, 10), 512 samples, batch 32,
       200 steps (about 12 epochs)
  cnn  Conv(3->8, 3x3, pad 1) - ReLU - MaxPool(2) - Conv(8->16, 3x3, pad 1)
       - ReLU - GlobalAvgPool - Linear(16, 10), 128 images 3x8x8, batch 16,
       100 steps

The loss is the mean cross-entropy of the logits (F.cross_entropy). Batch
k is samples [k*B, (k+1)*B) of the data set, wrapping around (the data set
size is a multiple of the batch). Labels come from a fixed random teacher
(mlp) or from class templates plus noise (cnn), so the losses fall.

Each model is trained with each optimizer of OPTIMIZERS, in float32 and
in float64 (float64 runs start from the float32 initial weights and data,
widened exactly).

Files, under <model>/:
  x.npy                  float32 data set
  labels.npy             int64 class of each sample
  <param>.npy            float32 initial weights (torch's layout: Linear
                         weight [out, in], Conv weight [out, in, kh, kw])
  loss_<opt>_<dt>.npy    float64 [steps]: the loss of each step, computed
                         before that step's update
  final_<opt>_<dt>/<param>.npy  weights after the last step
and manifest.json with the shapes, batch sizes, step counts and optimizer
configurations (engine.Optimizer field names, lower case).
"""

import json
import os
import shutil

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

OPTIMIZERS = {
    "sgd_momentum": dict(kind="sgd", lr=0.05, momentum=0.9),
    "adam": dict(kind="adam", lr=0.01),
}


class MLP(tnn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = tnn.Linear(20, 32)
        self.fc2 = tnn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class CNN(tnn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = tnn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = tnn.Conv2d(8, 16, 3, padding=1)
        self.fc = tnn.Linear(16, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.relu(self.conv2(h))
        return self.fc(h.mean(dim=(2, 3)))


def mlp_data(rng):
    x = rng.standard_normal((512, 20)).astype(np.float32)
    w1 = rng.standard_normal((20, 16))
    w2 = rng.standard_normal((16, 10))
    labels = np.argmax(np.tanh(x @ w1) @ w2, axis=1).astype(np.int64)
    return x, labels


def cnn_data(rng):
    templates = rng.standard_normal((10, 3, 8, 8))
    labels = rng.integers(0, 10, size=128).astype(np.int64)
    x = (templates[labels] + 0.8 * rng.standard_normal((128, 3, 8, 8))).astype(np.float32)
    return x, labels


MODELS = {
    "mlp": dict(cls=MLP, data=mlp_data, batch=32, steps=200, seed=1),
    "cnn": dict(cls=CNN, data=cnn_data, batch=16, steps=100, seed=2),
}


def param_name(n):
    return n.replace(".", "_")


def make_optimizer(params, cfg):
    if cfg["kind"] == "sgd":
        return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg.get("momentum", 0.0))
    if cfg["kind"] == "adam":
        return torch.optim.Adam(params, lr=cfg["lr"])
    raise ValueError(cfg["kind"])


def train(net, x, labels, batch, steps, cfg):
    opt = make_optimizer(net.parameters(), cfg)
    n = x.shape[0]
    losses = []
    for k in range(steps):
        i = (k * batch) % n
        xb, yb = x[i:i + batch], labels[i:i + batch]
        opt.zero_grad()
        loss = F.cross_entropy(net(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses, dtype=np.float64)


def main():
    torch.set_num_threads(1)
    manifest = {"optimizers": OPTIMIZERS, "models": {}}
    for name, spec in MODELS.items():
        out = os.path.join(HERE, name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        rng = np.random.default_rng(20261209 + spec["seed"])
        x, labels = spec["data"](rng)
        assert x.shape[0] % spec["batch"] == 0
        np.save(os.path.join(out, "x.npy"), x)
        np.save(os.path.join(out, "labels.npy"), labels)
        torch.manual_seed(spec["seed"])
        init = spec["cls"]()
        params = {}
        for pn, p in init.named_parameters():
            params[param_name(pn)] = p.detach().numpy().copy()
            np.save(os.path.join(out, param_name(pn) + ".npy"), params[param_name(pn)])
        manifest["models"][name] = dict(batch=spec["batch"], steps=spec["steps"], samples=x.shape[0],
                                        classes=10, params={k: list(v.shape) for k, v in params.items()})
        for oname, cfg in OPTIMIZERS.items():
            for dt, tdt in (("f32", torch.float32), ("f64", torch.float64)):
                net = spec["cls"]().to(tdt)
                with torch.no_grad():
                    for pn, p in net.named_parameters():
                        p.copy_(torch.from_numpy(params[param_name(pn)]).to(tdt))
                xt = torch.from_numpy(x).to(tdt)
                yt = torch.from_numpy(labels)
                losses = train(net, xt, yt, spec["batch"], spec["steps"], cfg)
                np.save(os.path.join(out, f"loss_{oname}_{dt}.npy"), losses)
                fin = os.path.join(out, f"final_{oname}_{dt}")
                os.makedirs(fin)
                for pn, p in net.named_parameters():
                    np.save(os.path.join(fin, param_name(pn) + ".npy"), p.detach().numpy())
                print(f"{name} {oname} {dt}: loss {losses[0]:.4f} -> {losses[-10:].mean():.4f} (mean of last 10)")
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
