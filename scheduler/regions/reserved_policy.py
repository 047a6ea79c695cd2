"""Global reservations in the simulator: pools run as owners in every region holding a share.

:class:`ReservationRegionPolicy` is :class:`~sia.scheduler.regions.global_policy.GlobalRegionPolicy`'s
third mode (DESIGN.md 6.4, round 3; MAST's capacity placement). A pool's
quota is a global entitlement split into per-region *shares*
(:mod:`~sia.scheduler.regions.reservations`); in a region, a pool's jobs run
as **dedicated** jobs within its share there (FCFS order within the pool, and
the region's policy lends its idle GPUs as it does on one cluster), never as
guests.

Every region's policy replays the *whole* trace (so a job may become pending
in any region) with its region's shares as quotas; a job is pending in exactly
one region at a time, its *queue*, and the other regions' policies have
withdrawn it (``withdraw``; ``readmit`` takes a job back when it moves there;
FCFS and MaxMin keep no per-job state). With one region the sub-trace is the
trace, the share is the quota and the replay is today's, start for start.

Each decision:

1. *Arrivals* are queued where they would start soonest (below); completions
   free their GPUs in the region they ran in.
2. *Plan* (every ``period_s``): :func:`~sia.scheduler.regions.reservations.plan_reservations`
   chooses replicas and target shares from each pool's predicted *outstanding*
   demand over the period: the
   backlog known now (GPUs of its running and waiting jobs, for the part of the
   period they will still be there) plus what the period's arrivals will hold
   (``history``, ``perfect`` or ``forecast``: :meth:`ReservationRegionPolicy._outstanding_demand`).
   With ``plan_demand="placed"`` (the default, :data:`PLAN_DEMAND`) the running jobs'
   part is load fixed in the region they run in, since no share moves a running job;
   with ``"outstanding"`` it is split over the regions as the pool's shares.
   That is what the hourly demand-to-supply counts; on Philly, where most work
   is in jobs longer than a day, the period's arrivals alone
   (``plan_demand="arrivals"``, data placement's demand) were a third to a half of
   it, so the plans balanced the wrong load (docs/results/regions.md). New
   copies become usable after their transfer. An infeasible or timed-out plan
   keeps the last one (the plan record says so).
3. *Shares move* (:class:`~sia.scheduler.regions.reservations.ShareLedger`)
   towards the target as far as running dedicated jobs allow and only into
   regions whose copy is usable; the region policies get their new quotas.
4. *Routing* (the global scan): waiting jobs, oldest first, that cannot start
   in their queue now (strict FCFS there: behind a blocked head, nothing
   starts) move to the region where their pool has share and usable data and
   where they can start now (exhaustive over regions with the per-pass
   negative cache, per region and pool); best the pool's home, then the region
   left with the most free GPUs. A job no region can start as dedicated now moves, under SIA,
   to an eligible region whose SIA would lend it now when its queue would not
   (:meth:`ReservationRegionPolicy._lend_target`: the GPUs lent in the job's predicted
   window, less its pool's older waiting jobs there): the region where it starts soonest.
   A job makes at most ``lend_moves`` such moves (:data:`LEND_MOVES`); after them it waits
   where it was lent (no move back), unless a region can start it as an owner now or its
   queue loses its pool's share or copy.
   A job whose queue lost its pool's share moves
   even when nowhere can start it now, to the region with the least queued
   demand per GPU of share ("would start soonest", estimated without durations).
5. Every region's policy decides on its view; its starts run there. A SIA policy reserves
   for each pool only its part of the pool's predicted arrivals
   (:meth:`ReservationRegionPolicy._split_arrivals`): every region's forecaster predicts
   the pool's *global* arrivals, and reserving them in full in each region holding unused
   share of the pool kept that share idle in every region at once (docs/results/regions.md).

Guests (:class:`GlobalRegionPolicy` with ``route=True``) stay as a mode to compare.
Buddy cells are not supported here (a ConfigError).
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from sia.data.errors import ConfigError
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.view import SimView, Start, TraceArrays
from sia.scheduler.regions.defaults import PLAN_TIME_S
from sia.scheduler.regions.global_policy import (
    GlobalRegionPolicy,
    _index_in,
    _Region,
    forecast_rates,
)
from sia.scheduler.regions.global_scan import NegativeCache
from sia.scheduler.regions.model import RegionLayout, RegionsError
from sia.scheduler.regions.reservations import (
    ReservationWeights,
    ShareLedger,
    plan_reservations,
    share_candidates,
)

#: Pools x regions above which a plan only considers :func:`share_candidates` (bench_regions).
LARGE_PLAN = 5000
#: Where a pool's predicted demand comes from when the reservations are planned.
RESERVATION_PLACEMENTS = ("history", "perfect", "forecast")
#: What a plan balances: ``placed`` (the default): the outstanding demand with the running
#: jobs' part as load fixed in the region they run in (no share moves them; the pools' part
#: is the waiting jobs plus the period's arrivals); ``outstanding`` demand (backlog plus
#: arrivals, what the hourly demand-to-supply counts, the running jobs split over the
#: regions as their pool's shares, as if they moved with them); or the period's ``arrivals``
#: only (data placement's demand).
PLAN_DEMANDS = ("outstanding", "arrivals", "placed")
#: The default of :data:`PLAN_DEMANDS`, chosen on the training days only (days 35-56 of
#: Philly, never the replay of days 56-84) by a rule fixed before the runs: ``placed`` if
#: its mean JCT under ``reservations-perfect`` there, with the arrivals split and the lending
#: route on, is below ``outstanding``'s. It was: 3.742 h against 3.759 h (home 4.260 h;
#: docs/results/regions.md, session 18).
PLAN_DEMAND = "placed"
#: Lending-route moves a waiting job may make (``None``: no limit). A job that has made them
#: stays in its queue until it starts there, unless another region can start it as an owner
#: now or its queue loses its pool's share or usable copy: so a lent job never moves back to
#: wait elsewhere. Under learned SIA the route's estimate of what a region lends is often
#: optimistic, and without a limit jobs bounced between regions (one job 4,570 times on
#: Philly's replay, docs/results/regions.md), every move a restart of its wait. Chosen on the
#: training days only (days 35-56 of Philly, never the replay of days 56-84) by a rule fixed
#: before the runs (docs/results/regions.md, "Damping the lending route"): of the limits 1
#: and 2, the one with the fewer jobs slowed against FCFS under ``learned-reservations``
#: (within 0.05 points: the lower mean JCT; then the smaller limit). Both slowed 0.31%; mean
#: JCT 4.996 h with 2 against 5.511 h with 1 (no limit: 4.996 h, 0.31%; learned-home 8.184 h).
LEND_MOVES: int | None = 2
#: How the lending route learns what a region's SIA would lend a waiting job now:
#: ``estimate`` (:meth:`ReservationRegionPolicy._lendable`: its free GPUs less every pool's
#: reservation, recomputed here) or ``sia`` (ask the region's policy,
#: :meth:`~sia.scheduler.policies.sia.spare.SparePass.lend_window`: Figure 8's own checks,
#: with the online adaptation's distrust, the loan ramp's caps and cold pools and the
#: forecast's age, which the estimate ignores).
LEND_PROBES = ("estimate", "sia")
#: The default of :data:`LEND_PROBES`, chosen on the training days only (days 35-56 of
#: Philly, never the replay of days 56-84) by the rule fixed before the runs
#: (docs/results/regions.md, "Asking SIA what it would lend"): the one with the fewer jobs
#: slowed against FCFS under ``learned-reservations`` (within 0.05 points: the lower mean
#: JCT; then ``estimate``). ``estimate`` slowed 0.31%, ``sia`` 0.37% (mean JCT 4.996 h and
#: 4.723 h; ``lend_moves`` 2; learned-home 8.184 h): ``estimate``.
LEND_PROBE = "estimate"
#: How a pool's oldest waiting job that fits the pool's unused quota summed over the
#: regions, but no region's unused share of it, gets the pool's unused share moved into one
#: region now (:meth:`ReservationRegionPolicy._consolidate`, a swap of unused shares:
#: :meth:`~sia.scheduler.regions.reservations.ShareLedger.consolidate`). Under home FCFS
#: such a job starts at once (its pool's whole quota is in one place); without the swap it
#: waits, and the younger jobs of its pool behind it: on Philly's replay this *split* of the
#: quota was the root of 186 of the 215 jobs that ``learned-reservations`` slowed against
#: home FCFS (``bench_regions_slowed.py``, docs/results/regions.md, "Which mechanism slows
#: jobs"). ``off``: no such move; ``swap``: the swap takes any idle share of another pool;
#: ``free``: only as many GPUs as the other region has free enter the other pool's share
#: there (not GPUs that loans hold). Default chosen on the training days only (the rules in
#: the same section): ``swap`` slowed 1.09% of the jobs against 0.31% with ``off``. Traced
#: (``bench_regions_swaptrace.py``, "How the swap led to the burst's wait"): its extra slowed
#: jobs are one burst that waited for learned SIA's own loans on a missed forecast, with no
#: swap near it; a different trajectory, not a fault of the swap.
CONSOLIDATES = ("off", "swap", "free")
CONSOLIDATE = "off"
#: Footholds for the lending route (:meth:`ReservationRegionPolicy._foothold_bonus`): the
#: lending route moves a waiting job only to a region where its pool has share and a usable
#: copy, and the plans place shares and copies in proportion to demand, so a busy pool's short
#: jobs could not reach the GPUs other regions would lend (``nodata``: 32% of the waiting
#: job-hours of ``reservations-perfect`` on Philly's replay, docs/results/regions.md).
#: ``off``: no footholds; ``backlog``: at each plan, a pool with waiting jobs that fit SIA's
#: largest window (its *lendable backlog*, by their predicted durations) gets, in every other
#: region whose SIA lends GPUs now, a bonus for a copy of its data there, where its minimum
#: share is then its widest such job instead of its widest job: the balance those loans
#: would buy, ``min(backlog, GPUs lent) * (under_weight / G_r + over_weight / G_a)`` (a: the
#: region where most of the backlog waits), the same units as the plan's balance terms. The
#: MIP places the foothold when that beats the copy's and the churn's costs. Default chosen
#: on the training days only (days 35-56 of Philly, never the replay of days 56-84) by the
#: rule written before the runs (docs/results/regions.md, "Footholds for the lending route"):
#: the one with the fewer jobs slowed against FCFS under ``learned-reservations`` (within 0.05
#: points: the lower mean JCT; then ``off``). ``off`` slowed 0.31% (4.996 h), ``backlog``
#: 0.72% (5.535 h): ``off``. (On the replay, for reference only, ``backlog`` cut mean JCT from
#: 16.01 h to 12.93 h and slowed 1.29% against 1.15%.)
FOOTHOLDS = ("off", "backlog")
FOOTHOLD = "off"


class ReservationRegionPolicy(GlobalRegionPolicy):
    """Global reservations across regions over per-region inner policies (module doc).

    Arguments as :class:`GlobalRegionPolicy` (``placement`` one of
    :data:`RESERVATION_PLACEMENTS`), plus ``weights`` for the plan's MIP, ``plan_demand``
    (:data:`PLAN_DEMANDS`), ``lend_moves`` (:data:`LEND_MOVES`), ``lend_probe``
    (:data:`LEND_PROBES`), ``consolidate`` (:data:`CONSOLIDATE`) and ``foothold``
    (:data:`FOOTHOLD`).
    After a replay, :attr:`share_log` holds ``(time, shares [pool, region])``
    at every change of the shares in force (trace pool order).
    """

    def __init__(self, layout: RegionLayout, make_inner: Callable[[], Any], *,
                 inner_name: str = "inner", placement: str = "history",
                 period_s: float = 86400.0, plan_time_s: float = PLAN_TIME_S, neg_cache: bool = True,
                 weights: ReservationWeights | None = None, locality: Any = None,
                 plan_demand: str = PLAN_DEMAND, lend_moves: int | None = LEND_MOVES,
                 lend_probe: str = LEND_PROBE, consolidate: str = CONSOLIDATE,
                 foothold: str = FOOTHOLD):
        if lend_moves is not None and (isinstance(lend_moves, bool) or not isinstance(
                lend_moves, int) or lend_moves < 0):
            raise ConfigError(f"regions: lend_moves must be an int >= 0 or None, got "
                              f"{lend_moves!r}")
        if lend_probe not in LEND_PROBES:
            raise ConfigError(f"regions: lend_probe must be one of {', '.join(LEND_PROBES)}, "
                              f"got {lend_probe!r}")
        if consolidate not in CONSOLIDATES:
            raise ConfigError(f"regions: consolidate must be one of {', '.join(CONSOLIDATES)}, "
                              f"got {consolidate!r}")
        if foothold not in FOOTHOLDS:
            raise ConfigError(f"regions: foothold must be one of {', '.join(FOOTHOLDS)}, "
                              f"got {foothold!r}")
        if placement not in RESERVATION_PLACEMENTS:
            raise ConfigError(f"regions: reservations plan from one of "
                              f"{', '.join(RESERVATION_PLACEMENTS)}, got {placement!r}")
        if plan_demand not in PLAN_DEMANDS:
            raise ConfigError(f"regions: plan_demand must be one of {', '.join(PLAN_DEMANDS)}, "
                              f"got {plan_demand!r}")
        if locality is not None:
            raise ConfigError("regions: global reservations run on fungible GPUs only (no "
                              "buddy cells); drop the locality options or use a guests mode")
        super().__init__(layout, make_inner, inner_name=inner_name, route=True,
                         placement=placement, period_s=period_s, plan_time_s=plan_time_s,
                         neg_cache=neg_cache)
        self.name = f"{inner_name}@reservations+{placement}"
        self.weights = weights or ReservationWeights()
        self.plan_demand = plan_demand
        self.lend_moves = lend_moves
        self.lend_probe = lend_probe
        self.consolidate = consolidate
        self.foothold = foothold

    # ------------------------------------------------------------------ life cycle
    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """One region per layout region, each replaying the whole trace with its shares."""
        lay = self.layout
        missing = [p for p in trace.pool_names if p not in lay.pool_index]
        if missing:
            raise RegionsError(f"regions: pool {missing[0]!r} of the workload is not in the "
                               "region layout")
        self._trace = trace
        P, R = trace.n_pools, lay.n_regions
        self._home = np.array([lay.home[lay.pool_index[p]] for p in trace.pool_names], dtype=np.int64)
        self._lrow = np.array([lay.pool_index[p] for p in trace.pool_names], dtype=np.int64)
        supply = np.bincount(self._home, weights=trace.quota, minlength=R).astype(np.int64)
        bad = np.flatnonzero(supply != lay.gpus)
        if bad.size:
            r = int(bad[0])
            raise RegionsError(f"regions: region {lay.regions[r].name!r} has {lay.gpus[r]} GPUs in "
                               f"the layout but its pools' quotas sum to {supply[r]}")
        if (trace.quota < 1).any():
            p = int(np.flatnonzero(trace.quota < 1)[0])
            raise RegionsError(f"regions: pool {trace.pool_names[p]!r} has quota 0; global "
                               "reservations split quotas of at least one GPU")
        shares = np.zeros((P, R), dtype=np.int64)
        shares[np.arange(P), self._home] = trace.quota
        self._ledger = ShareLedger(trace.quota, lay.gpus, shares)
        glob = np.arange(trace.n_jobs)
        self._regions: list[_Region] = []
        for r, reg in enumerate(lay.regions):
            # the simulator's trace with the region's own quota array: its shares, kept current
            sub = replace(trace, quota=shares[:, r].copy())
            policy = self._probe if r == 0 else self.make_inner()
            region = _Region(r, reg.name, sub, glob, policy, list(range(P)), None)
            if region.cluster.total_gpus != int(lay.gpus[r]):  # shares start as the home quotas
                raise RegionsError(f"regions: region {reg.name!r}: cluster of "
                                   f"{region.cluster.total_gpus} GPUs, layout {lay.gpus[r]}")
            self._regions.append(region)
        self._offsets = []
        self._gpus = trace.num_gpus.tolist()
        self._pool = trace.pool.tolist()
        self._seen_comp = [0] * P
        self.ran_in = np.full(trace.n_jobs, -1, dtype=np.int64)
        self._queue = np.full(trace.n_jobs, -1, dtype=np.int64)  # region a waiting job queues in
        self._done = np.zeros(trace.n_jobs, dtype=bool)
        self._n_arrived = 0
        self._widest = np.ones(P, dtype=np.int64)  # widest job seen so far per pool (GPUs)
        self._now = 0.0
        self._replicas = lay.initial_replicas()
        self._multi = lay.n_regions > 1
        self._next_plan = 0.0 if self._multi else math.inf
        self._dirty = False  # something that may let a share move happened
        self._next_usable = math.inf
        self._can_withdraw = [callable(reg.withdraw) for reg in self._regions]
        self._can_readmit = [callable(getattr(reg.policy, "readmit", None)) for reg in self._regions]
        stateful = [reg.name for reg, w, a in zip(self._regions, self._can_withdraw,
                                                   self._can_readmit, strict=True)
                    if self._multi and (w != a)]
        if stateful or (self._multi and not all(self._can_withdraw)
                        and self.inner_name not in ("fcfs", "maxmin")):
            raise ConfigError(f"regions: policy {self.inner_name!r} cannot move a waiting job "
                              "between regions (it needs withdraw and readmit); use fcfs, "
                              "maxmin or a sia policy")
        self._window_of: dict[int, int] = {}  # job -> lending window (_lend_target)
        self._lend_route = self._multi and all(reg.sia for reg in self._regions)
        self._can_split = self._multi and all(
            callable(getattr(reg.policy, "set_arrival_share", None)) for reg in self._regions)
        self.share_log: list[tuple[float, np.ndarray]] = [(0.0, shares.copy())]
        self.stats: dict[str, Any] = dict(scan_passes=0, scan_attempts=0, scan_hits=0, scan_s=0.0,
                                          routed=0, plans=[], share_moves=0,
                                          consolidations=0)
        self._routed_per_region = [0] * R
        self.queue_moves: list[tuple[int, float, int, int]] = []  # (job, time, from, to)
        self.lent_moves = np.zeros(trace.n_jobs, dtype=np.int64)  # lending-route moves per job

    # ------------------------------------------------------------------ decision
    def decide(self, view: SimView) -> list[Start]:
        """Queue arrivals, plan, move shares, route waiting jobs, then every region decides."""
        now = self._now = view.now
        self._reason = view.reason
        self._sync_reserved(view)
        if self._multi:
            if now >= self._next_plan:
                self._plan(view)
            if now >= self._next_usable:
                self._dirty = True
                later = self._replicas.usable_at[self._replicas.usable_at > now]
                self._next_usable = float(later.min()) if later.size else math.inf
            if self._dirty and not self._ledger.settled:
                self._move_shares(now)
            self._dirty = False
            if self.consolidate != "off":  # before routing: a queue that lost its share moves there
                self._consolidate()
            self._route_waiting(now)
            self._split_arrivals()
        starts: list[Start] = []
        for reg in self._regions:
            st = reg.state
            st.now, st.reason = now, view.reason
            reg.view._invalidate()
            items = reg.policy.decide(reg.view)
            if items:
                self._apply_home(reg, items, starts, now)
            st.touched.clear()
            if reg.later_touched:
                st.touched |= reg.later_touched
                reg.later_touched = set()
        return starts

    def _sync_reserved(self, view: SimView) -> None:
        """Arrivals join the queue where they would start soonest; completions free GPUs."""
        hi = view.n_arrived
        lo = self._n_arrived
        if hi > lo:
            gone: list[list[int]] = [[] for _ in self._regions]
            for j in range(lo, hi):
                p = self._pool[j]
                if self._gpus[j] > self._widest[p]:  # plan again so that a share fits it
                    self._widest[p] = self._gpus[j]
                    if self._gpus[j] > self._ledger.target[p].max():
                        self._next_plan = min(self._next_plan, view.now)
                r = self._choose(p, self._gpus[j], exclude=-1)
                if r < 0:  # cannot happen while shares sit only on usable copies
                    r = int(np.argmax(self._ledger.shares[p]))
                self._enqueue(j, p, r)
                for k in range(len(self._regions)):
                    if k != r:
                        gone[k].append(j)
            for reg in self._regions:
                reg.n_arrived = reg.state.n_arrived = hi
            for k, jobs in enumerate(gone):
                if jobs and self._can_withdraw[k]:
                    self._regions[k].withdraw(jobs)
            self._n_arrived = hi
        for p, done, ends in self._new_completions(view):
            for j, end in zip(done, ends, strict=True):
                self._finish(j, p, end)
            self._dirty = True

    def _finish(self, j: int, p: int, end: float) -> None:
        """Free job ``j``'s GPUs in the region it ran in and record its completion there."""
        g = self._gpus[j]
        self._done[j] = True
        reg = self._regions[int(self.ran_in[j])]
        st = reg.state
        reg.cluster.release(j, g)
        if st.opportunistic[j]:
            st.used_opp[p] -= g
        else:
            st.used_ded[p] -= g
        del st.running[j]
        n = st.n_comp[p]
        st.comp_end[p][n] = end
        st.comp_job[p][n] = j
        st.n_comp[p] = n + 1
        st.touched.add(p)

    def _enqueue(self, j: int, p: int, r: int) -> None:
        """Make job ``j`` (pool ``p``) pending in region ``r``."""
        st = self._regions[r].state
        insort(st.pending[p], j)
        st.touched.add(p)
        self._queue[j] = r

    # ------------------------------------------------------------------ where a job waits
    def _used(self) -> np.ndarray:
        """GPUs each pool's dedicated jobs hold per region, int [pool, region]."""
        return np.array([reg.state.used_ded for reg in self._regions], dtype=np.int64).T

    def _queued(self, p: int, r: int) -> int:
        st = self._regions[r].state
        return int(sum(self._gpus[j] for j in st.pending[p]))

    def _eligible(self, p: int) -> np.ndarray:
        """Regions where pool ``p`` has share and a usable copy of its data now (bool)."""
        usable = self._replicas.usable(self._now)[self._lrow[p]]
        return usable & (self._ledger.shares[p] > 0)

    def _choose(self, p: int, g: int, exclude: int) -> int:
        """The region a new (or displaced) job of pool ``p`` with ``g`` GPUs should queue in:
        where it can start now (home first, then most free GPUs left), else the one with the
        least queued-and-running demand of its pool per GPU of share (ties: home, then index)."""
        if not self._multi:
            return 0
        elig = self._eligible(p)
        if exclude >= 0:
            elig[exclude] = False
        cand = np.flatnonzero(elig).tolist()
        if not cand:
            return -1
        share = self._ledger.shares[p]
        best = best_key = None
        for r in cand:
            reg = self._regions[r]
            st = reg.state
            ahead = self._queued(p, r)
            room = int(share[r]) - st.used_ded[p] - ahead
            now_ok = room >= g and reg.cluster.free - ahead >= g
            if now_ok:
                key = (2, r == self._home[p], (reg.cluster.free - ahead - g) / reg.cluster.total_gpus, -r)
            else:  # fits the share at all, then the least demand per GPU of share
                key = (int(share[r] >= g), -(st.used_ded[p] + ahead + g) / share[r],
                       r == self._home[p], -r)
            if best is None or key > best_key:
                best, best_key = r, key
        return int(best)

    def _route_waiting(self, now: float) -> None:
        """Move waiting jobs that cannot start in their queue now (module doc, step 4)."""
        P = self._trace.n_pools
        share = self._ledger.shares
        usable = self._replicas.usable(now)[self._lrow] & (share > 0)
        free = [reg.cluster.free for reg in self._regions]
        used = self._used()
        waiting = [p for p in range(P) if any(reg.state.pending[p] for reg in self._regions)]
        if not waiting:
            return
        # room[p][r]: GPUs pool p may still start as dedicated in r in this pass
        room = (share - used).tolist()
        elig = usable.tolist()
        t0 = time.perf_counter()
        cache = NegativeCache(len(self._regions), P)
        lend: dict[int, list[float]] = {}  # region -> GPUs it lends per window (this pass)
        attempts = moved = 0
        gpus, home = self._gpus, self._home
        for p in waiting:
            # a pool with no room anywhere and every job in an eligible queue: nothing to do
            lost = any(self._regions[r].state.pending[p]
                       and (not elig[p][r] or share[p, r] < self._widest[p])
                       for r in range(len(self._regions)))
            if not lost and max(min(room[p][r], free[r]) if elig[p][r] else 0
                                for r in range(len(self._regions))) < 1 \
                    and not self._may_lend(p, elig[p], lend):
                continue
            jobs = sorted(j for reg in self._regions for j in reg.state.pending[p])
            blocked = [not e for e in elig[p]]  # FCFS: behind a blocked head nothing starts
            for j in jobs:
                g, a = gpus[j], int(self._queue[j])
                if not blocked[a] and room[p][a] >= g and free[a] >= g:
                    room[p][a] -= g
                    free[a] -= g
                    continue
                blocked[a] = True
                best = best_key = None
                for r in range(len(self._regions)):
                    if r == a or not elig[p][r] or blocked[r]:
                        continue
                    if self.neg_cache and cache.blocked(r, p, g):
                        continue
                    attempts += 1
                    if room[p][r] >= g and free[r] >= g:
                        # placement quality on fungible GPUs: the pool's home, then most free left
                        key = (r == home[p], (free[r] - g) / self._regions[r].cluster.total_gpus)
                        if best is None or key > best_key:
                            best, best_key = r, key
                    elif self.neg_cache:
                        cache.record(r, p, g)
                spent = self.lend_moves is not None and self.lent_moves[j] >= self.lend_moves
                if best is None and self._lend_route and not spent:  # where SIA lends it now
                    r = self._lend_target(j, p, g, a, elig[p], lend)
                    if r >= 0:
                        free[r] -= g
                        self._move(j, p, a, r)
                        self.lent_moves[j] += 1
                        moved += 1
                        continue
                if best is None and elig[p][a] and (share[p, a] >= g
                                                    or (spent and self.lent_moves[j] > 0)):
                    continue  # waits in its queue (a lent job: to be lent there)
                if best is None:  # its queue lost the pool's share: the soonest estimate
                    best = self._choose(p, g, exclude=a)
                    if best < 0 or (elig[p][a] and share[p, best] < g):
                        continue
                else:
                    room[p][best] -= g
                    free[best] -= g
                self._move(j, p, a, best)
                moved += 1
        self.stats["scan_passes"] += 1
        self.stats["scan_attempts"] += attempts
        self.stats["scan_hits"] += cache.hits
        self.stats["scan_s"] += time.perf_counter() - t0
        self.stats["routed"] += moved

    def _lend_target(self, j: int, p: int, g: int, a: int, elig: list[bool],
                     lend: dict[int, list[float]]) -> int:
        """The region where SIA would lend waiting job ``j`` (pool ``p``, ``g`` GPUs) now when
        its queue ``a`` would not, or -1 (module doc, step 4): an eligible region whose GPUs
        lent in the job's window (:meth:`_lendable`), less its pool's older waiting jobs
        there, hold it; the most such GPUs first. Counts the job's GPUs as taken there."""
        reg = self._regions[a]
        if not reg.sia:
            return -1
        if self.lend_probe == "sia":
            return self._ask_target(j, p, g, a, elig, lend)
        k = self._windows(reg, [j])[0]
        if k < 0 or self._lendable(a, lend)[k] >= g:
            return -1
        best, most = -1, 0.0
        for r in range(len(self._regions)):
            if r == a or not elig[r]:
                continue
            older = self._regions[r].state.pending[p]  # sorted: the pool's queue there
            left = self._lendable(r, lend)[k] - sum(self._gpus[i] for i in older[:bisect_left(older, j)])
            if left >= g and left > most:
                best, most = r, left
        if best >= 0:
            lend[best] = [x - g for x in lend[best]]
        return best

    def _may_lend(self, p: int, elig: list[bool], lend: dict[int, list[float]]) -> bool:
        """Whether some region could lend a job of pool ``p`` (an eligible one lending a GPU in
        its smallest window, and the pool waiting in two regions or more, or in one that is
        not the only eligible one): else the lending route has nothing to do for ``p``."""
        if not self._lend_route or sum(elig) < 2:
            return False
        if self.lend_probe == "sia":  # a region with a free GPU may lend it (lend_window says)
            return any(e and self._regions[r].cluster.free >= 1 for r, e in enumerate(elig))
        return any(e and self._lendable(r, lend)[0] >= 1 for r, e in enumerate(elig))

    def _ask_target(self, j: int, p: int, g: int, a: int, elig: list[bool],
                    lend: dict[int, list[float]]) -> int:
        """:meth:`_lend_target` with ``lend_probe="sia"``: each region's SIA says in which
        window its next decision would lend job ``j`` now (``lend_window``), after the GPUs
        the route already sent there in this pass (``lend[r][0]``) and, elsewhere than its
        queue, its pool's older waiting jobs there. None if its queue ``a`` would; else the
        eligible region lending it in the smallest window (ties: the most free GPUs)."""
        if self._ask(a, j, lend.get(a, [0.0])[0]) >= 0:
            return -1
        best, key = -1, None
        for r in range(len(self._regions)):
            if r == a or not elig[r] or self._regions[r].cluster.free < g:
                continue
            older = self._regions[r].state.pending[p]  # sorted: the pool's queue there
            ahead = lend.get(r, [0.0])[0] + sum(self._gpus[i]
                                                 for i in older[:bisect_left(older, j)])
            k = self._ask(r, j, ahead)
            if k >= 0 and (key is None or (-k, self._regions[r].cluster.free) > key):
                best, key = r, (-k, self._regions[r].cluster.free)
        if best >= 0:
            lend[best] = [lend.get(best, [0.0])[0] + g]
        return best

    def _ask(self, r: int, j: int, ahead: float) -> int:
        """Region ``r``'s SIA: the window in which it would lend job ``j`` now, or -1."""
        reg = self._regions[r]
        st = reg.state
        st.now, st.reason = self._now, self._reason  # (the region's decision sets them again)
        reg.view._invalidate()
        return reg.policy.lend_window(reg.view, j, ahead)

    def _lendable(self, r: int, lend: dict[int, list[float]]) -> list[float]:
        """GPUs region ``r``'s SIA lends now per window (cached in ``lend`` for the pass): its
        free GPUs less every pool's reservation, ``min(pending + part * TotalNewLoad, unused
        share)``, the part as :meth:`_split_arrivals` sets it."""
        if r in lend:
            return lend[r]
        reg = self._regions[r]
        st, pol, free = reg.state, reg.policy, reg.cluster.free
        windows = tuple(pol.windows_s)
        if free < 1:
            lend[r] = [0.0] * len(windows)
            return lend[r]
        gpus = self._gpus
        pend = np.array([sum(gpus[i] for i in st.pending[q]) for q in range(len(st.pending))],
                        dtype=float)
        unused = (reg.trace.quota - np.asarray(st.used_ded)).astype(float)
        st.now = self._now  # (the region's decision sets it again) forecasts from now
        reg.view._invalidate()
        arrive = np.asarray(pol.forecaster.will_jobs_arrive(reg.view, windows), dtype=bool)
        load = np.asarray(pol.forecaster.new_load_estimate(reg.view, windows), dtype=float)
        tnl = np.where(arrive, np.maximum(load, 0.0), 0.0)
        if getattr(pol, "nested_reservations", True):
            tnl = np.maximum.accumulate(tnl, axis=1)
        part = self._arrival_parts()[:, r][:, None]
        # none of a load, even an unbounded one, where the pool has no part (no inf x 0)
        tnl = np.multiply(tnl, part, out=np.zeros_like(tnl), where=part > 0)
        res = np.minimum(pend[:, None] + tnl, unused[:, None])
        lend[r] = (free - res.sum(axis=0)).tolist()
        return lend[r]

    def _move(self, j: int, p: int, a: int, b: int) -> None:
        """Job ``j`` of pool ``p`` leaves region ``a``'s queue for region ``b``'s."""
        src = self._regions[a]
        plist = src.state.pending[p]
        del plist[_index_in(plist, j)]
        src.state.touched.add(p)
        if self._can_withdraw[a]:
            src.withdraw([j])
        self._enqueue(j, p, b)
        self.queue_moves.append((j, self._now, a, b))
        if self._can_readmit[b]:
            self._regions[b].policy.readmit([j])
        self._routed_per_region[b] += 1

    # ------------------------------------------------------------------ shares
    def _split_arrivals(self) -> None:
        """Tell each region's policy which part of each pool's predicted arrivals to reserve
        there (module doc, step 5): its unused share there over its unused share everywhere
        (no unused share anywhere: its share there over its quota). The pool's reservations
        over all regions then add up to what one region holding its whole quota would reserve,
        placed where its arrivals can start as dedicated."""
        if not self._can_split:
            return
        frac = self._arrival_parts()
        for r, reg in enumerate(self._regions):
            reg.policy.set_arrival_share(frac[:, r].tolist())

    def _arrival_parts(self) -> np.ndarray:
        """Each pool's part of its predicted arrivals per region, float [pool, region] (rows
        sum to 1; :meth:`_split_arrivals`)."""
        share = self._ledger.shares
        unused = np.maximum(share - self._used(), 0).astype(float)
        total = unused.sum(axis=1, keepdims=True)
        return np.where(total > 0, unused / np.maximum(total, 1.0),
                        share / self._trace.quota[:, None].astype(float))

    def _move_shares(self, now: float) -> None:
        """Move the shares in force towards the target; give the region policies their quotas."""
        usable = self._replicas.usable(now)[self._lrow]
        changed = self._ledger.step(self._used(), usable)
        self._apply_shares(changed, now)

    def _apply_shares(self, changed: np.ndarray, now: float) -> None:
        """Log the shares in force and give the regions whose shares ``changed`` their quotas."""
        if not changed.any():
            return
        self.stats["share_moves"] += 1
        shares = self._ledger.shares
        self.share_log.append((now, shares.copy()))
        for r in np.flatnonzero(changed).tolist():
            reg = self._regions[r]
            col = shares[:, r]
            diff = np.flatnonzero(reg.trace.quota != col)
            reg.trace.quota[:] = col
            reg.policy.set_quota(col.tolist())
            reg.state.touched.update(diff.tolist())

    def _consolidate(self) -> None:
        """Give each pool's oldest waiting job one region's unused share of its pool when the
        pool's unused quota over all regions fits it and no region's does (:data:`CONSOLIDATE`):
        the job's queue region first, else the eligible region with the most free GPUs; the
        region needs the job's GPUs free now. The job moves there if it is not its queue."""
        used = self._used()
        usable = self._replicas.usable(self._now)[self._lrow]
        free = [reg.cluster.free for reg in self._regions]
        changed = np.zeros(len(self._regions), dtype=bool)
        for p in range(self._trace.n_pools):
            heads = [reg.state.pending[p][0] for reg in self._regions if reg.state.pending[p]]
            if not heads:
                continue
            h = min(heads)
            g, a = self._gpus[h], int(self._queue[h])
            room = self._ledger.shares[p] - used[p]
            if room.max() >= g or int(self._trace.quota[p]) - int(used[p].sum()) < g:
                continue
            order = [a] + sorted((r for r in range(len(self._regions)) if r != a),
                                 key=lambda r: -free[r])
            for r in order:
                if free[r] < g or not usable[p, r]:
                    continue
                # pools waiting in r keep their share there (the swap takes only idle share)
                idle = np.array([not q for q in self._regions[r].state.pending], dtype=bool)
                got = self._ledger.consolidate(
                    p, r, g, used, usable, partners=idle,
                    idle=np.array(free) if self.consolidate == "free" else None)
                if got is None:
                    continue
                if r != a:
                    self._move(h, p, a, r)
                    self.stats["routed"] += 1
                free[r] -= g
                changed |= got
                self.stats["consolidations"] += 1
                break
        self._apply_shares(changed, self._now)

    def _plan(self, view: SimView) -> None:
        """Plan replicas and target shares from the predicted demand (module doc, step 2)."""
        now = view.now
        self._next_plan = (math.floor(now / self.period_s) + 1) * self.period_s
        lay = self.layout
        demand = np.zeros(lay.n_pools)
        fixed = None
        if self.plan_demand == "arrivals":
            demand[self._lrow] = self._predicted_demand(now)
        else:
            pools, fixed = self._outstanding_demand(now, placed=self.plan_demand == "placed")
            demand[self._lrow] = pools
        quota = np.zeros(lay.n_pools, dtype=np.int64)
        quota[self._lrow] = self._trace.quota
        prev_shares = np.zeros((lay.n_pools, lay.n_regions), dtype=np.int64)
        prev_shares[self._lrow] = self._ledger.target
        held = self._replicas.held()
        widest = np.ones(lay.n_pools)
        widest[self._lrow] = self._widest
        # large layouts plan over share_candidates (all candidates time out at 1,000 x 30)
        cand = (share_candidates(lay, quota, demand, prev_shares)
                if lay.n_pools * lay.n_regions > LARGE_PLAN else None)
        bonus = small = None
        if self.foothold != "off" and self._lend_route:
            bonus, small = np.zeros((lay.n_pools, lay.n_regions)), widest.copy()
            bonus[self._lrow], small[self._lrow] = self._foothold_bonus()
        plan = plan_reservations(lay, quota, demand, held, prev_shares, candidates=cand,
                                 min_share=widest, fixed_load=fixed, foothold=bonus,
                                 foothold_share=small, weights=self.weights,
                                 time_limit_s=self.plan_time_s)
        moved = 0.0
        if not plan.kept_previous:
            in_force = np.zeros_like(held)
            in_force[self._lrow] = self._ledger.shares > 0
            self._replicas, moved = self._replicas.apply(lay, plan.held | in_force, now)
            self._ledger.set_target(plan.shares[self._lrow])
            self._dirty = True
            later = self._replicas.usable_at[self._replicas.usable_at > now]
            self._next_usable = float(later.min()) if later.size else math.inf
        ratio = plan.region_load(demand, np.maximum(quota, 1), fixed) / lay.gpus
        total = demand.sum() + (0.0 if fixed is None else fixed.sum())
        self.stats["plans"].append(dict(
            t=now, status=plan.status, moved=moved, churn=plan.churn,
            replicas=int(self._replicas.held().sum()), solve_s=plan.solve_s,
            message=plan.message, demand=[float(x) for x in demand[self._lrow]],
            planned_max_ratio=float(ratio.max()),
            planned_avg_ratio=float(total / lay.gpus.sum()),
            fixed=None if fixed is None else [float(x) for x in fixed],
            footholds=0 if bonus is None or plan.kept_previous  # new copies a bonus bought
            else int(((bonus > 0) & plan.held & (prev_shares == 0)).sum())))

    def _foothold_bonus(self) -> tuple[np.ndarray, np.ndarray]:
        """Each trace pool's foothold bonus per region and its foothold share (:data:`FOOTHOLD`,
        ``backlog``): (float [pool, region], int [pool]). A pool's lendable backlog ``b`` is the
        GPUs of its waiting jobs that fit SIA's largest window by their predicted duration (as
        the lending route predicts it), ``a`` the region where most of them wait; a region
        ``r != a`` whose SIA lends ``spare`` GPUs now in that window (:meth:`_lendable`) gets
        ``min(b, spare) * (under_weight / G_r + over_weight / G_a)``. The foothold share is
        the pool's widest such job."""
        P, R = self._trace.n_pools, len(self._regions)
        gpus = self._trace.num_gpus
        back = np.zeros((P, R))
        small = np.ones(P, dtype=np.int64)
        for a, reg in enumerate(self._regions):
            reg.state.now = self._now  # (the region's decision sets it again)
            reg.view._invalidate()
            for p in range(P):
                plist = reg.state.pending[p]
                if not plist:
                    continue
                ok = np.array(self._windows(reg, list(plist))) >= 0
                g = gpus[np.asarray(plist, dtype=np.int64)[ok]]
                if g.size:
                    back[p, a] += float(g.sum())
                    small[p] = max(int(small[p]), int(g.max()))
        bonus = np.zeros((P, R))
        busy = np.flatnonzero(back.sum(axis=1) > 0)
        if not busy.size:
            return bonus, small
        lend: dict[int, list[float]] = {}
        spare = np.array([max(self._lendable(r, lend)[-1], 0.0) for r in range(R)])
        g = self.layout.gpus.astype(float)
        w = self.weights
        for p in busy.tolist():
            a = int(np.argmax(back[p]))
            b = float(back[p].sum())
            bonus[p] = np.minimum(b, spare) * (w.under_weight / g + w.over_weight / g[a])
            bonus[p, a] = 0.0
        return bonus, small

    def _outstanding_demand(self, now: float, placed: bool = False
                            ) -> tuple[np.ndarray, np.ndarray | None]:
        """Each trace pool's predicted *outstanding* demand over the next period (GPUs, its
        mean): what the hourly demand-to-supply counts (queued plus running GPUs), not only
        the work the period's arrivals bring (module doc, step 2).

        * Backlog, known now in every mode: a running job counts its GPUs for the part of
          the period it still runs (``perfect``: its true end; otherwise the whole period,
          its end being unknown); a waiting job counts its GPUs for the whole period.
        * Arrivals: ``perfect``: each job submitted in the period, its GPUs for the part of
          the period from its submission to its submission plus its duration; ``history``:
          the same of the last period's jobs within the last period (a job's duration as
          known now); ``forecast``: the forecasters' rate times mean duration
          (:meth:`_forecast_demand`).
        """
        t, D = self._trace, self.period_s
        hi = self._n_arrived
        idx = np.arange(hi)
        waiting = idx[self._queue[:hi] >= 0]
        waiting = waiting[(self.ran_in[waiting] < 0) & ~self._done[waiting]]
        running = idx[(self.ran_in[:hi] >= 0) & ~self._done[:hi]]
        occ = np.ones(running.size)
        if self.placement == "perfect" and running.size:
            start = np.array([self._regions[int(self.ran_in[j])].state.start_time[j]
                              for j in running.tolist()])
            occ = np.clip((start + t.duration[running] - now) / D, 0.0, 1.0)
        fixed = None
        if placed:  # running jobs stay where they run: their load is no pool's to move
            fixed = np.bincount(self.ran_in[running], weights=occ * t.num_gpus[running],
                                minlength=self.layout.n_regions)
            running, occ = running[:0], occ[:0]
        jobs = np.concatenate([running, waiting])
        weight = np.concatenate([occ, np.ones(waiting.size)]) * t.num_gpus[jobs]
        demand = np.bincount(t.pool[jobs], weights=weight, minlength=t.n_pools)
        if self.placement == "forecast":
            return demand + self._forecast_demand(now), fixed
        if self.placement == "perfect":  # the jobs still to arrive (the rest are backlog)
            lo, up = hi, max(hi, int(np.searchsorted(t.submit, now + D, side="left")))
        else:
            lo, up = np.searchsorted(t.submit, [now - D, now], side="left")
        end = np.full(up - lo, now + D if self.placement == "perfect" else now)
        known = t.duration[lo:up] if self.placement == "perfect" else \
            np.where(self._done[lo:up], t.duration[lo:up], now - t.submit[lo:up])
        occ = np.clip(np.minimum(known, end - t.submit[lo:up]), 0.0, None) / D
        return demand + np.bincount(t.pool[lo:up], weights=t.num_gpus[lo:up] * occ,
                                    minlength=t.n_pools), fixed

    def _forecast_demand(self, now: float) -> np.ndarray:
        """Each pool's demand (GPUs) from its home region's forecaster (every region sees every
        arrival): GPUs predicted to arrive within the largest window, per second
        (:func:`~sia.scheduler.regions.global_policy.forecast_rates`), times the mean duration
        (s) of the pool's jobs finished so far anywhere (0 before any finishes); a pool whose
        rate is not known counts its whole quota."""
        t = self._trace
        done = np.flatnonzero(self._done)
        mean = np.bincount(t.pool[done], weights=t.duration[done], minlength=t.n_pools) / \
            np.maximum(np.bincount(t.pool[done], minlength=t.n_pools), 1)
        demand = np.zeros(t.n_pools)
        for r, reg in enumerate(self._regions):
            pools = np.flatnonzero(self._home == r)
            if not pools.size:
                continue
            rate, known = forecast_rates(reg.policy, reg.view)
            demand[pools] = np.where(known, rate * mean, t.quota)[pools]
        return demand

    # ------------------------------------------------------------------ reports
    def facts(self) -> dict[str, Any]:
        """The guests' facts (routing counts jobs moved between queues) plus the shares and
        ``queue_moves``: every move of a waiting job, ``[job id, time, from, to]`` (regions by
        name; where each job waited when, for the hourly demand-to-supply)."""
        out = super().facts()
        led = self._ledger
        names = [r.name for r in self.layout.regions]
        ids = self._trace.job_ids
        out.update(share_moves=self.stats["share_moves"], share_gpus_moved=led.moved_gpus,
                   queue_moves=[[str(ids[j]), float(t), names[a], names[b]]
                                for j, t, a, b in self.queue_moves],
                   shares_final={n: led.shares[p].tolist()
                                 for p, n in enumerate(self._trace.pool_names)},
                   ran_outside_home=int(((self.ran_in >= 0)
                                         & (self.ran_in != self._home[self._trace.pool])).sum()))
        return out

