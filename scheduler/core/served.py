"""Predictions as served: how good SIA's predictions were at the moments it used them.

`sia train` scores the predictors offline, on features built from a
no-queue schedule (every job starts at its submission). Inside a replay the
forecaster reads the replay's own history instead, and where a pool queues,
what it knows is older: a queued pool's finished jobs were submitted long
before the jobs waiting now. The offline figures can then be far better than
what the scheduler gets. :class:`ServedPredictions` records, during a replay,
what the policy was told and acted on, and scores it after the fact:

- every forecast made at a periodic tick (the forecasts SIA's online
  adaptation records too): WillJobsArrive [pools, windows] and the
  TotalNewLoad reserved for each (GPUs; NewLoadEstimate where an arrival is
  predicted, else 0). Scored per window ``w`` against the trace: *arrival*
  = a job of the pool submitted in ``(t, t + w]``; precision, recall and F
  of the forecasts, and of persistence (an arrival in ``(t - w, t]``) on the
  same records; the share of records with arrivals whose arrived GPUs
  exceeded the TotalNewLoad (``load_exceeded``), the mean TotalNewLoad and
  the mean arrived GPUs per record;
- every job's duration prediction at its first consideration: the first
  window it may be lent in (``kmin``, K = never) and, for risk-aware lending,
  its P(duration <= w) per window. Scored per window against the true
  duration: the share of the considered jobs that fit ``w``, the share
  lendable in ``w`` (``kmin <= k``) and how many of those overran ``w``, the
  ROC AUC of P(duration <= w) (scikit-learn), and the opportunistic starts
  lent in ``w`` (the window whose duration they had to fit) with their
  overrun rate; on a trace with time limits, those loans split into the ones
  made on a guarantee (the job's limit fits ``w``: ``lent_guaranteed``) and
  the ones made on a prediction (``lent_predicted``), each with its overruns
  (a guaranteed loan overruns only when the job ran past its limit).

- every loan with what it was lent against (:meth:`ServedPredictions.loans`): the job,
  its start, the window whose reservations it was lent under, and that window's
  WillJobsArrive and TotalNewLoad of every pool at the forecast (kept once per
  forecast, not per loan), for the slowdown attribution
  (:mod:`sia.scheduler.core.attribution`).

Scoring reads the trace's future (arrivals after ``t``, true durations),
so nothing here may feed a decision: the policy only writes to the record.
Tick forecasts are scored in chunks of :data:`CHUNK` records as the replay
goes (bounded memory for many pools), from the trace's arrays; the report
(:meth:`ServedPredictions.report`) is JSON-ready.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Tick forecasts kept before they are scored and dropped (bounded memory).
CHUNK = 2048

#: GPUs of tolerance when comparing arrived load with a reserved one.
_EPS = 1e-9


def window_label(w_s: float) -> str:
    """Return a window's label in whole minutes (``"5m"``, ``"60m"``, ``"720m"``)."""
    return f"{round(w_s / 60.0):d}m"


def prf(tp: int, fp: int, fn: int) -> tuple[float | None, float | None, float | None]:
    """Return (precision, recall, F1) from counts; None where a ratio is 0/0."""
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    f = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return p, r, f


