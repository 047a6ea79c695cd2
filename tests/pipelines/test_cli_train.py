"""`sia train` end to end on small synthetic data against a temporary MLflow store."""

from __future__ import annotations

import re
import time

import numpy as np
import polars as pl
import pytest
from sia.data.errors import SiaError
from sia.data.synthetic import generate_workload
from sia.features.table9 import FEATURE_COLUMNS
from sia.models.split import split_features
from sia.models.will_arrive import XGBParams
from sia.pipelines.cli import main
from sia.pipelines.train import TrainConfig, run_training

SMALL = dict(train_days=2.0, val_days=1.0, warmup_days=0.5, windows_min=(5, 60))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    mp = pytest.MonkeyPatch()
    mp.setenv("SIA_OUTPUT", str(root))
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    jobs, pools = generate_workload("base", 1, days=4.0)
    config = TrainConfig(**SMALL, xgb=XGBParams(n_estimators=5, max_depth=3), ablation=False)
    outcome = run_training(jobs, pools, config, trace="synthetic-test", out_dir=root / "train")
    yield outcome, root
    mp.undo()


def test_training_logs_a_run_and_registers_every_predictor(trained):
    import mlflow
    from mlflow import MlflowClient

    outcome, root = trained
    assert outcome.tracking_uri == f"sqlite:///{(root / 'mlflow.db').resolve()}"
    run = mlflow.get_run(outcome.run_id)
    assert run.data.params["split_train_days"] == "2.0"
    assert "will_arrive/5m/f1" in run.data.metrics
    assert "will_arrive_baseline/persistence/60m/recall" in run.data.metrics
    arts = {a.path for a in MlflowClient().list_artifacts(outcome.run_id)}
    assert {"report", "feature_importance.json", "precision_recall.png"} <= arts
    assert set(outcome.versions) == {"sia-will-jobs-arrive-5m", "sia-will-jobs-arrive-60m",
                                     "sia-new-load-estimate-5m", "sia-new-load-estimate-60m",
                                     "sia-job-duration"}
    for name, version in outcome.versions.items():
        assert version == "1"  # a fresh store; later runs may move the alias
        assert "champion" in MlflowClient().get_model_version(name, version).aliases
    assert (root / "train" / "will_arrive.csv").exists()
    assert (root / "train" / "report.md").read_text().startswith("# Predictor report")


def test_the_scheduler_loader_gets_the_same_predictions_back(trained):
    from sia.models.forecaster import LearnedForecaster
    from sia.models.registry import load_job_duration, load_new_load

    outcome, _ = trained
    f = LearnedForecaster.from_registry((5, 60), load_method="calibrated",
                                        tracking_uri=outcome.tracking_uri)
    rng = np.random.default_rng(0)
    x = pl.DataFrame(rng.integers(0, 20, size=(50, len(FEATURE_COLUMNS))).astype(np.float32),
                     schema=FEATURE_COLUMNS)
    for r in outcome.result.windows:
        loaded = f.will_arrive[r.k_min]
        assert loaded.threshold_ == r.threshold and loaded.method_ == r.model.method_
        assert list(loaded.feature_names_in_) == r.feature_columns
        assert loaded.get_params()["n_jobs"] == 1  # single-threaded: a tick predicts a few rows
        np.testing.assert_array_equal(loaded.predict_proba(x), r.model.predict_proba(x))
    rows = pl.DataFrame({"sliding_max": [0.0, 1.0, 3.0, 12.0]})
    for lr in outcome.result.loads:
        loaded = load_new_load(lr.k_min)
        assert loaded.get_params() == lr.estimator.get_params()
        assert loaded.method == "calibrated"  # the default
        np.testing.assert_array_equal(loaded.predict(rows), lr.estimator.predict(rows))
        assert f.loads[lr.k_min].scale_ == lr.estimator.scale_
    assert load_job_duration()["fallback_bin"] == 3


