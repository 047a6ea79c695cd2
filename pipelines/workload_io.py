"""Write a workload as canonical files and summarise it (used by `sia ingest` and `sia generate`)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from sia.pipelines.inputs import Workload
from sia.pipelines.output import FolderLock, prepare_dir, write_parquet, write_text

JOBS_FILE = "jobs.parquet"
POOLS_FILE = "pools.parquet"
REPORT_FILE = "report.json"


def write_workload(workload: Workload, out: Path) -> dict[str, Path]:
    """Write ``out/jobs.parquet``, ``out/pools.parquet`` and ``out/report.json``; return their paths."""
    out = prepare_dir(out)
    paths = {"jobs": out / JOBS_FILE, "pools": out / POOLS_FILE, "report": out / REPORT_FILE}
    with FolderLock(out):  # each file through a temporary name: never a partial one
        write_parquet(workload.jobs, paths["jobs"])
        write_parquet(workload.pools, paths["pools"])
        write_text(paths["report"], workload.report.to_json() + "\n")
    return paths


def summary_lines(workload: Workload) -> list[str]:
    """Return a short human summary: rows read/kept, drops by kind, left out, pools, span (days)."""
    r = workload.report
    jobs = workload.jobs
    lines = [f"source: {workload.source}",
             f"rows read: {r.rows_read:,}   kept: {r.rows_kept:,}   dropped: {r.rows_dropped:,}"]
    if r.dropped:
        lines.append("  dropped by kind: " + ", ".join(f"{k} {v:,}" for k, v in r.dropped.items()))
    if r.left_out:
        lines.append("  left out: " + ", ".join(f"{k} {v:,}" for k, v in r.left_out.items()))
    span_days = 0.0
    if jobs.height:
        span_days = float(jobs["submit_time"].max() - jobs["submit_time"].min()) / 86_400.0
    gpus = int(workload.pools["quota_gpus"].sum()) if workload.pools.height else 0
    lines.append(f"pools: {workload.pools.height} ({gpus:,} GPUs in quotas)   "
                 f"span: {span_days:.2f} days" + (f"   first submit: {r.first_submit}"
                                                   if r.first_submit else ""))
    lines.extend(f"  {n}" for n in r.notes)
    lines.extend(f"  warning: {w}" for w in r.warnings)
    gs = (jobs["duration"] * jobs["num_gpus"]).sum() / 3600.0 if jobs.height else 0.0
    lines.append(f"GPU-hours: {gs:,.0f}   widest job: "
                 f"{int(jobs['num_gpus'].max()) if jobs.height else 0} GPUs")
    return lines


def pools_table_text(pools: pl.DataFrame) -> str:
    """Return the pools table as compact text (one line per pool)."""
    cols = [c for c in ("pool", "quota_gpus", "target_load") if c in pools.columns]
    rows = []
    for r in pools.select(cols).iter_rows(named=True):
        load = f"  target load {r['target_load']:.3f}" if "target_load" in r else ""
        rows.append(f"  {r['pool']}: {r['quota_gpus']} GPUs{load}")
    return "\n".join(rows)
