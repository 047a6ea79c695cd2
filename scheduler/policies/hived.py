"""HiveD* (SIA 6.1): HiveD's sharing of idle quota, with jobs run to completion.

HiveD (OSDI'20) guarantees each virtual cluster (pool) its quota: a pool's
*guaranteed* (high-priority) jobs always get their pool's quota, and idle
GPUs of any pool are used by *low-priority* (opportunistic) jobs, which are
preempted when a guaranteed job needs the GPUs back. SIA's HiveD* is
"identical to HiveD except ... jobs that start run without interruptions
until completion": the preemption is gone, so a guaranteed job whose GPUs
are lent out waits until they free up (that is how HiveD* slows donors).

Our reading, on fungible GPUs (the locality layer adds HiveD's cells), at
every decision:

1. *Guaranteed jobs*: each pool starts its pending jobs in FCFS order on its
   own quota while the head fits both the pool's unused quota and the free
   GPUs (strict head-of-line blocking within the pool, as the FCFS
   baseline). Pools are served in the arrival order of their heads, so when
   free GPUs are short the earliest waiting head goes first.
2. *Low-priority jobs*: the remaining pending jobs of all pools, in global
   arrival order (HiveD's scheduler queue is FIFO), each start
   opportunistically if they fit the free GPUs; a job that does not fit is
   skipped, not waited for (the Kubernetes scheduler retries a pod that
   does not fit later and moves on). No duration is read.

Realistic: reads only arrived jobs' pools and widths.

With locality (a cell-aware cluster, :mod:`sia.scheduler.locality.cell_cluster`), guaranteed
jobs get buddy cells of their pool's quota (HiveD's cells) and low-priority
jobs cells outside them; a job that gets no cell (the view's ``can_place``)
does not fit (a guaranteed head then blocks its pool, a low-priority job is
skipped), and the simulator's placer stage places the starts. HiveD has no
reservations, and its low-priority jobs may use the buddies of guaranteed
cells (its cluster is built with ``strict_buddies=False``). HiveD's own
invariants (guaranteed jobs inside their pool's bound cells, low-priority
ones outside, and HiveD's safety: the unbound cells can still host every
pool's unbound quota) are the buddy allocator's
(:meth:`~sia.scheduler.locality.buddy.BuddyAllocator.check_invariants`), run
after every allocation in debug mode, and ``CellCluster.check`` runs them
after every event with ``check_invariants``.
"""

from __future__ import annotations

import numpy as np
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.needs import PolicyNeeds
from sia.scheduler.core.view import SimView, Start, TraceArrays


class HiveDPolicy:
    """HiveD* (no preemption): FCFS within quota, then idle GPUs to any pool's jobs in FIFO order."""

    name = "hived"
    perfect_information = False
    uses_ticks = False
    #: HiveD lets low-priority (opportunistic) jobs use any free cell, buddies of dedicated
    #: cells included; on cells the simulator places its starts
    needs = PolicyNeeds(seed=True, locality=True, locality_requires={"strict_buddies": False})

    def __init__(self, seed: int = 0):
        self.seed = seed  # deterministic; accepted for a uniform interface

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Remember widths and quotas."""
        self._gpus = trace.num_gpus.tolist()
        self._gpus_arr = trace.num_gpus
        self._quota = trace.quota.tolist()
        self._P = trace.n_pools

    def grow(self, trace: TraceArrays, cluster: Cluster, n_old: int) -> bool:
        """Take the jobs the live service appended to ``trace`` after index ``n_old`` (not yet
        arrived): their widths. Returns True (it can grow)."""
        self._gpus.extend(trace.num_gpus[n_old:].tolist())
        self._gpus_arr = trace.num_gpus
        return True

    def decide(self, view: SimView) -> list[Start]:
        """Return the guaranteed FCFS starts, then low-priority starts in global arrival order."""
        free = view.free_gpus
        if free <= 0 or not view.has_pending:
            return []
        gpus, quota = self._gpus, self._quota
        starts: list[Start] = []
        taken: set[int] = set()
        # 1. guaranteed: per-pool FCFS heads, earliest head first
        heads = []
        for p in range(self._P):
            plist = view.pending(p)
            if plist:
                heads.append([plist[0], p, 0, view.used_dedicated_of(p)])
        can_place = view.can_place
        blocked: set[int] = set()
        while heads and free > 0:
            heads.sort()
            progressed = False
            for h in heads:
                j, p, i, d = h
                g = gpus[j]
                if g <= free and d + g <= quota[p] and p not in blocked:
                    if not can_place(j, False):
                        blocked.add(p)
                        continue
                    starts.append(Start(j, False))
                    taken.add(j)
                    free -= g
                    h[3] = d + g
                    plist = view.pending(p)
                    if i + 1 < len(plist):
                        h[0], h[2] = plist[i + 1], i + 1
                    else:
                        heads.remove(h)
                    progressed = True
                    break
            if not progressed:
                break
        if free <= 0:
            return starts
        # 2. low-priority: global FIFO with skipping, on any free GPU
        pending = view.pending_all()
        g_all = self._gpus_arr[pending]
        ok = g_all <= free
        if taken:
            ok &= ~np.isin(pending, np.fromiter(taken, dtype=np.int64, count=len(taken)))
        for idx in np.flatnonzero(ok):
            g = int(g_all[idx])
            if g <= free:
                j = int(pending[idx])
                if not can_place(j, True):
                    continue
                starts.append(Start(j, True))
                free -= g
                if free <= 0:
                    break
        return starts

    def refused(self, jobs: list[int]) -> None:
        """Nothing to undo: each decision reads every pool's pending jobs from the view afresh."""
