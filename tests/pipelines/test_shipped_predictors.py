"""Learned predictors shipped as data: `sia evaluate --dask` on workers that cannot see the store.

The client resolves the alias once and keeps the models as data (JSON parameters
and XGBoost boosters, :class:`~sia.pipelines.engine.spec.ModelPayload`); workers
build the forecaster from those bytes and never open an MLflow store.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
import yaml
from sia.data.synthetic import generate_workload
from sia.features.duration_features import DURATION_FEATURES
from sia.features.table9 import FEATURE_COLUMNS
from sia.models.forecaster import LearnedForecaster
from sia.models.job_duration import JobDuration
from sia.models.new_load import NewLoadEstimate
from sia.models.registry import RegistryError
from sia.models.will_arrive import WillJobsArrive
from sia.pipelines.cli import main
from sia.pipelines.engine import FrameWorkload, ReplaySpec, run_replay
from sia.pipelines.engine.spec import ModelPayload
from sia.scheduler.core.simulator import simulate

TRAIN = ["train", "--synthetic", "base", "--days", "5", "--train-days", "2", "--val-days", "1",
         "--warmup-days", "0.5", "--windows", "5,60", "--no-ablation", "--n-estimators", "5",
         "--alias", "champion"]  # synthetic training moves only an alias it is given
#: a synthetic cluster sees an arrival in every 12 hours: 5 and 60 min windows only
SIA = {"name": "sia", "options": {"windows_s": [300, 3600]}}
CONFIG = {
    "name": "dask-learned", "seed": 1, "trace": {"synthetic": "base", "days": 5},
    "replay": {"start_day": 3.5}, "warmup_days": 0.25, "experiments": 2,
    "pools_per_experiment": "all", "quotas": "recorded", "policies": ["fcfs", SIA],
    "predictors": {"train": "registry", "alias": "champion", "windows_min": [5, 60]},
}


# ----------------------------------------------------------------------------- as bytes
def _hand_fitted() -> LearnedForecaster:
    """A forecaster of every kind of model: XGBoost, either and persistence WillJobsArrive, quantile
    NewLoadEstimate, learned JobDuration with a lending eps (no MLflow)."""
    rng = np.random.default_rng(5)
    n = 600
    rows = pl.DataFrame({"t": np.arange(n) * 300.0,
                         **{c: rng.integers(0, 4, n).astype(np.float32) for c in FEATURE_COLUMNS}})
    y = (rows["arrivals_x10"].to_numpy() + rows["since_arrival_s"].to_numpy() % 3) > 3
    will = {5: WillJobsArrive(5, select="xgboost", n_estimators=15, max_depth=4).fit(rows, y),
            60: WillJobsArrive(60, select="either", n_estimators=9,
                               features=FEATURE_COLUMNS[7:]).fit(rows, y),
            720: WillJobsArrive(720, select="persistence").fit(rows, y)}
    X = pd.DataFrame(rng.integers(0, 10, (n, len(FEATURE_COLUMNS))).astype(float),
                     columns=FEATURE_COLUMNS)
    X.insert(0, "sliding_max", rng.integers(0, 9, n).astype(float))
    load_y = rng.exponential(1.0 + X["sliding_max"].to_numpy())
    loads = {k: NewLoadEstimate("quantile", window_min=k, n_windows=2, n_estimators=10,
                                seed=k).fit(X, load_y) for k in will}
    d = np.full((n, len(DURATION_FEATURES)), np.nan)
    med = rng.choice([100.0, 1000.0, 10000.0, 100000.0], size=n)
    d[:, DURATION_FEATURES.index("pool_count")] = 50.0
    d[:, DURATION_FEATURES.index("pool_median_s")] = med
    duration = JobDuration(n_estimators=10).fit(pd.DataFrame(d, columns=DURATION_FEATURES),
                                                np.searchsorted([300.0, 3600.0, 43200.0], med),
                                                time=np.arange(n, dtype=float))
    duration.lend_risk_ = 0.1
    return LearnedForecaster(will, loads=loads, load_method="quantile", load_windows=2,
                             duration_config={"min_count": 2, "fallback_bin": 2, "quantile": 0.7},
                             duration_model=duration)


def test_forecaster_rebuilt_from_its_bytes_answers_exactly_as_the_original(probe_policy):
    original = _hand_fitted()
    document, boosters = original.to_bytes()
    # data, not pickled code: a JSON document and XGBoost's UBJ bytes
    doc = json.loads(document)
    assert doc["load_method"] == "quantile" and doc["duration_config"]["quantile"] == 0.7
    assert sorted(boosters) == ["job_duration", "new_load/5", "new_load/60", "new_load/720",
                                "will_arrive/5", "will_arrive/60"]
    assert all(isinstance(b, bytes) and b[:1] == b"{" for bs in boosters.values()
               for b in bs.values())
    rebuilt = LearnedForecaster.from_bytes(document, boosters)
    cached = LearnedForecaster.from_bytes(document, boosters, cache_key=("test", id(boosters)))
    again = LearnedForecaster.from_bytes(document, {}, cache_key=("test", id(boosters)))
    assert again.will_arrive[5].booster_ is cached.will_arrive[5].booster_  # decoded once
    windows = (300.0, 3600.0, 43200.0)
    assert rebuilt.lend_risk_at(windows) == again.lend_risk_at(windows) == \
        original.lend_risk_at(windows)
    fcs = (original, rebuilt)
    calls = iter(range(10**6))

    def ask(view):  # every third decision: the answers are what is compared, not their count
        if next(calls) % 3:
            return None
        jobs = np.arange(int(view.n_arrived))
        return [(f.arrival_proba(view, windows), f.will_jobs_arrive(view, windows),
                 f.new_load_estimate(view, windows), f.duration_bins(view, jobs)) for f in fcs]

    jobs, pools = generate_workload("base", 3, days=0.5)
    probe = probe_policy(ask)
    simulate(jobs, pools, probe)
    records = [r for r in probe.records if r is not None]
    assert len(records) > 20
    for want, got in records:
        for a, b in zip(want, got, strict=True):
            np.testing.assert_array_equal(a, b)
    # the answers vary: the boosters, not a constant, decide them
    assert len({r[0][0].tobytes() for r in records}) > 5


def test_unreadable_bytes_are_a_one_line_registry_error():
    document, boosters = _hand_fitted().to_bytes()
    bad = {**boosters, "will_arrive/5": {"main": b"not a booster"}}
    with pytest.raises(RegistryError, match=r"^the shipped predictors cannot be read \(") as info:
        LearnedForecaster.from_bytes(document, bad)
    assert "\n" not in str(info.value)


# ----------------------------------------------------------------------------- from the registry
@pytest.fixture(scope="module")
def client_dir(tmp_path_factory, _mlflow_template_db):
    """A folder holding an MLflow store (``mlflow.db``) with tiny predictors under
    ``champion`` (5 and 60 min windows); MLFLOW_TRACKING_URI names it meanwhile."""
    root = tmp_path_factory.mktemp("shipped")
    folder = root / "client"
    folder.mkdir()
    shutil.copyfile(_mlflow_template_db, folder / "mlflow.db")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{folder / 'mlflow.db'}")
        mp.setenv("SIA_OUTPUT", str(root / "out"))
        assert main([*TRAIN, "--out", str(root / "train")]) == 0
        yield folder


@pytest.mark.slow
def test_resolved_alias_carries_its_models_and_replays_as_the_registry_does(client_dir):
    from sia.pipelines.engine.predictors import resolve_registry

    ref = resolve_registry("champion", (5, 60))
    assert ref.payload is not None and ref.payload.nbytes > 1000
    # the payload is named by its content: the same models give the same digest, others not
    assert resolve_registry("champion", (5, 60)).payload.digest == ref.payload.digest
    changed = ModelPayload(ref.payload.document.replace('"load_windows": 3',
                                                        '"load_windows": 4'), ref.payload.boosters)
    assert changed.document != ref.payload.document and changed.digest != ref.payload.digest
    bare = replace(ref, payload=None)
    # the payload keys nothing: stored replays and resume keys stay as they were
    assert bare == ref and bare.key == ref.key and "payload" not in repr(ref)
    jobs, pools = generate_workload("base", 1, days=5.0)
    wl = FrameWorkload(jobs.filter(pl.col("submit_time") >= 3.5 * 86400.0), pools, "day 3.5-5")
    spec = ReplaySpec(wl, "sia", SIA["options"], predictors=ref)
    assert replace(spec, predictors=bare).key == spec.key
    shipped = run_replay(spec).result  # built from the bytes
    read = run_replay(replace(spec, predictors=bare)).result  # read from the store
    assert shipped.equals(read)
    perfect = run_replay(ReplaySpec(wl, "sia-perfect", SIA["options"])).result
    assert not shipped.equals(perfect)  # the learned predictors did decide something


def _replays(out: Path) -> dict[str, pl.DataFrame]:
    return {str(p.relative_to(out)): pl.read_parquet(p) for p in sorted(out.glob("exp-*/*.parquet"))
            if p.name != "per_job.parquet"}


def _keys(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): json.loads(p.read_text())["key"]
            for p in sorted(out.glob("exp-*/*.done.json"))}


@pytest.mark.slow
def test_learned_sweep_runs_on_dask_workers_that_cannot_see_the_store(client_dir, tmp_path,
                                                                       monkeypatch, capsys):
    """The store is a relative SQLite URI in the client's folder and the worker runs in
    another folder: a worker that opened the store would find (and create) an empty one."""
    from dask.distributed import Client, LocalCluster
    from sia.pipelines.studies import evaluate as ev
    from sia.pipelines.studies.experiment import parse_config

    worker_dir = tmp_path / "worker"
    worker_dir.mkdir()
    monkeypatch.chdir(client_dir)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")  # relative: this folder
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    scattered = []
    scatter = Client.scatter

    def counting_scatter(self, data, *args, **kwargs):
        scattered.append(type(data).__name__)
        return scatter(self, data, *args, **kwargs)

    monkeypatch.setattr(Client, "scatter", counting_scatter)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(os.chdir, str(worker_dir))
        code = main(["evaluate", str(config), "--dask", cluster.scheduler_address,
                     "--out", str(tmp_path / "dask"), "--no-mlflow"])
        assert code == 0, capsys.readouterr().err
        assert set(client.run(os.getcwd).values()) == {str(worker_dir)}
    assert not (worker_dir / "mlflow.db").exists()  # no worker opened a store
    assert scattered == ["ModelPayload"]  # the models went to the cluster once for 2 replays
    # the replays and their keys are the ones an in-process run stores
    ev.run_sweep(parse_config(CONFIG), tmp_path / "inline", progress=False, log_mlflow=False,
                 make_plots=False)
    want, got = _replays(tmp_path / "inline"), _replays(tmp_path / "dask")
    assert sorted(want) == [f"exp-00{i}/{p}.parquet" for i in (0, 1) for p in ("fcfs", "sia")]
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].equals(want[name]), name
    assert _keys(tmp_path / "dask") == _keys(tmp_path / "inline")
