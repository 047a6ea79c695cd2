"""Every slowdown explained: the loan that delayed each slowed job, and why (issue 32, item 5).

For a replay of a policy that records its loans (SIA and its variants:
``facts["loans"]``, :meth:`sia.scheduler.core.served.ServedPredictions.loans`)
against the FCFS baseline, :func:`explain` runs
:func:`sia.scheduler.core.attribution.attribute` and returns, per job, the
columns of :data:`ATTRIBUTION_COLUMNS` (null where the job was not slowed):

- ``cause``: ``duration`` (the loan ran past the window it was lent in),
  ``arrival`` (WillJobsArrive said no for a pool whose jobs then came),
  ``load`` (it said yes, NewLoadEstimate was below what came), ``preempted``,
  ``placement`` or ``unexplained`` (see the attribution module);
- ``delayed_by``: the job id of the loan that delayed it, ``loan_pool``: that
  job's pool (the borrower; the slowed job's ``pool`` lent the GPUs);
- ``cascade_depth``: 0 when the loan delayed the job directly, d when the job
  waited behind d of its pool's delayed jobs (it inherits their loan and
  cause); ``cascade_from``: the job it waited behind;
- ``missed_pool``: the pool whose arrivals the forecast missed (arrival, load);
- ``overrun_held``: loans past their window among those holding GPUs then.

:func:`causes_summary` sums the slowed jobs and their slowdown minutes per
cause and per pool and cause (``summary["slowdown_causes"]``);
:func:`cause_metrics` names them for MLflow (``slowdown_cause/duration_min``
...); :func:`write_sweep` writes a sweep's ``slowdown_causes.csv`` and its
section of ``summary.md``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from sia.data.errors import ConfigError, SiaError
from sia.pipelines.engine.sched import SLOWED_AFTER_S
from sia.pipelines.engine.spec import ReplayOutcome
from sia.scheduler.core.attribution import CAUSES, JobTimes, attribute, loans_from_record

#: Per-job columns added to the results of a policy that lends (null where not slowed).
ATTRIBUTION_COLUMNS = ("cause", "delayed_by", "loan_pool", "cascade_depth", "cascade_from",
                       "missed_pool", "overrun_held")

#: Why a stored replay has no attribution: it was made before loans were recorded.
NO_LOANS = ("the replay was stored without its loans (before slowdown attribution): remove "
            "its .parquet and .done.json to replay it")


def lends(outcome: ReplayOutcome) -> bool:
    """Return whether ``outcome`` is a replay of a policy that records predictions as served
    (SIA-like: the policies whose slowdowns have a loan to explain them)."""
    return "served" in outcome.facts or "loans" in outcome.facts


def explain(outcome: ReplayOutcome, baseline: ReplayOutcome | pl.DataFrame,
            pools: pl.DataFrame) -> pl.DataFrame | None:
    """Return per job (``job_id`` and :data:`ATTRIBUTION_COLUMNS`, in ``outcome.result``'s
    order) why it was slowed against ``baseline`` (FCFS on the same jobs and ``pools``:
    pool, quota_gpus), or None when the policy records no loans."""
    if "loans" not in outcome.facts:
        return None
    res = outcome.result
    base = baseline.result if isinstance(baseline, ReplayOutcome) else baseline
    # the simulator's arrival order (sia.scheduler.core.simulator.build_trace)
    order = res.select(pl.arg_sort_by(["submit_time", "job_id"], maintain_order=True)
                       ).to_series().to_numpy()
    r = res[order]
    b = r.select("job_id").join(
        base.select("job_id", pl.col("start_time").alias("_sb"), pl.col("end_time").alias("_eb")),
        on="job_id", how="left", maintain_order="left")
    if b["_sb"].is_null().any():
        jid = b.filter(pl.col("_sb").is_null())["job_id"][0]
        raise ConfigError(f"job {jid!r} is in the result but not in the baseline")
    names = sorted(pools["pool"].to_list())
    index = {p: i for i, p in enumerate(names)}
    quota = dict(zip(pools["pool"].to_list(), pools["quota_gpus"].to_list(), strict=True))
    ids = r["job_id"].cast(pl.String).to_list()
    jobs = JobTimes(
        pool=np.array([index[p] for p in r["pool"].to_list()], dtype=np.int64),
        submit=r["submit_time"].cast(pl.Float64).to_numpy(),
        duration=r["duration"].cast(pl.Float64).to_numpy(),
        num_gpus=r["num_gpus"].cast(pl.Int64).to_numpy(),
        start=r["start_time"].to_numpy(), end=r["end_time"].to_numpy(),
        opportunistic=r["opportunistic"].to_numpy().astype(bool),
        start_base=b["_sb"].to_numpy(), end_base=b["_eb"].to_numpy())
    loans = loans_from_record(outcome.facts["loans"], ids, names)
    a = attribute(jobs, np.array([quota[p] for p in names], dtype=np.int64), loans,
                  slowed_after_s=SLOWED_AFTER_S)

    def job_or_none(idx: np.ndarray) -> list[str | None]:
        return [ids[i] if i >= 0 else None for i in idx.tolist()]

    slowed = a.slowed
    pool_names = r["pool"].cast(pl.String).to_list()
    frame = pl.DataFrame({
        "job_id": r["job_id"],
        "cause": pl.Series(a.cause_names(), dtype=pl.String),
        "delayed_by": pl.Series(job_or_none(a.delayed_by), dtype=pl.String),
        "loan_pool": pl.Series([pool_names[i] if i >= 0 else None for i in a.delayed_by.tolist()],
                               dtype=pl.String),
        "cascade_depth": pl.Series(np.where(slowed, a.depth, 0), dtype=pl.Int64),
        "cascade_from": pl.Series(job_or_none(a.parent), dtype=pl.String),
        "missed_pool": pl.Series([names[q] if q >= 0 else None for q in a.missed_pool.tolist()],
                                 dtype=pl.String),
        "overrun_held": pl.Series(a.overrun_held, dtype=pl.Int64),
    }).with_columns(
        pl.when(pl.Series(slowed)).then(pl.col(c)).otherwise(None).alias(c)
        for c in ("cascade_depth", "overrun_held"))
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return frame[inverse]


def causes_summary(per_job: pl.DataFrame) -> dict[str, Any]:
    """Return the slowed jobs and their slowdown minutes of ``per_job`` (per-job metrics with
    :data:`ATTRIBUTION_COLUMNS`) per cause, per pool and cause, and the cascades (JSON-ready).

    ``by_cause[c]``: ``jobs``, ``slowdown_min``, and of those ``cascade_jobs`` /
    ``cascade_min``; ``cascades``: ``jobs``, ``slowdown_min``, ``max_depth``, ``by_depth``
    (jobs per depth); ``by_pool[pool][c]``: ``jobs``, ``slowdown_min`` (the slowed jobs'
    pools: the lenders); ``by_loan_pool[pool]``: ``jobs``, ``slowdown_min``, ``loans`` (the
    named loans' pools: the borrowers); ``loans``: the distinct loans named; ``with_overrun_held``: slowed jobs blocked while a loan past its
    window held GPUs. Every cause of :data:`CAUSES` is listed (zeros included).
    """
    slowed = per_job.filter(pl.col("slowed"))
    unnamed = slowed.filter(pl.col("cause").is_null()).height
    if unnamed:  # every slowed job has a cause: a missing one is a bug, never a silent drop
        raise SiaError(f"{unnamed} slowed job(s) without a cause")
    by_cause = {}
    for c in CAUSES:
        part = slowed.filter(pl.col("cause") == c)
        casc = part.filter(pl.col("cascade_depth") > 0)
        by_cause[c] = {"jobs": part.height, "slowdown_min": float(part["slowdown_min"].sum()),
                       "cascade_jobs": casc.height,
                       "cascade_min": float(casc["slowdown_min"].sum())}
    casc = slowed.filter(pl.col("cascade_depth") > 0)
    depths = casc["cascade_depth"].value_counts().sort("cascade_depth")
    by_pool: dict[str, dict] = {}
    for (pool, cause), part in sorted(slowed.group_by(["pool", "cause"]),
                                      key=lambda kv: (str(kv[0][0]), CAUSES.index(kv[0][1]))):
        by_pool.setdefault(str(pool), {})[cause] = {
            "jobs": part.height, "slowdown_min": float(part["slowdown_min"].sum())}
    by_loan_pool = {
        str(pool): {"jobs": part.height, "slowdown_min": float(part["slowdown_min"].sum()),
                    "loans": part["delayed_by"].n_unique()}
        for (pool,), part in sorted(slowed.filter(pl.col("loan_pool").is_not_null())
                                    .group_by("loan_pool"), key=lambda kv: str(kv[0][0]))}
    return {
        "slowed": slowed.height,
        "slowdown_min": float(slowed["slowdown_min"].sum()),
        "by_cause": by_cause,
        "cascades": {"jobs": casc.height, "slowdown_min": float(casc["slowdown_min"].sum()),
                     "max_depth": int(casc["cascade_depth"].max() or 0),
                     "by_depth": {str(d): n for d, n in depths.iter_rows()}},
        "by_pool": by_pool,
        "by_loan_pool": by_loan_pool,
        "loans": slowed["delayed_by"].drop_nulls().n_unique(),
        "with_overrun_held": slowed.filter(pl.col("overrun_held") > 0).height,
    }


def attach(per_job: pl.DataFrame, summary: dict[str, Any], outcome: ReplayOutcome,
           baseline: ReplayOutcome | pl.DataFrame, pools: pl.DataFrame) -> pl.DataFrame:
    """Return ``per_job`` (scored against FCFS) with :data:`ATTRIBUTION_COLUMNS` and put
    :func:`causes_summary` in ``summary["slowdown_causes"]``, for a policy that lends;
    ``per_job`` unchanged otherwise (a lending policy's replay stored without its loans gets
    ``summary["slowdown_causes"] = {"error": ...}``)."""
    explained = _summarized(per_job, summary, outcome, baseline, pools)
    return per_job if explained is None else _with(per_job, explained)


def attach_replay(outcome: ReplayOutcome, baseline: ReplayOutcome, pools: pl.DataFrame,
                  per_job: pl.DataFrame, summary: dict[str, Any]) -> ReplayOutcome:
    """`sia replay`: return ``outcome`` with :data:`ATTRIBUTION_COLUMNS` in its result (every
    job, warm-up included) and the counted jobs' :func:`causes_summary` in ``summary``."""
    explained = _summarized(per_job, summary, outcome, baseline, pools)
    return outcome if explained is None else replace(
        outcome, result=_with(outcome.result, explained))


def _with(jobs: pl.DataFrame, explained: pl.DataFrame) -> pl.DataFrame:
    """Return ``jobs`` with the attribution columns of ``explained`` (by job id, same order)."""
    return jobs.join(explained, on="job_id", how="left", maintain_order="left")


def _summarized(per_job: pl.DataFrame, summary: dict[str, Any], outcome: ReplayOutcome,
                baseline: ReplayOutcome | pl.DataFrame, pools: pl.DataFrame
                ) -> pl.DataFrame | None:
    """Return :func:`explain`'s table for a lending policy's replay, after putting the counted
    jobs' (``per_job``) :func:`causes_summary` in ``summary["slowdown_causes"]``; None for a
    policy that does not lend, or (with an error in the summary) a replay stored without its
    loans."""
    if not lends(outcome):
        return None
    explained = explain(outcome, baseline, pools)
    if explained is None:
        summary["slowdown_causes"] = {"error": NO_LOANS}
        return None
    summary["slowdown_causes"] = causes_summary(_with(per_job, explained))
    return explained


def cause_metrics(causes: dict[str, Any] | None) -> dict[str, float]:
    """Return ``summary["slowdown_causes"]`` as MLflow metrics: ``slowdown_cause/<cause>_jobs``
    and ``_min`` per cause, ``slowdown_cause/cascade_jobs``, ``cascade_min``, ``cascade_max_depth``
    ({} without an attribution)."""
    if not causes or "by_cause" not in causes:
        return {}
    out = {}
    for c, v in causes["by_cause"].items():
        out[f"slowdown_cause/{c}_jobs"] = float(v["jobs"])
        out[f"slowdown_cause/{c}_min"] = float(v["slowdown_min"])
    casc = causes["cascades"]
    out["slowdown_cause/cascade_jobs"] = float(casc["jobs"])
    out["slowdown_cause/cascade_min"] = float(casc["slowdown_min"])
    out["slowdown_cause/cascade_max_depth"] = float(casc["max_depth"])
    return out


def table_rows(causes: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Rows for `sia replay`'s table: slowed jobs (minutes) per cause, and the cascades."""
    if not causes:
        return []
    if "by_cause" not in causes:
        return [("slowdown causes", causes.get("error", "-"))]
    parts = [f"{c} {v['jobs']} ({v['slowdown_min']:.0f})"
             for c, v in causes["by_cause"].items() if v["jobs"]]
    casc = causes["cascades"]
    return [("slowed jobs by cause (min)", ", ".join(parts) or "none"),
            ("  of which cascades (max depth)",
             f"{casc['jobs']} ({casc['slowdown_min']:.0f} min, depth {casc['max_depth']})")]


def sweep_causes(per_job: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Return one row per (group, exp_id, policy, pool, loan_pool, cause) of the slowed jobs
    of a sweep (``per_job``: per group, the per-job metrics of every policy with ``exp_id``
    and ``policy``; ``pool`` lent, ``loan_pool`` borrowed, null without a loan): ``jobs``,
    ``slowdown_min``, ``cascade_jobs``, ``cascade_min``, ``max_depth``; empty when no policy
    was attributed."""
    frames = []
    for group, jobs in per_job.items():
        if "cause" not in jobs.columns:
            continue
        slowed = jobs.filter(pl.col("slowed") & pl.col("cause").is_not_null())
        frames.append(slowed.group_by(["exp_id", "policy", "pool", "loan_pool", "cause"]).agg(
            pl.len().alias("jobs"), pl.col("slowdown_min").sum(),
            (pl.col("cascade_depth") > 0).sum().alias("cascade_jobs"),
            pl.col("slowdown_min").filter(pl.col("cascade_depth") > 0).sum()
            .alias("cascade_min"),
            pl.col("cascade_depth").max().alias("max_depth"),
        ).with_columns(pl.lit(group).alias("group")))
    if not frames:
        return pl.DataFrame()
    return (pl.concat(frames, how="vertical_relaxed")
            .select("group", "exp_id", "policy", "pool", "loan_pool", "cause", "jobs",
                    "slowdown_min", "cascade_jobs", "cascade_min", "max_depth")
            .sort("group", "exp_id", "policy", "pool", "loan_pool", "cause", nulls_last=True))


def write_sweep(out_dir: Path, per_job: dict[str, pl.DataFrame]) -> list[Path]:
    """Write ``slowdown_causes.csv`` (:func:`sweep_causes`) and append the causes summed per
    (group, policy) and per (group, policy, pool) to ``summary.md``; return the files written
    ([] when no policy was attributed)."""
    from sia.pipelines.output import write_csv, write_text
    from sia.pipelines.studies.evaluate import markdown_table

    rows = sweep_causes(per_job)
    if not rows.height:
        return []
    path = Path(out_dir) / "slowdown_causes.csv"
    write_csv(rows, path)
    sums = [pl.col("jobs").sum(), pl.col("slowdown_min").sum(), pl.col("cascade_jobs").sum(),
            pl.col("cascade_min").sum(), pl.col("max_depth").max()]
    by_cause = (rows.group_by("group", "policy", "cause")
                .agg(pl.col("exp_id").n_unique().alias("experiments"), *sums)
                .sort("group", "policy", "cause"))
    by_pool = (rows.group_by("group", "policy", "pool", "cause").agg(*sums)
               .sort("group", "policy", "pool", "cause"))
    by_loan_pool = (rows.group_by("group", "policy", "loan_pool", "cause")
                    .agg(pl.col("exp_id").n_unique().alias("experiments"), *sums)
                    .sort("group", "policy", "loan_pool", "cause", nulls_last=True))
    md = ["## Why jobs were slowed (lending policies)", "",
          "Each slowed job is attributed to the loan that delayed it and the prediction that "
          "was wrong (`cause`: duration = the loan ran past its window; arrival / load = the "
          "forecast the loan was lent against missed a pool's arrivals; a cascade waited behind "
          "its pool's delayed jobs and inherits their cause); per job in "
          "`exp-XXX/per_job.parquet`, per experiment, pool and cause in `slowdown_causes.csv`.",
          "", markdown_table(by_cause), "",
          "Per pool of the slowed jobs (the lenders; summed over experiments):", "",
          markdown_table(by_pool), "",
          "Per pool of the loans named (the borrowers; summed over experiments):", "",
          markdown_table(by_loan_pool), ""]
    summary = Path(out_dir) / "summary.md"
    text = summary.read_text() if summary.exists() else ""
    write_text(summary, text + ("\n" if text and not text.endswith("\n") else "")
               + "\n".join(md))
    return [path]
