#!/usr/bin/python3
"""Train vrun's demo model: a small MLP on the 8x8 handwritten digits set.

Run with Debian's Python (python3-sklearn, python3-numpy):

    /usr/bin/python3 testdata/demo/train_digits.py

It writes, next to this script, the trained weights and a held-out test set
as .npy files. `go generate ./cmd/vrun` then turns them into the embedded
demo model (cmd/vrun/demo/digits.bin) with model.Builder. Training is
deterministic (fixed seeds), so re-running reproduces the committed files.
"""
import os

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

here = os.path.dirname(os.path.abspath(__file__))
digits = load_digits()
x = (digits.data / 16.0).astype(np.float32)  # pixels 0..16 -> 0..1
y = digits.target.astype(np.int64)
x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=7, stratify=y)

clf = MLPClassifier(hidden_layer_sizes=(48,), activation="relu", max_iter=600, random_state=7, alpha=1e-4)
clf.fit(x_train, y_train)
acc = clf.score(x_test, y_test)
print(f"test accuracy {acc:.4f} on {len(y_test)} images")

w1, w2 = clf.coefs_
b1, b2 = clf.intercepts_
np.save(os.path.join(here, "fc1_w.npy"), w1.astype(np.float32))  # [64, 48]
np.save(os.path.join(here, "fc1_b.npy"), b1.astype(np.float32))  # [48]
np.save(os.path.join(here, "fc2_w.npy"), w2.astype(np.float32))  # [48, 10]
np.save(os.path.join(here, "fc2_b.npy"), b2.astype(np.float32))  # [10]
np.save(os.path.join(here, "test_x.npy"), x_test.reshape(-1, 1, 8, 8))  # [N, 1, 8, 8]
np.save(os.path.join(here, "test_y.npy"), y_test)

# Reference logits in float64 for the end-to-end test.
h = np.maximum(x_test.astype(np.float64) @ w1 + b1, 0)
logits = h @ w2 + b2
np.save(os.path.join(here, "test_logits.npy"), logits.astype(np.float32))
