"""Why a job is slowed under global reservations, against FCFS with home quotas (issue 35).

Under :class:`~sia.scheduler.regions.reserved_policy.ReservationRegionPolicy` a job can be
delayed by four mechanisms (docs/results/regions.md, "Which mechanism slows jobs"):

* (a) a loan of the region's own SIA (a job lent GPUs in its own queue region, the
  single-region story of :mod:`sia.scheduler.core.attribution`);
* (b) the lending route: a job moved to another region to be lent there, which holds GPUs
  that region's owners then need (``loan-routed``), or the slowed job itself waiting where
  the route sent it (``lent-away``);
* (c) the split of a pool's quota into per-region shares: the pool has enough unused quota,
  but not in the job's queue region (``split``), or younger jobs of the pool started as
  owners in another region while the job waited (``overtaken``);
* (d) the job's queue lost its pool's share or usable copy, or keeps a share too small for
  the job (``queue-lost``).

:class:`SlowedProbe` watches a replay and looks at each job at ``s``, the moment it starts
under the baseline (FCFS with home quotas: every pool's jobs in arrival order on its whole
quota). The state in force at ``s`` is the one left by the policy's last decision at or
before ``s``. A job that has not started by then is *late*, and exactly one of these held
(checked in this order, :func:`classify`):

1. ``lent-away``: its last queue move was one of the lending route's;
2. ``queue-lost``: its queue region has no share of its pool, no usable copy, or a share
   smaller than the job;
3. ``cascade``: an older job of its pool waits in the same queue (FCFS there: nothing of the
   pool starts behind it); it inherits that job's mechanism;
4. its pool's share in the queue region is full of the pool's dedicated jobs: ``split`` if
   the pool's unused quota over all regions fits the job, else ``overtaken`` if a younger job
   of the pool runs as an owner somewhere, else ``own-late``: the pool's older jobs run late
   (a cascade of the one among them that ended by ``s`` under the baseline and runs longest);
5. the share fits the job but the region's free GPUs do not: loans hold them; the last one
   lent among those running, ``L``, is named: ``loan-routed`` if the lending route moved
   ``L`` there, else ``loan-local``;
6. ``unexplained``: the share and the free GPUs fitted and no older job waited.

Cascades are resolved to their root's mechanism (:func:`resolve`), so every slowed job gets
one of :data:`MECHANISMS` and the group (a)-(d) it belongs to (:data:`GROUP`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The root mechanisms a slowed job is put down to.
MECHANISMS = ("loan-local", "loan-routed", "lent-away", "split", "overtaken", "queue-lost",
              "unexplained", "not-seen")
#: The issue's candidates: (a) SIA's own loans, (b) the lending route, (c) the split of
#: quotas into shares, (d) a queue that lost its share or copy; ``?``: neither.
GROUP = {"loan-local": "a", "loan-routed": "b", "lent-away": "b", "split": "c",
         "overtaken": "c", "queue-lost": "d", "unexplained": "?", "not-seen": "?"}
#: Kinds that point at another job whose mechanism they inherit.
CHAINED = ("cascade", "own-late")


@dataclass(frozen=True)
class WaitState:
    """A late job ``job`` (pool's ``g`` GPUs) at its baseline start, as the policy left it:
    its queue region's ``share`` of the pool and the pool's dedicated GPUs ``used`` there,
    whether the pool is ``eligible`` there (share and usable copy), the pool's ``quota`` and
    dedicated GPUs over all regions (``used_all``), the region's ``free`` GPUs, the oldest
    older job of the pool waiting in the same queue (``older``, -1: none), whether a younger
    job of the pool runs as an owner (``younger_running``), whether the job's last move was
    the lending route's (``lent_away``), the last loan running in the region (``loan``, -1:
    none) and whether the route moved it there (``loan_routed``)."""

    job: int
    g: int
    share: int
    used: int
    eligible: bool
    quota: int
    used_all: int
    free: int
    older: int
    younger_running: bool
    lent_away: bool
    loan: int
    loan_routed: bool


def classify(w: WaitState) -> tuple[str, int]:
    """The direct kind of a late job's wait (module doc, rules 1-6) and the job it points at:
    the older waiting job (``cascade``), the loan (``loan-*``), else -1 (``own-late`` is
    given its job by the caller, :meth:`SlowedProbe._look`)."""
    if w.lent_away:
        return "lent-away", -1
    if not w.eligible or w.share < w.g:
        return "queue-lost", -1
    if w.older >= 0:
        return "cascade", w.older
    if w.share - w.used < w.g:
        if w.quota - w.used_all >= w.g:
            return "split", -1
        return ("overtaken", -1) if w.younger_running else ("own-late", -1)
    if w.free < w.g:
        return ("loan-routed" if w.loan_routed else "loan-local"), w.loan
    return "unexplained", -1


def held_by_loans(running: Any, opportunistic: Any, gpus: list[int]) -> tuple[int, int]:
    """The loans running in a region and the GPUs they hold: ``running`` the region's running
    jobs (iterable of job indices), ``opportunistic`` per job whether it runs as a loan,
    ``gpus`` per job its GPUs. A late job's wait on loans is a wait on all of them, not only
    on the last one lent (which :func:`classify` names)."""
    loans = [i for i in running if opportunistic[i]]
    return len(loans), int(sum(gpus[i] for i in loans))


def resolve(kind: dict[int, str], ref: dict[int, int]) -> dict[int, tuple[str, int, int]]:
    """For every classified job: (root mechanism, cascade depth, root job), following
    ``cascade`` and ``own-late`` links through ``ref`` (a link to a job never classified, or
    a loop, ends as ``unexplained``)."""
    out: dict[int, tuple[str, int, int]] = {}
    for j in kind:
        path, k = [], j
        while k in kind and kind[k] in CHAINED and k not in out and k not in path:
            path.append(k)
            k = ref.get(k, -1)
        if k in out:
            root = out[k]
        elif k in kind and kind[k] not in CHAINED:
            root = (kind[k], 0, k)
        else:
            root = ("unexplained", 0, k)
        for depth, i in enumerate(reversed(path), start=1):
            out[i] = (root[0], root[1] + depth, root[2])
        out.setdefault(j, root)
    return out


class SlowedProbe:
    """Watches a :class:`ReservationRegionPolicy` replay and records, for each job not started
    by its baseline start, why (module doc). Attach before the replay with
    ``SlowedProbe(policy, base_start)`` (``base_start``: job id -> baseline start, s); read
    :meth:`report` after it."""

    def __init__(self, policy: Any, base_start: dict[str, float]):
        self.policy = policy
        self._base_by_id = base_start
        self._order: np.ndarray | None = None
        self._next = 0
        self.kind: dict[int, str] = {}
        self.ref: dict[int, int] = {}
        self.when: dict[int, float] = {}
        self.held: dict[int, tuple[int, int]] = {}  # job -> (loans, their GPUs) in its queue
        self.last_lend = False  # the move being made is the lending route's
        self.moved_by_route: set[int] = set()  # jobs whose last move was a lending move
        self.lend_moved: set[int] = set()  # jobs the route ever moved
        decide, lend_target, move = policy.decide, policy._lend_target, policy._move

        def _decide(view: Any) -> Any:
            self._before(view.now)
            return decide(view)

        def _lend(*args: Any) -> int:
            r = lend_target(*args)
            self.last_lend = r >= 0
            return r

        def _move(j: int, p: int, a: int, b: int) -> None:
            move(j, p, a, b)
            if self.last_lend:
                self.moved_by_route.add(j)
                self.lend_moved.add(j)
            else:
                self.moved_by_route.discard(j)
            self.last_lend = False

        policy.decide, policy._lend_target, policy._move = _decide, _lend, _move

    def _before(self, now: float) -> None:
        """Look at every job whose baseline start is before ``now`` (the state in force then
        is the last decision's)."""
        pol = self.policy
        if self._order is None:
            ids = pol._trace.job_ids
            self._base = np.array([self._base_by_id.get(str(i), math.inf) for i in ids])
            self._order = np.argsort(self._base, kind="stable")
        order, base = self._order, self._base
        while self._next < order.size and base[order[self._next]] < now - 1e-6:
            j = int(order[self._next])
            self._next += 1
            if pol.ran_in[j] < 0 and not pol._done[j] and pol._queue[j] >= 0:
                self._look(j, float(base[j]))

    def _look(self, j: int, s: float) -> None:
        """Classify late job ``j`` at its baseline start ``s``."""
        pol = self.policy
        p, g, a = pol._pool[j], pol._gpus[j], int(pol._queue[j])
        regions = pol._regions
        share = pol._ledger.shares[p]
        usable = pol._replicas.usable(pol._now)[pol._lrow[p]]
        st = regions[a].state
        older = [i for i in st.pending[p] if i < j]
        used_all = sum(reg.state.used_ded[p] for reg in regions)
        own = [(i, reg) for reg in regions for i in reg.state.running
               if pol._pool[i] == p and not reg.state.opportunistic[i]]
        loans = [i for i in st.running if st.opportunistic[i]]
        loan = max(loans, key=lambda i: (st.start_time[i], i), default=-1)
        self.held[j] = held_by_loans(loans, st.opportunistic, pol._gpus)
        w = WaitState(job=j, g=g, share=int(share[a]), used=int(st.used_ded[p]),
                      eligible=bool(usable[a] and share[a] > 0), quota=int(pol._trace.quota[p]),
                      used_all=int(used_all), free=int(regions[a].cluster.free),
                      older=min(older, default=-1),
                      younger_running=any(i > j for i, _ in own),
                      lent_away=j in self.moved_by_route, loan=loan,
                      loan_routed=loan in self.lend_moved)
        kind, ref = classify(w)
        if kind == "own-late":
            ref = self._late_own(j, s, own)
        self.kind[j], self.ref[j], self.when[j] = kind, ref, s

    def _late_own(self, j: int, s: float, own: list) -> int:
        """The pool's older dedicated job that ended by ``s`` under the baseline (it runs late)
        and runs longest into ``j``'s wait, or -1."""
        trace = self.policy._trace
        late = [(reg.state.start_time[i] + float(trace.duration[i]), i) for i, reg in own
                if i < j and self._base[i] + float(trace.duration[i]) <= s + 1e-6]
        return max(late)[1] if late else -1

    def _window_ends(self) -> dict[int, float]:
        """Each loan's window end (forecast time + window, s) by job, from the regions' SIA
        records (:meth:`sia.scheduler.core.served.ServedPredictions.loans`) in the region the
        job ran in; empty for policies that record none."""
        pol = self.policy
        index = {str(i): k for k, i in enumerate(pol._trace.job_ids)}
        out: dict[int, float] = {}
        for r, reg in enumerate(pol._regions):
            served = getattr(reg.policy, "served", None)
            rec = served.loans() if served is not None else None
            if not rec:
                continue
            for job, k, w in zip(rec["job"], rec["forecast"], rec["window_s"], strict=True):
                j = index[job]
                if pol.ran_in[j] == r:
                    out[j] = float(rec["forecast_time"][k]) + float(w)
        return out

    def report(self, slowed: np.ndarray) -> list[dict[str, Any]]:
        """One row per slowed job (``slowed``: job indices): its root mechanism, group, direct
        kind, cascade depth, the root job and, for a loan, the loan's job and ``loan_miss``:
        ``duration`` when the loan still ran at or after the end of the window it was lent in
        at the root's baseline start (its duration was mispredicted), ``in-window`` when not
        (a pool's arrivals beyond the forecast), None when its window is unknown; and, for a
        loan, ``loans`` and ``loan_gpus``: all the loans running in the root's queue region
        then and the GPUs they held (:func:`held_by_loans`; None for other mechanisms)."""
        roots = resolve(self.kind, self.ref)
        ends = self._window_ends()
        ids = self.policy._trace.job_ids
        rows = []
        for j in np.asarray(slowed, dtype=np.int64).tolist():
            if j not in roots:
                rows.append(dict(job=str(ids[j]), mechanism="not-seen", group="?",
                                 kind="not-seen", depth=0, root=str(ids[j]), loan=None,
                                 loan_miss=None, loans=None, loan_gpus=None))
                continue
            mech, depth, root = roots[j]
            loan = self.ref.get(root, -1) if mech.startswith("loan") else -1
            miss = None
            if loan in ends:
                miss = "duration" if self.when[root] >= ends[loan] else "in-window"
            n, held = self.held.get(root, (0, 0)) if loan >= 0 else (None, None)
            rows.append(dict(job=str(ids[j]), mechanism=mech, group=GROUP[mech],
                             kind=self.kind[j], depth=depth,
                             root=str(ids[root]) if root >= 0 else None,
                             loan=str(ids[loan]) if loan >= 0 else None, loan_miss=miss,
                             loans=n, loan_gpus=held))
        return rows
