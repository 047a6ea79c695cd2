"""The one way the predictor estimators read a feature frame: named columns, checked at the boundary."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

#: The polars type a matrix of each numpy type is cast through.
_POLARS = {np.dtype(np.float64): pl.Float64, np.dtype(np.float32): pl.Float32}


def frame_columns(X: Any, columns: list[str], what: str, hint: str,
                  dtype: type = np.float64) -> np.ndarray:
    """Return the ``columns`` of frame ``X`` (polars or pandas) as a ``dtype`` [n, len(columns)] matrix.

    Raises ValueError naming ``what`` was called, the missing columns and
    ``hint`` (how to build them), or the wrong type of ``X``.
    """
    import pandas as pd

    if isinstance(X, pl.DataFrame):
        missing = [c for c in columns if c not in X.columns]
        if not missing:  # cast column by column: no float64 copy of the whole table first
            try:
                return X.select(pl.col(columns).cast(_POLARS[np.dtype(dtype)])).to_numpy()
            except pl.exceptions.InvalidOperationError as exc:
                first = str(exc).splitlines()[0]
                raise ValueError(f"{what}: the columns {columns} must be numeric ({first})"
                                 ) from None
    elif isinstance(X, pd.DataFrame):
        missing = [c for c in columns if c not in X.columns]
        if not missing:
            return X[columns].to_numpy(dtype=dtype)
    else:
        raise ValueError(f"{what}: X must be a polars or pandas frame with the columns "
                         f"{columns}, not {type(X).__name__}")
    raise ValueError(f"{what}: X lacks column(s) {missing}; {hint}")
