"""SIA's AllocateDedicatedResources (Figure 7): strict FCFS per pool within its quota.

Mixed into :class:`~sia.scheduler.policies.sia.policy.SiaPolicy`, whose state it
uses; see that module's docstring for the rule (step 1) and for preemption on cells.

Which pool starts first when several are below their quota with a head that fits
(``dedicated_order``):

- ``"allocation"`` (Figure 7, the default until 2026-11-30): increasing CurrentAllocation /
  Quota, loans counted; ties by pool index. Instantaneous fairness.
- ``"oldest"``: the pool whose head job arrived first (ties cannot occur: jobs are in
  arrival order).
- ``"longest"``: the pool with the most jobs pending (ties as ``"allocation"``): a delay
  to a pool's head passes down its whole queue, so the longer queue has more to lose.
- ``"repay"`` (the default): pools that hold no loans (allocation = dedicated use) first,
  then as ``"longest"``. A pool running loans on others' GPUs does not take a freed GPU
  ahead of the pools it borrowed from (Figure 7 gets this from counting loans in the
  allocation; ``"oldest"`` and ``"longest"`` lose it).
- ``"fresh"``: pools that hold no loans first, then the newest debt: the pool whose head
  has fitted its quota and waited for the shortest time (since the decision at which it
  began to), then as ``"longest"``. A pool owed for long has its queue late against FCFS
  with home quotas already; a pool that just became owed (its own job just ended) still
  has its whole queue on time, and a delay would make all of it late. A GPU thus tends to
  go back to the pool whose job just freed it.

In FCFS with home quotas two pools are never below quota with heads waiting while GPUs
are free, so the order only decides whose start a loan delays when owners must share the
GPUs as they free up. Under ``"allocation"`` a pool whose arrivals were missed (its GPUs
lent, its allocation low) takes the GPUs that a busy pool's own jobs free, and the busy
pool's whole standing queue starts later, one delay passed down to every job; under
``"repay"`` the longer of the two queues keeps its GPUs, which protects a busy pool with a
standing queue, and also gives a lender with the longer queue a busy neighbour's GPUs
(docs/concepts/lending.md has both cases, measured).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

from sia.data.errors import ConfigError
from sia.scheduler.core.simulator import Preempt
from sia.scheduler.core.view import SimView, Start

#: A scan's remembered miss when there is none (the policy's per-pool, per-list cache).
NO_FAIL = (-1.0, -1)

#: ``dedicated_order``'s values (see the module docstring) and its default: ``"repay"``, chosen
#: on the training data alone (Philly's training weeks and Graham's training days, 2026-11-30,
#: by a rule fixed before its runs; third candidate tried there, after ``"oldest"`` and
#: ``"longest"`` lost to Figure 7's order; see docs/concepts/lending.md).
DEDICATED_ORDERS: tuple[str, ...] = ("allocation", "oldest", "longest", "repay", "fresh")
DEFAULT_DEDICATED_ORDER = "repay"


def check_dedicated_order(value: object, name: str) -> str:
    """Return ``value`` if it is one of :data:`DEDICATED_ORDERS`, else a ConfigError naming
    the policy and the option."""
    if value not in DEDICATED_ORDERS:
        raise ConfigError(f"policy {name!r}: dedicated_order must be one of "
                          f"{', '.join(map(repr, DEDICATED_ORDERS))}, not {value!r}")
    return str(value)


if TYPE_CHECKING:  # pragma: no cover
    from sia.scheduler.policies.sia.policy import Decision


class DedicatedPass:
    """Figure 7 as a step of SIA's decision (see the module docstring)."""

    def _allocate_dedicated(self, view: SimView, d: Decision) -> None:
        """Start each pool's dedicated stream in FCFS order, pools in ``dedicated_order``.

        One start per pass over the pools; a head that does not fit (quota,
        free GPUs, or on cells no cell even after preemption) blocks its pool.
        A job that fungible preemption evicts joins its own pool's stream at its
        arrival-order place (:meth:`_rejoin`): it starts again on its pool's quota
        in this decision, after its Preempt, before that pool's later jobs, when
        it fits. Updates ``d`` (free GPUs, dedicated use, allocation, starts).
        """
        gpus, started, pend = self._gpus, self._started, self._pend_gpus
        free, ded, alloc, starts = d.free, d.ded, d.alloc, d.starts
        if self._held:  # the victims of the last eviction: pending in the simulator by now
            self._release_held()
        cells = self._cells
        ramp = self.loan_ramp
        witness = ramp is not None and ramp.witnesses
        if witness:  # the pool's own jobs score its predictions too (ramp.py): bin them first
            self._bin_new(view)
            kmin_job, sure, W = self._kmin_job, self._sure_job, self.windows_s
        streams = [[p, view.pending(p), 0] for p in range(self._P) if pend[p]]
        blocked: set[int] = set()  # pools whose head waits on cells (its stream's index ends)
        passable: set[int] = set()  # victims that do not hold their pool back (_rejoin)
        while True:
            best = self._next_stream(streams, free, ded, alloc, passable)
            if best is None:
                break
            p, plist, i = best
            j = plist[i]
            g = gpus[j]
            cell = None  # the placer stage places it (on cells: the cell can_place held)
            if cells is not None and not (g <= free and view.can_place(j, False)):
                got = self._evict_on_cells(j, p, g, d) if self._preempt else None
                if got is None:
                    best[2] = len(plist)  # head-of-line blocked by cells
                    blocked.add(p)
                    continue
                freed, cell = got
                free += freed
            elif cells is None and g > free:  # fungible, preempt on: evict loans (preempt.py)
                victims = self._fp_evict(view, g - free, d)
                if victims is None:
                    if j in passable:  # a victim that cannot start again: passed over
                        best[2] = i + 1
                        continue
                    best[2] = len(plist)  # the loans cannot cover it: head-of-line blocked
                    blocked.add(p)
                    continue
                free += sum(gpus[v] for v in victims)
                if self._rejoin(streams, victims, best, passable):
                    continue  # a victim of p's is now p's head, before j: it starts first
            best[2] = i + 1
            starts.append(Start(j, False, cell))
            started[j] = 1
            if witness:
                km = kmin_job.get(j, len(W))
                if km < len(W) and sure.get(j, km + 1) > km:
                    ramp.witness(j, p, km, view.now, view.now + W[km])
            free -= g
            ded[p] += g
            alloc[p] += g
            pend[p] -= g
        d.free = free
        if self.dedicated_order == "fresh":
            self._debts_after(streams, blocked, ded, view.now)
        n_preempts = sum(1 for s in starts if type(s) is Preempt)
        self.stats["dedicated"] += len(starts) - n_preempts

    def _evict_on_cells(self, j: int, p: int, g: int, d: Decision) -> tuple[int, object] | None:
        """On cells, preempt for pool ``p``'s head ``j`` (``g`` GPUs) with ``cells.preempt_for``:
        append the victims' Preempt items to ``d.starts`` and return (GPUs freed, ``j``'s cell),
        or None when no cell fits even after preemption. The victims stay out of this decision
        (held: the cluster still runs them until the simulator applies the Preempt, so
        ``can_place`` would refuse them) and are released by the next one."""
        got = self._cells.preempt_for(j, p, g)
        if got is None:
            return None
        victims, cell = got
        cfg, gpus, started, alloc = self._cells.config, self._gpus, self._started, d.alloc
        freed = 0
        for v in victims:
            d.starts.append(Preempt(v, cfg.lost_work_s, cfg.restart_delay_s))
            self._requeue(v)
            # still running until the simulator applies the Preempt: not lent again
            # in this decision (can_place would refuse a running job)
            started[v] = 1
            self._held.append(v)
            freed += gpus[v]
            alloc[self._pool[v]] -= gpus[v]
        self.stats["preemptions"] += len(victims)
        return freed, cell

    def _rejoin(self, streams: list[list], victims: list[int], cur: list,
                passable: set[int]) -> bool:
        """Put jobs just evicted for the head of stream ``cur`` (fungible GPUs; pending again
        once the simulator applies their Preempt, which comes first in the decision) in their
        pools' streams of this pass at their arrival-order places (issue 32: an evicted job
        keeps its place in its pool's queue); one older than a job its pool already started
        in this pass goes to the stream's head. There it starts again on its pool's quota when
        it fits (a victim of ``cur``'s own pool older than its head comes before that head:
        evicting a pool's older loan for its later head moves the loan onto the pool's quota,
        and the head waits its turn). A victim that does not fit its pool's unused quota is
        passed over (added to ``passable``) and its pool's later jobs start as without this
        rule: its place was taken by the jobs holding that quota, and holding the others back
        too left GPUs idle and made them later than under FCFS (hypothesis found both cases).
        Return True when a victim now precedes ``cur``'s head."""
        pool = self._pool
        by_pool = {st[0]: st for st in streams}
        p, j = cur[0], cur[1][cur[2]]
        ahead = False
        for v in victims:
            q = pool[v]
            st = by_pool.get(q)
            if st is None:  # its pool had nothing pending at the start of this decision
                st = by_pool[q] = [q, [], 0]
                streams.append(st)
            plist = st[1] = list(st[1])  # a copy: view.pending is the simulator's own list
            plist.insert(bisect_left(plist, v, st[2]), v)  # arrival order = job index order
            passable.add(v)
            ahead = ahead or (q == p and v < j)
        return ahead

    def _next_stream(self, streams: list[list], free: int, ded: list[int],
                     alloc: list[int], passable: set[int]) -> list | None:
        """The stream (``[pool, pending, head]``) whose head starts next: among the heads that
        fit their pool's unused quota and the free GPUs (or, preempting, may evict), the first
        in ``dedicated_order``; None if no head fits. A head in ``passable`` (see
        :meth:`_rejoin`) that does not fit its pool's unused quota is passed over."""
        quota, gpus, preempt = self._quota, self._gpus, self._preempt
        order, owed = self.dedicated_order, self._owed_since
        best, best_key = None, None
        for st in streams:
            p, plist, i = st
            if passable:
                while i < len(plist) and plist[i] in passable and \
                        ded[p] + gpus[plist[i]] > quota[p]:
                    i += 1
                st[2] = i
            if i >= len(plist):
                continue
            g = gpus[plist[i]]
            if (g > free and not preempt) or ded[p] + g > quota[p]:
                continue
            # the key, lowest first (inline: this runs once per pool per start)
            if order == "repay":
                key = (alloc[p] > ded[p], i - len(plist), alloc[p] / quota[p])
            elif order == "fresh":  # _note_debts set owed[p] for every head that fits its quota
                key = (alloc[p] > ded[p], -owed[p], i - len(plist), alloc[p] / quota[p])
            elif order == "allocation":
                key = alloc[p] / quota[p]
            elif order == "longest":
                key = (i - len(plist), alloc[p] / quota[p])
            else:  # "oldest": the head's index is its arrival order
                key = plist[i]
            if best is None or key < best_key:
                best, best_key = st, key
        return best

    def _note_debts(self, view: SimView) -> None:
        """Under ``"fresh"``: for each pool, the time since which its head has fitted its quota
        and waited (set at the first decision that sees it so, -1 while it does not)."""
        quota, gpus, pend, now = self._quota, self._gpus, self._pend_gpus, view.now
        ded = view.used_dedicated.tolist()
        for p in range(self._P):
            plist = view.pending(p) if pend[p] else ()
            self._mark_debt(p, bool(plist) and ded[p] + gpus[plist[0]] <= quota[p], now)

    def _debts_after(self, streams: list[list], blocked: set[int], ded: list[int],
                     now: float) -> None:
        """Under ``"fresh"``, after the pass: a pool whose new head no longer fits its quota (its
        head started and filled it) owes nothing any more; one whose head fits and waits owes
        since now if it did not already. Without this, a debt ended by a start would be seen
        as going on by the next decision when nothing happened in between."""
        quota, gpus = self._quota, self._gpus
        for p, plist, i in streams:
            if p not in blocked:
                self._mark_debt(p, i < len(plist) and ded[p] + gpus[plist[i]] <= quota[p], now)

    def _mark_debt(self, p: int, waits: bool, now: float) -> None:
        """Pool ``p``'s debt: begun now if its head fits its quota and waits and it owed
        nothing yet, kept if it already owed, ended (-1) if its head does not wait so."""
        if not waits:
            self._owed_since[p] = -1.0
        elif self._owed_since[p] < 0:
            self._owed_since[p] = now

    def _release_held(self) -> None:
        """Make the jobs evicted by an earlier decision on cells lendable: pending, and every
        scan of their pools starts again from the first entry (as :meth:`_requeue` left it)."""
        for v in self._held:
            self._started[v] = 0
            p = self._pool[v]
            self._head[p][:] = [0] * len(self._head[p])
            self._fail[p][:] = [NO_FAIL] * len(self._fail[p])
        self._held.clear()
