"""Why a job was slowed: the loan that delayed it and the prediction that was wrong (DESIGN 6.6).

With perfect predictions SIA slows no job (Theorem 1): every loan ends within
the window it was lent in, and within that window every pool's arrivals fit
the GPUs reserved for them. A slowed job therefore points at a broken
promise. :func:`attribute` finds it from the replays alone (pure functions
over arrays; nothing here knows a policy): the policy's per-job start / end /
opportunistic flag, the FCFS baseline's start / end on the same trace and
quotas, and the policy's record of each loan (job, time, the window it was
lent in, and the forecast it was lent against: each pool's WillJobsArrive and
TotalNewLoad in that window; :meth:`sia.scheduler.core.served.ServedPredictions.loans`).

For a job ``j`` of pool ``p`` that starts later than under FCFS, look at
``s``, the moment it starts under FCFS. Under the policy ``j`` was still
waiting then, and exactly one of these held (checked in this order):

1. **An earlier job of p was waiting too** (the head of p's dedicated stream:
   under FCFS it had started by ``s``, so it is late itself): ``j`` is a
   *cascade* of that head and inherits its loan and cause, one level deeper.
2. **p's quota was full** of p's own dedicated jobs, some of which had already
   ended by ``s`` under FCFS (so they ran late): a cascade of the one among
   them that held its GPUs longest into ``j``'s wait.
3. **The free GPUs did not fit j** although p's quota did: loans held them (the
   free GPUs are the pools' unused quotas minus what loans hold). The loan
   named (``delayed_by``) is the *last one lent* among those running at ``s``,
   L. Why that one: when L was lent, SIA kept free, for every pool, its
   pending GPUs plus the forecast's TotalNewLoad (capped at its unused
   quota), with the earlier loans' GPUs already counted as held, and the
   loans lent after L had ended by ``s``; so had every pool's GPUs arriving
   after L's start fitted that forecast, p's claim at ``s`` would have fitted
   the free GPUs (the count argument behind Theorem 1). Hence: L still
   running at or after the end of the window it was lent in (forecast time +
   window) is a *duration* miss (its JobDuration prediction said it would end
   within the window; the forecast promised nothing after). Otherwise the
   pool whose GPUs submitted in ``(L's start, s]`` exceed the TotalNewLoad
   reserved for it in L's window is the miss: *arrival* when WillJobsArrive
   said no for that pool in that window, *load* when it said yes but the
   estimate was below what arrived (``p`` first, else the pool with the
   largest excess, named in ``missed_pool``; a pool that reserved its whole
   unused quota, distrusted by the online adaptation, missed nothing).
   ``overrun_held`` counts the loans running at ``s`` that were past their
   windows (context: SIA saw their GPUs held when it lent L).

What remains is named, never dropped: *preempted* (the job started no later
than under FCFS but was preempted and restarted, so it ended later),
*placement* (at ``s`` both p's quota and the free GPUs fitted ``j``: a cell or
placement constraint the counts cannot see), *unexplained* (anything else,
e.g. a last loan inside its window whose forecast missed no pool's arrivals:
the loan is still named).

Assumptions, as the simulator and SIA hold them: GPUs are fungible and the
cluster is the sum of the quotas; the baseline is FCFS with strict arrival
order per pool; a job runs its duration unless preempted (then ``start`` is
its first start and ``end`` its real end, and a loan of a job lent more than
once is taken to end when the job is lent again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sia.data.errors import SiaError

#: The causes, as written in the per-job results.
CAUSES = ("duration", "arrival", "load", "preempted", "placement", "unexplained")
DURATION, ARRIVAL, LOAD, PREEMPTED, PLACEMENT, UNEXPLAINED = range(len(CAUSES))

#: Seconds of tolerance when comparing the policy's times with the baseline's (a float
#: rounding margin, not a tuned threshold: "slowed" is the metrics' 1 s rule).
TIME_TOL_S = 1e-6
#: GPUs of tolerance when comparing arrived load with a reserved one.
_EPS = 1e-9


@dataclass(frozen=True)
class JobTimes:
    """Per job, in arrival order (index = the simulator's job index): ``pool`` (int64 [n]),
    ``submit``, ``duration`` (float64 [n], s), ``num_gpus`` (int64 [n]), the policy's
    ``start``, ``end`` (s) and ``opportunistic`` (bool [n]), the baseline's ``start_base`` and
    ``end_base`` (s)."""

    pool: np.ndarray
    submit: np.ndarray
    duration: np.ndarray
    num_gpus: np.ndarray
    start: np.ndarray
    end: np.ndarray
    opportunistic: np.ndarray
    start_base: np.ndarray
    end_base: np.ndarray


@dataclass(frozen=True)
class Loans:
    """The policy's loans (one row each): ``job`` (int64 [L], job index), ``time`` (start, s),
    ``forecast_time`` (when the forecast lent against was made, s), ``window_s`` (the window
    lent in, s), ``will_arrive`` (bool [L, P]) and ``total_new_load`` (float64 [L, P], GPUs):
    each pool's forecast in that window; ``reserved_all`` (bool [L, P] or None): the pools
    that reserved their whole unused quota instead (distrusted by SIA's online adaptation:
    their claims were covered whatever arrived)."""

    job: np.ndarray
    time: np.ndarray
    forecast_time: np.ndarray
    window_s: np.ndarray
    will_arrive: np.ndarray
    total_new_load: np.ndarray
    reserved_all: np.ndarray | None = None

    @staticmethod
    def empty(n_pools: int) -> Loans:
        """Return a record without loans for ``n_pools`` pools."""
        z = np.zeros(0)
        return Loans(np.zeros(0, np.int64), z, z, z, np.zeros((0, n_pools), bool),
                     np.zeros((0, n_pools)))


def loans_from_record(record: dict | None, job_ids: Sequence[str],
                      pool_names: Sequence[str]) -> Loans:
    """Return the :class:`Loans` of a policy's record
    (:meth:`sia.scheduler.core.served.ServedPredictions.loans`; None: no loan) on jobs
    ``job_ids`` (arrival order) and pools ``pool_names`` (index order). Raises SiaError when
    the record names a job or pool that is not there."""
    P = len(pool_names)
    if not record or not record.get("job"):
        return Loans.empty(P)
    index = {str(j): i for i, j in enumerate(job_ids)}
    missing = [j for j in record["job"] if str(j) not in index]
    if missing:
        raise SiaError(f"attribution: the loans name job {missing[0]!r}, not in the replay")
    rec_pools = list(record["pools"])
    lost = sorted(set(rec_pools) - set(pool_names))
    if lost:
        raise SiaError(f"attribution: the loans' forecasts name pool {lost[0]!r}, not in the "
                       "replay's pools")
    col = np.array([rec_pools.index(p) if p in rec_pools else -1 for p in pool_names])
    f = np.asarray(record["forecast"], dtype=np.int64)
    arrive = np.asarray(record["will_arrive"], dtype=bool).reshape(-1, len(rec_pools))
    tnl = np.asarray(record["total_new_load"], dtype=np.float64).reshape(-1, len(rec_pools))
    have = col >= 0  # a pool the forecasts do not name had no forecast: nothing reserved
    wa = np.zeros((f.size, P), dtype=bool)
    load = np.zeros((f.size, P))
    wa[:, have] = arrive[f][:, col[have]]
    load[:, have] = tnl[f][:, col[have]]
    full = np.zeros((f.size, P), dtype=bool)
    for i, q in record.get("reserved_all") or []:
        if rec_pools[q] in pool_names:
            full[i, list(pool_names).index(rec_pools[q])] = True
    return Loans(
        job=np.array([index[str(j)] for j in record["job"]], dtype=np.int64),
        time=np.asarray(record["time"], dtype=np.float64),
        forecast_time=np.asarray(record["forecast_time"], dtype=np.float64)[f],
        window_s=np.asarray(record["window_s"], dtype=np.float64),
        will_arrive=wa, total_new_load=load, reserved_all=full)


@dataclass(frozen=True)
class Attribution:
    """Per job (arrival order): ``slowed`` (bool: ends more than the threshold later than under
    the baseline), ``cause`` (int8 index into :data:`CAUSES`, -1 where not slowed),
    ``delayed_by`` (job index of the loan named, -1 for none), ``depth`` (0: delayed
    directly; d: a cascade d jobs deep behind its pool's delayed jobs), ``parent`` (the job
    a cascade waited behind, -1 for none) and ``missed_pool`` (pool index whose arrivals the
    forecast missed, for arrival and load; -1 otherwise) and ``overrun_held`` (loans past their
    window among those holding GPUs at the block). Only slowed jobs carry values."""

    slowed: np.ndarray
    cause: np.ndarray
    delayed_by: np.ndarray
    depth: np.ndarray
    parent: np.ndarray
    missed_pool: np.ndarray
    overrun_held: np.ndarray

    def cause_names(self) -> list[str | None]:
        """Return each job's cause as a name of :data:`CAUSES` (None where not slowed)."""
        return [CAUSES[c] if c >= 0 else None for c in self.cause.tolist()]


def _check(jobs: JobTimes, quota: np.ndarray, loans: Loans) -> None:
    n = jobs.pool.shape[0]
    for name in ("submit", "duration", "num_gpus", "start", "end", "opportunistic",
                 "start_base", "end_base"):
        if getattr(jobs, name).shape != (n,):
            raise SiaError(f"attribution: jobs.{name} has shape {getattr(jobs, name).shape}, "
                           f"expected ({n},) like jobs.pool")
    if n and np.any(np.diff(jobs.submit) < 0):
        raise SiaError("attribution: jobs must be in arrival order (submit non-decreasing)")
    P = quota.shape[0]
    if n and (jobs.pool.min() < 0 or jobs.pool.max() >= P):
        raise SiaError(f"attribution: pool indices outside 0..{P - 1}")
    if np.isnan(jobs.start).any() or np.isnan(jobs.start_base).any():
        raise SiaError("attribution: a job never started (incomplete replay)")
    L = loans.job.shape[0]
    for name in ("time", "forecast_time", "window_s"):
        if getattr(loans, name).shape != (L,):
            raise SiaError(f"attribution: loans.{name} has shape {getattr(loans, name).shape}, "
                           f"expected ({L},)")
    for name in ("will_arrive", "total_new_load", "reserved_all"):
        if name == "reserved_all" and loans.reserved_all is None:
            continue
        if getattr(loans, name).shape != (L, P):
            raise SiaError(f"attribution: loans.{name} has shape {getattr(loans, name).shape}, "
                           f"expected [loans, pools] = ({L}, {P})")
    if L and (loans.job.min() < 0 or loans.job.max() >= n):
        raise SiaError(f"attribution: a loan names job index outside 0..{n - 1}")


class _Usage:
    """GPUs held at an instant by a set of runs [start, end): two sorted arrays and sums."""

    def __init__(self, start: np.ndarray, end: np.ndarray, gpus: np.ndarray):
        o = np.argsort(start, kind="stable")
        self.s = start[o]
        self.sc = np.concatenate(([0], np.cumsum(gpus[o])))
        o = np.argsort(end, kind="stable")
        self.e = end[o]
        self.ec = np.concatenate(([0], np.cumsum(gpus[o])))

    def at(self, t: float) -> int:
        """GPUs of the runs with start <= t < end."""
        return int(self.sc[np.searchsorted(self.s, t, side="right")]
                   - self.ec[np.searchsorted(self.e, t, side="right")])


class _Attributor:
    def __init__(self, jobs: JobTimes, quota: np.ndarray, loans: Loans, slowed_after_s: float):
        self.j = jobs
        self.quota = np.asarray(quota, dtype=np.int64)
        self.loans = loans
        n = jobs.pool.shape[0]
        P = self.quota.shape[0]
        self.late = jobs.start > jobs.start_base + TIME_TOL_S
        self.slowed = jobs.end > jobs.end_base + slowed_after_s
        self.preempted = (jobs.end - jobs.start) > jobs.duration + TIME_TOL_S
        gpus = jobs.num_gpus.astype(np.int64)
        self.gpus = gpus
        self.total = int(self.quota.sum())
        self.used = _Usage(jobs.start, jobs.end, gpus)
        self.pool_jobs = [np.flatnonzero(jobs.pool == p) for p in range(P)]
        ded = ~jobs.opportunistic.astype(bool)
        self.ded_jobs = [idx[ded[idx]] for idx in self.pool_jobs]
        self.ded_used = [_Usage(jobs.start[i], jobs.end[i], gpus[i]) for i in self.ded_jobs]
        self.late_jobs = [idx[self.late[idx]] for idx in self.pool_jobs]
        # arrivals per pool: submit times and running GPU sums (with a leading 0)
        self.sub = [jobs.submit[i] for i in self.pool_jobs]
        self.gcum = [np.concatenate(([0], np.cumsum(gpus[i]))) for i in self.pool_jobs]
        # each loan holds its GPUs until its job ends, or is lent again (after a preemption)
        L = loans.job.shape[0]
        lend = jobs.end[loans.job].astype(np.float64) if L else np.zeros(0)
        if L:
            o = np.lexsort((loans.time, loans.job))
            again = loans.job[o][1:] == loans.job[o][:-1]
            nxt = lend[o].copy()
            nxt[:-1][again] = loans.time[o][1:][again]
            lend[o] = nxt
        self.loan_end = lend
        self.loan_gpus = gpus[loans.job] if L else np.zeros(0, np.int64)
        self.cause = np.full(n, -1, dtype=np.int8)
        self.delayed_by = np.full(n, -1, dtype=np.int64)
        self.depth = np.zeros(n, dtype=np.int64)
        self.parent = np.full(n, -1, dtype=np.int64)
        self.missed = np.full(n, -1, dtype=np.int64)
        self.overrun_held = np.zeros(n, dtype=np.int64)
        self.done = np.zeros(n, dtype=bool)

    # ------------------------------------------------------------------ one job
    def direct(self, x: int) -> tuple[int, int, int, int]:
        """Return (parent, cause, loan job, missed pool) of job ``x``; parent -1 for a root."""
        jb = self.j
        if not self.late[x]:
            return -1, (PREEMPTED if self.preempted[x] else UNEXPLAINED), -1, -1
        s = float(jb.start_base[x])
        p = int(jb.pool[x])
        g = int(self.gpus[x])
        # 1. an earlier job of p still waiting at s (the head of p's dedicated stream)
        lj = self.late_jobs[p]
        before = lj[: np.searchsorted(lj, x)]
        waiting = before[(jb.start[before] > s) & (jb.submit[before] <= s)]
        if waiting.size:
            return int(waiting[0]), -1, -1, -1
        # 2. p's quota full of its own dedicated jobs, some running late
        if self.ded_used[p].at(s) + g > self.quota[p]:
            dj = self.ded_jobs[p]
            held = dj[(jb.start[dj] <= s) & (jb.end[dj] > s) & (jb.end_base[dj] <= s + TIME_TOL_S)
                      & (dj < x)]
            if not held.size:
                return -1, UNEXPLAINED, -1, -1
            overlap = np.minimum(jb.end[held], jb.start[x])
            pick = np.lexsort((held, -self.gpus[held], -overlap))[0]
            return int(held[pick]), -1, -1, -1
        # 3. the free GPUs short: the loans running at s
        if self.total - self.used.at(s) >= g:
            return -1, PLACEMENT, -1, -1
        return self._blame_loan(x, s, p)

    def _blame_loan(self, x: int, s: float, p: int) -> tuple[int, int, int, int]:
        loans = self.loans
        running = (loans.time < s) & (self.loan_end > s)
        if not running.any():  # a loan started at s itself, in an earlier decision at s
            running = (loans.time <= s) & (self.loan_end > s)
        c = np.flatnonzero(running)
        if not c.size:
            return -1, UNEXPLAINED, -1, -1
        overran = s >= loans.forecast_time[c] + loans.window_s[c] - TIME_TOL_S
        self.overrun_held[x] = int(overran.sum())
        # the last loan lent (ties: past its window first, widest, earliest job)
        i = int(c[np.lexsort((loans.job[c], -self.loan_gpus[c], ~overran, -loans.time[c]))[0]])
        loan_job = int(loans.job[i])
        if s >= loans.forecast_time[i] + loans.window_s[i] - TIME_TOL_S:
            return -1, DURATION, loan_job, -1
        P = self.quota.shape[0]
        t = loans.time[i]
        arrived = np.array([self.gcum[q][np.searchsorted(self.sub[q], s, side="right")]
                            - self.gcum[q][np.searchsorted(self.sub[q], t, side="right")]
                            for q in range(P)], dtype=np.float64)
        excess = arrived - loans.total_new_load[i]
        if loans.reserved_all is not None:  # a pool that reserved all it had missed nothing
            excess[loans.reserved_all[i]] = -np.inf
        if excess[p] > _EPS:
            q = p
        else:
            excess[p] = -np.inf
            q = int(np.argmax(excess))
            if not excess[q] > _EPS:
                return -1, UNEXPLAINED, loan_job, -1
        return -1, (LOAD if bool(loans.will_arrive[i, q]) else ARRIVAL), loan_job, q

    # ------------------------------------------------------------------ cascades
    def resolve(self, j: int) -> None:
        """Explain job ``j`` and every job its explanation waits behind (iteratively)."""
        chain: list[int] = []
        x = j
        while not self.done[x]:
            parent, cause, loan, missed = self.direct(x)
            if parent >= 0 and parent < x:  # parents come earlier in arrival order: no cycle
                self.parent[x] = parent
                chain.append(x)
                x = parent
                continue
            if parent >= 0:  # not expected: a parent later in arrival order
                cause, loan, missed = UNEXPLAINED, -1, -1
            self.cause[x], self.delayed_by[x], self.missed[x] = cause, loan, missed
            self.done[x] = True
        for y in reversed(chain):
            q = self.parent[y]
            self.cause[y], self.delayed_by[y] = self.cause[q], self.delayed_by[q]
            self.missed[y], self.depth[y] = self.missed[q], self.depth[q] + 1
            self.overrun_held[y] = self.overrun_held[q]
            self.done[y] = True


def attribute(jobs: JobTimes, quota: np.ndarray, loans: Loans, *,
              slowed_after_s: float = 1.0) -> Attribution:
    """Return every slowed job's cause, the loan that delayed it and its cascade depth.

    ``jobs`` (arrival order) hold the policy's and the baseline's times (s); ``quota`` is
    each pool's GPUs (int [P], their sum is the cluster); ``loans`` the policy's loans with
    their forecasts; a job is slowed when it ends more than ``slowed_after_s`` seconds after
    its baseline end (the metrics' rule). See the module docstring for the rules. Raises
    SiaError on arrays of inconsistent shapes or jobs out of arrival order.
    """
    quota = np.asarray(quota)
    _check(jobs, quota, loans)
    a = _Attributor(jobs, quota, loans, slowed_after_s)
    for j in np.flatnonzero(a.slowed).tolist():
        a.resolve(j)
    keep = a.slowed
    return Attribution(
        slowed=keep,
        cause=np.where(keep, a.cause, -1).astype(np.int8),
        delayed_by=np.where(keep, a.delayed_by, -1),
        depth=np.where(keep, a.depth, 0),
        parent=np.where(keep, a.parent, -1),
        missed_pool=np.where(keep, a.missed, -1),
        overrun_held=np.where(keep, a.overrun_held, 0),
    )
