"""WillJobsArrive(pool, k) -> {0, 1}: one classifier per window, across all pools (SIA 5.4.1).

:class:`WillJobsArrive` is a scikit-learn estimator. The model sees only the
Table 9 features and the rhythm features (pool identity flows through them,
so a new pool needs no training). Every choice is made on the *training*
rows, never on the period reported:

1. the training rows are cut by time into a fitting part and a *tail* (the
   last ``tail_fraction`` of their span, default half), and the tail into
   ``tail_folds`` blocks (default 3);
2. each block is predicted by an XGBoost classifier fit on every row before
   it (forward chaining, as the model is used); the decision threshold is
   half the best F those out-of-sample predictions reach on the tail
   (``threshold="half_f"``, the default: for calibrated probabilities the
   F-optimal threshold is half the optimal F, Lipton, Elkan & Naryanaswamy
   2014), the threshold that maximizes F on the tail (``threshold="tail"``),
   or a fixed number. The half-F rule reads one number (the F level) from
   the tail instead of the arg-max of a flat, noisy curve; see
   :data:`THRESHOLD_RULES`;
3. model selection: the learned candidates are that classifier and
   *either* (yes when persistence or the classifier says yes); the baselines
   are *persistence* (an arrival in the next k iff one arrived in the last k,
   ``arrivals_x1 > 0``) and *always-yes*. The learned ones are scored on the
   tail with cross-fitted thresholds (each block judged at the threshold
   chosen on the other blocks; with one block, each half at the other
   half's), so tuning the threshold on the tail does not hand them an edge
   the baselines cannot have. The better learned candidate is registered
   unless a baseline beats it on the whole tail *and* is at least as good in
   every block (:func:`_select`): a baseline wins where it is consistently
   better, not where a few days of overlapping labels put it .01 ahead;
4. a learned candidate that won is refit on all training rows with the same
   hyperparameters and keeps the tail's threshold.

The trees are monotone in the features whose direction is known
(``monotone``: more past submissions never lower P(arrival), a longer time
since the last one never raises it).

Beside the model, the two trivial baselines are always reported
(:func:`persistence_prediction`, :func:`always_yes_prediction`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import polars as pl
import xgboost as xgb
from sia.data.errors import ConfigError
from sia.models.frames import frame_columns
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.metrics import precision_recall_curve, precision_recall_fscore_support

LABEL = "label_arrival"

#: The cumulative feature sets of the ablation (SIA Tables 20 and 23), in order.
ABLATION_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("periodic only", ("periodic",)),
    ("+ recent arrivals", ("periodic", "recent_arrivals")),
    ("+ recent completions", ("periodic", "recent_arrivals", "recent_completions")),
    (
        "+ future completions",
        ("periodic", "recent_arrivals", "recent_completions", "future_completions"),
    ),
    (
        "+ rhythm",
        ("periodic", "recent_arrivals", "recent_completions", "future_completions", "rhythm"),
    ),
)


#: ``sia train``'s default row cap per WillJobsArrive booster fit (:func:`fit_sample`;
#: None: every row). Chosen on the predictors' training and validation days only, by a rule
#: fixed before its runs: no candidate cap kept the validation F within 0.01 on a 983-pool
#: cluster made from Graham (docs/concepts/predictors.md, "Many pools"), so none.
MAX_FIT_ROWS: int | None = None


@dataclass
class XGBParams:
    """WillJobsArrive's XGBoost hyperparameters (defaults: those of :class:`WillJobsArrive`)."""

    n_estimators: int = 100
    max_depth: int = 3
    learning_rate: float = 0.05
    min_child_weight: float = 1.0
    subsample: float = 1.0
    colsample_bytree: float = 1.0
    reg_lambda: float = 1.0
    class_weight: str | None = None
    monotone: bool = True
    n_jobs: int = 1  # OpenMP threads collapse when the 2 cores are shared (measured 25x slower)
    seed: int = 0

    def to_params(self, prefix: str = "xgb_") -> dict[str, float | int]:
        """Return the hyperparameters as flat MLflow-ready parameters."""
        return {f"{prefix}{k}": v for k, v in asdict(self).items()}


def binary_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """Return precision, recall, F1 (of the positive class), positives and predicted positives.

    Precision is 0 when nothing is predicted positive, recall 0 when there are
    no positives (sklearn's ``zero_division=0``).
    """
    y_true = np.asarray(y_true).astype(np.int8)
    y_pred = np.asarray(y_pred).astype(np.int8)
    p, r, f, _ = precision_recall_fscore_support(
        y_true, y_pred, average="binary", pos_label=1, zero_division=0
    )
    return {
        "precision": float(p),
        "recall": float(r),
        "f1": float(f),
        "positives": int(y_true.sum()),
        "predicted_positives": int(y_pred.sum()),
        "rows": int(y_true.size),
    }


def persistence_prediction(features: pl.DataFrame) -> np.ndarray:
    """Return the persistence baseline: 1 iff a job arrived in the last k (``arrivals_x1 > 0``)."""
    return (features["arrivals_x1"].to_numpy() > 0).astype(np.int8)


def always_yes_prediction(features: pl.DataFrame) -> np.ndarray:
    """Return the always-yes baseline: 1 for every row."""
    return np.ones(features.height, dtype=np.int8)


