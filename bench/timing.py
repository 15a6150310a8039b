"""timeit, the timing loop of the Python baselines (backprop.py,
numpy_baseline.py)."""

import time


def timeit(fn, min_time, iters=0, warmup=1):
    """Seconds per call of fn and the number of timed calls: after warmup
    untimed calls, fn runs iters times, or (iters 0) until min_time seconds
    have passed and it has run at least 3 times."""
    for _ in range(warmup):
        fn()
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - start
        if (iters and n >= iters) or (not iters and el >= min_time and n >= 3):
            return el / n, n
