"""The documentation's generated reference covers the code, and the code stays readable.

- every ``sia`` command and every option of it appears in the generated command reference;
- every key of every study config appears in the generated config reference;
- every column and bad-row kind of the trace contract appears on its page;
- no function of the package is longer than 80 lines (ast-based).

The generators are the MkDocs hook's own functions (``tools/mkdocs_hooks.py``), so these
tests check the pages the docs build writes.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("data", "features", "models", "scheduler", "pipelines", "service")
MAX_FUNCTION_LINES = 80


def _hooks():
    spec = importlib.util.spec_from_file_location("sia_mkdocs_hooks",
                                                  ROOT / "tools" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hooks():
    return _hooks()


def test_every_command_and_option_is_in_the_cli_reference(hooks):
    page = hooks.cli_reference()
    commands, _ = hooks.cli_commands()
    assert len(commands) >= 10
    for name, cmd in commands.items():
        assert f"## `sia {name}`" in page, name
        for param in cmd.params:
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("-"):
                    assert f"`{opt}" in page or f", {opt}" in page or f"/ {opt}" in page, \
                        f"sia {name} {opt}"


def test_every_config_key_is_in_the_config_reference(hooks):
    from sia.pipelines.studies.study_schema import MODELS

    page = hooks.config_reference()
    seen = 0
    for study, model in MODELS.items():
        assert f"## `{study}`" in page
        for key, _info, _owner in hooks.config_keys(model):
            assert f"| `{key}` |" in page, f"{study}: {key}"
            seen += 1
    # nested sections are walked: a few known deep keys
    for key in ("trace.path", "policies[].options", "predictors.alias", "oracle.solver",
                "grid.experiments", "regions.column"):
        assert f"| `{key}` |" in page, key
    assert seen > 60


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` inside a cell does not split it)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_every_config_key_says_what_it_does_and_its_default(hooks):
    """Every key has its own description (not a section's docstring), which names its default
    (or that it is required or has none), and the reference's "what" cell shows it."""
    from sia.pipelines.studies.study_schema import MODELS

    vague = []
    for study, model in MODELS.items():
        for key, info, _owner in hooks.config_keys(model):
            what = (info.description or "").strip()
            if not re.search(r"default|required|optional", what, re.IGNORECASE):
                vague.append(f"{study}: {key}: {what!r}")
    assert not vague, f"config keys without a description naming their default: {vague}"
    rows = [line for line in hooks.config_reference().splitlines() if line.startswith("| `")]
    assert len(rows) > 60
    empty = [row for row in rows if len(_cells(row)) != 3 or not _cells(row)[2]]
    assert not empty, f"rows of the config reference with an empty 'what': {empty}"


def test_the_row_reader_keeps_escaped_bars_in_their_cell():
    assert _cells("| `a` | `x` \\| `y` |  | does b |") == ["`a`", "`x` \\| `y`", "", "does b"]


def test_config_keys_walk_every_field_of_every_model(hooks):
    """The walk itself misses nothing: its top-level keys are the models' fields."""
    from sia.pipelines.studies.study_schema import MODELS

    for model in MODELS.values():
        top = {k for k, _i, _o in hooks.config_keys(model) if "." not in k}
        assert top == set(model.model_fields)


def test_type_names_are_readable(hooks):
    from typing import Annotated, Literal

    from pydantic import Field

    assert hooks.type_name(Annotated[float, Field(gt=0)] | None) == "float > 0"
    assert hooks.type_name(list[str] | None) == "list[str]"
    assert hooks.type_name(Literal["a", "b"]) == "`a` \\| `b`"


def test_help_blocks_become_code(hooks):
    text = "Do it.\n\n\b\nExamples:\n  sia x --y 1\n  sia x\n\nMore."
    out = hooks._clean_help(text)
    assert "**Examples:**" in out
    assert "```text\n  sia x --y 1\n  sia x\n```" in out
    assert "\b" not in out


def test_the_trace_contract_page_names_every_column_and_bad_row_kind():
    from sia.data.schema import (
        BAD_ROW_KINDS,
        JOB_SCHEMA,
        NULLABLE_EXTRA_SCHEMA,
        POOL_SCHEMA,
    )

    page = (ROOT / "docs" / "reference" / "trace-contract.md").read_text()
    for name in [*JOB_SCHEMA, *NULLABLE_EXTRA_SCHEMA, *POOL_SCHEMA, *BAD_ROW_KINDS]:
        assert f"| `{name}` |" in page, name


def long_functions(root: Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Return ``path:line name (n lines)`` for every function longer than ``limit`` lines
    (from ``def`` to its last line, docstring included; decorators not counted)."""
    found = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    n = node.end_lineno - node.lineno + 1
                    if n > limit:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} "
                                     f"({n} lines)")
    return found


def test_no_function_is_over_80_lines():
    over = long_functions()
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines (split them along their " \
        f"steps): {over}"


def test_the_line_counter_counts_from_def_to_the_last_line(tmp_path):
    def function(name: str, body_lines: int) -> str:
        body = "".join(f"    x{i} = {i}\n" for i in range(body_lines - 1))
        return f"def {name}():\n{body}    return 0\n"

    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
    # 1 + 79 = 80 lines: at the limit; 1 + 81 = 82 lines: over it
    (tmp_path / "data" / "m.py").write_text(function("short", 79) + "\n\n" + function("long", 81))
    assert long_functions(tmp_path) == ["data/m.py:83 long (82 lines)"]
