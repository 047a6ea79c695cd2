"""One scikit-learn conformance check, applied to every predictor estimator (DESIGN.md 5.1).

Each case of :data:`CASES` builds an unfitted estimator and a small synthetic,
hand-checkable data set; :func:`check_conformance` checks the contract all
predictors share. To add an estimator (WillJobsArrive next), append a
:class:`Case` to :data:`CASES`.

``sklearn.utils.estimator_checks.check_estimator`` does not apply as a whole:
its checks fit on unnamed random arrays of arbitrary width (2 columns, sparse
matrices, complex numbers, object dtype), while our estimators need their
named columns (the Table 9 features, ``sliding_max``, the JobDuration
features) and refuse anything else with a ValueError naming what to add. The
checks of it that need no data are run as they are (:data:`SKLEARN_CHECKS`);
the data-dependent parts of the contract are checked here on proper frames.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from sia.features.duration_features import DURATION_FEATURES
from sia.features.table9 import FEATURE_COLUMNS
from sia.models.job_duration import JobDuration
from sia.models.new_load import NewLoadEstimate
from sia.models.will_arrive import WillJobsArrive
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import estimator_checks

#: The checks of sklearn's ``check_estimator`` that need no data: they apply to every estimator.
SKLEARN_CHECKS = ("check_no_attributes_set_in_init", "check_get_params_invariance",
                  "check_set_params", "check_parameters_default_constructible",
                  "check_estimator_repr", "check_estimator_cloneable")


@dataclass
class Case:
    """One estimator under test: a factory, its data, what it must have learned."""

    id: str
    make: Callable[[], Any]  # an unfitted estimator
    data: Callable[[], tuple[Any, np.ndarray]]  # (X frame, y)
    fitted_attributes: set[str]
    fit_kwargs: dict[str, Any] = field(default_factory=dict)
    predict: str = "predict"  # the method whose output must be deterministic


def _duration_data() -> tuple[pd.DataFrame, np.ndarray]:
    """300 jobs whose pool history median decides the bin (bin = searchsorted of the edges)."""
    rng = np.random.default_rng(0)
    n = 300
    x = pd.DataFrame(np.full((n, len(DURATION_FEATURES)), np.nan), columns=DURATION_FEATURES)
    med = rng.choice([100.0, 1000.0, 10000.0, 100000.0], size=n)
    x["pool_count"] = 50.0
    x["pool_median_s"] = med
    return x, np.searchsorted([300.0, 3600.0, 43200.0], med)


def _load_data(table9: bool = True) -> tuple[pl.DataFrame, np.ndarray]:
    """200 windows: load = 2 x sliding max (+ arrivals_x1 when ``table9``), a third of them empty."""
    rng = np.random.default_rng(1)
    n = 200
    s = rng.integers(0, 5, n).astype(np.float64)
    cols = {"sliding_max": s}
    if table9:
        cols.update({c: rng.integers(0, 4, n).astype(np.float64) for c in FEATURE_COLUMNS})
    y = 2.0 * s + (cols["arrivals_x1"] if table9 else 0.0)
    y = np.where(np.arange(n) % 3 == 0, 0.0, y)
    return pl.DataFrame(cols), y


def _arrival_data() -> tuple[pl.DataFrame, np.ndarray]:
    """400 grid rows whose label follows arrivals_x10 > 2 (a learnable law), 5% flipped."""
    rng = np.random.default_rng(2)
    n = 400
    cols = {c: rng.integers(0, 5, n).astype(np.float32) for c in FEATURE_COLUMNS}
    y = ((cols["arrivals_x10"] > 2) ^ (rng.random(n) < 0.05)).astype(np.int8)
    return pl.DataFrame({"t": np.arange(n) * 300.0, **cols}), y


_ARRIVE_ATTRS = {"method_", "threshold_", "booster_", "selection_", "feature_names_in_",
                 "n_features_in_", "classes_"}
_LOAD_ATTRS = {"feature_names_in_", "n_features_in_", "scale_", "empty_", "offset_", "booster_",
               "n_fit_rows_"}
_DURATION_ATTRS = {"feature_names_in_", "n_features_in_", "classes_", "calibrators_", "booster_",
                   "lend_risk_"}

CASES: list[Case] = [
    Case("job_duration-xgboost", lambda: JobDuration("xgboost", n_estimators=5, seed=3),
         _duration_data, _DURATION_ATTRS, predict="predict_proba"),
    Case("job_duration-history", lambda: JobDuration("history"), _duration_data,
         _DURATION_ATTRS, predict="predict_proba"),
    Case("job_duration-history_cdf", lambda: JobDuration("history_cdf"), _duration_data,
         _DURATION_ATTRS, predict="predict_proba"),
    Case("new_load-sliding_max", lambda: NewLoadEstimate("sliding_max", window_min=5),
         lambda: _load_data(table9=False), _LOAD_ATTRS),
    Case("new_load-calibrated", lambda: NewLoadEstimate("calibrated", window_min=60, alpha=0.2),
         lambda: _load_data(table9=False), _LOAD_ATTRS),
    Case("new_load-quantile",
         lambda: NewLoadEstimate("quantile", window_min=5, n_estimators=10, seed=2,
                                 min_calibration_rows=20),
         _load_data, _LOAD_ATTRS | {"holdout_exceedance_raw_", "holdout_exceedance_"}),
    Case("will_arrive-auto", lambda: WillJobsArrive(window_min=5, n_estimators=10),
         _arrival_data, _ARRIVE_ATTRS, predict="predict_proba"),
    Case("will_arrive-persistence", lambda: WillJobsArrive(window_min=60, select="persistence"),
         _arrival_data, _ARRIVE_ATTRS),
]


def _drop(X: Any, column: str) -> Any:
    return X.drop(column) if isinstance(X, pl.DataFrame) else X.drop(columns=[column])


def _public_fitted(est: Any) -> list[str]:
    return [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]


def check_conformance(case: Case) -> None:
    """Check the estimator contract shared by every predictor (see the module doc)."""
    X, y = case.data()
    est = case.make()
    params = est.get_params()
    assert clone(est).get_params() == params
    assert _public_fitted(est) == [], "attributes ending in _ must only appear in fit"
    with pytest.raises(NotFittedError):
        getattr(est, case.predict)(X)
    # set_params round trip (and it returns the estimator)
    assert est.set_params(**params) is est
    assert est.get_params() == params

    assert est.fit(X, y, **case.fit_kwargs) is est
    assert est.get_params() == params, "fit must not change the parameters"
    learned = set(_public_fitted(est))
    assert case.fitted_attributes <= learned, case.fitted_attributes - learned
    assert all(a.endswith("_") for a in case.fitted_attributes)
    out = np.asarray(getattr(est, case.predict)(X))
    assert out.shape[0] == len(y)

    again = clone(est).fit(X, y, **case.fit_kwargs)  # determinism
    np.testing.assert_array_equal(np.asarray(getattr(again, case.predict)(X)), out)

    names = [str(c) for c in est.feature_names_in_]
    for column in {names[0], names[-1]}:
        with pytest.raises(ValueError, match=column):
            est.predict(_drop(X, column))
    with pytest.raises(ValueError, match="one"):  # "one ... per row of X"
        clone(est).fit(X, y[:-1], **case.fit_kwargs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_estimator_conformance(case):
    check_conformance(case)


@pytest.mark.parametrize("check", SKLEARN_CHECKS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sklearn_checks_that_apply(case, check):
    est = case.make()
    getattr(estimator_checks, check)(type(est).__name__, est)
