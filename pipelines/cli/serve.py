"""`sia serve`: the scheduler as a live service fed with a cluster's events (DESIGN.md 6.7)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from sia.data.errors import ConfigError
from sia.pipelines import inputs
from sia.pipelines.studies.experiment import DEFAULT_WINDOWS_MIN

HELP = """Run a policy as a live service: events in, decisions out (FastAPI on uvicorn).

TRACE_OR_POOLS is a pool file (CSV/Parquet with pool, quota_gpus) or a trace
(any format `sia replay` reads; its pools and quotas as `sia replay` derives
them, cut to the pools of --replay-start-day/--replay-end-day, and its jobs
before --replay-start-day are the history the learned predictors start with).
The policy (default: learned SIA, predictors from the registry by --alias)
is built by the replay engine, and the service runs the replay's event loop
on the events' own clock, so it decides what `sia replay` decides.

Events are POSTed to /events (submit, start, finish, quota, clock; each
with an id that makes retries idempotent) and committed to an SQLite log in
--state before they are acknowledged; a restart replays the log. Decisions
at GET /decisions, forecasts at /forecast, a report at /report, Prometheus
metrics at /metrics, liveness at /healthz. Writes need the bearer token of
--token-file (or $SIA_SERVE_TOKEN); --auth-reads asks it of reads too.
Listens on 127.0.0.1 unless --host says otherwise; --port 0 takes a free
port (printed, and written to STATE/address).

\b
Examples:
  sia serve builtin:philly --clean --alias demo --replay-start-day 58 \\
      --replay-end-day 72 --state out/serve --port 8765 --token-file token.txt
  sia serve pools.csv --policy fcfs --state out/serve-fcfs --token-file token.txt
