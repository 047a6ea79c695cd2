"""`sia figure16`: reproduce SIA Figure 16 (locality) and compare the placement chains."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from sia.data.paths import output_root

#: The config shipped with the project (experiments/locality/figure16.yaml beside the package folders).
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "experiments" / "locality" / "figure16.yaml"

HELP = """Reproduce SIA Figure 16: SIA and HiveD* with locality (buddy cells) on 2/4/8 pools.

Replays every (variant, seed, policy) of CONFIG (default: the project's
experiments/locality/figure16.yaml) on 8-GPU servers with every gang in one cell,
scores each against FCFS on the same cells, once per allocator setting of
the config (default: adopt_loans on and off), and compares the placement
chains (buddy only; buddy then mcf / hungarian / milp). Writes
DIR/figure16.csv and .md (mean over seeds), DIR/figure16_by_allocator.md
(speedup / % slowed per policy, one column per allocator), DIR/chains.csv
and .md, DIR/figure16_runs.csv, DIR/chain_runs.csv and DIR/figure16.png.
Each replay's per-job result is kept as
DIR/replays/VARIANT/seed-S/GROUP/POLICY.parquet; running the same command
again on the same DIR reuses the finished replays (an interrupted run
resumes) and redoes those the config changed.

\b
Example:
  sia figure16 --out out/figure16 --workers 1
"""


def register(app: typer.Typer) -> None:
    """Add the `figure16` command to ``app``."""

    @app.command("figure16", help=HELP)
    def figure16_cmd(
        config: Annotated[Path | None, typer.Argument(help="Figure 16 config (YAML).")] = None,
        out: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None,
        workers: Annotated[int, typer.Option(
            "--workers", help="Local worker processes (1 = in-process).")] = 2,
        redo: Annotated[bool, typer.Option(
            "--redo", help="Replay everything, reusing nothing from DIR/replays (e.g. after "
            "changing a policy's or the allocator's code, which the resume key does not "
            "see).")] = False,
        causes: Annotated[bool, typer.Option(
            "--causes", help="Instead: classify why each slowed job of each locality policy "
            "was slowed (DIR/causes.csv, causes.md, causes_jobs.csv).")] = False,
        set_: Annotated[list[str] | None, typer.Option(
            "--set", help="Override a config key, KEY=VALUE (dotted KEY, VALUE read as YAML; "
            "repeatable), e.g. --set grid.experiments=3 --set predictors.alias=paper.",
            metavar="KEY=VALUE", show_default=False)] = None,
        allow_large: Annotated[bool, typer.Option(
            "--allow-large", help="Run a study past the size limits (20,000 replays, "
            "1,000 days of synthetic jobs) that are otherwise refused before any work.")] = False,
    ) -> None:
        from sia.pipelines.studies.figure16 import load_figure16_config, run_causes, run_figure16

        if workers < 1:
            raise typer.BadParameter("must be >= 1", param_hint="--workers")
        cfg = load_figure16_config(config or DEFAULT_CONFIG, set_)
        from sia.pipelines.studies.limits import check_figure16

        check_figure16(cfg, str(config or DEFAULT_CONFIG), allow_large)
        from sia.pipelines.output import FolderLock, prepare_dir

        out_dir = prepare_dir(out or output_root() / "figure16")
        with FolderLock(out_dir):  # a second command on this --out stops at once
            if causes:
                run_causes(cfg, out_dir, workers=workers)
                typer.echo((out_dir / "causes.md").read_text())
                typer.echo(f"wrote {out_dir}/causes.csv, causes.md, causes_jobs.csv")
                return
            run = run_figure16(cfg, out_dir, workers=workers, progress=True, say=typer.echo,
                               reuse=not redo)
            typer.echo((out_dir / "figure16.md").read_text())
            typer.echo((out_dir / "figure16_by_allocator.md").read_text())
            typer.echo((out_dir / "chains.md").read_text())
            typer.echo(f"{len(run.ran)} replay(s) run, {len(run.reused)} reused from "
                       f"{out_dir}/replays ({run.wall_s:.1f} s)")
            typer.echo(f"wrote {out_dir}/figure16.csv, figure16.md, figure16_by_allocator.md, "
                       "chains.csv, chains.md, figure16_runs.csv, chain_runs.csv, figure16.png")
