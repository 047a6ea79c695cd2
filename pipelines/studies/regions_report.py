"""The region report of a `sia evaluate` sweep whose policies run on regions (README, regions).

:func:`region_summary` is what `sia evaluate` adds to a region replay's
summary (``regions``: demand-to-supply, routing, negative cache, data
plans). :func:`report` reads a finished sweep back (the replays in its
store) and writes, per experiment, ``regions.csv`` / ``regions.md`` (one row
per policy: mean JCT, queueing delay, demand-to-supply (``qr_``: queued plus
running GPUs over supply, hourly, a job waiting where it waited, in each queue
of a reservations replay for its time there, and with its whole wait at home or
where it ran beside it; ``day_``: work submitted per day; ``all_``:
over the whole replay), speedup and slowed jobs against the same policy on
home regions only, data moved, replicas, cache) and
``plots/demand_to_supply.png`` (each region's queued-plus-running demand
over its GPUs, hourly, one panel per policy).

`sia evaluate` writes it at the end of a sweep whose config has a
``regions:`` section. To write it again from a finished sweep:
``python -m sia.pipelines.studies.regions_report CONFIG.yaml --out DIR`` (the same
config and folder as ``sia evaluate``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from sia.data.errors import SiaError
from sia.data.units import DAY_S

SCALAR_FACTS = ("routed", "scan_passes", "scan_attempts", "scan_cache_hits", "scan_hit_rate",
                "scan_s_mean", "data_plans", "data_moved", "replicas_final", "share_moves",
                "share_gpus_moved", "ran_outside_home")


def region_summary(outcome: Any, regions_file: Any, pools: pl.DataFrame) -> dict[str, Any]:
    """``{"regions": {...}}``: the replay's demand-to-supply summary (per day), its supply per
    region and the global policy's scalar facts (routing, negative cache, data plans)."""
    from sia.scheduler.regions.metrics import demand_over_time, demand_to_supply, ratio_summary

    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    layout = regions_file.layout(quotas)
    supply = {r.name: int(r.gpus) for r in layout.regions}
    daily = ratio_summary(demand_to_supply(outcome.result, supply))
    reserved = "share_moves" in outcome.facts  # global reservations: jobs wait where they run
    hourly = ratio_summary(demand_over_time(outcome.result, supply, dict(regions_file.homes),
                                            queued_where_ran=reserved,
                                            moves=outcome.facts.get("queue_moves")),
                           period_s=3600.0)
    facts = {k: outcome.facts.get(k) for k in SCALAR_FACTS}
    return {"regions": {"supply_gpus": supply, "submitted_per_day": daily,
                        "queued_running_hourly": hourly, **facts}}