def arrivals_in(submit_by_pool: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Return int64 [times, pools]: how many of each pool's submissions fall in ``(lo, hi]``
    (seconds, one bound pair per time). ``submit_by_pool[p]`` holds pool p's submit times,
    sorted."""
    out = np.empty((lo.size, len(submit_by_pool)), dtype=np.int64)
    for p, s in enumerate(submit_by_pool):
        out[:, p] = np.searchsorted(s, hi, side="right") - np.searchsorted(s, lo, side="right")
    return out


def gpus_in(submit_by_pool: list[np.ndarray], gpus_cum_by_pool: list[np.ndarray],
            lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Return float64 [times, pools]: the GPUs of each pool's jobs submitted in ``(lo, hi]``.

    ``gpus_cum_by_pool[p]`` is the running sum of pool p's GPUs in submit
    order, with a leading 0.
    """
    out = np.empty((lo.size, len(submit_by_pool)), dtype=np.float64)
    for p, (s, c) in enumerate(zip(submit_by_pool, gpus_cum_by_pool, strict=True)):
        out[:, p] = (c[np.searchsorted(s, hi, side="right")]
                     - c[np.searchsorted(s, lo, side="right")])
    return out


class ServedPredictions:
    """The record of one replay's predictions as the policy used them (see the module doc).

    Call :meth:`reset` before the replay; the policy calls :meth:`forecast`
    at ticks, :meth:`considered` when it first predicts jobs' durations and
    :meth:`lent` for each opportunistic start; :meth:`report` scores it all.
    """

    def __init__(self, windows_s: tuple[float, ...]):
        self.windows_s = tuple(float(w) for w in windows_s)

    def reset(self, trace: Any) -> None:
        """Forget everything; prepare to record a replay of ``trace`` (a TraceArrays)."""
        self._trace = trace
        K = len(self.windows_s)
        self._sub = [trace.submit[idx] for idx in trace.pool_jobs]
        self._gcum = [np.concatenate(([0.0], np.cumsum(trace.num_gpus[idx], dtype=np.float64)))
                      for idx in trace.pool_jobs]
        self._times: list[float] = []
        self._arrive: list[np.ndarray] = []
        self._load: list[np.ndarray] = []
        # per window: model tp/fp/fn, persistence tp/fp/fn, records, records with arrivals,
        # of those exceeded, sum of reserved load, sum of arrived GPUs
        self._counts = np.zeros((K, 11), dtype=np.float64)
        self._jobs: list[np.ndarray] = []
        self._kmin: list[np.ndarray] = []
        self._cdf: list[np.ndarray] = []
        self._sure = np.full(trace.n_jobs, K, dtype=np.int64)  # first window a limit guarantees
        self._has_sure = False
        self._lent_job: list[int] = []
        self._lent_k: list[int] = []
        # the loans for slowdown attribution: time, reservation window, forecast row; the
        # forecasts they were lent against, kept once per forecast (not per loan)
        self._loan_job: list[int] = []
        self._loan_time: list[float] = []
        self._loan_window: list[int] = []
        self._loan_fc: list[int] = []
        self._fc_time: list[float] = []
        self._fc_arrive: list[np.ndarray] = []
        self._fc_tnl: list[np.ndarray] = []
        self._fc_ref: Any = None
        self._loan_all: list[list[int]] = []  # [loan, pool]: the pool reserved all it had

    def grow(self, trace: Any, n_old: int) -> None:
        """Take the jobs the live service appended to ``trace`` after index ``n_old``: the
        arrivals that later scores count, and no guarantee recorded for them. (Forecasts are
        scored in chunks against the arrivals known then: live, a chunk scored before its
        windows' arrivals were submitted counts fewer of them than a replay's.)"""
        from sia.data.growth import reserve

        new_pools = set(trace.pool[n_old:].tolist())
        for p in new_pools:
            idx = trace.pool_jobs[p]
            self._sub[p] = trace.submit[idx]
            self._gcum[p] = np.concatenate(([0.0], np.cumsum(trace.num_gpus[idx],
                                                             dtype=np.float64)))
        self._sure = reserve(self._sure, trace.n_jobs, len(self.windows_s))

    # ------------------------------------------------------------------ recording
    def forecast(self, now: float, arrive: np.ndarray, total_new_load: np.ndarray) -> None:
        """Record a tick's forecast: WillJobsArrive and TotalNewLoad, both [pools, windows]."""
        self._times.append(float(now))
        self._arrive.append(np.array(arrive, dtype=bool))
        self._load.append(np.array(total_new_load, dtype=np.float32))
        if len(self._times) >= CHUNK:
            self._score_forecasts()

    def considered(self, jobs: np.ndarray, kmin: np.ndarray, cdf: np.ndarray | None,
                   guaranteed: np.ndarray | None = None) -> None:
        """Record jobs' first duration predictions: first lendable window index (K = never),
        when the policy lends by risk P(duration <= w) [jobs, windows], and when their time
        limits are used the first window each limit guarantees (K = none)."""
        if guaranteed is not None:
            self._sure[np.asarray(jobs, dtype=np.int64)] = guaranteed
            self._has_sure = True
        self._jobs.append(np.array(jobs, dtype=np.int64))
        self._kmin.append(np.array(kmin, dtype=np.int64))
        K = len(self.windows_s)
        self._cdf.append(np.full((len(jobs), K), np.nan) if cdf is None
                         else np.array(cdf, dtype=np.float64).reshape(len(jobs), K))

    def lent(self, job: int, k: int, window: int | None = None, now: float | None = None,
             forecast_time: float | None = None, arrive: Any = None,
             total_new_load: Any = None, distrust: Any = None) -> None:
        """Record an opportunistic start of ``job`` whose duration had to fit window ``k``.

        For slowdown attribution (:meth:`loans`), also: the start time ``now`` (s), the
        reservation window ``window`` it was lent in (index; default ``k``), and the forecast it
        was lent against: its time (s), WillJobsArrive [pools, windows] and TotalNewLoad per
        window and pool ([windows][pools], as the policy keeps it). The forecast is copied once,
        at the first loan against it (recognized by the identity of ``total_new_load``: the
        policy replaces that object at each forecast), so a loan costs a few appends.
        ``distrust`` ([pools][windows] or None): the pools the online adaptation distrusted,
        which reserved their whole unused quota in the window instead of the forecast.
        """
        self._lent_job.append(int(job))
        self._lent_k.append(int(k))
        if now is None or total_new_load is None:
            return
        if total_new_load is not self._fc_ref:
            self._fc_ref = total_new_load
            self._fc_time.append(float(forecast_time if forecast_time is not None else now))
            self._fc_arrive.append(np.array(arrive, dtype=bool))
            self._fc_tnl.append(np.array(total_new_load, dtype=np.float64).T)  # [pools, windows]
        self._loan_job.append(int(job))
        self._loan_time.append(float(now))
        self._loan_window.append(int(k if window is None else window))
        self._loan_fc.append(len(self._fc_time) - 1)
        if distrust is not None:
            kk = int(k if window is None else window)
            i = len(self._loan_job) - 1
            self._loan_all.extend([i, q] for q, row in enumerate(distrust) if row[kk])

    # ------------------------------------------------------------------ scoring
    def _score_forecasts(self) -> None:
        """Score the recorded tick forecasts against the trace, add them to the counts, drop them."""
        if not self._times:
            return
        t = np.asarray(self._times)
        arrive = np.stack(self._arrive)  # [records, pools, windows]
        load = np.stack(self._load).astype(np.float64)
        R, P, _ = arrive.shape
        for k, w in enumerate(self.windows_s):
            got = arrivals_in(self._sub, t, t + w) > 0
            before = arrivals_in(self._sub, t - w, t) > 0
            gpus = gpus_in(self._sub, self._gcum, t, t + w)
            pred = arrive[:, :, k]
            res = load[:, :, k]
            c = self._counts[k]
            c[0] += np.sum(pred & got)
            c[1] += np.sum(pred & ~got)
            c[2] += np.sum(~pred & got)
            c[3] += np.sum(before & got)
            c[4] += np.sum(before & ~got)
            c[5] += np.sum(~before & got)
            c[6] += R * P
            c[7] += np.sum(got)
            c[8] += np.sum(got & (gpus > res + _EPS))
            c[9] += float(res.sum())
            c[10] += float(gpus.sum())
        self._times, self._arrive, self._load = [], [], []

    def _arrivals_report(self) -> dict[str, Any]:
        self._score_forecasts()
        out: dict[str, Any] = {}
        for k, w in enumerate(self.windows_s):
            c = self._counts[k]
            if not c[6]:
                continue
            p, r, f = prf(int(c[0]), int(c[1]), int(c[2]))
            _, _, pf = prf(int(c[3]), int(c[4]), int(c[5]))
            out[window_label(w)] = {
                "records": int(c[6]), "precision": p, "recall": r, "f1": f,
                "persistence_f1": pf,
                "load_exceeded": (c[8] / c[7]) if c[7] else None,
                "load_mean_gpus": c[9] / c[6], "arrived_mean_gpus": c[10] / c[6],
            }
        return out

    def _durations_report(self) -> dict[str, Any]:
        if not self._jobs:
            return {}
        from sklearn.metrics import roc_auc_score

        jobs = np.concatenate(self._jobs)
        kmin = np.concatenate(self._kmin)
        cdf = np.concatenate(self._cdf)
        d = self._trace.duration[jobs]
        lent_job = np.asarray(self._lent_job, dtype=np.int64)
        lent_k = np.asarray(self._lent_k, dtype=np.int64)
        out: dict[str, Any] = {}
        for k, w in enumerate(self.windows_s):
            fit = d <= w
            lendable = kmin <= k
            p = cdf[:, k]
            ok = ~np.isnan(p)
            auc = (float(roc_auc_score(fit[ok], p[ok]))
                   if ok.any() and 0 < int(fit[ok].sum()) < int(ok.sum()) else None)
            mine = lent_k == k
            lent_over = self._trace.duration[lent_job[mine]] > w
            row = {
                "jobs": int(jobs.size), "fit": float(fit.mean()),
                "lendable": float(lendable.mean()),
                "lendable_overrun": float((~fit[lendable]).mean()) if lendable.any() else None,
                "fit_lendable": float(lendable[fit].mean()) if fit.any() else None,
                "auc": auc,
                "lent": int(mine.sum()),
                "lent_overrun": float(lent_over.mean()) if mine.any() else None,
            }
            if self._has_sure:
                sure = self._sure[lent_job[mine]] <= k
                row.update({
                    "guaranteed": float((self._sure[jobs] <= k).mean()),
                    "lent_guaranteed": int(sure.sum()),
                    "lent_guaranteed_overruns": int((lent_over & sure).sum()),
                    "lent_predicted": int((~sure).sum()),
                    "lent_predicted_overruns": int((lent_over & ~sure).sum()),
                })
            out[window_label(w)] = row
        return out

    def loans(self) -> dict[str, Any] | None:
        """Return the loans recorded with their forecasts (JSON-ready), or None when no loan
        carried one: ``job`` (job ids), ``time`` (start, s), ``window_s`` (the reservation
        window, s), ``forecast`` (row of the forecast lent against), ``pools`` (pool names in
        the forecasts' order), ``forecast_time`` (s), ``will_arrive`` [forecasts][pools]
        (0/1) and ``total_new_load`` [forecasts][pools] (GPUs), both in the loan's window
        (a forecast's rows hold the window of its loans; one row per forecast and window),
        ``reserved_all``: [loan, pool index] pairs of the pools that reserved their whole
        unused quota for that loan (distrusted by the online adaptation)."""
        if not self._loan_time:
            return None
        trace = self._trace
        # one row per (forecast, window) actually used by a loan
        rows: dict[tuple[int, int], int] = {}
        for f, k in zip(self._loan_fc, self._loan_window, strict=True):
            rows.setdefault((f, k), len(rows))
        pairs = list(rows)
        return {
            "job": [str(trace.job_ids[j]) for j in self._loan_job],
            "time": list(self._loan_time),
            "window_s": [self.windows_s[k] for k in self._loan_window],
            "forecast": [rows[(f, k)] for f, k in zip(self._loan_fc, self._loan_window,
                                                        strict=True)],
            "pools": list(trace.pool_names),
            "forecast_time": [self._fc_time[f] for f, _ in pairs],
            "will_arrive": [self._fc_arrive[f][:, k].astype(int).tolist() for f, k in pairs],
            "total_new_load": [self._fc_tnl[f][:, k].tolist() for f, k in pairs],
            "reserved_all": [list(x) for x in self._loan_all],
        }

    def report(self) -> dict[str, Any]:
        """Return the scores (JSON-ready): ``will_arrive`` and ``job_duration``, each per window
        label; a section is empty when nothing of its kind was recorded."""
        return {"will_arrive": self._arrivals_report(),
                "job_duration": self._durations_report()}


def flat_metrics(served: dict[str, Any] | None) -> dict[str, float]:
    """Return the served scores as MLflow metric names (``served/will_arrive/f1_5m`` ...),
    finite numbers only."""
    out: dict[str, float] = {}
    for section, by_window in (served or {}).items():
        for label, scores in (by_window or {}).items():
            for name, v in (scores or {}).items():
                if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                    out[f"served/{section}/{name}_{label}"] = float(v)
    return out