"""

#: The environment variable that may hold the token instead of --token-file.
TOKEN_ENV = "SIA_SERVE_TOKEN"


def read_token(token_file: Path | None) -> str:
    """The bearer token from ``token_file`` (first line) or $SIA_SERVE_TOKEN; ConfigError when
    neither gives one of at least 16 characters."""
    if token_file is not None:
        try:
            lines = token_file.read_text().strip().splitlines()
        except OSError as exc:
            raise ConfigError(f"--token-file {token_file}: cannot be read ({exc.strerror})"
                              ) from None
        token = lines[0].strip() if lines else ""
        where = f"--token-file {token_file}"
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
        where = f"${TOKEN_ENV}"
        if not token:
            raise ConfigError(f"writes need a token: pass --token-file FILE or set ${TOKEN_ENV}")
    if len(token) < 16:
        raise ConfigError(f"{where}: the token must be at least 16 characters")
    return token


TraceOrPoolsArg = Annotated[Path | None, typer.Argument(
    metavar="TRACE_OR_POOLS", help="A pool file (pool, quota_gpus) or a trace.")]
StateOpt = Annotated[Path, typer.Option("--state", help="State directory (the event log).",
                                        metavar="DIR")]
TokenFileOpt = Annotated[Path | None, typer.Option(
    "--token-file", help=f"File holding the bearer token (else ${TOKEN_ENV}).", metavar="FILE")]
PolicyOpt = Annotated[str, typer.Option("--policy", help="Scheduling policy.")]
AliasOpt = Annotated[str | None, typer.Option(
    "--alias", help="Registry alias of the learned predictors (default champion).")]
ModeOpt = Annotated[str, typer.Option(
    "--mode", help="drive: the caller runs the service's starts; shadow: the cluster reports "
    "its own starts and the service simulates beside it.")]
HostOpt = Annotated[str, typer.Option("--host", help="Address to listen on.")]
PortOpt = Annotated[int, typer.Option("--port", help="Port (0: a free one).")]
AuthReadsOpt = Annotated[bool, typer.Option("--auth-reads", help="Reads need the token too.")]
TickOpt = Annotated[float, typer.Option("--tick", help="Scheduling tick (s), as `sia replay`'s.")]
SyncOpt = Annotated[str, typer.Option(
    "--sync", help="SQLite synchronous mode: FULL (an acknowledged event survives a power "
    "loss) or NORMAL (a process crash only; faster).")]
MaxLogOpt = Annotated[float | None, typer.Option(
    "--max-log-mb", help="Cap the event log's size (MB): past it, events are refused with 503 "
    "as on a full disk.")]
WindowsOpt = Annotated[str, typer.Option("--windows", help="Prediction windows (minutes).")]
StartDayOpt = Annotated[float | None, typer.Option(
    "--replay-start-day", help="With a trace: the pools of the days from here (and the "
    "history before it), as `sia replay`.")]
EndDayOpt = Annotated[float | None, typer.Option(
    "--replay-end-day", help="With a trace: ... until here.")]
LogLevelOpt = Annotated[str, typer.Option("--log-level", help="info, warning ...")]


def register(app: typer.Typer) -> None:
    """Add the `serve` command to ``app``."""

    @app.command("serve", help=HELP)
    def serve_cmd(
        trace: TraceOrPoolsArg = None, state: StateOpt = ..., token_file: TokenFileOpt = None,
        policy: PolicyOpt = "sia", alias: AliasOpt = None, mode: ModeOpt = "drive",
        host: HostOpt = "127.0.0.1", port: PortOpt = 8765, auth_reads: AuthReadsOpt = False,
        tick: TickOpt = 300.0, sync: SyncOpt = "FULL", max_log_mb: MaxLogOpt = None,
        windows: WindowsOpt = ",".join(str(k) for k in DEFAULT_WINDOWS_MIN),
        replay_start_day: StartDayOpt = None, replay_end_day: EndDayOpt = None,
        synthetic: inputs.SyntheticOpt = None, days: inputs.DaysOpt = None,
        fmt: inputs.FormatOpt = "auto", map_: inputs.MapOpt = None,
        pool_from: inputs.PoolFromOpt = None, arrival: inputs.ArrivalOpt = None,
        time_unit: inputs.TimeUnitOpt = "s",
        clean: inputs.CleanOpt = False, quotas: inputs.QuotasOpt = None,
        load_range: inputs.LoadRangeOpt = "0.6,1.1", seed: inputs.SeedOpt = 0,
        log_level: LogLevelOpt = "info",
    ) -> None:
        run_serve(dict(locals()))


def _check(a: dict) -> None:
    """Check the options that need no file."""
    from sia.service.core import MODES

    if a["mode"] not in MODES:
        raise ConfigError(f"--mode must be one of {', '.join(MODES)}, not {a['mode']!r}")
    if not a["tick"] > 0:
        raise ConfigError(f"--tick must be > 0 seconds, not {a['tick']}")
    if not 0 <= a["port"] <= 65535:
        raise ConfigError(f"--port must be in 0..65535, not {a['port']}")
    if a["max_log_mb"] is not None and not a["max_log_mb"] > 0:
        raise ConfigError(f"--max-log-mb must be > 0, not {a['max_log_mb']}")
    if a["trace"] is None and a["synthetic"] is None:
        raise ConfigError("TRACE_OR_POOLS is missing: give a pool file or a trace")


def run_serve(a: dict) -> None:
    """Build the service as `sia replay` builds its replay, recover its log, and serve."""
    from sia.pipelines.service_inputs import (
        policy_factory,
        resolve_predictors,
        serve_inputs,
        setup_record,
    )
    from sia.service.app import Service, create_app
    from sia.service.core import ServiceCore
    from sia.service.server import LOOPBACK, bind, serve
    from sia.service.store import EventLog

    _check(a)
    token = read_token(a["token_file"])
    got = serve_inputs(a["trace"], **{k: a[k] for k in (
        "synthetic", "days", "fmt", "map_", "pool_from", "arrival", "time_unit", "clean",
        "quotas", "load_range", "seed", "replay_start_day", "replay_end_day")})
    policy, mode, tick, seed = a["policy"], a["mode"], a["tick"], a["seed"]
    predictors, options = resolve_predictors(policy, a["alias"], a["windows"])
    make = policy_factory(policy, got.pools, got.prior, predictors=predictors, options=options,
                          seed=seed, tick_s=tick)
    make()  # fail now on a policy that cannot be built
    log = EventLog(a["state"], synchronous=a["sync"], max_mb=a["max_log_mb"])
    log.check_setup(setup_record(policy, got.pools, predictors, options, seed=seed,
                                 tick_s=tick, mode=mode, prior=got.prior, source=got.source))
    core = ServiceCore(got.pools, make, tick_s=tick, mode=mode)
    service = Service(core, log, token=token, auth_reads=a["auth_reads"])
    n = service.recover()
    sock = bind(a["host"], a["port"])
    if a["host"] not in LOOPBACK:
        typer.echo(f"warning: listening on {a['host']}, beyond this machine", err=True)
    typer.echo(f"sia serve: {policy} ({mode}) on {got.pools.height} pools; {n} logged events "
               f"replayed, clock {core.clock:g}")
    serve(create_app(service), sock, a["state"], log_level=a["log_level"])
