"""SIA Figure 5 reproduced: FCFS, SSF, gSSF, MaxMin, SIA_VC and the oracle on synthetic workloads.

For every (workload variant, seed, policy) the pipeline generates the
synthetic workload (SIA A.1 / C), replays it under FCFS (the baseline) and
under the policy, and computes the metrics against FCFS
(:func:`sia.scheduler.core.metrics.compare`): mean speedup, worst and total
slowdown (minutes), % of jobs slowed. Replays run on a local process pool
(or in-process with one worker). Outputs in the output directory:

* ``replays/WORKLOAD/seed-S/POLICY.parquet`` -- each replay's per-job result
  (the columns of `sia replay`'s jobs.parquet), FCFS included, with its
  completion marker ``POLICY.done.json`` (the replay's key, row count, wall
  time and the oracle's solver facts). Re-running on the same directory
  reuses every finished replay whose key (workload, seed, days, tick,
  policy and its options) matches and redoes the rest
  (:mod:`sia.pipelines.engine`); the tables and figure are always
  recomputed from these files;
* ``config.json`` -- the config of the last run;
* ``figure5.csv`` -- one row per (workload, seed, policy), with the oracle's
  solver status and gap where it applies;
* ``figure5_summary.csv`` -- per (workload, policy): median, min and max of
  each metric over the seeds;
* ``figure5.png`` -- three panels like the paper's Figure 5 (mean speedup,
  worst slowdown, total slowdown): per workload one bar per policy at the
  median, the whisker spanning the range over seeds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from sia.data.errors import ConfigError
from sia.data.synthetic import VARIANTS
from sia.pipelines.engine import (
    ReplayOutcome,
    ReplaySpec,
    SyntheticWorkload,
    execute,
    require_scored,
    score,
    stored_outcome,
)
from sia.pipelines.engine.sched import POLICIES
from sia.pipelines.executors import Executor
from sia.pipelines.output import save_figure, write_csv
from sia.pipelines.studies.study_schema import load_study

METRICS = (
    ("mean_speedup", "mean speedup (x)"),
    ("max_slowdown_min", "worst slowdown (min)"),
    ("total_slowdown_min", "total slowdown (min)"),
    ("pct_slowed", "% jobs slowed"),
)

#: What the oracle reports about its replay (:func:`sia.pipelines.engine.policy_facts`).
ORACLE_FACTS = ("oracle_status", "oracle_gap", "oracle_delay_h", "fcfs_delay_h",
                "oracle_reproducible")

_KEYS = {"workloads", "seeds", "policies", "days", "warmup_s", "tick_s", "oracle"}
_ORACLE_KEYS = {"step_s", "slots_per_duration", "time_limit_s", "work_limit", "solver",
                "threads", "beta", "warm_start"}


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


def load_figure5_config(path: Path | str, overrides: list[str] | None = None) -> Figure5Config:
    """Return the :class:`Figure5Config` of a YAML file (``overrides``: `--set KEY=VALUE` items);
    ConfigError naming the file and key (schema errors all at once)."""
    path = Path(path)
    return load_study(path, "figure5", lambda raw: parse_figure5_config(raw, source=str(path)),
                      overrides)


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


def replay_spec(cfg: Figure5Config, workload: str, seed: int, policy: str) -> ReplaySpec:
    """Return the spec of one replay: ``policy`` on (``workload``, ``seed``), stored as
    ``replays/WORKLOAD/seed-S/POLICY`` (the oracle gets the config's oracle options)."""
    return ReplaySpec(SyntheticWorkload(workload, seed, cfg.days), policy,
                      options=dict(cfg.oracle) if policy == "oracle" else {},
                      tick_s=cfg.tick_s, where=("replays", workload, f"seed-{seed}", policy),
                      title=f"{workload}/seed {seed}/{policy}")


@dataclass
class Figure5Run:
    """What :func:`run_figure5` produced: the per-replay table and which replays ran or were reused."""

    table: pl.DataFrame
    ran: list[str] = field(default_factory=list)  # replays run now (ReplaySpec.name)
    reused: list[str] = field(default_factory=list)  # finished replays found on disk
    stale: list[str] = field(default_factory=list)  # on disk, made with other settings: redone
    wall_s: float = 0.0


def score_row(cfg: Figure5Config, workload: str, seed: int, policy: str,
              outcome: ReplayOutcome, baseline: ReplayOutcome) -> dict[str, Any]:
    """Return the replay's row of ``figure5.csv``: metrics vs FCFS, wall time, oracle facts."""
    _, summary = score(outcome, baseline, cfg.warmup_s)
    return {
        "workload": workload, "seed": seed, "policy": policy,
        "n_jobs": summary["n_jobs"],
        **{k: summary[k] for k, _ in METRICS},
        "mean_queue_delay_min": (summary["mean_queue_delay_s"] or 0.0) / 60.0,
        "runtime_s": outcome.wall_s,
        **{k: outcome.facts.get(k) for k in ORACLE_FACTS},
    }


def plan(cfg: Figure5Config) -> list[ReplaySpec]:
    """Return every replay of ``cfg``: each (workload, seed) under FCFS (the baseline) and each policy.

    The slow oracle replays come first, so a process pool stays busy with the
    short ones at the end.
    """
    items = [(w, s, p) for w in cfg.workloads for s in cfg.seeds
             for p in dict.fromkeys(("fcfs", *cfg.policies))]
    items.sort(key=lambda x: (x[2] != "oracle", x[0], x[1], x[2]))
    return [replay_spec(cfg, *x) for x in items]


def _config_dict(cfg: Figure5Config) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(cfg)))


