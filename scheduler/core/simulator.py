"""Discrete-event, open-loop trace replay (DESIGN.md 6.1).

Events are job arrivals (at their trace submit times: open loop), job
completions, a periodic tick (only while jobs are pending, and only for
policies that use ticks) and wake-ups a policy asks for. All events at the
same instant are applied first (completions, then arrivals), then the policy
is called once with a :class:`~sia.scheduler.core.view.SimView` and returns the
jobs to start. Jobs are gang-scheduled and run to completion, unless the
policy returns a :class:`Preempt` for a running job (partial preemption, SIA
5.5: SIA on cells or with ``preempt`` on fungible GPUs, and the Kueue-style
baseline): the job's GPUs are released at
once, it goes back to its pool's pending list, and when it starts again it
runs what was left of its work plus ``lost_work_s`` (work since its last
checkpoint, at most what it had done in that run) plus ``restart_delay_s``.
Its ``start_time`` stays its first start; ``end_time`` is its real end; the
result counts its ``preemptions`` and the ``wasted_gpu_s`` they cost
(lost work plus restart delay, times its GPUs).

Which jobs may be preempted on fungible GPUs, and what a preemption costs, is
the replay's :class:`PreemptionConfig` (``simulate(..., preemption=...)``; the
pipelines take it from a config's ``preemption:`` key or ``sia replay``'s
``--preemption`` options): the trace's ``preemptible`` column OR a seeded
``preemptible_fraction``, a checkpoint interval and a restart delay. The
simulator hands it to the policy on the cluster (``cluster.preemptible``: bool
per job index; ``cluster.preemption``: the config).

The simulator validates every start (the job is pending, its gang fits the
free GPUs, a dedicated start keeps the pool within its quota) and raises
:class:`PolicyError` naming the policy, the time and the job otherwise. With
``check_invariants=True`` it also checks, after every event instant: no GPU is
double-booked (GPUs are tracked individually), dedicated use never exceeds a
pool's quota, usage counters agree with the running jobs, every job starts at
most once and never before it arrives, and runs exactly its duration.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import polars as pl
from sia.data.errors import ConfigError, SiaError, TraceError
from sia.data.schema import check_jobs, check_pools
from sia.scheduler.core.cluster import Cluster, PlacementError
from sia.scheduler.core.view import Policy, Reason, SimState, SimView, Start, TraceArrays

# the reasons as plain ints for the event loop, and every combination as a Reason
_ARRIVAL, _COMPLETION, _TICK, _WAKEUP = (int(r) for r in (Reason.ARRIVAL, Reason.COMPLETION,
                                                           Reason.TICK, Reason.WAKEUP))
_REASONS = tuple(Reason(i) for i in range(16))

# job status codes
_FUTURE, _PENDING, _RUNNING, _DONE = 0, 1, 2, 3

#: Columns of the result table, in order.
RESULT_COLUMNS = (
    "job_id",
    "pool",
    "submit_time",
    "duration",
    "num_gpus",
    "start_time",
    "end_time",
    "opportunistic",
    "preemptible",
    "preemptions",
    "wasted_gpu_s",
)


class Preempt(NamedTuple):
    """A decision item that stops running job ``job`` (index) and puts it back in its pool's queue.

    ``lost_work_s``: seconds of work it loses (capped at what it did in this
    run); ``restart_delay_s``: seconds added to its next run.
    """

    job: int
    lost_work_s: float = 0.0
    restart_delay_s: float = 0.0


@dataclass(frozen=True)
class PreemptionConfig:
    """Which jobs may be preempted on fungible GPUs, and the cost model of a preemption.

    - ``preemptible_fraction``: a share of the jobs, drawn with ``seed``, that are
      preemptible on top of the trace's ``preemptible`` column (the same draw as the
      locality layer's, so cells and fungible replays mark the same jobs).
    - ``checkpoint_s``: jobs checkpoint every ``checkpoint_s`` seconds of their run; an
      evicted job loses the work since its last checkpoint, ``run mod checkpoint_s``
      (None: never checkpoints, it loses its whole run).
    - ``restart_delay_s``: seconds added to its next run (rescheduling, container start,
      restoring the checkpoint).

    Defaults (not tuned on any replay: a cost model, stated so it can be varied): a
    30-minute checkpoint interval, as training scripts commonly checkpoint at a fixed
    period of tens of minutes, so an eviction loses 15 minutes on average; a 2-minute
    restart delay, for a pod rescheduled on a warm node that reloads a checkpoint.
    """

    preemptible_fraction: float = 0.0
    seed: int = 0
    checkpoint_s: float | None = 1800.0
    restart_delay_s: float = 120.0

    def __post_init__(self):
        for key in ("preemptible_fraction", "seed", "checkpoint_s", "restart_delay_s"):
            problem = self.problem(key, getattr(self, key))
            if problem:
                raise ConfigError(f"preemption option {key} {problem}")

    @staticmethod
    def problem(key: str, value: object) -> str | None:
        """Return what is wrong with ``value`` for option ``key`` (None when it is fine)."""
        number = not isinstance(value, bool) and isinstance(value, int | float)
        if key == "preemptible_fraction" and not (number and 0.0 <= value <= 1.0):
            return f"must be a share of the jobs in [0, 1], got {value!r}"
        if key == "seed" and (isinstance(value, bool) or not isinstance(value, int)):
            return f"must be an integer, got {value!r}"
        if key == "checkpoint_s" and value is not None and not (number and 0 < value < math.inf):
            return f"must be a positive number of seconds (or null: no checkpoints), got {value!r}"
        if key == "restart_delay_s" and not (number and 0 <= value < math.inf):
            return f"must be a number of seconds >= 0, got {value!r}"
        return None

    def lost_work_s(self, run_s: float) -> float:
        """Return the seconds of work lost by evicting a job that has run ``run_s`` s in its
        current run: the work since its last checkpoint."""
        run_s = max(0.0, float(run_s))
        if self.checkpoint_s is None:
            return run_s
        return math.fmod(run_s, float(self.checkpoint_s))

    def preempt(self, job: int, run_s: float) -> Preempt:
        """Return the :class:`Preempt` item that evicts ``job`` after ``run_s`` s of its run."""
        return Preempt(job, self.lost_work_s(run_s), float(self.restart_delay_s))

    def mask(self, jobs: pl.DataFrame, order: np.ndarray | None = None) -> np.ndarray:
        """Return a bool array, per job index (``order`` as from :func:`build_trace`; None:
        input rows): the trace's ``preemptible`` column OR the seeded fraction."""
        n = jobs.height
        mask = np.zeros(n, dtype=bool)
        if "preemptible" in jobs.columns:
            mask |= jobs["preemptible"].fill_null(False).to_numpy().astype(bool)
        if self.preemptible_fraction > 0:
            rng = np.random.default_rng(self.seed)
            mask |= rng.random(n) < self.preemptible_fraction
        return mask if order is None else mask[order]

    @classmethod
    def from_options(cls, options: dict | None, *, where: str = "preemption") -> PreemptionConfig:
        """Return the config from a mapping of its options (a config's ``preemption:`` key);
        ConfigError naming ``where``, and ``where.KEY`` for a bad value, otherwise."""
        options = dict(options or {})
        known = {"preemptible_fraction", "seed", "checkpoint_s", "restart_delay_s"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown option(s) {unknown}; use "
                              f"{', '.join(sorted(known))}")
        for key, value in options.items():
            problem = cls.problem(key, value)
            if problem:
                raise ConfigError(f"{where}.{key}: {problem}")
        return cls(**options)

    def to_dict(self) -> dict:
        """Return the options as a JSON-ready dict."""
        return {"preemptible_fraction": self.preemptible_fraction, "seed": self.seed,
                "checkpoint_s": self.checkpoint_s, "restart_delay_s": self.restart_delay_s}


