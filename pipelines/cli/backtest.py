"""`sia backtest`: walk-forward evaluation of WillJobsArrive, retrained every few days as in production."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from sia.data.errors import ConfigError
from sia.data.paths import output_root
from sia.pipelines import inputs
from sia.pipelines.cli.train import (
    MonotoneOpt,
    SelectFeaturesOpt,
    ThresholdOpt,
    WillArriveSelectOpt,
    parse_threshold,
)


def register(app: typer.Typer) -> None:
    """Add the `backtest` command to ``app``."""

    @app.command("backtest")
    def backtest_cmd(
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
        retrain_every: Annotated[float, typer.Option(
            "--retrain-every", help="Days between retrainings (each model predicts that long).")
        ] = 3.0,
        train_days: Annotated[float, typer.Option(
            "--train-days", help="Each retraining fits on this many most recent days.")] = 21.0,
        from_day: Annotated[float | None, typer.Option(
            "--from-day", help="First day tested (default: the end of the default split's "
                               "training period, so the first model sees what `sia train`'s "
                               "does).", show_default=False)] = None,
        to_day: Annotated[float | None, typer.Option(
            "--to-day", help="Day the test ends (default: the last submission).",
            show_default=False)] = None,
        windows: Annotated[str, typer.Option(
            "--windows", help="Prediction windows k in minutes, comma separated.")] = "5,60,720",
        threshold: ThresholdOpt = None,
        select_features: SelectFeaturesOpt = False,
        will_arrive_select: WillArriveSelectOpt = "auto",
        monotone: MonotoneOpt = True,
        out: Annotated[Path | None, typer.Option(
            "--out", help="Report folder (default: <output root>/backtest).",
            show_default=False)] = None,
    ) -> None:
        """Retrain WillJobsArrive every --retrain-every days on the last --train-days; report P/R/F per fold."""
        from sia.models.will_arrive import METHODS
        from sia.pipelines.studies.backtest import run_backtest

        ks = inputs.parse_windows(windows)
        rule = parse_threshold(threshold)  # the choices `sia train` would make, backtested
        for name, v in (("--retrain-every", retrain_every), ("--train-days", train_days)):
            if not v > 0:
                raise ConfigError(f"{name} must be > 0 days, not {v}")
        if will_arrive_select not in ("auto", *METHODS):
            raise ConfigError(f"--will-arrive-select must be auto or one of {list(METHODS)}, "
                              f"not {will_arrive_select!r}")
        if from_day is not None and to_day is not None and to_day <= from_day:
            raise ConfigError(f"--to-day {to_day} must be after --from-day {from_day}")
        wl = inputs.workload_from_options(trace, synthetic, fmt, map_, pool_from, time_unit,
                                          clean, quotas, load_range, seed, days, arrival=arrival)
        from sia.pipelines.output import prepare_dir

        run_backtest(wl, windows_min=ks, every_days=retrain_every, train_days=train_days,
                     from_day=from_day, to_day=to_day,
                     out_dir=prepare_dir(out or output_root() / "backtest"),
                     threshold=rule, select_features=select_features,
                     select=will_arrive_select, monotone=monotone, echo=typer.echo)
