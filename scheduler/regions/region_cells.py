"""Regions on buddy cells: each region's own cell cluster and its placer stage (issue 17).

With locality (:class:`~sia.scheduler.locality.config.LocalityConfig`) every
region of :class:`~sia.scheduler.regions.global_policy.GlobalRegionPolicy`
owns a :class:`~sia.scheduler.locality.cell_cluster.CellCluster` of its own:
its GPUs (the quotas of the pools homed there) as whole machines of the
topology, its pools' quotas as cells (pools homed elsewhere have none), and,
as for one cluster, the machines rounded up to whole racks by padding that
never runs a job. Regions are laid out one after the other in a global GPU
id space (region ``r``'s GPU ``g`` is ``offset[r] + g``), so a job, held in
one region's cells, never spans regions.

:class:`RegionPlacer` is the simulator's placer stage for one region's inner
policy (:mod:`sia.scheduler.core.simulator`, ``_hold`` / ``_take_holds`` /
``_place``) on that region's state: the view's ``can_place`` holds a cell in
the region, the starts the policy returns take their held cells, the other
starts are placed as one batch, and refused ones go back to the policy's
``refused(jobs)``. With one region this is exactly what the simulator does
on one cell cluster, which is why a one-region replay on cells is today's.

:func:`placement_summary` adds the regions' placement counters up (and says
where each job ran, in global GPU ids), as
:func:`~sia.scheduler.locality.replay.simulate_cells` reports one cluster's.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

import numpy as np
from sia.data.errors import ConfigError
from sia.scheduler.core.view import SimState, Start, TraceArrays
from sia.scheduler.locality.cell_cluster import CellCluster, PlacementStats, cell_cluster_for
from sia.scheduler.locality.config import LocalityConfig

#: LocalityConfig options a region on cells cannot run with (a guest or a home job stopped and
#: restarted would need the global wrapper to move it between its regions' states)
UNSUPPORTED = ("preempt", "migrate")


def check_region_cells(names: Sequence[str], gpus: Sequence[int], config: LocalityConfig) -> None:
    """Raise ConfigError unless every region's GPUs are a whole number of machines and the
    config asks for nothing regions cannot do on cells (preemption, migration).

    ``names`` / ``gpus``: each region's name and GPUs, in layout order.
    """
    for option in UNSUPPORTED:
        if getattr(config, option):
            raise ConfigError(f"regions on cells: cells option {option} is not supported "
                              "(jobs run to their end in the region they start in); drop it")
    per = config.gpus_per_server
    for name, g in zip(names, gpus, strict=True):
        if int(g) % per:
            raise ConfigError(
                f"regions on cells: region {name!r} has {int(g)} GPUs, not a whole number of "
                f"{per}-GPU machines ({int(g) // per} machines and {int(g) % per} GPUs left "
                f"over); make its pools' quotas sum to a multiple of {per} or use "
                "--topology gpus=N with N dividing it")


def region_cell_cluster(name: str, trace: TraceArrays, config: LocalityConfig) -> CellCluster:
    """Return region ``name``'s cell cluster for its sub-trace (quota 0 outside the region);
    a cell-quota problem is a ConfigError naming the region."""
    try:
        return cell_cluster_for(trace, config)
    except ConfigError as err:
        raise ConfigError(f"regions on cells: region {name!r}: {err}") from None


def gpu_offsets(clusters: Sequence[CellCluster]) -> list[int]:
    """First global GPU id of each region's cells (regions one after the other, padding included)."""
    return np.concatenate([[0], np.cumsum([c.n_gpus for c in clusters])[:-1]]).astype(int).tolist()