def newest_victims(loans: list[int], gpus: list[int], need: int) -> list[int] | None:
    """Return the running loans to evict so that ``need`` more GPUs are free: from the newest
    (the end of ``loans``, which is in loan order) until they cover ``need``, then without the
    victims not needed (tried from the oldest victim; Kueue's minimal preemption set). None
    when all the loans together do not cover ``need``. ``gpus``: GPUs per job index."""
    victims, got = [], 0
    for j in reversed(loans):
        if got >= need:
            break
        victims.append(j)
        got += gpus[j]
    if got < need:
        return None
    for j in list(reversed(victims)):  # the oldest victim first: spare what is not needed
        if got - gpus[j] >= need:
            victims.remove(j)
            got -= gpus[j]
    return victims


class _State(SimState):
    """SimState plus real end times, preemption counts and wasted seconds (per job index)."""

    __slots__ = ("end_time", "n_preempted", "wasted_s")

    def __init__(self, trace: TraceArrays):
        super().__init__(trace)
        self.end_time = np.full(trace.n_jobs, np.nan)
        self.n_preempted = np.zeros(trace.n_jobs, dtype=np.int64)
        #: seconds of work lost plus restart delays charged by preemptions
        self.wasted_s = np.zeros(trace.n_jobs)

    def grow(self, n_old: int) -> None:
        """SimState.grow, and the end times, preemption counts and waste of the new jobs."""
        from sia.data.growth import extend

        super().grow(n_old)
        k = self.trace.n_jobs - n_old
        self.end_time = extend(self.end_time, np.full(k, np.nan))
        self.n_preempted = extend(self.n_preempted, np.zeros(k, dtype=np.int64))
        self.wasted_s = extend(self.wasted_s, np.zeros(k))


