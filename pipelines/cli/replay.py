"""`sia replay`: replay a trace (or a synthetic workload) under a policy and score it against FCFS."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from sia.data.errors import ConfigError
from sia.data.units import DAY_S
from sia.pipelines import inputs
from sia.pipelines.studies.experiment import DEFAULT_WINDOWS_MIN
from sia.scheduler.registry import POLICY_NAMES

# The replay engine (the scheduler's solvers, the predictors, MLflow) is imported where it
# is used, so that other commands and --help do not pay for it.
if TYPE_CHECKING:
    import polars as pl
    from sia.pipelines.engine import RegistryPredictors, ReplayOutcome, ReplaySpec

#: Replays with at least this many jobs show a progress bar.
PROGRESS_FROM_JOBS = 20_000

HELP = """Replay a workload under a scheduling policy and compare it with FCFS.

The workload is a trace (any format `sia ingest` reads, or a canonical
folder) or a synthetic SIA workload (the default). The policy and FCFS (the
no-sharing baseline) are both replayed on the same jobs and quotas; metrics
count only jobs submitted after the warm-up.

Writes DIR/jobs.parquet (job_id, pool, submit_time, duration, num_gpus,
start_time, end_time, opportunistic; durations after --speedup),
DIR/pools.parquet (the quotas used) and DIR/summary.json (the metrics), and
logs an MLflow run in the 'sia-evaluations' experiment (parameters: policy,
workload, model versions ...; metrics named as `sia evaluate`'s policy runs;
--no-mlflow: files only).

The policies that take a forecaster (their declared needs: SIA, its random
strawmen sia-random and sia-random-both, its attribution ablations
sia-perfect-durations and sia-perfect-arrivals, sia-learned) run on the learned
predictors: loaded from the MLflow registry by --alias (default
champion; store: $MLFLOW_TRACKING_URI or <output root>/mlflow.db), or, with
--train, trained and registered first on the period before the replay
(--replay-start-day; by default the replay starts where the default
--train-warmup-days + --train-days + --val-days split ends).
--replay-start-day / --replay-end-day cut the replay to a window of days
since the trace start for any policy.

\b
Examples:
  sia replay --policy maxmin --out out/replay/maxmin
  sia replay builtin:philly --clean --policy fcfs --out out/philly-fcfs
  sia replay builtin:philly --clean --policy sia --alias champion \\
      --replay-start-day 58 --out out/philly-sia
  sia replay builtin:philly --clean --policy sia --train --out out/philly-sia
  sia replay --policy sia-perfect --topology gpus=8,rack=4 --cells-option preempt=true \\
      --cells-option preemptible_fraction=0.3 --out out/replay/sia-preempt