def feature_matrix(features: pl.DataFrame, columns: list[str]) -> np.ndarray:
    """Return the float32 matrix of ``columns`` (rows in table order); names a missing column."""
    missing = [c for c in columns if c not in features.columns]
    if missing:
        raise ConfigError(f"feature table lacks column(s) {missing}; build it with sia.features")
    return features.select(columns).to_numpy().astype(np.float32, copy=False)


#: Feature columns whose growth can only make an arrival more likely (counts of past
#: submissions), by prefix; and those whose growth can only make it less likely.
MONOTONE_UP_PREFIXES: tuple[str, ...] = ("periodic_", "arrivals_")
MONOTONE_DOWN: tuple[str, ...] = ("since_arrival_s",)


def monotone_signs(columns: list[str]) -> tuple[int, ...]:
    """Return XGBoost's monotone constraint per column: +1, -1 or 0 (unconstrained).

    +1 for the counts of past submissions (periodic and recent arrivals, the
    rhythm counts): more jobs submitted lately never lowers P(arrival); -1 for
    the time since the pool's last submission; 0 for the rest (completions,
    expected completions and the calendar, whose effect can go either way).
    """
    return tuple(1 if c.startswith(MONOTONE_UP_PREFIXES) else (-1 if c in MONOTONE_DOWN else 0)
                 for c in columns)


def scale_pos_weight(y: np.ndarray) -> float:
    """Return negatives / positives of ``y`` (1.0 when a class is absent)."""
    pos = int(np.sum(y))
    neg = int(np.size(y) - pos)
    return float(neg) / float(pos) if pos and neg else 1.0


def fit_sample(y: np.ndarray, max_rows: int | None,
               seed: int = 0) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Return (rows, weights) a booster fit on at most ``max_rows`` rows of labels ``y`` uses.

    (None, None) when ``max_rows`` is None or ``y`` has at most that many rows: every row, no
    weights. Above it: every positive row and a seeded uniform sample of the negatives filling
    the cap, each kept negative weighted by negatives / kept, so the weights still sum to
    ``y.size`` and the classes keep their weight (negative down-sampling with the weight
    correction: the fitted probabilities stay unbiased). When the positives alone exceed the
    cap, a uniform sample of all rows, unweighted (both classes at one rate). ``rows`` is
    sorted, so the fit sees the rows in their order.
    """
    y = np.asarray(y)
    if max_rows is None or y.size <= int(max_rows):
        return None, None
    cap = int(max_rows)
    rng = np.random.default_rng(seed)
    pos = np.flatnonzero(y > 0)
    if pos.size >= cap:
        return np.sort(rng.choice(y.size, size=cap, replace=False)), None
    neg = np.flatnonzero(y <= 0)
    kept = cap - pos.size
    rows = np.sort(np.concatenate([pos, rng.choice(neg, size=kept, replace=False)]))
    weights = np.where(y[rows] > 0, 1.0, neg.size / kept)
    return rows, weights


def fit_classifier(x: np.ndarray, y: np.ndarray, params: XGBParams) -> xgb.XGBClassifier:
    """Return an XGBoost classifier fit on (x, y) with the imbalance weight of y."""
    y = np.asarray(y).astype(np.int8)
    if np.unique(y).size < 2:
        raise ConfigError(
            "the training period has only one class of label_arrival "
            f"({'all arrivals' if y.size and y[0] else 'no arrivals'}); choose another split"
        )
    model = xgb.XGBClassifier(
        n_estimators=params.n_estimators,
        max_depth=params.max_depth,
        learning_rate=params.learning_rate,
        min_child_weight=params.min_child_weight,
        subsample=params.subsample,
        colsample_bytree=params.colsample_bytree,
        reg_lambda=params.reg_lambda,
        n_jobs=params.n_jobs,
        random_state=params.seed,
        tree_method="hist",
        objective="binary:logistic",
        eval_metric="aucpr",
        scale_pos_weight=scale_pos_weight(y),
    )
    model.fit(x, y)
    return model


def threshold_for_recall(y_true: np.ndarray, proba: np.ndarray, target_recall: float) -> float:
    """Return the largest threshold t with recall(proba >= t) >= ``target_recall``."""
    if not 0.0 < target_recall <= 1.0:
        raise ValueError(f"target_recall must be in (0, 1], not {target_recall}")
    y_true = np.asarray(y_true).astype(np.int8)
    if y_true.sum() == 0:
        return 0.5
    _, recall, thresholds = precision_recall_curve(y_true, proba)
    # recall[i] is the recall at thresholds[i]; recall is non-increasing in i.
    ok = np.nonzero(recall[:-1] >= target_recall)[0]
    return float(thresholds[ok[-1]]) if ok.size else float(thresholds[0])


#: Candidates of the model selection (:class:`WillJobsArrive`), in order of preference on ties:
#: the two baselines, then the learned ones: "either" (yes when persistence or the classifier
#: says yes) and the classifier alone ("xgboost").
METHODS: tuple[str, ...] = ("persistence", "always_yes", "either", "xgboost")
#: The learned candidates (they carry a booster).
LEARNED: tuple[str, ...] = ("either", "xgboost")
#: The column persistence reads: arrivals in [t - k, t].
PERSISTENCE_COLUMN = "arrivals_x1"


def _frame_columns(X: Any, columns: list[str], what: str) -> np.ndarray:
    """Return X's ``columns`` as float32 [n, len(columns)]; names a missing column and what to do."""
    return frame_columns(X, columns, what, "build them with sia.features.table9.build_features "
                         "(or the live forecaster)", dtype=np.float32)


