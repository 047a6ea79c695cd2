"""Where generated files go: one output root, ignored by git."""

from __future__ import annotations

import os
from pathlib import Path

OUTPUT_ROOT_ENV = "SIA_OUTPUT"
DEFAULT_OUTPUT_ROOT = "out"


def output_root() -> Path:
    """Return the output root: ``$SIA_OUTPUT`` when set, else ``./out``.

    Canonical Parquet, feature tables, results and the MLflow store all live
    under it, never in the source tree.
    """
    return Path(os.environ.get(OUTPUT_ROOT_ENV, DEFAULT_OUTPUT_ROOT))