"""

#: Train-on-the-fly split defaults (days), as `sia train`'s.
TRAIN_DAYS, VAL_DAYS, TRAIN_WARMUP_DAYS = 21.0, 14.0, 3.0
#: Alias registered by --train when --alias is not given (never moves `champion`).
TRAIN_ALIAS = "replay-train"


def plan(jobs: pl.DataFrame, pools: pl.DataFrame, policy: str, *, speedup: float, tick_s: float,
         seed: int = 0, progress: bool = False, options: dict[str, Any] | None = None,
         predictors: RegistryPredictors | None = None, locality: Any = None,
         source: Any = None, prior: pl.DataFrame | None = None,
         regions: Any = None, preemption: Any = None) -> list[ReplaySpec]:
    """Return the replays of `sia replay`: ``policy`` then, unless it is FCFS, the FCFS baseline,
    both on the same jobs, quotas and locality (``source`` describes the jobs in the keys;
    ``prior``: the jobs before them, the history learned predictors start with; ``regions``: a
    RegionsSpec for the policy's replay; FCFS shares nothing, so its baseline is the same with
    or without regions)."""
    from sia.pipelines.engine import FrameWorkload, ReplaySpec

    workload = FrameWorkload(jobs, pools, source, prior)
    name = policy.strip().lower()
    specs = [ReplaySpec(workload, name, dict(options or {}), predictors=predictors, seed=seed,
                        locality=locality, tick_s=tick_s, speedup=speedup, progress=progress,
                        title=name, regions=regions, preemption=preemption)]
    if name != "fcfs":
        specs.append(ReplaySpec(workload, "fcfs", seed=seed, locality=locality, tick_s=tick_s,
                                speedup=speedup, progress=progress, title="fcfs",
                                preemption=preemption))
    return specs


def replay_workload(specs: list[ReplaySpec], warmup_s: float) -> tuple[ReplayOutcome, dict]:
    """Run the planned replays (:func:`plan`); return (the policy's outcome, the summary).

    The summary holds :func:`sia.pipelines.engine.score`'s metrics of the
    policy against FCFS plus the policy, its options and the replays' wall
    times in seconds; with locality also ``cells``: the options that differ
    from their defaults and, for the policy and the FCFS baseline, the
    cluster's placement counters (``preemptions``, ``preempted_jobs``,
    ``migrations``, ``migrated_jobs``, fallbacks ...).
    """
    from sia.pipelines.engine import locality_options, run_replay, score
    from sia.pipelines.engine.sched import policy_options

    outcomes = [run_replay(spec) for spec in specs]
    mine, base = outcomes[0], outcomes[-1]
    spec = specs[0]
    per_job, summary = score(mine, base, warmup_s, pools=spec.workload.pools)
    if len(outcomes) > 1:  # why jobs were slowed (a lending policy against FCFS)
        from sia.pipelines.studies.slowdown_report import attach_replay

        mine = attach_replay(mine, base, spec.workload.pools, per_job, summary)
    summary = {
        "policy": spec.policy,
        "policy_options": policy_options(spec.policy, spec.options, seed=spec.seed),
        "baseline": "fcfs",
        "speedup_factor": spec.speedup,
        "tick_s": spec.tick_s,
        "locality": None if spec.locality is None else repr(spec.locality),
        "preemption": None if spec.preemption is None else spec.preemption.to_dict(),
        **summary,
        "wall_time_s": {"policy_s": mine.wall_s,
                        "baseline_s": base.wall_s if len(outcomes) > 1 else 0.0},
    }
    if mine.facts.get("served"):  # SIA's predictions as it used them (sia.scheduler.core.served)
        summary["served"] = mine.facts["served"]
    if mine.facts.get("calibration"):  # SIA's per-pool calibration (models/calibration.py)
        summary["calibration"] = mine.facts["calibration"]
    if spec.regions is not None:
        summary["regions"] = regions_summary(mine, spec)
    if spec.locality is not None:
        summary["cells"] = {"options": locality_options(spec.locality),
                            "policy": mine.placement, "baseline": base.placement}
    return mine, summary


def regions_summary(outcome: ReplayOutcome, spec: ReplaySpec) -> dict[str, Any]:
    """The replay's region report (:func:`sia.pipelines.studies.regions_report.region_summary`: supply,
    demand-to-supply hourly and per day, routing, negative cache, data plans) and its mode."""
    from sia.pipelines.studies.regions_report import region_summary

    reg = region_summary(outcome, spec.regions.regions, spec.workload.pools)["regions"]
    return {"mode": spec.regions.mode, "file": spec.regions.regions.source, **reg}


def log_replay(summary: dict[str, Any], out: Path, warmup_days: float) -> str:
    """Log the replay as one MLflow run (in the active store and experiment); return its id.

    Parameters: the policy, its registry name, the workload, seed, tick,
    speedup, warm-up, replay window, locality and, for learned predictors, the
    alias and the exact model versions; metrics as an evaluation's policy runs
    (:func:`sia.pipelines.engine.tracking.policy_metrics`); artifacts: the
    summary and the per-job table.
    """
    from sia.pipelines.engine.tracking import log_policy_run, model_params, policy_metrics

    pred = summary.get("predictors") or {}
    cells = summary.get("cells") or {}
    params = {"policy": summary["policy"], "policy.name": summary["policy"],
              "source": summary["source"], "seed": summary["seed"],
              "tick_s": summary["tick_s"], "speedup": summary["speedup_factor"],
              "warmup_days": warmup_days, "replay_days": summary["replay_days"],
              "locality": summary["locality"] or "none",
              **({"alias": pred["alias"]} if pred else {}),
              **model_params(pred.get("versions"))}
    tags = {"sia.kind": "replay", "sia.policy": summary["policy"],
            "sia.source": str(summary["source"]),
            **({"sia.warning": pred["warning"]} if pred.get("warning") else {}),
            **({"sia.trace_mismatch": pred["trace_mismatch"]}
               if pred.get("trace_mismatch") else {})}
    return log_policy_run(f"replay {summary['source']} {summary['policy']}", params,
                          policy_metrics(summary, cells.get("policy"), cells.get("baseline")),
                          tags, nested=False,
                          artifacts={"results": [out / "summary.json", out / "jobs.parquet"]})


def train_before_replay(jobs: pl.DataFrame, pools: pl.DataFrame, *, source: str,
                        replay_start_day: float | None, train_days: float, val_days: float,
                        warmup_days: float, windows_min: tuple[int, ...], load_windows: int,
                        alias: str, out_dir: Path, seed: int = 0,
                        ) -> tuple[float, dict[str, Any]]:
    """Train and register the predictors on the period before the replay.

    The split is ``warmup_days`` + ``train_days`` + ``val_days`` ending at
    ``replay_start_day`` (days since the trace start); with no start day the
    split starts at the trace's active start (as `sia train` chooses it) and
    the replay starts where the validation ends. Uses
    :func:`sia.pipelines.train.run_training` (MLflow run, models registered
    under ``alias``, report in ``out_dir``) on the jobs submitted before the
    replay. Returns (the replay's start day, a record of the training).
    """
    import polars as pl
    from sia.features.table9 import held_across
    from sia.models.split import choose_split
    from sia.models.will_arrive import XGBParams
    from sia.pipelines.train import TrainConfig, run_training

    need = warmup_days + train_days + val_days
    if replay_start_day is None:
        split = choose_split(jobs["submit_time"].to_numpy(), train_days=train_days,
                             val_days=val_days, warmup_days=warmup_days)
        first = split.active_start / DAY_S
        replay_start_day = split.val_end / DAY_S
    else:
        first = replay_start_day - need
        if first < 0:
            raise ConfigError(
                f"--replay-start-day {replay_start_day:g}: --train needs --train-warmup-days + "
                f"--train-days + --val-days = {need:g} days before the replay; start the replay "
                "later or shorten those periods")
    before = jobs.filter(pl.col("submit_time") < replay_start_day * DAY_S)
    if before.height == 0:
        raise ConfigError(f"--replay-start-day {replay_start_day:g}: no job before the replay "
                          "to train on")
    config = TrainConfig(train_days=train_days, val_days=val_days, warmup_days=warmup_days,
                         start_day=first, windows_min=windows_min, load_windows=load_windows,
                         ablation=False, xgb=XGBParams(seed=seed))
    clock = time.perf_counter()
    outcome = run_training(before, pools, config, trace=source, out_dir=out_dir, alias=alias,
                           held_after=held_across(jobs, replay_start_day * DAY_S))
    s = outcome.result.split
    return replay_start_day, {
        "source": "trained", "run_id": outcome.run_id, "alias": alias,
        "tracking_uri": outcome.tracking_uri, "versions": outcome.versions,
        "train_days": [s.train_start / DAY_S, s.train_end / DAY_S],
        "val_days": [s.train_end / DAY_S, s.val_end / DAY_S],
        "train_wall_s": time.perf_counter() - clock, "report": str(outcome.report_dir),
    }


def summary_table(summary: dict) -> Table:
    """Return a rich table of the headline metrics of a replay summary."""
    def fmt(x, spec=".3g"):
        return "-" if x is None else format(x, spec)

    table = Table(title=f"{summary['policy']} vs FCFS ({summary['n_jobs']} jobs after warm-up)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("mean speedup", fmt(summary["mean_speedup"])),
        ("geometric mean speedup", fmt(summary["geomean_speedup"])),
        ("p5 / p95 speedup", f"{fmt(summary['p5_speedup'])} / {fmt(summary['p95_speedup'])}"),
        ("jobs slowed (%)", fmt(summary["pct_slowed"], ".2f")),
        ("total slowdown (min)", fmt(summary["total_slowdown_min"], ".1f")),
        ("max slowdown (min)", fmt(summary["max_slowdown_min"], ".1f")),
        ("mean queueing delay (min)", fmt(_div(summary["mean_queue_delay_s"], 60.0), ".1f")),
        ("  under FCFS (min)", fmt(_div(summary["mean_queue_delay_baseline_s"], 60.0), ".1f")),
        ("GPU utilization (FCFS)",
         f"{fmt(summary.get('utilization'))} ({fmt(summary.get('utilization_baseline'))})"),
    ]
    cells = summary.get("cells")
    if cells:
        pol, base = cells["policy"], cells["baseline"]
        rows += [
            ("preemptions (jobs) (FCFS)", f"{pol['preemptions']} ({pol['preempted_jobs']}) "
                                         f"({base['preemptions']})"),
            ("migrations (jobs) (FCFS)", f"{pol['migrations']} ({pol['migrated_jobs']}) "
                                        f"({base['migrations']})"),
        ]
    reg = summary.get("regions")
    if reg:
        rows += [
            ("regions: worst / balanced demand-to-supply (hourly mean)",
             fmt(reg["queued_running_hourly"]["worst_over_avg_mean"])),
            ("regions: jobs routed, data moved, replicas",
             f"{reg['routed']}, {reg['data_moved']:.4g}, {reg['replicas_final']}"),
            ("regions: scan attempts, cache hit rate",
             f"{reg['scan_attempts']}, {fmt(reg['scan_hit_rate'])}"),
        ]
    rows += served_rows(summary.get("served"), fmt)
    from sia.pipelines.studies.slowdown_report import table_rows

    rows += table_rows(summary.get("slowdown_causes"))
    for name, value in rows:
        table.add_row(name, value)
    return table


def served_rows(served: dict | None, fmt: Any) -> list[tuple[str, str]]:
    """Rows for SIA's predictions as it used them (``summary["served"]``), one value per window."""
    if not served:
        return []
    rows = []
    for section, metric, name in (
            ("will_arrive", "f1", "served WillJobsArrive F (persistence)"),
            ("job_duration", "auc", "served JobDuration AUC of P(d <= w)"),
            ("job_duration", "lendable", "served JobDuration lendable share (overrun)")):
        by_w = served.get(section) or {}
        if not by_w:
            continue
        extra = {"f1": "persistence_f1", "lendable": "lendable_overrun"}.get(metric)
        parts = [fmt(s.get(metric)) + (f" ({fmt(s.get(extra))})" if extra else "")
                 for s in by_w.values()]
        rows.append((f"{name}, {' / '.join(by_w)}", " / ".join(parts)))
    return rows


def regions_from_cli(path: Path | None, mode: str) -> Any:
    """The RegionsSpec of --regions FILE / --regions-mode (None without --regions), checked.

    Without --regions a trace may still carry regions in a column (--map region=YOURS):
    :func:`regions_from_trace` reads them once the trace is read."""
    from sia.pipelines.engine.spec import REGION_CHOICES, RegionsSpec

    if mode not in REGION_CHOICES:
        raise ConfigError(f"--regions-mode must be one of {', '.join(REGION_CHOICES)}, "
                          f"not {mode!r}")
    if path is None:
        return None
    from sia.pipelines.engine.sched import read_regions_file

    return RegionsSpec(read_regions_file(path), mode)


def regions_from_trace(jobs: Any, source: str, mode: str, mapped: bool = True) -> Any:
    """The RegionsSpec of a trace's region column, which the user mapped (``mapped``: --map
    region=...; a column that merely happens to be called so is not used unasked); None
    without it, when --regions-mode other than static needs --regions FILE."""
    from sia.data.schema import REGION_COLUMN
    from sia.pipelines.engine.spec import RegionsSpec

    if not mapped or REGION_COLUMN not in jobs.columns:
        if mode != "static":
            raise ConfigError("--regions-mode needs --regions FILE or a region column in the "
                              f"trace (--map {REGION_COLUMN}=YOUR_COLUMN)")
        return None
    from sia.pipelines.engine.sched import regions_from_jobs
    from sia.scheduler.regions.model import RegionsError

    try:
        return RegionsSpec(regions_from_jobs(jobs, source, REGION_COLUMN), mode)
    except RegionsError as exc:
        raise ConfigError(f"--map {REGION_COLUMN}=...: {exc}") from None


def _div(x: float | None, d: float) -> float | None:
    return None if x is None else x / d


# The `replay` command's options that are its own (the workload's are shared: sia.pipelines.inputs).
PolicyOpt = Annotated[str, typer.Option(
    "--policy", help="Policy to replay: " + ", ".join(POLICY_NAMES) + ".", show_default=False)]
OutOpt = Annotated[Path, typer.Option(
    "--out", help="Folder to write jobs.parquet, pools.parquet and summary.json into.",
    show_default=False)]
SpeedupOpt = Annotated[float, typer.Option(
    "--speedup", help="Divide every job's duration by this factor (the paper uses 10).")]
TickOpt = Annotated[float, typer.Option(
    "--tick", help="Seconds between the periodic scheduling ticks.")]
WarmupDaysOpt = Annotated[float, typer.Option(
    "--warmup-days", help="Days after the first submission whose jobs are not scored.")]
TopologyOpt = Annotated[str | None, typer.Option(
    "--topology", help="Replay on buddy cells with this server/rack shape, e.g. "
    "'gpus=8,rack=4' (gangs must sit in one cell: 1/2/4/8 GPUs in a server, 16/32 in "
    "a rack). Default: fungible GPUs.", show_default=False)]
PlacementOpt = Annotated[str | None, typer.Option(
    "--placement", help="With cells: the placement chain tried when the buddy allocator "
    "cannot place a job, e.g. 'buddy', 'buddy,mcf', 'buddy,hungarian,milp,budget=0.5' "
    "(budget: seconds per solver call).", show_default=False)]
CellsOpt = Annotated[list[str] | None, typer.Option(
    "--cells-option", help="With cells (implies --topology gpus=8,rack=4 when not "
    "given): set a cell-cluster option, KEY=VALUE, repeatable: preempt, "
    "preemptible_fraction, lost_work_s, restart_delay_s, seed (preemption); migrate, "
    "migrate_for (migration); adopt_loans, strict_buddies, spare_full_pools, pack, "
    "strict_reservations, debug. E.g. --cells-option preempt=true --cells-option "
    "preemptible_fraction=0.3.", metavar="KEY=VALUE", show_default=False)]
PreemptionOpt = Annotated[list[str] | None, typer.Option(
    "--preemption", help="Fungible GPUs: which jobs may be preempted and what an eviction "
    "costs, KEY=VALUE, repeatable: preemptible_fraction (seeded share of jobs on top of "
    "the trace's preemptible column; default 0), seed (0), checkpoint_s (an eviction loses "
    "the run's time since its last checkpoint; default 1800, none: the whole run), "
    "restart_delay_s (added to the next run; default 120). Used by the policies that "
    "preempt: kueue and sia-preempt. E.g. --policy sia-preempt --preemption "
    "preemptible_fraction=0.3.", metavar="KEY=VALUE",
    show_default=False)]
ReplayStartOpt = Annotated[float | None, typer.Option(
    "--replay-start-day", help="Replay only jobs submitted from this day (days since the "
    "trace start; with --train, default: where the training split ends).",
    show_default=False)]
ReplayEndOpt = Annotated[float | None, typer.Option(
    "--replay-end-day", help="Replay only jobs submitted before this day.",
    show_default=False)]
AliasOpt = Annotated[str | None, typer.Option(
    "--alias", help="sia*: registry alias of the predictors (default: champion; with "
    f"--train: the alias to register under, default {TRAIN_ALIAS}).", show_default=False)]
LoadMethodOpt = Annotated[str, typer.Option(
    "--load-method", help="sia*: NewLoadEstimate: sliding_max (SIA's) or calibrated.")]
WindowsOpt = Annotated[str, typer.Option(
    "--windows", help="sia*: prediction windows in minutes (SIA's windows and the "
    "predictors').")]
TrainOpt = Annotated[bool, typer.Option(
    "--train", help="sia*: train and register the predictors on the period before the "
    "replay instead of loading them.")]
TrainDaysOpt = Annotated[float, typer.Option(
    "--train-days", help="--train: days of the training period.")]
ValDaysOpt = Annotated[float, typer.Option(
    "--val-days", help="--train: days of the validation period (just before the replay).")]
TrainWarmupOpt = Annotated[float, typer.Option(
    "--train-warmup-days", help="--train: days before the training period whose jobs "
    "only feed the features.")]
RegionsOpt = Annotated[Path | None, typer.Option(
    "--regions", help="Replay on regions: a YAML file mapping each pool to its home "
    "region (and its data size, replicas, the transfer rate; README 'Global scheduling "
    "across regions'). Without it, --map region=YOUR_COLUMN replays on the regions the "
    "trace names. Fungible GPUs only.", show_default=False)]
RegionsModeOpt = Annotated[str, typer.Option(
    "--regions-mode", help="With regions: home (each job in its home region), static "
    "(global scheduling, data where the file puts it), history, perfect or forecast "
    "(data placement re-planned every period_h from the last period's demand, the "
    "coming period's, or the region policies' forecasters); a global mode + '+idle' (e.g. "
    "history+idle) lets guests take any idle GPU instead of only the GPUs SIA's "
    "reservations leave; reservations-history, reservations-perfect or "
    "reservations-forecast: global reservations (each pool's quota split into per-region "
    "shares planned with its data; jobs run as owners wherever their pool has a share).")]
RiskOpt = Annotated[str | None, typer.Option(
    "--risk", help="SIA's risk budget (SIA policies only): the allowed expected number of "
    "owners' jobs one loan delays, or off (SIA's own rule alone). By default a budget of 3 "
    "vetoes SIA's own loans (--risk-mode veto): a job is lent in a window only where SIA's "
    "rule lends it and its pool's calibrated bound on overrunning the window, times the jobs "
    "one delay reaches (1/(1 - recent load) of the busiest pool with unused quota), is within "
    "the budget; jobs whose time limit fits are lent at any budget; a pool with too few "
    "scored jobs lends only those. Each pool's reservation covers its arrivals in the window "
    "except with probability at most risk/(1+risk), calibrated per pool online, and never "
    "less than SIA's predictions (a pool with too little history reserves its whole unused "
    "quota; policy option risk_arrivals: predicted uses SIA's reservations instead). 0: lend "
    "only on certainty, of the arrivals too: with learned arrival predictions nothing is lent. "
    "Default: the policy's (3 for learned SIA; none for sia-perfect and the random "
    "strawmen).", show_default=False)]
RiskModeOpt = Annotated[str | None, typer.Option(
    "--risk-mode", help="How SIA's risk budget meets its own rule: veto (a job is lent only "
    "where SIA's rule and the budget both allow it, and the calibrated reservations are "
    "never below the predicted ones: a large budget lends as SIA without one, 0 only on "
    "certainty) or replace (the budget decides alone which jobs are lent). Default: the "
    "policy's (veto).",
    show_default=False)]
NoMlflowOpt = Annotated[bool, typer.Option(
    "--no-mlflow", help="Do not log the replay as an MLflow run (files only).")]


def risk_value(text: str) -> float | None:
    """Return ``--risk``'s budget: a number, or None for ``off``/``none`` (no budget);
    ConfigError naming the option otherwise."""
    if text.strip().lower() in ("off", "none", "null"):
        return None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"--risk must be a number or off, not {text!r}") from None


