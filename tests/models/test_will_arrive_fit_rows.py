"""WillJobsArrive's row cap per booster fit (``max_fit_rows``): negative down-sampling with the
weight correction, so that many pools (rows = pools x 5-minute grid points) train in bounded time."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.features.table9 import FEATURE_COLUMNS
from sia.models.will_arrive import WillJobsArrive, fit_sample


def test_fit_sample_by_hand():
    y = np.array([0, 1, 0, 0, 1, 0, 0, 0])  # 2 positives, 6 negatives
    assert fit_sample(y, None) == (None, None)
    assert fit_sample(y, 8) == (None, None)  # at the cap: every row
    rows, w = fit_sample(y, 5, seed=3)
    # both positives and 3 of the 6 negatives, each negative standing for 6 / 3 = 2 rows
    assert rows.size == 5 and {1, 4} <= set(rows.tolist())
    assert list(rows) == sorted(rows)
    assert w.tolist() == [1.0 if y[r] else 2.0 for r in rows]
    assert w.sum() == pytest.approx(y.size)


def test_fit_sample_with_more_positives_than_the_cap_samples_every_row_alike():
    y = np.array([1, 1, 1, 1, 0, 1, 1, 0])
    rows, w = fit_sample(y, 3, seed=0)
    assert w is None and rows.size == 3 and len(set(rows.tolist())) == 3


@settings(max_examples=80, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=200), st.integers(2, 250), st.integers(0, 9))
def test_fit_sample_keeps_every_positive_and_the_total_weight(labels, cap, seed):
    y = np.array(labels, dtype=np.int8)
    rows, w = fit_sample(y, cap, seed=seed)
    if y.size <= cap:
        assert rows is None and w is None
        return
    assert rows.size == cap and np.unique(rows).size == cap
    assert rows.min() >= 0 and rows.max() < y.size and np.all(np.diff(rows) > 0)
    pos = int(y.sum())
    if pos >= cap:
        assert w is None
        return
    assert set(np.flatnonzero(y).tolist()) <= set(rows.tolist())  # every positive kept
    assert w.sum() == pytest.approx(y.size)  # the sample weighs what all the rows weighed
    assert np.all(w[y[rows] > 0] == 1.0)
    assert fit_sample(y, cap, seed=seed)[0].tolist() == rows.tolist()  # seeded


def _rare(n: int, seed: int) -> tuple[pl.DataFrame, np.ndarray]:
    """Rows whose P(arrival) is known: 2% base rate, 30% where arrivals_x10 > 3."""
    rng = np.random.default_rng(seed)
    data = {c: rng.integers(0, 5, n).astype(np.float32) for c in FEATURE_COLUMNS}
    p = np.where(data["arrivals_x10"] > 3, 0.3, 0.02)
    y = (rng.random(n) < p).astype(np.int8)
    return pl.DataFrame({"t": np.arange(n) * 300.0, **data, "label_arrival": y}), p


def test_a_capped_fit_keeps_the_probabilities_of_the_full_fit():
    """Down-sampled negatives, weighted back: the booster's P(arrival) stays near the true law
    in both regions. 40,000 rows hold about 3,000 arrivals; a cap of 12,000 keeps a quarter of
    the negatives (unweighted, the 2% region would read about 7%)."""
    rows, p = _rare(40_000, seed=1)
    y = rows["label_arrival"].to_numpy()
    full = WillJobsArrive(60, select="xgboost").fit(rows, y)
    capped = WillJobsArrive(60, select="xgboost", max_fit_rows=12_000).fit(rows, y)
    for est in (full, capped):
        proba = est.arrival_proba(rows)
        for level in (0.02, 0.3):
            assert proba[p == level].mean() == pytest.approx(level, abs=0.02)


def test_a_cap_above_the_rows_fits_the_same_booster():
    rows, _ = _rare(3_000, seed=2)
    y = rows["label_arrival"].to_numpy()
    a = WillJobsArrive(60, select="xgboost").fit(rows, y)
    b = WillJobsArrive(60, select="xgboost", max_fit_rows=3_000).fit(rows, y)
    assert np.array_equal(a.arrival_proba(rows), b.arrival_proba(rows))
    assert a.threshold_ == b.threshold_


def test_a_cap_below_the_rows_changes_the_fit():  # the cap is applied, not ignored
    rows, _ = _rare(3_000, seed=2)
    y = rows["label_arrival"].to_numpy()
    a = WillJobsArrive(60, select="xgboost").fit(rows, y)
    b = WillJobsArrive(60, select="xgboost", max_fit_rows=1_000).fit(rows, y)
    assert not np.array_equal(a.arrival_proba(rows), b.arrival_proba(rows))


@pytest.mark.parametrize("bad", [1, 0, -5, 2.5, True, "many"])
def test_a_bad_cap_names_itself(bad):
    rows, _ = _rare(200, seed=0)
    with pytest.raises(ValueError, match="max_fit_rows"):
        WillJobsArrive(60, max_fit_rows=bad).fit(rows, rows["label_arrival"].to_numpy())


def test_the_command_line_and_the_study_key_name_a_bad_cap(tmp_path):
    from sia.pipelines.studies.experiment import load_config
    from sia.pipelines.train import max_fit_rows_override

    assert max_fit_rows_override(None, "--max-fit-rows") == {}
    assert max_fit_rows_override(0, "--max-fit-rows") == {"max_fit_rows": None}
    assert max_fit_rows_override(500, "--max-fit-rows") == {"max_fit_rows": 500}
    for bad in (1, -2):
        with pytest.raises(ConfigError, match="--max-fit-rows"):
            max_fit_rows_override(bad, "--max-fit-rows")
    for value, ok in ((0, True), (1000, True), (1, False), (-3, False), (2.5, False)):
        cfg = tmp_path / f"c{value}.yaml"
        cfg.write_text("study: evaluate\nname: t\ntrace: {synthetic: base}\npolicies: [fcfs]\n"
                       f"predictors: {{train: on_the_fly, max_fit_rows: {value}}}\n")
        if ok:
            assert load_config(cfg).predictors.max_fit_rows == value
        else:
            with pytest.raises(ConfigError, match="predictors.max_fit_rows"):
                load_config(cfg)