def test_split_rows_used_for_training_are_disjoint_from_validation(trained):
    outcome, _ = trained
    s = outcome.result.split
    grid = pl.DataFrame({"pool": ["a"] * 2000, "t": np.arange(2000) * 300.0,
                         "k_min": [60] * 2000})
    tr, va = split_features(grid, s)
    assert tr["t"].max() + 3600 <= va["t"].min()


def test_cli_train_prints_report_run_id_and_ui_command(trained, tmp_path, monkeypatch, capsys):
    _, root = trained  # reuse the module's store: creating an SQLite store takes seconds
    monkeypatch.setenv("SIA_OUTPUT", str(root))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code = main(["train", "--synthetic", "base", "--days", "4", "--train-days", "2",
                 "--val-days", "1", "--warmup-days", "0.5", "--windows", "5,60",
                 "--n-estimators", "3", "--ablation", "--target-recall", "0.8",
                 "--alias", "cli", "--out", str(tmp_path / "rep")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "MLflow run id:" in out
    assert f"mlflow ui --backend-store-uri sqlite:///{(root / 'mlflow.db').resolve()}" in out
    assert "registered (cli): sia-will-jobs-arrive-5m v2" in out  # champion stays on v1
    # one line says, per window, where the registered WillJobsArrive stands against persistence
    line = next(x for x in out.splitlines() if x.startswith("WillJobsArrive, validation F"))
    got = re.findall(r"(\d+) min (\d\.\d{3}) \((\w+)\) vs (\d\.\d{3}), (above|below|tie)", line)
    assert [g[0] for g in got] == ["5", "60"], line
    for _, f, _, p, side in got:
        assert side == ("above" if float(f) > float(p) else "below" if float(f) < float(p)
                        else "tie"), line
    report = pl.read_csv(tmp_path / "rep" / "will_arrive.csv")
    assert [f"{v:.3f}" for v in report["F"]] == [g[1] for g in got]
    assert [f"{v:.3f}" for v in report["persist_F"]] == [g[3] for g in got]
    assert "will_arrive" in out and (tmp_path / "rep" / "new_load.csv").exists()
    # --ablation: one row per window and cumulative feature set, printed and saved
    ablation = pl.read_csv(tmp_path / "rep" / "ablation.csv")
    assert ablation.height == 2 * ablation["feature_set"].n_unique() and "ablation" in out


def test_cli_train_bad_options_are_one_line_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SIA_OUTPUT", str(tmp_path))
    assert main(["train", "--synthetic", "base", "--windows", "5,x"]) == 2
    assert "--windows" in capsys.readouterr().err
    assert main(["train", "--synthetic", "base", "--days", "3", "--train-days", "21"]) == 2
    assert "does not fit" in capsys.readouterr().err
    assert main(["train", "--synthetic", "base", "--days", "3", "--threads", "-1"]) == 2
    assert "--threads must be >= 0" in capsys.readouterr().err
    for bad in ("median", "1.5", "0", "nan"):
        assert main(["train", "--synthetic", "base", "--threshold", bad]) == 2
        assert "--threshold must be half-f, tail or a probability" in capsys.readouterr().err
    # MLflow refuses these aliases only when registering, after the training: refused first
    for bad, says in (("e0.2", "only hold letters"), ("", "only hold letters"),
                      ("a b", "'a_b'"), ("v3", "reserves"), ("Latest", "reserves"),
                      ("x" * 256, "1 to 255")):
        assert main(["train", "--synthetic", "base", "--alias", bad]) == 2
        err = capsys.readouterr().err
        assert "--alias" in err and says in err, (bad, err)


def test_check_alias_accepts_what_mlflow_accepts():
    from sia.pipelines.inputs import check_alias

    for ok in ("champion", "wk-15", "e0_2", "v", "v1a", "x" * 255, "latest2"):
        assert check_alias(ok) == ok


def test_threshold_option_takes_a_rule_or_a_probability():
    from sia.pipelines.cli.train import parse_threshold

    assert parse_threshold(None) == "half_f"
    assert parse_threshold("half-f") == parse_threshold("HALF_F") == "half_f"
    assert parse_threshold("tail") == "tail"
    assert parse_threshold("0.3") == pytest.approx(0.3)


def test_unreachable_tracking_server_is_a_quick_clear_error(tmp_path, monkeypatch):
    from sia.pipelines.tracking import setup_tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    clock = time.monotonic()
    with pytest.raises(SiaError, match="unreachable"):
        setup_tracking(tmp_path)
    assert time.monotonic() - clock < 10  # a probe with a short timeout, not MLflow's retries


def test_job_duration_quantile_round_trips_through_the_registry(trained):
    from sia.models.forecaster import LearnedForecaster
    from sia.models.registry import load_job_duration, log_job_duration

    outcome, _ = trained
    assert load_job_duration()["quantile"] == 0.5  # the default training registers the median
    assert outcome.result.duration["quantile"] == 0.5
    log_job_duration({"min_count": 2, "fallback_bin": 1, "quantile": 0.8}, alias="q80")
    got = load_job_duration("q80")
    assert got == {"min_count": 2, "fallback_bin": 1, "quantile": 0.8}
    f = LearnedForecaster({}, duration_config=got)
    assert (f.duration_quantile, f.fallback_bin, f.history.min_count) == (0.8, 1, 2)
    # a version registered before the quantile existed means the median
    log_job_duration({"min_count": 3, "fallback_bin": 3}, alias="old")
    assert load_job_duration("old")["quantile"] == 0.5
    assert LearnedForecaster({}, duration_config={"min_count": 3}).duration_quantile == 0.5
    with pytest.raises(ValueError, match="quantile"):
        LearnedForecaster({}, duration_config={"quantile": 2.0})


def test_training_reports_the_chosen_or_calibrated_quantile(trained):
    from sia.features.duration_history import point_in_time_history
    from sia.pipelines import inputs
    from sia.pipelines.train import evaluate_duration

    outcome, _ = trained
    jobs, pools = generate_workload("base", 1, days=4.0)
    schedule = inputs.fcfs_schedule(jobs, pools)
    history = point_in_time_history(schedule)
    split = outcome.result.split
    med = evaluate_duration(schedule, history, split, TrainConfig(**SMALL))
    new = {"selected", "lend_risk"}  # the registered JobDuration, reported beside the rule
    assert outcome.result.duration["selected"] == "history_cdf"  # the default
    assert med == {**{k: v for k, v in outcome.result.duration.items() if k not in new},
                   "train_under_rate": med["train_under_rate"]}
    q90 = evaluate_duration(schedule, history, split, TrainConfig(**SMALL, duration_quantile=0.9))
    assert q90["quantile"] == 0.9
    assert (q90["median_accuracy"], q90["median_under_rate"]) == (med["accuracy"], med["under_rate"])
    assert q90["under_rate"] <= med["under_rate"] and q90["train_under_rate"] <= med[
        "train_under_rate"]
    cal = evaluate_duration(schedule, history, split,
                            TrainConfig(**SMALL, duration_target_under=q90["train_under_rate"]))
    assert cal["quantile"] <= 0.9 and cal["target_met"]
    assert cal["train_under_rate"] <= q90["train_under_rate"]
    with pytest.raises(SiaError, match="duration_quantile"):
        evaluate_duration(schedule, history, split, TrainConfig(**SMALL, duration_quantile=-1))


def test_cli_train_duration_quantile(trained, tmp_path, monkeypatch, capsys):
    from sia.models.registry import load_job_duration

    _, root = trained
    monkeypatch.setenv("SIA_OUTPUT", str(root))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code = main(["train", "--synthetic", "base", "--days", "4", "--train-days", "2",
                 "--val-days", "1", "--warmup-days", "0.5", "--windows", "5",
                 "--n-estimators", "3", "--duration-quantile", "0.9",
                 "--alias", "q90", "--out", str(tmp_path / "rep")])
    out = capsys.readouterr().out
    assert code == 0, out
    # the ablation is off by default: no table, nothing printed for it
    assert not (tmp_path / "rep" / "ablation.csv").exists() and "ablation" not in out
    assert "JobDuration: quantile 0.9, validation accuracy" in out
    assert load_job_duration("q90")["quantile"] == 0.9
    row = pl.read_csv(tmp_path / "rep" / "job_duration.csv")
    assert row["quantile"][0] == 0.9 and "median_under_rate" in row.columns
    assert main(["train", "--synthetic", "base", "--duration-quantile", "1.5"]) == 2
    assert "--duration-quantile" in capsys.readouterr().err
    assert main(["train", "--synthetic", "base", "--duration-target-under", "-0.1"]) == 2
    assert "--duration-target-under" in capsys.readouterr().err


def test_new_load_report_has_every_method_on_validation_and_the_scored_ones_on_holdout(
        trained):
    outcome, _ = trained
    for name in ("new_load", "new_load_holdout"):
        t = outcome.result.tables[name]
        # with --load-method calibrated the quantile booster decides nothing on the hold-out
        expected = ["calibrated", "quantile", "quantile_raw", "sliding_max"]
        if name == "new_load_holdout":
            expected = ["calibrated", "sliding_max"]
        assert sorted(set(t["method"])) == expected
        assert t.filter(pl.col("registered"))["method"].to_list() == ["calibrated"] * 2
        assert {"exceed", "over_gpus", "short_gpus", "mean_estimate_gpus"} <= set(t.columns)
    for lr in outcome.result.loads:
        assert sorted(lr.estimators) == ["calibrated", "quantile", "sliding_max"]
        assert lr.estimator is lr.estimators["calibrated"]
        assert lr.estimators["quantile"].booster_ is not None


def test_training_run_is_named_tagged_and_grouped_for_the_ui(trained):
    import mlflow

    outcome, _ = trained
    run = mlflow.get_run(outcome.run_id)
    s = outcome.result.split
    a, b, c = (x / 86400 for x in (s.train_start, s.train_end, s.val_end))
    span = f"train {a:g}-{b:g} d, validate {b:g}-{c:g} d"
    assert run.info.run_name.startswith(f"train {a:g}-{b:g} val {b:g}-{c:g} d | synthetic-test | 20")
    tags = run.data.tags
    assert (tags["trace"], tags["split"], tags["alias"]) == ("synthetic-test", span, "champion")
    assert tags["sia_version"] == "0.1.0"
    assert "sia-job-duration v1" in tags["mlflow.note.content"]
    # split parameters in days, not seconds
    assert float(run.data.params["split_train_end_day"]) == pytest.approx(b)
    assert not any(k in run.data.params for k in ("split_train_start", "split_train_end"))
    # metrics grouped by prefix: predictor / window / metric, baselines apart
    prefixes = ("will_arrive/", "will_arrive_baseline/", "new_load/", "job_duration/", "time/")
    assert all(k.startswith(prefixes) for k in run.data.metrics), sorted(run.data.metrics)
    r5 = outcome.result.windows[0]
    assert run.data.metrics["will_arrive/5m/f1"] == pytest.approx(r5.metrics["f1"])
    assert run.data.metrics["will_arrive_baseline/persistence/5m/f1"] == pytest.approx(
        r5.baselines["persistence"]["f1"])


def test_registering_again_prints_nothing(trained, capfd):
    from sia.models.registry import log_job_duration

    log_job_duration({"min_count": 2, "fallback_bin": 1}, alias="again")
    log_job_duration({"min_count": 2, "fallback_bin": 1}, alias="again")
    err = capfd.readouterr().err
    assert "already exists" not in err and "Successfully registered" not in err


def test_experiment_name_comes_from_the_option_then_the_environment(monkeypatch):
    from sia.pipelines.tracking import PREDICTOR_EXPERIMENT, experiment_name

    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    assert experiment_name() == PREDICTOR_EXPERIMENT
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "team-a")
    assert experiment_name() == "team-a"
    assert experiment_name("mine") == "mine"
    with pytest.raises(SiaError, match="--experiment"):
        experiment_name("  ")


def test_cli_train_logs_into_the_asked_experiment_with_a_line_per_stage(
        trained, tmp_path, monkeypatch, capsys):
    import mlflow

    _, root = trained
    monkeypatch.setenv("SIA_OUTPUT", str(root))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from-env")
    code = main(["train", "--synthetic", "base", "--days", "4", "--train-days", "2",
                 "--val-days", "1", "--warmup-days", "0.5", "--windows", "5",
                 "--n-estimators", "3", "--no-ablation", "--alias", "exp",
                 "--experiment", "from-option", "--out", str(tmp_path / "rep")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    stages = [ln for ln in captured.err.splitlines() if ln.startswith("[")]
    for stage in ("reading", "replaying FCFS", "building features", "fitting the predictors",
                  "opening the MLflow store", "logging the run", "done"):
        assert sum(stage in ln for ln in stages) == 1, captured.err
    run_id = captured.out.split("MLflow run id: ")[1].split()[0]
    exp = mlflow.get_experiment(mlflow.get_run(run_id).info.experiment_id)
    assert exp.name == "from-option"


def test_tuning_resumes_only_its_own_study_and_logs_the_best_trial(trained, tmp_path):
    import mlflow
    from sia.pipelines.train import study_digest

    outcome, _ = trained
    jobs, pools = generate_workload("base", 1, days=4.0)
    config = TrainConfig(**{**SMALL, "windows_min": (5,)},
                         xgb=XGBParams(n_estimators=5, max_depth=3), ablation=False)
    lines: list[str] = []
    runs = [run_training(jobs, pools, config, trace="synthetic-test", out_dir=tmp_path,
                         tune=n, progress=lines.append) for n in (2, 3)]
    resumed = [ln for ln in lines if "resumed" in ln]
    assert [ln.split(": ")[-1] for ln in resumed] == ["resumed 0 trials, running 2",
                                                      "resumed 2 trials, running 1"]
    run = mlflow.get_run(runs[1].run_id)
    digest = run.data.params["tune_study_hash"]
    assert f"-5m-{digest}" in resumed[1] and run.info.run_name.startswith("tune+train")
    best = {k.split("/")[-1]: v for k, v in run.data.params.items() if k.startswith("tune/5m/")}
    assert best["max_depth"] == str(runs[1].best_params[5]["max_depth"])
    assert run.data.metrics["tune/5m/best_objective"] > 0
    # what makes trials comparable is in the hash: another split, seed or window set is
    # another study
    split, cols = outcome.result.split, ["a", "b"]
    base = study_digest(split, cols, (5,), 0, "f1", 0.5)
    assert base == study_digest(split, cols, (5,), 0, "f1", 0.9)  # floor unused by f1
    moved = type(split)(split.train_start + 1, split.train_end, split.val_end,
                        split.active_start, split.how)
    assert len({base, study_digest(moved, cols, (5,), 0, "f1", 0.5),
                study_digest(split, cols, (5,), 1, "f1", 0.5),
                study_digest(split, cols, (5, 60), 0, "f1", 0.5),
                study_digest(split, cols[:1], (5,), 0, "f1", 0.5)}) == 5



def test_fitting_on_threads_gives_the_same_predictors_and_reports():
    """The models are fit on a thread pool; each fit is deterministic, so threads change nothing."""
    from polars.testing import assert_frame_equal
    from sia.pipelines.inputs import fcfs_schedule
    from sia.pipelines.train import train_predictors

    jobs, pools = generate_workload("base", 1, days=4.0)
    schedule = fcfs_schedule(jobs, pools)
    kw = dict(**SMALL, xgb=XGBParams(n_estimators=5, max_depth=3), duration_method="auto")
    serial = train_predictors(schedule, TrainConfig(**kw, threads=1))
    pooled = train_predictors(schedule, TrainConfig(**kw, threads=3))
    assert serial.tables.keys() == pooled.tables.keys()
    for name, table in serial.tables.items():
        assert_frame_equal(table, pooled.tables[name], check_exact=True)
    for a, b in zip(serial.windows, pooled.windows, strict=True):
        assert (a.k_min, a.model.method_, a.model.threshold_) == (b.k_min, b.model.method_,
                                                                  b.model.threshold_)
        np.testing.assert_array_equal(a.val_proba, b.val_proba)
    assert serial.duration == pooled.duration
    assert [r.estimator.get_params() for r in serial.loads] == [
        r.estimator.get_params() for r in pooled.loads]


def test_threads_must_not_be_negative():
    from sia.data.errors import ConfigError
    from sia.pipelines.train import training_threads

    assert training_threads(2) == 2 and training_threads(0) >= 1
    with pytest.raises(ConfigError, match="threads must be >= 0"):
        training_threads(-1)


def test_tasks_start_in_the_asked_order_and_return_in_task_order():
    import threading

    from sia.pipelines.train import _run_tasks

    started: list[int] = []
    lock = threading.Lock()

    def task(i: int):
        def run() -> int:
            with lock:
                started.append(i)
            return 10 * i
        return run

    tasks = [task(i) for i in range(5)]
    # one thread: task order, whatever the start order asked
    assert _run_tasks(tasks, 1, order=[4, 3, 2, 1, 0]) == [0, 10, 20, 30, 40]
    assert started == [0, 1, 2, 3, 4]
    started.clear()
    assert _run_tasks(tasks, 2, order=[4, 3, 2, 1, 0]) == [0, 10, 20, 30, 40]
    assert sorted(started) == [0, 1, 2, 3, 4] and started[0] in (4, 3)
    with pytest.raises(ValueError, match="permutation"):
        _run_tasks(tasks, 2, order=[0, 0, 1, 2, 3])


def test_new_load_scores_the_quantile_booster_on_the_holdout_when_it_decides():
    """--load-method auto (or quantile) fits the quantile booster on the hold-out too; a fixed
    other method skips those fits and nothing else changes (validation, registered model)."""
    from polars.testing import assert_frame_equal
    from sia.pipelines.inputs import fcfs_schedule
    from sia.pipelines.train import train_predictors

    jobs, pools = generate_workload("base", 1, days=4.0)
    schedule = fcfs_schedule(jobs, pools)
    kw = dict(train_days=2.0, val_days=1.0, warmup_days=0.5, windows_min=(5,),
              xgb=XGBParams(n_estimators=5, max_depth=3), duration_method="history", threads=1)
    fixed = train_predictors(schedule, TrainConfig(**kw, load_method="calibrated"))
    auto = train_predictors(schedule, TrainConfig(**kw, load_method="auto"))
    held = auto.tables["new_load_holdout"]
    assert sorted(set(held["method"])) == ["calibrated", "quantile", "quantile_raw",
                                           "sliding_max"]
    # the methods scored in both runs have the same hold-out rows
    same = held.filter(pl.col("method").is_in(["calibrated", "sliding_max"])).drop("registered")
    assert_frame_equal(same, fixed.tables["new_load_holdout"].drop("registered"))
    assert_frame_equal(auto.tables["new_load"].drop("registered"),
                       fixed.tables["new_load"].drop("registered"))
    chosen = auto.loads[0].estimator.method
    assert chosen == new_load_choice(held)


def new_load_choice(held: pl.DataFrame) -> str:
    """The method choose_method picks from a hold-out table's rows."""
    from sia.models.new_load import METHODS, choose_method

    rows = {r["method"]: {"exceedance_rate": r["exceed"], "mean_over_reservation_gpus":
                          r["over_gpus"]} for r in held.iter_rows(named=True)}
    return choose_method({m: rows[m] for m in METHODS}, float(held["target_exceed"][0]))


def test_the_lending_report_caps_the_registered_cdf_as_the_scheduler_does():
    """The report's registered row reads the started look-alikes at each validation job's
    submission (no queue): a run of long jobs in flight caps what the finished ones say."""
    from sia.features.duration_features import DURATION_FEATURES
    from sia.models.job_duration import JobDuration
    from sia.models.split import TimeSplit
    from sia.pipelines.train import _served_cdf

    # pool p: three short jobs before validation, then three long ones start at 1,000-1,002 s
    # and are still running at 5,000 s, when the validation job is submitted
    zq = pl.DataFrame({"job_id": ["a", "b", "c", "d", "e", "f", "v"], "pool": ["p"] * 7,
                       "num_gpus": [1] * 7,
                       "submit_time": [0.0, 10.0, 20.0, 1000.0, 1001.0, 1002.0, 5000.0],
                       "duration": [60.0, 60.0, 60.0, 9e4, 9e4, 9e4, 60.0]})
    zq = zq.with_columns(end_time=pl.col("submit_time") + pl.col("duration"))
    split = TimeSplit(train_start=0.0, train_end=4000.0, val_end=6000.0, active_start=0.0,
                      how="test")
    x = np.zeros((1, len(DURATION_FEATURES)))
    y = np.array([0, 1, 2, 3])
    fitted = np.zeros((4, x.shape[1]))
    cdf = np.array([[1.0, 1.0, 1.0]])
    for cap, want in ((False, cdf), (True, [[0.5, 0.5, 1.0]])):
        model = JobDuration("history_cdf", fallback_bin=0, started_cap=cap).fit(fitted, y)
        # the pool's shares say "fits" (NaN counts: the fallback step of bin 0 = 1, 1, 1);
        # known at 5,000 s: a-c fit every edge, d-f ran past 5 min and 1 h, 12 h unknown
        np.testing.assert_allclose(_served_cdf(model, x, zq, split), want)


def test_job_duration_drops_a_tag_that_says_nothing_and_keeps_one_that_names_the_job():
    """`sia train`'s history_cdf chooses its look-alike levels on the training rows and reports
    the comparison (job_duration_levels). Two pools, one of short jobs and one of long ones:
    tags drawn at random across both say less than the pool does and are dropped; tags that
    name the kind of job (each pool runs two kinds) say more, and are kept; users who each
    run one kind come first, users drawn at random do not."""
    from sia.models.job_duration import rule_levels
    from sia.models.split import TimeSplit
    from sia.pipelines.train import fit_job_duration

    rng = np.random.default_rng(0)
    n = 800
    pool = rng.choice(["short", "long"], size=n)
    kind = rng.integers(0, 2, size=n)
    # short pool: kind 0 runs 1 min, kind 1 runs 30 min; long pool: 3 h or 20 h (with noise)
    base = np.where(pool == "short", np.where(kind == 0, 60.0, 1800.0),
                    np.where(kind == 0, 3 * 3600.0, 20 * 3600.0))
    schedule = pl.DataFrame({
        "job_id": [f"j{i}" for i in range(n)], "pool": pool, "num_gpus": [1] * n,
        "submit_time": np.sort(rng.uniform(0.0, 4 * 86400.0, size=n)),
        "duration": base * rng.uniform(0.8, 1.2, size=n)})
    split = TimeSplit(train_start=0.0, train_end=3 * 86400.0, val_end=4 * 86400.0,
                      active_start=0.0, how="test")
    config = TrainConfig(**SMALL)
    names = [f"{p}-kind{k}" for p, k in zip(pool, kind, strict=True)]
    cases = {"none": {}, "noise": {"tag": [f"job{i}" for i in rng.integers(0, 4, n)]},
             "names": {"tag": names},
             "users": {"user": names},  # each user runs one kind: no tags, but users say it
             "noisy users": {"user": [f"u{i}" for i in rng.integers(0, 4, n)]}}
    chosen = {}
    for name, cols in cases.items():
        s = schedule.with_columns(*(pl.Series(c, v) for c, v in cols.items()))
        model, tables = fit_job_duration(s, split, config)
        levels = tables["job_duration_levels"]
        assert levels["chosen"].sum() == 1
        assert levels.filter(pl.col("chosen"))["levels"][0] == ", ".join(
            rule_levels(model.history_tag, model.history_user))
        chosen[name] = (model.history_tag, model.history_user)
    # without tags the chains with and without the tag read the same: the first of each pair
    assert chosen == {"none": (True, False), "noise": (False, False), "names": (True, False),
                      "users": (False, True), "noisy users": (True, False)}


def test_versions_record_the_trace_they_learned_from(trained):
    """Issue 36: every registered version carries the trace's readable name and identity hash,
    and the precision-recall plot is written beside the report."""
    from mlflow import MlflowClient
    from sia.pipelines.engine.predictors import trace_hash

    outcome, root = trained
    for name, version in outcome.versions.items():
        tags = MlflowClient().get_model_version(name, version).tags
        assert tags["trace"] == "synthetic-test"
        assert tags["trace_hash"] == trace_hash("synthetic-test") and len(tags["trace_hash"]) == 12
    assert trace_hash("synthetic-test") != trace_hash("synthetic-test2")
    assert (root / "train" / "precision_recall.png").stat().st_size > 1000


def test_train_needs_a_trace_or_synthetic_and_synthetic_moves_no_alias(trained, tmp_path,
                                                                       monkeypatch, capsys):
    from mlflow import MlflowClient

    _, root = trained
    monkeypatch.setenv("SIA_OUTPUT", str(root))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["train"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: sia train needs a TRACE") and err.count("\n") == 1
    client = MlflowClient()
    before = client.get_model_version_by_alias("sia-job-duration", "champion").version
    args = ["train", "--synthetic", "base", "--days", "4", "--train-days", "2", "--val-days",
            "1", "--warmup-days", "0.5", "--windows", "5", "--n-estimators", "3",
            "--no-ablation"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "registered without an alias" in out
    assert client.get_model_version_by_alias("sia-job-duration", "champion").version == before
    # no --out: a new report folder per run under <output root>/train, none overwritten
    assert main(args) == 0
    folders = [p for p in (root / "train").iterdir() if p.is_dir() and "base" in p.name]
    assert len(folders) == 2 and all((p / "report.md").exists() for p in folders)


def test_a_trace_with_holds_trains_on_the_held_jobs_and_says_so():
    """Holds in the trace: WillJobsArrive's candidates read held_jobs and held_gpus, and the
    result's config (what the run logs as feature_set) names the held group; with no job
    held, the same schedule trains exactly as without the column."""
    from sia.pipelines.inputs import fcfs_schedule
    from sia.pipelines.train import train_predictors

    jobs, pools = generate_workload("base", 1, days=4.0)
    schedule = fcfs_schedule(jobs, pools)
    kw = dict(**SMALL, xgb=XGBParams(n_estimators=5, max_depth=3), threads=1)
    rng = np.random.default_rng(1)
    hold = np.where(rng.random(schedule.height) < 0.3, 1800.0, 0.0)
    held = train_predictors(schedule.with_columns(pl.Series("hold_time", hold)), TrainConfig(**kw))
    assert held.config.feature_groups[-1] == "held"
    assert "held" in held.config.to_params()["feature_set"]
    for w in held.windows:
        assert {"held_jobs", "held_gpus"} <= set(w.model._columns()), w.k_min
    none = train_predictors(schedule.with_columns(pl.lit(0.0).alias("hold_time")),
                            TrainConfig(**kw))
    plain = train_predictors(schedule, TrainConfig(**kw))
    assert "held" not in none.config.feature_groups
    for a, b in zip(none.windows, plain.windows, strict=True):
        assert (a.model.method_, a.model.threshold_) == (b.model.method_, b.model.threshold_)
        np.testing.assert_array_equal(a.val_proba, b.val_proba)