@dataclass(frozen=True)
class ReplayArgs:
    """The `sia replay` command line, as parsed (field names are the command's parameters)."""

    trace: Any
    policy: str
    out: Path
    speedup: float
    tick: float
    warmup_days: float
    topology: str | None
    placement: str | None
    cells_option: list[str] | None
    preemption: list[str] | None
    synthetic: Any
    fmt: str
    map_: Any
    pool_from: Any
    time_unit: str
    clean: bool
    quotas: Any
    load_range: str
    seed: int
    days: Any
    replay_start_day: float | None
    replay_end_day: float | None
    alias: str | None
    load_method: str
    windows: str
    train: bool
    train_days: float
    val_days: float
    train_warmup_days: float
    regions: Path | None
    regions_mode: str
    no_mlflow: bool
    risk: str | None = None
    risk_mode: str | None = None
    arrival: Any = None


def register(app: typer.Typer) -> None:
    """Add the `replay` command to ``app``."""

    @app.command("replay", help=HELP)
    def replay(
        trace: inputs.TraceArg = None,
        policy: PolicyOpt = ...,
        out: OutOpt = ...,
        speedup: SpeedupOpt = 1.0,
        tick: TickOpt = 300.0,
        warmup_days: WarmupDaysOpt = 2.0,
        topology: TopologyOpt = None,
        placement: PlacementOpt = None,
        cells_option: CellsOpt = None,
        preemption: PreemptionOpt = None,
        synthetic: inputs.SyntheticOpt = None,
        fmt: inputs.FormatOpt = "auto",
        map_: inputs.MapOpt = None,
        pool_from: inputs.PoolFromOpt = None,
        arrival: inputs.ArrivalOpt = None,
        time_unit: inputs.TimeUnitOpt = "s",
        clean: inputs.CleanOpt = False,
        quotas: inputs.QuotasOpt = None,
        load_range: inputs.LoadRangeOpt = "0.6,1.1",
        seed: inputs.SeedOpt = 0,
        days: inputs.DaysOpt = None,
        replay_start_day: ReplayStartOpt = None,
        replay_end_day: ReplayEndOpt = None,
        alias: AliasOpt = None,
        load_method: LoadMethodOpt = "sliding_max",
        windows: WindowsOpt = ",".join(str(k) for k in DEFAULT_WINDOWS_MIN),
        train: TrainOpt = False,
        train_days: TrainDaysOpt = TRAIN_DAYS,
        val_days: ValDaysOpt = VAL_DAYS,
        train_warmup_days: TrainWarmupOpt = TRAIN_WARMUP_DAYS,
        regions: RegionsOpt = None,
        regions_mode: RegionsModeOpt = "static",
        no_mlflow: NoMlflowOpt = False,
        risk: RiskOpt = None,
        risk_mode: RiskModeOpt = None,
    ) -> None:
        run_command(ReplayArgs(**locals()))


