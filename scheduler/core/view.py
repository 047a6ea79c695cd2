"""The policy interface: what a scheduling policy sees and what it returns (DESIGN.md 6.1).

The simulator owns time and state; a policy owns decisions. Three pieces:

* :class:`TraceArrays` -- the static, per-replay structure of the trace as numpy
  arrays indexed by *job index* ``0..n-1`` (jobs in ``(submit_time, job_id)``
  order, so a larger index never arrives earlier). Built once per replay.
* :class:`SimView` -- the read-only state the policy is shown at each decision
  instant: time, quotas, GPUs in use (dedicated / opportunistic, per pool),
  free GPUs, pending and running jobs, and the arrival / completion history a
  forecaster needs. It is cheap: one object per replay whose properties read
  the simulator's live state (numpy views, lazily built and cached per call).
* :class:`Policy` -- ``reset(trace, cluster)`` before a replay, then
  ``decide(view) -> list[Start]`` at every decision instant, plus an optional
  ``next_wakeup(now)`` for policies that plan ahead (the oracle).

What a policy may read
----------------------
A *realistic* policy (FCFS, MaxMin, SIA) may read, for jobs that have
**arrived** (``index < view.n_arrived``): ``submit``, ``num_gpus``, ``pool``,
``tag`` / ``tag_code`` and ``job_ids``; and everything in the view.
Only *perfect-information* policies (SSF, gSSF, SIA_VC, the oracle, perfect
forecasters) may read ``duration`` or anything about jobs that have not
arrived yet (``index >= view.n_arrived``). The simulator cannot police this;
each policy says in its docstring which kind it is (``Policy.perfect_information``).

Conventions: times in seconds since the trace's first submission; durations
already divided by the replay's speed-up factor; GPU counts are ints; pools are
indexed ``0..n_pools-1`` in the order of ``TraceArrays.pool_names`` (sorted by
name), which is the pool order of every per-pool array here and of the
forecasting protocol (:mod:`sia.scheduler.core.forecast`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntFlag
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from sia.scheduler.core.cluster import Cluster


# ----------------------------------------------------------------------------- trace


@dataclass(frozen=True, eq=False)
class TraceArrays:
    """The trace of one replay as arrays indexed by job index (arrival order).

    Fields (``n`` jobs, ``P`` pools):

    - ``job_ids``: object array [n] of the jobs' string ids.
    - ``submit``: float64 [n], arrival time in seconds (non-decreasing).
    - ``duration``: float64 [n], run time in seconds after the speed-up factor.
      **Perfect information**: only perfect-information policies may read it.
    - ``num_gpus``: int64 [n], gang size.
    - ``pool``: int64 [n], pool index into ``pool_names``.
    - ``tag``: object array [n] of str or None (experiment tag / job name).
    - ``tag_code``: int64 [n], a dense code per distinct tag (-1 when None),
      numbered in order of first appearance, for array-based grouping.
    - ``pool_names``: tuple [P] of pool names, sorted.
    - ``user`` / ``user_code``: the jobs' users and their dense codes, as ``tag`` /
      ``tag_code`` (None when the trace has no user column).
    - ``quota``: int64 [P], each pool's dedicated GPUs.
    - ``pool_jobs``: tuple [P] of int64 arrays, the job indices of each pool in
      arrival order (so a pool's arrivals so far are a prefix of it).
    - ``speedup``: the factor durations were divided by.
    - ``time_limit``: float64 [n], each job's requested time limit in seconds, divided by
      ``speedup`` as the durations are (NaN: no limit), or None when the trace has none.
      Known at submission (the scheduler ends a job at its limit), so any policy may read it.
    - ``hold``: float64 [n], the seconds each job was held, known, in the scheduler's queue
      before its arrival (Slurm: Eligible - Submit; 0: not held), or None when no job was. A
      job ``j`` is known from ``submit[j] - hold[j]``: from then on any policy or forecaster
      may count it as work to come (when it will arrive is not known before it does).

    Jobs that have not arrived (``index >= view.n_arrived``) are future
    information, readable only by perfect-information policies.
    """

    job_ids: np.ndarray
    submit: np.ndarray
    duration: np.ndarray
    num_gpus: np.ndarray
    pool: np.ndarray
    tag: np.ndarray
    tag_code: np.ndarray
    pool_names: tuple[str, ...]
    quota: np.ndarray
    pool_jobs: tuple[np.ndarray, ...] = field(repr=False)
    speedup: float = 1.0
    user: np.ndarray | None = field(default=None, repr=False)
    user_code: np.ndarray | None = field(default=None, repr=False)
    time_limit: np.ndarray | None = field(default=None, repr=False)
    hold: np.ndarray | None = field(default=None, repr=False)

    @property
    def n_jobs(self) -> int:
        """Number of jobs."""
        return int(self.submit.shape[0])

    @property
    def n_pools(self) -> int:
        """Number of pools."""
        return len(self.pool_names)

    @property
    def total_quota(self) -> int:
        """Sum of the pools' quotas in GPUs (the cluster's size)."""
        return int(self.quota.sum())

    def service(self) -> np.ndarray:
        """Return each job's service in GPU-seconds (duration x GPUs). Perfect information."""
        return self.duration * self.num_gpus

    @staticmethod
    def build(
        job_ids: np.ndarray,
        submit: np.ndarray,
        duration: np.ndarray,
        num_gpus: np.ndarray,
        pool: np.ndarray,
        tag: np.ndarray,
        pool_names: tuple[str, ...],
        quota: np.ndarray,
        speedup: float = 1.0,
        user: np.ndarray | None = None,
        time_limit: np.ndarray | None = None,
        hold: np.ndarray | None = None,
    ) -> TraceArrays:
        """Return a TraceArrays from per-job arrays already in arrival order.

        ``duration`` is the replayed duration (already divided by ``speedup``).
        Derives ``tag_code`` (and ``user_code`` from ``user``: empty names are
        no user) and ``pool_jobs``; arrays are made read-only. ``time_limit`` (seconds,
        already divided by ``speedup``; NaN or None for no limit) is kept only when some
        job has one; ``hold`` (seconds; NaN, None or 0: not held) only when some job was held.
        """
        n = len(submit)
        tag = np.asarray(tag, dtype=object)
        codes: dict[Any, int] = {}
        tag_code = np.fromiter(
            (-1 if t is None else codes.setdefault(t, len(codes)) for t in tag),
            dtype=np.int64,
            count=n,
        )
        users: dict[Any, np.ndarray] = {}
        if user is not None:
            user = np.asarray([None if u is None or u == "" else u for u in user], dtype=object)
            named: dict[Any, int] = {}
            users = {"user": user, "user_code": np.fromiter(
                (-1 if u is None else named.setdefault(u, len(named)) for u in user),
                dtype=np.int64, count=n)}
        pool = np.asarray(pool, dtype=np.int64)
        order = np.argsort(pool, kind="stable")
        bounds = np.searchsorted(pool[order], np.arange(len(pool_names) + 1))
        pool_jobs = tuple(order[bounds[p] : bounds[p + 1]] for p in range(len(pool_names)))
        arrays = dict(
            job_ids=np.asarray(job_ids, dtype=object),
            submit=np.asarray(submit, dtype=np.float64),
            duration=np.asarray(duration, dtype=np.float64),
            num_gpus=np.asarray(num_gpus, dtype=np.int64),
            pool=pool,
            tag=tag,
            tag_code=tag_code,
            quota=np.asarray(quota, dtype=np.int64),
        )
        if time_limit is not None:
            limit = np.array([np.nan if v is None else v for v in time_limit], dtype=np.float64)
            if not np.isfinite(limit).any():
                time_limit = None
            else:
                users["time_limit"] = limit
        if hold is not None:
            held = np.array(hold, dtype=np.float64)  # (None becomes NaN)
            held[~(held > 0.0)] = 0.0  # (NaN: not held)
            if held.any():
                users["hold"] = held
        for a in (*arrays.values(), *users.values(), *pool_jobs):
            a.setflags(write=False)
        return TraceArrays(
            **arrays, pool_names=tuple(pool_names), pool_jobs=pool_jobs, speedup=float(speedup),
            **users,
        )

    def grow(self, job_ids: Any, submit: Any, duration: Any, num_gpus: Any, pool: Any,
             tag: Any, user: Any = None, time_limit: Any = None) -> int:
        """Append jobs *in place* (the live service's arrays, :mod:`sia.service.core`); return
        the old number of jobs.

        The new jobs come in arrival order after every job here (``(submit, job_id)`` order),
        so every index keeps its job; ``duration`` and ``time_limit`` are already divided by
        ``speedup``. The result equals :meth:`build` on all the jobs: tag and user codes go on
        from the codes given so far, ``pool_jobs`` gains the new indices, ``time_limit``
        appears when a first job has one. Each field becomes a longer view of a buffer that
        doubles when full (:func:`sia.data.growth.extend`), so holders of this object see the
        new jobs; arrays taken from its fields before are stale.
        """
        from sia.data.growth import extend

        n_old = self.n_jobs
        new_pool = np.asarray(pool, dtype=np.int64)
        k = new_pool.size
        if k == 0:
            return n_old
        codes = self.__dict__.get("_codes")
        if codes is None:  # the codes given so far, by first appearance (as build numbers them)
            codes = {"tag": _code_book(self.tag, self.tag_code),
                     "user": (None if self.user is None
                              else _code_book(self.user, self.user_code))}
            object.__setattr__(self, "_codes", codes)
        tag = np.asarray(tag, dtype=object)
        fields: dict[str, np.ndarray] = {
            "job_ids": extend(self.job_ids, np.asarray(job_ids, dtype=object)),
            "submit": extend(self.submit, submit),
            "duration": extend(self.duration, duration),
            "num_gpus": extend(self.num_gpus, num_gpus),
            "pool": extend(self.pool, new_pool),
            "tag": extend(self.tag, tag),
            "tag_code": extend(self.tag_code, _codes_of(tag, codes["tag"])),
        }
        if user is not None:
            user = np.asarray([None if u is None or u == "" else u for u in user], dtype=object)
            if self.user is None:  # no user column so far: none of the old jobs has one
                codes["user"] = {}
                old_user = np.full(n_old, None, dtype=object)
                old_code = np.full(n_old, -1, dtype=np.int64)
            else:
                old_user, old_code = self.user, self.user_code
            fields["user"] = extend(old_user, user)
            fields["user_code"] = extend(old_code, _codes_of(user, codes["user"]))
        elif self.user is not None:
            fields["user"] = extend(self.user, np.full(k, None, dtype=object))
            fields["user_code"] = extend(self.user_code, np.full(k, -1, dtype=np.int64))
        limit = (np.full(k, np.nan) if time_limit is None else
                 np.array([np.nan if v is None else v for v in time_limit], dtype=np.float64))
        if self.time_limit is not None:
            fields["time_limit"] = extend(self.time_limit, limit)
        elif np.isfinite(limit).any():
            fields["time_limit"] = extend(np.full(n_old, np.nan), limit)
        if self.hold is not None:  # (the service's jobs come when they can run: not held)
            fields["hold"] = extend(self.hold, np.zeros(k))
        new_idx = np.arange(n_old, n_old + k, dtype=np.int64)
        fields["pool_jobs"] = tuple(
            extend(jobs, new_idx[new_pool == p]) if (new_pool == p).any() else jobs
            for p, jobs in enumerate(self.pool_jobs))
        for name, value in fields.items():
            for a in (value if name == "pool_jobs" else (value,)):
                if name != "duration" and a.flags.writeable:
                    a.setflags(write=False)
            object.__setattr__(self, name, value)
        return n_old