def run_figure5(cfg: Figure5Config, out_dir: Path | str, *, workers: int | None = None,
                progress: bool = True, executor: Executor | None = None,
                say: Callable[[str], None] | None = None, reuse: bool = True) -> Figure5Run:
    """Run (or resume) every replay of ``cfg``; write the per-job Parquet files and the outputs.

    Each replay's per-job result goes to ``out_dir/replays/WORKLOAD/seed-S/
    POLICY.parquet`` with a completion marker (:mod:`sia.pipelines.engine`);
    replays already finished there with the same key are reused, those made
    with other settings are redone (``say`` reports both). The table, the
    summary and the figure are then recomputed from the files. The key does
    not see code changes: after changing a policy, pass ``reuse=False``
    (``--redo``) to replay everything. ``executor`` overrides ``workers``
    (and is not closed here).
    """
    from sia.pipelines.executors import make_executor

    clock = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    own = executor is None
    executor = executor or make_executor(workers)
    try:
        done = execute(plan(cfg), out, executor, reuse=reuse, progress=progress,
                       label="figure5", config=_config_dict(cfg), say=say)
    finally:
        if own:
            executor.close()
    run = Figure5Run(pl.DataFrame(), ran=done.ran, reused=done.reused, stale=done.stale)
    run.table = read_table(cfg, out)
    write_csv(run.table, out / "figure5.csv")
    summary = summarize(run.table)
    write_csv(summary, out / "figure5_summary.csv")
    plot_figure5(summary, out / "figure5.png", cfg.workloads, cfg.policies)
    run.wall_s = time.perf_counter() - clock
    require_scored(int(run.table["n_jobs"].sum()) if run.table.height else 0, str(out_dir),
                   f"warmup_s {cfg.warmup_s:g}")
    return run


def read_table(cfg: Figure5Config, out_dir: Path) -> pl.DataFrame:
    """Return the per-replay table of ``cfg`` scored from the finished replays in ``out_dir``.

    One row per (workload, seed, policy) in the config's order; each policy's
    per-job Parquet is compared with the same (workload, seed)'s FCFS one.
    Raises ConfigError naming the first replay that is not finished.
    """
    rows = []
    for w in cfg.workloads:
        for s in cfg.seeds:
            got = {p: stored_outcome(replay_spec(cfg, w, s, p), out_dir, command="sia figure5")
                   for p in dict.fromkeys(("fcfs", *cfg.policies))}
            rows += [score_row(cfg, w, s, p, got[p], got["fcfs"]) for p in cfg.policies]
    return pl.DataFrame(rows, infer_schema_length=None)


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
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path