def run_command(a: ReplayArgs) -> None:
    """Run `sia replay` with the parsed command line ``a``: check it, read the workload, load
    (or train) the predictors, replay, write the files, print the table, log the MLflow run.
    ``--out`` is checked before any work (and created only once the replay is done, so a
    command that fails leaves none) and locked while the command writes it."""
    from sia.pipelines.output import check_dir

    check_dir(a.out)
    _run(a)


def _run(a: ReplayArgs) -> None:
    """:func:`run_command`'s body, ``a.out`` checked."""
    import polars as pl

    ks, locality, learned = _check_args(a)
    preemption = parse_preemption(a.preemption, locality)
    regions_spec = regions_from_cli(a.regions, a.regions_mode)
    uri = None
    if not a.no_mlflow:  # an unusable store fails now, before any replay
        from sia.pipelines.tracking import EVALUATION_EXPERIMENT, setup_tracking

        uri = setup_tracking(experiment=EVALUATION_EXPERIMENT)
    wl = inputs.workload_from_options(a.trace, a.synthetic, a.fmt, a.map_, a.pool_from,
                                      a.time_unit, a.clean, a.quotas, a.load_range, a.seed,
                                      a.days, arrival=a.arrival)
    if regions_spec is None:
        from sia.data.schema import REGION_COLUMN

        regions_spec = regions_from_trace(wl.jobs, wl.source, a.regions_mode,
                                          mapped=REGION_COLUMN in inputs.parse_mapping(a.map_))
    options: dict[str, Any] = {}
    predictors = ref = None
    replay_start_day, replay_end_day = a.replay_start_day, a.replay_end_day
    if learned:
        replay_start_day, predictors, ref = _learned_predictors(a, wl, ks)
        options = {"windows_s": tuple(60.0 * k for k in ks)}
        from sia.pipelines.engine.predictors import in_sample_warning

        warning = in_sample_warning(
            predictors.get("training_period"), wl.source, predictors["alias"], replay_start_day,
            "pass --replay-start-day {day:g} to replay after validation (or --train to train "
            "on the period before the replay)")
        if warning:
            predictors["warning"] = warning
            typer.echo(f"warning: {warning}", err=True)
        from sia.pipelines.engine.predictors import trace_mismatch

        mismatch = trace_mismatch(predictors.get("learned_from"), wl.source, predictors["alias"])
        if mismatch:  # in the output, summary.json and the MLflow run (tag sia.trace_mismatch)
            predictors["trace_mismatch"] = mismatch
            typer.echo(f"warning: {mismatch}", err=True)
    if a.risk is not None:
        options["risk"] = risk_value(a.risk)
    if a.risk_mode is not None:
        options["risk_mode"] = a.risk_mode
    jobs = wl.jobs
    pools = wl.pools
    prior = inputs.jobs_before(jobs, replay_start_day)
    if replay_start_day is not None or replay_end_day is not None:
        jobs, _ = inputs.replay_window(jobs, replay_start_day, replay_end_day)
        pools = pools.filter(pl.col("pool").is_in(jobs["pool"].unique().implode()))
    problem = inputs.warmup_covers_all(jobs, a.warmup_days, "--warmup-days")
    if problem:  # the schedule is still written; its scores are empty
        typer.echo(f"warning: {problem}", err=True)
    specs = plan(jobs, pools, a.policy, speedup=a.speedup, tick_s=a.tick, seed=a.seed,
                 progress=jobs.height >= PROGRESS_FROM_JOBS, options=options,
                 predictors=ref, locality=locality,
                 source=(wl.source, a.seed, a.days, replay_start_day, replay_end_day),
                 prior=prior, regions=regions_spec, preemption=preemption)
    outcome, summary = replay_workload(specs, a.warmup_days * DAY_S)
    summary = {"source": wl.source, "seed": a.seed,
               "replay_days": [replay_start_day, replay_end_day], **summary}
    if predictors is not None:
        summary["predictors"] = predictors
    from sia.pipelines.output import FolderLock, prepare_dir

    out = prepare_dir(a.out)
    with FolderLock(out):  # a second command writing this --out stops at once
        _write_outputs(a, out, outcome, pools, summary, regions_spec, uri)