def _code_book(values: np.ndarray, codes: np.ndarray) -> dict[Any, int]:
    """Return {value: code} of the dense codes given so far (None has no code)."""
    book: dict[Any, int] = {}
    for v, c in zip(values.tolist(), codes.tolist(), strict=True):
        if c >= 0:
            book.setdefault(v, c)
    return book


def _codes_of(values: np.ndarray, book: dict[Any, int]) -> np.ndarray:
    """Return the dense codes of ``values`` (-1 for None), numbering new values on from
    ``book`` (which takes them) in order of first appearance, as :meth:`TraceArrays.build`."""
    return np.fromiter((-1 if v is None else book.setdefault(v, len(book)) for v in values),
                       dtype=np.int64, count=len(values))


# ----------------------------------------------------------------------------- decisions


class Reason(IntFlag):
    """Why the policy is called; several flags when events coincide."""

    ARRIVAL = 1  #: one or more jobs arrived now
    COMPLETION = 2  #: one or more jobs completed now
    TICK = 4  #: the periodic tick (only while jobs are pending)
    WAKEUP = 8  #: a time the policy asked for with ``next_wakeup``


class Start(NamedTuple):
    """One job the policy starts now.

    - ``job``: the job index (must be pending).
    - ``opportunistic``: False = on the pool's own quota (dedicated; the
      pool's dedicated use must stay within its quota), True = on spare GPUs
      beyond the quota (any free GPU).
    - ``placement``: None lets the cluster pick GPUs (fungible pools) or, on
      buddy cells, the simulator's placer stage (for a policy with
      ``refused``); else the GPUs / cell the policy got from the placement
      layer (see :meth:`sia.scheduler.core.cluster.Cluster.allocate`).
    """

    job: int
    opportunistic: bool = False
    placement: Any = None


