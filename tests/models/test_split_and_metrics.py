"""Time split, binary metrics, baselines and thresholds on hand-checked cases."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.models.split import (
    DAY_S,
    active_start_s,
    choose_split,
    split_by_window,
    split_features,
)
from sia.models.will_arrive import (
    always_yes_prediction,
    binary_metrics,
    persistence_prediction,
    scale_pos_weight,
    threshold_for_recall,
)


def test_active_start_skips_the_nearly_empty_days():
    # days 0..2: one job each; days 3..9: 100 jobs each -> median 100, 10% = 10
    times = np.concatenate([[0.5 * DAY_S, 1.5 * DAY_S, 2.5 * DAY_S]]
                           + [d * DAY_S + np.linspace(0, DAY_S - 1, 100) for d in range(3, 10)])
    assert active_start_s(times) == 3 * DAY_S


def test_choose_split_records_boundaries_and_rejects_a_split_past_the_end():
    times = np.arange(0, 40 * DAY_S, 3600.0)
    s = choose_split(times, train_days=21, val_days=14, warmup_days=3)
    assert (s.train_start, s.train_end, s.val_end) == (3 * DAY_S, 24 * DAY_S, 38 * DAY_S)
    assert s.to_params()["split_train_days"] == 21
    with pytest.raises(ConfigError, match="does not fit"):
        choose_split(times, train_days=30, val_days=14, warmup_days=3)
    with pytest.raises(ConfigError, match="--val-days"):
        choose_split(times, val_days=0)
    assert choose_split(times, train_days=2, val_days=1, warmup_days=0, start_day=5).train_start == 5 * DAY_S


@settings(max_examples=40, deadline=None)
@given(st.floats(1.5, 60), st.floats(1, 40), st.floats(0.5, 30), st.floats(0, 5))
@example(10.0, 21.0, 14.0, 3.0)  # the default split on a 10-day trace: 4.1 + 2.7 days fit
def test_a_split_past_the_end_suggests_one_that_fits(span, train_days, val_days, warmup):
    """The error names --train-days / --val-days in the same proportions that fit the trace."""
    times = np.arange(0, span * DAY_S, 1800.0)
    try:
        choose_split(times, train_days=train_days, val_days=val_days, warmup_days=warmup)
        return
    except ConfigError as exc:
        got = re.search(r"e\.g\. --train-days ([\d.]+) --val-days ([\d.]+)", str(exc))
    if got is None:  # too little left after the warm-up for a tenth of a day each
        return
    t, v = float(got[1]), float(got[2])
    assert t > 0 and v > 0 and t / (t + v) == pytest.approx(train_days / (train_days + val_days),
                                                            abs=0.1)
    choose_split(times, train_days=t, val_days=v, warmup_days=warmup)  # fits


@settings(max_examples=30, deadline=None)
@given(st.floats(0.5, 5), st.floats(0.5, 5), st.sampled_from([5, 60, 720]))
def test_split_rows_are_disjoint_and_labels_stay_inside(train_days, val_days, k):
    grid = np.arange(0, 12 * DAY_S, 300.0)
    feats = pl.DataFrame({"pool": ["a"] * grid.size, "t": grid, "k_min": [k] * grid.size},
                         schema_overrides={"k_min": pl.Int32})
    s = choose_split(np.array([0.0, 11.5 * DAY_S]), train_days=train_days, val_days=val_days,
                     warmup_days=0.5, start_day=0)
    tr, va = split_features(feats, s)
    k_s = k * 60.0
    assert set(tr["t"]).isdisjoint(set(va["t"]))
    if tr.height:
        assert tr["t"].min() >= s.train_start and tr["t"].max() + k_s <= s.train_end
    if va.height:
        assert va["t"].min() >= s.train_end and va["t"].max() + k_s <= s.val_end
    if tr.height and va.height:  # the label windows (t, t+k] never overlap
        assert tr["t"].max() + k_s <= va["t"].min()


@settings(max_examples=20, deadline=None)
@given(st.floats(0.5, 4), st.floats(0.5, 4), st.lists(st.sampled_from([5, 60, 720]), min_size=1,
                                                      max_size=3, unique=True))
def test_split_by_window_is_split_features_per_window(train_days, val_days, windows):
    grid = np.arange(0, 10 * DAY_S, 1800.0)
    feats = pl.concat([pl.DataFrame({"pool": ["a"] * grid.size, "t": grid,
                                     "k_min": [k] * grid.size}, schema_overrides={"k_min": pl.Int32})
                       for k in (720, 5, 60)])  # not sorted by window: order must not matter
    s = choose_split(np.array([0.0, 9.5 * DAY_S]), train_days=train_days, val_days=val_days,
                     warmup_days=0.5, start_day=0)
    tr, va = split_features(feats, s)
    rows = split_by_window(feats, s, tuple(windows))
    assert sorted(rows) == sorted(windows)
    for k, (tr_k, va_k) in rows.items():
        assert tr_k.equals(tr.filter(pl.col("k_min") == k))
        assert va_k.equals(va.filter(pl.col("k_min") == k))


def test_binary_metrics_by_hand():
    y = np.array([1, 1, 1, 0, 0, 0, 0, 1])
    p = np.array([1, 0, 1, 1, 0, 0, 0, 0])
    m = binary_metrics(y, p)
    # TP=2, FP=1, FN=2 -> P=2/3, R=1/2, F=2PR/(P+R)=4/7
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(0.5)
    assert m["f1"] == pytest.approx(4 / 7)
    assert (m["positives"], m["predicted_positives"], m["rows"]) == (4, 3, 8)
    assert binary_metrics(y, np.zeros(8))["precision"] == 0.0


def test_baselines_persistence_and_always_yes():
    feats = pl.DataFrame({"arrivals_x1": [0, 2, 1, 0], "label_arrival": [1, 1, 0, 0]})
    assert persistence_prediction(feats).tolist() == [0, 1, 1, 0]
    assert always_yes_prediction(feats).tolist() == [1, 1, 1, 1]
    m = binary_metrics(feats["label_arrival"].to_numpy(), persistence_prediction(feats))
    assert (m["precision"], m["recall"]) == (0.5, 0.5)
    yes = binary_metrics(feats["label_arrival"].to_numpy(), always_yes_prediction(feats))
    assert (yes["precision"], yes["recall"]) == (0.5, 1.0)


def test_scale_pos_weight_and_threshold_for_recall():
    assert scale_pos_weight(np.array([1, 0, 0, 0])) == 3.0
    assert scale_pos_weight(np.zeros(3)) == 1.0
    y = np.array([1, 1, 1, 1, 0, 0])
    proba = np.array([0.9, 0.8, 0.4, 0.2, 0.5, 0.1])
    assert threshold_for_recall(y, proba, 0.5) == pytest.approx(0.8)
    assert threshold_for_recall(y, proba, 0.75) == pytest.approx(0.4)
    assert threshold_for_recall(y, proba, 1.0) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="target_recall"):
        threshold_for_recall(y, proba, 0.0)
