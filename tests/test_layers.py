"""Imports flow one way (docs/architecture.md): pipelines -> {models, scheduler, features} ->
data, and models -> features. Checked on the source with ast, so an import inside a function
counts too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: package -> the product's packages it may import (besides itself)
ALLOWED = {
    "data": set(),
    "features": {"data"},
    "scheduler": {"data"},
    "models": {"features", "data"},
    "pipelines": {"models", "scheduler", "features", "data", "service"},
    # `sia serve`: the live service runs the scheduler's loop and policies; the pipelines
    # build what it starts from and hold its commands
    "service": {"scheduler", "data"},
}


def imported_packages(source: str) -> set[str]:
    """The ``sia.<package>`` names a module's source imports (anywhere in it)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "sia" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_imports_flow_one_way():
    wrong = []
    for pkg, allowed in ALLOWED.items():
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for dep in imported_packages(path.read_text(encoding="utf-8")) - allowed - {pkg}:
                wrong.append(f"{path.relative_to(ROOT)} imports sia.{dep}")
    assert not wrong, wrong


def test_the_import_finder_sees_nested_and_from_imports():
    src = ("import sia.data.schema\nfrom sia.models import registry\n"
           "def f():\n    from sia.scheduler.core import view\nimport numpy\nfrom . import x\n")
    assert imported_packages(src) == {"data", "models", "scheduler"}
