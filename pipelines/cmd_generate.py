"""`sia generate`: write a synthetic SIA workload (Appendix A.1 / C) as canonical Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from sia.data.variants import VARIANTS
from sia.pipelines import inputs

HELP = """Generate a synthetic workload of SIA Appendix A.1 / C and write it.

Base: 4 pools of 8 GPUs; job durations uniform in sqrt(10) to 100 minutes
(p 0.8) or 100 to 1000 minutes (p 0.2); widths 1/2/4/8 GPUs with p
0.7/0.1/0.15/0.05; jobs arrive in bursts whose total width is uniform in
[1, pool size], bursts Poisson-spaced so each pool's expected load equals a
target drawn uniformly in [0.6, 0.95]. Same --seed, same workload.

Writes OUT/jobs.parquet (canonical jobs plus a 'burst' column),
OUT/pools.parquet (pool, quota_gpus, target_load) and OUT/report.json.

\b
Variants:
""" + "\n".join(f"  {name}: {desc}" for name, desc in VARIANTS.items()) + """

\b
Examples:
  sia generate --out out/synthetic
  sia generate --variant more-queues --seed 3 --days 14 --out out/mq
"""


def register(app: typer.Typer) -> None:
    """Add the `generate` command to ``app``."""

    @app.command("generate", help=HELP)
    def generate(
        out: Annotated[Path, typer.Option("--out", help="Folder to write jobs.parquet, "
                                          "pools.parquet and report.json into.",
                                          show_default=False)],
        variant: Annotated[str, typer.Option(
            "--variant", help="Workload variant: " + ", ".join(VARIANTS) + ".")] = "base",
        seed: inputs.SeedOpt = 0,
        days: Annotated[float, typer.Option("--days", help="Days of arrivals to generate.")] = 3.0,
    ) -> None:
        from sia.pipelines.workload_io import pools_table_text, summary_lines, write_workload

        wl = inputs.workload_from_options(None, variant, "auto", None, None, "s", False, None,
                                          "0.6,1.1", seed, days)
        paths = write_workload(wl, out)
        for line in summary_lines(wl):
            typer.echo(line)
        typer.echo(pools_table_text(wl.pools))
        typer.echo(f"wrote {paths['jobs']}, {paths['pools']}, {paths['report']}")
