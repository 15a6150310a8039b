#!/usr/bin/env python3
"""Export vrun's real test models to ONNX, with reference outputs.

Needs torch, torchvision, onnx and onnxruntime (the GPU machine has them):

    python3 testdata/models/export.py OUTDIR [name ...]

For each model it writes OUTDIR/<name>.onnx, <name>.x.npy (the input, a
fixed-seed random tensor), <name>.torch.npy (PyTorch eager output, CPU,
float32) and <name>.ort.npy (onnxruntime CPU output). Weights are random
with fixed seeds (no network, so no pretrained downloads); the models are
the torchvision architectures as exported by torch.onnx.export.
The test suite never needs PyTorch: small models and references are
committed to testdata/models/, large ones are checked on the GPU machine.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


class TransformerClassifier(nn.Module):
    """Embedding + 2-layer nn.TransformerEncoder + mean pool + linear."""

    def __init__(self, vocab=1000, d=64, heads=4, ff=128, classes=10):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.fc = nn.Linear(d, classes)

    def forward(self, tokens):
        return self.fc(self.enc(self.emb(tokens)).mean(dim=1))


class LSTMClassifier(nn.Module):
    """Embedding + 1-layer LSTM + linear on the last hidden state."""

    def __init__(self, vocab=500, d=32, hidden=48, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, tokens):
        _, (h, _) = self.lstm(self.emb(tokens))
        return self.fc(h[-1])


class BertEncoder(nn.Module):
    """A BERT-base-like encoder: 12 post-norm layers, d = 768, 12 heads, FF 3072, on [batch, 128, 768] embeddings."""

    def __init__(self, d=768, heads=12, ff=3072, layers=12):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        # TransformerEncoder deep-copies one layer, so every layer would hold the
        # same weights, and the ONNX exporter would store them once (27 MB that
        # stay in a GPU's L2 cache instead of BERT-base's 340 MB). Draw each
        # layer's weights afresh.
        for lay in self.enc.layers:
            lay.self_attn._reset_parameters()
            for lin in (lay.self_attn.out_proj, lay.linear1, lay.linear2):
                lin.reset_parameters()

    def forward(self, x):
        return self.enc(x)


def models():
    """The models by name: (constructor, example input). The torchvision
    ones are left out where torchvision is missing (bench/torch_baseline.py
    suite builds the others on a machine without it)."""
    g = torch.Generator().manual_seed(7)
    img = torch.rand(1, 3, 224, 224, generator=g) * 2 - 1
    tok = torch.randint(0, 500, (2, 16), generator=g)
    out = {}
    try:
        import torchvision
        out = {
            "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(weights=None), img),
            "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), img),
            "resnet18": (lambda: torchvision.models.resnet18(weights=None), img),
            "resnet50": (lambda: torchvision.models.resnet50(weights=None), img),
        }
    except ImportError:
        pass
    return out | {
        "transformer": (TransformerClassifier, tok),
        "lstm": (LSTMClassifier, tok),
        "bert": (BertEncoder, torch.randn(1, 128, 768, generator=g)),
    }


def main():
    import onnxruntime as ort
    out = sys.argv[1]
    want = sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    for name, (make, x) in models().items():
        if want and name not in want:
            continue
        torch.manual_seed(1234)
        m = make().eval()
        with torch.no_grad():
            y = m(x).numpy()
        path = os.path.join(out, name + ".onnx")
        # The batch dim is dynamic ("batch"), so vrun -shape x=32x3x224x224 works.
        torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["y"], opset_version=17,
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, dynamo=False)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        yo = sess.run(None, {"x": x.numpy()})[0]
        np.save(os.path.join(out, name + ".x.npy"), x.numpy())
        np.save(os.path.join(out, name + ".torch.npy"), y)
        np.save(os.path.join(out, name + ".ort.npy"), yo)
        err = np.abs(y - yo).max() / max(1e-12, np.abs(y).max())
        print(f"{name}: {os.path.getsize(path) / 1e6:.1f} MB, output {y.shape}, torch vs ort rel {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
