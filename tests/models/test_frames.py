"""frame_columns: the estimators' one reader of a feature frame (values, order, errors)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sia.models.frames import frame_columns

_TYPES = {"i32": (pl.Int32, np.int32), "i64": (pl.Int64, np.int64),
          "f32": (pl.Float32, np.float32), "f64": (pl.Float64, np.float64),
          "bool": (pl.Boolean, np.bool_)}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=5), st.integers(0, 40),
       st.sampled_from([np.float32, np.float64]), st.data())
def test_a_polars_frame_reads_as_numpys_cast_of_its_values(kinds, n, dtype, data):
    # each column cast on its own (no float64 copy of the whole table first) must give what
    # numpy's cast of the float64 table gave, column order as asked, for every dtype mix
    cols = {}
    for i, kind in enumerate(kinds):
        np_type = _TYPES[kind][1]
        elems = (st.floats(-2.0**40, 2.0**40, width=32 if kind == "f32" else 64)
                 if kind.startswith("f") else None)
        cols[f"c{i}"] = data.draw(hnp.arrays(np_type, n, elements=elems))
    frame = pl.DataFrame({k: pl.Series(k, v, dtype=_TYPES[kinds[i]][0])
                          for i, (k, v) in enumerate(cols.items())})
    order = list(reversed(frame.columns))
    want = np.column_stack([cols[c].astype(np.float64) for c in order]).astype(dtype) \
        if n else np.zeros((0, len(order)), dtype=dtype)
    got = frame_columns(frame, order, "test", "hint", dtype=dtype)
    assert got.dtype == dtype and got.shape == (n, len(order))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(frame_columns(frame.to_pandas(), order, "test", "hint",
                                                dtype=dtype), want)


def test_errors_name_the_call_the_columns_and_the_fix():
    frame = pl.DataFrame({"a": [1, 2], "s": ["x", "y"]})
    with pytest.raises(ValueError, match=r"fit: X lacks column\(s\) \['b'\]; build them"):
        frame_columns(frame, ["a", "b"], "fit", "build them")
    with pytest.raises(ValueError, match=r"fit: the columns \['a', 's'\] must be numeric"):
        frame_columns(frame, ["a", "s"], "fit", "build them")
    with pytest.raises(ValueError, match="polars or pandas frame"):
        frame_columns(np.zeros((2, 2)), ["a"], "fit", "build them")
    assert frame_columns(pd.DataFrame({"a": [1, 2]}), ["a"], "fit", "-").tolist() == [[1.0],
                                                                                     [2.0]]