#: WillJobsArrive's threshold rules (besides a fixed probability). Default
#: "half_f", chosen on Philly's training weeks only: walking forward inside them
#: (days 30-44, retrain every 2 days on the last 14, every feature, model selection
#: on) the pooled F at 5 / 60 / 720 min was .757 / .687 / .838 with "half_f" against
#: .758 / .680 / .835 with "tail" (persistence .345 / .671 / .840). The arg-max of F
#: on a tail of a few days moves with every burst at 60 and 720 min, whose labels overlap.
THRESHOLD_RULES: tuple[str, ...] = ("half_f", "tail")


def _best_f1(y_true: np.ndarray, proba: np.ndarray) -> tuple[float, float] | None:
    """Return (the threshold t maximizing F1 of ``proba >= t``, that F1); None without a positive."""
    y_true = np.asarray(y_true).astype(np.int8)
    if y_true.sum() == 0 or y_true.size == 0:
        return None
    precision, recall, thresholds = precision_recall_curve(y_true, proba)
    f = 2 * precision[:-1] * recall[:-1] / np.maximum(precision[:-1] + recall[:-1], 1e-12)
    best = int(np.argmax(f))
    return float(thresholds[best]), float(f[best])


def best_f1_threshold(y_true: np.ndarray, proba: np.ndarray) -> float:
    """Return the threshold t maximizing F1 of ``proba >= t`` (0.5 when ``y_true`` has no positive)."""
    best = _best_f1(y_true, proba)
    return 0.5 if best is None else best[0]


def half_f1_threshold(y_true: np.ndarray, proba: np.ndarray) -> float:
    """Return half the best F1 of ``proba >= t`` over t (0.5 when ``y_true`` has no positive).

    For calibrated probabilities the threshold that maximizes the expected F1
    is half the F1 it reaches (Lipton, Elkan & Naryanaswamy 2014); the level
    of the F curve is far less noisy on a short tail than its arg-max.
    """
    best = _best_f1(y_true, proba)
    return 0.5 if best is None else 0.5 * best[1]


def _best_candidate(rows: list[dict[str, Any]], among: tuple[str, ...] = METHODS) -> str:
    """Return the candidate of ``among`` with the best tail F (ties: the earlier in METHODS)."""
    kept = [r for r in rows if r["candidate"] in among]
    return max(kept, key=lambda r: (r["f1"], -METHODS.index(r["candidate"])))["candidate"]


def _select(rows: list[dict[str, Any]], y_tail: np.ndarray, decisions: dict[str, np.ndarray],
            parts: list[np.ndarray]) -> str:
    """Return the registered candidate: the better learned one on the tail, unless a baseline
    beats it on the whole tail and is at least as good in every part of it.

    Comparing pooled tail F alone picked by noise: inside Philly's training
    weeks, the tail chose persistence in 3 of 7 folds at 12 h whose test F the
    classifier matched or beat (see the class docstring for the figures). A
    baseline that is better in every block is better for a reason.
    """
    learned = _best_candidate(rows, LEARNED)
    base = _best_candidate(rows, ("persistence", "always_yes"))

    def f1(name: str, part: np.ndarray) -> float:
        return binary_metrics(y_tail[part], decisions[name][part])["f1"]

    pooled = {r["candidate"]: r["f1"] for r in rows}
    wins = pooled[base] > pooled[learned] and all(f1(base, p) >= f1(learned, p) for p in parts)
    return base if wins else learned


