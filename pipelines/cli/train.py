"""`sia train`: train, evaluate, track and register the predictors on a trace."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from sia.data.errors import ConfigError
from sia.data.paths import output_root
from sia.pipelines import inputs
from sia.pipelines.output import FolderLock, prepare_dir

# The `train` command's options that are its own (the workload's are shared: sia.pipelines.inputs).
TrainDaysOpt = Annotated[float, typer.Option(
    "--train-days", help="Days of the training period.")]
ValDaysOpt = Annotated[float, typer.Option(
    "--val-days", help="Days of the validation period (right after training).")]
WarmupDaysOpt = Annotated[float, typer.Option(
    "--warmup-days", help="Days skipped after the trace's active start.")]
StartDayOpt = Annotated[float | None, typer.Option(
    "--start-day", help="Day (since the trace start) where the warm-up begins; default: "
                        "the first day with >= 10% of the median daily submissions.",
    show_default=False)]
WindowsOpt = Annotated[str, typer.Option(
    "--windows", help="Prediction windows k in minutes, comma separated.")]
ThresholdOpt = Annotated[str | None, typer.Option(
    "--threshold", help="WillJobsArrive decision threshold: half-f (default: half the "
                        "best F reached on the last 20% of the training period), tail "
                        "(the one that maximizes F there), or a probability in (0, 1).",
    show_default=False)]
TargetRecallOpt = Annotated[float | None, typer.Option(
    "--target-recall", help="Choose each window's threshold as the largest reaching "
                            "this recall on the last 20% of the training period.",
    show_default=False)]
RecipeOpt = Annotated[str, typer.Option(
    "--recipe", help="default (the product's: choices made on the training tail, "
                     "rhythm features) or paper (SIA's recipe as published: XGBoost "
                     "defaults, threshold 0.5, Table 9 features, sliding max; for "
                     "comparisons; it sets --threshold, --will-arrive-select, "
                     "--load-method and --duration-method).")
]
WillArriveSelectOpt = Annotated[str, typer.Option(
    "--will-arrive-select", help="WillJobsArrive: auto (the better of XGBoost and "
                                 "'either' = persistence or XGBoost on the training tail, "
                                 "unless persistence or always-yes beats it in every tail "
                                 "block) or one of persistence / always_yes / either / "
                                 "xgboost.")]
LoadWindowsOpt = Annotated[int, typer.Option(
    "--load-windows", help="NewLoadEstimate: windows in the sliding max (N).")]
LoadAlphaOpt = Annotated[float, typer.Option(
    "--load-alpha", help="NewLoadEstimate: target exceedance rate of the calibrated "
                         "estimate.")]
LoadMethodOpt = Annotated[str, typer.Option(
    "--load-method", help="NewLoadEstimate registered: sliding_max (the paper's), "
                          "calibrated, quantile (XGBoost quantile + conformal offset) "
                          "or auto (least over-reservation within the target "
                          "exceedance on the last training days). All are reported.")
]
DurationQuantileOpt = Annotated[float, typer.Option(
    "--duration-quantile", help="JobDuration: bin this quantile of the similar jobs' "
                                "durations (0.5 = the paper's median; higher = fewer "
                                "under-predictions).")]
DurationTargetUnderOpt = Annotated[float | None, typer.Option(
    "--duration-target-under", help="JobDuration: instead of --duration-quantile, the "
                                    "smallest quantile whose under-prediction rate on "
                                    "the training period is <= this (evaluated on "
                                    "validation).", show_default=False)]
DurationMethodOpt = Annotated[str, typer.Option(
    "--duration-method", help="JobDuration: history_cdf (the share of the similar "
                              "finished jobs that fit each window; SIA lends a job "
                              "where that share is >= 1 - --duration-lend-risk), "
                              "history (the paper's rule: the median's bin), auto (the "
                              "learned model, with SIA's risk-aware lending, only "
                              "where it lends more than the rule without overrunning "
                              "more often on the last days of the training period) "
                              "or xgboost (always the learned model; SIA lends by its "
                              "median bin).")]
DurationLendRiskOpt = Annotated[str, typer.Option(
    "--duration-lend-risk", help="JobDuration history_cdf: SIA lends a job in window w "
                                 "only when P(duration <= w) >= 1 - eps; one eps, or "
                                 "one per duration-bin edge (5, 60, 720 min), comma "
                                 "separated.")]
DurationStartedCapOpt = Annotated[bool, typer.Option(
    "--duration-started-cap/--no-duration-started-cap",
    help="JobDuration: the scheduler caps P(duration <= w) by the share of the similar "
         "jobs' last 50 started ones known to fit w (finished within it; running ones count "
         "once past it), so a run of long jobs still in flight is not missed.")]
DurationLearnedOpt = Annotated[str, typer.Option(
    "--duration-learned", help="JobDuration: when a learned model over the submission "
    "features (the time limit, the user's use of their limits, the histories by job name, "
    "user, pool and width) competes with the history_cdf / history rule, chosen on the last "
    "days of the training period only (it must lend more without overrunning more often in "
    "any window): limits (on a trace with time limits), always or never.")]
DurationRecentOpt = Annotated[float, typer.Option(
    "--duration-recent", help="JobDuration history_cdf: weight (0-1) of the shares "
                              "over the similar jobs' last 50 finished ones against "
                              "the shares over all of them.")]
NEstimatorsOpt = Annotated[int, typer.Option(
    "--n-estimators", help="XGBoost trees (when not tuning).")]
MonotoneOpt = Annotated[bool, typer.Option(
    "--monotone/--no-monotone", help="WillJobsArrive: trees monotone in the features whose "
    "direction is known (more past submissions never lowers P(arrival), a longer time "
    "since the last one never raises it). --recipe paper: unconstrained, as the paper.")]
TuneOpt = Annotated[int, typer.Option(
    "--tune", help="Optuna trials per window (0 = no search).")]
TuneObjectiveOpt = Annotated[str, typer.Option(
    "--tune-objective", help="f1, or recall_at_precision (with --precision-floor).")
]
PrecisionFloorOpt = Annotated[float, typer.Option(
    "--precision-floor", help="Precision floor of recall_at_precision.")]
SelectFeaturesOpt = Annotated[bool, typer.Option(
    "--select-features", help="WillJobsArrive: fit each cumulative feature set of the "
                              "ablation and keep the best on the last 20% of the training "
                              "period (default: every feature).")]
AblationOpt = Annotated[bool, typer.Option(
    "--ablation/--no-ablation", help="WillJobsArrive: also fit each cumulative feature set "
    "and report it on validation (SIA Tables 10 / 20; four more fits per window, for the "
    "report only: the registered model does not use them).")]
ThreadsOpt = Annotated[int, typer.Option(
    "--threads", help="Threads that fit the models (0: one per CPU core). The models do not "
    "depend on it.")]
MaxFitRowsOpt = Annotated[int | None, typer.Option(
    "--max-fit-rows", help="WillJobsArrive: at most this many rows per booster fit; above it "
    "a fit keeps every row with an arrival and a weighted sample of the others (with many "
    "pools the 5-minute rows grow as pools x days). 0: every row. Default: the product's "
    "(sia.models.will_arrive.MAX_FIT_ROWS).")]
AliasOpt = Annotated[str | None, typer.Option(
    "--alias", help="Registry alias set on the new model versions (default: champion when "
                    "training on a trace; with --synthetic no alias moves unless named).",
    show_default=False)]
ExperimentOpt = Annotated[str | None, typer.Option(
    "--experiment", help="MLflow experiment to log the run into (default: "
                         "$MLFLOW_EXPERIMENT_NAME, else sia-predictors).",
    show_default=False)]
OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="Report folder (default: a new folder per run, <output root>/train/"
                  "<UTC time>-<trace>).",
    show_default=False)]


@dataclass(frozen=True)
class TrainArgs:
    """The `sia train` command line, as parsed (field names are the command's parameters)."""

    trace: Any
    synthetic: Any
    fmt: Any
    map_: Any
    pool_from: Any
    time_unit: Any
    clean: Any
    quotas: Any
    load_range: Any
    seed: Any
    days: Any
    train_days: float
    val_days: float
    warmup_days: float
    start_day: float | None
    windows: str
    threshold: str | None
    target_recall: float | None
    recipe: str
    will_arrive_select: str
    load_windows: int
    load_alpha: float
    load_method: str
    duration_quantile: float
    duration_target_under: float | None
    duration_method: str
    duration_lend_risk: str
    duration_recent: float
    duration_started_cap: bool
    duration_learned: str
    n_estimators: int
    monotone: bool
    tune: int
    tune_objective: str
    precision_floor: float
    select_features: bool
    ablation: bool
    threads: int
    max_fit_rows: int | None
    alias: str | None
    experiment: str | None
    out: Path | None
    arrival: Any = None


def register(app: typer.Typer) -> None:
    """Add the `train` command to ``app``."""

    @app.command("train")
    def train_cmd(
        trace: inputs.TraceArg = None,
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
        train_days: TrainDaysOpt = 21.0,
        val_days: ValDaysOpt = 14.0,
        warmup_days: WarmupDaysOpt = 3.0,
        start_day: StartDayOpt = None,
        windows: WindowsOpt = "5,60,720",
        threshold: ThresholdOpt = None,
        target_recall: TargetRecallOpt = None,
        recipe: RecipeOpt = "default",
        will_arrive_select: WillArriveSelectOpt = "auto",
        load_windows: LoadWindowsOpt = 3,
        load_alpha: LoadAlphaOpt = 0.1,
        load_method: LoadMethodOpt = "calibrated",
        duration_quantile: DurationQuantileOpt = 0.5,
        duration_target_under: DurationTargetUnderOpt = None,
        duration_method: DurationMethodOpt = "history_cdf",
        duration_lend_risk: DurationLendRiskOpt = "0.2,0.2,0.05",
        duration_recent: DurationRecentOpt = 1.0,
        duration_started_cap: DurationStartedCapOpt = True,
        duration_learned: DurationLearnedOpt = "limits",
        n_estimators: NEstimatorsOpt = 100,
        monotone: MonotoneOpt = True,
        tune: TuneOpt = 0,
        tune_objective: TuneObjectiveOpt = "f1",
        precision_floor: PrecisionFloorOpt = 0.5,
        select_features: SelectFeaturesOpt = False,
        ablation: AblationOpt = False,
        threads: ThreadsOpt = 0,
        max_fit_rows: MaxFitRowsOpt = None,
        alias: AliasOpt = None,
        experiment: ExperimentOpt = None,
        out: OutOpt = None,
    ) -> None:
        """Train WillJobsArrive, NewLoadEstimate and JobDuration; print the report; log to MLflow."""
        run_command(TrainArgs(**locals()))


def run_command(a: TrainArgs) -> None:
    """Run `sia train` with the parsed command line ``a``: check it, open the store, read the
    workload, train, evaluate and register, print the report."""
    from sia.models.report import print_report
    from sia.pipelines.tracking import StoreSetup, experiment_name
    from sia.pipelines.train import run_training

    started = time.perf_counter()

    def say(message: str) -> None:
        typer.echo(f"[{time.perf_counter() - started:6.1f} s] {message}", err=True)

    ks = _check_args(a)
    alias = training_alias(a)
    days = a.days
    if a.trace is None and days is None:
        days = a.warmup_days + a.train_days + a.val_days + 1.0  # enough synthetic days to split
    out_dir = prepare_dir(a.out or run_folder(output_root() / "train", a.trace or a.synthetic))
    with FolderLock(out_dir):
        # the store first: an unreachable or silent server fails before any work
        store = StoreSetup(experiment=experiment_name(a.experiment))
        say(f"reading {a.trace if a.trace is not None else f'the synthetic workload {a.synthetic}'}")
        wl = inputs.workload_from_options(a.trace, a.synthetic, a.fmt, a.map_, a.pool_from,
                                          a.time_unit, a.clean, a.quotas, a.load_range, a.seed,
                                          days, arrival=a.arrival)
        config = _train_config(a, ks)
        outcome = run_training(wl.jobs, wl.pools, config, trace=wl.source, out_dir=out_dir,
                               tune=a.tune, tune_objective=a.tune_objective,
                               precision_floor=a.precision_floor, alias=alias, store=store,
                               progress=say)
    say("done")
    print_report(outcome.result.tables)
    _print_outcome(outcome, alias)


def training_alias(a: TrainArgs) -> str | None:
    """Return the alias the new versions get: ``--alias``; else ``champion`` for a trace, and
    none for synthetic training (it never moves an alias the user did not name). ConfigError
    when neither a trace nor ``--synthetic`` is given."""
    if a.trace is None and a.synthetic is None:
        raise ConfigError("sia train needs a TRACE (e.g. builtin:philly) or --synthetic VARIANT "
                          "(e.g. --synthetic base); predictors learn the trace they serve")
    if a.alias is not None:
        return inputs.check_alias(a.alias)
    return "champion" if a.trace is not None else None


def run_folder(root: Path, source: str) -> Path:
    """Return a new folder under ``root`` for one training's report, ``<UTC time>-<trace>``
    (``-2``, ``-3`` ... when taken), so a training never overwrites an earlier one's."""
    import re
    from datetime import UTC, datetime

    name = re.sub(r"[^A-Za-z0-9_.+-]+", "_", Path(str(source)).name)[:60].strip("_.") or "trace"
    stem = f"{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{name}"
    folder, n = root / stem, 1
    while folder.exists():
        n += 1
        folder = root / f"{stem}-{n}"
    return folder


def _check_args(a: TrainArgs) -> tuple[int, ...]:
    """Check the command line before any work; return the windows in minutes."""
    ks = inputs.parse_windows(a.windows)
    inputs.check_seed(a.seed)
    from sia.models.will_arrive import METHODS

    if a.will_arrive_select not in ("auto", *METHODS):
        raise ConfigError(f"--will-arrive-select must be auto or one of {', '.join(METHODS)}, "
                          f"not {a.will_arrive_select!r}")
    if a.target_recall is not None and not 0.0 < a.target_recall <= 1.0:
        raise ConfigError(f"--target-recall must be in (0, 1], not {a.target_recall}")
    parse_threshold(a.threshold)  # a bad --threshold fails before any work
    if a.n_estimators < 1:
        raise ConfigError(f"--n-estimators must be >= 1, not {a.n_estimators}")
    if a.tune < 0:
        raise ConfigError(f"--tune must be >= 0, not {a.tune}")
    if a.load_method not in ("sliding_max", "calibrated", "quantile", "auto"):
        raise ConfigError("--load-method must be sliding_max, calibrated, quantile or auto, "
                          f"not {a.load_method!r}")
    if not 0.0 <= a.duration_quantile <= 1.0:
        raise ConfigError(f"--duration-quantile must be in [0, 1], not {a.duration_quantile}")
    if a.duration_target_under is not None and not 0.0 <= a.duration_target_under <= 1.0:
        raise ConfigError("--duration-target-under must be in [0, 1], not "
                          f"{a.duration_target_under}")
    return ks


def parse_threshold(text: str | None) -> float | str:
    """Return the WillJobsArrive threshold of ``--threshold`` (a rule name or a probability)."""
    from sia.models.will_arrive import THRESHOLD_RULES

    if text is None:
        return THRESHOLD_RULES[0]
    rule = text.strip().lower().replace("-", "_")
    if rule in THRESHOLD_RULES:
        return rule
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:  # nan fails too
        raise ConfigError(f"--threshold must be half-f, tail or a probability in (0, 1), "
                          f"not {text!r}")
    return value


def _train_config(a: TrainArgs, ks: tuple[int, ...]) -> Any:
    """Return the TrainConfig of the command line (``--recipe`` default or paper)."""
    from sia.models.will_arrive import XGBParams
    from sia.pipelines.train import TrainConfig, max_fit_rows_override

    common = dict(train_days=a.train_days, val_days=a.val_days, warmup_days=a.warmup_days,
                  start_day=a.start_day, windows_min=ks, target_recall=a.target_recall,
                  ablation=a.ablation, load_windows=a.load_windows,
                  load_alpha=a.load_alpha, duration_quantile=a.duration_quantile,
                  duration_target_under=a.duration_target_under,
                  duration_lend_risk=_lend_risk(a.duration_lend_risk),
                  duration_recent=a.duration_recent,
                  duration_started_cap=a.duration_started_cap, threads=a.threads,
                  **max_fit_rows_override(a.max_fit_rows, "--max-fit-rows"))
    if a.duration_learned not in ("limits", "always", "never"):
        raise ConfigError(f"--duration-learned must be limits, always or never, not "
                          f"{a.duration_learned!r}")
    if a.threads < 0:
        raise ConfigError(f"--threads must be >= 0 (0: one per CPU core), not {a.threads}")
    if not 0.0 <= a.duration_recent <= 1.0:
        raise ConfigError(f"--duration-recent must be in [0, 1], not {a.duration_recent}")
    if a.recipe == "paper":
        set_by_recipe = {"--threshold": a.threshold is not None,
                         "--select-features": a.select_features,
                         "--will-arrive-select": a.will_arrive_select != "auto",
                         "--load-method": a.load_method != "calibrated",
                         "--duration-method": a.duration_method != "history_cdf",
                         "--duration-learned": a.duration_learned != "limits"}
        clash = [k for k, given in set_by_recipe.items() if given]
        if clash:
            raise ConfigError(f"--recipe paper sets {', '.join(clash)}; drop them or use "
                              "--recipe default")
        base = TrainConfig.paper()
        return TrainConfig.paper(**common, xgb=replace(base.xgb, n_estimators=a.n_estimators,
                                                       seed=a.seed))
    if a.recipe == "default":
        return TrainConfig(
            **common, threshold=parse_threshold(a.threshold), will_arrive_select=a.will_arrive_select,
            select_features=a.select_features,
            load_method=a.load_method, duration_method=a.duration_method,
            duration_learned=a.duration_learned,
            xgb=XGBParams(n_estimators=a.n_estimators, monotone=a.monotone, seed=a.seed))
    raise ConfigError(f"--recipe must be default or paper, not {a.recipe!r}")


def _arrival_line(window: Any) -> str:
    """One window's validation F against persistence's, e.g. ``720 min .838 (xgboost) vs
    .850, below``: a registered model below persistence on validation is named so."""
    f, p = window.metrics["f1"], window.baselines["persistence"]["f1"]
    side = "below" if f < p else ("tie" if f == p else "above")
    return f"{window.k_min} min {f:.3f} ({window.model.method_}) vs {p:.3f}, {side}"


def _print_outcome(outcome: Any, alias: str | None) -> None:
    """Print the split, JobDuration's calibration, where the report and the run are, what was
    registered and how to open the MLflow UI."""
    from sia.pipelines.tracking import ui_command

    s = outcome.result.split
    typer.echo(f"split: train days {s.train_start / 86400:.1f}-{s.train_end / 86400:.1f}, "
               f"validate days {s.train_end / 86400:.1f}-{s.val_end / 86400:.1f} ({s.how})")
    typer.echo("WillJobsArrive, validation F (registered method) against persistence: " + "; ".join(
        _arrival_line(w) for w in outcome.result.windows))
    d = outcome.result.duration
    typer.echo(f"JobDuration: quantile {d['quantile']:g}"
               + (f" (calibrated for a training under-prediction rate <= "
                  f"{d['target_under']:g}: {'met' if d['target_met'] else 'NOT met'})"
                  if "target_under" in d else "")
               + f", validation accuracy {d['accuracy']:.3f}, under-prediction rate "
                 f"{d['under_rate']:.3f}")
    typer.echo(f"report: {outcome.report_dir}")
    typer.echo(f"MLflow run id: {outcome.run_id}")
    versions = ", ".join(f"{n} v{v}" for n, v in outcome.versions.items())
    if alias:
        typer.echo(f"registered ({alias}): {versions}")
    else:
        typer.echo(f"registered without an alias (synthetic training moves none; pass "
                   f"--alias NAME to set one): {versions}")
    typer.echo(f"open the MLflow UI: {ui_command(outcome.tracking_uri)}")


def _lend_risk(text: str) -> tuple[float, ...]:
    """Parse --duration-lend-risk: one eps in [0, 1), or one per duration-bin edge."""
    from sia.models.job_duration import lend_risk_at_edges

    try:
        values = [float(v) for v in text.split(",")]
        return tuple(float(e) for e in lend_risk_at_edges(values))
    except ValueError:
        raise ConfigError(f"--duration-lend-risk {text!r}: give one eps in [0, 1) or three "
                          "(for the 5, 60 and 720 min bin edges), e.g. 0.2,0.2,0.05") from None