def _write_outputs(a: ReplayArgs, out: Path, outcome: Any, pools: Any, summary: dict[str, Any],
                   regions_spec: Any, uri: str | None) -> None:
    """Write the replay's files into ``out`` (each through a temporary name), print its table
    and log its MLflow run."""
    from sia.pipelines.engine.sched import RESULT_COLUMNS
    from sia.pipelines.output import write_parquet, write_text
    from sia.pipelines.studies.slowdown_report import ATTRIBUTION_COLUMNS

    # each file through a temporary name: a full disk never leaves a partial one
    write_parquet(outcome.result.select(RESULT_COLUMNS + (("region",) if regions_spec else ())
                                        + tuple(c for c in ATTRIBUTION_COLUMNS
                                                if c in outcome.result.columns)),
                  out / "jobs.parquet")
    write_parquet(pools, out / "pools.parquet")
    write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    _print_outcome(summary, a)
    if uri is not None:
        from sia.pipelines.tracking import EVALUATION_EXPERIMENT, deadline, setup_tracking

        setup_tracking(experiment=EVALUATION_EXPERIMENT)  # training may have switched it
        with deadline("logging the replay's run", uri, uploads=True):
            run_id = log_replay(summary, out, a.warmup_days)
        typer.echo(f"MLflow run {run_id} (experiment {EVALUATION_EXPERIMENT}) in {uri}")


