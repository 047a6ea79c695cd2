"""Regions in the simulator: one inner policy per region under a global router (MAST, issue 17).

:class:`GlobalRegionPolicy` is a policy for the ordinary simulator
(:func:`sia.scheduler.core.simulator.run_trace`). The simulator's cluster is
the sum of the regions' GPUs (each region's GPUs are the quotas of the pools
homed there); the wrapper keeps, per region, a count-mode
:class:`~sia.scheduler.core.cluster.Cluster` of that size (on buddy cells its
own cell cluster, see below), a
:class:`~sia.scheduler.core.view.SimState` and a
:class:`~sia.scheduler.core.view.SimView`, so every start is checked against
its region's GPUs (a region can never run more than it has).

Why one *sub-trace* per region: the inner policies (FCFS, MaxMin, SIA)
keep per-job state keyed by arrival index (SIA admits every job below
``view.n_arrived`` into its pending load and lendable lists), so each
region's policy replays a static trace holding exactly the jobs of the pools
homed there (all pools stay in its pool list, with quota 0 outside the
region, so pool indices are the same everywhere and a forecaster trained on
every pool answers for any region). With one region holding every pool its
sub-trace *is* the trace, its view mirrors the simulator's exactly and the
replay is today's, start for start (a property test checks it).

Each decision:

1. *Home pass.* Every region's policy decides on its own view (its home
   pools' pending jobs, its free GPUs); its starts run in that region.
2. *Global scan* (``route=True``, more than one region). The jobs still
   pending, oldest first (the global queue: priority 0, credit = waiting
   time), whose pool's data has a usable replica outside its home region,
   go through :func:`~sia.scheduler.regions.global_scan.scan_pass` over
   those regions, with its per-pass negative cache. A routed job runs in the
   region that wins the placement-quality score as a **guest**: an
   opportunistic job beyond every quota, on GPUs the region's own rule leaves
   spare, and it runs there to its end. Its home policy forgets it
   (``withdraw(jobs)`` for a policy that keeps per-job state, as SIA does).

   Guest GPUs (what a region lends to guests):

   * SIA family (an inner policy with ``forecaster`` and ``windows_s``): the
     guests form a pool with zero quota under SIA's Figure 8 rule. In window
     ``w`` the region keeps ``sum_p min(pending_p + TotalNewLoad_p(w),
     unused_quota_p)`` GPUs for its home pools (its forecaster's answers on
     its own view, nested over windows) and lends the rest of its free GPUs
     to guests whose predicted duration bin (the home region's forecaster,
     asked once per job) fits ``w``; a job whose bin fits no window is never
     routed. With perfect predictions a home job is therefore never delayed
     by a guest, as SIA's own loans delay none.
   * Any other policy (FCFS, MaxMin): such a policy starts a pool's job
     whenever it fits the pool's unused quota, so guests may only take GPUs
     beyond every home pool's unused quota; the free GPUs never exceed that
     (``free = unused quotas - opportunistic use``), so these regions take no
     guests and routing needs SIA regions.
   * ``guests="idle"`` (any policy but FCFS): guests take the free GPUs no
     pending home job asks for now, whatever their duration; a home job
     that arrives later may then wait for a guest (no reservations), so
     SIA's no-slowdown guarantee is traded for routing long jobs too.

3. *Temporal decoupling* (``placement`` other than ``static``): every
   ``period_s`` seconds the data placement is re-planned with
   :func:`~sia.scheduler.regions.data_placement.plan_data_placement` from each
   pool's predicted GPU demand for the next period (``perfect``: the trace's
   future, GPU-seconds submitted in the period over its length; ``history``:
   the same over the last period, counting a job still running or pending by
   the time it has waited and run so far; ``forecast``: each home region's
   forecaster, the learned one for ``sia-learned``: the GPUs it predicts to
   arrive within its largest window, as a rate, times the mean duration of
   the pool's jobs finished so far). New replicas become usable after
   their transfer; data moved, replica counts and the demand used are recorded.

On buddy cells (``locality``, :mod:`~sia.scheduler.regions.region_cells`):
each region owns a :class:`~sia.scheduler.locality.cell_cluster.CellCluster`
of its GPUs as whole machines of the topology (its pools' quotas as cells,
padded to whole racks as one cluster is), instead of the count-mode cluster;
regions are laid out one after the other in global GPU ids, so no job spans
two. A region policy's starts go through that region's placer stage (the
simulator's, on the region's state: ``can_place`` holds a cell there, the
rest is placed as one batch, refusals go back to the policy), and a guest
needs, beside the GPUs above, an opportunistic cell under the region's
reservations *as cells* in its window, exactly as SIA's own loans there
(:mod:`~sia.scheduler.regions.guests`): no cell in a pool's bound cells or
in the buddy of a dedicated cell of a pool that can still grow, nothing
while a reservation cannot be met. The simulator's cluster stays a count of
every region's GPUs; each region's cells are the truth, and
:meth:`GlobalRegionPolicy.placement_summary` reports them as a replay on one
cell cluster does. With one region the replay is today's cell replay, start
for start and cell for cell. Preemption and migration are not supported
there (a job runs to its end in the region it starts in).

``facts()`` reports the routing, the negative cache (attempts, hits, hit
rate), scan-pass time and each data plan; :attr:`ran_in` gives each job's
region (the trace's job index order) after a replay.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from sia.data.errors import ConfigError
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.forecast import DURATION_BIN_EDGES_S
from sia.scheduler.core.view import SimState, SimView, Start, TraceArrays
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.regions.data_placement import keep_set, plan_data_placement
from sia.scheduler.regions.defaults import PLAN_TIME_S
from sia.scheduler.regions.global_scan import JobRequest, scan_pass
from sia.scheduler.regions.guests import CellGuestSlots, GuestSlots
from sia.scheduler.regions.model import PoolData, Region, RegionLayout, RegionsError
from sia.scheduler.regions.region_cells import (
    RegionPlacer,
    check_region_cells,
    gpu_offsets,
    placement_summary,
    region_cell_cluster,
)

#: Where a pool's predicted demand comes from when data placement is re-planned.
PLACEMENT_MODES = ("static", "perfect", "history", "forecast")
#: What a region lends guests: ``sia`` (what its reservations leave, module doc) or ``idle``.
GUEST_RULES = ("sia", "idle")
#: Inner policies that may lose a pending job to another region: stateless about jobs, or
#: with ``withdraw(jobs)``.
_ROUTABLE_STATELESS = ("fcfs", "maxmin")


def layout_for_pools(homes: Mapping[str, str], quotas: Mapping[str, int], *,
                     sizes: Mapping[str, float] | None = None, transfer_rate: float = 1.0,
                     storage: Mapping[str, float | None] | None = None,
                     replicas: Mapping[str, Sequence[str]] | None = None,
                     source: str = "regions") -> RegionLayout:
    """A :class:`RegionLayout` whose regions' GPUs are the quotas of the pools homed there.

    ``homes``: pool -> region; ``quotas``: pool -> GPUs (every pool of the
    workload, each with a home); ``sizes``: pool -> data size (default 1).
    Errors name ``source`` and the pool, e.g. ``regions: pool 'p9' has no home region``.
    """
    missing = sorted(set(quotas) - set(homes))
    if missing:
        raise RegionsError(f"{source}: pool {missing[0]!r} of the workload has no home region")
    extra = sorted(set(homes) - set(quotas))
    if extra:
        raise RegionsError(f"{source}: pool {extra[0]!r} is not a pool of the workload")
    names = sorted(set(homes.values()))
    gpus = {r: 0 for r in names}
    for p, r in homes.items():
        gpus[r] += int(quotas[p])
    empty = [r for r in names if gpus[r] < 1]
    if empty:
        raise RegionsError(f"{source}: region {empty[0]!r} has no GPUs (its pools' quotas sum to 0)")
    storage = storage or {}
    regions = [Region(r, gpus[r], storage.get(r)) for r in names]
    sizes = sizes or {}
    replicas = replicas or {}
    pools = [PoolData(p, homes[p], float(sizes.get(p, 1.0)), tuple(replicas.get(p, ())))
             for p in sorted(homes)]
    return RegionLayout(regions, pools, transfer_rate)


class _Region:
    """One region's replay: its sub-trace, state, view, cluster, inner policy and guests.

    ``locality``: the region's cluster is its own cell cluster (:mod:`region_cells`), and
    :attr:`placer` places its policy's starts there; None: a count-mode cluster of its GPUs.
    """

    __slots__ = ("index", "name", "glob", "trace", "state", "view", "cluster", "policy",
                 "n_arrived", "guests", "home_pools", "withdraw", "later_touched", "sia", "placer")

    def __init__(self, index: int, name: str, trace: TraceArrays, glob: np.ndarray,
                 policy: Any, home_pools: list[int], locality: LocalityConfig | None = None):
        self.index, self.name, self.trace, self.glob = index, name, trace, glob
        self.state = SimState(trace)
        self.cluster = (Cluster(trace.quota) if locality is None
                        else region_cell_cluster(name, trace, locality))
        self.view = SimView(self.state, self.cluster)
        self.placer = None
        if locality is not None:
            self.placer = RegionPlacer(self.cluster, self.state, policy, f"region {name!r}")
            if self.placer.refused is not None:
                self.view._probe = self.placer.hold
        self.policy = policy
        self.n_arrived = 0
        self.guests: dict[int, int] = {}  # global job -> GPUs
        self.home_pools = home_pools
        self.withdraw = getattr(policy, "withdraw", None)
        self.later_touched: set[int] = set()  # pools whose pending list changed after a decision
        self.sia = callable(getattr(getattr(policy, "forecaster", None), "new_load_estimate", None)) \
            and hasattr(policy, "windows_s")
        policy.reset(trace, self.cluster)


def forecast_rates(pol: Any, view: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return a region policy's predicted arrivals within its largest window, per pool: GPUs
    per second, and whether that rate is known.

    The plans want SIA's predictions, not its risk budget's bounds: when the budget floors
    calibrated answers at the registered ones (``risk_mode`` veto, SIA's default) the
    registered answers are read (``SiaPolicy.registered_answers``). A pool predicted to see
    arrivals with an unbounded load (a calibrated pool too cold for a bound, without the
    floor: SIA reserves its whole unused quota) has no known rate."""
    windows = tuple(pol.windows_s)
    view._invalidate()
    arrive = np.asarray(pol.forecaster.will_jobs_arrive(view, windows), dtype=bool)
    load = np.asarray(pol.forecaster.new_load_estimate(view, windows), dtype=float)
    registered = getattr(pol, "registered_answers", None)
    kept = registered() if callable(registered) else None
    if kept is not None:
        arrive, load = kept
    arrive, load = arrive[:, -1], load[:, -1]
    known = ~arrive | np.isfinite(load)
    return np.where(arrive & known, np.maximum(load, 0.0), 0.0) / windows[-1], known


