"""One forecast tick: three XGBoost classifiers over all pools, inplace_predict vs StackedForest.

The learned scheduler asks P(arrival in the next 5 / 60 / 720 min) for every
pool at every tick: three ``binary:logistic`` boosters, each on its own
[n_pools, n_features] float32 matrix. Three models of 100 trees of depth 6 are
trained on random data with 16 features (seed 0, labels depend on a few
features plus noise, so the trees are full depth); the query matrices are
random with 10% NaN. For n_pools in (15, 100, 1000) the table gives the median
wall time per tick (over ``--repeat`` ticks, after a warm-up) of

- (a) three ``booster.inplace_predict(x, validate_features=False)`` calls (nthread=1);
- (b) one :meth:`sia.models.forest.StackedForest.predict_proba` call,

and the largest |difference| between the two. JIT compilation is excluded
from (b) and reported separately: the first call in a fresh process with an
empty numba cache (compile + write the cache) and in a second process that
finds the cache (load), each measured in its own subprocess, after numba's own
once-per-process start (reported apart: any compiled function pays it first).

Usage: .venv/bin/python benchmarks/bench_forecast_tick.py [--repeat 200]

Measured 2026-11-24 on this 2-core machine shared with other work (load
average 4-9), ms per tick, 3x inplace_predict / StackedForest: 15 pools
0.70-0.94 / 0.034-0.041; 100 pools 1.3-2.1 / 0.14; 1,000 pools 12-17 /
1.5-1.9; identical outputs (max |diff| 0). First tick: compile 1.1-1.8 s
with an empty cache, 10-14 ms from the cache, plus numba's start 0.4-0.8 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import xgboost as xgb
from sia.models.forest import StackedForest

N_FEATURES = 16
N_TREES = 100
DEPTH = 6
POOLS = (15, 100, 1000)

# Run in a subprocess: import, build the forest from saved models, then time numba's
# once-per-process start (a trivial function's first call: LLVM set-up, paid once by
# whichever compiled function runs first, e.g. the scheduler's) and the first tick.
_FIRST_CALL = """
import sys, time
import numba, numpy as np, xgboost as xgb
from sia.models.forest import StackedForest
boosters = [xgb.Booster(model_file=p) for p in sys.argv[1:]]
forest = StackedForest(boosters)
x = np.random.default_rng(0).normal(size=(15, {nf})).astype(np.float32)
t = time.perf_counter()
numba.njit(lambda: 1)()
t1 = time.perf_counter()
forest.predict_proba([x] * len(boosters))
print(t1 - t, time.perf_counter() - t1)
"""


def train_models(n_models: int = 3, seed: int = 0) -> list[xgb.Booster]:
    """Return ``n_models`` boosters (binary:logistic, hist, 100 trees of depth 6, 16 features)."""
    rng = np.random.default_rng(seed)
    boosters = []
    for m in range(n_models):
        x = rng.normal(size=(20_000, N_FEATURES)).astype(np.float32)
        x[rng.random(x.shape) < 0.1] = np.nan
        z = np.nan_to_num(x[:, m] + 0.5 * x[:, m + 1] * x[:, m + 2]) + rng.normal(size=x.shape[0])
        y = (z > 0.8).astype(np.int32)
        params = {"objective": "binary:logistic", "tree_method": "hist", "max_depth": DEPTH,
                  "nthread": 1, "seed": seed}
        boosters.append(xgb.train(params, xgb.DMatrix(x, y), num_boost_round=N_TREES))
    return boosters


def median_tick(fn, repeat: int) -> float:
    """Return the median wall time (s) of ``fn()`` over ``repeat`` calls, after 5 warm-up calls."""
    for _ in range(5):
        fn()
    times = np.empty(repeat)
    for i in range(repeat):
        t = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t
    return float(np.median(times))


def first_call_seconds(paths: list[str], cache_dir: str) -> tuple[float, float]:
    """Return (numba's start, the first predict_proba call) in seconds, in a fresh process
    with that numba cache folder."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", _FIRST_CALL.format(nf=N_FEATURES), *paths],
                         env=env, check=True, capture_output=True, text=True)
    start, first = out.stdout.strip().splitlines()[-1].split()
    return float(start), float(first)


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    boosters = train_models()
    for b in boosters:
        b.set_param({"nthread": 1})
    forest = StackedForest(boosters)
    rng = np.random.default_rng(1)

    print(f"{'pools':>6} {'3x inplace ms':>14} {'stacked ms':>11} {'speed-up':>9} {'max |diff|':>11}")
    for n in POOLS:
        blocks = []
        for _ in boosters:
            x = rng.normal(size=(n, N_FEATURES)).astype(np.float32)
            x[rng.random(x.shape) < 0.1] = np.nan
            blocks.append(x)

        def xgboost_tick(blocks=blocks):
            return [b.inplace_predict(x, validate_features=False)
                    for b, x in zip(boosters, blocks, strict=True)]

        def stacked_tick(blocks=blocks):
            return forest.predict_proba(blocks)

        diff = float(np.abs(np.asarray(xgboost_tick()) - stacked_tick()).max())
        a = median_tick(xgboost_tick, args.repeat)
        b = median_tick(stacked_tick, args.repeat)
        print(f"{n:>6} {1e3 * a:>14.3f} {1e3 * b:>11.3f} {a / b:>8.1f}x {diff:>11.2e}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, b in enumerate(boosters):
            paths.append(str(Path(tmp) / f"m{i}.ubj"))
            b.save_model(paths[-1])
        cache = str(Path(tmp) / "numba-cache")
        start1, compile_s = first_call_seconds(paths, cache)
        start2, cached_s = first_call_seconds(paths, cache)
    print(f"first tick in a new process (15 pools): empty cache (compile + write) "
          f"{compile_s:.2f} s; cached (load) {1e3 * cached_s:.1f} ms; besides, numba's own "
          f"start in any process {start1:.2f} / {start2:.2f} s")


if __name__ == "__main__":
    main()
