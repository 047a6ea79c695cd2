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
        regions: Annotated[bool, typer.Option(
            "--regions", help="The multi-region workload instead of --variant: regions hot (4 "
            "pools x 8 GPUs, higher load), mid (3 x 8, base) and cold (2 x 16, lower load); "
            "also writes OUT/regions.yml for `sia replay OUT --regions OUT/regions.yml`.")
        ] = False,
        max_jobs: inputs.MaxJobsOpt = None,
    ) -> None:
        from sia.pipelines.output import check_dir
        from sia.pipelines.workload_io import pools_table_text, summary_lines, write_workload

        check_dir(out)  # an unusable --out fails before the work
        if regions:
            _generate_regions(out, seed, days, variant, inputs.check_max(max_jobs, "--max-jobs"))
            return

        wl = inputs.workload_from_options(None, variant, "auto", None, None, "s", False, None,
                                          "0.6,1.1", seed, days, max_jobs=max_jobs)
        paths = write_workload(wl, out)
        for line in summary_lines(wl):
            typer.echo(line)
        typer.echo(pools_table_text(wl.pools))
        typer.echo(f"wrote {paths['jobs']}, {paths['pools']}, {paths['report']}")


def _generate_regions(out: Path, seed: int, days: float, variant: str,
                      max_jobs: int | None = None) -> None:
    """`sia generate --regions`: write the multi-region workload and its regions file."""
    from sia.data.errors import ConfigError
    from sia.data.schema import CleaningReport
    from sia.data.synthetic import REGIONS_LAYOUT, generate_regions_workload
    from sia.pipelines.inputs import Workload
    from sia.pipelines.output import write_text
    from sia.pipelines.workload_io import pools_table_text, summary_lines, write_workload

    if variant != "base":
        raise ConfigError(f"--regions: the multi-region workload has its own variants per region "
                          f"({', '.join(f'{r}: {v}' for r, v, _, _ in REGIONS_LAYOUT)}); "
                          f"drop --variant {variant}")
    inputs.check_seed(seed)
    jobs, pools, homes = generate_regions_workload(seed, days=days, max_jobs=max_jobs)
    source = f"synthetic:regions seed={seed}"
    report = CleaningReport(source=source, rows_read=jobs.height, rows_kept=jobs.height,
                            pools=pools.height)
    report.notes.append("quotas: synthetic pool sizes; regions: " + ", ".join(
        f"{r} ({n} pools x {g} GPUs, {v})" for r, v, n, g in REGIONS_LAYOUT))
    wl = Workload(jobs, pools, report, source)
    paths = write_workload(wl, out)
    lines = ["# pool -> home region of the multi-region synthetic workload (sia generate "
             "--regions);", "# every pool's data (size 1) starts at home, a copy takes 1 hour",
             "transfer_rate: 0.000277778", "period_h: 24", "pools:"]
    lines += [f"  {p}: {r}" for p, r in homes.items()]
    write_text(out / "regions.yml", "\n".join(lines) + "\n")
    for line in summary_lines(wl):
        typer.echo(line)
    typer.echo(pools_table_text(wl.pools))
    typer.echo(f"wrote {paths['jobs']}, {paths['pools']}, {paths['report']}, {out / 'regions.yml'}")
