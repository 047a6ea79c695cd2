"""A Kueue-style baseline: cohort borrowing with reclaim (issue 32, item 4).

How operators share GPU quotas on Kubernetes today with Kueue: every pool is a
ClusterQueue whose nominal quota is the pool's quota, all in one cohort, with
``reclaimWithinCohort: Any`` and no borrowing limit. A realistic policy: it
reads only arrived jobs' widths, pools and submission order, and the
simulator's state (it predicts nothing).

At every decision:

1. **Reclaim and admit within quota.** Pools by increasing allocation / quota
   (ties by pool index), one admission per pass: a pool's head (its first
   pending job; StrictFIFO: a head that cannot be admitted blocks its queue)
   that fits the pool's unused quota (quota - dedicated use) starts on the
   pool's quota. When the free GPUs do not cover it, it takes its quota back:
   running *borrowers* of other pools are evicted, newest first, until it
   fits (then the victims not needed are spared, the oldest of them first:
   Kueue's minimal preemption set); when all of them together do not cover
   it, nothing is evicted and the head waits.
2. **Borrow.** The heads that do not fit their pool's unused quota are
   admitted as borrowers (opportunistic, the whole job beyond the quota) on
   the free GPUs, oldest submission first across the cohort (Kueue admits the
   workloads that need no borrowing first, then by creation time); a head
   that does not fit the free GPUs blocks its queue.

Which borrowers may be evicted (``evict``): ``"any"`` (default) is what Kueue
does: reclaim preempts any borrowed workload, whatever the trace's
``preemptible`` flag; so every job may borrow and every borrower may be
evicted. ``"preemptible"`` lets only the replay's preemptible jobs borrow
(and so be evicted): the others wait for their own quota.

An eviction costs what the replay's
:class:`~sia.scheduler.core.simulator.PreemptionConfig` says (work since the
last checkpoint plus a restart delay; the same cost model as SIA's); the
evicted job goes back to its pool's queue in arrival order (its place).
"""

from __future__ import annotations

from bisect import bisect_left

from sia.data.errors import ConfigError
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.needs import PolicyNeeds
from sia.scheduler.core.simulator import PreemptionConfig, newest_victims
from sia.scheduler.core.view import SimView, Start, TraceArrays

#: values of the ``evict`` option
EVICT = ("any", "preemptible")


