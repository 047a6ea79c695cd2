"""StackedForest: several XGBoost binary classifiers in one compiled call, against XGBoost itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xgboost as xgb
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.models.forest import StackedForest, base_margin_of

RTOL, ATOL = 1e-6, 1e-7


def train(x, y, rounds=1, **params):
    """Return a binary:logistic hist booster trained on (x, y), one thread."""
    params = {"objective": "binary:logistic", "tree_method": "hist", "nthread": 1, **params}
    return xgb.train(params, xgb.DMatrix(x, y), num_boost_round=rounds)


def xgb_proba(booster, x):
    return booster.inplace_predict(x, validate_features=False)


def xgb_margin(booster, x):
    return booster.inplace_predict(x, validate_features=False, predict_type="margin")


def random_data(rng, n_rows, n_features, nan_fraction):
    """Return (x float32 with NaN, y int) where y depends on the first features plus noise."""
    x = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    z = np.nan_to_num(x[:, 0]) + 0.5 * np.nan_to_num(x[:, -1]) + rng.normal(size=n_rows)
    x[rng.random(x.shape) < nan_fraction] = np.nan
    return x, (z > 0.3).astype(np.int32)


def test_one_stump_by_hand():
    """1 feature, 1 tree of depth 1, base_score 0.3, eta 1, lambda 1: the leaves are Newton
    steps -G / (H + lambda) with g = p - y, h = p (1 - p) at p = 0.3."""
    x = np.arange(10, dtype=np.float32)[:, None]
    y = (x[:, 0] >= 7).astype(np.int32)  # 3 positives
    b = train(x, y, base_score=0.3, eta=1.0, reg_lambda=1.0, max_depth=1, min_child_weight=0)
    f = StackedForest([b])
    # left x < 7: 7 rows, g = 0.3, h = 0.21; right: 3 rows, g = -0.7, h = 0.21
    left_leaf = -(7 * 0.3) / (7 * 0.21 + 1.0)
    right_leaf = -(3 * -0.7) / (3 * 0.21 + 1.0)
    offset = math.log(0.3 / 0.7)
    assert f.n_trees == (1,) and f.n_features == (1,)
    assert f.feature[0] == 0 and 6.0 < f.threshold[0] <= 7.0
    assert (f.left[0], f.right[0]) == (1, 2) and f.left[1] == f.right[1] == -1
    np.testing.assert_allclose(f.value[1:], [left_leaf, right_leaf], rtol=1e-6)
    assert f.base_score[0] == pytest.approx(0.3) and f.base_margin[0] == pytest.approx(offset)
    q = np.array([[0.0], [6.0], [6.999], [7.0], [9.0], [100.0]], dtype=np.float32)
    expect = offset + np.array([left_leaf] * 3 + [right_leaf] * 3)
    np.testing.assert_allclose(f.predict_margin([q])[0], expect, rtol=1e-6)
    np.testing.assert_allclose(f.predict_proba([q])[0], 1 / (1 + np.exp(-expect)), rtol=1e-6)
    np.testing.assert_array_equal(f.predict_margin([q])[0], xgb_margin(b, q))


@pytest.mark.parametrize("nan_label", [0, 1])
def test_nan_follows_the_default_direction(nan_label):
    """Training NaNs labelled like the left (0) or right (1) side set the default direction;
    NaN rows then get that side's leaf, as in XGBoost; infinities are ordinary values."""
    x = np.r_[np.arange(20.0), [np.nan] * 10].astype(np.float32)[:, None]
    y = np.r_[np.arange(20) >= 10, [nan_label] * 10].astype(np.int32)
    b = train(x, y, max_depth=1, min_child_weight=0)
    f = StackedForest([b])
    assert bool(f.default_left[0]) == (nan_label == 0)
    q = np.array([[np.nan], [0.0], [19.0], [np.inf], [-np.inf]], dtype=np.float32)
    m = f.predict_margin([q])[0]
    assert m[0] == (m[1] if nan_label == 0 else m[2])
    assert m[3] == m[2] and m[4] == m[1]
    np.testing.assert_array_equal(m, xgb_margin(b, q))
    np.testing.assert_array_equal(f.predict_proba([q])[0], xgb_proba(b, q))


