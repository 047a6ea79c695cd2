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
or names the first job whose start differs and exits 1. --time-scale paces
either replay (seconds of trace per wall-clock second).

Take the trace options (--clean, --replay-start-day ...) the service was
started with, so that both hold the same pools and history.

\b
Example:
  sia shadow builtin:philly --clean --replay-start-day 58 --replay-end-day 72 \\
      --url http://127.0.0.1:8765 --token-file token.txt --alias demo --compare
"""


UrlOpt = Annotated[str, typer.Option("--url", help="The service, e.g. http://127.0.0.1:8765.")]
TokenFileOpt = Annotated[Path | None, typer.Option(
    "--token-file", help="File holding the bearer token (else $SIA_SERVE_TOKEN).",
    metavar="FILE")]
CompareOpt = Annotated[bool, typer.Option("--compare",
                                          help="Compare every start with `sia replay`'s.")]
PolicyOpt = Annotated[str, typer.Option("--policy", help="The service's policy (for --compare).")]
AliasOpt = Annotated[str | None, typer.Option("--alias",
                                              help="Predictors' alias (for --compare).")]
WindowsOpt = Annotated[str, typer.Option("--windows", help="Prediction windows (minutes).")]
TickOpt = Annotated[float, typer.Option("--tick", help="Scheduling tick (s).")]
LookaheadOpt = Annotated[float, typer.Option(
    "--lookahead-s", help="Send submissions this far (s) ahead of the clock (inf: all first; "
    "0: each at its instant, as a live cluster).")]
TimeScaleOpt = Annotated[float | None, typer.Option(
    "--time-scale", help="Pace the replay: seconds of the trace per wall-clock second (60: an "
    "hour in a minute; 1: real time). Default: as fast as the service answers.")]
StartDayOpt = Annotated[float | None, typer.Option(
    "--replay-start-day", help="First day replayed (days since the trace start).")]
EndDayOpt = Annotated[float | None, typer.Option("--replay-end-day",
                                                 help="Day the replay ends.")]


def register(app: typer.Typer) -> None:
    """Add the `shadow` command to ``app``."""

    @app.command("shadow", help=HELP)
    def shadow_cmd(
        trace: inputs.TraceArg = None, url: UrlOpt = ..., token_file: TokenFileOpt = None,
        compare: CompareOpt = False, policy: PolicyOpt = "sia", alias: AliasOpt = None,
        windows: WindowsOpt = ",".join(str(k) for k in DEFAULT_WINDOWS_MIN),
        tick: TickOpt = 300.0, lookahead: LookaheadOpt = math.inf,
        time_scale: TimeScaleOpt = None,
        replay_start_day: StartDayOpt = None, replay_end_day: EndDayOpt = None,
        synthetic: inputs.SyntheticOpt = None, fmt: inputs.FormatOpt = "auto",
        map_: inputs.MapOpt = None, pool_from: inputs.PoolFromOpt = None,
        arrival: inputs.ArrivalOpt = None,
        time_unit: inputs.TimeUnitOpt = "s", clean: inputs.CleanOpt = False,
        quotas: inputs.QuotasOpt = None, load_range: inputs.LoadRangeOpt = "0.6,1.1",
        seed: inputs.SeedOpt = 0, days: inputs.DaysOpt = None,
    ) -> None:
        run_shadow(dict(locals()))


def run_shadow(a: dict) -> None:
    """Drive (or, in shadow mode, feed) the service at ``--url`` with the trace."""
    from sia.pipelines.cli.serve import read_token
    from sia.pipelines.service_inputs import serve_inputs
    from sia.service.client import Client
    from sia.service.drive import Pacer, drive_trace, first_difference, shadow_trace

    if not a["lookahead"] >= 0:
        raise ConfigError(f"--lookahead-s must be >= 0, not {a['lookahead']}")
    scale = a["time_scale"]
    if scale is not None and not (scale > 0 and math.isfinite(scale)):
        raise ConfigError(f"--time-scale must be a finite number > 0, not {scale}")
    pace = None if scale is None else Pacer(scale)
    token = read_token(a["token_file"])
    got = serve_inputs(a["trace"], **{k: a[k] for k in (
        "synthetic", "fmt", "map_", "pool_from", "arrival", "time_unit", "clean", "quotas",
        "load_range", "seed", "days", "replay_start_day", "replay_end_day")})
    if got.jobs is None:
        raise ConfigError(f"{a['trace']}: a pool file has no jobs to replay; give a trace")
    client = Client(a["url"], token)
    if client.get("/healthz").get("mode") == "shadow":
        if a["compare"]:
            raise ConfigError("--compare checks a service in drive mode; this one runs in "
                              "shadow mode (its report compares it with the cluster)")
        result = shadow_trace(got.jobs, got.pools, client.post_events, pace=pace)
        typer.echo(f"fed {got.jobs.height} jobs as an FCFS cluster ran them: "
                   f"{result.events} events in {result.requests} requests")
        typer.echo(json.dumps(client.get("/report"), indent=2))
        return
    clock = time.perf_counter()
    result = drive_trace(got.jobs, client.post_events, lookahead_s=a["lookahead"], pace=pace)
    wall = time.perf_counter() - clock
    typer.echo(f"drove {got.jobs.height} jobs: {len(result.starts)} starts "
               f"({len(result.lent)} lent), {result.events} events in {result.requests} "
               f"requests, {wall:.1f} s; service rebuilds: {result.rebuilds}, grows: "
               f"{result.grows}")
    if not a["compare"]:
        return
    replay = replay_starts(got, a["policy"], a["alias"], a["windows"], seed=a["seed"],
                           tick_s=a["tick"])
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
