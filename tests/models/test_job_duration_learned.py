"""The learned JobDuration: estimator contract, calibration on a learnable case, serving, lending."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.features.duration_features import DURATION_FEATURES
from sia.models.job_duration import JobDuration, cdf_at_windows, select_job_duration
from sklearn.base import clone
from sklearn.exceptions import NotFittedError


def _data(n: int = 1200, seed: int = 0):
    """Rows whose pool history median decides the bin: a learnable case."""
    rng = np.random.default_rng(seed)
    x = np.full((n, len(DURATION_FEATURES)), np.nan)
    col = {c: i for i, c in enumerate(DURATION_FEATURES)}
    med = rng.choice([100.0, 1000.0, 10000.0, 100000.0], size=n)
    x[:, col["pool_count"]] = 50.0
    x[:, col["pool_median_s"]] = med
    x[:, col["log2_gpus"]] = rng.integers(0, 3, size=n)
    y = np.searchsorted([300.0, 3600.0, 43200.0], med)
    flip = rng.random(n) < 0.1  # 10% noise: one bin longer
    y = np.where(flip, np.minimum(y + 1, 3), y)
    return pd.DataFrame(x, columns=DURATION_FEATURES), y, np.arange(n, dtype=float)


def test_estimator_contract():
    X, y, t = _data()
    est = JobDuration(n_estimators=20, seed=3)
    with pytest.raises(NotFittedError):
        est.predict(X)
    assert clone(est).get_params() == est.get_params()
    assert not any(k.endswith("_") for k in vars(est))
    assert est.fit(X, y, time=t) is est
    assert {"booster_", "calibrators_", "feature_names_in_", "classes_"} <= set(vars(est))
    again = clone(est).fit(X, y, time=t)
    np.testing.assert_array_equal(est.predict_proba(X), again.predict_proba(X))
    with pytest.raises(ValueError, match="pool_median_s"):
        est.predict(X.drop(columns=["pool_median_s"]))
    with pytest.raises(ValueError, match="one bin per row"):
        JobDuration().fit(X, y[:-1])
    with pytest.raises(ValueError, match="bins 0..3"):
        JobDuration().fit(X, np.where(y == 0, 7, y))
    with pytest.raises(ValueError, match="method"):
        JobDuration(method="magic").fit(X, y)


def test_learns_and_calibrates_a_learnable_case():
    X, y, t = _data()
    est = JobDuration(n_estimators=50).fit(X, y, time=t)
    Xv, yv, _ = _data(seed=1)
    assert (est.predict(Xv) == np.searchsorted([300.0, 3600.0, 43200.0],
                                               Xv["pool_median_s"].to_numpy())).mean() > 0.95
    cdf = est.predict_cdf(Xv)
    assert np.all(np.diff(cdf, axis=1) >= 0) and cdf.min() >= 0 and cdf.max() <= 1
    # calibrated: among jobs given P(d <= 60 min) around 0.9, about 90% fit
    sel = (cdf[:, 1] > 0.8) & (cdf[:, 1] < 0.97)
    assert sel.sum() > 50
    assert abs((yv[sel] <= 1).mean() - cdf[sel, 1].mean()) < 0.06
    proba = est.predict_proba(Xv)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_rule_and_little_history_fallback():
    X, y, t = _data()
    rule = JobDuration.rule()
    # the rule bins the pool median; probabilities are 0/1
    np.testing.assert_array_equal(rule.predict(X), np.searchsorted(
        [300.0, 3600.0, 43200.0], X["pool_median_s"].to_numpy()))
    assert set(np.unique(rule.predict_cdf(X))) <= {0.0, 1.0}
    est = JobDuration(n_estimators=10, min_pool_history=100).fit(X, y, time=t)
    np.testing.assert_array_equal(est.predict_cdf(X), rule.predict_cdf(X))  # 50 < 100: the rule


def test_cdf_at_windows_is_a_lower_bound():
    cdf = np.array([[0.2, 0.7, 0.9]])
    np.testing.assert_allclose(cdf_at_windows(cdf, (60.0, 300.0, 1800.0, 3600.0, 1e6)),
                               [[0.0, 0.2, 0.2, 0.7, 0.9]])


@pytest.mark.parametrize("learnable", [True, False])
def test_selection_never_lends_riskier_than_the_rule(learnable):
    X, y, t = _data()
    if not learnable:  # labels unrelated to the features
        y = np.random.default_rng(5).integers(0, 4, size=y.size)
    model, table = select_job_duration(X, y, t, n_estimators=10)
    rule = {r["window_min"]: r for r in table if r["candidate"] == "history rule"}
    assert sorted(rule) == [5, 60, 720]
    if model.method == "history":
        assert model.lend_risk_ is None
        return
    chosen = [r for r in table if r["candidate"] == "learned" and r["eps"] == model.lend_risk_]
    assert len(chosen) == 3
    for r in chosen:
        assert r["lendable"] == 0.0 or r["overrun"] <= rule[r["window_min"]]["overrun"]
    if learnable:  # the rule is right on 90% here; the model must be chosen and lend as much
        assert sum(r["lendable"] for r in chosen) >= 0.9 * sum(r["lendable"] for r in rule.values())


def test_registered_job_duration_serves_what_the_forecaster_uses(tmp_path):
    import mlflow
    from sia.models import registry

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    mlflow.set_experiment("serving-test")  # this store's own: another test may have set one
    X, y, t = _data(400)
    est = JobDuration(n_estimators=10).fit(X, y, time=t)
    est.lend_risk_ = 0.1
    with mlflow.start_run():
        registry.log_job_duration({}, alias="test", model=est)
        registry.log_job_duration({"min_count": 2, "fallback_bin": 1, "quantile": 0.8},
                                  alias="rule")
    served = mlflow.pyfunc.load_model("models:/sia-job-duration@test").predict(X)
    np.testing.assert_array_equal(np.asarray(served), est.predict_cdf(X))
    loaded = registry.load_job_duration_model("test")
    np.testing.assert_array_equal(loaded.predict_cdf(X), est.predict_cdf(X))
    assert loaded.lend_risk_ == 0.1
    assert registry.load_job_duration("rule") == {"min_count": 2, "fallback_bin": 1,
                                                  "quantile": 0.8}
    rule_served = mlflow.pyfunc.load_model("models:/sia-job-duration@rule").predict(X)
    np.testing.assert_array_equal(np.asarray(rule_served),
                                  JobDuration.rule(min_count=2, fallback_bin=1).predict_cdf(X))


def test_history_cdf_by_hand():
    """The rule's level (tag with >= 3 jobs, else pool+GPUs, else pool) gives its shares as the CDF."""
    X = pd.DataFrame(np.full((4, len(DURATION_FEATURES)), np.nan), columns=DURATION_FEATURES)
    X.loc[0, ["tag_count", "tag_le5m", "tag_le60m", "tag_le720m"]] = [5, 0.2, 0.6, 1.0]
    X.loc[0, ["pool_gpus_count", "pool_gpus_le5m", "pool_gpus_le60m", "pool_gpus_le720m"]] = [
        9, 0.9, 0.9, 0.9]
    X.loc[1, ["tag_count", "tag_le5m", "tag_le60m", "tag_le720m"]] = [2, 1.0, 1.0, 1.0]
    X.loc[1, ["pool_gpus_count", "pool_gpus_le5m", "pool_gpus_le60m", "pool_gpus_le720m"]] = [
        4, 0.0, 0.25, 0.75]
    X.loc[2, ["pool_count", "pool_le5m", "pool_le60m", "pool_le720m"]] = [1, 0.0, 0.0, 1.0]
    X.loc[:, [c for c in DURATION_FEATURES if c.endswith("_count")]] = X.loc[
        :, [c for c in DURATION_FEATURES if c.endswith("_count")]].fillna(0.0)
    est = JobDuration("history_cdf", fallback_bin=2).fit(X, np.array([0, 1, 2, 3]))
    assert est.booster_ is None
    np.testing.assert_allclose(est.predict_cdf(X), [[0.2, 0.6, 1.0],   # the tag's (5 >= 3)
                                                    [0.0, 0.25, 0.75],  # tag too thin: pool+GPUs
                                                    [0.0, 0.0, 1.0],    # the pool's
                                                    [0.0, 0.0, 1.0]])   # nothing: bin 2's step
    # lent in 60 min at eps 0.3 only where P(d <= 60 min) >= 0.7: none of these four
    assert (est.predict_cdf(X)[:, 1] >= 0.7).sum() == 0
    # the same level's shares over its recent jobs, alone or blended with all of its history
    X.loc[0, ["tag_recent_le5m", "tag_recent_le60m", "tag_recent_le720m"]] = [0.6, 1.0, 1.0]
    X.loc[1, ["pool_gpus_recent_le5m", "pool_gpus_recent_le60m", "pool_gpus_recent_le720m"]] = [
        0.0, 0.0, 0.5]
    X.loc[2, ["pool_recent_le5m", "pool_recent_le60m", "pool_recent_le720m"]] = [0.0, 1.0, 1.0]
    recent = JobDuration("history_cdf", fallback_bin=2, history_recent=1.0).fit(
        X, np.array([0, 1, 2, 3]))
    np.testing.assert_allclose(recent.predict_cdf(X), [[0.6, 1.0, 1.0], [0.0, 0.0, 0.5],
                                                       [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]])
    half = JobDuration("history_cdf", fallback_bin=2, history_recent=0.5).fit(
        X, np.array([0, 1, 2, 3]))
    np.testing.assert_allclose(half.predict_cdf(X)[:3], [[0.4, 0.8, 1.0], [0.0, 0.125, 0.625],
                                                         [0.0, 0.5, 1.0]])
    with pytest.raises(ValueError, match="history_recent must be in"):
        JobDuration("history_cdf", history_recent=1.5).fit(X, np.array([0, 1, 2, 3]))