@runtime_checkable
class Policy(Protocol):
    """A scheduling policy: a deterministic function of the views it is shown (plus a seed).

    Life cycle: the simulator calls ``reset(trace, cluster)`` once before a
    replay, then ``decide(view)`` at every decision instant (after all the
    events at that instant have been applied). ``decide`` returns every job
    to start *now*, as a list of :class:`Start`; the starts are applied in
    order and must be jointly feasible (the view is not updated between them,
    so a policy that starts several jobs tracks the GPUs it has used itself).
    The simulator validates each start and raises
    :class:`~sia.scheduler.core.simulator.PolicyError` naming the policy, the time
    and the job on a violation.

    Optional members (looked up with ``getattr``):

    - ``name: str`` -- shown in errors and reports (default: the class name).
    - ``perfect_information: bool`` -- True when the policy reads durations
      or future jobs (documentation and reports only).
    - ``uses_ticks: bool`` (default True) -- False for policies whose decision
      cannot change without an arrival or completion (FCFS, SSF, gSSF,
      MaxMin); the simulator then skips the periodic ticks entirely.
    - ``next_wakeup(now) -> float | None`` -- the next time (> now, seconds)
      the policy wants to be called even if nothing happens (offline plans);
      asked after every decision, and the answer replaces any earlier one
      (None = no wake-up pending).
    - ``refused(jobs)`` -- takes the starts the simulator's placer stage could not
      place. On a cell-aware cluster, a policy with this method may return
      starts without a placement: after ``decide`` the simulator places them
      as one batch (buddy cells, then the fallback chain on what buddy refused),
      applies the placed ones and passes the refused job indices (still
      pending) here, before the next decision. A policy that must know
      before committing whether a start gets a cell asks
      :meth:`SimView.can_place`; a start it was told True for is placed on
      that cell and never refused.
    - ``needs: PolicyNeeds`` (class attribute, :mod:`sia.scheduler.core.needs`) --
      what the policy takes and supports: a forecaster and under which
      constructor option, a seed, locality (buddy cells) and the locality
      settings it requires, e.g. ``needs = PolicyNeeds(forecaster="forecaster",
      seed=True, locality=True)``. The registry reads it and checks a replay
      against it before the replay starts; without it a policy takes no
      forecaster or seed and runs on fungible GPUs only.
    - ``grow(trace, cluster, n_old) -> bool`` -- the live service
      (:mod:`sia.service.core`) appended jobs to ``trace`` after index ``n_old``
      (:meth:`TraceArrays.grow`; none has arrived): extend the per-job state as ``reset``
      would have made it for them, so the replay goes on as if the trace had held them
      from the start. False when the policy cannot (the service then rebuilds its arrays
      and re-runs its log on a fresh policy); without it, the service always rebuilds.
    - ``facts() -> dict`` -- what the policy reports about its finished replay
      (JSON-ready values, e.g. the oracle's solver status and gap); the replay
      engine stores it with the outcome. Without it a policy reports nothing.
    """

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Prepare for a replay of ``trace`` on ``cluster``; drop any earlier state."""
        ...

    def decide(self, view: SimView) -> list[Start]:
        """Return the jobs to start now (possibly empty)."""
        ...


# ----------------------------------------------------------------------------- state + view


class SimState:
    """The simulator's mutable state, shared with :class:`SimView` (read-only there).

    Per-pool counters are Python lists (fast scalar updates in the event loop);
    the view turns them into arrays on demand. Only the simulator writes here.
    """

    __slots__ = (
        "trace",
        "now",
        "reason",
        "n_arrived",
        "used_ded",
        "used_opp",
        "pending",
        "running",
        "start_time",
        "opportunistic",
        "comp_end",
        "comp_job",
        "n_comp",
        "touched",
    )

    def __init__(self, trace: TraceArrays):
        P = trace.n_pools
        self.trace = trace
        self.now = 0.0
        self.reason = Reason(0)
        self.n_arrived = 0
        self.used_ded = [0] * P
        self.used_opp = [0] * P
        #: per pool, pending job indices in arrival order (ascending)
        self.pending: list[list[int]] = [[] for _ in range(P)]
        #: running job index -> None (insertion-ordered set; start/flags below)
        self.running: dict[int, None] = {}
        self.start_time = np.full(trace.n_jobs, np.nan)
        self.opportunistic = np.zeros(trace.n_jobs, dtype=bool)
        sizes = [len(j) for j in trace.pool_jobs]
        #: per pool, completion end times / job indices in completion order
        self.comp_end = [np.empty(s, dtype=np.float64) for s in sizes]
        self.comp_job = [np.empty(s, dtype=np.int64) for s in sizes]
        self.n_comp = [0] * P
        #: pools with an arrival or a completion at the current instant
        self.touched: set[int] = set()

    def grow(self, n_old: int) -> None:
        """Make room for the jobs :meth:`TraceArrays.grow` appended after index ``n_old``
        (none of them has arrived): the state a replay of the grown trace has for them."""
        from sia.data.growth import extend, reserve

        k = self.trace.n_jobs - n_old
        self.start_time = extend(self.start_time, np.full(k, np.nan))
        self.opportunistic = extend(self.opportunistic, np.zeros(k, dtype=bool))
        for p, jobs in enumerate(self.trace.pool_jobs):  # completion logs: read up to n_comp
            self.comp_end[p] = reserve(self.comp_end[p], len(jobs), np.nan)
            self.comp_job[p] = reserve(self.comp_job[p], len(jobs), -1)


class RunningJobs(NamedTuple):
    """The running jobs as parallel arrays (sorted by job index)."""

    job: np.ndarray  #: int64 job indices
    pool: np.ndarray  #: int64 pool indices
    start: np.ndarray  #: float64 start times (s)
    num_gpus: np.ndarray  #: int64 gang sizes
    opportunistic: np.ndarray  #: bool, True when running beyond its pool's quota


class SimView:
    """Read-only view of the simulation at one decision instant.

    One object per replay: its properties read the live state, and array
    results are cached until the next decision instant. Do not keep arrays
    from one call to the next, and never write to what it returns (lists
    returned by :meth:`pending` are the simulator's own).
    """

    __slots__ = ("_s", "trace", "_cluster", "_cache", "_probe")

    def __init__(self, state: SimState, cluster: Cluster):
        self._s = state
        self.trace: TraceArrays = state.trace
        self._cluster = cluster
        self._cache: dict[str, Any] = {}
        #: the simulator's placement probe (job, opportunistic) -> bool; None: fungible GPUs
        self._probe: Callable[[int, bool], bool] | None = None

    def _invalidate(self) -> None:
        """Drop cached arrays (the simulator calls this before each decision)."""
        if self._cache:
            self._cache.clear()

    # -- time and reason
    @property
    def now(self) -> float:
        """Current time in seconds."""
        return self._s.now

    @property
    def reason(self) -> Reason:
        """Why the policy is called now (flags)."""
        return self._s.reason

    @property
    def n_pools(self) -> int:
        """Number of pools."""
        return self.trace.n_pools

    @property
    def touched_pools(self) -> set[int]:
        """Pools that had an arrival or a completion at this instant (do not mutate).

        A policy whose per-pool decision depends only on that pool's pending
        jobs and usage (FCFS, SSF) need only revisit these pools.
        """
        return self._s.touched

    # -- capacity
    @property
    def quota(self) -> np.ndarray:
        """int64 [P]: each pool's dedicated GPUs."""
        return self.trace.quota

    @property
    def total_gpus(self) -> int:
        """GPUs in the cluster."""
        return self._cluster.total_gpus

    @property
    def free_gpus(self) -> int:
        """GPUs not running any job right now."""
        return self._cluster.free

    def can_place(self, job: int, opportunistic: bool = False) -> bool:
        """True when the placer stage will place pending ``job`` now (dedicated, or opportunistic).

        For a policy whose next choice depends on the answer (FCFS's head of
        line blocks its pool when it gets no cell; MaxMin and HiveD* give the
        GPUs to another job). GPU counts and quotas stay the policy's own
        business: this answers whether the *cells* work out, after the starts
        already answered True in this decision. On a cell-aware cluster a True
        keeps the cell it found for that start until the placer stage, which
        frees it if the decision does not return the start (so ask only for
        starts the policy means to return, with the same ``opportunistic``).
        On fungible GPUs every start that fits by count is placed: always True.
        The policy sees neither GPU ids nor the cluster.
        """
        probe = self._probe
        return True if probe is None else probe(job, opportunistic)

    def used_dedicated_of(self, pool: int) -> int:
        """GPUs pool ``pool`` uses on its own quota now."""
        return self._s.used_ded[pool]

    def used_opportunistic_of(self, pool: int) -> int:
        """GPUs pool ``pool``'s jobs use beyond its quota now."""
        return self._s.used_opp[pool]

    @property
    def used_dedicated(self) -> np.ndarray:
        """int64 [P]: GPUs each pool uses on its own quota (dedicated jobs)."""
        c = self._cache.get("ud")
        if c is None:
            c = self._cache["ud"] = np.array(self._s.used_ded, dtype=np.int64)
        return c

    @property
    def used_opportunistic(self) -> np.ndarray:
        """int64 [P]: GPUs each pool's opportunistic jobs use beyond its quota."""
        c = self._cache.get("uo")
        if c is None:
            c = self._cache["uo"] = np.array(self._s.used_opp, dtype=np.int64)
        return c

    @property
    def allocation(self) -> np.ndarray:
        """int64 [P]: each pool's current allocation (dedicated + opportunistic GPUs)."""
        return self.used_dedicated + self.used_opportunistic

    # -- pending jobs
    def pending(self, pool: int) -> list[int]:
        """Return pool ``pool``'s pending job indices in arrival order (do not mutate)."""
        return self._s.pending[pool]

    def n_pending(self, pool: int) -> int:
        """Number of pending jobs of pool ``pool``."""
        return len(self._s.pending[pool])

    def pending_array(self, pool: int) -> np.ndarray:
        """int64 array of pool ``pool``'s pending job indices in arrival order (cached)."""
        key = ("pa", pool)
        c = self._cache.get(key)
        if c is None:
            c = self._cache[key] = np.array(self._s.pending[pool], dtype=np.int64)
        return c

    def pending_all(self) -> np.ndarray:
        """int64 array of every pending job index, ascending (= arrival order)."""
        c = self._cache.get("pall")
        if c is None:
            parts = [p for p in self._s.pending if p]
            c = np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
            c = c.astype(np.int64, copy=False)
            self._cache["pall"] = c
        return c

    @property
    def has_pending(self) -> bool:
        """True when any job is pending."""
        return any(self._s.pending)

    def pending_gpus(self) -> np.ndarray:
        """int64 [P]: GPUs requested by each pool's pending jobs."""
        c = self._cache.get("pg")
        if c is None:
            g = self.trace.num_gpus
            c = np.array([int(g[p].sum()) if p else 0 for p in self._s.pending], dtype=np.int64)
            self._cache["pg"] = c
        return c

    # -- running jobs
    @property
    def n_running(self) -> int:
        """Number of running jobs."""
        return len(self._s.running)

    def running(self) -> RunningJobs:
        """Return the running jobs as parallel arrays sorted by job index (cached)."""
        c = self._cache.get("run")
        if c is None:
            job = np.fromiter(self._s.running, dtype=np.int64, count=len(self._s.running))
            job.sort()
            t = self.trace
            c = RunningJobs(
                job=job,
                pool=t.pool[job],
                start=self._s.start_time[job],
                num_gpus=t.num_gpus[job],
                opportunistic=self._s.opportunistic[job],
            )
            self._cache["run"] = c
        return c

    # -- history (what a forecaster may use)
    @property
    def n_arrived(self) -> int:
        """Jobs arrived so far: job indices ``< n_arrived`` have arrived."""
        return self._s.n_arrived

    def arrived_in_pool(self, pool: int) -> np.ndarray:
        """int64 job indices of pool ``pool`` that have arrived, in arrival order (a view)."""
        jobs = self.trace.pool_jobs[pool]
        n = int(np.searchsorted(jobs, self._s.n_arrived, side="left"))
        return jobs[:n]

    def arrivals(self, pool: int) -> tuple[np.ndarray, np.ndarray]:
        """Return (submit times s, GPUs) of pool ``pool``'s jobs arrived so far, in order."""
        jobs = self.arrived_in_pool(pool)
        return self.trace.submit[jobs], self.trace.num_gpus[jobs]

    def completions(self, pool: int) -> np.ndarray:
        """float64 end times (s) of pool ``pool``'s completed jobs, in completion order (a view)."""
        return self._s.comp_end[pool][: self._s.n_comp[pool]]

    def n_completed(self, pool: int) -> int:
        """Number of pool ``pool``'s jobs completed so far."""
        return self._s.n_comp[pool]

    def completed_counts(self) -> list[int]:
        """Every pool's number of completed jobs (a copy; index = pool), in one call."""
        return list(self._s.n_comp)

    def completed_jobs(self, pool: int) -> np.ndarray:
        """int64 job indices of pool ``pool``'s completed jobs, in completion order (a view).

        Their durations are known (they finished), so any policy may read them.
        """
        return self._s.comp_job[pool][: self._s.n_comp[pool]]

    def start_time_of(self, job: int) -> float:
        """Start time (s) of a started job; NaN if it has not started."""
        return float(self._s.start_time[job])

    def is_opportunistic(self, job: int) -> bool:
        """True when a started job runs (or ran) beyond its pool's quota."""
        return bool(self._s.opportunistic[job])