class PolicyError(SiaError):
    """A policy asked for something the simulator cannot do (bad start, stall, bad wake-up)."""


def policy_name(policy: object) -> str:
    """Return the policy's ``name`` attribute, else its class name."""
    return str(getattr(policy, "name", None) or type(policy).__name__)


def build_trace(jobs: pl.DataFrame, pools: pl.DataFrame, speedup: float = 1.0
                ) -> tuple[TraceArrays, np.ndarray]:
    """Return (TraceArrays in arrival order, order) for a canonical job table and pools table.

    ``order[i]`` is the input row of job index ``i``; durations are divided by
    ``speedup``. Pools are indexed in sorted-name order. Raises TraceError if
    the tables break the contract or a job is wider than the whole cluster.
    """
    check_jobs(jobs)
    if not speedup > 0 or not math.isfinite(speedup):
        raise ConfigError(f"speedup must be a positive number, got {speedup}")
    pools = pools.sort("pool")
    names = tuple(pools["pool"].to_list())
    quota = pools["quota_gpus"].to_numpy().astype(np.int64)
    total = int(quota.sum())
    if jobs.height:
        widest = jobs.row(int(jobs["num_gpus"].arg_max()), named=True)
        if widest["num_gpus"] > total:
            raise TraceError(
                f"job {widest['job_id']!r} needs {widest['num_gpus']} GPUs but the whole cluster "
                f"has {total} (sum of the pools' quotas); it could never run"
            )
    check_pools(pools, jobs)
    order = (
        jobs.select(pl.arg_sort_by(["submit_time", "job_id"], maintain_order=True))
        .to_series()
        .to_numpy()
    )
    index = {n: i for i, n in enumerate(names)}
    pool_idx = (
        jobs["pool"].replace_strict(index, return_dtype=pl.Int64).to_numpy()[order]
        if jobs.height
        else np.zeros(0, dtype=np.int64)
    )
    trace = TraceArrays.build(
        job_ids=jobs["job_id"].to_numpy()[order],
        submit=jobs["submit_time"].to_numpy()[order],
        duration=jobs["duration"].to_numpy()[order] / speedup,
        num_gpus=jobs["num_gpus"].to_numpy()[order],
        pool=pool_idx,
        tag=jobs["tag"].to_numpy()[order],
        pool_names=names,
        quota=quota,
        speedup=speedup,
        user=jobs["user"].to_numpy()[order] if "user" in jobs.columns else None,
        time_limit=(jobs["time_limit"].cast(pl.Float64).to_numpy()[order] / speedup
                    if "time_limit" in jobs.columns else None),
        # (a hold is a wait on the submissions' clock, which the speed-up leaves as it is)
        hold=(jobs["hold_time"].cast(pl.Float64).to_numpy()[order]
              if "hold_time" in jobs.columns else None),
    )
    return trace, order


def simulate(
    jobs: pl.DataFrame,
    pools: pl.DataFrame,
    policy: Policy,
    *,
    tick_s: float = 300.0,
    speedup: float = 1.0,
    check_invariants: bool = False,
    progress: bool = False,
    gpus_per_server: int = 8,
    preemption: PreemptionConfig | None = None,
) -> pl.DataFrame:
    """Replay ``jobs`` on a cluster of ``pools`` under ``policy``; return one row per job.

    ``jobs`` is a canonical job table, ``pools`` a pools table (``pool``,
    ``quota_gpus``); the cluster has sum(quota) GPUs on servers of
    ``gpus_per_server``. Durations are divided by ``speedup``. ``tick_s`` is
    the period of the tick in seconds (ticks fall on multiples of it and are
    sent only while jobs are pending and the policy uses ticks).

    Returns a DataFrame in the input's row order with columns
    :data:`RESULT_COLUMNS`: ``duration`` is the replayed duration (s),
    ``start_time`` / ``end_time`` in seconds, ``opportunistic`` true when the
    job ran beyond its pool's quota, ``preemptible`` whether it could be preempted,
    ``preemptions`` how often it was and ``wasted_gpu_s`` what that cost (GPU-seconds).

    ``preemption`` (default ``PreemptionConfig()``: only the trace's
    ``preemptible`` column, 30-min checkpoints, 2-min restarts) says which jobs a
    policy may preempt and at what cost; it is handed to the policy as
    ``cluster.preemptible`` (bool per job index) and ``cluster.preemption``.
    """
    if not tick_s > 0:
        raise ConfigError(f"tick_s must be > 0 seconds, got {tick_s}")
    trace, order = build_trace(jobs, pools, speedup)
    cluster = Cluster(trace.quota, gpus_per_server=gpus_per_server, track_gpus=check_invariants)
    preemption = preemption if preemption is not None else PreemptionConfig()
    mask = preemption.mask(jobs, order)
    cluster.preemptible = mask
    cluster.preemption = preemption
    state = run_trace(trace, cluster, policy, tick_s=tick_s, check_invariants=check_invariants,
                      progress=progress)
    return result_table(trace, order, state, jobs, mask)


