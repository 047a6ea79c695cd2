"""Fuzzing the pipelines' own causes (issue 36, item 7): outputs, configs, MLflow, signals.

Generated cases, each run through the CLI in process and classified as in
``test_fuzz_inputs``:

- ``clean``: exit code 2 and one line ``error: ...`` naming what it must (the option, the
  file or key, the store);
- ``traceback``: an exception escaped the CLI;
- ``unclear``: another exit code, or a message over several lines or not naming the place;
- ``hang``: it took longer than the case's limit (an MLflow server that trickles bytes must
  not hold a command past 15 s).

The families: ``--out`` that the operating system refuses (under a file, in ``/proc`` or
``/sys``, a name over 255 bytes, an existing file) for each command that writes; configs with
a YAML structure no study accepts (a list as a key, recursive aliases, nesting past any
config) or sizes refused up front (``grid.experiments: 1000000``, days of 2^70, a
5,000-digit seed, a 100,000-character name, a quota scale of 1e12); MLflow servers that
misbehave (bytes that are not HTTP, a 200 that trickles a byte at a time, a connection closed
at once) and a store in a missing folder. The suite samples :data:`SAMPLE` cases per family
with a fixed seed, so a run is repeatable and short; ``python
benchmarks/bench_fuzz_pipeline.py`` runs them all and prints the counts.
"""

from __future__ import annotations

import contextlib
import io
import random
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: cases per family in the test suite (the benchmark runs them all)
SAMPLE = 6
SEED = 36
#: a command that an MLflow server holds past this many seconds hangs (issue 36's goal)
HANG_S = 15.0

TINY = """study: evaluate
name: tiny
seed: 0
trace: {synthetic: base, days: 1.5}
replay: {start_day: 0.5}
warmup_days: 0.25
grid: {experiments: 1, pools_per_experiment: 2}
policies: [fcfs, maxmin]
"""


@dataclass
class Case:
    """One generated case: a family, an id, the CLI arguments (built in a folder) and the
    words the one-line error must hold."""

    family: str
    name: str
    build: Callable[[Path], list[str]]
    words: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    limit_s: float = 120.0


@dataclass
class Outcome:
    """What a case did: its class (clean, traceback, unclear, hang), code, message, seconds."""

    kind: str
    code: int | None
    message: str
    seconds: float


def run_case(case: Case, folder: Path) -> Outcome:
    """Run ``case`` in process in ``folder`` and classify it."""
    import os

    from sia.pipelines.cli import main

    argv = case.build(folder)
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in case.env}
    os.environ.update(case.env)
    clock = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except BaseException:  # noqa: BLE001 - a traceback is what the fuzz looks for
        return Outcome("traceback", None, traceback.format_exc(limit=3), time.monotonic() - clock)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    seconds = time.monotonic() - clock
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("error:")]
    message = lines[0] if lines else err.getvalue()[-300:]
    if seconds > case.limit_s:
        return Outcome("hang", code, message, seconds)
    if code != 2 or len(lines) != 1 or "Traceback" in err.getvalue():
        return Outcome("unclear", code, message, seconds)
    if not all(w in message for w in case.words):
        return Outcome("unclear", code, message, seconds)
    return Outcome("clean", code, message, seconds)


# ----------------------------------------------------------------------------- --out
def _out_targets() -> dict[str, Callable[[Path], Path]]:
    def under_file(d: Path) -> Path:
        (d / "afile").write_text("x")
        return d / "afile" / "sub"

    def existing_file(d: Path) -> Path:
        (d / "afile").write_text("x")
        return d / "afile"

    return {"under_file": under_file, "existing_file": existing_file,
            "proc": lambda d: Path("/proc/sia-fuzz/out"), "sys": lambda d: Path("/sys/sia-fuzz"),
            "long_name": lambda d: d / ("n" * 256), "long_nested": lambda d: d / "a" / ("é" * 130)}


