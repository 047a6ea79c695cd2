"""`sia train`: train, evaluate, track and register the predictors on a trace."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from sia.data.errors import ConfigError
from sia.data.paths import output_root
from sia.pipelines import inputs


def register(app: typer.Typer) -> None:
    """Add the `train` command to ``app``."""

    @app.command("train")
    def train_cmd(
        trace: inputs.TraceArg = None,
        synthetic: inputs.SyntheticOpt = None,
        fmt: inputs.FormatOpt = "auto",
        map_: inputs.MapOpt = None,
        pool_from: inputs.PoolFromOpt = None,
        time_unit: inputs.TimeUnitOpt = "s",
        clean: inputs.CleanOpt = False,
        quotas: inputs.QuotasOpt = None,
        load_range: inputs.LoadRangeOpt = "0.6,1.1",
        seed: inputs.SeedOpt = 0,
        days: inputs.DaysOpt = None,
        train_days: Annotated[float, typer.Option(
            "--train-days", help="Days of the training period.")] = 21.0,
        val_days: Annotated[float, typer.Option(
            "--val-days", help="Days of the validation period (right after training).")] = 14.0,
        warmup_days: Annotated[float, typer.Option(
            "--warmup-days", help="Days skipped after the trace's active start.")] = 3.0,
        start_day: Annotated[float | None, typer.Option(
            "--start-day", help="Day (since the trace start) where the warm-up begins; default: "
                                "the first day with >= 10% of the median daily submissions.",
            show_default=False)] = None,
        windows: Annotated[str, typer.Option(
            "--windows", help="Prediction windows k in minutes, comma separated.")] = "5,60,720",
        threshold: Annotated[float | None, typer.Option(
            "--threshold", help="WillJobsArrive decision threshold (default: the one that "
                                "maximizes F on the last 20% of the training period).",
            show_default=False)] = None,
        target_recall: Annotated[float | None, typer.Option(
            "--target-recall", help="Choose each window's threshold as the largest reaching "
                                    "this recall on the last 20% of the training period.",
            show_default=False)] = None,
        recipe: Annotated[str, typer.Option(
            "--recipe", help="default (the product's: choices made on the training tail, "
                             "rhythm features) or paper (SIA's recipe as published: XGBoost "
                             "defaults, threshold 0.5, Table 9 features, sliding max; for "
                             "comparisons; it sets --threshold, --will-arrive-select, "
                             "--load-method and --duration-method).")
        ] = "default",
        will_arrive_select: Annotated[str, typer.Option(
            "--will-arrive-select", help="WillJobsArrive: auto (the best of XGBoost, "
                                         "persistence and always-yes on the training tail) or "
                                         "one of xgboost / persistence / always_yes.")] = "auto",
        load_windows: Annotated[int, typer.Option(
            "--load-windows", help="NewLoadEstimate: windows in the sliding max (N).")] = 3,
        load_alpha: Annotated[float, typer.Option(
            "--load-alpha", help="NewLoadEstimate: target exceedance rate of the calibrated "
                                 "estimate.")] = 0.1,
        load_method: Annotated[str, typer.Option(
            "--load-method", help="NewLoadEstimate registered: sliding_max (the paper's), "
                                  "calibrated, quantile (XGBoost quantile + conformal offset) "
                                  "or auto (least over-reservation within the target "
                                  "exceedance on the last training days). All are reported.")
        ] = "calibrated",
        duration_quantile: Annotated[float, typer.Option(
            "--duration-quantile", help="JobDuration: bin this quantile of the similar jobs' "
                                        "durations (0.5 = the paper's median; higher = fewer "
                                        "under-predictions).")] = 0.5,
        duration_target_under: Annotated[float | None, typer.Option(
            "--duration-target-under", help="JobDuration: instead of --duration-quantile, the "
                                            "smallest quantile whose under-prediction rate on "
                                            "the training period is <= this (evaluated on "
                                            "validation).", show_default=False)] = None,
        duration_method: Annotated[str, typer.Option(
            "--duration-method", help="JobDuration: history_cdf (the share of the similar "
                                      "finished jobs that fit each window; SIA lends a job "
                                      "where that share is >= 1 - --duration-lend-risk), "
                                      "history (the paper's rule: the median's bin), auto (the "
                                      "learned model, with SIA's risk-aware lending, only "
                                      "where it lends more than the rule without overrunning "
                                      "more often on the last days of the training period) "
                                      "or xgboost (always the learned model; SIA lends by its "
                                      "median bin).")] = "history_cdf",
        duration_lend_risk: Annotated[str, typer.Option(
            "--duration-lend-risk", help="JobDuration history_cdf: SIA lends a job in window w "
                                         "only when P(duration <= w) >= 1 - eps; one eps, or "
                                         "one per duration-bin edge (5, 60, 720 min), comma "
                                         "separated.")] = "0.2,0.2,0.05",
        duration_recent: Annotated[float, typer.Option(
            "--duration-recent", help="JobDuration history_cdf: weight (0-1) of the shares "
                                      "over the similar jobs' last 50 finished ones against "
                                      "the shares over all of them.")] = 1.0,
        n_estimators: Annotated[int, typer.Option(
            "--n-estimators", help="XGBoost trees (when not tuning).")] = 100,
        tune: Annotated[int, typer.Option(
            "--tune", help="Optuna trials per window (0 = no search).")] = 0,
        tune_objective: Annotated[str, typer.Option(
            "--tune-objective", help="f1, or recall_at_precision (with --precision-floor).")
        ] = "f1",
        precision_floor: Annotated[float, typer.Option(
            "--precision-floor", help="Precision floor of recall_at_precision.")] = 0.5,
        no_ablation: Annotated[bool, typer.Option(
            "--no-ablation", help="Skip the feature-set ablation (one fit per window).")] = False,
        alias: Annotated[str, typer.Option(
            "--alias", help="Registry alias set on the new model versions.")] = "champion",
        experiment: Annotated[str | None, typer.Option(
            "--experiment", help="MLflow experiment to log the run into (default: "
                                 "$MLFLOW_EXPERIMENT_NAME, else sia-predictors).",
            show_default=False)] = None,
        out: Annotated[Path | None, typer.Option(
            "--out", help="Report folder (default: <output root>/train).",
            show_default=False)] = None,
    ) -> None:
        """Train WillJobsArrive, NewLoadEstimate and JobDuration; print the report; log to MLflow."""
        from sia.models.report import print_report
        from sia.models.will_arrive import XGBParams
        from sia.pipelines.tracking import StoreSetup, experiment_name, ui_command
        from sia.pipelines.train import TrainConfig, run_training

        started = time.perf_counter()

        def say(message: str) -> None:
            typer.echo(f"[{time.perf_counter() - started:6.1f} s] {message}", err=True)

        ks = inputs.parse_windows(windows)
        inputs.check_seed(seed)
        if not alias.strip():
            raise ConfigError("--alias must be a non-empty name")
        if will_arrive_select not in ("auto", "xgboost", "persistence", "always_yes"):
            raise ConfigError("--will-arrive-select must be auto, xgboost, persistence or "
                              f"always_yes, not {will_arrive_select!r}")
        if target_recall is not None and not 0.0 < target_recall <= 1.0:
            raise ConfigError(f"--target-recall must be in (0, 1], not {target_recall}")
        if threshold is not None and not 0.0 < threshold < 1.0:
            raise ConfigError(f"--threshold must be in (0, 1), not {threshold}")
        if n_estimators < 1:
            raise ConfigError(f"--n-estimators must be >= 1, not {n_estimators}")
        if tune < 0:
            raise ConfigError(f"--tune must be >= 0, not {tune}")
        if load_method not in ("sliding_max", "calibrated", "quantile", "auto"):
            raise ConfigError("--load-method must be sliding_max, calibrated, quantile or auto, "
                              f"not {load_method!r}")
        if not 0.0 <= duration_quantile <= 1.0:
            raise ConfigError(f"--duration-quantile must be in [0, 1], not {duration_quantile}")
        if duration_target_under is not None and not 0.0 <= duration_target_under <= 1.0:
            raise ConfigError("--duration-target-under must be in [0, 1], not "
                              f"{duration_target_under}")
        if trace is None and days is None:
            days = warmup_days + train_days + val_days + 1.0  # enough synthetic days to split
        # the store first: an unreachable or silent server fails before any work
        store = StoreSetup(experiment=experiment_name(experiment))
        say(f"reading {trace if trace is not None else 'the synthetic workload'}")
        wl = inputs.workload_from_options(trace, synthetic, fmt, map_, pool_from, time_unit,
                                          clean, quotas, load_range, seed, days)
        common = dict(train_days=train_days, val_days=val_days, warmup_days=warmup_days,
                      start_day=start_day, windows_min=ks, target_recall=target_recall,
                      ablation=not no_ablation, load_windows=load_windows, load_alpha=load_alpha,
                      duration_quantile=duration_quantile,
                      duration_target_under=duration_target_under,
                      duration_lend_risk=_lend_risk(duration_lend_risk),
                      duration_recent=duration_recent)
        if not 0.0 <= duration_recent <= 1.0:
            raise ConfigError(f"--duration-recent must be in [0, 1], not {duration_recent}")
        if recipe == "paper":
            set_by_recipe = {"--threshold": threshold is not None,
                             "--will-arrive-select": will_arrive_select != "auto",
                             "--load-method": load_method != "calibrated",
                             "--duration-method": duration_method != "history_cdf"}
            clash = [k for k, given in set_by_recipe.items() if given]
            if clash:
                raise ConfigError(f"--recipe paper sets {', '.join(clash)}; drop them or use "
                                  "--recipe default")
            base = TrainConfig.paper()
            config = TrainConfig.paper(**common, xgb=replace(base.xgb, n_estimators=n_estimators,
                                                             seed=seed))
        elif recipe == "default":
            config = TrainConfig(
                **common, threshold=threshold, will_arrive_select=will_arrive_select,
                load_method=load_method, duration_method=duration_method,
                xgb=XGBParams(n_estimators=n_estimators, seed=seed))
        else:
            raise ConfigError(f"--recipe must be default or paper, not {recipe!r}")
        outcome = run_training(wl.jobs, wl.pools, config, trace=wl.source,
                               out_dir=out or output_root() / "train", tune=tune,
                               tune_objective=tune_objective, precision_floor=precision_floor,
                               alias=alias, store=store, progress=say)
        say("done")
        print_report(outcome.result.tables)
        s = outcome.result.split
        typer.echo(f"split: train days {s.train_start / 86400:.1f}-{s.train_end / 86400:.1f}, "
                   f"validate days {s.train_end / 86400:.1f}-{s.val_end / 86400:.1f} ({s.how})")
        d = outcome.result.duration
        typer.echo(f"JobDuration: quantile {d['quantile']:g}"
                   + (f" (calibrated for a training under-prediction rate <= "
                      f"{d['target_under']:g}: {'met' if d['target_met'] else 'NOT met'})"
                      if "target_under" in d else "")
                   + f", validation accuracy {d['accuracy']:.3f}, under-prediction rate "
                     f"{d['under_rate']:.3f}")
        typer.echo(f"report: {outcome.report_dir}")
        typer.echo(f"MLflow run id: {outcome.run_id}")
        typer.echo(f"registered ({alias}): " + ", ".join(
            f"{n} v{v}" for n, v in outcome.versions.items()))
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
