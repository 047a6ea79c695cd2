"""MkDocs hooks: the generated reference pages of the documentation site.

``mkdocs.yml`` loads this file (``hooks:``). At each build it adds two pages that are
never written by hand, so they cannot drift from the code:

- ``reference/cli.md``: every ``sia`` command with its usage, help and options, read from
  the typer app's click command tree (:func:`cli_reference`);
- ``reference/config.md``: every key of the study configs (``sia evaluate``, ``sia figure5``,
  ``sia figure16``), read from the pydantic models in
  :mod:`sia.pipelines.studies.study_schema` (:func:`config_reference`).

It also lays out ``.cache/api/sia/`` as symlinks to the source folders, so that
mkdocstrings finds the ``sia.*`` modules (the folders are installed as the ``sia``
namespace through a package-dir mapping that static analysis cannot follow).

The tests (``tests/test_docs.py``) import this file by path and check that every command,
option and config key appears in the generated pages.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Source folders installed as ``sia.<name>`` (pyproject.toml's package-dir).
PACKAGES = ("data", "features", "models", "scheduler", "pipelines", "service")
API_DIR = ROOT / ".cache" / "api"


# ----------------------------------------------------------------------------- CLI
def _clean_help(text: str) -> str:
    """Click help text as Markdown: ``\\b`` blocks (kept verbatim by click) become code."""
    out: list[str] = []
    lines = (text or "").strip("\n").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "\b":
            block = []
            i += 1
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            title = block[0] if block and block[0].rstrip().endswith(":") else None
            body = block[1:] if title else block
            if title:
                out += [f"**{title.strip()}**", ""]
            out += ["```text", *(b.rstrip() for b in body), "```"]
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out).strip()


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def cli_commands() -> dict[str, Any]:
    """Return the ``sia`` app's click commands by name, sorted."""
    import typer.main
    from sia.pipelines.cli import app

    group = typer.main.get_command(app)
    return dict(sorted(group.commands.items())), group


