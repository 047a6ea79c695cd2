"""`sia figure5`: reproduce SIA Figure 5 (oracle and baselines on synthetic workloads)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sia.data.paths import output_root

#: The config shipped with the project (experiments/figure5.yaml beside the package folders).
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "experiments" / "figure5.yaml"

HELP = """Reproduce SIA Figure 5: FCFS, SSF, gSSF, MaxMin, SIA_VC and the oracle MILP.

Replays every (workload, seed, policy) of CONFIG (default: the project's
experiments/figure5.yaml) on synthetic workloads, scores each against FCFS
and writes DIR/figure5.csv (one row per replay), DIR/figure5_summary.csv
(median and range over seeds) and DIR/figure5.png (the three panels).
Each replay's per-job result is kept as
DIR/replays/WORKLOAD/seed-S/POLICY.parquet; running the same command again
on the same DIR reuses the finished replays (a crashed or interrupted run
resumes) and redoes those the config changed.

\b
Example:
  sia figure5 --out out/figure5
"""


def register(app: typer.Typer) -> None:
    """Add the `figure5` command to ``app``."""

    @app.command("figure5", help=HELP)
    def figure5_cmd(
        config: Annotated[Path | None, typer.Argument(help="Figure 5 config (YAML).")] = None,
        out: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None,
        workers: Annotated[int | None, typer.Option(
            "--workers", help="Local worker processes (default: CPU count; 1 = in-process).")] = None,
        redo: Annotated[bool, typer.Option(
            "--redo", help="Replay everything, reusing nothing from DIR/replays (e.g. after "
            "changing a policy's code, which the resume key does not see).")] = False,
        set_: Annotated[list[str] | None, typer.Option(
            "--set", help="Override a config key, KEY=VALUE (dotted KEY, VALUE read as YAML; "
            "repeatable), e.g. --set grid.experiments=3 --set predictors.alias=paper.",
            metavar="KEY=VALUE", show_default=False)] = None,
        allow_large: Annotated[bool, typer.Option(
            "--allow-large", help="Run a study past the size limits (20,000 replays, "
            "1,000 days of synthetic jobs) that are otherwise refused before any work.")] = False,
    ) -> None:
        from sia.pipelines.studies.figure5 import (
            METRICS,
            load_figure5_config,
            run_figure5,
            summarize,
        )

        cfg = load_figure5_config(config or DEFAULT_CONFIG, set_)
        from sia.pipelines.studies.limits import check_figure5

        check_figure5(cfg, str(config or DEFAULT_CONFIG), allow_large)
        from sia.pipelines.output import FolderLock, prepare_dir

        out_dir = prepare_dir(out or output_root() / "figure5")
        with FolderLock(out_dir):  # a second command on this --out stops at once
            run = run_figure5(cfg, out_dir, workers=workers, say=typer.echo, reuse=not redo)
            table = run.table
            summary = summarize(table)
            t = Table(title=escape("Figure 5: median [min, max] over seeds, vs FCFS"))
            t.add_column("workload")
            t.add_column("policy")
            for _, label in METRICS:
                t.add_column(label, justify="right")
            for r in summary.iter_rows(named=True):
                t.add_row(r["workload"], r["policy"], *(
                    f"{r[k + '_median']:.2f} [{r[k + '_min']:.2f}, {r[k + '_max']:.2f}]"
                    for k, _ in METRICS))
            Console().print(t)
            gaps = table.filter(table["oracle_status"].is_not_null())
            for r in gaps.iter_rows(named=True):
                typer.echo(f"oracle {r['workload']}/seed {r['seed']}: {r['oracle_status']}, "
                           f"gap {r['oracle_gap']:.4f}")
            typer.echo(f"{len(run.ran)} replay(s) run, {len(run.reused)} reused from "
                       f"{out_dir}/replays ({run.wall_s:.1f} s)")
            typer.echo(f"wrote {out_dir}/figure5.csv, figure5_summary.csv, figure5.png and the "
                       "per-job Parquet of every replay under replays/")