def policy_rows(results: dict[str, pl.DataFrame], facts: dict[str, dict], modes: dict[str, str],
                names: dict[str, str], supply: dict[str, int], homes: dict[str, str],
                warmup_s: float, fcfs: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per region policy: JCT and queueing (jobs after the warm-up), demand-to-supply,
    and against the same inner policy on home regions (``modes[label] == "home"``): mean
    speedup of JCT, its change of mean JCT and % of jobs slowed by more than a second; with
    ``fcfs`` (FCFS with home quotas: it shares nothing, so regions change nothing for it)
    also % of jobs slowed against it."""
    from sia.scheduler.regions.metrics import demand_over_time, demand_to_supply, ratio_summary

    home = {names[k]: k for k, m in modes.items() if m == "home"}
    rows = []
    for label, res in results.items():
        t0 = float(res["submit_time"].min())
        scored = res.filter(pl.col("submit_time") >= t0 + warmup_s)
        jct = (scored["end_time"] - scored["submit_time"]).to_numpy()
        wait = (scored["start_time"] - scored["submit_time"]).to_numpy()
        daily = ratio_summary(demand_to_supply(res, supply))
        hourly = ratio_summary(demand_over_time(res, supply, homes, queued_where_ran=(
            modes[label].startswith("reservations-")),
            moves=(facts.get(label) or {}).get("queue_moves")), period_s=3600.0)
        row = {"policy": label, "mode": modes[label], "jobs": scored.height,
               "mean_jct_h": float(jct.mean()) / 3600, "mean_wait_h": float(wait.mean()) / 3600,
               "qr_worst_over_avg": hourly["worst_over_avg_mean"],
               "qr_worst_over_avg_queued_home": ratio_summary(
                   demand_over_time(res, supply, homes), period_s=3600.0)["worst_over_avg_mean"],
               "qr_worst_over_avg_queued_where_ran": ratio_summary(
                   demand_over_time(res, supply, homes, queued_where_ran=True),
                   period_s=3600.0)["worst_over_avg_mean"],
               "qr_max_ratio": hourly["max_ratio"], "qr_spread": hourly["spread_mean"],
               "day_worst_over_avg": daily["worst_over_avg_mean"],
               "day_spread": daily["spread_mean"],
               "all_worst_over_avg": daily["overall_worst_over_avg"]}
        base = home.get(names[label])
        if base is not None:
            b = results[base].filter(pl.col("submit_time") >= t0 + warmup_s)
            both = scored.join(b.select("job_id", pl.col("end_time").alias("home_end")), on="job_id")
            mine = (both["end_time"] - both["submit_time"]).to_numpy()
            theirs = (both["home_end"] - both["submit_time"]).to_numpy()
            row["speedup_vs_home"] = float(np.mean(theirs / np.maximum(mine, 1e-9)))
            row["pct_slowed_vs_home"] = float(100 * np.mean(mine > theirs + 1.0))
            row["slowdown_vs_home_min"] = float(np.maximum(mine - theirs, 0).sum() / 60)
            row["jct_change_vs_home_pct"] = float(100 * (mine.mean() / theirs.mean() - 1))
        if fcfs is not None:
            both = scored.join(fcfs.select("job_id", pl.col("end_time").alias("fcfs_end")),
                               on="job_id")
            row["pct_slowed_vs_fcfs"] = float(100 * np.mean(
                both["end_time"].to_numpy() > both["fcfs_end"].to_numpy() + 1.0))
        f = facts.get(label) or {}
        row.update({k: f.get(k) for k in ("routed", "share_gpus_moved", "ran_outside_home",
                                            "data_moved", "replicas_final",
                                            "scan_attempts", "scan_cache_hits", "scan_hit_rate",
                                            "scan_s_mean")})
        rows.append(row)
    return pl.DataFrame(rows)


def ratio_plot(results: dict[str, pl.DataFrame], supply: dict[str, int], homes: dict[str, str],
               path: Path, title: str = "", modes: dict[str, str] | None = None,
               facts: dict[str, dict] | None = None) -> Path:
    """Each region's queued-plus-running demand over its GPUs, hourly (and the balanced
    ratio), one panel per policy; returns the PNG's path. Under global reservations
    (``modes[label]``) a job waits in each queue it was in (``facts[label]["queue_moves"]``),
    else in its home region."""
    from sia.pipelines.plots import _plt, _save
    from sia.scheduler.regions.metrics import demand_over_time

    plt = _plt()
    n = len(results)
    fig, axes = plt.subplots(n, 1, figsize=(8, 2.2 * n + 0.6), sharex=True, sharey=True,
                             layout="constrained",  # the title sits just above the panels
                             squeeze=False)
    for ax, (label, res) in zip(axes[:, 0], results.items(), strict=True):
        t = demand_over_time(res, supply, homes,
                             queued_where_ran=(modes or {}).get(label, "").startswith("reservations-"),
                             moves=((facts or {}).get(label) or {}).get("queue_moves"))
        day = (t["t_start"] - t["t_start"].min()).to_numpy() / DAY_S
        for i, region in enumerate(sorted(supply)):
            m = (t["region"] == region).to_numpy()
            ax.plot(day[m], t["ratio"].to_numpy()[m], color=f"C{i}", lw=0.9,
                    label=f"{region} ({supply[region]} GPUs)")
        first = (t["region"] == sorted(supply)[0]).to_numpy()
        ax.plot(day[first], t["balanced"].to_numpy()[first], color="k", ls=":", lw=1.0,
                label="balanced")
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_yticks([0, 0.5, 1, 2, 4, 8], ["0", "0.5", "1", "2", "4", "8"])
        ax.set_title(label, fontsize=9, loc="left")
        ax.set_ylabel("(queued + running)\n/ GPUs")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=4, loc="upper right")
    axes[-1, 0].set_xlabel("days since the replay's first submission")
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def report(config: Path, out: Path, cfg: Any = None, sweep: Any = None) -> list[Path]:
    """Write the region report of the finished sweep of ``config`` under ``out``; return the
    files written. ``sweep``: the :class:`~sia.pipelines.studies.evaluate.SweepResult` that just ran
    (its config, experiments and replays: nothing is read again); without it, ``cfg`` (the
    config as the sweep ran it, with its ``--set`` overrides; default: ``config`` read again)
    is planned again from the trace, as the stand-alone report does."""
    from sia.pipelines.engine import stored_outcome
    from sia.pipelines.studies import evaluate as ev

    if sweep is not None and sweep.config is not None:
        cfg, experiments = sweep.config, sweep.experiments
        by_exp: dict[str, list[Any]] = {}
        for spec in sweep.specs:
            by_exp.setdefault(spec.where[0], []).append(spec)
    else:
        cfg, experiments, by_exp = _replan(config, out, cfg)
    if cfg.regions is None:
        raise SiaError(f"{config}: no regions: section, nothing to report")
    written = []
    modes = {p.label: p.regions for p in cfg.policies if p.regions is not None}
    names = {p.label: p.name for p in cfg.policies}
    for exp in experiments:
        specs = by_exp.get(exp.exp_id, [])
        results, facts, fcfs = {}, {}, None
        for spec in specs:
            if spec.where[-1] in modes:
                outcome = stored_outcome(spec, out, command=f"sia evaluate {config}")
                results[spec.where[-1]] = outcome.result
                facts[spec.where[-1]] = outcome.facts
            elif spec.policy == "fcfs" and spec.regions is None:
                fcfs = stored_outcome(spec, out, command=f"sia evaluate {config}").result
        quotas = dict(zip(exp.pools["pool"], exp.pools["quota_gpus"], strict=True))
        layout = cfg.regions["file"].layout(quotas)
        supply = {r.name: int(r.gpus) for r in layout.regions}
        homes = {p: r for p, r in cfg.regions["file"].homes if p in quotas}
        table = policy_rows(results, facts, modes, names, supply, homes, cfg.warmup_days * DAY_S,
                            fcfs)
        folder = out / exp.exp_id
        from sia.pipelines.output import write_csv, write_text

        write_csv(table, folder / "regions.csv")
        write_text(folder / "regions.md", ev.markdown_table(table) + "\n")
        written += [folder / "regions.csv", folder / "regions.md",
                    ratio_plot(results, supply, homes, folder / "plots" / "demand_to_supply.png",
                               f"{cfg.name} {exp.exp_id}: (queued + running) demand over supply per region, hourly",
                               modes, facts)]
    return written


def _replan(config: Path, out: Path, cfg: Any) -> tuple[Any, list[Any], dict[str, list[Any]]]:
    """Return (the config with the trace's regions, its experiments, their replay specs by
    experiment id), planned again from the trace as the sweep planned them."""
    from sia.pipelines.inputs import jobs_before
    from sia.pipelines.studies import evaluate as ev
    from sia.pipelines.studies.experiment import load_config, with_trace_regions

    cfg = cfg if cfg is not None else load_config(config)
    if cfg.regions is None:
        raise SiaError(f"{config}: no regions: section, nothing to report")
    wl = ev.load_trace(cfg)
    cfg = with_trace_regions(cfg, wl.jobs, wl.source)
    jobs, experiments = ev.sweep_experiments(cfg, wl)
    predictors = None
    if cfg.needs_predictors():  # the models the sweep used, from the registry (never retrained)
        from dataclasses import replace

        registry = replace(cfg, predictors=replace(cfg.predictors, train="registry"))
        predictors = ev.prepare_predictors(registry, wl, out, lambda m: None)
    prior = jobs_before(wl.jobs, cfg.replay_start_day)  # as the sweep keys its replays
    return cfg, experiments, {exp.exp_id: ev.experiment_specs(cfg, exp, jobs, predictors, prior)
                              for exp in experiments}


def uneven_split(jobs: pl.DataFrame, quotas: dict[str, int], start_s: float, end_s: float,
                 regions: tuple[str, ...] = ("east", "central", "west")) -> dict[str, str]:
    """Pool -> region from the history in ``[start_s, end_s)`` only: pools ranked by their
    demand-to-quota ratio there (GPU-seconds submitted / (quota x span)), highest first,
    dealt into ``regions`` in equal runs, so the first region gets the pools that were the
    most loaded (uneven demand-to-supply, as MAST's regions)."""
    part = jobs.filter((pl.col("submit_time") >= start_s) & (pl.col("submit_time") < end_s))
    work = dict(part.group_by("pool").agg((pl.col("num_gpus") * pl.col("duration")).sum())
                .iter_rows())
    span = end_s - start_s
    ranked = sorted(quotas, key=lambda p: (-work.get(p, 0.0) / (quotas[p] * span), p))
    per = -(-len(ranked) // len(regions))
    return {p: regions[i // per] for i, p in enumerate(ranked)}


def main(argv: list[str] | None = None) -> int:
    """Command line: ``CONFIG --out DIR``; prints the tables and the files written."""
    parser = argparse.ArgumentParser(prog="python -m sia.pipelines.studies.regions_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="the sweep's output folder")
    args = parser.parse_args(argv)
    try:
        files = report(args.config, args.out)
    except SiaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for f in files:
        if f.suffix == ".md":
            print(f.read_text())
        print(f"wrote {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
