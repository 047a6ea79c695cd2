"""SIA's AllocateSpareResources (Figure 8): lend idle GPUs window by window against reservations.

Mixed into :class:`~sia.scheduler.policies.sia.policy.SiaPolicy`, whose state it
uses; see that module's docstring for the rule (step 2), the forecast's age,
online adaptation, reservations as cells and the preemption credit.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from operator import add
from typing import TYPE_CHECKING

import numpy as np
from sia.data.errors import ConfigError
from sia.scheduler.core.view import Reason, SimView, Start
from sia.scheduler.policies.sia.risk import CERTAIN

if TYPE_CHECKING:  # pragma: no cover
    from sia.scheduler.policies.sia.policy import Decision

_EPS = 1e-9

#: ``reserve_floor`` values: None (a pool predicted to submit nothing reserves only its pending
#: jobs), ``"last_width"`` (every pool reserves at least the GPUs of its last submitted job,
#: within its unused quota, whatever WillJobsArrive says: room for its next job when a silent
#: pool's burst comes unpredicted) or ``"margin"`` (room for one such job of any pool: each
#: window keeps :func:`margin` GPUs unlent beyond the reservations, the largest of the pools'
#: last job widths that their unreserved quota can still take).
RESERVE_FLOORS = (None, "last_width", "margin")
#: SIA's default ``reserve_floor``: None, off. Chosen on training data only by the rule of
#: ``loan_ramp_wake_days``'s choice, fixed before the runs (2026-11-29): keep the values within
#: 0.5% slowed pooled and 2% in every experiment on ``experiments/risk_training_weeks.yaml``
#: (Philly days 35-56) and keeping 90% of off's mean speedup there and on
#: ``experiments/graham_training_weeks.yaml`` (Graham days 16-24); of those, the fewest slowed
#: jobs summed over the two. Measured (`sia evaluate ... --set policies=[fcfs,sia,{name: sia,
#: options: {reserve_floor: last_width}}]`), slowed jobs / mean speedup: off 275 / 70.9 on
#: Philly's weeks and 1 / 222 on Graham's days; ``last_width`` 266 / 69.6 and 4 / 11.3 (geomean
#: 1.70 against 2.02): out. (A first version that started every pool's floor at 0 instead of
#: its last job before the replay slowed 266 and 1 at 69.6 and 221; it was replaced because it
#: was not what the option says, and the rule was run again on the corrected one.)
#: ``"margin"`` (session 24), by the same rule with the geometric mean as the guard, fixed
#: before its runs: Graham's days 1 slowed / geomean 1.89 (off: 1 / 2.02, 94%: in); Philly's
#: weeks 533 slowed (0.27%), one experiment at 2.23% (off: 275, 0.14%, worst 0.97%): out.
DEFAULT_RESERVE_FLOOR: str | None = None


def check_reserve_floor(value, name: str) -> str | None:
    """Return ``reserve_floor`` ``value`` checked (ConfigError naming the option and policy)."""
    if value is not None and (not isinstance(value, str) or value not in RESERVE_FLOORS):
        raise ConfigError(f"policy {name!r}: reserve_floor must be one of {RESERVE_FLOORS}, "
                          f"not {value!r}")
    return value


#: SIA's default ``rebin_pending`` (predict pending jobs again as their pools' jobs end): off.
#: Chosen on training data only by a rule fixed before the runs (2026-11-29): on only if, on
#: ``experiments/risk_training_weeks.yaml`` and ``experiments/graham_training_weeks.yaml``, it
#: slows no more jobs than off (within 0.5% pooled and 2% per experiment on the first) and
#: its geometric-mean speedup is not lower on either and higher on one. Measured (`sia evaluate
#: ... --set policies=[fcfs,sia,{name: sia, options: {rebin_pending: true}}]`), slowed jobs /
#: geomean: Philly's weeks off 275 / 1.87, on 593 / 1.86; Graham's days off 1 / 2.02, on
#: 5 / 2.25: off.
DEFAULT_REBIN_PENDING = False
#: The pending jobs per pool (the oldest) that one re-prediction covers.
REBIN_MAX = 512


def check_rebin_pending(value, risk, name: str) -> bool:
    """Return ``rebin_pending`` ``value`` checked: a boolean, and not with the risk budget
    (whose per-bin lists are filled once per job)."""
    if not isinstance(value, bool):
        raise ConfigError(f"policy {name!r}: rebin_pending must be true or false, not {value!r}")
    if value and risk is not None:
        raise ConfigError(f"policy {name!r}: rebin_pending does not work with the risk budget "
                          f"(risk={risk!r}); unset one of them")
    return value


def reservations(pend: list, col: list, unused: list, floor: list | None) -> list:
    """Each pool's reserved GPUs in a window: its pending GPUs plus its predicted new load
    (``col``), at least ``floor`` (None: no floor), at most its unused quota."""
    need = map(add, pend, col)
    if floor is not None:
        need = map(max, need, floor)
    return list(map(min, need, unused))


def margin(widths: list, res: list, unused: list) -> float:
    """``reserve_floor: margin``'s GPUs: the largest ``min(width, unused - res)`` over the pools
    (0 when none has room), so that one unpredicted job as wide as its pool's last one fits
    beside the reservations ``res`` in any pool with unused quota ``unused``."""
    m = 0.0
    for w, u, r in zip(widths, unused, res, strict=True):
        room = u - r
        if w > m and room > m:
            m = w if w < room else room
    return m


class SparePass:
    """Figure 8 as a step of SIA's decision (see the module docstring)."""

    def _allocate_spare(self, view: SimView, d: Decision) -> None:
        """Lend spare GPUs in each window in increasing order; updates ``d``."""
        P, pend = self._P, self._pend_gpus
        # reservations are at least min(pending, unused quota) whatever the predictions say,
        # so nothing can be lent unless that bound leaves a GPU (then no forecast is needed)
        unused = [self._quota[p] - d.ded[p] for p in range(P)]
        bound = d.free - sum(map(min, pend, unused))
        if bound < 1:
            return
        self._bin_new(view)
        if self.rebin_pending:
            self._rebin_pending(view)
        if self.loan_ramp is not None:
            self.loan_ramp.update(view.now, view.completed_counts(), view.completed_jobs,
                                  self._trace.duration)
        cands = [p for p in range(P) if pend[p]]
        age = self._refresh_forecast(view, cands, bound)
        if age is None:
            return
        distrust, dur_distrust = self._distrust(view)
        # a forecast made `age` s ago covers (now - age, now - age + w]: a job lent against it
        # must end by then, so window k only takes the jobs of a window k' <= w_k - age
        W = self.windows_s
        lists = [k if age <= 0 else bisect_right(W, W[k] - age) - 1 for k in range(len(W))]
        n_ded = len(d.starts)
        recoverable = (self._recoverable(d.starts)  # the credit: cells only (preempt.py)
                       if self._preempt and self._cells is not None else 0)
        # the risk budget (risk.py): per pool and window, the largest job bin within budget
        maxbin = (None if self.risk_budget is None
                  else self.risk_budget.allowed(view.now, unused, cands))
        for k, lk in enumerate(lists):
            if lk >= 0:
                self._lend_in_window(view, d, k, lk, unused, cands, distrust, dur_distrust,
                                     recoverable, maxbin)
        self.stats["opportunistic"] += len(d.starts) - n_ded
        self._fp_context = (unused, distrust)  # for the preemptible loans (preempt.py)

    def _refresh_forecast(self, view: SimView, cands: list[int], bound: int) -> float | None:
        """Forecast again at a tick or when the last forecast is ``refresh_s`` old; return the
        age (s) of the forecast to lend against, or None when no job could be lent at all."""
        now = view.now
        is_tick = bool(view.reason & Reason.TICK)
        age = now - self._tnl_time
        if is_tick or age >= self.refresh_s:
            # forecast only when some job could be lent at all
            last = len(self.windows_s) - 1
            if not (any(self._first_fit(p, last, bound) >= 0 for p in cands)
                    or self._fp_lendable(cands, bound)):
                return None
            tnl = self._forecast(view)
            self._tnl = tnl.T.tolist()  # per window: per pool TotalNewLoad
            self._tnl_time = now
            age = 0.0
            if is_tick:
                if self.tracker is not None:
                    self.tracker.record(view, self._tnl_adapt)
                self.served.forecast(now, self._arrive, tnl)
        return age

    def _distrust(self, view: SimView) -> tuple[list | None, list | None]:
        """Return the online adaptation's [pool][window] distrust of arrivals and of durations
        (None when nothing is distrusted)."""
        distrust = self._all_distrusted  # risk without a bound on the arrivals (or None)
        if self.tracker is not None and distrust is None:
            dm = self.tracker.distrusted(view)
            if dm.any():
                self._distrusted_forecasts += 1
                distrust = dm.tolist()
        # pools whose recent JobDuration predictions ran past a window: none of their jobs is
        # lent in that window (SIA 5.3 adaptation, for the prediction a loan relies on)
        dur_distrust = None
        if self.duration_tracker is not None:
            dd = self.duration_tracker.distrusted(view)
            if dd.any():
                self._duration_distrusted += 1
                dur_distrust = dd.tolist()
        return distrust, dur_distrust

    def _reserved(self, tnl_k: list, k: int, pend: list, unused: list,
                  distrust: list | None) -> tuple[list, list]:
        """Window ``k``'s predicted new load per pool (``tnl_k``, this region's part of it under
        global reservations) and each pool's reservation: :func:`reservations`, or the whole
        unused quota of a pool the online adaptation distrusts in ``k``."""
        # (a part of 0 reserves none of a load, even of an unbounded one: no inf x 0 = NaN)
        col = tnl_k if self._arrival_frac is None else [t * f if f else 0.0 for t, f in
                                                        zip(tnl_k, self._arrival_frac,
                                                            strict=True)]
        res = reservations(pend, col, unused, self._floor)
        if distrust is not None:
            for p in range(self._P):
                if distrust[p][k]:
                    res[p] = unused[p]
        return col, res

    def _reservation(self, p: int, pend_p: float, col_p: float, unused_p: float) -> float:
        """Pool ``p``'s reservation as :func:`reservations` makes it (after a loan of its job
        changed its pending GPUs)."""
        need = pend_p + col_p
        if self._floor is not None and self._floor[p] > need:
            need = self._floor[p]
        return min(need, unused_p)

    def _lend_in_window(self, view: SimView, d: Decision, k: int, lk: int, unused: list,
                        cands: list[int], distrust: list | None, dur_distrust: list | None,
                        recoverable: int, maxbin: list | None = None) -> None:
        """Window ``k`` of Figure 8 (lending jobs of window ``lk``): reserve, then start the
        first lendable job of the least-served pool while it fits the unreserved GPUs."""
        P, quota, gpus, started, pend = self._P, self._quota, self._gpus, self._started, self._pend_gpus
        free, alloc, starts, cells = d.free, d.alloc, d.starts, self._cells
        ramp, sure = self.loan_ramp, self._sure_job
        col, res = self._reserved(self._tnl[k], k, pend, unused, distrust)
        cred = self._credit(recoverable, k, res) if recoverable else None
        widths = self._margin_widths  # reserve_floor "margin" (None: off)
        total = sum(res) if widths is None else sum(res) + margin(widths, res, unused)
        skip: set[int] = (set() if dur_distrust is None
                          else {q for q in range(P) if dur_distrust[q][lk]})
        if cells is not None and not self._reserve_cells(view, res, range(P)):
            cells.clear_reservations()
            return  # a reservation is pending: no opportunistic start in this window
        while True:
            usable = free - total
            if usable < 1 - _EPS:
                break
            if len(cands) > 1:
                cands.sort(key=lambda p: (alloc[p] / quota[p], p))
            pick = j = -1
            for q in cands:
                if q in skip:
                    continue
                held = ramp is not None and ramp.full(q, lk)
                if held:  # only a loan its time limit makes certain (ramp.py)
                    if not sure:
                        continue
                    j = (self._first_sure(q, lk, usable + _EPS) if maxbin is None  # the
                         # budget's lists of certain fits, lent at any budget
                         else self._first_fit(q, lk, usable + _EPS, CERTAIN))
                else:
                    j = (self._first_fit(q, lk, usable + _EPS) if maxbin is None
                         else self._first_fit(q, lk, usable + _EPS, maxbin[q][lk]))
                if j >= 0:
                    pick = q
                    break
            if pick < 0:
                break
            g = gpus[j]
            if cells is not None and not view.can_place(j, True):
                skip.add(pick)
                continue
            starts.append(Start(j, True))
            self.served.lent(j, lk, k, view.now, self._tnl_time, self._arrive, self._tnl, distrust)
            if maxbin is not None:
                self.risk_budget.lent(j, lk)
            if ramp is not None and sure.get(j, lk + 1) > lk:
                ramp.lent(j, pick, lk, view.now, view.now + self.windows_s[lk])
            started[j] = 1
            free -= g
            alloc[pick] += g
            pend[pick] -= g
            if distrust is None or not distrust[pick][k]:
                new = self._reservation(pick, pend[pick], col[pick], unused[pick])
                if cred is not None:
                    new = max(0, new - cred[pick])
                if widths is None:
                    total += new - res[pick]
                    res[pick] = new
                else:  # the margin depends on every pool's room: taken again
                    res[pick] = new
                    total = sum(res) + margin(widths, res, unused)
                if cells is not None and not self._reserve_cells(view, res, (pick,)):
                    break
        d.free = free
        if cells is not None:
            cells.clear_reservations()

    def lend_window(self, view: SimView, j: int, ahead: float = 0.0) -> int:
        """The first window in which this policy's next decision would lend job ``j`` now, or
        -1 (global reservations ask each region this instead of estimating it).

        ``j`` counts as pending here: a job waiting in another region's queue is added to
        its pool's pending GPUs, as if it moved here. The checks are Figure 8's
        (:meth:`_lend_in_window`) on the state of ``view``: the reservations (this region's
        part of the arrivals, the reserve floor, a pool the online adaptation distrusts
        reserving its whole unused quota), the forecast a decision now would lend against
        (a cached one, with its age), the job's predicted window, its pool's duration
        distrust, and the loan ramp (a capped or cold pool lends only a job its time limit
        makes certain). The job must fit after ``ahead`` GPUs (e.g. older jobs lent first).
        It ignores what the decision starts before the job (dedicated jobs, other loans:
        each can only lower the unreserved GPUs) and the risk budget's bins, so a job the
        decision lends in window ``k`` was answered ``k`` or an earlier window, except at a
        tick under the online adaptation: the decision first records the new forecast, which
        may lift a distrust the answer still sees (the answer is then more cautious). Like the
        decision, it first admits the arrivals and brings the loan ramp and the adaptation
        up to ``view.now``; it changes no other state. Fungible GPUs without preemption."""
        self._admit(view)
        p, g = self._pool[j], self._gpus[j]
        here = j < self._seen and not self._started[j]
        pend = list(self._pend_gpus)
        if not here:
            pend[p] += g
        ded = view.used_dedicated.tolist()
        unused = [q - u for q, u in zip(self._quota, ded, strict=True)]
        free = view.free_gpus - ahead
        if free - sum(map(min, pend, unused)) < g - _EPS:
            return -1  # no forecast can leave room for it
        kmin, sure = self._probe_bin(view, j, here)
        K = len(self.windows_s)
        if kmin >= K:
            return -1
        ramp = self.loan_ramp
        if ramp is not None:
            ramp.update(view.now, view.completed_counts(), view.completed_jobs,
                        self._trace.duration)
        tnl, age = self._probe_forecast(view)
        distrust = self._all_distrusted  # risk without a bound on the arrivals (or None)
        if distrust is None and self.tracker is not None:
            distrust = self.tracker.distrusted(view).tolist()
        dur = None if self.duration_tracker is None else self.duration_tracker.distrusted(view)
        W = self.windows_s
        for k in range(K):
            lk = k if age <= 0 else bisect_right(W, W[k] - age) - 1
            if lk < kmin or (dur is not None and dur[p][lk]):
                continue
            if ramp is not None and ramp.holds(p, lk):
                if sure > lk:
                    continue  # held back: only a loan its time limit makes certain
            _, res = self._reserved(tnl[k], k, pend, unused, distrust)
            usable = free - sum(res)
            if self._margin_widths is not None:
                usable -= margin(self._margin_widths, res, unused)
            if usable >= 1 - _EPS and g <= usable + _EPS:
                return k
        return -1

    def _probe_bin(self, view: SimView, j: int, here: bool) -> tuple[int, int]:
        """Job ``j``'s first lendable window (K: none) and first window its time limit makes
        certain (K: none) for :meth:`lend_window`: the decision's own when it binned ``j``,
        else predicted now (once per job; a job readmitted here is binned again by the
        decision, which may differ as the pool's history grows)."""
        K = len(self.windows_s)
        if here and j in self._kmin_job:
            return self._kmin_job[j], self._sure_job.get(j, K)
        cache = self._probe_bins
        if j not in cache:
            arr = np.array([j], dtype=np.int64)
            sure = self._kmin_guaranteed(arr)
            kmins, _ = self._kmins(view, arr, sure)
            cache[j] = (int(kmins[0]), K if sure is None else int(sure[0]))
        return cache[j]

    def _probe_forecast(self, view: SimView) -> tuple[list, float]:
        """The TotalNewLoad [window][pool] a decision now would lend against and its age (s):
        the cached forecast while it is younger than ``refresh_s`` outside a tick, else one
        made now (kept for the other questions at this instant, not for the decision)."""
        now = view.now
        age = now - self._tnl_time
        if not (view.reason & Reason.TICK) and age < self.refresh_s:
            return self._tnl, age
        probe = self._probe_tnl
        if probe is None or probe[0] != now:
            arrive, n = self._arrive, self.stats["forecasts"]
            tnl = self._forecast(view).T.tolist()
            self._arrive, self.stats["forecasts"] = arrive, n  # the decision's, untouched
            probe = self._probe_tnl = (now, tnl)
        return probe[1], 0.0

    def _credit(self, recoverable: int, k: int, res: list) -> list[int]:
        """Lower ``res`` in place by the preemption credit of window ``k`` (SIA 5.5, see the
        policy's docstring), taken from the pools in index order; return each pool's share."""
        cost_s = self._cells.config.preemption_cost_s
        credit = math.floor(recoverable * max(0.0, 1.0 - cost_s / self.windows_s[k]))
        cred = [0] * self._P
        for p in range(self._P):
            cred[p] = min(credit, res[p])
            credit -= cred[p]
            res[p] -= cred[p]
        return cred