def test_several_boosters_of_different_widths_in_one_call():
    rng = np.random.default_rng(3)
    boosters, blocks = [], []
    for n_features, depth, rounds in ((16, 6, 100), (5, 3, 20), (1, 2, 7)):
        x, y = random_data(rng, 400, n_features, 0.15)
        boosters.append(train(x, y, rounds, max_depth=depth))
        blocks.append(random_data(rng, 15, n_features, 0.15)[0])
    f = StackedForest(boosters)
    assert f.n_features == (16, 5, 1) and f.n_trees == (100, 20, 7)
    assert f.tree_start.tolist() == [0, 100, 120, 127]
    p = f.predict_proba(blocks)
    assert p.shape == (3, 15) and p.dtype == np.float32
    for i, b in enumerate(boosters):
        np.testing.assert_allclose(p[i], xgb_proba(b, blocks[i]), rtol=RTOL, atol=ATOL)
    # different row counts: one array per model
    ragged = [blocks[0], blocks[1][:4], np.empty((0, 1), np.float32)]
    out = f.predict_margin(ragged)
    assert isinstance(out, list) and [a.shape for a in out] == [(15,), (4,), (0,)]
    for i, b in enumerate(boosters[:2]):
        np.testing.assert_allclose(out[i], xgb_margin(b, ragged[i]), rtol=RTOL, atol=ATOL)
    # float64 and non-contiguous blocks are taken as XGBoost takes them (float32)
    wide = np.asfortranarray(blocks[0].astype(np.float64))
    np.testing.assert_array_equal(f.predict_proba([wide, blocks[1], blocks[2]])[0], p[0])


@pytest.mark.parametrize("base_score", [0.1, 0.3, 0.362, 0.376, 0.39, 0.5, 0.8123, 0.9999, 1e-4])
def test_explicit_base_score_is_the_logit_of_the_stored_probability(base_score):
    """With eta 0 the trees add nothing: the margin is XGBoost's offset for base_score
    exactly (some of these values are where float32 arithmetic or numpy's float32 log
    are 1 ulp off XGBoost's -logf(1/p - 1))."""
    rng = np.random.default_rng(0)
    x, y = random_data(rng, 60, 2, 0.0)
    b = train(x, y, base_score=base_score, eta=0.0, max_depth=2)
    f = StackedForest([b])
    assert f.base_score[0] == pytest.approx(base_score, rel=1e-6)
    assert f.base_margin[0] == xgb_margin(b, x[:1])[0] == base_margin_of(base_score)
    assert f.base_margin[0] == pytest.approx(math.log(base_score / (1 - base_score)), rel=1e-5)


@pytest.mark.parametrize("labels", ["mixed", "all0", "all1"])
def test_estimated_base_score_and_reloaded_models(labels, tmp_path):
    """XGBoost estimates base_score from the labels (boost_from_average; 0 or 1 when all
    labels agree, clipped to 1e-6 from the ends); a booster reloaded from UBJ or JSON (as
    the registry serves them) gives the same forest."""
    rng = np.random.default_rng(1)
    x, y = random_data(rng, 300, 4, 0.1)
    y = {"mixed": y, "all0": np.zeros_like(y), "all1": np.ones_like(y)}[labels]
    b = train(x, y, 10, max_depth=3)
    q = random_data(rng, 50, 4, 0.1)[0]
    f = StackedForest([b])
    if labels == "mixed":
        assert f.base_score[0] == pytest.approx(y.mean(), abs=1e-6)
    np.testing.assert_array_equal(f.predict_margin([q])[0], xgb_margin(b, q))
    for ext in ("ubj", "json"):
        b.save_model(tmp_path / f"m.{ext}")
        again = StackedForest([xgb.Booster(model_file=tmp_path / f"m.{ext}")])
        np.testing.assert_array_equal(again.predict_proba([q]), f.predict_proba([q]))


def test_deep_lossguide_trees():
    """Trees far deeper than 6 (lossguide, no depth limit) walk to their leaves too."""
    rng = np.random.default_rng(2)
    x, y = random_data(rng, 2000, 6, 0.2)
    b = train(x, y, 5, grow_policy="lossguide", max_depth=0, max_leaves=200, min_child_weight=0)
    f = StackedForest([b])
    assert f.depth.max() > 8
    q = random_data(rng, 300, 6, 0.2)[0]
    np.testing.assert_allclose(f.predict_proba([q])[0], xgb_proba(b, q), rtol=RTOL, atol=ATOL)