class WillJobsArrive(ClassifierMixin, BaseEstimator):
    """WillJobsArrive for one window: XGBoost with a tail-chosen threshold, selected against persistence.

    Parameters
    ----------
    window_min : the window k in minutes (recorded; the features must be those of k).
    features : the feature columns the classifier uses (default: those of
        :data:`sia.features.table9.TABLE9_COLUMNS`, every group but the held jobs).
    select : ``"auto"`` (model selection over :data:`METHODS` on the tail) or
        one method forced (``"xgboost"`` for ablations and tuning). ``"either"``
        and the block-wise guard of ``"auto"`` replaced (session 15) "the best
        pooled tail F wins, the classifier only if it beats persistence",
        chosen on Philly's training weeks only (product pipeline, F at 5 / 60 /
        720 min pooled over folds): days 30-44 every 2 on 14: .754 / .688 /
        .848 -> .754 / .692 / .859; days 26-44 every 3 on 10: .758 / .666 /
        .849 -> .758 / .662 / .855 (persistence .345 / .671 / .840 and .321 /
        .663 / .853). The pooled rule had chosen persistence at 12 h in 3 of
        7 folds whose test F the classifier matched or beat.
    threshold : ``"half_f"`` (half the best F on the tail, the default),
        ``"tail"`` (maximize F on the tail), or a probability in (0, 1).
    target_recall : when set, the threshold is instead the largest one whose
        recall on the tail reaches it (recall matters most to SIA: a missed
        arrival is a slowdown).
    tail_fraction : the share of the training span (by time) held out as the tail.
    tail_folds : the tail's blocks (equal spans of time); each is predicted by a
        booster fit on every row before it, and the classifier is scored with
        each block's threshold chosen on the other blocks (1: one booster fit
        on the rows before the tail, scored on the tail's two halves).
        Defaults 0.5 and 3 (before: 0.2 and 1): a tail of a few days of
        overlapping 1 h and 12 h labels chose persistence or the classifier
        by noise. Measured with ``monotone``, walk-forward inside Philly's
        training weeks (product pipeline, F at 5 / 60 / 720 min pooled over
        folds): days 30-44 every 2 on 14: .753 / .672 / .848 with 0.2 and 1,
        .754 / .688 / .848 with 0.5 and 3 (persistence .345 / .671 / .840);
        days 26-44 every 3 on 10: .759 / .664 / .853 and .758 / .666 / .849
        (persistence .321 / .663 / .853). Three boosters instead of one: about
        9% more CPU for ``sia train``.
    class_weight : ``None`` (no reweighting) or ``"balanced"`` (XGBoost's
        ``scale_pos_weight`` = negatives / positives). Default None: measured
        on Philly's training period (nested: fit, threshold, scored on three
        disjoint spans of the training weeks), reweighting never raised F once
        the threshold is chosen on the tail, and at 5 min it lowered it.
    monotone : constrain the trees to be monotone in the features whose direction
        is known (:func:`monotone_signs`: more past submissions never lowers
        P(arrival), a longer time since the last one never raises it). Default
        True: measured on Philly's training weeks only (walk-forward, fit and
        threshold inside each fold's training span, the classifier always
        registered, so no selection noise), F at 60 / 720 min .690 /
        .841 -> .693 / .860 (days 30-44, retrain every 2 days on 14) and .665 /
        .835 -> .666 / .848 (days 26-44, every 3 on 10); the 12 h window, whose
        rows overlap most, gains most.
    n_estimators, max_depth, learning_rate, min_child_weight, subsample,
    colsample_bytree, reg_lambda : XGBoost's. Defaults chosen on Philly's
        training period only (see the README): shallower, slower-learning
        trees than XGBoost's defaults, which fit the training weeks' bursts.
    n_jobs, random_state : XGBoost's threads (1: a tick predicts a few rows) and seed.
    max_fit_rows : at most this many rows per booster fit (None: every row). Above it a
        fit keeps every arrival row and a seeded sample of the others, weighted back
        (:func:`fit_sample`); thresholds and scores still use every row. With many pools the
        5-minute grid rows grow as pools x days (``sia train``'s ``--max-fit-rows``).

    Fitted attributes: ``method_`` (the winner), ``booster_`` (None unless
    a learned candidate won or was forced), ``threshold_``, ``selection_`` (the tail's
    precision / recall / F per candidate), ``feature_names_in_``,
    ``n_features_in_``, ``classes_``.
    """

    def __init__(self, window_min: int = 60, *, features: list[str] | None = None,
                 select: str = "auto", threshold: str | float = "half_f",
                 target_recall: float | None = None, tail_fraction: float = 0.5,
                 tail_folds: int = 3, class_weight: str | None = None,
                 n_estimators: int = 100, max_depth: int = 3, learning_rate: float = 0.05,
                 min_child_weight: float = 1.0, subsample: float = 1.0,
                 colsample_bytree: float = 1.0, reg_lambda: float = 1.0, monotone: bool = True,
                 n_jobs: int = 1, random_state: int = 0, max_fit_rows: int | None = None):
        self.window_min = window_min
        self.features = features
        self.select = select
        self.threshold = threshold
        self.target_recall = target_recall
        self.tail_fraction = tail_fraction
        self.tail_folds = tail_folds
        self.class_weight = class_weight
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.reg_lambda = reg_lambda
        self.monotone = monotone
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.max_fit_rows = max_fit_rows

    # ------------------------------------------------------------------ checks
    def _columns(self) -> list[str]:
        from sia.features.table9 import TABLE9_COLUMNS

        return list(TABLE9_COLUMNS if self.features is None else self.features)

    def _check_params(self) -> None:
        if self.select not in ("auto", *METHODS):
            raise ValueError(f"WillJobsArrive: select must be 'auto' or one of {METHODS}, not "
                             f"{self.select!r}")
        if not (self.threshold in THRESHOLD_RULES or (
                isinstance(self.threshold, int | float) and not isinstance(self.threshold, bool)
                and 0.0 < float(self.threshold) < 1.0)):
            raise ValueError(f"WillJobsArrive: threshold must be one of {THRESHOLD_RULES} or a "
                             f"probability in (0, 1), not {self.threshold!r}")
        if self.target_recall is not None and not 0.0 < float(self.target_recall) <= 1.0:
            raise ValueError("WillJobsArrive: target_recall must be in (0, 1], not "
                             f"{self.target_recall}")
        if not 0.0 < float(self.tail_fraction) < 1.0:
            raise ValueError(f"WillJobsArrive: tail_fraction must be in (0, 1), not "
                             f"{self.tail_fraction}")
        if isinstance(self.tail_folds, bool) or int(self.tail_folds) != self.tail_folds or \
                int(self.tail_folds) < 1:
            raise ValueError(f"WillJobsArrive: tail_folds must be an integer >= 1, not "
                             f"{self.tail_folds!r}")
        if self.class_weight not in (None, "balanced"):
            raise ValueError(f"WillJobsArrive: class_weight must be None or 'balanced', not "
                             f"{self.class_weight!r}")
        cap = self.max_fit_rows
        if cap is not None and (not isinstance(cap, int | float) or isinstance(cap, bool)
                                or int(cap) != cap or int(cap) < 2):
            raise ValueError(f"WillJobsArrive: max_fit_rows must be None or an integer >= 2, "
                             f"not {cap!r}")
        if int(self.window_min) <= 0:
            raise ValueError(f"WillJobsArrive: window_min must be > 0 minutes, not {self.window_min}")

    def _check_fitted(self) -> None:
        if not hasattr(self, "method_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this WillJobsArrive is not fitted yet; call fit(X, y) first")

    def _booster_params(self, y: np.ndarray) -> dict[str, Any]:
        params: dict[str, Any] = {
            "objective": "binary:logistic", "eval_metric": "aucpr", "tree_method": "hist",
            "max_depth": int(self.max_depth), "eta": float(self.learning_rate),
            "min_child_weight": float(self.min_child_weight), "subsample": float(self.subsample),
            "colsample_bytree": float(self.colsample_bytree), "lambda": float(self.reg_lambda),
            "nthread": int(self.n_jobs), "seed": int(self.random_state),
            "scale_pos_weight": scale_pos_weight(y) if self.class_weight == "balanced" else 1.0,
        }
        if self.monotone:
            params["monotone_constraints"] = "(" + ",".join(
                str(s) for s in monotone_signs(self._columns())) + ")"
        return params

    def _train(self, x: np.ndarray, y: np.ndarray) -> xgb.Booster:
        params = self._booster_params(y)  # the class weight of all rows, sampled or not
        rows, weights = fit_sample(y, self.max_fit_rows, int(self.random_state))
        data = (xgb.DMatrix(x, label=y) if rows is None
                else xgb.DMatrix(x[rows], label=y[rows], weight=weights))
        return xgb.train(params, data, num_boost_round=int(self.n_estimators))

    @classmethod
    def from_booster(cls, window_min: int, booster: Any, threshold: float,
                     features: list[str]) -> WillJobsArrive:
        """Return a fitted WillJobsArrive that thresholds ``booster``'s P(arrival) on ``features``.

        For models trained elsewhere (and for tests); ``booster`` is an
        ``xgboost.Booster`` or anything with its ``inplace_predict``.
        """
        est = cls(window_min=int(window_min), features=list(features), select="xgboost",
                  threshold=float(threshold))
        est.method_ = "xgboost"
        est.threshold_ = float(threshold)
        est.booster_ = booster
        est.selection_ = []
        est.feature_names_in_ = np.asarray(list(features), dtype=object)
        est.n_features_in_ = len(features)
        est.classes_ = np.array([0, 1])
        return est

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, *, time: Any = None) -> WillJobsArrive:
        """Fit on training rows (``time``: each row's t in s; default X's ``t`` column, else row order).

        Returns self. Raises ValueError naming what to fix.
        """
        self._check_params()
        cols = self._columns()
        x = _frame_columns(X, cols, "WillJobsArrive.fit")
        y = np.asarray(y)
        if y.ndim != 1 or y.size != x.shape[0]:
            raise ValueError(f"WillJobsArrive.fit: y must be 1-D with one label per row of X "
                             f"({x.shape[0]}), not shape {y.shape}")
        if y.size and not np.isin(y, (0, 1)).all():
            raise ValueError("WillJobsArrive.fit: y must hold 0/1 labels (label_arrival)")
        y = y.astype(np.int8)
        one_class = np.unique(y).size < 2
        if one_class and self.select in LEARNED or y.size == 0:
            raise ValueError("WillJobsArrive.fit: the training rows hold only one class of "
                             f"label_arrival ({'all arrivals' if y.size and y[0] else 'no arrivals'}"
                             "); choose another split")
        if time is None:
            time = (X["t"].to_numpy() if "t" in getattr(X, "columns", ())
                    else np.arange(y.size, dtype=np.float64))
        time = np.asarray(time, dtype=np.float64)
        if time.shape != y.shape:
            raise ValueError(f"WillJobsArrive.fit: time must have one value per row ({y.size})")
        persist = _frame_columns(X, [PERSISTENCE_COLUMN], "WillJobsArrive.fit")[:, 0] > 0
        start, end = self._tail_span(time)
        tail = time >= start
        rows: list[dict[str, Any]] = []
        need_xgb = self.select in ("auto", *LEARNED)
        threshold = 0.5 if self.threshold in THRESHOLD_RULES else float(self.threshold)
        # a window whose training rows are all arrivals (or none) leaves the baselines only
        proba = (self._tail_proba(x, y, time, tail) if need_xgb and not one_class and tail.any()
                 else None)
        if proba is not None:
            scored = ~np.isnan(proba)  # blocks whose fitting rows held both classes
            tail[tail] = scored
            proba, y_tail, t_tail = proba[scored], y[tail], time[tail]
            threshold = self._choose_threshold(y_tail, proba, threshold)
            # scored fairly against the baselines: the threshold applied to each part of the
            # tail is the one chosen on the others (cross-fitting: the tail's blocks, or its
            # two halves when it is one block)
            decided = np.empty(y_tail.size, dtype=bool)
            parts = self._tail_parts(t_tail, start, end)
            for part in parts:
                other = ~part if part.any() and (~part).any() else part
                thr = self._choose_threshold(y_tail[other], proba[other], threshold)
                decided[part] = proba[part] >= thr
            persist_tail = persist[tail]
            tail_decisions = {"either": decided | persist_tail, "xgboost": decided,
                              "persistence": persist_tail,
                              "always_yes": np.ones(y_tail.size, dtype=bool)}
            for name in LEARNED:
                rows.append({"candidate": name, "threshold": threshold,
                             **binary_metrics(y_tail, tail_decisions[name])})
        rows.append({"candidate": "persistence", "threshold": 0.5,
                     **binary_metrics(y[tail], persist[tail])})
        rows.append({"candidate": "always_yes", "threshold": 0.5,
                     **binary_metrics(y[tail], np.ones(int(tail.sum()), dtype=bool))})
        if self.select != "auto":
            method = self.select
        elif proba is None:  # no classifier on the tail: the better baseline
            method = _best_candidate(rows)
        else:
            method = _select(rows, y_tail, tail_decisions, parts)
        self.method_ = method
        self.threshold_ = threshold if method in LEARNED else 0.5
        self.booster_ = self._train(x, y) if method in LEARNED else None
        self.selection_ = rows
        self.feature_names_in_ = np.asarray(cols, dtype=object)
        self.n_features_in_ = len(cols)
        self.classes_ = np.array([0, 1])
        return self

    def classifier_candidate(self, X: Any, y: Any) -> WillJobsArrive:
        """Return what ``select="xgboost"`` would fit on (X, y), reusing this fit's tail.

        For an auto-selected model whose XGBoost candidate lost (persistence
        or always-yes won): the ablation still needs that classifier. Its
        threshold and tail scores are already in ``selection_`` (the same
        head booster a forced fit would train again), so only the refit on
        all rows is left. X and y must be the rows this model was fit on.
        Falls back to a forced fit when the tail held no XGBoost candidate.
        """
        self._check_fitted()
        if self.method_ == "xgboost":
            return self
        forced = clone(self).set_params(select="xgboost")
        if self.method_ == "either":  # the same booster and threshold, without persistence
            forced.__dict__.update({k: v for k, v in vars(self).items() if k.endswith("_")})
            forced.method_ = "xgboost"
            forced.selection_ = list(self.selection_)
            return forced
        row = next((r for r in self.selection_ if r["candidate"] == "xgboost"), None)
        if row is None:
            return forced.fit(X, y)
        x = _frame_columns(X, self._columns(), "WillJobsArrive.classifier_candidate")
        y = np.asarray(y).astype(np.int8)
        forced.method_ = "xgboost"
        forced.threshold_ = float(row["threshold"])
        forced.booster_ = forced._train(x, y)
        forced.selection_ = list(self.selection_)
        forced.feature_names_in_ = self.feature_names_in_
        forced.n_features_in_ = self.n_features_in_
        forced.classes_ = self.classes_
        return forced

    def _tail_span(self, time: np.ndarray) -> tuple[float, float]:
        """Return the tail's (start, end) times: the last ``tail_fraction`` of the rows' span."""
        lo, hi = float(time.min()), float(time.max())
        return hi - float(self.tail_fraction) * (hi - lo), hi

    def _blocks(self, t: np.ndarray, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
        """Return the tail's block edges (``tail_folds`` equal spans of [start, end]) and the
        block of each time in ``t``."""
        edges = np.linspace(start, end, int(self.tail_folds) + 1)
        return edges, np.clip(np.searchsorted(edges, t, side="right") - 1, 0, edges.size - 2)

    def _tail_proba(self, x: np.ndarray, y: np.ndarray, time: np.ndarray,
                    tail: np.ndarray) -> np.ndarray | None:
        """Return P(arrival) out of sample on the tail rows (NaN in a block that could not be
        fit), or None when no block could.

        The tail is cut by time into ``tail_folds`` blocks; each block is predicted by a
        booster fit on every row before it (forward chaining, as the model is used).
        """
        edges, block = self._blocks(time[tail], *self._tail_span(time))
        x_tail = x[tail]
        proba = np.full(block.size, np.nan)
        for b in range(edges.size - 1):
            rows = block == b
            fit_rows = time < edges[b]
            if rows.any() and np.unique(y[fit_rows]).size == 2:
                proba[rows] = self._train(x[fit_rows], y[fit_rows]).inplace_predict(x_tail[rows])
        return None if np.isnan(proba).all() else proba

    def _tail_parts(self, t_tail: np.ndarray, start: float, end: float) -> list[np.ndarray]:
        """Return the cross-fitting parts of the scored tail rows: its blocks holding rows, or
        its two halves (by median time) when fewer than two do."""
        _, block = self._blocks(t_tail, start, end)
        parts = [block == b for b in np.unique(block)]
        if len(parts) >= 2:
            return parts
        first = t_tail < np.median(t_tail)
        return [first, ~first]

    def _choose_threshold(self, y: np.ndarray, proba: np.ndarray, fixed: float) -> float:
        """Return the threshold the parameters ask for on (y, proba): recall target, best F, or fixed."""
        if self.target_recall is not None:
            return threshold_for_recall(y, proba, float(self.target_recall))
        if self.threshold == "tail":
            return best_f1_threshold(y, proba)
        if self.threshold == "half_f":
            return half_f1_threshold(y, proba)
        return fixed

    # ------------------------------------------------------------------ predict
    def predict_proba(self, X: Any) -> np.ndarray:
        """Return float [n, 2]: P(no arrival), P(arrival) per row (0/1 for the baselines)."""
        self._check_fitted()
        p = self.arrival_proba(X)
        return np.column_stack([1.0 - p, p])

    def arrival_proba(self, X: Any) -> np.ndarray:
        """Return P(a job arrives in the next k) per row (0/1 for the baselines)."""
        self._check_fitted()
        # every fitted column is checked whatever won: a frame fit for one is fit for all
        x = _frame_columns(X, list(self.feature_names_in_), "WillJobsArrive.predict")
        if self.method_ == "persistence":
            x = _frame_columns(X, [PERSISTENCE_COLUMN], "WillJobsArrive.predict")
            return (x[:, 0] > 0).astype(np.float64)
        if self.method_ == "always_yes":
            return np.ones(x.shape[0], dtype=np.float64)
        p = self.booster_.inplace_predict(x, validate_features=False).astype(np.float64)
        if self.method_ == "either":  # a row persistence says yes to scores 1
            persist = _frame_columns(X, [PERSISTENCE_COLUMN], "WillJobsArrive.predict")[:, 0] > 0
            p = np.where(persist, 1.0, p)
        return p

    def predict(self, X: Any) -> np.ndarray:
        """Return 0/1 per row: P(arrival) >= ``threshold_`` (what the scheduler uses; for
        ``method_ == "either"``, also 1 where an arrival came in the last k)."""
        return (self.arrival_proba(X) >= self.threshold_).astype(np.int8)

    def serve(self, frame: Any) -> np.ndarray:
        """Return what the scheduler uses: the 0/1 decision per row (:meth:`predict`)."""
        return self.predict(frame)

    def describe(self) -> str:
        """Return one sentence saying what the fitted predictor answers (the registry shows it)."""
        self._check_fitted()
        k = int(self.window_min)
        model = f"P(a job arrives in the next {k} min) >= {float(self.threshold_):.3g} (XGBoost)"
        persist = f"a job arrived in the last {k} min (persistence)"
        says = {"xgboost": f"1 when {model}",
                "either": f"1 when {persist} or {model}",
                "persistence": f"1 when {persist}",
                "always_yes": "always 1 (always-yes)"}[self.method_]
        return (f"WillJobsArrive, {k} min: {says}; '{self.method_}' won the model selection on "
                "the training tail.")

    def input_columns(self) -> list[str]:
        """Return the feature columns :meth:`predict` reads (after fit)."""
        self._check_fitted()
        if self.method_ == "persistence":
            return [PERSISTENCE_COLUMN]
        if self.method_ == "either" and PERSISTENCE_COLUMN not in self.feature_names_in_:
            return [*self.feature_names_in_, PERSISTENCE_COLUMN]
        return [] if self.method_ == "always_yes" else list(self.feature_names_in_)

    def feature_importance(self) -> dict[str, float]:
        """Return the classifier's gain importance per feature (empty for the baselines)."""
        self._check_fitted()
        if self.booster_ is None:
            return {}
        scores = self.booster_.get_score(importance_type="gain")
        return {c: float(scores.get(f"f{i}", 0.0)) for i, c in enumerate(self.feature_names_in_)}

    # ------------------------------------------------------------------ artifacts
    def to_artifacts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return (JSON params, boosters) for :mod:`sia.models.serving`."""
        self._check_fitted()
        params = {"kind": "will_arrive", "estimator": self.get_params(), "method": self.method_,
                  "threshold": float(self.threshold_), "selection": self.selection_,
                  "feature_names": [str(c) for c in self.feature_names_in_]}
        return params, ({"main": self.booster_} if self.booster_ is not None else {})

    @classmethod
    def from_artifacts(cls, params: dict[str, Any], boosters: dict[str, Any]) -> WillJobsArrive:
        """Return the fitted WillJobsArrive stored by :meth:`to_artifacts`."""
        from sia.features.table9 import FEATURE_COLUMNS

        names = list(params["feature_names"])
        unknown = [c for c in names if c not in FEATURE_COLUMNS]
        if unknown:
            raise ValueError(f"registered WillJobsArrive uses feature(s) {unknown} this version "
                             "does not compute; retrain it with `sia train`")
        # models registered before the monotone option were trained unconstrained
        est = cls(**{"monotone": False, **params["estimator"]})
        est.method_ = params["method"]
        est.threshold_ = float(params["threshold"])
        est.selection_ = list(params.get("selection", []))
        est.booster_ = boosters.get("main")
        est.feature_names_in_ = np.asarray(names, dtype=object)
        est.n_features_in_ = len(names)
        est.classes_ = np.array([0, 1])
        return est


@dataclass
class WindowResult:
    """One window's WillJobsArrive, its validation results and the baselines'."""

    k_min: int
    model: WillJobsArrive
    metrics: dict[str, float]
    baselines: dict[str, dict[str, float]]
    ablation: list[dict[str, float | str]] = field(default_factory=list)
    val_true: np.ndarray | None = None
    val_proba: np.ndarray | None = None
    train_rows: int = 0

    @property
    def threshold(self) -> float:
        """The registered decision threshold."""
        return float(self.model.threshold_)

    @property
    def feature_columns(self) -> list[str]:
        """The columns the registered predictor reads."""
        return list(self.model.feature_names_in_)


def feature_set_columns(groups: tuple[str, ...], feature_groups: dict[str, list[str]]) -> list[str]:
    """Return the columns of the named feature groups, in group order."""
    unknown = [g for g in groups if g not in feature_groups]
    if unknown:
        raise ConfigError(f"unknown feature group(s) {unknown}; known: {list(feature_groups)}")
    return [c for g in groups for c in feature_groups[g]]


def estimator_for(k_min: int, params: XGBParams, **kw: Any) -> WillJobsArrive:
    """Return an unfitted :class:`WillJobsArrive` for window ``k_min`` with ``params``' hyperparameters."""
    return WillJobsArrive(window_min=int(k_min), n_estimators=params.n_estimators,
                          max_depth=params.max_depth, learning_rate=params.learning_rate,
                          min_child_weight=params.min_child_weight, subsample=params.subsample,
                          colsample_bytree=params.colsample_bytree, reg_lambda=params.reg_lambda,
                          class_weight=params.class_weight, monotone=params.monotone,
                          n_jobs=params.n_jobs,
                          random_state=params.seed, **kw)


def tail_f1(est: WillJobsArrive) -> float:
    """Return the training-tail F of the candidate ``est``'s model selection registered."""
    return float(next(r["f1"] for r in est.selection_ if r["candidate"] == est.method_))


def feature_set_steps(feature_groups: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """Return the candidate feature sets: :data:`ABLATION_STEPS` within ``feature_groups``, then all."""
    steps = [(name, feature_set_columns(groups, feature_groups))
             for name, groups in ABLATION_STEPS if set(groups) <= set(feature_groups)]
    every = feature_set_columns(tuple(feature_groups), feature_groups)
    if not steps or steps[-1][1] != every:
        steps.append(("all", every))
    return steps


def select_window_model(
    train: pl.DataFrame,
    k_min: int,
    feature_groups: dict[str, list[str]],
    params: XGBParams,
    *,
    select_features: bool = False,
    **kw: Any,
) -> tuple[WillJobsArrive, list[tuple[str, WillJobsArrive]]]:
    """Return (the model ``sia train`` registers for window ``k_min``, every candidate fitted).

    Fit on ``train`` rows only: all of ``feature_groups`` (the default, as
    ``sia train``'s), or with ``select_features`` each feature set of
    :func:`feature_set_steps` (each with its own model selection against the
    baselines), keeping the best F on the training tail (ties go to the
    earlier, smaller set). ``kw`` (threshold, target_recall, select) go to
    every :class:`WillJobsArrive`. Raises ValueError from a fit that cannot be made.
    """
    steps = feature_set_steps(feature_groups)
    y = train[LABEL].to_numpy()
    fitted = [(name, estimator_for(k_min, params, features=cols, **kw).fit(train, y))
              for name, cols in (steps if select_features else steps[-1:])]
    _, model = max(fitted, key=lambda ne: tail_f1(ne[1]))
    return model, fitted


def train_window(
    train: pl.DataFrame,
    val: pl.DataFrame,
    k_min: int,
    feature_groups: dict[str, list[str]],
    params: XGBParams,
    *,
    threshold: str | float = "half_f",
    target_recall: float | None = None,
    select: str = "auto",
    select_features: bool = False,
    ablation: bool = True,
    max_fit_rows: int | None = None,
) -> WindowResult:
    """Fit WillJobsArrive for one window on ``train`` rows and report it on ``val`` rows.

    Every choice is made on the tail of ``train`` (:func:`select_window_model`,
    the feature set too with ``select_features``); ``val`` is only scored.
    With ``ablation`` each set's forced XGBoost model is scored on ``val``
    too (SIA Tables 20 / 23). ``max_fit_rows`` caps each booster fit's rows
    (:class:`WillJobsArrive`). Returns the kept model, its validation metrics
    and the baselines on ``val``.
    """
    if train.height == 0 or val.height == 0:
        raise ConfigError(
            f"window {k_min} min: {'training' if train.height == 0 else 'validation'} period "
            "has no feature rows; check the split against the trace's span"
        )
    y_train = train[LABEL].to_numpy()
    y_val = val[LABEL].to_numpy()
    rows: list[dict[str, float | str]] = []
    kw = {"threshold": threshold, "target_recall": target_recall, "max_fit_rows": max_fit_rows}
    try:
        model, fitted = select_window_model(train, k_min, feature_groups, params,
                                            select_features=select_features, select=select, **kw)
        if ablation:
            for name, cols in feature_set_steps(feature_groups):
                est = next((e for n, e in fitted if n == name), None)
                est = (est.classifier_candidate(train, y_train) if est is not None else
                       estimator_for(k_min, params, features=cols, select="xgboost",
                                     **kw).fit(train, y_train))
                m = binary_metrics(y_val, est.predict(val))
                rows.append({"k_min": k_min, "feature_set": name, **m,
                             "threshold": est.threshold_, "tail_f1": tail_f1(est)})
    except ValueError as exc:
        raise ConfigError(f"window {k_min} min: {exc}") from None
    proba = model.arrival_proba(val)
    baselines = {
        "persistence": binary_metrics(y_val, persistence_prediction(val)),
        "always_yes": binary_metrics(y_val, always_yes_prediction(val)),
    }
    return WindowResult(
        k_min=k_min,
        model=model,
        metrics=binary_metrics(y_val, model.predict(val)),
        baselines=baselines,
        ablation=rows,
        val_true=y_val,
        val_proba=proba,
        train_rows=train.height,
    )


def feature_importance(result: WindowResult) -> dict[str, float]:
    """Return the registered model's gain importance per feature (empty for a baseline)."""
    return result.model.feature_importance()
