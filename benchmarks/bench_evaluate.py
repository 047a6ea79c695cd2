"""Benchmark: the Figure 13 sweep (experiments/figure13.yaml) on local workers.

Runs the config with ``--experiments N`` (default 4, a scaled-down run) on a
local process pool of ``--workers`` (default 2) into a temporary folder with a
temporary MLflow store, then prints a table of measured figures: the fixed
costs (trace, on-the-fly training), the replays' wall time per policy (sum,
mean and max over experiments, measured on the workers), the sweep's wall
time, and the extrapolation of the wall time to the config's own number of
experiments (fixed cost + per-experiment cost x experiments, said as such).

    .venv/bin/python benchmarks/bench_evaluate.py [--experiments 4] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "experiments" / "figure13.yaml"))
    ap.add_argument("--experiments", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp / 'mlflow.db'}"
        os.environ["SIA_OUTPUT"] = str(tmp / "out")
        from sia.pipelines.executors import make_executor
        from sia.pipelines.studies import evaluate as ev
        from sia.pipelines.studies.experiment import load_config
        from sia.pipelines.tracking import EVALUATION_EXPERIMENT, setup_tracking

        full = load_config(args.config)
        cfg = replace(full, experiments=min(args.experiments, full.experiments))
        clock = time.perf_counter()
        setup_tracking(experiment=EVALUATION_EXPERIMENT)  # store creation, not a sweep cost
        store_s = time.perf_counter() - clock

        out = tmp / "res"
        out.mkdir()
        clock = time.perf_counter()
        wl = ev.load_trace(cfg)
        trace_s = time.perf_counter() - clock
        clock = time.perf_counter()
        ev.prepare_predictors(cfg, wl, out, print)  # the sweep reuses this training
        train_s = time.perf_counter() - clock
        executor = make_executor(args.workers)
        clock = time.perf_counter()
        try:
            result = ev.run_sweep(cfg, out, executor, progress=False)
        finally:
            executor.close()
        sweep_s = time.perf_counter() - clock

        per_policy: dict[str, list[float]] = {}
        for marker in out.glob("exp-*/*.done.json"):
            info = json.loads(marker.read_text())
            per_policy.setdefault(marker.name.removesuffix(".done.json"), []).append(info["wall_s"])
        n_full = full.experiments * len(full.pools_per_experiment) * len(full.quota_scale)
        n_run = cfg.experiments * len(cfg.pools_per_experiment) * len(cfg.quota_scale)

        def line(name: str, value: str) -> None:
            print(f"{name:<52}{value:>16}")

        print(f"\nbench_evaluate: {Path(args.config).name}, {n_run} of {n_full} experiments, "
              f"{args.workers} local workers, {os.cpu_count()} CPUs")
        line("figure", "value")
        line("MLflow SQLite store creation (s, not counted)", f"{store_s:.1f}")
        line("read the trace (s)", f"{trace_s:.1f}")
        line("train the predictors on the fly (s)", f"{train_s:.1f}")
        for label, v in sorted(per_policy.items()):
            line(f"replay {label} on a worker (s: mean / max)",
                 f"{sum(v) / len(v):.2f} / {max(v):.1f}")
        line("replays: sum of worker time (s)", f"{sum(sum(v) for v in per_policy.values()):.1f}")
        line(f"sweep of {n_run} experiments, wall (s)", f"{sweep_s:.1f}")
        line("  per experiment (s)", f"{sweep_s / n_run:.1f}")
        est = trace_s + train_s + sweep_s / n_run * n_full
        line(f"EXTRAPOLATED wall for all {n_full} experiments (s)", f"{est:.0f}")
        print(f"replays run: {len(result.ran)}")


if __name__ == "__main__":
    main()