def result_table(trace: TraceArrays, order: np.ndarray, state: SimState,
                 jobs: pl.DataFrame, preemptible: np.ndarray | None = None) -> pl.DataFrame:
    """Return the per-job result table (input row order) from a finished replay's state;
    ``preemptible``: bool per job index (None: none)."""
    n = trace.n_jobs
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.arange(n)
    start = state.start_time[inverse]
    duration = trace.duration[inverse]
    ends = getattr(state, "end_time", None)
    end = start + duration if ends is None else ends[inverse]
    n_pre = getattr(state, "n_preempted", None)
    n_pre = np.zeros(n, dtype=np.int64) if n_pre is None else n_pre[inverse]
    wasted = getattr(state, "wasted_s", None)
    wasted = np.zeros(n) if wasted is None else wasted[inverse] * trace.num_gpus[inverse]
    pre = np.zeros(n, dtype=bool) if preemptible is None else np.asarray(preemptible)[inverse]
    return pl.DataFrame(
        {
            "job_id": jobs["job_id"],
            "pool": jobs["pool"],
            "submit_time": jobs["submit_time"],
            "duration": pl.Series(duration, dtype=pl.Float64),
            "num_gpus": jobs["num_gpus"],
            "start_time": pl.Series(start, dtype=pl.Float64),
            "end_time": pl.Series(end, dtype=pl.Float64),
            "opportunistic": pl.Series(state.opportunistic[inverse], dtype=pl.Boolean),
            "preemptible": pl.Series(pre, dtype=pl.Boolean),
            "preemptions": pl.Series(n_pre, dtype=pl.Int64),
            "wasted_gpu_s": pl.Series(wasted, dtype=pl.Float64),
        }
    )


