"""WillJobsArrive(pool, k) -> {0, 1}: one XGBoost classifier per window, across all pools (SIA 5.4.1).

The model sees only the Table 9 features (pool identity flows through them,
so a new pool needs no training). Class imbalance is handled by XGBoost's
``scale_pos_weight`` = negatives / positives of the training rows. The
decision threshold is 0.5 unless a target recall is asked for, in which case
it is the largest threshold reaching that recall on the validation period.

Beside the model, two trivial baselines any model must beat: *persistence*
(an arrival in the next k iff one arrived in the last k, i.e.
``arrivals_x1 > 0``) and *always-yes*.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import polars as pl
import xgboost as xgb
from sia.data.errors import ConfigError
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
)


@dataclass
class XGBParams:
    """XGBoost hyperparameters (defaults: XGBoost's own, as the paper used them)."""

    n_estimators: int = 100
    max_depth: int = 6
    learning_rate: float = 0.3
    min_child_weight: float = 1.0
    subsample: float = 1.0
    colsample_bytree: float = 1.0
    reg_lambda: float = 1.0
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


def scale_pos_weight(y: np.ndarray) -> float:
    """Return negatives / positives of ``y`` (1.0 when a class is absent)."""
    pos = int(np.sum(y))
    neg = int(np.size(y) - pos)
    return float(neg) / float(pos) if pos and neg else 1.0


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


def positive_proba(model: xgb.XGBClassifier, x: np.ndarray) -> np.ndarray:
    """Return P(arrival) per row of ``x``."""
    return model.predict_proba(x)[:, 1]


def threshold_for_recall(y_true: np.ndarray, proba: np.ndarray, target_recall: float) -> float:
    """Return the largest threshold t with recall(proba >= t) >= ``target_recall``."""
    if not 0.0 < target_recall <= 1.0:
        raise ConfigError(f"--target-recall must be in (0, 1], not {target_recall}")
    y_true = np.asarray(y_true).astype(np.int8)
    if y_true.sum() == 0:
        return 0.5
    _, recall, thresholds = precision_recall_curve(y_true, proba)
    # recall[i] is the recall at thresholds[i]; recall is non-increasing in i.
    ok = np.nonzero(recall[:-1] >= target_recall)[0]
    return float(thresholds[ok[-1]]) if ok.size else float(thresholds[0])


@dataclass
class WindowResult:
    """One window's trained classifier, its threshold, and its validation results."""

    k_min: int
    model: xgb.XGBClassifier
    feature_columns: list[str]
    threshold: float
    metrics: dict[str, float]
    baselines: dict[str, dict[str, float]]
    ablation: list[dict[str, float | str]] = field(default_factory=list)
    val_true: np.ndarray | None = None
    val_proba: np.ndarray | None = None
    train_rows: int = 0


def feature_set_columns(groups: tuple[str, ...], feature_groups: dict[str, list[str]]) -> list[str]:
    """Return the columns of the named feature groups, in group order."""
    unknown = [g for g in groups if g not in feature_groups]
    if unknown:
        raise ConfigError(f"unknown feature group(s) {unknown}; known: {list(feature_groups)}")
    return [c for g in groups for c in feature_groups[g]]


def train_window(
    train: pl.DataFrame,
    val: pl.DataFrame,
    k_min: int,
    feature_groups: dict[str, list[str]],
    params: XGBParams,
    *,
    threshold: float = 0.5,
    target_recall: float | None = None,
    ablation: bool = True,
) -> WindowResult:
    """Train and evaluate WillJobsArrive for one window on rows already split and filtered to k.

    With ``ablation`` every cumulative feature set of :data:`ABLATION_STEPS`
    is fit and evaluated; the last (all features) is the model kept.
    Returns metrics at the chosen threshold and the baselines on ``val``.
    """
    if train.height == 0 or val.height == 0:
        raise ConfigError(
            f"window {k_min} min: {'training' if train.height == 0 else 'validation'} period "
            "has no feature rows; check the split against the trace's span"
        )
    y_train = train[LABEL].to_numpy()
    y_val = val[LABEL].to_numpy()
    steps = ABLATION_STEPS if ablation else ABLATION_STEPS[-1:]
    rows: list[dict[str, float | str]] = []
    model = proba = cols = None
    chosen = threshold
    for name, groups in steps:
        cols = feature_set_columns(groups, feature_groups)
        model = fit_classifier(feature_matrix(train, cols), y_train, params)
        proba = positive_proba(model, feature_matrix(val, cols))
        chosen = threshold_for_recall(y_val, proba, target_recall) if target_recall else threshold
        m = binary_metrics(y_val, proba >= chosen)
        rows.append({"k_min": k_min, "feature_set": name, **m, "threshold": chosen})
    assert model is not None and proba is not None and cols is not None
    baselines = {
        "persistence": binary_metrics(y_val, persistence_prediction(val)),
        "always_yes": binary_metrics(y_val, always_yes_prediction(val)),
    }
    return WindowResult(
        k_min=k_min,
        model=model,
        feature_columns=list(cols),
        threshold=chosen,
        metrics=binary_metrics(y_val, proba >= chosen),
        baselines=baselines,
        ablation=rows,
        val_true=y_val,
        val_proba=proba,
        train_rows=train.height,
    )


def feature_importance(result: WindowResult) -> dict[str, float]:
    """Return the model's gain importance per feature (0 for unused features)."""
    scores = result.model.get_booster().get_score(importance_type="gain")
    out = {}
    for i, col in enumerate(result.feature_columns):
        out[col] = float(scores.get(f"f{i}", 0.0))
    return out
