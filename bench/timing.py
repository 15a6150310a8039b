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


def median_time(fn, min_time, min_runs=3, max_runs=200, sync=None, reps=0):
    """Median seconds per call of fn and the number of timed batches, as
    bench/suite times vrun: each batch is reps calls (reps 0: enough for
    about 2 ms, at most 64) between two sync() calls (for a GPU), batches
    repeat until min_time has passed and min_runs have run, at most
    max_runs. One untimed batch warms up."""
    sync = sync or (lambda: None)
    fn()
    sync()
    if reps == 0:
        t0 = time.perf_counter()
        fn()
        sync()
        one = time.perf_counter() - t0
        reps = min(64, max(1, int(0.002 / one + 0.999))) if one > 0 else 1
    for _ in range(reps):
        fn()
    sync()
    ts = []
    start = time.perf_counter()
    while len(ts) < max_runs and (len(ts) < min_runs or time.perf_counter() - start < min_time):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        ts.append((time.perf_counter() - t0) / reps)
    ts.sort()
    return ts[len(ts) // 2], len(ts)