class KueuePolicy:
    """Kueue-style cohort borrowing with reclaim (see the module docstring).

    Options: ``evict`` (``"any"`` or ``"preemptible"``), ``name``. After a
    replay, :attr:`stats` counts admissions, borrowings and evictions.
    """

    perfect_information = False
    uses_ticks = False
    needs = PolicyNeeds()  # fungible GPUs only

    def __init__(self, evict: str = "any", name: str = "kueue"):
        if evict not in EVICT:
            raise ConfigError(f"policy {name!r}: evict must be one of {EVICT}, not {evict!r}")
        self.evict = evict
        self.name = name
        self.stats: dict[str, int] = {}

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Remember widths, pools and quotas; read which jobs are preemptible and the cost model
        from the cluster (the replay's PreemptionConfig)."""
        self._gpus = trace.num_gpus.tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()
        self._P = trace.n_pools
        mask = getattr(cluster, "preemptible", None)
        self._may_borrow = (None if self.evict == "any" else
                            [False] * trace.n_jobs if mask is None else list(map(bool, mask)))
        self._cfg = getattr(cluster, "preemption", None) or PreemptionConfig()
        #: running borrowers -> start of their run (s), in admission order
        self._borrowers: dict[int, float] = {}
        self._done = [0] * trace.n_pools
        self.stats = dict(admitted=0, borrowed=0, evictions=0)

    def _prune(self, view: SimView) -> None:
        """Forget the borrowers that completed since the last call."""
        b, done = self._borrowers, self._done
        for p, n in enumerate(view.completed_counts()):
            if n > done[p]:
                if b:
                    for j in view.completed_jobs(p)[done[p]:n].tolist():
                        b.pop(j, None)
                done[p] = n

    def decide(self, view: SimView) -> list:
        """Return this instant's evictions and admissions (quota first, then borrowing)."""
        self._prune(view)
        free = view.free_gpus
        if not view.has_pending or (free <= 0 and not self._borrowers):
            return []
        gpus, quota, pool, now = self._gpus, self._quota, self._pool, view.now
        items: list = []
        ded = view.used_dedicated.tolist()
        alloc = view.allocation.tolist()
        # each pool's queue as this decision sees it: pending jobs in arrival order, plus the
        # jobs it evicts (back at their place, so they may be admitted again on their quota)
        queues = {p: list(view.pending(p)) for p in range(self._P) if view.pending(p)}
        pos = dict.fromkeys(queues, 0)
        blocked: set[int] = set()
        evicted: set[int] = set()
        while True:  # 1. admission within quota (with reclaim), least served pool first
            best, best_key = -1, 0.0
            for p, q in queues.items():
                i = pos[p]
                if p in blocked or i >= len(q) or ded[p] + gpus[q[i]] > quota[p]:
                    continue
                key = alloc[p] / quota[p]
                if best < 0 or key < best_key:
                    best, best_key = p, key
            if best < 0:
                break
            p = best
            j = queues[p][pos[p]]
            g = gpus[j]
            if g > free:
                others = [b for b in self._borrowers if pool[b] != p]
                victims = newest_victims(others, gpus, g - free)
                if victims is None:
                    blocked.add(p)  # StrictFIFO: the head waits for its quota
                    continue
                for v in victims:
                    items.append(self._cfg.preempt(v, now - self._borrowers.pop(v)))
                    free += gpus[v]
                    alloc[pool[v]] -= gpus[v]
                    evicted.add(v)
                    self._requeue(queues, pos, blocked, v)
                self.stats["evictions"] += len(victims)
            items.append(Start(j, False))
            self.stats["admitted"] += 1
            free -= g
            ded[p] += g
            alloc[p] += g
            pos[p] += 1
        # 2. borrowing: heads beyond their quota, oldest submission first across the cohort
        may = self._may_borrow
        while free > 0:
            best = -1
            for p, q in queues.items():
                i = pos[p]
                if p in blocked or i >= len(q):
                    continue
                j = q[i]
                if ded[p] + gpus[j] <= quota[p]:
                    continue  # fits its quota but not the GPUs: it waits (blocked above)
                if best < 0 or j < best:
                    best = j
            if best < 0:
                break
            j = best
            p = pool[j]
            if gpus[j] > free or j in evicted or (may is not None and not may[j]):
                blocked.add(p)  # StrictFIFO: the head blocks its queue (an evicted job
                continue  # borrows again at the next decision, not in the instant it left)
            items.append(Start(j, True))
            self._borrowers[j] = now
            self.stats["borrowed"] += 1
            free -= gpus[j]
            alloc[p] += gpus[j]
            pos[p] += 1
        return items

    def _requeue(self, queues: dict[int, list[int]], pos: dict[int, int], blocked: set[int],
                 v: int) -> None:
        """Put evicted job ``v`` back in its pool's queue of this decision at its place (among
        the jobs not yet admitted; it may become the head, which unblocks the queue)."""
        q = self._pool[v]
        if q not in queues:
            queues[q], pos[q] = [], 0
        lst = queues[q]
        k = bisect_left(lst, v, lo=pos[q])
        lst.insert(k, v)
        if k == pos[q]:
            blocked.discard(q)

    def summary(self) -> dict[str, int]:
        """Return the replay's counters: admissions within quota, borrowings, evictions."""
        return dict(self.stats)

    def facts(self) -> dict[str, int]:
        """Return what the replay reports about the policy (its counters)."""
        return {"kueue": self.summary()}
