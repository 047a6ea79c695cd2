"""Fixtures shared by the pipeline tests."""

from __future__ import annotations

import os

import pytest
from sia.pipelines.executors import InlineExecutor


class CrashingExecutor(InlineExecutor):
    """Runs ``n`` replays in-process, then raises :attr:`Interrupted` (a crashed sweep)."""

    class Interrupted(Exception):
        """The simulated crash."""

    def __init__(self, n: int):
        self.n = n

    def run(self, fn, items):
        """Yield the first ``n`` results, then raise."""
        for i, pair in enumerate(super().run(fn, items)):
            if i == self.n:
                raise self.Interrupted
            yield pair


@pytest.fixture(autouse=True)
def _own_mlflow_store(request):
    """A pipeline test that chose no store (neither MLFLOW_TRACKING_URI nor SIA_OUTPUT set,
    e.g. by a module fixture) logs into its own empty one (sia replay, sia evaluate and sia
    train log runs by default), never into the output root of the working directory."""
    if not (os.environ.get("MLFLOW_TRACKING_URI") or os.environ.get("SIA_OUTPUT")):
        request.getfixturevalue("mlflow_uri")


@pytest.fixture
def crashing():
    """Return the executor class that dies after ``n`` replays: ``crashing(n)``."""
    return CrashingExecutor
