"""How replays and sweeps appear in MLflow (DESIGN.md 5.4, issue 16): comparable across policies.

One run per (experiment, policy), with ``policy`` as a parameter, so MLflow's
compare and parallel-coordinates views line policies up; metric names carry
no policy and are grouped by what they measure (``speedup/mean``,
``slowdown/total_min``, ``cells/preemptions``); the FCFS baseline's own
values sit under ``baseline/``; the exact registered model versions a
learned policy used are parameters (``model.<registered name>``) and tags;
SIA's predictions as it used them are under ``served/`` (``served/will_arrive/f1_60m``,
``served/job_duration/lendable_overrun_5m`` ...; :mod:`sia.scheduler.core.served`); why
the per-pool calibration of its arrival side (when on) under ``calib/`` (``calib/<pool>/
threshold_5m``, ``calib/<pool>/load_offset_gpus_60m``, ``calib/<pool>/precision_720m``, the
days it covered ``calib/from_day`` and ``calib/to_day``; :mod:`sia.models.calibration`); why
its jobs were slowed under ``slowdown_cause/`` (``slowdown_cause/duration_min`` ...;
:mod:`sia.pipelines.studies.slowdown_report`).

The headline metrics, ``speedup/*`` and ``slowdown/*``, sort first in MLflow's compare
view, which lists metrics by name: every other metric is logged under :data:`DETAIL_PREFIX`
(``stats/served/will_arrive/f1_60m``, ``stats/baseline/utilization``,
``stats/slowdown_cause/duration_min``; issue 36: the about 50 ``served/`` rows sorted before
the headline). The headline names did not change, so runs logged before compare with new
ones on them; :func:`detail_name` maps an older detail name to the current one.
The store is set up by :mod:`sia.pipelines.tracking`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from sia.pipelines.studies.slowdown_report import cause_metrics
from sia.scheduler.core.served import flat_metrics

#: summary key of :func:`sia.pipelines.engine.score` -> MLflow metric name
METRIC_NAMES = {
    "n_jobs": "jobs/scored",
    "mean_speedup": "speedup/mean",
    "geomean_speedup": "speedup/geomean",
    "p5_speedup": "speedup/p5",
    "p95_speedup": "speedup/p95",
    "pct_slowed": "slowdown/pct_jobs",
    "total_slowdown_min": "slowdown/total_min",
    "max_slowdown_min": "slowdown/max_min",
    "utilization": "utilization",
    "mean_queue_delay_s": "queue_delay/mean_s",
    "utilization_baseline": "baseline/utilization",
    "mean_queue_delay_baseline_s": "baseline/queue_delay/mean_s",
}
#: placement counters of a cell replay logged under ``cells/`` (and ``baseline/cells/``)
CELLS_METRICS = ("preemptions", "preempted_jobs", "migrations", "migrated_jobs",
                 "placed_fallback", "fragmentation", "adoptions")


def _finite(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(float(v)) else None


#: the metrics a user compares policies on: their names sort first (and are never prefixed)
HEADLINE_PREFIXES = ("speedup/", "slowdown/")
#: the prefix of every other metric: it sorts after the headline groups
DETAIL_PREFIX = "stats/"


def detail_name(name: str) -> str:
    """Return the logged name of metric ``name``: a headline one as it is, any other under
    :data:`DETAIL_PREFIX` (idempotent)."""
    if name.startswith(HEADLINE_PREFIXES) or name.startswith(DETAIL_PREFIX):
        return name
    return DETAIL_PREFIX + name


def policy_metrics(summary: Mapping[str, Any], cells: Mapping[str, Any] | None = None,
                   baseline_cells: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Return the MLflow metrics of one policy's scored replay (names: :data:`METRIC_NAMES`;
    ``cells``: its placement counters, ``baseline_cells``: the baseline's), finite values only;
    the headline ones first, every other under :data:`DETAIL_PREFIX` (:func:`detail_name`)."""
    out = {}
    for key, name in METRIC_NAMES.items():
        v = _finite(summary.get(key))
        if v is not None:
            out[name] = v
    for prefix, counters in (("cells/", cells), ("baseline/cells/", baseline_cells)):
        for m in CELLS_METRICS:
            v = _finite((counters or {}).get(m))
            if v is not None:
                out[prefix + m] = v
    out.update(flat_metrics(summary.get("served")))
    out.update(cause_metrics(summary.get("slowdown_causes")))
    out.update(calibration_metrics(summary.get("calibration")))
    renamed = {detail_name(k): v for k, v in out.items()}
    return dict(sorted(renamed.items()))


#: what :func:`calibration_metrics` logs per pool and window
CALIBRATION_FIELDS = ("threshold", "load_offset_gpus", "precision", "recall", "positives",
                      "load_scores")


def calibration_metrics(report: Mapping[str, Any] | None) -> dict[str, float]:
    """Return the MLflow metrics of a per-pool calibration report
    (:meth:`sia.models.calibration.PoolCalibration.report`), finite values only: per pool
    ``calib/<pool>/<field>_<window>`` and the days calibrated, ``calib/from_day``/``to_day``."""
    if not report:
        return {}
    out = {}
    for key in ("from_day", "to_day"):
        v = _finite(report.get(key))
        if v is not None:
            out[f"calib/{key}"] = v
    for pool, wins in (report.get("pools") or {}).items():
        safe = re.sub(r"[^\w\-. /]", "_", str(pool))
        for win, fields in wins.items():
            for f in CALIBRATION_FIELDS:
                v = _finite(fields.get(f))
                if v is not None:
                    out[f"calib/{safe}/{f}_{win}"] = v
    return out


def model_params(versions: Mapping[str, str] | None) -> dict[str, str]:
    """Return ``{"model.<registered name>": version}`` for the models a policy used."""
    return {f"model.{name}": str(v) for name, v in (versions or {}).items()}


def log_policy_run(run_name: str, params: Mapping[str, Any], metrics: Mapping[str, float],
                   tags: Mapping[str, str], *, nested: bool = True,
                   artifacts: Mapping[str, Any] | None = None) -> str:
    """Log one run (nested under the active run when ``nested``); return its id.

    ``params`` values are cut to MLflow's 500 characters; ``artifacts`` maps a
    folder in the run to a list of files. Against a server the run's logging has a total
    deadline (:func:`sia.pipelines.tracking.deadline`).
    """
    import mlflow
    from sia.pipelines.tracking import deadline

    with deadline(f"logging the run {run_name!r}", uploads=bool(artifacts)), \
            mlflow.start_run(run_name=run_name, nested=nested, tags=dict(tags)) as run:
        mlflow.log_params({k: str(v)[:500] for k, v in params.items()})
        if metrics:
            mlflow.log_metrics(dict(metrics))
        for folder, files in (artifacts or {}).items():
            for f in files:
                mlflow.log_artifact(str(f), artifact_path=folder)
        return run.info.run_id