def parse_preemption(items: list[str] | None, locality: Any) -> Any:
    """Return the PreemptionConfig of ``--preemption KEY=VALUE`` options (None when none is
    given); ConfigError naming the option for a bad one, or with cells."""
    if not items:
        return None
    from sia.pipelines.engine.sched import PreemptionConfig

    if locality is not None:
        raise ConfigError("--preemption is for fungible GPUs; on cells use --cells-option "
                          "preempt=true, preemptible_fraction, lost_work_s, restart_delay_s")
    options: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--preemption {item!r}: expected KEY=VALUE, e.g. "
                              "preemptible_fraction=0.3")
        v = value.strip()
        if v.lower() in ("none", "null"):
            options[key.strip()] = None
            continue
        try:
            options[key.strip()] = int(v) if key.strip() == "seed" else float(v)
        except ValueError:
            raise ConfigError(f"--preemption {item!r}: {v!r} is not a number") from None
    return PreemptionConfig.from_options(options, where="--preemption")


def _check_args(a: ReplayArgs) -> tuple[tuple[int, ...], Any, bool]:
    """Check the command line before reading anything; return (the windows in minutes, the
    locality settings or None, whether the policy takes the learned predictors)."""
    from sia.pipelines.engine.sched import (
        check_policy,
        options_from_cli,
        policies_with,
        policy_needs,
    )

    if not a.speedup > 0:
        raise ConfigError(f"--speedup must be > 0, not {a.speedup}")
    if not a.tick > 0:
        raise ConfigError(f"--tick must be > 0 seconds, not {a.tick}")
    if not a.warmup_days >= 0:
        raise ConfigError(f"--warmup-days must be >= 0, not {a.warmup_days}")
    if a.risk is not None and not (a.policy.startswith("sia") and a.policy != "sia-vc"):
        raise ConfigError(f"--risk is an option of SIA's policies (sia, sia-perfect, ...), "
                          f"not of {a.policy!r}")
    if a.risk_mode is not None and a.risk_mode not in ("replace", "veto"):  # (the policy's)
        raise ConfigError(f"--risk-mode must be replace or veto, not {a.risk_mode!r}")
    if a.risk is not None:
        risk_value(a.risk)  # a bad value is named before the trace is read
    if a.risk_mode is not None and a.risk is not None and risk_value(a.risk) is None:
        raise ConfigError(f"--risk-mode {a.risk_mode} needs a budget, not --risk off")
    # fail on an unknown policy, or one that cannot take what was asked, before reading
    needs = policy_needs(a.policy)
    locality = options_from_cli(a.topology, a.placement, a.cells_option)
    given = [f for f, v in (("--topology", a.topology), ("--placement", a.placement),
                            ("--cells-option", a.cells_option)) if v]
    try:
        check_policy(a.policy, locality=locality)
    except ConfigError as exc:
        raise ConfigError(f"{given[0]}: {exc}") from None
    learned = needs.forecaster is not None
    given = [f for f, v in (("--train", a.train), ("--alias", a.alias)) if v]
    if given and not learned:
        raise ConfigError(f"{given[0]} applies to the policies that use the learned "
                          f"predictors ({', '.join(policies_with(forecaster=True))}), "
                          f"not {a.policy!r}")
    if a.load_method not in ("sliding_max", "calibrated"):
        raise ConfigError(f"--load-method must be sliding_max or calibrated, not {a.load_method!r}")
    ks = inputs.parse_windows(a.windows)
    if any(hi <= lo for lo, hi in zip(ks, ks[1:], strict=False)):
        raise ConfigError(f"--windows {a.windows!r}: need increasing minutes such as 5,60,720")
    if (a.replay_start_day is not None and a.replay_end_day is not None
            and a.replay_end_day <= a.replay_start_day):
        raise ConfigError(f"--replay-end-day {a.replay_end_day:g} must be after "
                          f"--replay-start-day {a.replay_start_day:g}")
    return ks, locality, learned


