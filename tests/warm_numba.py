"""Fill the on-disk numba cache of the compiled kernels (SIA_VC's virtual clocks, the features'
galloping search, the stacked forest) by running each once on a small input.

A fresh clone has no cache, and both test workers of ``pytest -n 2`` used to compile the same
kernels at about the same time (SIA_VC's alone take about 40 s of CPU): tests/conftest.py
starts this script once, beside the workers, when a parallel run begins, so the workers
mostly load what it compiled. It checks nothing (the tests do); a kernel it does not reach, or
reaches after a worker, is compiled by the worker as before.
"""

from __future__ import annotations

import numpy as np


def main() -> None:
    """Replay SIA_VC on fungible GPUs and on cells, search, and evaluate a stacked forest."""
    from sia.data.synthetic import generate_workload
    from sia.features.incremental import search_sorted_needles
    from sia.scheduler.core.simulator import simulate
    from sia.scheduler.locality.config import LocalityConfig
    from sia.scheduler.locality.replay import simulate_cells
    from sia.scheduler.registry import make_policy

    jobs, pools = generate_workload("base", 0, days=0.5)
    pools = pools.select("pool", "quota_gpus")
    simulate(jobs, pools, make_policy("sia-vc"))
    loc = LocalityConfig()
    simulate_cells(jobs, pools, make_policy("sia-vc", locality=loc), loc)
    keys = np.arange(5, dtype=np.float64)
    for side in ("left", "right"):
        search_sorted_needles(keys, keys, side)
    _forest()


def _forest() -> None:
    from sia.models.forest import StackedForest
    from xgboost import XGBClassifier

    x = np.random.default_rng(0).random((64, 3)).astype(np.float32)
    model = XGBClassifier(n_estimators=2, max_depth=2).fit(x, x[:, 0] > 0.5)
    StackedForest([model.get_booster()]).predict_proba([x])


if __name__ == "__main__":
    main()
