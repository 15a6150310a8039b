"""read_idx reads a gzipped MNIST IDX file as a NumPy uint8 array; the
LeNet-5 benchmarks (lenet_mnist.py, lenet_gpu.py) share it."""

import gzip


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        b = f.read()
    ndim = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
