"""Walk-forward backtest: fold boundaries by hand, no fold sees its future, CLI end to end."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.features.table9 import FEATURE_COLUMNS
from sia.models.backtest import fold_starts, walk_forward
from sia.models.will_arrive import WillJobsArrive

D = 86400.0


def _rows(days: float, seed: int = 0) -> pl.DataFrame:
    """Hourly rows of a 60-min window whose label follows arrivals_x10 (a learnable law)."""
    rng = np.random.default_rng(seed)
    n = int(days * 24)
    data = {c: rng.integers(0, 5, n).astype(np.float32) for c in FEATURE_COLUMNS}
    label = ((data["arrivals_x10"] > 2) ^ (rng.random(n) < 0.05)).astype(np.int8)
    return pl.DataFrame({"t": np.arange(n) * 3600.0, **data, "label_arrival": label})


def test_fold_starts_by_hand():
    np.testing.assert_array_equal(fold_starts(10 * D, 17 * D, 3 * D), [10 * D, 13 * D, 16 * D])
    with pytest.raises(ConfigError, match="retrain-every"):
        fold_starts(0.0, D, 0.0)
    with pytest.raises(ConfigError, match="nothing to test"):
        fold_starts(2 * D, D, D)


def test_each_fold_trains_on_its_past_and_tests_on_its_days():
    seen = []

    class Spy(WillJobsArrive):
        def fit(self, X, y, **kw):
            seen.append((float(X["t"].min()), float(X["t"].max())))
            return super().fit(X, y, **kw)

    feats = _rows(12)
    folds, overall = walk_forward(
        feats, window_min=60, start_s=6 * D, end_s=12 * D - 3600.0, every_s=2 * D,
        train_span_s=4 * D,
        fit_model=lambda rows: Spy(window_min=60, n_estimators=10).fit(rows, rows["label_arrival"]))
    assert [f["fold"] for f in folds] == [0, 1, 2]
    assert [f["start_day"] for f in folds] == [6.0, 8.0, 10.0]
    for (lo, hi), f in zip(seen, folds, strict=True):
        s = f["start_day"] * D
        assert lo == s - 4 * D and hi + 3600.0 <= s  # label windows end by the fold's start
    # test rows: t in [s, s + 2 D - 1 h] (label window inside the fold): 48 hourly rows;
    # the last fold ends at 12 D - 1 h, so t <= 12 D - 2 h: 47
    assert [f["test_rows"] for f in folds] == [48, 48, 47]
    assert {o["predictor"] for o in overall} == {"model", "persistence", "always_yes"}
    model = next(o for o in overall if o["predictor"] == "model")
    assert model["rows"] == 48 + 48 + 47 and model["f1"] > 0.8
    always = next(o for o in overall if o["predictor"] == "always_yes")
    assert always["recall"] == 1.0


def test_a_fold_without_two_classes_is_skipped_and_said():
    feats = _rows(6).with_columns(label_arrival=pl.lit(0, dtype=pl.Int8))
    folds, overall = walk_forward(feats, window_min=60, start_s=3 * D, end_s=5 * D,
                                  every_s=D, train_span_s=2 * D,
                                  fit_model=lambda rows: WillJobsArrive(window_min=60).fit(
                                      rows, rows["label_arrival"]))
    assert [f["method"] for f in folds] == ["skipped", "skipped"] and overall == []


def test_backtest_cli_on_a_small_synthetic_workload(tmp_path, monkeypatch):
    from sia.pipelines.cli import main

    monkeypatch.setenv("SIA_OUTPUT", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code = main(["backtest", "--synthetic", "base", "--days", "5", "--windows", "60",
                 "--from-day", "3", "--retrain-every", "1", "--train-days", "2",
                 "--out", str(tmp_path / "bt")])
    assert code == 0
    folds = pl.read_csv(tmp_path / "bt" / "backtest_folds.csv")
    assert folds["fold"].to_list() == [0, 1]
    overall = pl.read_csv(tmp_path / "bt" / "backtest_overall.csv")
    assert set(overall["predictor"]) == {"model", "persistence", "always_yes"}
    assert main(["backtest", "--synthetic", "base", "--days", "5", "--retrain-every", "0"]) == 2
    # sia train's choices can be backtested: a fixed threshold reaches every fold's classifier
    code = main(["backtest", "--synthetic", "base", "--days", "5", "--windows", "60",
                 "--from-day", "3", "--retrain-every", "1", "--train-days", "2",
                 "--threshold", "0.3", "--select-features", "--will-arrive-select", "xgboost",
                 "--out", str(tmp_path / "bt2")])
    assert code == 0
    folds = pl.read_csv(tmp_path / "bt2" / "backtest_folds.csv")
    xgb = folds.filter(pl.col("method") == "xgboost")
    assert xgb.height == folds.height == 2 and (xgb["threshold"] == 0.3).all()
    assert main(["backtest", "--synthetic", "base", "--threshold", "often"]) == 2
    assert main(["backtest", "--synthetic", "base", "--will-arrive-select", "maybe"]) == 2


def test_backtest_report_in_the_mlflow_store_folder_is_logged_once(tmp_path, monkeypatch):
    """`--out` may be the folder that holds the MLflow store (sia's default ./out): the report's
    files are logged, not the folder, which would copy the artifact store into itself."""
    import mlflow
    from mlflow import MlflowClient
    from sia.pipelines.cli import main

    monkeypatch.setenv("SIA_OUTPUT", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code = main(["backtest", "--synthetic", "base", "--days", "5", "--windows", "60",
                 "--from-day", "3", "--retrain-every", "1", "--train-days", "2",
                 "--out", str(tmp_path)])
    assert code == 0
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    logged = {a.path for a in MlflowClient().list_artifacts(run.info.run_id, "report")}
    assert logged == {"report/backtest_folds.csv", "report/backtest_overall.csv",
                      "report/report.md"}