class RegionPlacer:
    """The simulator's placer stage for one region's inner policy on its cell cluster.

    ``cells``: the region's cluster; ``state``: its :class:`SimState` (pending
    lists); ``policy``: its inner policy (``refused(jobs)`` gets the starts
    no cell was found for); ``label``: names the region in errors.
    """

    def __init__(self, cells: CellCluster, state: SimState, policy: Any, label: str):
        self.cells, self.state, self.label = cells, state, label
        self.refused = getattr(policy, "refused", None)
        #: cells held by the view's can_place in this decision: job -> (GPU ids, opportunistic)
        self.holds: dict[int, tuple[tuple[int, ...], bool]] = {}

    def hold(self, job: int, opportunistic: bool) -> bool:
        """The region view's ``can_place``: hold a cell for pending ``job`` now; True if held."""
        trace = self.state.trace
        if not self._pending(job):
            raise ConfigError(f"regions: {self.label}: can_place asked for job {job}, which is "
                              "not pending there")
        gpus = self.cells.try_place(job, int(trace.pool[job]), int(trace.num_gpus[job]),
                                    not opportunistic)
        if gpus is None:
            return False
        self.holds[job] = (gpus, bool(opportunistic))
        return True

    def place(self, items: list) -> list:
        """Give the decision's starts their cells (held ones first, the rest as one batch);
        return them with placements, without the refused ones (passed to ``refused``)."""
        if self.refused is None:  # the policy places its own starts (try_place)
            return items
        items = self._take_holds(items)
        trace = self.state.trace
        todo = [(j, int(trace.pool[j]), int(trace.num_gpus[j]), not it.opportunistic)
                for it in items if type(it) is Start and it.placement is None
                and self._pending(j := int(it.job))]
        if not todo:
            return items
        granted = self.cells.place_batch(todo)
        asked = {t[0] for t in todo}
        out = []
        for it in items:
            j = int(it.job)
            if type(it) is not Start or j not in asked:
                out.append(it)
            elif j in granted:
                out.append(Start(j, bool(it.opportunistic), granted[j]))
        if len(granted) < len(todo):
            self.refused([t[0] for t in todo if t[0] not in granted])
        return out

    def _pending(self, job: int) -> bool:
        """True when ``job`` (a job index of the region's sub-trace) is pending there."""
        trace = self.state.trace
        if not 0 <= job < trace.n_jobs:
            return False
        plist = self.state.pending[int(trace.pool[job])]
        k = bisect_left(plist, job)
        return k < len(plist) and plist[k] == job

    def _take_holds(self, items: list) -> list:
        """Starts ``can_place`` held a cell for take it; cells held for jobs not started are freed."""
        holds, out = self.holds, []
        for it in items:
            if type(it) is Start and it.placement is None:
                h = holds.pop(int(it.job), None)
                if h is not None:
                    if h[1] != bool(it.opportunistic):
                        raise ConfigError(f"regions: {self.label}: job {int(it.job)} started with "
                                          "another kind than the start it asked can_place for")
                    it = Start(int(it.job), h[1], h[0])
            out.append(it)
        for j in holds:
            self.cells.drop_grant(j)
        holds.clear()
        return out


def placement_summary(clusters: Sequence[CellCluster], offsets: Sequence[int],
                      job_of: Sequence[Any], job_ids: Sequence[str], *,
                      record_placements: bool = False) -> dict:
    """The regions' placement counters added up, as :func:`simulate_cells` reports one cluster's.

    ``job_of[r]`` maps region ``r``'s cluster keys to trace job indices (a callable); with
    ``record_placements`` also ``placements`` ({job_id: global GPU ids of its latest start}),
    ``gpus_per_server``, ``pad_gpus`` (global ids) and ``region_gpus`` (each region's first
    global GPU id and GPU count, padding included).
    """
    total = PlacementStats()
    for c in clusters:
        s = c.stats
        for f in ("buddy", "fallback", "refused", "frag_refused", "blocked", "solver_calls",
                  "preemptions", "migrations", "migration_steps"):
            setattr(total, f, getattr(total, f) + getattr(s, f))
        for k, v in s.fallback_by.items():
            total.fallback_by[k] = total.fallback_by.get(k, 0) + v
        total.solver_s.extend(s.solver_s)
        total.frag_samples.extend(s.frag_samples)
    out = total.summary()
    out["adoptions"] = sum(c.buddy.adoptions for c in clusters)
    out["preempted_jobs"] = 0
    out["migrated_jobs"] = 0
    if record_placements:
        places: dict[str, tuple[int, ...]] = {}
        for c, off, of in zip(clusters, offsets, job_of, strict=True):
            for key, g in c.last_gpus.items():
                places[str(job_ids[of(key)])] = tuple((g + off).tolist())
        out["placements"] = places
        out["gpus_per_server"] = clusters[0].topology.gpus_per_server if clusters else 0
        out["pad_gpus"] = [off + int(x) for c, off in zip(clusters, offsets, strict=True)
                           for x in np.flatnonzero(c.owner == -2)]
        out["region_gpus"] = [[int(off), int(c.n_gpus)] for c, off in zip(clusters, offsets, strict=True)]
    return out
