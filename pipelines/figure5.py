"""SIA Figure 5 reproduced: FCFS, SSF, gSSF, MaxMin, SIA_VC and the oracle on synthetic workloads.

For every (workload variant, seed, policy) the pipeline generates the
synthetic workload (SIA A.1 / C), replays it under FCFS (the baseline) and
under the policy, and computes the metrics against FCFS
(:func:`sia.scheduler.metrics.compare`): mean speedup, worst and total
slowdown (minutes), % of jobs slowed. Replays run on a local process pool
(or in-process with one worker). Outputs in the output directory:

* ``figure5.csv`` -- one row per (workload, seed, policy), with the oracle's
  solver status and gap where it applies;
* ``figure5_summary.csv`` -- per (workload, policy): median, min and max of
  each metric over the seeds;
* ``figure5.png`` -- three panels like the paper's Figure 5 (mean speedup,
  worst slowdown, total slowdown): per workload one bar per policy at the
  median, the whisker spanning the range over seeds.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from sia.data.errors import ConfigError
from sia.data.synthetic import VARIANTS, generate_workload
from sia.pipelines.executors import ProgressBar
from sia.pipelines.experiment import read_yaml
from sia.scheduler.metrics import compare
from sia.scheduler.registry import POLICIES, make_policy
from sia.scheduler.simulator import simulate

METRICS = (
    ("mean_speedup", "mean speedup (x)"),
    ("max_slowdown_min", "worst slowdown (min)"),
    ("total_slowdown_min", "total slowdown (min)"),
    ("pct_slowed", "% jobs slowed"),
)

_KEYS = {"workloads", "seeds", "policies", "days", "warmup_s", "tick_s", "oracle"}
_ORACLE_KEYS = {"step_s", "slots_per_duration", "time_limit_s", "solver", "threads", "beta",
                "warm_start"}


@dataclass(frozen=True)
class Figure5Config:
    """What to run: workload variants, seeds, policies, workload length and oracle options."""

    workloads: tuple[str, ...] = ("base", "more-queues", "higher-load")
    seeds: tuple[int, ...] = (0, 1, 2)
    policies: tuple[str, ...] = ("fcfs", "ssf", "gssf", "maxmin", "sia-vc", "oracle")
    days: float = 3.0
    warmup_s: float = 0.0
    tick_s: float = 300.0
    oracle: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Replay:
    """One replay to run: a workload variant, a seed and a policy."""

    workload: str
    seed: int
    policy: str
    config: Figure5Config

    @property
    def name(self) -> str:
        """Label for progress and errors."""
        return f"{self.workload}/seed {self.seed}/{self.policy}"


def load_figure5_config(path: Path | str) -> Figure5Config:
    """Return the :class:`Figure5Config` of a YAML file; ConfigError naming the file and key."""
    path = Path(path)
    raw = read_yaml(path)
    return parse_figure5_config(raw or {}, source=str(path))


def parse_figure5_config(raw: dict, source: str = "<dict>") -> Figure5Config:
    """Return a validated :class:`Figure5Config` from a mapping (ConfigError on bad keys/values)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of options at the top level")
    unknown = set(raw) - _KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {sorted(unknown)}; known: {sorted(_KEYS)}")
    d = Figure5Config()

    def seq(key: str, kind: type, default: tuple) -> tuple:
        value = raw.get(key, list(default))
        if not isinstance(value, list) or not value or not all(isinstance(v, kind) for v in value):
            raise ConfigError(f"{source}: {key!r} must be a non-empty list of {kind.__name__}")
        return tuple(value)

    workloads = seq("workloads", str, d.workloads)
    for w in workloads:
        if w not in VARIANTS:
            raise ConfigError(f"{source}: workloads: unknown variant {w!r}; known: {', '.join(VARIANTS)}")
    policies = seq("policies", str, d.policies)
    for p in policies:
        if p not in POLICIES:
            raise ConfigError(f"{source}: policies: unknown policy {p!r}; known: {', '.join(POLICIES)}")
    seeds = seq("seeds", int, d.seeds)
    nums = {}
    for key in ("days", "warmup_s", "tick_s"):
        v = raw.get(key, getattr(d, key))
        if not isinstance(v, int | float) or isinstance(v, bool) or v < 0 or (key != "warmup_s" and v == 0):
            raise ConfigError(f"{source}: {key!r} must be a positive number, got {v!r}")
        nums[key] = float(v)
    oracle = raw.get("oracle", {}) or {}
    if not isinstance(oracle, dict) or set(oracle) - _ORACLE_KEYS:
        raise ConfigError(f"{source}: 'oracle' must be a mapping with keys among {sorted(_ORACLE_KEYS)}")
    return Figure5Config(workloads, seeds, policies, nums["days"], nums["warmup_s"], nums["tick_s"],
                         dict(oracle))


@functools.lru_cache(maxsize=4)
def _workload_and_baseline(workload: str, seed: int, days: float, tick_s: float
                           ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, float]:
    """Return (jobs, pools, FCFS result, FCFS wall seconds), computed once per process.

    Every policy of a (workload, seed) is scored against the same FCFS replay.
    """
    jobs, pools = generate_workload(workload, seed, days=days)
    t0 = time.perf_counter()
    baseline = simulate(jobs, pools, make_policy("fcfs"), tick_s=tick_s)
    return jobs, pools, baseline, time.perf_counter() - t0


