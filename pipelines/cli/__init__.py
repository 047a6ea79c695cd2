"""The `sia` command line.

Each subcommand lives in its own module ``sia.pipelines.cli.<name>`` that
defines ``register(app: typer.Typer) -> None``; this package discovers them, so
adding a command never edits this file. The commands parse options and print;
the work itself is in the studies (:mod:`sia.pipelines.studies`) and the shared
stages beside them. User errors (:class:`SiaError`) are
printed as one line on stderr with exit code 2, never as a traceback.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import sys
from typing import Any

import typer
from sia.data.errors import SiaError

app = typer.Typer(
    name="sia",
    help=(
        "Forecasting and anticipatory scheduling for shared GPU pools (SIA). "
        "Ingest traces, generate synthetic workloads, build features, train predictors, "
        "replay schedulers and run evaluation pipelines."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            module.register(app)


@app.callback()
def _root() -> None:
    """Forecasting and anticipatory scheduling for shared GPU pools (SIA)."""


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the process exit code (0 ok, 2 user or usage error, 130 interrupted).

    Every error is one line on stderr: a user error (:class:`SiaError`) as
    ``error: ...``; a command-line usage error (unknown option or command, a
    value of the wrong type) the same way, naming the option and the command
    whose ``--help`` lists them, instead of the parser's usage box.
    """
    restore = _terminate_as_interrupt()
    sweep = sys.modules.get("sia.pipelines.engine.execute")
    if sweep is not None:  # each command reports its own interrupt (one process, many mains)
        sweep.INTERRUPT_REPORTED = False
    try:
        code = _command().main(args=argv, standalone_mode=False, prog_name="sia")
    except SiaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the last resort: a file system error no check caught is one line
        from sia.pipelines.output import describe_os_error

        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"error: {where}{describe_os_error(exc)}", file=sys.stderr)
        return 2
    except typer.TyperException as exc:  # the parser's errors (click's, vendored by Typer)
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help())  # `sia` alone: its help, as `sia --help`
            return 0
        message = " ".join(exc.format_message().split())
        if ctx is not None:  # a usage error: say where the options are listed
            message += f" (see `{ctx.command_path} --help`)"
        print(f"error: {message}", file=sys.stderr)
        return 2 if ctx is not None else int(getattr(exc, "exit_code", 1))
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        return 1
    except Exception as exc:
        # the last resort for the MLflow store's own errors (a read-only SQLite file, a server
        # answering garbage): one line naming the store, not a SQLAlchemy traceback
        if not type(exc).__module__.startswith(("mlflow", "sqlalchemy", "requests", "urllib3")):
            raise
        from sia.pipelines.tracking import tracking_uri

        text = " ".join(str(exc).split())[:300]
        print(f"error: MLflow store {tracking_uri()}: {type(exc).__name__}: {text}",
              file=sys.stderr)
        return 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        restore()
    if code == 130:  # Ctrl-C or SIGTERM (Typer's exit code for KeyboardInterrupt)
        sweep = sys.modules.get("sia.pipelines.engine.execute")
        if not getattr(sweep, "INTERRUPT_REPORTED", False):
            print(f"interrupted ({_INTERRUPTED_BY[0]}): the command stopped before it finished",
                  file=sys.stderr)
    return code if isinstance(code, int) else 0


@functools.cache
def _command():
    """Return the click command of :data:`app` with its flags' help rows fixed: Typer shows a
    type after every option, ``--help <bool>`` and ``--redo <bool>``, though a flag takes no
    value; a flag (and every command's ``--help``) gets an empty metavar instead.

    Built once per process (the commands register at import; click makes a fresh context
    per call): building it costs about 80 ms, which a process calling :func:`main` many
    times (the tests run hundreds of in-process commands) paid on every call."""
    import click

    command = typer.main.get_command(app)

    def fix(cmd: Any) -> None:
        # Typer's commands are its own (vendored) click classes: duck-typed here
        for param in cmd.get_params(click.Context(cmd, info_name=cmd.name)):
            if getattr(param, "is_flag", False):
                param.metavar = ""
        for sub in getattr(cmd, "commands", {}).values():
            fix(sub)

    fix(command)
    return command


#: what interrupted the command: Ctrl-C unless SIGTERM arrived
_INTERRUPTED_BY = ["Ctrl-C"]


def _terminate_as_interrupt():
    """Make SIGTERM behave as SIGINT (Ctrl-C) while the command runs: a sweep keeps its
    finished replays and says how to resume, workers are ended, files are closed. Return the
    function that restores the previous handler (nothing is changed outside the main thread)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_term(signum, frame):
        _INTERRUPTED_BY[0] = "SIGTERM"
        raise KeyboardInterrupt

    _INTERRUPTED_BY[0] = "Ctrl-C"
    previous = signal.signal(signal.SIGTERM, on_term)
    return lambda: signal.signal(signal.SIGTERM, previous)


def run() -> None:
    """Console-script entry point: exit with :func:`main`'s code.

    Before exiting, every object still alive is frozen (``gc.freeze``): the interpreter's exit
    otherwise runs full garbage collections over all of them (MLflow, scikit-learn, the
    trace), about 2 s of a 14 s ``sia train``, for memory the OS frees anyway. Exit handlers
    still run and open files are still flushed; only the collector's walks are skipped.
    """
    code = main()
    if code == 130:
        exit_if_threads_stuck(code)
    import gc

    gc.freeze()
    sys.exit(code)


def exit_if_threads_stuck(code: int) -> None:
    """After an interrupt, end the process now (``os._exit``, streams flushed) if a thread
    that the interpreter's exit would wait for without a limit is still alive: a process
    pool's manager thread that did not see its killed workers (``LocalExecutor`` gives it 10 s)
    would otherwise hang Ctrl-C forever in concurrent.futures' exit hook. Returns when no
    such thread is left, so the usual exit (and its handlers) runs."""
    import threading

    main_thread = threading.main_thread()
    stuck = [t for t in threading.enumerate()
             if t is not main_thread and t.is_alive() and not t.daemon]
    if not stuck:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