def _learned_predictors(a: ReplayArgs, wl: Any, ks: tuple[int, ...]
                        ) -> tuple[float | None, dict[str, Any], RegistryPredictors]:
    """Load the learned predictors from the registry (training them first with --train);
    return (the replay's start day, their record for the summary, the registry reference)."""
    from sia.pipelines.engine.predictors import resolve_registry

    replay_start_day, trained = a.replay_start_day, None
    if a.train:
        name = a.alias or TRAIN_ALIAS
        typer.echo(f"training the predictors on the period before the replay "
                   f"(alias {name}) ...")
        replay_start_day, trained = train_before_replay(
            wl.jobs, wl.pools, source=wl.source, replay_start_day=replay_start_day,
            train_days=a.train_days, val_days=a.val_days, warmup_days=a.train_warmup_days,
            windows_min=ks, load_windows=3, alias=name, out_dir=a.out / "predictors",
            seed=a.seed)
        typer.echo(f"trained in {trained['train_wall_s']:.1f} s (MLflow run "
                   f"{trained['run_id']}); replay from day {replay_start_day:g}")
    name = a.alias or (TRAIN_ALIAS if a.train else "champion")
    hint = ("" if a.train else
            f"; run `sia train TRACE --alias {name}` first (windows "
            f"{','.join(map(str, ks))}) or pass --train to train on the period "
            "before the replay")
    ref = resolve_registry(name, ks, load_method=a.load_method, hint=hint, where="--alias")
    from sia.pipelines.engine.predictors import learned_from
    predictors = {"alias": name, "tracking_uri": ref.tracking_uri,
                  "load_method": a.load_method, "windows_min": list(ks),
                  "will_arrive_versions": {
                      n.removeprefix("sia-"): v for n, v in ref.versions
                      if n.startswith("sia-will-jobs-arrive-")},
                  "versions": dict(ref.versions)}
    learned = learned_from(ref)
    if learned is not None:
        predictors["learned_from"] = learned
    if trained:
        predictors["trained"] = trained
    else:
        from sia.models.registry import training_period
        from sia.pipelines.tracking import deadline

        with deadline("reading the training run", ref.tracking_uri):
            period = training_period(ref.versions[0][0], name)
        if period is not None:
            predictors["training_period"] = period
    return replay_start_day, predictors, ref


def _print_outcome(summary: dict[str, Any], a: ReplayArgs) -> None:
    """Print the replay's table, its predictors and the files written."""
    Console().print(summary_table(summary))
    predictors = summary.get("predictors")
    if predictors is not None:
        typer.echo(f"predictors: alias {predictors['alias']} in {predictors['tracking_uri']} "
                   f"({a.load_method}; WillJobsArrive versions "
                   + ", ".join(f"{k} v{v}" for k, v in
                               predictors["will_arrive_versions"].items()) + ")")
    typer.echo(f"wrote {a.out / 'jobs.parquet'}, {a.out / 'pools.parquet'}, "
               f"{a.out / 'summary.json'}")
