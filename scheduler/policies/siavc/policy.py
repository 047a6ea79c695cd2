"""SIA_VC (SIA 5.1, Figure 6): virtual start times and a logical resource-time plan.

A **perfect-information (oracle) policy**: it reads every job's true
duration and the arrival times and widths of jobs that have not arrived yet
(``TraceArrays``), as the paper's stepping stone does. It is the reference for
Theorem 1, not a deployable scheduler.

At each decision instant ``now``:

1. *Virtual clock.* For each pool alone (no sharing), a forward FCFS
   simulation (:func:`sia.scheduler.policies.siavc.vst.fcfs_pool_starts`) from the pool's
   current state gives every pending and future job of the pool a virtual
   start time (VST).
2. *Plan.* The logical resource-time plan is filled with the running jobs;
   then pending and future jobs are visited in increasing VST (ties by
   arrival): a job that cannot start now (not arrived, wider than the free
   GPUs, or ``MaxReservation(now, d) + width`` above the cluster's GPUs) gets
   ``Reserve(width, VST, d)``; the first one that can start is started
   (dedicated if its pool's dedicated use allows, else opportunistic), the
   reservations are cleared and the pass restarts (Figure 6's do-while).
3. The policy asks to be woken at the smallest VST still ahead, so a job is
   visited at its VST even when nothing else happens then.

Which running jobs count against a pool in its virtual clock ("charges").
Every running job is charged, for its whole run, to the quota it occupies:
a job that starts within its pool's free charged capacity is charged to its
own pool; the GPUs it takes beyond that are charged to the pools that lend
them (those with free charged capacity now). A pool's own jobs running on
GPUs lent by others do *not* count against it; jobs it lent GPUs to do. So
at every instant each pool's charges plus its virtual jobs fit its quota, and
the sum over pools fits the cluster: the virtual schedule of all pools
together is always physically feasible. That alone does not make the VSTs
monotone: re-running a pool's virtual clock after one of its jobs started
out of order, or after it lent GPUs, can push its other jobs later. So a job
that would start *before* its VST is only started if, re-running the
virtual clocks of every pool it charges (its own and the lenders), no
not-yet-started job of those pools gets a VST after its no-sharing FCFS
start F(j) (computed once in ``reset``; the check runs until the pool's
virtual clock next finds the pool empty, after which the pool's future no
longer depends on the change). Invariants: every unstarted job has VST <= F
and VST >= now, and the virtual schedule is feasible, so every job whose VST
is now can start now (the reservations of earlier-VST jobs are part of the
feasible virtual schedule) and does. Hence every job starts by F(j): no job
ends later than under FCFS (Theorem 1). A job started exactly at its VST on
its own pool's charges leaves every virtual clock unchanged and needs no check.

Speed (the decisions are exactly those of a from-scratch re-run at every event,
checked against the first implementation, ``ReferenceSiaVC`` in the tests, decision
for decision and guard for guard): each pool's virtual clock is cached and re-run
only when it is stale (a job of it is overdue, it no longer covers the horizon, or
a guard changed its charges, in which case the guard's own re-run becomes the
cache). Virtual clocks run compiled (numba, :func:`sia.scheduler.policies.siavc.vst.fcfs_clock`).
A guard's re-run stops where it meets the cached clock (same instant, nothing that
differs still holding GPUs) and takes the rest from it; a job started wholly on
lent GPUs cannot make its own pool fail, so that pool's clock is resumed at the
job's place instead of re-run. The pools' clocks are kept merged in (VST, job)
order, updated in linear time for the span a change touched (a job started on time
leaves only a tombstone); a guard's re-run is cached cut to what a refresh would hold
(see ``_trim``), and the merge holds only the entries before a bound just past the
horizon, the pass taking the pending jobs past it from the clocks (see ``_merged``).
Each pass's bulk visit (the plan's level at every reservation start, each
candidate's MaxReservation) and the walk over its
candidates (skipping jobs dominated by an already-failed one, and guards that fail
without a re-run, which a per-(pool, width) end threshold decides: see ``_verdict``)
are compiled too (:mod:`sia.scheduler.policies.siavc.vc_pass`); only guards that re-run a clock
are decided in Python (each re-run, and each resumed clock, one compiled call: see
``_rerun`` and ``_resume_without``), and a lender's re-run is skipped when its cached
clock already shows it must fail (see ``_lender_threshold``). A pass whose first candidate sure to start
(on time, on its own quota) is reached by the walk returns only the candidates up to
it (see ``bulk_pass``), and the candidates' MaxReservation verdicts are worked out only as
the walk reaches them (see ``lazy_pass``: it usually stops a third of the way through),
and a pass over the same merge as the last one, with no start in between, takes over the
plan levels that one worked out (``lazy_pass``'s ``plan_key``: about half the passes);
a guard's re-run is handed only a few future jobs past its
cached clock's, and run again on them all if it needs more (see ``_rerun``); a
resumed clock runs a fifth of D past the horizon, not D (see ``_resume_without``);
the running jobs come from the policy's own starts (see ``_running``). Whole Philly
trace (82k jobs): see ``benchmarks/bench_siavc.py``.

On buddy cells (locality, SIA 5.5): the policy plans with GPU counts and returns its
starts without a placement; the simulator's placer stage places them as one batch and
hands back, through :meth:`SiaVCPolicy.refused`, the starts no cell fits (fragmentation,
or a pool's bound cells held by loans). A refused start is undone: the job is pending
again, its charges (to its pool and to the lenders) are taken back, the clocks of the
pools they touched are re-run from that state (the merge follows their versions) and
the wake-up is taken again, so the policy is as if the decision had not started it (the
tests check the caches against a plain re-run after every refusal, and every decision
against the plain reference with a plain ``refused``). The decision's other starts
stand. The refused job is visited again at the next decision: an arrival, a
completion or a VST ahead, all strictly later than now, so there is no retry at the same
instant; if no cell frees before, it waits for the next completion. **Theorem 1 does not
hold on cells**: fragmentation can delay a start its virtual clock found feasible, so a
job can wait past its F (and F, the fungible FCFS start, is not FCFS's start on cells
either). Once that has happened a guard checks its whole re-run for a late job (a
re-run that met the cached clock takes its rest unchecked, which before a refusal
holds none), so no early start charges a pool that has a late job. On fungible GPUs
``refused`` is never called and nothing of this runs.

Lookahead: only a pending job that fits the free GPUs can start in a
decision, and its MaxReservation reads the plan on ``[now, now + d)``; with
D the longest such job, reservations only matter on ``[now, now + D)``, so
future jobs are simulated and visited only if their VST is before
``now + D``. (With D taken over every pending job instead, one pending job of
weeks made Philly's clocks hold weeks of future arrivals.) The no-slowdown
check simulates until an idle point after ``now + D``: after any idle point
the re-run's VSTs are those of an empty pool, within F, so which idle point
it stops at does not change the outcome. The wake-up reads only VSTs of jobs
in the clocks: a future job arrives, and so triggers a decision, no later
than its VST. All of this is exact, not an approximation.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from itertools import accumulate

import numpy as np
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.needs import PolicyNeeds
from sia.scheduler.core.view import SimView, Start, TraceArrays
from sia.scheduler.policies.siavc.vc_pass import (
    CandidateWalk,
    PassScratch,
    WalkTables,
    changed_span,
    cut_merged,
    drop_job,
    lazy_pass,
    merge_clocks,
    next_vst,
    pending_tail,
    update_merged,
)
from sia.scheduler.policies.siavc.vst import (
    NO_ARRAY,
    fcfs_baseline_starts,
    fcfs_clock_kernel,
    first_short,
    guard_clock,
    resume_clock,
)

_EPS = 1e-6  # seconds
#: the merged clocks hold the entries up to at least this far (s) past the horizon
_MERGE_AHEAD = 6 * 3600.0
#: future jobs a guard's re-run is handed beyond those of its cached clock (see _rerun)
_CHECK_AHEAD = 256
#: a clock resumed without a job runs this fraction of D past the horizon (_resume_without)
_RESUME_AHEAD = 0.2


class _PendingByWidth:
    """The pending jobs grouped by width, for the longest one no wider than the free GPUs and
    the narrowest one: per width a heap of (-duration s, job), jobs that started leaving
    lazily. Jobs arrive in index order; the policy reports its starts."""

    def __init__(self, gpus: list[int], dur: list[float]) -> None:
        self._gpus, self._dur = gpus, dur
        self._heaps: dict[int, list[tuple[float, int]]] = {}
        self._widths: list[int] = []  # ascending
        self._started = bytearray(len(gpus))
        self._n = 0

    def arrive(self, n_arrived: int) -> None:
        """Add the jobs that arrived since the last call (indices below ``n_arrived``)."""
        for j in range(self._n, n_arrived):
            w = self._gpus[j]
            h = self._heaps.get(w)
            if h is None:
                h = self._heaps[w] = []
                insort(self._widths, w)
            heapq.heappush(h, (-self._dur[j], j))
        self._n = max(self._n, n_arrived)

    def start(self, j: int) -> None:
        """Job ``j`` started: it is no longer pending."""
        self._started[j] = 1

    def unstart(self, j: int) -> None:
        """Job ``j``'s start did not happen (the placer refused it): it is pending again. Its
        heap entry is pushed again (it may have left lazily); a duplicate entry is harmless."""
        self._started[j] = 0
        heapq.heappush(self._heaps[self._gpus[j]], (-self._dur[j], j))

    def longest_and_narrowest(self, free: int) -> tuple[float, int]:
        """Return (the longest duration s of a pending job at most ``free`` GPUs wide, 0.0 if
        none; the narrowest pending job's width, a huge number if none)."""
        longest, narrowest = 0.0, 1 << 62
        started = self._started
        for w in self._widths:
            h = self._heaps[w]
            while h and started[h[0][1]]:
                heapq.heappop(h)
            if h:
                if w < narrowest:
                    narrowest = w
                if w <= free and -h[0][0] > longest:
                    longest = -h[0][0]
        return longest, narrowest


class SiaVCPolicy:
    """SIA_VC with perfect per-job information (an oracle policy; see the module docstring)."""

    name = "sia-vc"
    perfect_information = True
    uses_ticks = False
    needs = PolicyNeeds(locality=True)  # on cells, the simulator places its starts
    #: future jobs a guard's re-run is first handed beyond its cached clock's (see _rerun)
    check_ahead = _CHECK_AHEAD

    def __init__(self, merge_ahead: float = _MERGE_AHEAD,
                 resume_ahead: float = _RESUME_AHEAD) -> None:
        """``merge_ahead`` (s): how far past the horizon the merged clocks reach at least (see
        :meth:`_merged`); ``resume_ahead``: how far past the horizon a clock resumed without
        a job runs, as a fraction of the lookahead D (see :meth:`_resume_without`). Any
        ``merge_ahead`` > 0 and ``resume_ahead`` >= 0 give the same decisions, only the
        cost changes."""
        self._wakeup: float | None = None
        self._ahead = float(merge_ahead)
        self._resume_ahead = float(resume_ahead)

    # ------------------------------------------------------------------ setup
    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Compute each job's no-sharing FCFS start F(j) and clear the charges and VST caches."""
        self._trace = trace
        self._submit = trace.submit.tolist()
        self._dur = trace.duration.tolist()
        self._gpus = trace.num_gpus.tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()
        self._C = int(trace.quota.sum())
        F = fcfs_baseline_starts(trace.submit, trace.duration, trace.num_gpus, trace.pool,
                                 trace.quota)
        self._F = F.tolist()
        self._deadline = F + _EPS  # a guard's re-run fails past F (+1 us)
        self._pool_jobs = [pj.tolist() for pj in trace.pool_jobs]
        self._pool_jobs_np = [np.asarray(pj, dtype=np.int64) for pj in trace.pool_jobs]
        #: per pool: its jobs' arrival times (s), ascending (to cut the future a run reads)
        self._pool_submit = [np.asarray(trace.submit, dtype=np.float64)[pj]
                             for pj in self._pool_jobs_np]
        self._submit_np = np.asarray(trace.submit, dtype=np.float64)
        self._gpus_np = np.asarray(trace.num_gpus, dtype=np.int64)
        self._widest = int(self._gpus_np.max()) if self._gpus_np.size else 0
        self._pool_np = np.asarray(trace.pool, dtype=np.int64)
        self._dur_np = np.asarray(trace.duration, dtype=np.float64)
        P = trace.n_pools
        #: every pool's clock laid end to end for the pass, keyed by the pools' versions
        self._cat: tuple | None = None
        self._scratch = PassScratch()
        self._walk_tables = WalkTables()  # (the walks' tables, kept across passes)
        self._by_width = _PendingByWidth(self._gpus, self._dur)
        #: the running jobs started by this policy, in end order: (ends s, GPUs, jobs), see _running
        self._run = (np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
        self._run_min = math.inf  # no running job ends before this (s)
        #: starts so far (and refused ones): passes with the same count and the same merge see
        #: the same plan but for the running jobs over by then (see lazy_pass's plan_key)
        self._n_starts = 0
        #: per pool: charges (end time, GPUs) against its quota
        self._charges: list[list[tuple[float, int]]] = [[] for _ in range(P)]
        #: per pool: its charges as arrays (ends s, GPUs), built when read, None when changed
        self._charge_np: list[tuple[np.ndarray, np.ndarray] | None] = [None] * P
        #: per pool: GPUs its charges hold now (ending after the current decision's instant)
        self._held = [0] * P
        #: per pool: no charge of it ends before this instant (s; a lower bound, exact after a cut)
        self._cmin = [math.inf] * P
        #: no charge ends before this instant (s; a lower bound)
        self._expiry = math.inf
        #: per pool: cached virtual clock, (jobs, VSTs, GPUs free after each start) of a prefix
        #: of its unstarted jobs in arrival order (numpy; VSTs non-decreasing)
        self._vc: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = [None] * P
        self._vc_meta: list[tuple[float, float, int] | None] = [None] * P
        #: per pool: whether that prefix is all of its unstarted jobs
        #: per pool: bumped whenever its clock or charges change (keys the fast-fail memo)
        self._ver = [0] * P
        self._ff: dict[tuple[int, int], tuple] = {}
        #: verdicts of guards failing without a re-run, valid for these versions (_verdicts_for)
        self._vmemo: dict[tuple, tuple[float, int, int]] = {}
        self._vmemo_ver: tuple | None = None
        self._vc_full = [False] * P
        #: pools whose cache must be re-run at the next decision (a job started a hair early)
        self._stale: set[int] = set()
        self._reruns = 0  # guard re-runs (keys the pass's memo of guards failed without one)
        self._wakeup = None
        #: the last decision's starts: job -> its charges [(pool, end s, GPUs)] (for refused)
        self._charged: dict[int, list[tuple[int, float, int]]] = {}
        #: the last decision's (now, n_arrived, horizon, reach, pending after its starts)
        self._ctx: tuple | None = None
        #: whether a clock may hold a job past its F (only after a refused start, on cells)
        self._late = False
        self.stats = {"calls": 0, "passes": 0, "early_starts": 0, "checks_failed": 0,
                      "resims": 0, "trimmed": 0, "tails": 0, "merge_moves": 0,
                      "check_retries": 0}

    # ------------------------------------------------------------------ helpers
    def _sim(self, p: int, pending: list[int] | np.ndarray, k_future: int, now: float, *,
             until: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Run pool ``p``'s virtual clock from ``now`` (a refresh); return (jobs, VSTs, GPUs
        left free right after each start) of the prefix run, as numpy arrays: every pending
        job, then future jobs up to and including the first whose VST is at or after
        ``until``."""
        stop = self._future_upto(p, k_future, until) if until < math.inf else None
        busy_e, busy_g = self._busy(p, now)
        order = np.concatenate((np.asarray(pending, dtype=np.int64),
                                self._pool_jobs_np[p][k_future:stop]))
        vst, rem, _ = fcfs_clock_kernel(
            order, self._submit_np, self._dur_np, self._gpus_np, NO_ARRAY, False,
            self._quota[p], now, busy_e, busy_g, math.inf, False, -math.inf, until,
            len(pending), NO_ARRAY, NO_ARRAY, -math.inf)
        return order[: vst.shape[0]], vst, rem

    def _busy(self, p: int, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Pool ``p``'s charges still held after ``now``: (ends s, GPUs) as arrays."""
        ends, gpus = self._charge_arrays(p)
        held = ends > now
        return ends[held], gpus[held]

    def _charge_arrays(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Pool ``p``'s charges as arrays (ends s, GPUs), in their list's order, kept until
        they change (every change of ``self._charges[p]`` clears them): the clock runs read
        them hundreds of thousands of times, the charges change at starts only."""
        arr = self._charge_np[p]
        if arr is None:
            charges = self._charges[p]
            arr = self._charge_np[p] = (np.array([e for e, _ in charges], dtype=np.float64),
                                        np.array([g for _, g in charges], dtype=np.int64))
        return arr

    def _rerun(self, q: int, n_pend: int, without: int, k_future: int, now: float,
               horizon: float, changed_until: float, extra: int, reference: bool = True
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A guard's re-run of pool ``q``'s clock from ``now`` (its ``n_pend`` pending jobs but
        ``without`` if >= 0, then its future from position ``k_future``; its charges and
        ``extra`` GPUs tentatively charged to it until ``changed_until`` (none if 0), so
        differing from the cached clock's only until then):
        (jobs, VSTs, free GPUs). It stops after the first job whose VST passes its FCFS
        start F (+1 us), at the first idle point among jobs submitted at or after
        ``horizon``, or where it meets the cached clock, whose rest it then takes (not
        with ``reference`` False, nor while the clock is stale); see
        :func:`sia.scheduler.policies.siavc.vst.guard_clock`, which reads the pending jobs
        off the cached clock (a clock lists every pending job of its pool first: a
        refresh keeps a clock only if it reaches the last one, and every start takes its
        job out of both) and hands the run only ``check_ahead`` future jobs past the
        cached clock's at first (a re-run usually stops well within them; one that uses
        them all is run again on the pool's whole future, counted in the stats'
        ``check_retries``), so that the pool's whole future (tens of thousands of jobs
        early in Philly) is not copied for every guard."""
        cj, cv, cr = self._vc[q]
        charge_e, charge_g = self._charge_arrays(q)
        jobs, vs, rem, retries = guard_clock(
            cj, cv, cr, n_pend, without, reference and q not in self._stale,
            self._pool_jobs_np[q], k_future, self.check_ahead, charge_e, charge_g,
            changed_until if extra > 0 else -math.inf, extra, self._submit_np, self._dur_np,
            self._gpus_np, self._deadline, self._quota[q], now, horizon, changed_until)
        self.stats["check_retries"] += retries
        return jobs, vs, rem

    def _future_upto(self, p: int, k: int, until: float) -> int:
        """The end (exclusive) of pool ``p``'s future jobs from position ``k`` that a run
        stopping at ``until`` (after its pending jobs) can read: up to and including the first
        one arriving at or after ``until``, which starts there and so stops the run. Handing
        the clock only those saves copying (and sizing its arrays for) the pool's whole
        future on every run."""
        return k + int(self._pool_submit[p][k:].searchsorted(until, side="left")) + 1

    def _set_clock(self, p: int, jobs: np.ndarray, vs: np.ndarray, rem: np.ndarray) -> None:
        """Cache pool ``p``'s clock, with its ends as Python numbers for the staleness test."""
        self._vc[p] = (jobs, vs, rem)
        self._vc_meta[p] = (float(vs[0]), float(vs[-1]), int(jobs[-1])) if jobs.size else None

    def _charged_free(self, q: int) -> int:
        """Pool ``q``'s quota not charged now (the charges are cut at each decision)."""
        return self._quota[q] - self._held[q]

    def _refresh_clocks(self, pend: list[list[int]], n_arr: int, now: float, horizon: float,
                        reach: float) -> None:
        """Re-simulate each pool's clock that is stale (up to the first VST at or after
        ``reach``), keeping the others.

        A cached clock is exact while it starts at or after ``now`` (no job of it is
        overdue: re-running the same clock from a later instant gives the same
        starts), holds every pending job and reaches a VST at or after ``horizon``
        (or the pool's last job). Charges change only through :meth:`_try_charge`,
        which replaces the clocks it re-ran.
        """
        stale, vc, metas, full = self._stale, self._vc, self._vc_meta, self._vc_full
        for p, pp in enumerate(pend):
            if p in stale:
                stale.discard(p)
            elif vc[p] is not None:
                meta = metas[p]  # (first VST, last VST, last job) as Python numbers
                if meta is None:
                    if full[p] and not pp:
                        continue
                elif (meta[0] >= now and (full[p] or meta[1] >= horizon)
                      and (not pp or meta[2] >= pp[-1])):
                    continue
            self.stats["resims"] += 1
            k_future = bisect_left(self._pool_jobs[p], n_arr)
            jobs, vs, rem = self._sim(p, pp, k_future, now, until=reach)
            self._set_clock(p, jobs, vs, rem)
            self._ver[p] += 1
            full[p] = jobs.size == len(pp) + len(self._pool_jobs[p]) - k_future

    # ------------------------------------------------------------------ decide
    def decide(self, view: SimView) -> list[Start]:
        """Return the jobs to start now (Figure 6), keeping every job within its FCFS start."""
        now = view.now
        self.stats["calls"] += 1
        P = view.n_pools
        self._charged = {}
        self._ctx = None
        if self._expiry <= now:  # some charge is over: cut every pool's charges at now
            cmin = self._cmin
            for q in range(P):
                if cmin[q] <= now:
                    kept = self._charges[q] = [c for c in self._charges[q] if c[0] > now]
                    self._charge_np[q] = None
                    self._held[q] = sum(g for _, g in kept)
                    cmin[q] = min(kept)[0] if kept else math.inf
            self._expiry = min(cmin)
        # the simulator's lists, read only: a pool's is copied when a job of it starts
        pend = [view.pending(p) for p in range(P)]
        n_arr = view.n_arrived
        if not any(pend):
            self._wakeup = None
            return []
        dur, gpus, quota = self._dur, self._gpus, self._quota
        # Lookahead: only a pending job that fits the free GPUs can start in this decision,
        # and its check reads the plan on [now, now + d); so with D the longest of those,
        # future jobs matter only if their VST is before now + D
        free = view.free_gpus
        self._by_width.arrive(n_arr)
        D, min_g = self._by_width.longest_and_narrowest(free)
        horizon = now + D
        reach = horizon + D  # simulate ahead so the clock stays reusable for a while
        self._reach = reach
        self._resume_to = horizon + self._resume_ahead * D
        self._refresh_clocks(pend, n_arr, now, horizon, reach)
        starts: list[Start] = []
        if free >= min_g:
            # the running jobs' ends and widths as arrays: each pass hands them to bulk_pass
            run_e, run_g = self._running(now)
            ded = view.used_dedicated.tolist()
            while True:
                self.stats["passes"] += 1
                j = self._pass(now, horizon, n_arr, pend, free, run_e, run_g)
                if j is None:
                    break
                p, g = self._pool[j], gpus[j]
                left = pend[p] = list(pend[p])  # (a copy: see above)
                left.remove(j)
                self._by_width.start(j)
                free -= g
                self._n_starts += 1  # (keys the plan a pass hands on to the next)
                e = now + dur[j]
                k = int(run_e.searchsorted(e, side="right"))  # kept in end order
                run_e = np.concatenate((run_e[:k], (e,), run_e[k:]))
                run_g = np.concatenate((run_g[:k], (g,), run_g[k:]))
                run_j = self._run[2]
                self._run = (run_e, run_g, np.concatenate((run_j[:k], (j,), run_j[k:])))
                if ded[p] + g <= quota[p]:
                    ded[p] += g
                    starts.append(Start(j, False))
                else:
                    starts.append(Start(j, True))
                if free < min_g or not any(pend):  # no pending job fits what is left
                    break
            if starts:
                self._ctx = (now, n_arr, horizon, reach, pend)
                self._run_min = float(run_e[0])
        self._wakeup = self._first_vst_ahead(now, n_arr, horizon, P)
        return starts

    def _running(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """The running jobs' (ends s, GPUs) as arrays, from the policy's own starts: a job runs
        exactly its duration from the instant it started (the simulator's end is that same
        sum), so they are the simulator's running jobs (the tests compare them), without
        rebuilding them from the view at every decision. Jobs over by ``now`` are dropped
        here (an end at or before ``now`` counts nowhere in a pass anyway)."""
        run_e, run_g, run_j = self._run
        if run_e.size and self._run_min <= now:
            k = int(run_e.searchsorted(now, side="right"))  # in end order: a prefix is over
            run_e, run_g, run_j = run_e[k:], run_g[k:], run_j[k:]
            self._run = (run_e, run_g, run_j)
            self._run_min = float(run_e[0]) if run_e.size else math.inf
        return run_e, run_g

    def _first_vst_ahead(self, now: float, n_arr: int, horizon: float, P: int) -> float | None:
        """The wake-up: the smallest VST after ``now`` among the jobs the pass would visit (a
        job arrived, or one arriving before ``horizon``), or None."""
        submit = self._submit
        cat = self._current_merge()
        w = math.inf
        if cat is not None:  # a pool whose first VST ahead is past the merge's bound comes
            # after any found in the merge
            w = next_vst(cat[1], now=now, n_arrived=n_arr, submit=self._submit_np,
                         horizon=horizon, n_pools=P)
        if w == math.inf:
            metas = self._vc_meta
            for p in range(P):
                meta = metas[p]  # (first VST, last VST, last job); None: an empty clock
                if meta is None or meta[1] <= now:
                    continue  # no VST ahead
                jobs, vs, _ = self._vc[p]
                i = 0 if meta[0] > now else int(vs.searchsorted(now, side="right"))
                if vs[i] < w and (jobs[i] < n_arr or submit[jobs[i]] < horizon):
                    w = float(vs[i])
        return w if w < math.inf else None

    def refused(self, jobs: list[int]) -> None:
        """Undo starts of the last decision that the placer stage refused (no cell fits, on
        buddy cells; never called on fungible GPUs): each such job is pending again and its
        charges (to its pool and to the pools that lent to it) are taken back, so the
        policy's state is what it would be had the decision not started it. The virtual
        clocks of the pools those charges touched are re-run from that state (the merge
        follows their new versions), and the wake-up is taken again from the clocks as
        they are now. A refused job is visited again at the next decision (the next
        arrival, completion or VST ahead, all strictly later: no retry at the same
        instant); the other starts of the decision stand as they were decided."""
        ctx = self._ctx
        if ctx is None:
            return
        now, n_arr, horizon, reach, pend = ctx
        touched: set[int] = set()
        for j in jobs:
            j = int(j)
            charged = self._charged.pop(j, None)
            if charged is None:  # not a start of the last decision
                continue
            for q, end, s in charged:
                self._charges[q].remove((end, s))
                self._charge_np[q] = None
                if end > now:
                    self._held[q] -= s
                touched.add(q)
            p = self._pool[j]
            insort(pend[p], j)
            touched.add(p)
            self._by_width.unstart(j)
            run_e, run_g, run_j = self._run
            keep = run_j != j
            self._run = (run_e[keep], run_g[keep], run_j[keep])
            self._n_starts += 1  # the running jobs changed: no plan is handed on
        if not touched:
            return
        for q in touched:  # re-run from the charges and pending jobs as they now are
            self._ver[q] += 1
        self._late = True  # a refused job can now wait past its F
        self._stale |= touched
        self._reach = reach
        self._resume_to = min(reach, horizon + self._resume_ahead * (reach - horizon))
        self._refresh_clocks(pend, n_arr, now, horizon, reach)
        self._wakeup = self._first_vst_ahead(now, n_arr, horizon, len(pend))

    def _current_merge(self) -> tuple | None:
        """The cached merge (see :meth:`_cached`) if
        every clock is as merged, else None."""
        cat = self._cat
        return cat if cat is not None and cat[0] == tuple(self._ver) else None

    def _inbound(self, p: int, bound: float) -> tuple[np.ndarray, np.ndarray]:
        """Pool ``p``'s clock (jobs, VSTs) cut to its entries with a VST before ``bound``."""
        jobs, vs, _ = self._vc[p]
        k = int(vs.searchsorted(bound, side="left"))
        return jobs[:k], vs[:k]

    def _merged(self, horizon: float) -> tuple[tuple[np.ndarray, ...], float]:
        """Return (every pool's clock entries with a VST before a bound merged in (VST, job)
        order, see ``merge_clocks``; the bound), cached by the pools' versions. When
        clocks changed, only the entries between what each new clock shares with the
        merged one at its start and at its end are replaced (a guard's re-run keeps the
        clock's head, and its tail where it met the cached clock), in linear time.

        The bound lies past ``horizon``: a pass reads entries up to the horizon, and past
        it only the pending jobs, as candidates, which it takes from the clocks (see
        ``pending_tail``). It is set ``merge_ahead`` past the horizon when the horizon
        reaches it (the entries in between merged in) or when it lies more than four
        times that far ahead (the merge cut). So an early start that shifts its pool's
        backlog far ahead updates the merge only for the shifted entries before the
        bound."""
        key = tuple(self._ver)
        cat = self._cat
        if cat is None or cat[0] != key:
            cat = self._cat = self._merge_update(key, cat, horizon)
        if cat[3] <= horizon or cat[3] > horizon + 4 * self._ahead:
            self.stats["merge_moves"] += 1
        if cat[3] <= horizon:
            cat = self._cat = self._extend(cat, horizon + self._ahead)
        elif cat[3] > horizon + 4 * self._ahead:
            bound = horizon + self._ahead
            cat = self._cat = self._cached(cat[0], cut_merged(cat[1], bound),
                                           [self._inbound(p, bound) for p in range(len(cat[0]))],
                                           bound)
        return cat[1], cat[3]

    @staticmethod
    def _cached(key: tuple, merged: tuple, inb: list, bound: float) -> tuple:
        """The merge as cached: (the pools' versions, the merged entries, each pool's clock cut
        to the bound, the bound, each cut clock's length)."""
        return (key, merged, inb, bound, [j.shape[0] for j, _ in inb])

    def _extend(self, cat: tuple, bound: float) -> tuple:
        """The current merge ``cat`` with its bound moved on to ``bound``: each clock's entries
        between the two bounds merged in."""
        P = len(cat[0])
        parts, pools = [], []
        inb = list(cat[2])
        for p in range(P):
            a = inb[p][0].shape[0]
            jobs, vs = inb[p] = self._inbound(p, bound)
            if jobs.shape[0] > a:
                parts.append((jobs[a:], vs[a:]))
                pools.append(p)
        if not parts:
            return self._cached(cat[0], cat[1], inb, bound)
        seg = np.array([0, *accumulate(j.shape[0] for j, _ in parts)], dtype=np.int64)
        J = np.concatenate([j for j, _ in parts])
        new = update_merged(cat[1], np.ones(P, dtype=np.int64), np.zeros(P, dtype=np.int64),
                            np.concatenate([v for _, v in parts]), J, self._gpus_np[J],
                            self._dur_np[J], seg, pools)
        return self._cached(cat[0], new, inb, bound)

    def _merge_update(self, key: tuple, cat: tuple | None, horizon: float) -> tuple:
        """The new cached merge of :meth:`_merged`, from ``cat`` (the previous one or None)."""
        P = len(key)
        if cat is None:
            bound = horizon + self._ahead
            inb = [self._inbound(p, bound) for p in range(P)]
            J = np.concatenate([j for j, _ in inb])
            seg = np.zeros(P + 1, dtype=np.int64)
            np.cumsum([j.shape[0] for j, _ in inb], out=seg[1:])
            new = merge_clocks(np.concatenate([v for _, v in inb]), J, self._gpus_np[J],
                               self._dur_np[J], seg)
            return self._cached(key, new, inb, bound)
        bound = cat[3]
        inb = list(cat[2])
        changed, js, vs = [], [], []
        lo = np.ones(P, dtype=np.int64)
        hi = np.zeros(P, dtype=np.int64)
        for p in range(P):
            if key[p] == cat[0][p]:
                continue
            oj, ov = inb[p]
            nj, nv = inb[p] = self._inbound(p, bound)
            pre, suf = changed_span(oj, ov, nj, nv)
            if pre + suf < oj.shape[0]:
                lo[p], hi[p] = oj[pre], oj[oj.shape[0] - suf - 1]
            if pre + suf < nj.shape[0]:
                changed.append(p)
                js.append(nj[pre: nj.shape[0] - suf])
                vs.append(nv[pre: nj.shape[0] - suf])
        if not changed and not (lo <= hi).any():  # re-run to the same entries: kept as merged
            return self._cached(key, cat[1], inb, bound)
        seg = np.array([0, *accumulate(x.shape[0] for x in js)], dtype=np.int64)
        J = np.concatenate(js) if js else np.empty(0, dtype=np.int64)
        new = update_merged(cat[1], lo, hi, np.concatenate(vs) if vs else np.empty(0), J,
                            self._gpus_np[J], self._dur_np[J], seg, changed)
        return self._cached(key, new, inb, bound)

    def _pass(self, now: float, horizon: float, n_arr: int, pend: list[list[int]], free: int,
              run_e: np.ndarray, run_g: np.ndarray) -> int | None:
        """One pass of Figure 6's do-while: return the first job that starts, or None.

        Jobs are visited in (VST, index) order (the pools' sorted clocks merged),
        from the first up to the last pending one; future jobs with a VST at or
        after ``horizon`` are left out (a reservation there cannot overlap any
        pending job's ``[now, now + d)``). A visited job that cannot start is
        reserved on ``[VST, VST + d)``; the pass also stops once the level
        reserved at ``now`` reaches the cluster's GPUs.

        The visit is done in bulk (:func:`sia.scheduler.policies.siavc.vc_pass.bulk_pass`,
        compiled): every visited job is reserved whatever its own check says (a
        job that starts ends the pass), so the plan each job sees is that of the
        jobs before it in the order, taken at the distinct reservation starts
        (the reserved level's maximum on ``[now, now + d)`` is reached at ``now``
        or at a reservation start, and a start before a job's VST already holds
        its final level). Only jobs that could start (arrived, width within the
        free GPUs and the level at ``now``) are then walked in order
        (``CandidateWalk``, compiled), and of those only the ones no wider and no
        longer than an already-failed job (Figure 6's MaxReservation only grows
        along the pass) get their check, and only the ones whose guard cannot be
        settled without re-running a clock (:meth:`_verdict`) get it, in Python.
        """
        C = self._C
        # charged free capacity per pool: fixed within a pass (a guard that fails undoes its
        # tentative charges; one that succeeds ends the pass)
        free_of = [q - h for q, h in zip(self._quota, self._held, strict=True)]
        memo, free_key = self._verdicts_for(free_of)
        merged, bound = self._merged(horizon)
        n_pend = list(map(len, pend))
        starts = self._cat[4]
        # the pending jobs past the merge's bound (the tail) are merged only if the walk gets
        # past every other candidate (about half the passes that have a tail)
        n_tail = sum(k - a for k, a in zip(n_pend, starts, strict=True) if k > a)

        def tail() -> tuple[np.ndarray, ...] | None:
            self.stats["tails"] += 1
            return pending_tail(self._vc, starts, n_pend, self._gpus_np, self._dur_np)

        found = lazy_pass(
            merged, horizon=horizon, n_arrived=n_arr, now=now, capacity=C, free=free,
            scratch=self._scratch, longest=horizon - now, n_pending=sum(n_pend),
            run_end=run_e, run_gpus=run_g, tail=tail if n_tail else None, n_tail=n_tail,
            sure_free=np.array(free_of), job_pool=self._pool_np,
            sure_by=now + _EPS,  # a job on time on its own quota starts (see _try_charge)
            plan_key=self._n_starts)
        if not found.jobs.size and not found.tail_pending:
            return None
        # walk the candidates in order; whether a guard fails without re-running a clock
        # depends only on the job's pool, width and end (see _verdict), so the walk skips
        # those guards by a verdict per pool and width, and replays their counts; the
        # candidates' MaxReservation verdicts are worked out as the walk reaches them, and
        # the tail's candidates found when it gets past the others
        walk = CandidateWalk(found.durations, found.gpus, found.pools, found, len(pend), now,
                             self._widest, self._walk_tables)
        stats = self.stats
        lenders = sorted((q for q in range(len(pend)) if free_of[q] > 0),
                         key=lambda q: (-free_of[q], q))
        i = walk.next(0)
        while i >= 0:  # a few candidates per pass: read one by one, not converted in bulk
            j = int(found.jobs[i])
            if walk.needs_verdict(i):
                p, g = self._pool[j], self._gpus[j]
                key = (p, g, free_key)
                verdict = memo.get(key)
                if verdict is None:
                    verdict = memo[key] = self._verdict(p, g, free_of, lenders)
                walk.set_verdict(p, g, *verdict)
                i = walk.next(i)
                continue
            if self._try_charge(j, float(found.vsts[i]), now, pend, n_arr, horizon, free_of,
                                lenders):
                break
            i = walk.next(i + 1)
        stats["early_starts"] += int(walk.counts[0])
        stats["checks_failed"] += int(walk.counts[1])
        return int(found.jobs[i]) if i >= 0 else None

    def _try_charge(self, j: int, v: float, now: float, pend: list[list[int]], n_arr: int,
                    horizon: float, free_of: list[int], lenders_all: list[int]) -> bool:
        """Charge job ``j`` (starting now) to quotas if no job's VST passes its F; update clocks.

        ``lenders_all``: the pools with free charged capacity, most free first (ties by pool).
        """
        p, g, d = self._pool[j], self._gpus[j], self._dur[j]
        end = now + d
        if v <= now + _EPS and free_of[p] >= g:
            self._charge_on_time(j, v, now, end)
            return True
        self.stats["early_starts"] += 1
        lenders = [q for q in lenders_all if q != p]
        tried: list[dict[int, int]] = []
        for own_first in (True, False):
            shares = self._shares(p, g, free_of, lenders, own_first)
            if shares is None:
                return False
            if shares in tried:  # the same charges were just checked and failed
                self.stats["checks_failed"] += 1
                continue
            tried.append(shares)
            if any(end > self._lender_threshold(q, s) for q, s in shares.items() if q != p):
                self.stats["checks_failed"] += 1
                continue
            new = self._rerun_charged(j, shares, now, pend, n_arr, horizon, end)
            if new is not None:
                self._commit_charges(j, shares, new, now, end)
                return True
            self.stats["checks_failed"] += 1
        return False

    def _charge_on_time(self, j: int, v: float, now: float, end: float) -> None:
        """:meth:`_try_charge`'s first case: ``j`` is on time and fits its own pool's free
        quota, so it is charged there and every virtual clock stays as it was but its own
        pool's, which loses just that job."""
        p, g = self._pool[j], self._gpus[j]
        self._charges[p].append((end, g))
        self._charge_np[p] = None
        self._charged[j] = [(p, end, g)]
        self._expiry = min(self._expiry, end)
        self._cmin[p] = min(self._cmin[p], end)
        if end > now:
            self._held[p] += g
        jobs, vs, rem = self._vc[p]
        i = int(jobs.searchsorted(j))  # the clock lists jobs in arrival (index) order
        self._set_clock(p, *(np.concatenate((x[:i], x[i + 1:])) for x in (jobs, vs, rem)))
        cat = self._current_merge()
        if cat is not None:  # the merge lost just that job
            drop_job(cat[1], j)
            self._ver[p] += 1
            cat[2][p] = self._inbound(p, cat[3])
            cat[4][p] = cat[2][p][0].shape[0]
            self._cat = (tuple(self._ver), *cat[1:])
        else:
            self._ver[p] += 1
        if v != now:  # within _EPS of now: later starts may move by that much
            self._stale.add(p)

    def _rerun_charged(self, j: int, shares: dict[int, int], now: float, pend: list[list[int]],
                       n_arr: int, horizon: float, end: float) -> dict[int, tuple] | None:
        """Re-run the virtual clocks that charging ``shares`` for ``j`` affects, with the
        charges added tentatively (handed to the re-runs; the pools' charges take them only
        if every re-run passes). Return each pool's trimmed clock and whether it is full, or
        None when a job's VST passes its deadline."""
        p = self._pool[j]
        self._reruns += 1
        new = {}
        # lenders first: their clocks are short, while the own pool's re-run walks its
        # whole backlog; all must pass, so the order changes nothing but the cost
        for q in sorted(set(shares) - {p}) + [p]:
            n_q = len(pend[q]) - (q == p)  # the pool's pending jobs but j
            k_future = bisect_left(self._pool_jobs[q], n_arr)
            if q == p and p not in shares and p not in self._stale:
                jobs, vs, rem = self._resume_without(p, j, k_future, now, len(pend[p]))
            else:
                jobs, vs, rem = self._rerun(q, len(pend[q]), j if q == p else -1, k_future,
                                            now, horizon, end, shares.get(q, 0))
            if vs.size and (vs[-1] > self._deadline[jobs[-1]] or (
                    self._late and (vs > self._deadline[jobs]).any())):
                # (a re-run stops at its first late job; one that met the cached clock
                # took its rest unchecked, which holds no late job unless a refused
                # start has made one late: then the whole re-run is checked)
                return None
            full = jobs.size == n_q + len(self._pool_jobs[q]) - k_future
            new[q] = (*self._trim(jobs, vs, rem, n_q), full)
        return new

    def _commit_charges(self, j: int, shares: dict[int, int], new: dict[int, tuple],
                        now: float, end: float) -> None:
        """Charge ``shares`` for ``j`` and install the re-run clocks that passed."""
        for q, s in shares.items():
            self._charges[q].append((end, s))
            self._charge_np[q] = None
            self._expiry = min(self._expiry, end)
            self._cmin[q] = min(self._cmin[q], end)
            if end > now:
                self._held[q] += s
        for q, (jobs, vs, rem, trimmed, full) in new.items():
            self._set_clock(q, jobs, vs, rem)
            self._ver[q] += 1
            self._vc_full[q] = full and not trimmed
        self._charged[j] = [(q, end, s) for q, s in shares.items()]

    def _trim(self, jobs: np.ndarray, vs: np.ndarray, rem: np.ndarray, n_pend: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """A guard's re-run cut to what :meth:`_refresh_clocks` would cache: its ``n_pend``
        pending jobs, then future jobs up to and including the first whose VST is at or
        after ``self._reach``; (jobs, VSTs, free GPUs, whether anything was cut).

        A re-run that found the pool idle only late (or took a long cached tail) can hold
        weeks of future jobs that no pass visits (they lie past the horizon) but every
        merge update would copy and every pass would scan. The cut keeps a prefix of the
        same run, so every reader sees what it saw: the pass (pending jobs and VSTs before
        the horizon), the wake-up, the guards' references (a shorter one only meets less
        often) and the lenders' thresholds (a cut entry's VST is past any candidate's end).
        """
        k = n_pend + int(vs[n_pend:].searchsorted(self._reach, side="left"))
        if k + 1 >= jobs.shape[0]:
            return jobs, vs, rem, False
        self.stats["trimmed"] += 1
        return jobs[: k + 1], vs[: k + 1], rem[: k + 1], True

    def _resume_without(self, p: int, j: int, k_future: int, now: float, n_pend: int
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pool ``p``'s clock without job ``j``, which starts on GPUs lent by other pools
        (none charged to ``p``): (jobs, VSTs, GPUs free after each start).

        The guard cannot fail on ``p``: with its charges unchanged, taking a job out of
        a strict-FCFS sequence starts no other job later, so every VST stays at or
        before the cached one, which is within F (the clocks' invariant). So only the
        clock is needed, as :meth:`_refresh_clocks` would run it (every pending job, then future
        ones), and it is resumed at ``j``'s place
        rather than re-run: the jobs before ``j`` start as cached, from the state the
        cached clock had there (the previous start as the clock's time, and the
        charges and earlier jobs still holding GPUs after it). The cached jobs before
        ``j`` and the re-run ones are still checked against F (+1 us), stopping at the
        first late one as the full re-run would.

        It runs up to the first VST at or after ``self._resume_to`` (the horizon plus
        ``resume_ahead`` times D), not ``self._reach`` (the horizon plus D) as a refresh:
        a prefix of the same run, read as :meth:`_trim` says, which stays exact while it
        reaches the horizon (then it is refreshed). On Philly the pool a job leaves is
        usually re-timed again long before its clock would have lapsed, so the jobs
        simulated past the shorter end were mostly wasted (~4 s of the whole trace's
        clock runs).
        """
        cj, cv, cr = self._vc[p]
        return resume_clock(
            cj, cv, cr, int(cj.searchsorted(j)), *self._charge_arrays(p), self._pool_jobs_np[p],
            self._pool_submit[p], k_future, self._resume_to, self._submit_np, self._dur_np,
            self._gpus_np, self._deadline, self._quota[p], now, n_pend)

    @staticmethod
    def _shares(p: int, g: int, free_of: list[int], lenders: list[int], own_first: bool
                ) -> dict[int, int] | None:
        """The charges ``{pool: GPUs}`` of a ``g``-wide job of pool ``p`` starting now: pool
        ``p``'s free charged capacity first and then the ``lenders`` (pools other than ``p``
        with free charged capacity, in order), or the lenders first; None if all of them
        together have fewer than ``g`` free."""
        shares: dict[int, int] = {}
        need = g
        for q in ([p] + lenders) if own_first else (lenders + [p]):
            take = min(need, max(free_of[q], 0))
            if take > 0:
                shares[q] = take
                need -= take
            if need == 0:
                return shares
        return None

    def _verdicts_for(self, free_of: list[int]) -> tuple[dict, tuple]:
        """The memo of :meth:`_verdict` results for this pass, keyed (pool, width, free charged
        capacities), and this pass's free capacities as a key. A verdict reads only those
        capacities (and the lenders they give) and the lenders' clocks and charges, which
        change only with the pools' versions: the memo is kept across passes and decisions
        until a version changes."""
        ver = tuple(self._ver)
        if self._vmemo_ver != ver:
            self._vmemo_ver = ver
            self._vmemo = {}
        return self._vmemo, tuple(free_of)

    def _verdict(self, p: int, g: int, free_of: list[int], lenders_all: list[int]
                 ) -> tuple[float, int, int]:
        """When the guard of a ``g``-wide job of pool ``p`` that is not on time fails without
        re-running a clock in this pass: (threshold s, early starts, failed checks) such
        that it does exactly when the job would end after the threshold (-inf: always,
        inf: never), adding those counts to the stats, as :meth:`_try_charge` would.

        With ``p``'s own free charged capacity enough, its own-first charges have no
        lender and are re-run: never. With all free charged capacity short of ``g``:
        always, before any check. Otherwise each of the two charge orders fails
        without a re-run when its lenders' :meth:`_lender_threshold` is passed, and
        the second order, if it gives the same charges, fails as the first did.
        """
        if free_of[p] >= g:
            return math.inf, 0, 0
        lenders = [q for q in lenders_all if q != p]
        first = self._shares(p, g, free_of, lenders, True)
        if first is None:
            return -math.inf, 1, 0
        thr = self._loan_threshold(p, first)
        second = self._shares(p, g, free_of, lenders, False)
        if second != first:
            thr = max(thr, self._loan_threshold(p, second))
        return thr, 1, 2

    def _loan_threshold(self, p: int, shares: dict[int, int]) -> float:
        """The smallest :meth:`_lender_threshold` of the lenders (pools but ``p``) in
        ``shares``, inf if none: the end after which these charges fail without a re-run.
        Reads the thresholds' memo directly while it is current (one call per lender cost
        as much as the rest of a verdict)."""
        ff, ver = self._ff, self._ver
        thr = math.inf
        for q, s in shares.items():
            if q != p:
                memo = ff.get((q, s))
                t = memo[1] if memo is not None and memo[0] == ver[q] else \
                    self._lender_threshold(q, s)
                if t < thr:
                    thr = t
        return thr

    def _lender_threshold(self, q: int, s: int) -> float:
        """Return the end (s) after which lending ``s`` GPUs of pool ``q`` until then surely
        fails the guard (inf: never known to).

        Exact shortcut for the guard's re-run of a lender (whose pending jobs and
        other charges are those of its cached clock): the re-run repeats the
        cached clock up to its first job ``k`` left fewer than ``s`` free GPUs
        at its start. If that job starts before the loan's end, it or an earlier
        job is late in the re-run exactly when an earlier job is already late,
        or job ``k`` cannot fit at ``F(k) + 1 us`` (the GPUs held then, plus
        ``s`` if the loan still runs; free GPUs only grow while it waits). So
        the shortcut only gets surer as the loan's end grows: past ``VST(k)`` if
        a job is late or job ``k`` cannot fit even without the loan, past the
        later of ``VST(k)`` and ``F(k) + 1 us`` if it cannot fit with the loan.
        Otherwise the re-run must be run.
        """
        key = (q, s)
        memo = self._ff.get(key)
        if memo is None or memo[0] != self._ver[q]:
            jobs, vs, rem = self._vc[q]
            k, late, held_jobs = first_short(jobs, vs, rem, s, self._dur_np, self._gpus_np,
                                             self._deadline)
            thr = math.inf
            if k >= 0 and vs[k] != math.inf:
                tau = self._F[jobs[k]] + _EPS
                held = sum(g for e, g in self._charges[q] if e > tau) + held_jobs
                room = self._quota[q] - held - self._gpus[jobs[k]]
                if late or room < 0:
                    thr = float(vs[k])
                elif room < s:
                    thr = max(float(vs[k]), tau)
            memo = (self._ver[q], thr)
            self._ff[key] = memo
        return memo[1]

    def next_wakeup(self, now: float) -> float | None:
        """Return the smallest virtual start time after ``now`` (s), or None."""
        w = self._wakeup
        return w if w is not None and w > now else None
