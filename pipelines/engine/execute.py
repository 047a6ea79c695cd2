"""Run a sweep's replay specs into the store, resuming, and read finished outcomes back.

:func:`execute` sorts the specs into reused (finished on disk under the same
key), stale (made with other settings: redone) and to run, runs the rest on
an executor (in-process, local processes or Dask), and stores each outcome
as it comes in. :func:`stored_outcome` reads one back.

Learned predictors travel as data (:class:`~sia.pipelines.engine.spec.ModelPayload`),
so no worker opens the MLflow store. On a Dask cluster each distinct payload
is scattered once (``Client.scatter``) and every task names it
(:class:`ShippedReplay`) instead of carrying its own copy.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl
from sia.data.errors import ConfigError
from sia.pipelines.engine.run import run_replay
from sia.pipelines.engine.spec import RegistryPredictors, ReplayOutcome, ReplaySpec
from sia.pipelines.engine.store import (
    atomic_write_text,
    read_marker,
    replay_status,
    save_replay,
)


def run_stored(spec: ReplaySpec) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Replay ``spec`` (on a worker); return (its result table, what its marker keeps)."""
    outcome = run_replay(spec)
    return outcome.result, outcome.meta()


class ShippedReplay(NamedTuple):
    """A Dask task: ``spec`` without its models' payload, and ``payload``: on the client the
    Future of the payload scattered once, resolved by Dask into the payload on the worker
    (None: the spec needs no learned predictors)."""

    spec: ReplaySpec
    payload: Any = None

    @property
    def name(self) -> str:
        """The replay's name (executors name a failing item by it)."""
        return self.spec.name


def run_shipped(task: ShippedReplay) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Replay ``task.spec`` with its payload put back (on a Dask worker); as :func:`run_stored`."""
    spec = task.spec
    if task.payload is not None:
        spec = replace(spec, predictors=replace(spec.predictors, payload=task.payload))
    return run_stored(spec)


def ship(specs: Sequence[ReplaySpec], client: Any) -> list[ShippedReplay]:
    """Return ``specs`` as Dask tasks: each distinct predictors' payload scattered once to the
    cluster of ``client`` (read from the store here, on the client, if not yet held)."""
    from sia.pipelines.engine.predictors import with_payload

    scattered: dict[tuple, Any] = {}
    tasks = []
    for spec in specs:
        ref = spec.predictors
        if not isinstance(ref, RegistryPredictors):
            tasks.append(ShippedReplay(spec))
            continue
        key = (ref.tracking_uri, ref.key)
        if key not in scattered:
            scattered[key] = client.scatter(with_payload(ref).payload, hash=False)
        tasks.append(ShippedReplay(replace(spec, predictors=replace(ref, payload=None)),
                                   scattered[key]))
    return tasks


#: Set when an interrupted sweep has said what it kept (the CLI then adds nothing).
INTERRUPT_REPORTED = False


@dataclass
class Executed:
    """What :func:`execute` did: the names of the replays run now, reused and found stale."""

    ran: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)


def execute(specs: Sequence[ReplaySpec], out: Path, executor: Any, *, reuse: bool = True,
            progress: bool = False, label: str = "replays", config: dict[str, Any] | None = None,
            say: Callable[[str], None] | None = None,
            on_done: Callable[[ReplaySpec], None] | None = None) -> Executed:
    """Run every spec not finished under ``out`` (each stored as it finishes); return what ran.

    ``reuse`` False runs them all. Stale replays are reported through
    ``say``, naming the keys of ``config`` (the sweep's settings, JSON
    values) that differ from ``out/config.json``, which ``config`` then
    replaces. ``on_done(spec)`` is called after each replay is stored.
    """
    from sia.pipelines.executors import DaskExecutor, ProgressBar

    say = say or (lambda msg: None)
    out = Path(out)
    status = [replay_status(*s.files(out), s.key) if reuse else "missing" for s in specs]
    done = Executed(reused=[s.name for s, st in zip(specs, status, strict=True) if st == "done"],
                    stale=[s.name for s, st in zip(specs, status, strict=True) if st == "stale"])
    if config is not None:
        if done.stale:
            saved = read_marker(out / "config.json") or {}
            changed = [k for k in config if k in saved and saved[k] != config[k]]
            why = f" (config changed: {', '.join(changed)})" if changed else ""
            say(f"{len(done.stale)} replay(s) in {out} were made with other settings{why}; "
                "redoing them")
        atomic_write_text(out / "config.json", json.dumps(config, indent=2))
    todo = [s for s, st in zip(specs, status, strict=True) if st != "done"]
    say(f"reusing {len(done.reused)} of {len(specs)} replays from {out}; running {len(todo)}")
    if isinstance(executor, DaskExecutor):  # the models go to the cluster once, not per task
        fn, items = run_shipped, ship(todo, executor.client)
    else:
        fn, items = run_stored, todo
    try:
        with ProgressBar(progress, len(todo), f"{label} on {executor.description}") as advance, \
                closing(executor.run(fn, items)) as results:
            for item, (frame, meta) in results:
                spec = item.spec if isinstance(item, ShippedReplay) else item
                save_replay(*spec.files(out), frame, spec.key, policy=spec.policy, **meta)
                done.ran.append(spec.name)
                advance(spec.name, meta["wall_s"])
                if on_done is not None:
                    on_done(spec)
    except KeyboardInterrupt:
        # the progress bar is stopped and the workers ended (closing the run) by now; count the
        # replays stored on disk (Ctrl-C may land between a replay's save and its count here)
        kept = sum(replay_status(*s.files(out), s.key) == "done" for s in specs)
        print(f"interrupted: {kept} of {len(specs)} replays are kept in {out}; resume with: "
              f"{resume_command()}", file=sys.stderr, flush=True)
        global INTERRUPT_REPORTED
        INTERRUPT_REPORTED = True
        raise
    return done


def resume_command(argv: Sequence[str] | None = None) -> str:
    """Return the shell command that re-runs this process's command line (``argv``: sys.argv).

    ``sia ...`` when run through the ``sia`` script found first on PATH, else the
    script's path (or ``python -m sia.pipelines.cli``) followed by the same arguments.
    """
    argv = list(sys.argv if argv is None else argv)
    if not argv or not argv[0]:
        return "the same command"
    prog, args = argv[0], argv[1:]
    if Path(prog).name == "__main__.py" and Path(prog).parent.name == "cli":
        head = ["python", "-m", "sia.pipelines.cli"]
    elif Path(prog).name == "sia" and (found := shutil.which("sia")) and \
            Path(found).resolve() == Path(prog).resolve():
        head = ["sia"]
    else:
        head = [prog]
    return shlex.join(head + args)


def stored_outcome(spec: ReplaySpec, out: Path, *, command: str = "the same command") -> ReplayOutcome:
    """Return the finished outcome of ``spec`` stored under ``out``.

    Raises ConfigError naming the replay when it is not finished there.
    """
    parquet, marker = spec.files(out)
    if replay_status(parquet, marker, spec.key) != "done":
        raise ConfigError(f"{out}: replay {spec.name} is not finished ({parquet}); run "
                          f"{command} again to complete it")
    meta = read_marker(marker) or {}
    return ReplayOutcome(pl.read_parquet(parquet), meta.get("placement"), meta.get("facts") or {},
                         meta.get("wall_s") or 0.0)
