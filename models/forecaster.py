"""LearnedForecaster: the registered predictors behind the scheduler's forecasting protocol.

Implements :class:`sia.scheduler.forecast.Forecaster` (structurally) with the
models of the MLflow registry (loaded by name and alias, see
:mod:`sia.models.registry`). Every call is batched over all pools:

- ``will_jobs_arrive``: the Table 9 features of every pool at ``view.now``
  (the incremental builder :class:`sia.features.incremental.IncrementalTable9`,
  fed from the view: a few vectorized ``searchsorted`` calls over all pools at
  once; the same values as the batch table, which the tests check), then one
  XGBoost call per window over all pools, thresholded at the model's
  registered threshold;
- ``new_load_estimate``: SIA's sliding max over the last ``load_windows``
  windows (``load_method="sliding_max"``), or the registered
  :class:`~sia.models.new_load.NewLoadEstimate` of each window
  (``"calibrated"``: the rescaled sliding max; ``"quantile"``: the XGBoost
  quantile regressor on the sliding max and the Table 9 features at now;
  ``"registered"``: whichever method each window registered);
- ``duration_bins``: the bin of the point-in-time history median (same tag,
  then same pool and GPU count, then same pool), or of the registered
  ``quantile`` of it (default 0.5, the median), kept up to date from the
  view's completions; the registered fallback bin when there is no history.
  Running jobs' expected ends (a feature) always use the median, as in training.

Per-call cost (the forecaster is asked at every SIA decision): the state
absorbed from the view is keyed by (arrived, completed, running) counts, so
a call that finds nothing new costs a few lookups; completions go into
per-pool segments of one preallocated sorted array (no reallocation); the
duration history keeps each group sorted with an O(1) median
(:class:`~sia.models.job_duration.SortedHistory`); the count features of all
windows come from two ``searchsorted`` calls per event kind. What remains is
mostly XGBoost's fixed cost per ``inplace_predict`` call (one per window per
forecast).

Everything is point in time: only arrivals with submit <= now, completions
the view reports, and running jobs' expected ends (start + the history median
of jobs finished by the forecaster's previous call; when it is called at every
decision, that is exactly the history at the job's start; +inf when unknown).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from sia.data.errors import ConfigError, SiaError
from sia.data.forecast_view import ForecastView, TraceView
from sia.data.growth import reserve
from sia.data.schema import TIME_LIMIT_GRACE_S
from sia.data.windows import (
    DURATION_BIN_EDGES_S,
    cdf_from_bins,
    duration_bin_of,
    limit_certain,
    sliding_max_load,
)
from sia.features.held import HeldJobs
from sia.features.incremental import IncrementalTable9
from sia.features.table9 import FEATURE_COLUMNS
from sia.models import registry
from sia.models.calibration import (
    DEFAULT_ALPHA,
    DEFAULT_MEMORY,
    DEFAULT_PRIOR_DAYS,
    PoolCalibration,
)
from sia.models.job_duration import (
    DEFAULT_QUANTILE,
    N_BINS,
    JobDuration,
    OnlineDurationHistory,
    OnlineSubmissionFeatures,
    cdf_at_windows,
    check_quantile,
    lend_risk_for_windows,
    predict_bins,
)
from sia.models.new_load import NewLoadEstimate
from sia.models.started_history import StartedLookAlikes, cap_cdf
from sia.models.will_arrive import PERSISTENCE_COLUMN, WillJobsArrive

if TYPE_CHECKING:
    import polars as pl

_PERSIST = FEATURE_COLUMNS.index(PERSISTENCE_COLUMN)
#: The calibration's rank of a window that persistence says "no" to in a pool whose queue holds
#: jobs not yet eligible (:meth:`LearnedForecaster.calibrate`'s ``held``): between persistence's
#: no (0) and yes (1), below its decision threshold (0.5), so only a calibrated threshold
#: reads it. Its value does not matter, only its rank.
HELD_RANK = 0.25


#: Models read by :meth:`LearnedForecaster.from_registry` (per store, alias and versions) and
#: decoded by :meth:`LearnedForecaster.from_bytes` (per cache key).
_LOADED: dict[tuple, tuple] = {}


class _BoosterCalls:
    """Stand-in for a StackedForest: one ``inplace_predict`` call per booster (any model)."""

    def __init__(self, boosters: Sequence[Any]):
        self.boosters = list(boosters)
        for b in self.boosters:
            if hasattr(b, "set_param"):
                b.set_param({"nthread": 1})  # a tick predicts a few rows

    def predict_proba(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        """Return [n_models, n_rows] P(arrival)."""
        return np.stack([b.inplace_predict(x, validate_features=False)
                         for b, x in zip(self.boosters, blocks, strict=True)])


class LearnedForecaster:
    """The learned predictors behind the forecasting protocol (see the module doc)."""

    name = "learned"
    perfect_information = False

    def __init__(
        self,
        will_arrive: dict[int, WillJobsArrive],
        *,
        loads: dict[int, NewLoadEstimate] | None = None,
        load_method: str = "sliding_max",
        load_windows: int = 3,
        duration_config: dict[str, Any] | None = None,
        duration_model: JobDuration | None = None,
    ):
        if load_method not in ("sliding_max", "calibrated", "quantile", "registered"):
            raise ValueError("load_method must be 'sliding_max', 'calibrated', 'quantile' or "
                             f"'registered', not {load_method!r}")
        if load_method != "sliding_max" and not loads:
            raise ValueError(f"load_method={load_method!r} needs a NewLoadEstimate per window")
        for k, est in (loads or {}).items():
            if load_method in ("calibrated", "quantile") and est.method != load_method:
                raise registry.RegistryError(
                    f"the NewLoadEstimate for {k} min is method {est.method!r}, not "
                    f"{load_method!r}: pass load_method={est.method!r} or register one with "
                    f"`sia train --load-method {load_method}`")
        self.will_arrive = dict(will_arrive)
        self.loads = dict(loads or {})
        self.load_method = load_method
        self.load_windows = int(load_windows)
        cfg = duration_config or {}
        self.fallback_bin = int(cfg.get("fallback_bin", N_BINS - 1))
        # configs registered before the quantile existed mean the median
        self.duration_quantile = check_quantile(cfg.get("quantile", DEFAULT_QUANTILE),
                                                "JobDuration quantile")
        self.history = OnlineDurationHistory(int(cfg.get("min_count", 3)))
        # the learned JobDuration (None: the paper's history rule above answers alone)
        self.duration_model = (duration_model if duration_model is None
                               or duration_model.method != "history" else None)
        #: the learned JobDuration reads the time-limit features (JobDuration.limits)
        self._limits = bool(getattr(self.duration_model, "limits", False))
        self._submissions = OnlineSubmissionFeatures(limits=self._limits)
        #: cap P(duration <= edge) by the similar jobs' last starts (JobDuration.started_cap)
        self.censor_cap = bool(getattr(self.duration_model, "started_cap", False))
        # the cap's chain follows the model's look-alike levels (with or without the tag)
        self._use_tag = bool(getattr(self.duration_model, "history_tag", True))
        self._started = StartedLookAlikes(use_tag=self._use_tag)
        #: the registered JobDuration's eps for SIA's risk-aware lending: one per bin edge, or
        #: one for all (see lend_risk_at); None: SIA lends by the bin rule
        self._lend_risk = (None if self.duration_model is None
                           else getattr(self.duration_model, "lend_risk_", None))
        self._trace_id: int | None = None
        self._forests: dict[tuple[int, ...], tuple[Any, list[np.ndarray]]] = {}
        #: per-pool online calibration of arrivals and load (:meth:`calibrate`); None: off
        self.calibration: PoolCalibration | None = None
        self._calib_trace: int | None = None
        self._calib_held = False
        self._held: HeldJobs | None = None
        self._prior_jobs: pl.DataFrame | None = None

    def prime(self, prior: pl.DataFrame | None) -> LearnedForecaster:
        """Start every replay with the jobs that finished before it (returns self).

        ``prior``: the jobs submitted before the replay (``pool``,
        ``num_gpus``, ``submit_time``, ``duration``, optional ``tag``), e.g.
        the trace before the replay window; None forgets them. JobDuration's
        history (its look-alikes' shares and medians) otherwise starts empty
        at the replay's first job, as on a cluster that just opened; a
        cluster that has been running knows its finished jobs. Only jobs
        finished by the replay's first submission count
        (:func:`~sia.models.job_duration.prior_completions`).
        """
        if prior is not None:
            missing = [c for c in ("pool", "num_gpus", "submit_time", "duration")
                       if c not in prior.columns]
            if missing:
                raise ValueError(f"LearnedForecaster.prime: the prior jobs lack column(s) "
                                 f"{missing}")
        self.history = OnlineDurationHistory(self.history.min_count, prior)
        self._prior_jobs = prior
        self._calib_trace = None
        self._submissions = OnlineSubmissionFeatures(prior, limits=self._limits)
        self._started = StartedLookAlikes(prior=prior, use_tag=self._use_tag)
        self._trace_id = None
        return self

    def last_submit_s(self, pool_names: Sequence[str]) -> np.ndarray:
        """Return float [n_pools]: each pool's last submission in the prior history
        (:meth:`prime`; s on the replay's clock), NaN for a pool it does not hold or with no
        prior at all (:func:`last_submissions`)."""
        return last_submissions(self._prior_jobs, pool_names)

    def last_width(self, pool_names: Sequence[str]) -> np.ndarray:
        """Return float [n_pools]: the GPUs of each pool's last submitted job in the prior
        history (:meth:`prime`), NaN for a pool it does not hold or with no prior at all."""
        return last_submissions(self._prior_jobs, pool_names, "num_gpus")

    def calibrate(self, windows_s: Sequence[float], *, alpha: float = DEFAULT_ALPHA,
                  memory: int = DEFAULT_MEMORY, prior_days: float = DEFAULT_PRIOR_DAYS,
                  parts: str = "both", cold: str = "reserve", floor: bool = False,
                  held: bool = False, name: str = "sia") -> LearnedForecaster:
        """Calibrate WillJobsArrive and NewLoadEstimate per pool, online (returns self).

        From now on :meth:`will_jobs_arrive` thresholds each pool at its own
        conformal recall threshold and :meth:`new_load_estimate` answers the
        pool's conformal upper bound over the sliding max of ``load_windows``
        windows (whatever the load method), both at miss rate ``alpha`` from the
        last ``memory`` records of the pool, scored only once their window has
        passed (:class:`~sia.models.calibration.PoolCalibration`); the load
        bounds start from the primed jobs of the last ``prior_days`` days.
        ``parts``: ``"both"``, ``"arrivals"`` or ``"load"`` (the other keeps the
        registered rule). ``cold``: what a pool too cold for a bound answers (``"reserve"``:
        an infinite load bound and every window "yes"; ``"registered"``: the uncalibrated
        answers). ``floor``: never answer below the registered rule (a "yes" of the registered
        threshold stays a "yes"; the load bound is at least the registered estimate), so the
        calibration can only add to SIA's reservations (the risk budget's ``risk_mode: veto``);
        the registered answers of the last call are then kept in :attr:`registered_arrive` and
        :attr:`registered_load` (SIA's online adaptation scores those, as without calibration).
        ``held``: in a window whose registered predictor is persistence, a pool whose queue
        holds jobs not yet eligible (the trace's ``hold_time``, :mod:`sia.features.held`) ranks
        between persistence's no and yes (:data:`HELD_RANK`), so a pool whose arrivals
        persistence misses but its held jobs foretell gets a threshold above 0 (a "yes" while
        it holds jobs or one arrived lately) instead of a "yes" in every window; the registered
        answers do not change. Raises :class:`~sia.data.errors.ConfigError` on a bad option.
        """
        if parts not in ("both", "arrivals", "load"):
            raise ConfigError(f"policy {name!r}: calibration must be true/'both', 'arrivals' "
                              f"or 'load', not {parts!r}")
        self._calib_arrivals = parts in ("both", "arrivals")
        self._calib_load = parts in ("both", "load")
        self._calib_floor = bool(floor)
        self._calib_held = bool(held)
        self.calibration = PoolCalibration(windows_s, n_windows=self.load_windows, alpha=alpha,
                                           memory=memory, prior_days=prior_days, cold=cold,
                                           name=name)
        self._calib_trace = None
        return self

    def _calibrated(self, view: ForecastView) -> PoolCalibration:
        """Return the calibration, reset for ``view``'s trace when it is a new one."""
        cal = self.calibration
        trace = view.trace
        if self._calib_trace != id(trace):
            self._calib_trace = id(trace)
            prior = self._prior_jobs
            if prior is not None and prior.height:
                cal.prime(prior["submit_time"].to_numpy(), prior["num_gpus"].to_numpy(),
                          prior["pool"].cast(str).to_list())
            start = float(trace.submit[0]) if trace.n_jobs else 0.0
            cal.reset(trace.pool_names, start)
        return cal

    def set_pool_alpha(self, alpha: Sequence[float] | np.ndarray | None) -> None:
        """Give each pool its own miss rate in the calibration (see :meth:`calibrate`) from the
        next answer on (:meth:`~sia.models.calibration.PoolCalibration.set_pool_alpha`; None:
        the calibration's one rate). Raises SiaError when the forecaster is not calibrated."""
        if self.calibration is None:
            raise SiaError("per-pool miss rates need a calibrated forecaster (calibrate first)")
        self.calibration.set_pool_alpha(alpha)

    def calibration_report(self) -> dict[str, Any] | None:
        """Return what the per-pool calibration holds now, per pool and window (None: off)."""
        if self.calibration is None or self._calib_trace is None:
            return None
        return self.calibration.report(self.calibration.pool_names)

    def lend_risk_at(self, windows_s: Sequence[float]) -> list[float] | None:
        """Return eps per scheduling window for SIA's risk-aware lending (``lend_risk="auto"``).

        A window takes the eps of the largest duration-bin edge <= it
        (:func:`~sia.models.job_duration.lend_risk_for_windows`); None when the
        JobDuration chose none (SIA then lends by the bin rule).
        """
        if self._lend_risk is None:
            return None
        return lend_risk_for_windows(self._lend_risk, windows_s).tolist()

    @classmethod
    def from_registry(cls, windows_min: Sequence[int] = (5, 60, 720), alias: str = "champion",
                      *, load_method: str = "sliding_max", load_windows: int = 3,
                      tracking_uri: str | None = None) -> LearnedForecaster:
        """Return a forecaster with the models registered under ``alias`` for each window.

        ``tracking_uri`` (default: MLflow's current one) names the store. The
        models are read once per process and per registered version (a
        retraining under the same alias is read anew); every forecaster gets
        its own state. Raises :class:`~sia.models.registry.RegistryError` when
        a model is missing.
        """
        import mlflow

        if tracking_uri:
            mlflow.set_tracking_uri(tracking_uri)
            mlflow.set_registry_uri(tracking_uri)
        ks = tuple(int(k) for k in windows_min)
        names = [registry.will_arrive_name(k) for k in ks] + [registry.JOB_DURATION_NAME]
        if load_method != "sliding_max":
            names += [registry.new_load_name(k) for k in ks]
        versions = tuple(str(registry.version_of(n, alias).version) for n in names)
        key = (mlflow.get_tracking_uri(), alias, ks, load_method, versions)
        if key not in _LOADED:
            _LOADED[key] = (
                {k: registry.load_will_arrive(k, alias) for k in ks},
                ({k: registry.load_new_load(k, alias) for k in ks}
                 if load_method != "sliding_max" else None),
                registry.load_job_duration(alias), registry.load_job_duration_model(alias))
        models, loads, duration_config, duration_model = _LOADED[key]
        return cls(models, loads=loads, load_method=load_method, load_windows=load_windows,
                   duration_config=duration_config, duration_model=duration_model)

    def to_bytes(self) -> tuple[str, dict[str, dict[str, bytes]]]:
        """Return the forecaster as data, no pickled code: (a JSON document, the boosters).

        The document holds each model's ``to_artifacts`` parameters (WillJobsArrive
        per window, NewLoadEstimate per window when the load method uses them, the
        learned JobDuration), the load method and windows and the duration rule;
        the boosters are XGBoost's own UBJ bytes, by model (``will_arrive/<k>``,
        ``new_load/<k>``, ``job_duration``) then booster name, as the registry
        stores them. :meth:`from_bytes` rebuilds an equal forecaster.
        """
        boosters: dict[str, dict[str, bytes]] = {}

        def part(where: str, model: Any) -> dict[str, Any] | None:
            if model is None:
                return None
            params, bst = model.to_artifacts()
            if bst:
                boosters[where] = {n: bytes(b.save_raw("ubj")) for n, b in bst.items()}
            return params

        doc = {"will_arrive": {str(k): part(f"will_arrive/{k}", m)
                               for k, m in self.will_arrive.items()},
               "loads": {str(k): part(f"new_load/{k}", m) for k, m in self.loads.items()},
               "load_method": self.load_method, "load_windows": self.load_windows,
               "duration_config": {"fallback_bin": self.fallback_bin,
                                   "quantile": self.duration_quantile,
                                   "min_count": self.history.min_count},
               "duration_model": part("job_duration", self.duration_model)}
        return json.dumps(doc), boosters

    @classmethod
    def from_bytes(cls, document: str, boosters: dict[str, dict[str, bytes]], *,
                   cache_key: tuple | None = None) -> LearnedForecaster:
        """Return the forecaster :meth:`to_bytes` gave (``document``, ``boosters``), with fresh state.

        Touches no MLflow store. ``cache_key`` (e.g. the store, alias and
        versions the bytes came from) keeps the decoded models for the
        process, as :meth:`from_registry` does. Raises
        :class:`~sia.models.registry.RegistryError` when the bytes are not a
        forecaster this version reads.
        """
        key = None if cache_key is None else ("bytes", *cache_key)
        parts = None if key is None else _LOADED.get(key)
        if parts is None:
            try:
                parts = _decode(json.loads(document), boosters)
            except (ValueError, KeyError, TypeError) as exc:
                first = (str(exc).strip().splitlines() or [""])[0]  # XGBoost adds a stack trace
                raise registry.RegistryError(f"the shipped predictors cannot be read "
                                             f"({type(exc).__name__}: {first})") from None
            if key is not None:
                _LOADED[key] = parts
        models, loads, duration_config, duration_model, load_method, load_windows = parts
        return cls(models, loads=loads, load_method=load_method, load_windows=load_windows,
                   duration_config=duration_config, duration_model=duration_model)

    # ----------------------------------------------------------------- state from the view
    def _reset(self, trace: TraceView) -> None:
        self._trace_id = id(trace)
        lo = float(trace.submit.min()) - 1.0 if trace.n_jobs else -1.0
        hi = float(trace.submit.max()) if trace.n_jobs else 0.0
        span = hi - lo + 2.0 + 1e9  # room for completions long after the last submission
        # jobs the live service appends later (grow) keep half that room for their completions
        self._room_until = hi + 5e8
        self._table9 = IncrementalTable9(trace.n_pools, lo, span,
                                         np.bincount(trace.pool, minlength=trace.n_pools))
        self._table9.add_arrivals(trace.pool, trace.submit)
        self._pending: list[tuple[int, np.ndarray]] = []  # completions not yet in the keys
        self._seen = [0] * trace.n_pools
        self._expected_end = np.full(trace.n_jobs, np.nan)
        self._pool_index = np.arange(trace.n_pools)
        self._state_key: tuple[int, int, int] | None = None
        hold = getattr(trace, "hold", None)  # (a trace without held jobs has None)
        n = 0 if hold is None else hold.size
        self._held = (None if hold is None else
                      HeldJobs(trace.submit[:n], hold, trace.pool[:n], trace.num_gpus[:n],
                               trace.n_pools))

    def grow(self, trace: TraceView, n_old: int) -> bool:
        """Take the jobs the live service appended to ``trace`` after index ``n_old`` (none has
        arrived; `sia serve`'s growing arrays): their submissions join the Table 9 arrivals
        (counted only once they are past, as every submission is), and the per-job state of
        JobDuration's features, its look-alikes and the expected ends makes room for them, as
        a replay that held them from the start would have. False (the service then rebuilds)
        when their times fall past the room the feature keys were laid out with."""
        if self._trace_id == id(trace):
            if float(trace.submit[-1]) > self._room_until:
                return False
            new_pool, new_submit = trace.pool[n_old:], trace.submit[n_old:]
            self._table9.add_arrivals(new_pool, new_submit)
            self._table9.completions.reserve(np.bincount(trace.pool, minlength=trace.n_pools))
            self._expected_end = reserve(self._expected_end, trace.n_jobs, np.nan)
        self._submissions.grow(trace, n_old)
        self._started.grow(trace, n_old)
        return True

    def _sync(self, view: ForecastView) -> None:
        """Absorb completions and newly running jobs since the last call.

        Cheap when nothing changed: the state is keyed by (jobs arrived, jobs
        completed, jobs running); arrivals and completions only grow and
        every start raises running + completed, so an unchanged key means an
        unchanged running set and history. Completions are buffered here and
        merged into the sorted keys only when features are asked for.
        """
        trace = view.trace
        if self._trace_id != id(trace):
            self._reset(trace)
            self.history = OnlineDurationHistory(self.history.min_count, self.history.prior)
        seen = self._seen
        counts = getattr(view, "completed_counts", None)  # the simulator's view: one call
        if counts is not None:
            done = counts()
        else:
            n_comp = view.n_completed
            done = [n_comp(p) for p in self._pool_index.tolist()]
        key = (int(view.n_arrived), sum(done), int(view.n_running))
        if key == self._state_key:
            return
        self._state_key = key
        run = view.running()
        fresh = np.isnan(self._expected_end[run.job])
        if fresh.any():  # history as of the last call, i.e. jobs finished by the job's start
            new = run.job[fresh]
            med = self.history.median_s(view, new)
            self._expected_end[new] = run.start[fresh] + np.where(np.isnan(med), np.inf, med)
        self.history.start(trace)
        for p, n in enumerate(done):
            if n > seen[p]:
                self._pending.append((p, view.completions(p)[seen[p]:n].copy()))
                self.history.add(trace, view.completed_jobs(p)[seen[p]:n])
                seen[p] = n

    def _flush_completions(self) -> None:
        """Merge the buffered completions into the sorted completion keys."""
        for p, times in self._pending:
            self._table9.add_completions(p, times)
        self._pending.clear()

    # ----------------------------------------------------------------- features
    def features(self, view: ForecastView, windows_min: Sequence[int]) -> dict[int, np.ndarray]:
        """Return, per window (min), the float32 [n_pools, len(FEATURE_COLUMNS)] feature matrix at now."""
        self._sync(view)
        self._flush_completions()
        run = view.running()
        now = float(view.now)
        return self._table9.features(now, tuple(int(k) for k in windows_min), run.pool,
                                     self._expected_end[run.job],
                                     None if self._held is None else self._held.at(now))

    # ----------------------------------------------------------------- protocol
    def _windows_min(self, windows_s: Sequence[float]) -> list[int]:
        ks = [int(round(float(w) / 60.0)) for w in windows_s]
        missing = [k for k in ks if k not in self.will_arrive]
        if missing:
            raise registry.RegistryError(
                f"no WillJobsArrive model for window(s) {missing} min; loaded: "
                f"{sorted(self.will_arrive)}; train them with `sia train --windows ...`"
            )
        return ks

    def arrival_proba(self, view: ForecastView, windows_s: Sequence[float]) -> np.ndarray:
        """Return float [n_pools, n_windows]: P(a job arrives in (now, now + w]) (0/1 for a baseline).

        Every window whose registered predictor is the XGBoost classifier is
        answered by one call of a :class:`~sia.models.forest.StackedForest`
        over all those windows and all pools (bit-equal to XGBoost's own
        prediction); a baseline reads its column.
        """
        ks = self._windows_min(windows_s)
        feats = self.features(view, sorted(set(ks)))
        out = np.empty((view.trace.n_pools, len(ks)))
        learned = []
        for i, k in enumerate(ks):
            m = self.will_arrive[k]
            if m.method_ == "persistence":
                out[:, i] = feats[k][:, _PERSIST] > 0
            elif m.method_ == "always_yes":
                out[:, i] = 1.0
            else:
                learned.append(i)
        if learned:
            forest, orders = self._forest(tuple(ks[i] for i in learned))
            blocks = [feats[ks[i]][:, order] for i, order in zip(learned, orders, strict=True)]
            out[:, learned] = np.asarray(forest.predict_proba(blocks)).T
            for i in learned:  # "either": yes too where an arrival came in the last k
                if self.will_arrive[ks[i]].method_ == "either":
                    out[feats[ks[i]][:, _PERSIST] > 0, i] = 1.0
        return out

    def _forest(self, ks: tuple[int, ...]) -> tuple[Any, list[np.ndarray]]:
        """Return (one stacked forest over the windows' boosters, each model's column indices)."""
        hit = self._forests.get(ks)
        if hit is None:
            from sia.models.forest import StackedForest

            orders = [np.array([FEATURE_COLUMNS.index(c) for c in self.will_arrive[k].feature_names_in_],
                               dtype=np.int64) for k in ks]
            boosters = [self.will_arrive[k].booster_ for k in ks]
            try:
                forest: Any = StackedForest(boosters)
            except (ValueError, AttributeError, TypeError):
                forest = _BoosterCalls(boosters)  # a model the kernel does not read: XGBoost's own
            hit = self._forests[ks] = (forest, orders)
        return hit

    def will_jobs_arrive(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return bool [n_pools, n_windows]: P(arrival) >= the registered threshold (with
        :meth:`calibrate`: >= each pool's calibrated threshold)."""
        ks = self._windows_min(windows_s)
        proba = self.arrival_proba(view, windows_s)
        thresholds = np.array([self.will_arrive[k].threshold_ for k in ks])
        registered = proba >= thresholds[None, :]
        if self.calibration is not None and self._calib_arrivals:
            if self._calib_held:
                proba = self._held_ranks(view, proba, ks)
            yes = self._calibrated(view).arrivals(view, proba, thresholds)
            if not self._calib_floor:
                return yes
            self.registered_arrive = registered  # what SIA's adaptation scores (floor)
            return yes | registered
        return registered

    def _held_ranks(self, view: ForecastView, proba: np.ndarray, ks: list[int]) -> np.ndarray:
        """Return ``proba`` with :data:`HELD_RANK` where a persistence window says no in a pool
        holding jobs not yet eligible at ``view.now`` (``proba`` itself when none is)."""
        if self._held is None:
            return proba
        held = self._held.at(float(view.now))[0] > 0
        cols = [i for i, k in enumerate(ks) if self.will_arrive[k].method_ == "persistence"]
        if not cols or not held.any():
            return proba
        out = proba.copy()
        for i in cols:
            out[held & (out[:, i] < HELD_RANK), i] = HELD_RANK
        return out

    def new_load_estimate(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return float [n_pools, n_windows]: the GPUs expected to arrive in (now, now + w]
        (with :meth:`calibrate`: each pool's conformal upper bound, +inf for a cold pool)."""
        trace = view.trace
        n = int(view.n_arrived)
        if self.calibration is not None and self._calib_load:
            base = np.stack([sliding_max_load(trace.submit[:n], trace.num_gpus[:n],
                                              trace.pool[:n], trace.n_pools, float(view.now),
                                              float(w), self.load_windows)
                             for w in windows_s], axis=1)
            bound = self._calibrated(view).load_bound(view, base)
            if not self._calib_floor:
                return bound
            # the registered answer under "sliding_max" is the calibration's own base
            self.registered_load = (base if self.load_method == "sliding_max"
                                    else self._registered_load(view, windows_s))
            return np.maximum(bound, self.registered_load)
        return self._registered_load(view, windows_s)

    def _registered_load(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return float [n_pools, n_windows]: the registered NewLoadEstimate (or the sliding
        max of ``load_windows`` windows with ``load_method`` "sliding_max"), uncalibrated."""
        trace = view.trace
        n = int(view.n_arrived)
        cols = []
        feats = None
        if self.load_method != "sliding_max" and any(  # the Table 9 features at now
                e.method == "quantile" for e in self.loads.values()):
            feats = self.features(view, sorted({int(round(float(w) / 60.0)) for w in windows_s}))
        for w in windows_s:
            k = int(round(float(w) / 60.0))
            est = self.loads.get(k) if self.load_method != "sliding_max" else None
            if self.load_method != "sliding_max" and est is None:
                raise registry.RegistryError(f"no NewLoadEstimate for {k} min")
            # a registered estimate reads the sliding max it was trained on
            n_win = self.load_windows if est is None else int(est.n_windows)
            s = sliding_max_load(trace.submit[:n], trace.num_gpus[:n], trace.pool[:n],
                                 trace.n_pools, float(view.now), float(w), n_win)
            if est is not None:
                s = est.estimate(s, None if feats is None else feats[k])
            cols.append(s)
        return np.stack(cols, axis=1) if cols else np.zeros((trace.n_pools, 0))

    def duration_cdf(self, view: ForecastView, job_indices: np.ndarray,
                     windows_s: Sequence[float]) -> np.ndarray:
        """Return float [n_jobs, n_windows]: P(duration <= w) per job and window, or None.

        From the learned JobDuration's calibrated probabilities at the bin
        edges: for a window between two edges, the probability at the
        largest edge <= w (a lower bound); 0 below the first edge. Without a
        learned JobDuration, 0/1 from the history rule's bins. Whatever the
        model, a job whose time limit (``view.trace.time_limit``) plus Slurm's
        grace fits w gets 1 there (:func:`limit_certain`): it is certain to fit.
        """
        return self._duration_cdf(view, job_indices, windows_s, now=False)

    def duration_cdf_now(self, view: ForecastView, job_indices: np.ndarray,
                         windows_s: Sequence[float]) -> np.ndarray:
        """:meth:`duration_cdf` of arrived jobs predicted again now: a learned JobDuration
        reads each job's look-alike history as of now instead of at its submission (its
        burst and calendar features stay those of its submission); the history rule is the
        same either way."""
        return self._duration_cdf(view, job_indices, windows_s, now=True)

    def _duration_cdf(self, view: ForecastView, job_indices: np.ndarray,
                      windows_s: Sequence[float], now: bool) -> np.ndarray:
        jobs = np.asarray(job_indices, dtype=np.int64)
        if self.duration_model is None:
            cdf = cdf_from_bins(self._rule_bins(view, jobs), windows_s)
        else:
            self._submissions.update(view)
            sub = self._submissions
            cdf = self.duration_model.predict_cdf(sub.rows_now(jobs) if now else sub.rows(jobs))
            if self.censor_cap:
                cdf = cap_cdf(cdf, self._started.share_within(view, jobs, DURATION_BIN_EDGES_S))
            cdf = cdf_at_windows(cdf, windows_s)
        certain = self._certain(view.trace, jobs, windows_s)
        if certain is not None:
            cdf[certain] = 1.0
        return cdf

    @staticmethod
    def _certain(trace: TraceView, jobs: np.ndarray, windows_s: Sequence[float]
                 ) -> np.ndarray | None:
        """Return bool [n_jobs, n_windows]: the job's time limit guarantees it fits the window
        (None when the trace has no limits). The grace is divided by the replay's speed-up, as
        the limits are."""
        limits = getattr(trace, "time_limit", None)
        if limits is None:
            return None
        grace = TIME_LIMIT_GRACE_S / float(getattr(trace, "speedup", 1.0))
        return limit_certain(limits[jobs], windows_s, grace)

    def duration_bins(self, view: ForecastView, job_indices: np.ndarray) -> np.ndarray:
        """Return the predicted bin of each job.

        With a learned JobDuration: the bin holding its predicted median (the
        first bin whose P(duration <= upper edge) >= 0.5). Otherwise the bin of
        its history's quantile (fallback bin when none), the paper's rule.
        """
        if self.duration_model is not None:
            cdf = self.duration_cdf(view, job_indices, DURATION_BIN_EDGES_S)
            return np.sum(cdf < 0.5, axis=1).astype(np.int64)
        jobs = np.asarray(job_indices, dtype=np.int64)
        bins = self._rule_bins(view, jobs)
        limits = getattr(view.trace, "time_limit", None)
        if limits is not None:  # never beyond the bin the limit guarantees
            grace = TIME_LIMIT_GRACE_S / float(getattr(view.trace, "speedup", 1.0))
            end = limits[jobs] + grace
            has = ~np.isnan(end)
            bins[has] = np.minimum(bins[has], duration_bin_of(end[has]))
        return bins

    def _rule_bins(self, view: ForecastView, jobs: np.ndarray) -> np.ndarray:
        """Return the history rule's bin per job (its quantile's; the fallback bin when none)."""
        self._sync(view)
        stat = self.history.quantile_s(view, jobs, self.duration_quantile)
        return predict_bins(stat, self.fallback_bin)


def last_submissions(prior: pl.DataFrame | None, pool_names: Sequence[str],
                     column: str = "submit_time") -> np.ndarray:
    """Return float [n_pools]: ``column`` of each named pool's last submitted job in ``prior``
    (its ``submit_time`` by default; ``num_gpus``: its width; the job submitted last, the last
    row among equal times); NaN for a pool with no job there, or when ``prior`` is None."""
    out = np.full(len(pool_names), np.nan)
    if prior is None or not prior.height:
        return out
    import polars as pl

    last = prior.group_by("pool").agg(pl.col(column).sort_by("submit_time").last())
    at = dict(zip(last["pool"].cast(pl.String).to_list(), last[column].to_list(),
                  strict=True))
    for i, name in enumerate(pool_names):
        if at.get(str(name)) is not None:
            out[i] = float(at[str(name)])
    return out


def _decode(doc: dict[str, Any], boosters: dict[str, dict[str, bytes]]) -> tuple:
    """Return (will_arrive, loads, duration_config, duration_model, load_method, load_windows)
    from :meth:`LearnedForecaster.to_bytes`'s document and boosters."""
    import xgboost as xgb
    from sia.models.serving import predictor_class

    def part(where: str, params: dict[str, Any] | None) -> Any:
        if params is None:
            return None
        bst = {}
        for name, raw in boosters.get(where, {}).items():
            b = xgb.Booster()
            b.load_model(bytearray(raw))
            b.set_param({"nthread": 1})  # as the registry loads them: a tick predicts few rows
            bst[name] = b
        return predictor_class(params["kind"]).from_artifacts(params, bst)

    will_arrive = {int(k): part(f"will_arrive/{k}", p) for k, p in doc["will_arrive"].items()}
    loads = {int(k): part(f"new_load/{k}", p) for k, p in doc["loads"].items()} or None
    return (will_arrive, loads, dict(doc["duration_config"]),
            part("job_duration", doc["duration_model"]), doc["load_method"],
            int(doc["load_windows"]))