def run_trace(
    trace: TraceArrays,
    cluster: Cluster,
    policy: Policy,
    *,
    tick_s: float = 300.0,
    check_invariants: bool = False,
    progress: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> SimState:
    """Run the event loop on prepared arrays; return the final state (start times, flags).

    The lower-level entry point of :func:`simulate` (which builds ``trace``
    and ``cluster`` from tables). ``on_progress(done, total)`` is called now
    and then with the number of completed jobs, when given.
    """
    loop = _EventLoop(trace, cluster, policy, tick_s, check_invariants)
    n = trace.n_jobs
    bar = _Progress(n, loop.name) if progress and on_progress is None else None
    report = on_progress or (bar.update if bar is not None else None)
    try:
        loop.run(report, max(1, n // 200))
    finally:
        if bar is not None:
            bar.close()
    if report is not None:
        report(loop.n_done, n)
    return loop.state


class _EventLoop:
    """One replay's event loop (:func:`run_trace`): the simulator's own counters and queues.

    Each instant: completions, then arrivals, then one decision whose items
    (preemptions and starts) are validated and applied, then the next wake-up
    and tick. Per-job lists are Python lists (fast scalar updates).
    """

    __slots__ = ("name", "trace", "cluster", "n", "state", "view", "decide", "wakeup_fn",
                 "uses_ticks", "tick_s", "refused", "place_batch", "holds", "check_invariants", "submit",
                 "left", "seg_start", "end_at", "preempted_any", "gpus", "pool_of", "quota", "status", "heap", "n_done",
                 "next_arrival", "idle_calls", "next_wakeup_at", "next_tick_at")

    def __init__(self, trace: TraceArrays, cluster: Cluster, policy: Policy, tick_s: float,
                 check_invariants: bool):
        self.name = policy_name(policy)
        self.trace, self.cluster, self.n = trace, cluster, trace.n_jobs
        cluster.reset()
        self.state = _State(trace)
        self.view = SimView(self.state, cluster)
        policy.reset(trace, cluster)
        self.decide = policy.decide
        # the placer stage: a cluster that places batches, for a policy that takes refusals
        self.refused = getattr(policy, "refused", None)
        self.place_batch = getattr(cluster, "place_batch", None) if self.refused else None
        #: cells held by the view's can_place in this decision: job -> (GPU ids, opportunistic)
        self.holds: dict[int, tuple[tuple[int, ...], bool]] = {}
        if getattr(cluster, "cell_aware", False):
            self.view._probe = self._hold if self.place_batch is not None else self._no_placer
        self.wakeup_fn = getattr(policy, "next_wakeup", None)
        self.uses_ticks = bool(getattr(policy, "uses_ticks", True))
        self.tick_s, self.check_invariants = tick_s, check_invariants
        n = self.n
        self.submit = trace.submit.tolist()
        self.left = trace.duration.tolist()  # work left in the current run (s), changed only by preemption
        self.seg_start = [0.0] * n  # start of the current run
        self.end_at = [math.inf] * n  # live heap entry of each running job
        self.preempted_any = False
        self.gpus = trace.num_gpus.tolist()
        self.pool_of = trace.pool.tolist()
        self.quota = trace.quota.tolist()
        self.status = bytearray(n)  # _FUTURE
        self.heap: list[tuple[float, int]] = []
        # where the loop stands between calls of advance() (a replay calls it once)
        self.n_done = self.next_arrival = self.idle_calls = 0
        self.next_wakeup_at = self.next_tick_at = math.inf

    def grow(self) -> int:
        """Take the jobs appended to the trace (:meth:`TraceArrays.grow`) since the loop was
        built or last grown, none of which has arrived; return the old number of jobs. The
        loop then goes on as a loop built on the grown trace would (the live service, which
        also grows the policy: :mod:`sia.service.core`)."""
        trace, n_old = self.trace, self.n
        k = trace.n_jobs - n_old
        self.state.grow(n_old)
        self.submit.extend(trace.submit[n_old:].tolist())
        self.left.extend(trace.duration[n_old:].tolist())
        self.seg_start.extend([0.0] * k)
        self.end_at.extend([math.inf] * k)
        self.gpus.extend(trace.num_gpus[n_old:].tolist())
        self.pool_of.extend(trace.pool[n_old:].tolist())
        self.status.extend(bytes(k))  # _FUTURE
        self.n = trace.n_jobs
        return n_old

    def run(self, report: Callable[[int, int], None] | None, report_every: int) -> None:
        """Replay until every job is done (PolicyError if the policy stalls)."""
        self.advance(math.inf, report, report_every)

    def advance(self, horizon: float, report: Callable[[int, int], None] | None = None,
                report_every: int = 1) -> None:
        """Process every event instant up to ``horizon`` (s, inclusive), then return; the next
        call goes on from there. A replay calls it once with an infinite horizon; the live
        service (:mod:`sia.service.core`) calls it each time its event-time clock moves, with
        completions it learns from finish events (heap entries it pushes), so both run this
        one loop. PolicyError if the policy stalls."""
        n, heap, submit, end_at, running = self.n, self.heap, self.submit, self.end_at, self.state.running
        state, view, decide, pop, inf = self.state, self.view, self.decide, heapq.heappop, math.inf
        wakeup_fn, uses_ticks, tick_s, holds = self.wakeup_fn, self.uses_ticks, self.tick_s, self.holds
        next_arrival, n_done, idle_calls = self.next_arrival, self.n_done, self.idle_calls
        wakeup, next_tick = self.next_wakeup_at, self.next_tick_at
        while n_done < n:
            t_arr = submit[next_arrival] if next_arrival < n else inf
            if self.preempted_any:  # drop heap entries of preempted runs
                while heap and heap[0][0] != end_at[heap[0][1]]:
                    pop(heap)
            t_end = heap[0][0] if heap else inf
            now = min(t_arr, t_end, next_tick, wakeup)
            if now > horizon:
                break
            if now == inf:
                raise self._stalled(f"policy {self.name} stalled", " but nothing runs, no job is "
                                    "left to arrive and it asked for no wake-up")
            reason = 0
            if t_end == now:  # completions first: they free GPUs for this instant's decision
                reason |= _COMPLETION
                n_done += self._complete(now)
                if report is not None and n_done % report_every == 0:
                    report(n_done, n)
            if t_arr == now:
                reason |= _ARRIVAL
                next_arrival = self._arrive(now, next_arrival)
            if next_tick == now:
                reason |= _TICK
            if wakeup == now:
                reason |= _WAKEUP
                wakeup = inf
            state.now = now
            state.reason = _REASONS[reason]
            view._invalidate()
            items = decide(view)
            if (items or holds) and self.place_batch is not None:
                items = self._place(items, now)
            if items:
                self._apply(items, now)
            state.touched.clear()
            if items or heap or next_arrival < n:
                idle_calls = 0
            else:
                idle_calls += 1
                if idle_calls > _MAX_IDLE_CALLS:
                    raise self._stalled(
                        f"policy {self.name} stalled at t={now:.3f}s", ", the cluster is idle and "
                        f"no job is left to arrive, but {_MAX_IDLE_CALLS} calls in a row started "
                        "nothing")
            if wakeup_fn is not None:
                wakeup = self._next_wakeup(now)
            if uses_ticks and next_arrival - len(running) - n_done:  # jobs pending
                next_tick = (math.floor(now / tick_s) + 1) * tick_s
                if next_tick <= now:  # float rounding at huge times
                    next_tick = now + tick_s
            else:
                next_tick = inf
            if self.check_invariants:
                _check_state(state, self.cluster, self.status, self.trace)
        self.next_arrival, self.n_done, self.idle_calls = next_arrival, n_done, idle_calls
        self.next_wakeup_at, self.next_tick_at = wakeup, next_tick

    def _stalled(self, what: str, why: str) -> PolicyError:
        """Return the error for a policy that leaves jobs pending forever."""
        pending = self.state.pending
        n_pending = sum(len(p) for p in pending)
        return PolicyError(f"{what}: {n_pending} job(s) pending (e.g. job "
                           f"{_first_pending_id(self.trace, pending)}){why}")

    def _next_wakeup(self, now: float) -> float:
        """Ask the policy for its next wake-up (the answer replaces any earlier one; None cancels)."""
        w = self.wakeup_fn(now)
        if w is None:
            return math.inf
        if not w > now:
            raise PolicyError(f"policy {self.name} at t={now:.3f}s asked to wake up at {w}, not later")
        return float(w)

    def _complete(self, now: float) -> int:
        """Finish every run that ends at ``now``: free its GPUs, record its completion; return
        how many jobs finished."""
        heap, end_at, status, gpus, pool_of = self.heap, self.end_at, self.status, self.gpus, self.pool_of
        s = self.state
        release, opp_flag, running, touched = self.cluster.release, s.opportunistic, s.running, s.touched
        pop = heapq.heappop
        done = 0
        while heap and heap[0][0] == now:
            end, j = pop(heap)
            if end != end_at[j] or status[j] != _RUNNING:
                # a preempted run; or one stopped and restarted at no cost in the same
                # instant, whose twin entry (same end) has just completed the job
                continue
            g = gpus[j]
            p = pool_of[j]
            if self.check_invariants:
                _check_completion(j, end, self.seg_start, self.left, status, self.trace)
            s.end_time[j] = end
            release(j, g)
            if opp_flag[j]:
                s.used_opp[p] -= g
            else:
                s.used_ded[p] -= g
            del running[j]
            status[j] = _DONE
            k = s.n_comp[p]
            s.comp_end[p][k] = end
            s.comp_job[p][k] = j
            s.n_comp[p] = k + 1
            touched.add(p)
            done += 1
        return done

    def _arrive(self, now: float, j: int) -> int:
        """Queue every job that arrives at ``now`` (from job index ``j`` on) in its pool's pending
        list; return the index of the next job to arrive."""
        submit, pool_of, status, n = self.submit, self.pool_of, self.status, self.n
        pending, touched = self.state.pending, self.state.touched
        while j < n and submit[j] == now:
            p = pool_of[j]
            pending[p].append(j)
            touched.add(p)
            status[j] = _PENDING
            j += 1
        self.state.n_arrived = j
        return j

    def _hold(self, job: int, opportunistic: bool) -> bool:
        """The view's ``can_place`` on a cell-aware cluster: hold a cell for pending ``job`` now
        (after the cells held earlier in this decision); True when it got one."""
        now = self.state.now
        if not (0 <= job < self.n) or self.status[job] != _PENDING:
            raise PolicyError(f"policy {self.name} at t={now:.3f}s asked can_place for job "
                              f"{_job_label(self.trace, job)} which is "
                              f"{_status_word(self.status, job, self.n)}, not pending")
        try:
            gpus = self.cluster.try_place(job, self.pool_of[job], self.gpus[job], not opportunistic)
        except PlacementError as exc:
            raise PolicyError(f"policy {self.name} at t={now:.3f}s: {exc}") from exc
        if gpus is None:
            return False
        self.holds[job] = (gpus, bool(opportunistic))
        return True

    def _no_placer(self, job: int, opportunistic: bool) -> bool:
        """The view's ``can_place`` on cells for a policy without the placer stage: an error."""
        raise PolicyError(f"policy {self.name} asked can_place on cells but has no refused(jobs): "
                          "only a policy the simulator's placer stage places may ask")

    def _take_holds(self, items: list, now: float) -> list:
        """Give the starts the view's ``can_place`` held a cell for their cell; free the cells
        held for jobs the decision did not start."""
        holds, out = self.holds, []
        for it in items:
            if type(it) is not Preempt and it[2] is None:
                h = holds.pop(int(it[0]), None)
                if h is not None:
                    if h[1] != bool(it[1]):
                        kind = "opportunistic" if h[1] else "dedicated"
                        raise PolicyError(
                            f"policy {self.name} at t={now:.3f}s started job "
                            f"{_job_label(self.trace, int(it[0]))} with another kind than the "
                            f"{kind} start it asked can_place for")
                    it = Start(int(it[0]), h[1], h[0])
            out.append(it)
        for j in holds:
            self.cluster.drop_grant(j)
        holds.clear()
        return out

    def _place(self, items: list, now: float) -> list:
        """The placer stage: place the decision's starts that came without a placement as one
        batch (a start ``can_place`` held a cell for takes that cell); return the items with
        the granted placements, without the refused starts, whose jobs (still pending) go back
        to the policy's ``refused(jobs)``."""
        if self.holds:
            items = self._take_holds(items, now)
        status, n = self.status, self.n
        todo = [(j, self.pool_of[j], self.gpus[j], not it[1]) for it in items
                if type(it) is not Preempt and it[2] is None
                and 0 <= (j := int(it[0])) < n and status[j] == _PENDING]
        if not todo:
            return items
        try:
            granted = self.place_batch(todo)
        except PlacementError as exc:
            raise PolicyError(f"policy {self.name} at t={now:.3f}s: {exc}") from exc
        asked = {t[0] for t in todo}
        out = []
        for it in items:
            j = int(it[0])
            if type(it) is Preempt or j not in asked:
                out.append(it)
            elif j in granted:
                out.append(Start(j, bool(it[1]), granted[j]))
        if len(granted) < len(todo):
            self.refused([t[0] for t in todo if t[0] not in granted])
        return out

    def _apply(self, items: list, now: float) -> None:
        """Validate and apply the decision's items in order (preemptions and starts)."""
        name, trace, cluster, n = self.name, self.trace, self.cluster, self.n
        status, gpus, pool_of, quota = self.status, self.gpus, self.pool_of, self.quota
        s = self.state
        used_ded, pending, n_preempted = s.used_ded, s.pending, s.n_preempted
        for item in items:
            if type(item) is Preempt:
                self._preempt(item, now)
                continue
            j = int(item[0])
            if not (0 <= j < n) or status[j] != _PENDING:
                raise PolicyError(
                    f"policy {name} at t={now:.3f}s started job {_job_label(trace, j)} which is "
                    f"{_status_word(status, j, n)}, not pending"
                )
            g = gpus[j]
            p = pool_of[j]
            opp = bool(item[1])
            placement = item[2] if len(item) > 2 else None
            if not cluster.can_place(g, placement):
                raise PolicyError(
                    f"policy {name} at t={now:.3f}s started job {_job_label(trace, j)} needing "
                    f"{g} GPUs but only {cluster.free} are free"
                )
            if not opp and used_ded[p] + g > quota[p]:
                raise PolicyError(
                    f"policy {name} at t={now:.3f}s started job {_job_label(trace, j)} "
                    f"({g} GPUs) as dedicated but pool {trace.pool_names[p]!r} already uses "
                    f"{used_ded[p]} of its quota {quota[p]}; start it as opportunistic"
                )
            try:
                cluster.allocate(j, g, placement)
            except PlacementError as exc:
                raise PolicyError(f"policy {name} at t={now:.3f}s: {exc}") from exc
            plist = pending[p]
            del plist[bisect_left(plist, j)]
            status[j] = _RUNNING
            if not n_preempted[j]:
                s.start_time[j] = now
            self.seg_start[j] = now
            if opp:
                s.opportunistic[j] = True
                s.used_opp[p] += g
            else:
                used_ded[p] += g
            s.running[j] = None
            end = self.end_at[j] = now + self.left[j]
            heapq.heappush(self.heap, (end, j))

    def _preempt(self, item: Preempt, now: float) -> None:
        """Stop running job ``item.job``, charge its costs and put it back in its pool's queue."""
        j, n, s = int(item.job), self.n, self.state
        if not (0 <= j < n) or self.status[j] != _RUNNING:
            raise PolicyError(
                f"policy {self.name} at t={now:.3f}s preempted job {_job_label(self.trace, j)} "
                f"which is {_status_word(self.status, j, n)}, not running"
            )
        if not (item.lost_work_s >= 0 and item.restart_delay_s >= 0):
            raise PolicyError(f"policy {self.name}: preemption costs must be >= 0, got {item}")
        g = self.gpus[j]
        p = self.pool_of[j]
        self.cluster.release(j, g)
        if s.opportunistic[j]:
            s.used_opp[p] -= g
            s.opportunistic[j] = False
        else:
            s.used_ded[p] -= g
        done = now - self.seg_start[j]
        lost = min(float(item.lost_work_s), done)
        self.left[j] = self.left[j] - done + lost + float(item.restart_delay_s)
        s.wasted_s[j] += lost + float(item.restart_delay_s)
        self.end_at[j] = math.inf
        del s.running[j]
        self.status[j] = _PENDING
        insort(s.pending[p], j)
        s.n_preempted[j] += 1
        self.preempted_any = True
        s.touched.add(p)


_MAX_IDLE_CALLS = 100_000

_STATUS_WORDS = {_FUTURE: "not yet arrived", _PENDING: "pending", _RUNNING: "already running",
                 _DONE: "already finished"}


def _status_word(status: bytearray, j: int, n: int) -> str:
    if not (0 <= j < n):
        return f"not a job index (0..{n - 1})"
    return _STATUS_WORDS[status[j]]


def _job_label(trace: TraceArrays, j: int) -> str:
    if 0 <= j < trace.n_jobs:
        return f"{trace.job_ids[j]!r} (index {j})"
    return f"index {j}"


def _first_pending_id(trace: TraceArrays, pending: list[list[int]]) -> str:
    heads = [p[0] for p in pending if p]
    return _job_label(trace, min(heads)) if heads else "-"


def _check_completion(j: int, end: float, seg_start: list[float], left: list[float],
                      status: bytearray, trace: TraceArrays) -> None:
    """Assert job ``j`` ends exactly its (remaining) duration after its current run started."""
    assert status[j] == _RUNNING, f"job {_job_label(trace, j)} completes but is not running"
    s = seg_start[j]
    assert end == s + left[j], (
        f"job {_job_label(trace, j)} ran from {s} to {end}, not its duration {left[j]}"
    )


def _check_state(state: SimState, cluster: Cluster, status: bytearray, trace: TraceArrays) -> None:
    """Assert the simulator's invariants (check_invariants mode); O(jobs) per call."""
    cluster.check()
    now = state.now
    P = trace.n_pools
    ded = np.zeros(P, dtype=np.int64)
    opp = np.zeros(P, dtype=np.int64)
    run = np.fromiter(state.running, dtype=np.int64, count=len(state.running))
    if run.size:
        np.add.at(ded, trace.pool[run], np.where(state.opportunistic[run], 0, trace.num_gpus[run]))
        np.add.at(opp, trace.pool[run], np.where(state.opportunistic[run], trace.num_gpus[run], 0))
        assert set(cluster.held) == set(state.running) if cluster.track_gpus else True, (
            "GPU holders differ from running jobs"
        )
    assert (ded == np.array(state.used_ded)).all(), f"dedicated use {state.used_ded} != {ded}"
    assert (opp == np.array(state.used_opp)).all(), f"opportunistic use {state.used_opp} != {opp}"
    over = np.flatnonzero(ded > trace.quota)
    assert not over.size, (
        f"t={now}: pool {trace.pool_names[over[0]]!r} uses {ded[over[0]]} dedicated GPUs "
        f"over its quota {trace.quota[over[0]]}"
    )
    assert cluster.free == cluster.total_gpus - int(ded.sum() + opp.sum()), "free GPU count is off"
    st = np.frombuffer(bytes(status), dtype=np.uint8)
    started = ~np.isnan(state.start_time)
    requeued = (st == _PENDING) & (getattr(state, "n_preempted", np.zeros(len(st))) > 0)
    assert (started == ((st >= _RUNNING) | requeued)).all(), "start times disagree with job status"
    assert (state.start_time[started] >= trace.submit[started]).all(), "a job started before it arrived"
    assert (state.start_time[started] <= now).all(), "a job has a start time in the future"
    assert (trace.submit[st > _FUTURE] <= now).all() and (trace.submit[st == _FUTURE] >= now).all()
    for p, plist in enumerate(state.pending):
        arr = np.asarray(plist, dtype=np.int64)
        assert (np.diff(arr) > 0).all(), f"pool {p}: pending list not in arrival order"
        assert (st[arr] == _PENDING).all() and (trace.pool[arr] == p).all(), "pending list is wrong"
    assert sum(len(p) for p in state.pending) == int((st == _PENDING).sum()), "lost a pending job"


class _Progress:
    """A rich progress bar over completed jobs."""

    def __init__(self, total: int, name: str):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self._p = Progress(
            f"replay {name}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            transient=True,
        )
        self._task = self._p.add_task("replay", total=total)
        self._p.start()

    def update(self, done: int, total: int) -> None:
        self._p.update(self._task, completed=done)

    def close(self) -> None:
        self._p.stop()