def test_parallel_trees_and_early_stopping_attributes_sum_every_tree():
    """num_parallel_tree > 1 (boosted random forests) adds all trees; a booster with
    best_iteration set still predicts with all its trees in inplace_predict, and so here."""
    rng = np.random.default_rng(4)
    x, y = random_data(rng, 500, 5, 0.1)
    b = train(x, y, 4, num_parallel_tree=3, subsample=0.8, colsample_bynode=0.8, max_depth=4)
    b.set_attr(best_iteration="1")
    f = StackedForest([b])
    assert f.n_trees == (12,)
    q = random_data(rng, 100, 5, 0.1)[0]
    np.testing.assert_allclose(f.predict_proba([q])[0], xgb_proba(b, q), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("params, y_kind, match", [
    ({"objective": "reg:squarederror"}, "binary", "objective 'reg:squarederror'"),
    ({"objective": "binary:logitraw"}, "binary", "objective 'binary:logitraw'"),
    ({"objective": "multi:softprob", "num_class": 3}, "three", "objective 'multi:softprob'"),
    ({"booster": "dart"}, "binary", "'dart' booster"),
    ({"booster": "gblinear"}, "binary", "'gblinear' booster"),
    ({}, "two_labels", "multi-target"),
    ({"multi_strategy": "multi_output_tree"}, "two_labels", "multi-target"),
    ({"max_cat_to_onehot": 1}, "categorical", "categorical splits"),
])
def test_unsupported_models_raise_a_clear_error(params, y_kind, match):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=(80, 2)).astype(np.float32)
    y = (x[:, 0] >= 2).astype(np.int32)
    kw = {}
    if y_kind == "three":
        y = x[:, 0].astype(np.int32) % 3
    elif y_kind == "two_labels":
        y = np.c_[y, 1 - y]
    elif y_kind == "categorical":
        kw = {"feature_types": ["c", "q"], "enable_categorical": True}
    params = {"objective": "binary:logistic", "nthread": 1, **params}
    if "booster" not in params:
        params["tree_method"] = "hist"
    b = xgb.train(params, xgb.DMatrix(x, y, **kw), num_boost_round=2)
    with pytest.raises(ValueError, match=match):
        StackedForest([b])


def test_wrong_blocks_raise():
    rng = np.random.default_rng(0)
    x, y = random_data(rng, 100, 3, 0.0)
    f = StackedForest([train(x, y, 2), train(x, y, 2)])
    with pytest.raises(ValueError, match="2 models"):
        f.predict_proba([x])
    with pytest.raises(ValueError, match=r"needs \[n_rows, 3\]"):
        f.predict_proba([x, x[:, :2]])
    with pytest.raises(ValueError, match="no boosters"):
        StackedForest([])


@st.composite
def forests(draw):
    """1-3 boosters with random small hyperparameters, each with its own random data."""
    seed = draw(st.integers(0, 2**32 - 1))
    specs = draw(st.lists(st.tuples(
        st.integers(1, 8),        # features
        st.integers(1, 6),        # max depth
        st.integers(1, 50),       # trees
        st.sampled_from([0.0, 0.1, 0.5]),  # NaN fraction
        st.integers(0, 25),       # rows to predict
    ), min_size=1, max_size=3))
    eta = draw(st.sampled_from([0.05, 0.3, 1.0]))
    return seed, specs, eta


@settings(max_examples=25)
@given(forests())
def test_stacked_forest_equals_inplace_predict(case):
    seed, specs, eta = case
    rng = np.random.default_rng(seed)
    boosters, blocks = [], []
    for n_features, depth, rounds, nan_fraction, n_rows in specs:
        x, y = random_data(rng, 150, n_features, nan_fraction)
        boosters.append(train(x, y, rounds, max_depth=depth, eta=eta, min_child_weight=0.1))
        blocks.append(random_data(rng, n_rows, n_features, nan_fraction)[0])
    f = StackedForest(boosters)
    # values exactly at split thresholds (x < t goes left) and just below them
    for i, q in enumerate(blocks):
        lo, hi = f.tree_start[i], f.tree_start[i + 1]
        nodes = np.arange(f.root[lo], f.root[hi] if hi < len(f.root) else len(f.left))
        splits = nodes[f.left[nodes] >= 0]
        if splits.size and q.size:
            pick = rng.choice(splits, size=q.size // 2)
            rows = rng.integers(0, q.shape[0], size=pick.size)
            t = f.threshold[pick]
            q[rows, f.feature[pick]] = np.where(rng.random(pick.size) < 0.5, t,
                                                np.nextafter(t, np.float32(-np.inf)))
    proba, margin = f.predict_proba(blocks), f.predict_margin(blocks)
    for i, b in enumerate(boosters):
        np.testing.assert_allclose(proba[i], xgb_proba(b, blocks[i]), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(margin[i], xgb_margin(b, blocks[i]), rtol=RTOL, atol=ATOL)
