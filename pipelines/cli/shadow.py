"""`sia shadow`: replay a trace against a running `sia serve` and compare it with `sia replay`."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Annotated

import typer
from sia.data.errors import ConfigError
from sia.pipelines import inputs
from sia.pipelines.studies.experiment import DEFAULT_WINDOWS_MIN

HELP = """Replay a trace against a running `sia serve`.

A service in shadow mode is fed the schedule an FCFS cluster runs (its
submissions, starts and ends); its report (GET /report) is printed.
A service in drive mode is driven:

Plays the cluster: sends the trace's submissions, moves the service's clock
instant by instant, runs each start the service decides for the job's trace
duration and reports its end. With --compare it also replays the same jobs
with `sia replay`'s engine (the same policy, predictors by --alias, seed and
tick) and compares every start: it prints `identical: K starts` and exits 0,
or names the first job whose start differs and exits 1.

Take the trace options (--clean, --replay-start-day ...) the service was
started with, so that both hold the same pools and history.

\b
Example:
  sia shadow builtin:philly --clean --replay-start-day 58 --replay-end-day 72 \\
      --url http://127.0.0.1:8765 --token-file token.txt --alias demo --compare
"""


def register(app: typer.Typer) -> None:
    """Add the `shadow` command to ``app``."""

    @app.command("shadow", help=HELP)
    def shadow_cmd(
        trace: inputs.TraceArg = None,
        url: Annotated[str, typer.Option("--url", help="The service, e.g. "
                                         "http://127.0.0.1:8765.")] = ...,
        token_file: Annotated[Path | None, typer.Option(
            "--token-file", help="File holding the bearer token (else $SIA_SERVE_TOKEN).",
            metavar="FILE")] = None,
        compare: Annotated[bool, typer.Option(
            "--compare", help="Compare every start with `sia replay`'s.")] = False,
        policy: Annotated[str, typer.Option("--policy", help="The service's policy (for "
                                            "--compare).")] = "sia",
        alias: Annotated[str | None, typer.Option("--alias", help="Predictors' alias (for "
                                                  "--compare).")] = None,
        windows: Annotated[str, typer.Option("--windows", help="Prediction windows (minutes).")
                           ] = ",".join(str(k) for k in DEFAULT_WINDOWS_MIN),
        tick: Annotated[float, typer.Option("--tick", help="Scheduling tick (s).")] = 300.0,
        lookahead: Annotated[float, typer.Option(
            "--lookahead-s", help="Send submissions this far (s) ahead of the clock "
            "(inf: all first; 0: each at its instant, as a live cluster).")] = math.inf,
        replay_start_day: Annotated[float | None, typer.Option(
            "--replay-start-day", help="First day replayed (days since the trace start).")
        ] = None,
        replay_end_day: Annotated[float | None, typer.Option(
            "--replay-end-day", help="Day the replay ends.")] = None,
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
    ) -> None:
        from sia.pipelines.cli.serve import read_token
        from sia.pipelines.service_inputs import serve_inputs
        from sia.service.client import Client
        from sia.service.drive import drive_trace, first_difference, shadow_trace

        if not lookahead >= 0:
            raise ConfigError(f"--lookahead-s must be >= 0, not {lookahead}")
        token = read_token(token_file)
        got = serve_inputs(trace, synthetic=synthetic, fmt=fmt, map_=map_, pool_from=pool_from,
                           time_unit=time_unit, clean=clean, quotas=quotas,
                           load_range=load_range, seed=seed, days=days,
                           replay_start_day=replay_start_day, replay_end_day=replay_end_day)
        if got.jobs is None:
            raise ConfigError(f"{trace}: a pool file has no jobs to replay; give a trace")
        client = Client(url, token)
        health = client.get("/healthz")
        if health.get("mode") == "shadow":
            if compare:
                raise ConfigError("--compare checks a service in drive mode; this one runs in "
                                  "shadow mode (its report compares it with the cluster)")
            result = shadow_trace(got.jobs, got.pools, client.post_events)
            typer.echo(f"fed {got.jobs.height} jobs as an FCFS cluster ran them: "
                       f"{result.events} events in {result.requests} requests")
            typer.echo(json.dumps(client.get("/report"), indent=2))
            return
        clock = time.perf_counter()
        result = drive_trace(got.jobs, client.post_events, lookahead_s=lookahead)
        wall = time.perf_counter() - clock
        typer.echo(f"drove {got.jobs.height} jobs: {len(result.starts)} starts "
                   f"({len(result.lent)} lent), {result.events} events in {result.requests} "
                   f"requests, {wall:.1f} s; service rebuilds: {result.rebuilds}")
        if not compare:
            return
        replay = replay_starts(got, policy, alias, windows, seed=seed, tick_s=tick)
        diff = first_difference(result.starts, replay)
        if diff is None:
            typer.echo(f"identical: {len(replay)} starts")
            return
        typer.echo(f"different: {diff}")
        raise typer.Exit(1)


def replay_starts(got, policy: str, alias: str | None, windows: str, *, seed: int,
                  tick_s: float) -> dict[str, float]:
    """The starts of `sia replay`'s engine on the same jobs, pools, history and predictors
    (job -> start time, s)."""
    from sia.pipelines.engine import FrameWorkload, ReplaySpec, run_replay
    from sia.pipelines.service_inputs import resolve_predictors

    predictors, options = resolve_predictors(policy, alias, windows)
    spec = ReplaySpec(FrameWorkload(got.jobs, got.pools, ("shadow", got.source), got.prior),
                      policy.strip().lower(), options, predictors=predictors, seed=seed,
                      tick_s=tick_s, title=policy)
    res = run_replay(spec).result
    return dict(zip(res["job_id"].to_list(), res["start_time"].to_list(), strict=True))
