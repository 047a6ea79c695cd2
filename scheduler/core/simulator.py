"""Discrete-event, open-loop trace replay (DESIGN.md 6.1).

Events are job arrivals (at their trace submit times: open loop), job
completions, a periodic tick (only while jobs are pending, and only for
policies that use ticks) and wake-ups a policy asks for. All events at the
same instant are applied first (completions, then arrivals), then the policy
is called once with a :class:`~sia.scheduler.core.view.SimView` and returns the
jobs to start. Jobs are gang-scheduled and run to completion, unless the
policy returns a :class:`Preempt` for a running job (partial preemption, SIA
5.5; only the locality layer's policies do): the job's GPUs are released at
once, it goes back to its pool's pending list, and when it starts again it
runs what was left of its work plus ``lost_work_s`` (work since its last
checkpoint, at most what it had done in that run) plus ``restart_delay_s``.
Its ``start_time`` stays its first start; ``end_time`` is its real end.

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
from typing import NamedTuple

import numpy as np
import polars as pl
from sia.data.errors import ConfigError, SiaError, TraceError
from sia.data.schema import check_jobs, check_pools
from sia.scheduler.core.cluster import Cluster, PlacementError
from sia.scheduler.core.view import Policy, Reason, SimState, SimView, TraceArrays

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
)


class Preempt(NamedTuple):
    """A decision item that stops running job ``job`` (index) and puts it back in its pool's queue.

    ``lost_work_s``: seconds of work it loses (capped at what it did in this
    run); ``restart_delay_s``: seconds added to its next run.
    """

    job: int
    lost_work_s: float = 0.0
    restart_delay_s: float = 0.0


class _State(SimState):
    """SimState plus real end times and preemption counts (per job index)."""

    __slots__ = ("end_time", "n_preempted")

    def __init__(self, trace: TraceArrays):
        super().__init__(trace)
        self.end_time = np.full(trace.n_jobs, np.nan)
        self.n_preempted = np.zeros(trace.n_jobs, dtype=np.int64)


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
    job ran beyond its pool's quota.
    """
    if not tick_s > 0:
        raise ConfigError(f"tick_s must be > 0 seconds, got {tick_s}")
    trace, order = build_trace(jobs, pools, speedup)
    cluster = Cluster(trace.quota, gpus_per_server=gpus_per_server, track_gpus=check_invariants)
    state = run_trace(trace, cluster, policy, tick_s=tick_s, check_invariants=check_invariants,
                      progress=progress)
    return result_table(trace, order, state, jobs)