def _out_commands() -> dict[str, Callable[[Path, Path], list[str]]]:
    def config(d: Path) -> str:
        (d / "tiny.yaml").write_text(TINY)
        return str(d / "tiny.yaml")

    syn = ["--synthetic", "base", "--days", "1"]
    return {
        "ingest": lambda d, o: ["ingest", "builtin:philly", "--days", "1", "--out", str(o)],
        "generate": lambda d, o: ["generate", "--days", "0.5", "--out", str(o)],
        "replay": lambda d, o: ["replay", *syn, "--policy", "fcfs", "--no-mlflow",
                                "--out", str(o)],
        "features": lambda d, o: ["features", *syn, "--out", str(o) + ".parquet"
                                  if o.suffix != ".parquet" else str(o)],
        "evaluate": lambda d, o: ["evaluate", config(d), "--no-mlflow", "--workers", "1",
                                  "--out", str(o)],
        "figure5": lambda d, o: ["figure5", "--out", str(o), "--workers", "1"],
        "train": lambda d, o: ["train", *syn, "--out", str(o)],
    }


def out_cases() -> list[Case]:
    """Every (command, refused --out) pair."""
    cases = []
    for cmd, argv in _out_commands().items():
        for kind, target in _out_targets().items():
            if cmd == "features" and kind in ("existing_file",):
                continue  # a file is what features writes: an existing one is replaced
            cases.append(Case("out", f"{cmd}:{kind}",
                              lambda d, argv=argv, target=target: argv(d, target(d)),
                              ("--out",)))
    return cases


# ----------------------------------------------------------------------------- configs
def _config_text(change: str) -> str:
    return TINY + change


CONFIG_VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    # YAML structure
    "list_as_key": ("[a, b]: 1\n", ("line",)),
    "mapping_as_key": ("? {a: 1}\n: 2\n", ("line",)),
    "recursive_list_alias": ("description: &r [*r]\n", ("recursive",)),
    "recursive_map_alias": ("preemption: &m {x: *m}\n", ("recursive",)),
    "deep_nesting": ("preemption: " + "[" * 80 + "]" * 80 + "\n", ("deep",)),
    "digits_5000_seed": ("seed: " + "7" * 5000 + "\n", ()),
    "digits_5000_days": ("warmup_days: " + "7" * 5000 + "\n", ()),
    # sizes past a hard limit
    "days_2_70": ("replay: {start_day: 1180591620717411303424}\n", ("replay.start_day",)),
    "quota_scale_1e12": ("quota_scale: 1000000000000.0\n", ("quota_scale",)),
    "seed_2_64": ("seed: 18446744073709551616\n", ("seed",)),
    "name_100k": ("name: " + "n" * 100_000 + "\n", ("name",)),
    "tick_1e-9": ("tick_s: 0.000000001\n", ("tick_s",)),
    "experiments_1e8": ("grid: {experiments: 100000000, pools_per_experiment: 2}\n",
                        ("grid.experiments",)),
    # sizes past a limit --allow-large raises
    "experiments_1e6": ("grid: {experiments: 1000000, pools_per_experiment: 2}\n",
                        ("--allow-large",)),
    "synthetic_days_1e5": ("trace: {synthetic: base, days: 99999.0}\n", ("--allow-large",)),
    # keys the trace cannot satisfy
    "regions_no_column": ("regions: {column: nosuchcol}\n", ("nosuchcol",)),
}


def config_cases() -> list[Case]:
    """Every config variant, run through `sia evaluate --no-mlflow`."""
    cases = []
    for name, (change, words) in CONFIG_VARIANTS.items():
        text = TINY.replace("grid: {experiments: 1, pools_per_experiment: 2}\n", "") \
            if "grid:" in change else TINY
        text = text.replace("trace: {synthetic: base, days: 1.5}\n", "") \
            if change.startswith("trace:") else text
        text = text.replace("seed: 0\n", "") if change.startswith("seed:") else text
        text = text.replace("name: tiny\n", "") if change.startswith("name:") else text
        text = text.replace("replay: {start_day: 0.5}\n", "") \
            if change.startswith("replay:") else text
        text = text.replace("warmup_days: 0.25\n", "") if change.startswith("warmup") else text

        def build(d: Path, text=text, change=change) -> list[str]:
            (d / "c.yaml").write_text(text + change)
            return ["evaluate", str(d / "c.yaml"), "--no-mlflow", "--workers", "1",
                    "--out", str(d / "out")]

        cases.append(Case("config", name, build, words))
    cases.append(Case("config", "dask_not_a_url", lambda d: [
        "evaluate", _write(d / "c.yaml", TINY), "--dask", "not a url", "--out", str(d / "o")],
        ("--dask",)))
    return cases


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