def cli_reference() -> str:
    """Return the Markdown page of every ``sia`` command (usage, help, options)."""
    import typer

    commands, group = cli_commands()
    click = typer._click.core  # Typer vendors click; its Context renders the help records
    root = click.Context(group, info_name="sia")
    lines = [
        "# Command reference",
        "",
        "Generated at each docs build from the `sia` typer app (`tools/mkdocs_hooks.py`);",
        "`sia COMMAND --help` prints the same text.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name, cmd in commands.items():
        lines.append(f"| [`sia {name}`](#sia-{name}) | {_cell(cmd.get_short_help_str(200))} |")
    for name, cmd in commands.items():
        ctx = click.Context(cmd, info_name=name, parent=root)
        usage = " ".join(["sia", name, *cmd.collect_usage_pieces(ctx)])
        lines += ["", f"## `sia {name}` {{ #sia-{name} }}", "", "```text", usage, "```", "",
                  _clean_help(cmd.help or ""), ""]
        records = [p.get_help_record(ctx) for p in cmd.params]
        records = [r for r in records if r is not None]
        if records:
            lines += ["| option | description |", "|---|---|"]
            lines += [f"| `{_cell(opt)}` | {_cell(desc)} |" for opt, desc in records]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- config
def _unwrap(tp: Any) -> tuple[Any, str]:
    """Strip ``Annotated`` from ``tp``; return (type, its constraints as text)."""
    notes = []
    if typing.get_origin(tp) is typing.Annotated:
        base, *meta = typing.get_args(tp)
        for m in meta:
            for item in getattr(m, "metadata", [m]):
                for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
                    value = getattr(item, attr, None)
                    if value is not None:
                        notes.append(f"{sign} {value}")
        return base, ", ".join(notes)
    return tp, ""


def type_name(tp: Any) -> str:
    """A short readable name of a field's annotation (``float > 0``, ``list[str]`` ...)."""
    from pydantic import BaseModel

    tp, notes = _unwrap(tp)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        parts = [type_name(a) for a in typing.get_args(tp) if a is not type(None)]
        text = " or ".join(dict.fromkeys(parts))
    elif origin is typing.Literal:
        text = " \\| ".join(f"`{a}`" for a in typing.get_args(tp))
    elif origin in (list, tuple, dict):
        args = ", ".join(type_name(a) for a in typing.get_args(tp) if a is not Ellipsis)
        text = f"{origin.__name__}[{args}]"
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        text = "mapping"
    elif tp is type(None):
        text = "null"
    else:
        text = getattr(tp, "__name__", str(tp))
    return f"{text} {notes}" if notes else text


def _models_in(tp: Any) -> list[Any]:
    """The pydantic models inside an annotation (through unions, lists and dicts)."""
    from pydantic import BaseModel

    tp, _ = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    found = []
    for arg in typing.get_args(tp):
        found += _models_in(arg)
    return found


def config_keys(model: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Return (dotted key, field info, the model declaring it) of every key of ``model``,
    nested sections included (a list of sections is written ``key[].sub``)."""
    keys = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        keys.append((key, info, model))
        ann = info.annotation
        options = typing.get_args(ann) if typing.get_origin(ann) in (
            typing.Union, types.UnionType) else (ann,)
        listed = any(typing.get_origin(_unwrap(a)[0]) is list for a in options)
        for sub in _models_in(ann):
            if sub is not model:
                keys += config_keys(sub, f"{key}[]." if listed else f"{key}.")
    return keys


def config_reference() -> str:
    """Return the Markdown page of every study config key, from the pydantic models."""
    from sia.pipelines.studies.study_schema import MODELS

    lines = [
        "# Config schema",
        "",
        "Generated at each docs build from the pydantic models in",
        "`sia.pipelines.studies.study_schema` (`tools/mkdocs_hooks.py`). A study config is a",
        "YAML mapping read by `sia evaluate`, `sia figure5` or `sia figure16`; unknown keys,",
        "duplicate keys and NaN / infinite numbers are errors naming the file and the key.",
        "`--set KEY=VALUE` overrides any key below (dotted, value read as YAML), and",
        "`sia schema --out sia-study.schema.json` writes the same schema as JSON Schema for an",
        "editor. Every key is optional unless its type says **required**; an unset key",
        "takes the default its row names (the configs in `experiments/` show them in use).",
    ]
    for study, model in MODELS.items():
        lines += ["", f"## `{study}`: {_cell((model.__doc__ or '').strip())}", "",
                  "| key | type | what |", "|---|---|---|"]
        for key, info, _owner in config_keys(model):
            sections = [m for m in _models_in(info.annotation) if m is not model]
            what = info.description or (sections[0].__doc__ or "" if sections else "")
            required = ", **required**" if info.is_required() else ""
            lines.append(f"| `{key}` | {type_name(info.annotation)}{required} "
                         f"| {_cell(what.strip())} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- API sources
def link_api_sources(dest: Path = API_DIR) -> Path:
    """Lay out ``dest/sia/<package>`` as symlinks to the source folders; return ``dest``."""
    sia = dest / "sia"
    sia.mkdir(parents=True, exist_ok=True)
    for name in PACKAGES:
        link = sia / name
        if link.is_symlink() or link.exists():
            if link.resolve() == (ROOT / name).resolve():
                continue
            link.unlink()
        link.symlink_to(ROOT / name, target_is_directory=True)
    return dest


# ----------------------------------------------------------------------------- MkDocs events
GENERATED = {"reference/cli.md": cli_reference, "reference/config.md": config_reference}


def on_config(config: Any) -> Any:
    """Make the API sources findable before mkdocstrings reads them.

    Run as ``.venv/bin/mkdocs``, Python puts ``.venv/bin`` first on ``sys.path``, where the
    ``sia`` console script is a file named ``sia`` that griffe would take for part of the
    ``sia`` package: such folders leave the path (``python -m mkdocs`` never adds them).
    """
    import sys

    link_api_sources()
    sys.path[:] = [p for p in sys.path if not (Path(p or ".") / "sia").is_file()]
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages to the site."""
    from mkdocs.structure.files import File

    for path, make in GENERATED.items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=make()))
    return files


if __name__ == "__main__":  # `make docs`: lay out the API sources before MkDocs reads its config
    print(f"API sources linked under {link_api_sources()}")