def _history_cdf_by_levels(x: np.ndarray, min_count: int, fallback: int, w: float,
                           tag: bool = True, user: bool = False) -> np.ndarray:
    """The history rule's CDF written level by level (the definition), for the property below."""
    col = {c: i for i, c in enumerate(DURATION_FEATURES)}
    out = np.empty((x.shape[0], 3))
    for r in range(x.shape[0]):
        got = None
        for level in ["tag"] * tag + ["user"] * user + ["pool_gpus", "pool"]:
            n = x[r, col[f"{level}_count"]]
            if n >= (min_count if level != "pool" else 1):
                rec = np.array([x[r, col[f"{level}_recent_le{m}m"]] for m in (5, 60, 720)])
                all_ = np.array([x[r, col[f"{level}_le{m}m"]] for m in (5, 60, 720)])
                got = rec if w == 1.0 else all_ if w == 0.0 else w * rec + (1 - w) * all_
                break
        if got is None:
            got = (fallback <= np.arange(3)).astype(float)
        out[r] = np.maximum.accumulate(np.nan_to_num(got, nan=0.0))
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(0, 12), min_count=st.integers(1, 5),
       fallback=st.integers(0, 3), w=st.sampled_from([0.0, 0.3, 1.0]), tag=st.booleans(),
       user=st.booleans())
