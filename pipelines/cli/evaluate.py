"""`sia evaluate CONFIG.yaml`: run (or resume) a scheduler evaluation sweep."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from sia.data.paths import output_root

if TYPE_CHECKING:  # the sweep's stack (xgboost, mlflow, dask ...) is imported when the command runs
    import polars as pl
    from sia.pipelines.studies.evaluate import SweepResult

HELP = """Run a scheduler evaluation sweep described by an experiment config (YAML).

Each experiment picks pools at random from the trace (or all of them), sets
their quotas (from load, SIA 6.1, or as recorded), replays FCFS and every
policy, and scores them against FCFS. Writes DIR/exp-XXX/POLICY.parquet per
replay, DIR/summary.csv/.md (per experiment and policy, then the aggregate),
plots under DIR/plots and DIR/exp-XXX/plots, and one MLflow run per
experiment (nested under a run for the sweep) in the 'sia-evaluations'
experiment. Re-running the same command resumes: finished replays are kept.

\b
Examples:
  sia evaluate experiments/figure13.yaml --workers 2
  sia evaluate experiments/table17_philly.yaml --out out/table17
  sia evaluate experiments/figure14.yaml --dask tcp://scheduler:8786
"""

TABLE_COLUMNS = ("mean_speedup", "geomean_speedup", "p5_speedup", "p95_speedup", "pct_slowed",
                 "total_slowdown_min", "max_slowdown_min")
HEADERS = ("mean", "gmean", "p5", "p95", "%slow", "slow min", "max min")


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def wide_console() -> Console:
    """Return a console at least 140 columns wide, so result tables are not squeezed.

    Rich falls back to 80 columns when output goes to a file or CI log.
    """
    console = Console()
    return console if console.width >= 140 else Console(width=140)


def aggregate_table(agg: pl.DataFrame, title: str) -> Table:
    """Return a rich table of the sweep's aggregate (one row per group and policy)."""
    table = Table(title=title, caption="speedup over FCFS: mean, geometric mean, p5, p95; "
                                       "%slow: jobs slowed; slowdown minutes: total, max")
    multi = agg["group"].n_unique() > 1 if agg.height else False
    if multi:
        table.add_column("group")
    table.add_column("policy", no_wrap=True)
    table.add_column("exps", justify="right")
    table.add_column("jobs", justify="right")
    for h in HEADERS:
        table.add_column(h, justify="right", no_wrap=True)
    for row in agg.iter_rows(named=True):
        cells = ([row["group"]] if multi else []) + [row["policy"], str(row["experiments"]),
                                                     _fmt(row["n_jobs"])]
        cells += [_fmt(row[c]) for c in TABLE_COLUMNS]
        table.add_row(*cells)
    return table