class GlobalRegionPolicy:
    """Global scheduling across regions over per-region inner policies (see the module doc).

    ``layout``: the regions (their GPUs must be the quotas of their home
    pools, :func:`layout_for_pools`) and each pool's data; ``make_inner()``
    builds one fresh inner policy (called once per region); ``inner_name``
    names it in reports. ``route``: run the global scan (False: home region
    only, today's practice). ``placement``: one of :data:`PLACEMENT_MODES`;
    ``period_s``: seconds between data-placement plans; ``plan_time_s``: the
    MIP's wall-clock safety net (it stops on solver work first); ``neg_cache``: the scan's negative cache on or off.
    ``locality``: every region on its own buddy cells with these options (the config
    the inner policy replays with, :func:`~sia.scheduler.locality.replay.config_for_policy`;
    each region's GPUs a whole number of machines); None: fungible GPUs.
    """

    perfect_information = False

    def __init__(self, layout: RegionLayout, make_inner: Callable[[], Any], *,
                 inner_name: str = "inner", route: bool = True, placement: str = "static",
                 period_s: float = 86400.0, plan_time_s: float = PLAN_TIME_S,
                 neg_cache: bool = True,
                 guests: str = "sia", locality: LocalityConfig | None = None):
        if placement not in PLACEMENT_MODES:
            raise ConfigError(f"regions: placement must be one of {', '.join(PLACEMENT_MODES)}, "
                              f"got {placement!r}")
        if guests not in GUEST_RULES:
            raise ConfigError(f"regions: guests must be one of {', '.join(GUEST_RULES)}, "
                              f"got {guests!r}")
        if not (math.isfinite(period_s) and period_s > 0):
            raise ConfigError(f"regions: period_s must be > 0 seconds, got {period_s!r}")
        if locality is not None:
            check_region_cells([r.name for r in layout.regions], layout.gpus.tolist(), locality)
        self.locality = locality
        self.layout = layout
        self.make_inner = make_inner
        self.inner_name = inner_name
        self.route, self.placement = bool(route), placement
        self.period_s, self.plan_time_s, self.neg_cache = float(period_s), float(plan_time_s), bool(neg_cache)
        self.guests = guests
        mode = "global" if route else "home"
        self.name = f"{inner_name}@{mode}" + (f"+{placement}+{guests}" if route else "")
        probe = make_inner()
        if route and placement == "forecast" and not (
                callable(getattr(getattr(probe, "forecaster", None), "new_load_estimate", None))
                and hasattr(probe, "windows_s")):
            raise ConfigError(f"regions: placement 'forecast' needs a region policy with a "
                              f"forecaster (a sia policy), not {inner_name!r}")
        if route and guests == "idle" and inner_name in ("fcfs",):
            raise ConfigError(f"regions: guests 'idle' needs a region policy that checks free "
                              f"GPUs before a dedicated start (sia, maxmin), not {inner_name!r}")
        if callable(getattr(probe, "next_wakeup", None)):
            raise ConfigError(f"regions: policy {inner_name!r} plans ahead (next_wakeup) and cannot "
                              "run inside a region; use fcfs, maxmin or a sia policy")
        if self.route and not (callable(getattr(probe, "withdraw", None))
                               or inner_name in _ROUTABLE_STATELESS):
            raise ConfigError(f"regions: policy {inner_name!r} keeps per-job state and cannot lose "
                              "a pending job to another region; route with fcfs, maxmin or a sia "
                              "policy, or use home-region scheduling (route off)")
        self.uses_ticks = bool(getattr(probe, "uses_ticks", True))
        self._probe = probe
        self.ran_in = np.zeros(0, dtype=np.int64)

    # ------------------------------------------------------------------ life cycle
    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Split ``trace`` into one sub-trace per region and reset an inner policy on each."""
        lay = self.layout
        missing = [p for p in trace.pool_names if p not in lay.pool_index]
        if missing:
            raise RegionsError(f"regions: pool {missing[0]!r} of the workload is not in the "
                               "region layout")
        self._trace = trace
        self._home = np.array([lay.home[lay.pool_index[p]] for p in trace.pool_names], dtype=np.int64)
        #: row of each trace pool in the layout's arrays
        self._lrow = np.array([lay.pool_index[p] for p in trace.pool_names], dtype=np.int64)
        supply = np.bincount(self._home, weights=trace.quota, minlength=lay.n_regions).astype(np.int64)
        bad = np.flatnonzero(supply != lay.gpus)
        if bad.size:
            r = int(bad[0])
            raise RegionsError(f"regions: region {lay.regions[r].name!r} has {lay.gpus[r]} GPUs in "
                               f"the layout but its pools' quotas sum to {supply[r]}")
        job_region = self._home[trace.pool]
        self._local = np.full(trace.n_jobs, -1, dtype=np.int64)
        self._regions: list[_Region] = []
        for r, reg in enumerate(lay.regions):
            glob = np.flatnonzero(job_region == r)
            self._local[glob] = np.arange(glob.size)
            sub = TraceArrays.build(
                job_ids=trace.job_ids[glob], submit=trace.submit[glob],
                duration=trace.duration[glob], num_gpus=trace.num_gpus[glob],
                pool=trace.pool[glob], tag=trace.tag[glob], pool_names=trace.pool_names,
                quota=np.where(self._home == r, trace.quota, 0), speedup=trace.speedup,
                user=None if trace.user is None else trace.user[glob],
                time_limit=None if trace.time_limit is None else trace.time_limit[glob],
                hold=None if trace.hold is None else trace.hold[glob])
            policy = self._probe if r == 0 else self.make_inner()
            self._regions.append(_Region(r, reg.name, sub, glob, policy,
                                         np.flatnonzero(self._home == r).tolist(), self.locality))
        self._offsets = (gpu_offsets([reg.cluster for reg in self._regions])
                         if self.locality is not None else [])
        self._gpus = trace.num_gpus.tolist()
        self._pool = trace.pool.tolist()
        self._seen_comp = [0] * trace.n_pools
        self.ran_in = np.full(trace.n_jobs, -1, dtype=np.int64)
        self._done = np.zeros(trace.n_jobs, dtype=bool)
        self._window_of: dict[int, int] = {}  # global job -> lending window (guest requests)
        self._replicas = lay.initial_replicas()
        self._next_plan = 0.0 if (self.route and self.placement != "static") else math.inf
        self._multi = self.route and lay.n_regions > 1
        self.stats: dict[str, Any] = dict(scan_passes=0, scan_attempts=0, scan_hits=0, scan_s=0.0,
                                          routed=0, plans=[])
        self._routed_per_region = [0] * lay.n_regions

    # ------------------------------------------------------------------ decision
    def decide(self, view: SimView) -> list[Start]:
        """Home pass in every region, then the global scan of the jobs still waiting."""
        self._sync(view)
        starts: list[Start] = []
        for reg in self._regions:
            st = reg.state
            st.now, st.reason = view.now, view.reason
            reg.view._invalidate()
            items = reg.policy.decide(reg.view)
            if reg.placer is not None and (items or reg.placer.holds):
                items = reg.placer.place(items)
            if items:
                self._apply_home(reg, items, starts, view.now)
            st.touched.clear()
            if reg.later_touched:
                st.touched |= reg.later_touched
                reg.later_touched = set()
        if self._multi:
            if view.now >= self._next_plan:
                self._plan_data(view)
            self._route(view, starts)
        return starts

    def _sync(self, view: SimView) -> None:
        """Bring each region's state up to the simulator's: arrivals, then completions."""
        n_arr = view.n_arrived
        for reg in self._regions:
            st = reg.state
            hi = int(np.searchsorted(reg.glob, n_arr))
            if hi > reg.n_arrived:
                pool = reg.trace.pool
                for local in range(reg.n_arrived, hi):
                    p = int(pool[local])
                    st.pending[p].append(local)
                    st.touched.add(p)
                reg.n_arrived = st.n_arrived = hi
        for p, done, ends in self._new_completions(view):
            home = self._regions[int(self._home[p])]
            for j, end in zip(done, ends, strict=True):
                self._complete(j, p, end, home)

    def _new_completions(self, view: SimView) -> list[tuple[int, list[int], list[float]]]:
        """Return, per pool with jobs completed since the last call, (pool, jobs, end times),
        in completion order; none when the decision is not for a completion."""
        if not view.reason & 2:  # Reason.COMPLETION
            return []
        out = []
        for p in range(self._trace.n_pools):
            k = view.n_completed(p)
            if k != self._seen_comp[p]:
                lo, self._seen_comp[p] = self._seen_comp[p], k
                out.append((p, view.completed_jobs(p)[lo:k].tolist(),
                            view.completions(p)[lo:k].tolist()))
        return out

    def _complete(self, j: int, p: int, end: float, home: _Region) -> None:
        """Free job ``j``'s GPUs in the region it ran in; record its completion at home."""
        g = self._gpus[j]
        self._done[j] = True
        ran = self._regions[int(self.ran_in[j])]
        local = int(self._local[j])
        hs = home.state
        if ran is home:
            ran.cluster.release(local, g)
            if hs.opportunistic[local]:
                hs.used_opp[p] -= g
            else:
                hs.used_ded[p] -= g
            del hs.running[local]
        else:
            ran.cluster.release(-1 - j, g)
            del ran.guests[j]
        n = hs.n_comp[p]
        hs.comp_end[p][n] = end
        hs.comp_job[p][n] = local
        hs.n_comp[p] = n + 1
        hs.touched.add(p)

    def _apply_home(self, reg: _Region, items: list, starts: list[Start], now: float) -> None:
        """Apply a region policy's starts to its state and cluster; add them to ``starts``."""
        st, glob, cluster = reg.state, reg.glob, reg.cluster
        quota = reg.trace.quota
        cells = reg.placer is not None
        for it in items:
            if type(it) is not Start or (it.placement is not None and not cells):
                raise ConfigError(f"regions: policy {self.inner_name!r} returned {it!r}: only "
                                  "plain starts (no placement, no preemption) run inside regions")
            local, opp = int(it.job), bool(it.opportunistic)
            p = int(reg.trace.pool[local])
            g = int(reg.trace.num_gpus[local])
            plist = st.pending[p]
            k = _index_in(plist, local)
            if k < 0:
                raise ConfigError(f"regions: policy {self.inner_name!r} in region {reg.name!r} at "
                                  f"t={now:.3f}s started job {reg.trace.job_ids[local]!r}, which "
                                  "is not pending there")
            if not opp and st.used_ded[p] + g > quota[p]:
                raise ConfigError(f"regions: region {reg.name!r}: dedicated start of job "
                                  f"{reg.trace.job_ids[local]!r} exceeds pool "
                                  f"{reg.trace.pool_names[p]!r}'s quota")
            cluster.allocate(local, g, it.placement)  # raises without the GPUs (or its cell)
            del plist[k]
            st.start_time[local] = now
            if opp:
                st.opportunistic[local] = True
                st.used_opp[p] += g
            else:
                st.used_ded[p] += g
            st.running[local] = None
            j = int(glob[local])
            self.ran_in[j] = reg.index
            starts.append(Start(j, opp))

    # ------------------------------------------------------------------ global scan
    def _route(self, view: SimView, starts: list[Start]) -> None:
        """Route waiting jobs with usable data outside their home region (see the module doc)."""
        usable = self._replicas.usable(view.now)[self._lrow]  # [trace pool, region]
        away = usable.copy()
        away[np.arange(away.shape[0]), self._home] = False
        if not away.any():
            return
        slots = [self._guest_slots(reg) for reg in self._regions]
        best = max((max(s.lendable, default=0.0) for s in slots), default=0.0)
        if best < 1:
            return
        jobs: list[JobRequest] = []
        where: list[tuple[_Region, int, int]] = []
        now = view.now
        for p in np.flatnonzero(away.any(axis=1)).tolist():
            home = self._regions[int(self._home[p])]
            plist = home.state.pending[p]
            if not plist:
                continue
            wins = self._windows(home, plist) if home.sia and self.guests == "sia" \
                else [0] * len(plist)
            for local, k in zip(plist, wins, strict=True):
                g = int(home.trace.num_gpus[local])
                if g > best or k < 0:
                    continue
                j = int(home.glob[local])
                jobs.append(JobRequest(str(j), self._trace.pool_names[p], g,
                                       credit=now - float(home.trace.submit[local]), window=k))
                where.append((home, p, local))
        if not jobs:
            return
        names = {n: i for i, n in enumerate(self._trace.pool_names)}
        res = scan_pass(jobs, slots, away, names, self._home, use_cache=self.neg_cache)
        self.stats["scan_passes"] += 1
        self.stats["scan_attempts"] += res.attempts
        self.stats["scan_hits"] += res.cache_hits
        self.stats["scan_s"] += res.seconds
        gone: dict[int, list[int]] = {}
        for i in np.flatnonzero(res.region >= 0).tolist():
            home, p, local = where[i]
            r = int(res.region[i])
            j = int(home.glob[local])
            g = jobs[i].gpus
            guest = self._regions[r]
            if guest.placer is None:  # on cells the scan's commit started it on its cell
                guest.cluster.allocate(-1 - j, g)  # raises when the region has too few free GPUs
            guest.guests[j] = g
            plist = home.state.pending[p]
            del plist[_index_in(plist, local)]
            home.later_touched.add(p)
            gone.setdefault(home.index, []).append(local)
            self.ran_in[j] = r
            self._routed_per_region[r] += 1
            starts.append(Start(j, True))
        for h, locals_ in gone.items():
            withdraw = self._regions[h].withdraw
            if withdraw is not None:
                withdraw(locals_)
        self.stats["routed"] += sum(len(v) for v in gone.values())

    def _guest_slots(self, reg: _Region) -> GuestSlots:
        """GPUs (on cells: and cells) region ``reg`` lends to guests now, per lending window
        (see the module doc)."""
        free = reg.cluster.free
        st = reg.state
        pend = np.zeros(reg.trace.n_pools)
        hp = reg.home_pools
        for p in hp:
            if st.pending[p]:
                pend[p] = float(reg.trace.num_gpus[st.pending[p]].sum())
        if self.guests == "idle":
            return self._slots(reg, [free - pend.sum()])
        unused = (reg.trace.quota - np.asarray(st.used_ded)).astype(float)
        if not reg.sia:
            return self._slots(reg, [free - unused.sum()])
        if free < 1:
            return self._slots(reg, [0.0])
        pol = reg.policy
        windows = tuple(pol.windows_s)
        reg.view._invalidate()
        fc = pol.forecaster
        arrive = np.asarray(fc.will_jobs_arrive(reg.view, windows), dtype=bool)
        load = np.asarray(fc.new_load_estimate(reg.view, windows), dtype=np.float64)
        tnl = np.where(arrive, np.maximum(load, 0.0), 0.0)
        if getattr(pol, "nested_reservations", True):
            tnl = np.maximum.accumulate(tnl, axis=1)
        res = np.minimum(pend[:, None] + tnl, unused[:, None])  # [pool, window]
        return self._slots(reg, (free - res.sum(axis=0)).tolist(), res.T)

    def _slots(self, reg: _Region, lendable: list[float],
               reserved: np.ndarray | None = None) -> GuestSlots:
        """Region ``reg`` for the scan: ``lendable`` GPUs per window; on cells also a cell under
        ``reserved`` ([window, pool] GPUs each home pool reserves as cells; None: none)."""
        cluster = reg.cluster
        if reg.placer is None:
            return GuestSlots(reg.name, cluster.total_gpus, cluster.free, lendable)
        st, gpus = reg.state, reg.trace.num_gpus
        widths = {p: gpus[st.pending[p]].tolist() for p in reg.home_pools if st.pending[p]}
        return CellGuestSlots(reg.name, cluster.total_gpus, cluster.free, lendable, cluster,
                              reserved, widths)

    def _windows(self, home: _Region, plist: list[int]) -> list[int]:
        """Each pending job's lending window (first SIA window its predicted bin fits; -1: none),
        predicted once per job by its home region's forecaster."""
        cache = self._window_of
        glob = home.glob
        new = [local for local in plist if int(glob[local]) not in cache]
        if new:
            pol = home.policy
            bins = np.asarray(pol.forecaster.duration_bins(home.view, np.array(new, dtype=np.int64)))
            upper = np.array((*DURATION_BIN_EDGES_S, math.inf))[bins]
            ks = np.searchsorted(np.asarray(pol.windows_s), upper, side="left")
            for local, k in zip(new, ks.tolist(), strict=True):
                cache[int(glob[local])] = k if k < len(pol.windows_s) else -1
        return [cache[int(glob[local])] for local in plist]

    # ------------------------------------------------------------------ data placement
    def _plan_data(self, view: SimView) -> None:
        """Re-plan where each pool's data is kept from its predicted demand (module doc, 3)."""
        now = view.now
        self._next_plan = (math.floor(now / self.period_s) + 1) * self.period_s
        demand_trace = self._predicted_demand(now)
        lay = self.layout
        demand = np.zeros(lay.n_pools)
        demand[self._lrow] = demand_trace
        held = self._replicas.held()
        plan = plan_data_placement(lay, demand, previous=held, keep=keep_set(self._replicas, now),
                                   time_limit_s=self.plan_time_s)
        t0 = time.perf_counter()
        if not plan.kept_previous:
            self._replicas, moved = self._replicas.apply(lay, plan.held, now)
        else:
            moved = 0.0
        ratio = plan.region_load(demand) / lay.gpus
        self.stats["plans"].append(dict(
            t=now, status=plan.status, moved=moved, replicas=int(self._replicas.held().sum()),
            solve_s=plan.solve_s + time.perf_counter() - t0, message=plan.message,
            demand=[float(x) for x in demand_trace],
            planned_max_ratio=float(ratio.max()), planned_avg_ratio=float(demand.sum() / lay.gpus.sum())))

    def _predicted_demand(self, now: float) -> np.ndarray:
        """Each trace pool's predicted GPU demand (GPUs) over the next period (module doc, 3)."""
        t, D = self._trace, self.period_s
        if self.placement == "perfect":
            lo, hi = np.searchsorted(t.submit, [now, now + D], side="left")
            work = t.num_gpus[lo:hi] * t.duration[lo:hi]
            return np.bincount(t.pool[lo:hi], weights=work, minlength=t.n_pools) / D
        if self.placement == "forecast":
            return self._forecast_demand(now)
        lo, hi = np.searchsorted(t.submit, [now - D, now], side="left")
        sub = t.submit[lo:hi]
        done = self._done[lo:hi]
        # a finished job counts its duration, one still waiting or running the time so far
        known = np.where(done, t.duration[lo:hi], now - sub)
        return np.bincount(t.pool[lo:hi], weights=t.num_gpus[lo:hi] * known,
                           minlength=t.n_pools) / D

    def _forecast_demand(self, now: float) -> np.ndarray:
        """Each trace pool's demand (GPUs) from its home region's forecaster: GPUs predicted to
        arrive within the largest window, per second (:func:`forecast_rates`), times the mean
        duration (s) of the pool's jobs finished so far (0 before any finishes); a pool whose
        rate is not known counts its whole quota."""
        demand = np.zeros(self._trace.n_pools)
        for reg in self._regions:
            st = reg.state
            rate, known = forecast_rates(reg.policy, reg.view)
            for p in reg.home_pools:
                done = st.comp_job[p][: st.n_comp[p]]
                if not known[p]:
                    demand[p] = float(self._trace.quota[p])
                elif done.size:
                    demand[p] = rate[p] * float(reg.trace.duration[done].mean())
        return demand

    # ------------------------------------------------------------------ reports
    def job_regions(self) -> dict[str, list[str]]:
        """``{"job_id": [...], "region": [...]}``: the region each job ran in (after a replay)."""
        names = [r.name for r in self.layout.regions]
        return {"job_id": [str(j) for j in self._trace.job_ids.tolist()],
                "region": [names[r] if r >= 0 else None for r in self.ran_in.tolist()]}

    def placement_summary(self, record_placements: bool = False) -> dict | None:
        """On cells, the regions' placement counters added up (and with ``record_placements``
        where each job ran, in global GPU ids; :func:`region_cells.placement_summary`), as a
        replay on one cell cluster reports them; None on fungible GPUs."""
        if self.locality is None:
            return None

        def job_of(glob: np.ndarray) -> Callable[[int], int]:
            return lambda key: int(glob[key]) if key >= 0 else -1 - key

        return placement_summary([reg.cluster for reg in self._regions], self._offsets,
                                 [job_of(reg.glob) for reg in self._regions],
                                 self._trace.job_ids.tolist(), record_placements=record_placements)

    def facts(self) -> dict[str, Any]:
        """What the replay did: routing, negative cache, scan time, data plans (JSON-ready)."""
        s = self.stats
        checks = s["scan_attempts"] + s["scan_hits"]
        plans = s["plans"]
        return {
            "regions": [r.name for r in self.layout.regions],
            "routed": s["routed"],
            "routed_per_region": list(self._routed_per_region),
            "scan_passes": s["scan_passes"],
            "scan_attempts": s["scan_attempts"],
            "scan_cache_hits": s["scan_hits"],
            "scan_hit_rate": s["scan_hits"] / checks if checks else 0.0,
            "scan_s_total": s["scan_s"],
            "scan_s_mean": s["scan_s"] / s["scan_passes"] if s["scan_passes"] else 0.0,
            "data_plans": len(plans),
            "data_moved": float(sum(p["moved"] for p in plans)),
            "replicas_final": int(self._replicas.held().sum()),
            "plans": plans,
        }


def _index_in(plist: list[int], local: int) -> int:
    """Position of ``local`` in the ascending list ``plist``, or -1."""
    from bisect import bisect_left

    k = bisect_left(plist, local)
    return k if k < len(plist) and plist[k] == local else -1