# ----------------------------------------------------------------------------- MLflow
@contextlib.contextmanager
def misbehaving_server(kind: str) -> Iterator[str]:
    """Serve ``kind`` on a local port and yield its URI: ``garbage`` (bytes that are not
    HTTP), ``trickle`` (200 OK headers, then a byte every 0.5 s), ``close`` (the connection
    closed at once)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve(conn: socket.socket) -> None:
        try:
            conn.settimeout(1.0)
            with contextlib.suppress(OSError):
                conn.recv(65536)
            if kind == "garbage":
                conn.sendall(b"SSH-2.0-OpenSSH_9.0\r\nnot http at all\r\n")
                return
            if kind == "close":
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100000\r\n\r\n")
            while not stop.is_set():
                conn.sendall(b" ")
                time.sleep(0.5)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conns.append(conn)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        srv.close()
        for c in conns:
            with contextlib.suppress(OSError):
                c.close()


MLFLOW_COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "replay": lambda d: ["replay", "--synthetic", "base", "--days", "1", "--policy", "fcfs",
                         "--out", str(d / "o")],
    "train": lambda d: ["train", "--synthetic", "base", "--days", "4", "--train-days", "2",
                        "--val-days", "1", "--warmup-days", "0.5", "--windows", "5",
                        "--n-estimators", "2", "--no-ablation", "--out", str(d / "o")],
    "evaluate": lambda d: ["evaluate", _write(d / "c.yaml", TINY), "--workers", "1",
                           "--out", str(d / "o")],
}
MLFLOW_KINDS = ("garbage", "trickle", "close", "missing_folder")


def mlflow_cases() -> list[Case]:
    """Every (command, misbehaving store) pair; the store's URI is set by :func:`run_mlflow`."""
    return [Case("mlflow", f"{cmd}:{kind}", build, ("MLflow",) if kind != "missing_folder"
                 else ("does not exist",), limit_s=HANG_S)
            for cmd, build in MLFLOW_COMMANDS.items() for kind in MLFLOW_KINDS]


def run_mlflow(case: Case, folder: Path, deadline_s: float | None = 4.0) -> Outcome:
    """Run an MLflow case against its misbehaving store, with MLflow steps limited to
    ``deadline_s`` (None: the product's default, 10 s; the suite uses a shorter one to stay
    fast)."""
    kind = case.name.split(":")[1]
    if kind == "missing_folder":
        case.env = {"MLFLOW_TRACKING_URI": f"sqlite:///{folder}/no/such/folder/mlflow.db"}
        return run_case(case, folder)
    with misbehaving_server(kind) as uri:
        case.env = {"MLFLOW_TRACKING_URI": uri}
        if deadline_s is not None:
            case.env["SIA_MLFLOW_DEADLINE_S"] = str(deadline_s)
        return run_case(case, folder)


def sample(cases: list[Case], n: int, seed: int = SEED) -> list[Case]:
    """Return ``n`` of ``cases`` drawn with ``seed`` (all of them when fewer)."""
    return cases if len(cases) <= n else random.Random(seed).sample(cases, n)


# ----------------------------------------------------------------------------- the suite
@pytest.mark.parametrize("case", sample(out_cases(), SAMPLE), ids=lambda c: c.name)
def test_a_refused_out_is_one_line_naming_it(case, tmp_path):
    outcome = run_case(case, tmp_path)
    assert outcome.kind == "clean", outcome


@pytest.mark.parametrize("case", sample(config_cases(), 2 * SAMPLE), ids=lambda c: c.name)
def test_a_hostile_config_is_one_line_before_any_work(case, tmp_path):
    outcome = run_case(case, tmp_path)
    assert outcome.kind == "clean", outcome
    assert outcome.seconds < 60, outcome
    assert not (tmp_path / "out" / "exp-000").exists()  # refused before any replay