def run_replay(item: Replay) -> dict[str, Any]:
    """Run one replay; return its row of ``figure5.csv`` (metrics vs FCFS, timings, solver info)."""
    cfg = item.config
    jobs, pools, baseline, fcfs_s = _workload_and_baseline(item.workload, item.seed, cfg.days,
                                                           cfg.tick_s)
    options = cfg.oracle if item.policy == "oracle" else {}
    policy = make_policy(item.policy, **options)
    if item.policy == "fcfs":  # the baseline itself: same deterministic replay, not run twice
        result, elapsed = baseline, fcfs_s
    else:
        t0 = time.perf_counter()
        result = simulate(jobs, pools, policy, tick_s=cfg.tick_s)
        elapsed = time.perf_counter() - t0
    _, summary = compare(result, baseline, warmup_s=cfg.warmup_s, pools=pools)
    row: dict[str, Any] = {
        "workload": item.workload, "seed": item.seed, "policy": item.policy,
        "n_jobs": summary["n_jobs"],
        **{k: summary[k] for k, _ in METRICS},
        "mean_queue_delay_min": (summary["mean_queue_delay_s"] or 0.0) / 60.0,
        "runtime_s": elapsed,
        "oracle_status": None, "oracle_gap": None, "oracle_delay_h": None, "fcfs_delay_h": None,
    }
    res = getattr(policy, "result", None)
    if res is not None:
        row.update(oracle_status=res.status, oracle_gap=res.gap,
                   oracle_delay_h=res.objective_s / 3600, fcfs_delay_h=res.fcfs_delay_s / 3600)
    return row


def run_figure5(cfg: Figure5Config, out_dir: Path | str, *, workers: int | None = None,
                progress: bool = True) -> pl.DataFrame:
    """Run every replay of ``cfg``; write figure5.csv, figure5_summary.csv and figure5.png.

    Returns the per-replay table (one row per workload, seed and policy).
    """
    from sia.pipelines.executors import make_executor

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    items = [Replay(w, s, p, cfg) for w in cfg.workloads for s in cfg.seeds for p in cfg.policies]
    # the slow oracle replays first, so the pool stays busy with the short ones at the end
    items.sort(key=lambda r: (r.policy != "oracle", r.workload, r.seed, r.policy))
    executor = make_executor(workers)
    rows = []
    try:
        with ProgressBar(progress, len(items), f"figure5 on {executor.description}") as advance:
            for item, row in executor.run(run_replay, items):
                rows.append(row)
                advance(item.name, row["runtime_s"])
    finally:
        executor.close()
    order = {p: i for i, p in enumerate(cfg.policies)}
    worder = {w: i for i, w in enumerate(cfg.workloads)}
    table = pl.DataFrame(rows, infer_schema_length=None).sort(
        pl.col("workload").replace_strict(worder), "seed", pl.col("policy").replace_strict(order))
    table.write_csv(out / "figure5.csv")
    summary = summarize(table)
    summary.write_csv(out / "figure5_summary.csv")
    plot_figure5(summary, out / "figure5.png", cfg.workloads, cfg.policies)
    return table


def summarize(table: pl.DataFrame) -> pl.DataFrame:
    """Return per (workload, policy) the median, min and max of each metric over seeds."""
    aggs = []
    for k, _ in METRICS:
        aggs += [pl.col(k).median().alias(f"{k}_median"), pl.col(k).min().alias(f"{k}_min"),
                 pl.col(k).max().alias(f"{k}_max")]
    aggs.append(pl.col("oracle_gap").max().alias("oracle_gap_max"))
    return table.group_by("workload", "policy", maintain_order=True).agg(
        pl.len().alias("seeds"), *aggs)


def plot_figure5(summary: pl.DataFrame, path: Path, workloads, policies) -> Path:
    """Draw the three panels of Figure 5 (bars at the median, whiskers over the seeds); return path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    width = 0.8 / len(policies)
    colors = plt.get_cmap("tab10")
    for ax, (metric, label) in zip(axes, METRICS[:3], strict=True):
        for i, pol in enumerate(policies):
            part = summary.filter(pl.col("policy") == pol)
            lookup = {r["workload"]: r for r in part.iter_rows(named=True)}
            xs, med, lo, hi = [], [], [], []
            for k, w in enumerate(workloads):
                r = lookup.get(w)
                if r is None or r[f"{metric}_median"] is None:
                    continue
                xs.append(k - 0.4 + width * (i + 0.5))
                med.append(r[f"{metric}_median"])
                lo.append(r[f"{metric}_median"] - r[f"{metric}_min"])
                hi.append(r[f"{metric}_max"] - r[f"{metric}_median"])
            ax.bar(xs, med, width, color=colors(i), label=pol,
                   yerr=np.array([lo, hi]) if xs else None, capsize=2)
        if metric != "mean_speedup":  # SSF's slowdowns dwarf the rest: symlog keeps 0 at 0
            ax.set_yscale("symlog", linthresh=1.0)
        ax.set_xticks(range(len(workloads)), workloads)
        ax.set_ylabel(label)
        ax.set_title(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("SIA Figure 5: speedup and slowdowns vs FCFS (bar = median over seeds, "
                 "whisker = range)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
