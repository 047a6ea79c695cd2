"""`sia version`: print the installed version."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import typer


def register(app: typer.Typer) -> None:
    """Add the `version` command to ``app``."""

    @app.command("version")
    def version_cmd() -> None:
        """Print the installed version of the package."""
        try:
            typer.echo(version("sia-sched"))
        except PackageNotFoundError:
            typer.echo("unknown (not installed)")