@pytest.mark.parametrize("case", sample(mlflow_cases(), SAMPLE // 2), ids=lambda c: c.name)
def test_a_misbehaving_mlflow_store_is_one_line_in_time(case, tmp_path):
    outcome = run_mlflow(case, tmp_path)
    assert outcome.kind == "clean", outcome


def test_the_trickling_server_is_stopped_by_the_deadline(tmp_path):
    """The case issue 36 timed at 38 s (train) and 60 s (evaluate): a 200 that trickles."""
    case = next(c for c in mlflow_cases() if c.name == "replay:trickle")
    outcome = run_mlflow(case, tmp_path)
    assert outcome.kind == "clean" and outcome.seconds < 4 + 8, outcome
    assert "did not finish" in outcome.message, outcome


def test_the_families_have_enough_distinct_cases():
    assert len(out_cases()) >= 40 and len(config_cases()) >= 15 and len(mlflow_cases()) >= 12
    assert len({c.name for c in out_cases() + config_cases() + mlflow_cases()}) == \
        len(out_cases()) + len(config_cases()) + len(mlflow_cases())


@contextlib.contextmanager
def _read_only_mount(folder: Path) -> Iterator[Path]:
    """Yield ``folder`` as a read-only tmpfs mount holding an MLflow store file; skip where this
    process may not mount (it needs root with CAP_SYS_ADMIN). Unmounted after."""
    import subprocess

    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (folder / "mlflow.db").write_bytes(b"")
        if subprocess.run(["mount", "-o", "remount,ro", str(folder)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def test_a_read_only_mount_is_one_line_for_out_and_for_the_store(tmp_path):
    """Issue 36: --out on a read-only mount, and a SQLite store there (a SQLAlchemy traceback
    before), are one line each (root passes os.access on read-only files, not mounts)."""
    with _read_only_mount(tmp_path / "ro") as ro:
        replay = ["replay", "--synthetic", "base", "--days", "1", "--policy", "fcfs"]
        out = run_case(Case("out", "ro", lambda d: [*replay, "--no-mlflow", "--out",
                                                    str(ro / "o")], ("--out", "Read-only")),
                       tmp_path)
        assert out.kind == "clean", out
        store = run_case(Case("mlflow", "ro", lambda d: [*replay, "--out", str(d / "o")],
                              ("read-only",),
                              env={"MLFLOW_TRACKING_URI": f"sqlite:///{ro}/mlflow.db"}),
                         tmp_path)
        assert store.kind == "clean", store


def test_a_second_command_on_a_folder_in_use_stops_at_once(tmp_path):
    """Issue 36: two `sia evaluate` on one --out crashed on a .tmp rename; the second now says
    the folder is in use, before any work."""
    from sia.pipelines.output import FolderLock

    out = tmp_path / "out"
    out.mkdir()
    with FolderLock(out):
        for argv in (["evaluate", _write(tmp_path / "c.yaml", TINY), "--no-mlflow"],
                     ["replay", "--synthetic", "base", "--days", "1", "--policy", "fcfs",
                      "--no-mlflow"]):
            case = Case("lock", argv[0], lambda d, argv=argv: [*argv, "--out", str(out)],
                        ("in use", "--out"))
            outcome = run_case(case, tmp_path)
            assert outcome.kind == "clean", outcome
    assert not list(out.glob("exp-*")) and not (out / "jobs.parquet").exists()


def test_allow_large_lifts_the_size_limits_it_names():
    from sia.data.errors import ConfigError
    from sia.pipelines.studies.limits import MAX_REPLAYS, check_sizes

    with pytest.raises(ConfigError, match="--allow-large"):
        check_sizes("c.yaml", replays=MAX_REPLAYS + 1)
    with pytest.raises(ConfigError, match="--allow-large"):
        check_sizes("c.yaml", replays=1, synthetic_days=5000.0)
    check_sizes("c.yaml", replays=MAX_REPLAYS + 1, synthetic_days=5000.0, allow_large=True)
    check_sizes("c.yaml", replays=MAX_REPLAYS, synthetic_days=1000.0)  # at the limits: fine