def result_table(trace: TraceArrays, order: np.ndarray, state: SimState,
                 jobs: pl.DataFrame) -> pl.DataFrame:
    """Return the per-job result table (input row order) from a finished replay's state."""
    n = trace.n_jobs
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.arange(n)
    start = state.start_time[inverse]
    duration = trace.duration[inverse]
    ends = getattr(state, "end_time", None)
    end = start + duration if ends is None else ends[inverse]
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
    name = policy_name(policy)
    n = trace.n_jobs
    cluster.reset()
    state = _State(trace)
    view = SimView(state, cluster)
    policy.reset(trace, cluster)
    decide = policy.decide
    wakeup_fn = getattr(policy, "next_wakeup", None)
    uses_ticks = bool(getattr(policy, "uses_ticks", True))

    submit = trace.submit.tolist()
    duration = trace.duration.tolist()
    left = list(duration)  # work left in the current run (s), changed only by preemption
    seg_start = [0.0] * n  # start of the current run
    end_at = [math.inf] * n  # live heap entry of each running job
    end_time = state.end_time
    n_preempted = state.n_preempted
    preempted_any = False
    gpus = trace.num_gpus.tolist()
    pool_of = trace.pool.tolist()
    quota = trace.quota.tolist()
    status = bytearray(n)  # _FUTURE
    start_time = state.start_time
    opp_flag = state.opportunistic
    pending = state.pending
    used_ded = state.used_ded
    used_opp = state.used_opp
    comp_end = state.comp_end
    comp_job = state.comp_job
    n_comp = state.n_comp
    running = state.running
    touched = state.touched
    heap: list[tuple[float, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    allocate, release, can_place = cluster.allocate, cluster.release, cluster.can_place
    inf = math.inf

    next_arrival = 0  # index of the next job to arrive
    n_pending = 0
    n_done = 0
    wakeup = inf
    next_tick = inf
    idle_calls = 0
    bar = _Progress(n, name) if progress and on_progress is None else None
    report = on_progress or (bar.update if bar is not None else None)
    report_every = max(1, n // 200)

    try:
        while n_done < n:
            t_arr = submit[next_arrival] if next_arrival < n else inf
            if preempted_any:  # drop heap entries of preempted runs
                while heap and heap[0][0] != end_at[heap[0][1]]:
                    pop(heap)
            t_end = heap[0][0] if heap else inf
            now = min(t_arr, t_end, next_tick, wakeup)
            if now == inf:
                raise PolicyError(
                    f"policy {name} stalled: {n_pending} job(s) pending (e.g. job "
                    f"{_first_pending_id(trace, pending)}) but nothing runs, no job is left to "
                    "arrive and it asked for no wake-up"
                )
            reason = 0
            # completions first: they free GPUs for this instant's decision
            if t_end == now:
                reason |= Reason.COMPLETION
                while heap and heap[0][0] == now:
                    end, j = pop(heap)
                    if end != end_at[j] or status[j] != _RUNNING:
                        # a preempted run; or one stopped and restarted at no cost in the same
                        # instant, whose twin entry (same end) has just completed the job
                        continue
                    g = gpus[j]
                    p = pool_of[j]
                    if check_invariants:
                        _check_completion(j, end, seg_start, left, status, trace)
                    end_time[j] = end
                    release(j, g)
                    if opp_flag[j]:
                        used_opp[p] -= g
                    else:
                        used_ded[p] -= g
                    del running[j]
                    status[j] = _DONE
                    k = n_comp[p]
                    comp_end[p][k] = end
                    comp_job[p][k] = j
                    n_comp[p] = k + 1
                    touched.add(p)
                    n_done += 1
                if report is not None and n_done % report_every == 0:
                    report(n_done, n)
            if t_arr == now:
                reason |= Reason.ARRIVAL
                while next_arrival < n and submit[next_arrival] == now:
                    j = next_arrival
                    p = pool_of[j]
                    pending[p].append(j)
                    touched.add(p)
                    status[j] = _PENDING
                    n_pending += 1
                    next_arrival += 1
                state.n_arrived = next_arrival
            if next_tick == now:
                reason |= Reason.TICK
            if wakeup == now:
                reason |= Reason.WAKEUP
                wakeup = inf
            state.now = now
            state.reason = Reason(reason)
            view._invalidate()

            starts = decide(view)
            for s in starts:
                if type(s) is Preempt:
                    j = int(s.job)
                    if not (0 <= j < n) or status[j] != _RUNNING:
                        raise PolicyError(
                            f"policy {name} at t={now:.3f}s preempted job {_job_label(trace, j)} "
                            f"which is {_status_word(status, j, n)}, not running"
                        )
                    if not (s.lost_work_s >= 0 and s.restart_delay_s >= 0):
                        raise PolicyError(f"policy {name}: preemption costs must be >= 0, got {s}")
                    g = gpus[j]
                    p = pool_of[j]
                    release(j, g)
                    if opp_flag[j]:
                        used_opp[p] -= g
                        opp_flag[j] = False
                    else:
                        used_ded[p] -= g
                    done = now - seg_start[j]
                    left[j] = left[j] - done + min(float(s.lost_work_s), done) + float(s.restart_delay_s)
                    end_at[j] = inf
                    del running[j]
                    status[j] = _PENDING
                    insort(pending[p], j)
                    n_pending += 1
                    n_preempted[j] += 1
                    preempted_any = True
                    touched.add(p)
                    continue
                j = int(s[0])
                if not (0 <= j < n) or status[j] != _PENDING:
                    raise PolicyError(
                        f"policy {name} at t={now:.3f}s started job {_job_label(trace, j)} which is "
                        f"{_status_word(status, j, n)}, not pending"
                    )
                g = gpus[j]
                p = pool_of[j]
                opp = bool(s[1])
                placement = s[2] if len(s) > 2 else None
                if not can_place(g, placement):
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
                    allocate(j, g, placement)
                except PlacementError as exc:
                    raise PolicyError(f"policy {name} at t={now:.3f}s: {exc}") from exc
                plist = pending[p]
                del plist[bisect_left(plist, j)]
                n_pending -= 1
                status[j] = _RUNNING
                if not n_preempted[j]:
                    start_time[j] = now
                seg_start[j] = now
                if opp:
                    opp_flag[j] = True
                    used_opp[p] += g
                else:
                    used_ded[p] += g
                running[j] = None
                end_at[j] = now + left[j]
                push(heap, (end_at[j], j))
            touched.clear()
            if starts or heap or next_arrival < n:
                idle_calls = 0
            else:
                idle_calls += 1
                if idle_calls > _MAX_IDLE_CALLS:
                    raise PolicyError(
                        f"policy {name} stalled at t={now:.3f}s: {n_pending} job(s) pending (e.g. "
                        f"job {_first_pending_id(trace, pending)}), the cluster is idle and no job "
                        f"is left to arrive, but {_MAX_IDLE_CALLS} calls in a row started nothing"
                    )
            if wakeup_fn is not None:
                w = wakeup_fn(now)  # the answer replaces any earlier request; None cancels
                if w is None:
                    wakeup = inf
                elif not w > now:
                    raise PolicyError(
                        f"policy {name} at t={now:.3f}s asked to wake up at {w}, not later"
                    )
                else:
                    wakeup = float(w)
            if uses_ticks and n_pending:
                next_tick = (math.floor(now / tick_s) + 1) * tick_s
                if next_tick <= now:  # float rounding at huge times
                    next_tick = now + tick_s
            else:
                next_tick = inf
            if check_invariants:
                _check_state(state, cluster, status, trace)
    finally:
        if bar is not None:
            bar.close()
    if report is not None:
        report(n_done, n)
    return state


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