def test_history_cdf_matches_the_level_by_level_definition(seed, n, min_count, fallback, w, tag,
                                                           user):
    """Counts (NaN, 0, thin or enough) and shares (NaN or not) at random: the rule's CDF is the
    first level whose count reaches its minimum, its shares, else the fallback bin's step."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, len(DURATION_FEATURES)))
    counts = [i for i, c in enumerate(DURATION_FEATURES) if c.endswith("_count")]
    x[:, counts] = rng.choice([np.nan, 0.0, 1.0, 2.0, 3.0, 7.0], size=(n, len(counts)))
    x[rng.random(x.shape) < 0.05] = np.nan
    est = JobDuration("history_cdf", history_min_count=min_count, fallback_bin=fallback,
                      history_recent=w, history_tag=tag, history_user=user).fit(
        np.zeros((4, len(DURATION_FEATURES))), np.array([0, 1, 2, 3]))
    np.testing.assert_array_equal(est.predict_cdf(x),
                                  _history_cdf_by_levels(x, min_count, fallback, w, tag, user))


def test_lend_risk_per_bin_edge_maps_onto_the_scheduling_windows():
    """One eps per bin edge (5 / 60 / 720 min); a window takes the largest edge <= it."""
    from sia.models.job_duration import lend_risk_at_edges, lend_risk_for_windows

    np.testing.assert_allclose(lend_risk_at_edges(0.3), [0.3, 0.3, 0.3])
    np.testing.assert_allclose(lend_risk_for_windows([0.2, 0.1, 0.05], [300, 3600, 43200]),
                               [0.2, 0.1, 0.05])
    # 2 min (nothing fits it anyway): the first edge's; 2 h: the 1-hour edge's; 2 days: 12 h's
    np.testing.assert_allclose(lend_risk_for_windows([0.2, 0.1, 0.05], [120, 7200, 172800]),
                               [0.2, 0.1, 0.05])
    for bad in ([0.2, 0.1], [0.2, 0.1, 1.0], [-0.1], [float("nan")]):
        with pytest.raises(ValueError, match="lend risk must be"):
            lend_risk_at_edges(bad)


def test_reliability_table_by_hand():
    """Per window: mean predicted P(fit) of each probability bin against the share that fit."""
    from sia.models.job_duration import reliability_table

    # four jobs: true bins 0, 1, 1, 3; P(<= 5 min) 0.1, 0.1, 0.9, 0.9 -> bins [0, .5) and [.5, 1]
    cdf = np.array([[0.1, 0.2, 0.3], [0.1, 0.9, 0.9], [0.9, 0.9, 1.0], [0.9, 0.9, 1.0]])
    rows = reliability_table(cdf, np.array([0, 1, 1, 3]), n_bins=2)
    five = [r for r in rows if r["window_min"] == 5]
    # low bin: jobs 0 and 1 (predicted 0.1; job 0 fits 5 min); high bin: jobs 2 and 3 (neither)
    assert [(r["predicted"], r["observed"]) for r in five] == [(0.1, 0.5), (0.9, 0.0)]
    sixty = [r for r in rows if r["window_min"] == 60]
    assert [(round(r["predicted"], 6), r["observed"]) for r in sixty] == [(0.2, 1.0),
                                                                          (0.9, 2 / 3)]
    # no curve for a window that every job fits or none does
    assert {r["window_min"] for r in reliability_table(cdf[:2], np.array([0, 0]))} == set()


def test_history_shrink_by_hand():
    """history_shrink=a pools each level's shares with the levels before it as (n p + a P) / (n + a)."""
    X = pd.DataFrame(np.full((4, len(DURATION_FEATURES)), np.nan), columns=DURATION_FEATURES)
    X.loc[:, [c for c in DURATION_FEATURES if c.endswith("_count")]] = 0.0
    X.loc[0, ["pool_count", "pool_recent_le5m", "pool_recent_le60m", "pool_recent_le720m"]] = [
        10, 1.0, 1.0, 1.0]
    X.loc[0, ["pool_gpus_count", "pool_gpus_recent_le5m", "pool_gpus_recent_le60m",
              "pool_gpus_recent_le720m"]] = [2, 0.0, 0.0, 0.5]
    # only a pool+GPUs history: it starts the estimate alone
    X.loc[1, ["pool_gpus_count", "pool_gpus_recent_le5m", "pool_gpus_recent_le60m",
              "pool_gpus_recent_le720m"]] = [4, 0.25, 0.5, 1.0]
    # recent shares stand for at most RECENT_JOBS (50) jobs however many finished
    X.loc[3, ["pool_count", "pool_recent_le5m", "pool_recent_le60m", "pool_recent_le720m"]] = [
        100, 0.0, 0.0, 0.0]
    X.loc[3, ["tag_count", "tag_recent_le5m", "tag_recent_le60m", "tag_recent_le720m"]] = [
        200, 1.0, 1.0, 1.0]
    y = np.array([0, 1, 2, 3])
    est = JobDuration("history_cdf", fallback_bin=2, history_recent=1.0, history_shrink=2.0).fit(X, y)
    np.testing.assert_allclose(est.predict_cdf(X)[:3], [[0.5, 0.5, 0.75],  # (2 p + 2 P) / 4
                                                        [0.25, 0.5, 1.0],
                                                        [0.0, 0.0, 1.0]])  # nothing: bin 2's step
    wide = JobDuration("history_cdf", fallback_bin=2, history_recent=1.0, history_shrink=50.0)
    np.testing.assert_allclose(wide.fit(X, y).predict_cdf(X)[3], [0.5, 0.5, 0.5])
    # off (0): the rule's level alone, as before (pool+GPUs has 2 < 3 jobs: the pool's)
    off = JobDuration("history_cdf", fallback_bin=2, history_recent=1.0).fit(X, y)
    np.testing.assert_allclose(off.predict_cdf(X)[0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="history_shrink must be"):
        JobDuration("history_cdf", history_shrink=-1.0).fit(X, y)


def test_artifacts_of_another_version_are_a_clear_registry_error(tmp_path):
    """A stored model whose parameters this version does not take says to retrain, not TypeError."""
    from sia.models.registry import RegistryError
    from sia.models.serving import build, write_artifacts

    X, y, _ = _data(200)
    params, boosters = JobDuration("history_cdf").fit(X, y).to_artifacts()
    assert build(write_artifacts(tmp_path / "ok", params, boosters)).method == "history_cdf"
    params["estimator"]["a_parameter_from_the_future"] = 1
    with pytest.raises(RegistryError, match="another version of sia-sched.*retrain it"):
        build(write_artifacts(tmp_path / "new", params, boosters), "registered model 'x'")


def test_history_cdf_without_the_tag_level_by_hand():
    """history_tag=False: the tag's shares are never read; pool and GPUs, then pool, decide."""
    X = pd.DataFrame(np.zeros((2, len(DURATION_FEATURES))), columns=DURATION_FEATURES)
    X.loc[0, ["tag_count", "tag_le5m", "tag_le60m", "tag_le720m"]] = [5, 0.2, 0.6, 1.0]
    X.loc[0, ["pool_gpus_count", "pool_gpus_le5m", "pool_gpus_le60m", "pool_gpus_le720m"]] = [
        9, 0.9, 0.9, 0.9]
    X.loc[1, ["tag_count", "tag_le5m", "tag_le60m", "tag_le720m"]] = [5, 0.2, 0.6, 1.0]
    X.loc[1, ["pool_count", "pool_le5m", "pool_le60m", "pool_le720m"]] = [4, 0.5, 0.75, 1.0]
    y = np.array([0, 1])
    with_tag = JobDuration("history_cdf").fit(X, y)
    np.testing.assert_allclose(with_tag.predict_cdf(X), [[0.2, 0.6, 1.0], [0.2, 0.6, 1.0]])
    without = JobDuration("history_cdf", history_tag=False).fit(X, y)
    np.testing.assert_allclose(without.predict_cdf(X), [[0.9, 0.9, 0.9], [0.5, 0.75, 1.0]])
    # shrinking: without the tag, row 1's estimate is the pool's alone
    shrunk = JobDuration("history_cdf", history_tag=False, history_shrink=10.0).fit(X, y)
    np.testing.assert_allclose(shrunk.predict_cdf(X)[1], [0.5, 0.75, 1.0])
    # stored and loaded with the model (an older model, without the key, keeps the tag)
    params, boosters = without.to_artifacts()
    assert JobDuration.from_artifacts(params, boosters).history_tag is False
    del params["estimator"]["history_tag"]
    assert JobDuration.from_artifacts(params, boosters).history_tag is True
    with pytest.raises(ValueError, match="history_tag must be True or False"):
        JobDuration("history_cdf", history_tag="no").fit(X, y)
    # the user's jobs between the tag and the pool and width: row 0 (tag 5 jobs) keeps the tag's;
    # without the tag, row 0 reads its user's (4 >= 3 jobs), row 1 its user's too thin: the pool's
    X.loc[0, ["user_count", "user_le5m", "user_le60m", "user_le720m"]] = [4, 0.0, 0.5, 0.5]
    X.loc[1, ["user_count", "user_le5m", "user_le60m", "user_le720m"]] = [2, 1.0, 1.0, 1.0]
    both = JobDuration("history_cdf", history_user=True).fit(X, y)
    np.testing.assert_allclose(both.predict_cdf(X), [[0.2, 0.6, 1.0], [0.2, 0.6, 1.0]])
    user = JobDuration("history_cdf", history_tag=False, history_user=True).fit(X, y)
    np.testing.assert_allclose(user.predict_cdf(X), [[0.0, 0.5, 0.5], [0.5, 0.75, 1.0]])
    params, boosters = user.to_artifacts()
    assert JobDuration.from_artifacts(params, boosters).history_user is True
    with pytest.raises(ValueError, match="history_user must be True or False"):
        JobDuration("history_cdf", history_user=1).fit(X, y)


def _tagged_rows(tag_informative: bool, n: int = 400, seed: int = 0, user_informative=False):
    """Rows whose pool-and-width shares are each job's true chances; the tag level either knows
    the job's bin (a job name that says what runs) or is noise (names that say nothing); the
    user level is noise, or knows the bin a little less well than an informative tag."""
    rng = np.random.default_rng(seed)
    col = {c: i for i, c in enumerate(DURATION_FEATURES)}
    x = np.full((n, len(DURATION_FEATURES)), 0.0)
    p_short = rng.choice([0.2, 0.8], size=n)  # P(bin 0); otherwise bin 3
    y = np.where(rng.random(n) < p_short, 0, 3)
    x[:, col["pool_gpus_count"]] = 40.0
    for m in ("5", "60", "720"):
        x[:, col[f"pool_gpus_le{m}m"]] = p_short
    x[:, col["tag_count"]] = 10.0
    x[:, col["user_count"]] = 10.0
    tag_share = (y == 0).astype(float) * 0.9 + 0.05 if tag_informative else rng.random(n)
    user_share = (y == 0).astype(float) * 0.8 + 0.1 if user_informative else rng.random(n)
    for m in ("5", "60", "720"):
        x[:, col[f"tag_le{m}m"]] = tag_share
        x[:, col[f"user_le{m}m"]] = user_share
    return x, y


def test_choose_history_levels_keeps_what_predicts_and_drops_noise():
    """The tag level stays when it scores better on the training rows and goes when it is noise;
    the user's level comes in only when it scores better; a trace without tags or users keeps
    the paper's rule (nothing to compare)."""
    from sia.models.job_duration import choose_history_levels

    chain, rows = choose_history_levels(*_tagged_rows(True))
    assert chain == {"history_tag": True, "history_user": False}
    assert [r["chosen"] for r in rows] == [True, False, False, False]
    assert rows[0]["levels"] == "tag, pool_gpus, pool" and rows[0]["rows_compared"] == 400
    assert rows[0]["brier"] < rows[1]["brier"]
    chain, rows = choose_history_levels(*_tagged_rows(False))
    assert chain == {"history_tag": False, "history_user": False}
    assert rows[1]["levels"] == "pool_gpus, pool" and rows[1]["chosen"]
    chain, rows = choose_history_levels(*_tagged_rows(False, user_informative=True))
    assert chain == {"history_tag": False, "history_user": True}
    assert rows[2]["levels"] == "user, pool_gpus, pool" and rows[2]["chosen"]
    # an informative tag before an informative user: the tag reads first (row 4 ties row 1)
    chain, _ = choose_history_levels(*_tagged_rows(True, user_informative=True))
    assert chain == {"history_tag": True, "history_user": False}
    x, y = _tagged_rows(True)
    x[:, DURATION_FEATURES.index("tag_count")] = np.nan  # no job has a tag or a user
    x[:, DURATION_FEATURES.index("user_count")] = np.nan
    chain, rows = choose_history_levels(x, y)
    assert chain == {"history_tag": True, "history_user": False}
    assert rows[0]["rows_compared"] == 0 and np.isnan(rows[0]["brier"])
    # too little history (below history_min_count) reads the same every way
    x[:, DURATION_FEATURES.index("tag_count")] = 2.0
    x[:, DURATION_FEATURES.index("user_count")] = 2.0
    assert choose_history_levels(x, y, history_min_count=3)[1][0]["rows_compared"] == 0
