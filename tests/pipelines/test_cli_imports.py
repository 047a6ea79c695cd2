"""The command line imports only what a command uses: `sia --help` must not pay for the heavy stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Imported by the commands that train, sweep, track or solve, never by `sia --help`.
HEAVY = ("xgboost", "sklearn", "mlflow", "dask", "ortools", "matplotlib", "numba")
#: Also not needed to list the commands and their options (`sia ingest` imports them to run).
NOT_FOR_HELP = ("numpy", "polars", "scipy", "pandas", "pydantic", "yaml")


def _imported_after(code: str) -> set[str]:
    """Return the top-level module names imported in a fresh interpreter after ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_importing_the_cli_leaves_the_heavy_stack_out():
    loaded = _imported_after("import sia.pipelines.cli")
    assert "typer" in loaded  # the probe sees the CLI's own imports
    assert loaded.isdisjoint(HEAVY + NOT_FOR_HELP), sorted(loaded & set(HEAVY + NOT_FOR_HELP))


def test_generate_and_ingest_leave_the_heavy_stack_out(tmp_path):
    gen, ing = str(tmp_path / "gen"), str(tmp_path / "ing")
    loaded = _imported_after(
        "from sia.pipelines.cli import main\n"
        f"assert main(['generate', '--days', '1', '--out', {gen!r}]) == 0\n"
        f"assert main(['ingest', {gen!r}, '--out', {ing!r}]) == 0")
    assert (tmp_path / "ing" / "jobs.parquet").exists()  # both commands did run
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_a_fungible_replay_without_tracking_leaves_the_heavy_stack_out(tmp_path):
    """FCFS on fungible GPUs, files only: no learner, tracker, plotter or migration solver."""
    out = str(tmp_path / "rep")
    loaded = _imported_after(
        "from sia.pipelines.cli import main\n"
        "assert main(['replay', '--synthetic', 'base', '--days', '1', '--policy', 'fcfs', "
        f"'--no-mlflow', '--out', {out!r}]) == 0")
    assert (tmp_path / "rep").is_dir()  # the replay did run
    heavy = set(HEAVY) - {"ortools"}  # the placement chain's min-cost flow module loads it
    assert loaded.isdisjoint(heavy | {"scipy"}), sorted(loaded & (heavy | {"scipy"}))


@pytest.mark.parametrize("argv, names", [
    (["replay", "--seed", "abc"], ["--seed", "integer", "sia replay --help"]),
    (["replay", "--no-such-option"], ["--no-such-option", "sia replay --help"]),
    (["no-such-command"], ["no-such-command", "sia --help"]),
    (["evaluate"], ["config", "sia evaluate --help"]),
])
def test_usage_errors_are_one_line(argv, names, capsys):
    """A command-line usage error is one `error:` line naming the option and where help is, exit 2."""
    from sia.pipelines.cli import main

    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: ")
    assert all(n in err[0] for n in names), err[0]


def test_help_and_no_arguments_print_help(capsys):
    from sia.pipelines.cli import main

    assert main([]) == 0
    assert "Usage: sia" in capsys.readouterr().out
    assert main(["replay", "--help"]) == 0
    assert "Usage: sia replay" in capsys.readouterr().out


def test_ctrl_c_outside_a_sweep_says_so_and_exits_130(monkeypatch, tmp_path, capsys):
    """A Ctrl-C while a command reads its trace is one line and exit 130, not silence."""
    from sia.pipelines import inputs
    from sia.pipelines.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(inputs, "workload_from_options", interrupted)
    assert main(["ingest", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]) == 130
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == ["interrupted (Ctrl-C): the command stopped before it finished"]


def test_the_console_script_freezes_the_heap_and_still_exits_cleanly(tmp_path):
    """`run()` freezes what is alive before exiting (no collector walks at exit), and the exit
    is otherwise the usual one: exit handlers run, piped output arrives whole, the code is
    main's."""
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
             "sys.argv = ['sia', 'version']\n"
             "from sia.pipelines.cli import run\n"
             "run()\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0].count(".") == 2 and lines[1:] == ["frozen", "True"], out.stdout
    probe = probe.replace("'version'", "'no-such-command'")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 2 and "no-such-command" in out.stderr
    assert out.stdout.split() == ["frozen", "True"]
