#!/usr/bin/env python3
"""Compare a vrun output (.npy) with reference outputs.

    python3 bench/check_output.py GOT.npy REF.npy [REF2.npy ...]

Prints the error relative to the reference's largest magnitude,
max|got - ref| / max|ref|, for each reference, and exits 1 if any exceeds
1e-4 (the real-model tolerance of the test suite).
"""
import sys

import numpy as np

got = np.load(sys.argv[1])
bad = False
for ref_path in sys.argv[2:]:
    ref = np.load(ref_path)
    if got.shape != ref.shape:
        print(f"{ref_path}: shape {got.shape} != {ref.shape}")
        bad = True
        continue
    err = float(np.abs(got.astype(np.float64) - ref).max() / max(1e-30, np.abs(ref).max()))
    ok = err <= 1e-4
    bad |= not ok
    print(f"{ref_path.split('/')[-1]}: max error {err:.2e} of max|ref| {'ok' if ok else 'FAIL'}")
sys.exit(1 if bad else 0)