def report(result: SweepResult, console: Console, name: str) -> None:
    """Print the aggregate table, what ran, where the files are and the MLflow UI command."""
    from sia.pipelines.tracking import ui_command

    console.print(aggregate_table(result.aggregate,
                                  f"{name}: speedup over FCFS and slowdowns (jobs after warm-up)"))
    console.print(f"replays run now: {len(result.ran)}, reused from disk: {len(result.reused)}; "
                  f"{result.wall_s:.1f} s")
    console.print(f"results: {result.out_dir}/summary.md, summary.csv, plots/, exp-XXX/",
                  soft_wrap=True, highlight=False)
    if result.tracking_uri:
        console.print(f"MLflow: parent run {result.parent_run_id}; open the UI with")
        console.print(f"  {ui_command(result.tracking_uri)}", soft_wrap=True, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the `evaluate` command to ``app``."""

    @app.command("evaluate", help=HELP)
    def evaluate(
        config: Annotated[Path, typer.Argument(help="Experiment config (YAML), e.g. "
                                                    "experiments/figure13.yaml.",
                                               show_default=False)],
        out: Annotated[Path | None, typer.Option(
            "--out", help="Results folder. Default: <output root>/evaluations/<config name>.",
            show_default=False)] = None,
        dask: Annotated[str | None, typer.Option(
            "--dask", help="Run the replays on the Dask cluster whose scheduler is at ADDRESS "
                           "(e.g. tcp://127.0.0.1:8786) instead of local processes.",
            metavar="ADDRESS", show_default=False)] = None,
        workers: Annotated[int | None, typer.Option(
            "--workers", help="Local worker processes (default: the CPU count; 1 runs "
                              "in-process).", show_default=False)] = None,
        no_mlflow: Annotated[bool, typer.Option(
            "--no-mlflow", help="Do not log MLflow runs (files only).")] = False,
        set_: Annotated[list[str] | None, typer.Option(
            "--set", help="Override a config key, KEY=VALUE (dotted KEY, VALUE read as YAML; "
            "repeatable), e.g. --set grid.experiments=3 --set predictors.alias=paper.",
            metavar="KEY=VALUE", show_default=False)] = None,
        allow_large: Annotated[bool, typer.Option(
            "--allow-large", help="Run a study past the size limits (20,000 replays, "
            "1,000 days of synthetic jobs) that are otherwise refused before any work.")] = False,
        windows: Annotated[str | None, typer.Option(
            "--windows", help="Run the study once per replay window, START:END in days since "
            "the trace's first submission (END may be 'end'), comma-separated, e.g. "
            "24:38,31:45,38:end: each window's results in DIR/days-START-END (predictors "
            "trained on the fly train on the days before each), then DIR/windows.csv/.md with "
            "every window's rows and each policy pooled over the windows.",
            metavar="START:END,...", show_default=False)] = None,
    ) -> None:
        from sia.pipelines.output import FolderLock, prepare_dir
        from sia.pipelines.studies.experiment import load_config
        from sia.pipelines.studies.limits import check_evaluate

        if windows is not None:  # every window's config is checked; the config's own window not
            _evaluate_windows(config, set_ or [], windows, out, workers, dask, no_mlflow,
                              allow_large)
            return
        cfg = load_config(config, set_)
        check_evaluate(cfg, allow_large)  # a study too large fails before any work
        out_dir = prepare_dir(out or output_root() / "evaluations" / cfg.name)
        with FolderLock(out_dir):  # a second command on this --out stops at once
            _evaluate(cfg, config, out_dir, workers, dask, no_mlflow)


def _evaluate(cfg: Any, config: Path, out_dir: Path, workers: int | None, dask: str | None,
              no_mlflow: bool) -> None:
    """Run the sweep of ``cfg`` into ``out_dir`` (locked by the caller) and print its report."""
    from sia.pipelines.executors import make_executor
    from sia.pipelines.studies.evaluate import BASELINE, run_sweep

    console = wide_console()
    executor = make_executor(workers, dask)
    console.print(f"[bold]{cfg.name}[/]: {config} -> {out_dir} ({executor.description})",
                  soft_wrap=True, highlight=False)
    try:
        result = run_sweep(cfg, out_dir, executor, progress=True, log_mlflow=not no_mlflow,
                           say=console.print)
    finally:
        executor.close()
    report(result, console, cfg.name)
    if cfg.regions is not None:
        from sia.pipelines.studies import regions_report

        for f in regions_report.report(config, out_dir, cfg, sweep=result):
            if f.suffix == ".md":
                console.print(f.read_text(), soft_wrap=True, highlight=False, markup=False)
            console.print(f"wrote {f}", soft_wrap=True, highlight=False, markup=False)
    if BASELINE not in {p.label for p in cfg.policies}:
        console.print("(FCFS is the baseline of every metric; add fcfs to policies to list it)")


def _evaluate_windows(config: Path, set_: list[str], text: str, out: Path | None,
                      workers: int | None, dask: str | None, no_mlflow: bool,
                      allow_large: bool) -> None:
    """``--windows``: every window's config and replay window checked first, then one sweep per
    window into its folder, then the windows' table (:mod:`sia.pipelines.studies.windows`)."""
    from sia.pipelines.output import FolderLock, prepare_dir
    from sia.pipelines.studies import windows as wmod
    from sia.pipelines.studies.experiment import load_config

    chosen = wmod.parse_windows(text)
    wmod.check_no_replay_sets(set_)
    base = load_config(config, [*set_, *chosen[0].overrides()])
    cfgs = [load_config(config, [*set_, *w.overrides(), *wmod.alias_override(base, w)])
            for w in chosen]
    wmod.check_windows(chosen, cfgs, allow_large)
    out_dir = prepare_dir(out or output_root() / "evaluations" / base.name)
    console = wide_console()
    with FolderLock(out_dir):
        done = []
        for w, cfg in zip(chosen, cfgs, strict=True):
            console.print(f"[bold]window {w.label}[/]")
            folder = prepare_dir(out_dir / w.dirname)
            _evaluate(cfg, config, folder, workers, dask, no_mlflow)
            done.append((w, folder))
        table = wmod.windows_table(done)
        files = wmod.write_windows(table, out_dir)
    pooled = table.filter(table["window"] == wmod.POOLED)
    console.print(aggregate_table(pooled, f"{base.name}: pooled over {len(chosen)} windows "
                                          "(jobs after each window's warm-up)"))
    for f in files:
        console.print(f"wrote {f}", soft_wrap=True, highlight=False, markup=False)
