"""`sia schema`: write the JSON schema of the study configs, for editors and validators."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

HELP = """Write the JSON schema of the study configs (YAML) read by `sia evaluate`,
`sia figure5` and `sia figure16`.

Point an editor at it for completion and checks, e.g. with the YAML language
server: a first line `# yaml-language-server: $schema=sia-study.schema.json`.
Without --study the schema accepts a config of any of the three studies.

\b
Examples:
  sia schema --out sia-study.schema.json
  sia schema --study figure16
"""


def register(app: typer.Typer) -> None:
    """Add the `schema` command to ``app``."""

    @app.command("schema", help=HELP)
    def schema(
        study: Annotated[str | None, typer.Option(
            "--study", help="Only this study's schema: evaluate, figure5 or figure16.",
            show_default=False)] = None,
        out: Annotated[Path | None, typer.Option(
            "--out", help="Write the schema to this file (default: print it).",
            show_default=False)] = None,
    ) -> None:
        from sia.pipelines.studies.study_schema import json_schema

        text = json.dumps(json_schema(study), indent=2) + "\n"
        if out is None:
            typer.echo(text, nl=False)
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        typer.echo(f"wrote {out}")
