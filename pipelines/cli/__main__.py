"""`python -m sia.pipelines.cli`: the `sia` command line, as the console script runs it."""

from sia.pipelines.cli import run

run()
