"""SIA's loan ramp: how many loans of one pool may be unproven at once in a window.

Duration misses come in runs: a pool whose jobs change kind (on Philly's
Figure 13 config one pool's jobs went from minutes in the training weeks to
days in the replay week) has dozens of them lent in one decision, before the
first can run past its window and tell the predictor it was wrong; every one
then holds its lenders' GPUs for days (the slowdown attribution shows 67 such
loans behind 99.8% of the slowed minutes). The ramp bounds that exposure the
way TCP's slow start bounds a new connection's:

* each pool and window ``k`` has a cap, starting at ``initial``: at most
  that many of the pool's loans lent in ``k`` may be running at once;
* a loan that ends within its window (by ``lent at + w_k``) proves the
  predictions of its pool: the cap doubles (up to ``ceiling``);
* a loan still running past its window is a miss: the cap falls back to
  ``initial``, and the overrunning loan keeps counting against it until it
  ends (with ``initial = 1`` the pool lends nothing more in ``k`` meanwhile).

``loan_ramp_backoff="halve"`` halves the cap at a miss instead, and
``loan_ramp_memory=L`` forgives the misses within the window's eps (the
overruns the risk-aware lending accepts) among the pool's last L scored loans;
both lost to the plain reset on the training weeks (:data:`DEFAULT_LOAN_RAMP`).

``loan_ramp_evidence`` says which outcomes score a pool's predictions: ``loans``
(only its loans, as above), ``misses`` (also the jobs it runs on its own quota
that the predictions said would fit a window: one that runs past it is a miss
there and, like an overrunning loan, counts against the cap until it ends, so
a pool whose jobs changed kind stops lending before a loan of its has to
overrun), or ``all`` (those jobs' fits prove the pool as well). Such a job is
*witnessed* in the first window its prediction fits; until it overruns it
does not count against the cap (it holds no lent GPU).

``loan_ramp_witness`` says what a witnessed job's miss does (with ``misses`` or
``all``): ``hold`` (like an overrunning loan, it backs the cap off and counts
against it until it ends), ``reset`` (it backs the cap off and
holds nothing), or ``tolerate`` (SIA's default since 2026-11-29,
:data:`DEFAULT_WITNESS`: it acts as ``hold`` only while more than the
lending rule's accepted overrun rate eps of the pool's last
:data:`WITNESS_MEMORY` witnessed jobs in that window missed: a pool whose
predictions are as calibrated as the rule assumes keeps lending, a pool whose
jobs changed kind stops).

``loan_ramp_warmup=N`` makes a pool *cold* in a window until N of its jobs
(loans or witnesses) predicted to fit it have ended within it: a job predicted to fit an earlier
window counts in the first window it ended within and in every later one (since 2026-11-29, later
the same day as the wake-up's measurements: before, a job that ran past its predicted window
warmed no window, so a pool whose jobs are predicted to fit an hour and run three stayed cold in
the 12-hour window too). A cold pool lends there only what a time limit makes certain. A pool
whose first jobs all run past every window never lends on them, where the plain ramp lends it one loan
at once (on Figure 13, one such first loan delayed 393 jobs of exp-071). It
needs witnesses (``evidence`` ``misses`` or ``all``): a cold pool has no
loans to prove it.

``loan_ramp_wake_days=D`` makes a pool cold again, in every window, when a job of
its arrives after the pool submitted nothing for D days (the jobs before the replay, from the
forecaster's prior history, count): a pool that wakes from a long silence is treated as a new
one, its predictions unproven until its own jobs fit (at least one per window, or ``warmup``).
Its cap falls back to ``initial`` as well. A silence of days often ends with a new project (on
Philly's Figure 13 config, pool ``0e4a51`` submitted nothing for four days, then 124 jobs of
three to five days each, where its training weeks' jobs ran an hour or less).

``loan_ramp_wake_until`` says when a woken pool is warm again: ``fit`` (the default) once one of
its new jobs has fit a window, as above; ``quiet`` also once the largest window has passed since
the wake with none of the jobs the pool started since then having run past a window it was predicted
to fit (no evidence either way: a pool whose quota is held by day-long jobs cannot start a new job
to prove itself, and stays cold for days under ``fit``). A burst of changed jobs keeps the pool cold:
its witnesses run past their windows.

Outcomes are read from the simulator's completions and the clock only (no
peeking); with perfect durations no loan overruns and the ramp only delays
loans, so SIA's ``loan_ramp="auto"`` (its default) leaves it off for them and
sets :data:`DEFAULT_LOAN_RAMP` for predicted durations; ``null`` turns it off.
"""

from __future__ import annotations

import math
from typing import Any

from sia.data.errors import ConfigError

#: The ramp's initial cap, chosen on training weeks only: ``experiments/risk_training_weeks.yaml``
#: (20 experiments of 4 Philly pools replayed on days 35-56, predictors trained on days 14-35,
#: before every reported replay), by a rule fixed before the run: the value of 1, 2, 4 with the
#: fewest slowed jobs pooled, the higher mean speedup among values within 10% of it. Measured
#: (2026-11-28, `sia evaluate experiments/risk_training_weeks.yaml --set policies=[...]`):
#: % slowed / total slowdown min / mean speedup: ramp off 1.94% / 114,348 / 89.1; 1 0.88% /
#: 19,475 / 83.4; 2 1.34% / 56,226 / 85.4; 4 1.64% / 52,728 / 86.9 (MaxMin 11.5% / 11.4M /
#: 98.1): 1. Halving on a miss (1.92%) and forgiving the misses within eps of the last 10 or
#: 20 loans (``memory``: 1.83%, 1.36%) lost to resetting by the same rule. The idea came from
#: the slowdown attribution of Figure 13 (the reported experiment), and a first run there;
#: its value was chosen here.
DEFAULT_LOAN_RAMP = 1


#: What a miss does to the cap: ``reset`` to the initial cap, or ``halve`` it (TCP's
#: multiplicative decrease: a pool with a long record of proven loans keeps more of it).
BACKOFFS = ("reset", "halve")
#: Which outcomes score a pool's predictions (module docstring).
EVIDENCE = ("loans", "misses", "all")
#: SIA's default ``loan_ramp_evidence``, chosen on training weeks only
#: (``experiments/risk_training_weeks.yaml``: 20 experiments of 4 Philly pools replayed on days
#: 35-56, predictors trained on days 14-35) by the rule of ``sia.scheduler.policies.sia.risk.DEFAULT_RISK``'s choice, fixed
#: before the run: among the values whose slowed jobs are <= 0.5% pooled and <= 2% in every
#: experiment, the highest mean speedup. Measured (2026-11-28, `sia evaluate
#: experiments/risk_training_weeks.yaml --set policies=[fcfs,sia,{name: sia, options:
#: {loan_ramp_evidence: ...}}, ...]`), % slowed / total slowdown min / worst experiment /
#: mean speedup: loans 0.62% / 14,518 / 2.80% / 80.8; misses 0.11% / 339 / 1.15% / 65.6;
#: all 0.47% / 19,274 / 2.81% / 77.4: ``misses``, the only one within both bounds (for 19% of
#: the mean speedup).
DEFAULT_EVIDENCE = "misses"
#: SIA's default ``loan_ramp_warmup``: none. Measured with ``misses`` the same way: warmup 1
#: 0.38% / 1,312 / 3.50% / 65.2 (with ``all``: 0.67% / 20,405 / 3.50% / 77.6), outside the
#: bounds.
DEFAULT_WARMUP = 0
#: SIA's default ``loan_ramp_wake_days`` (module docstring): None, off. Chosen on training data
#: only by a rule fixed before the runs (2026-11-29): among off, 0.5, 1 and 2 days, those within
#: 0.5% slowed pooled and 2% in every experiment on ``experiments/risk_training_weeks.yaml``
#: and keeping 90% of off's mean speedup there and on ``experiments/graham_training_weeks.yaml``,
#: the fewest slowed jobs summed over the two. Measured (`sia evaluate ... --set
#: policies=[fcfs,sia,{name: sia, options: {loan_ramp_wake_days: ...}}]`): Philly's training
#: weeks off 0.141% / 642 min / worst 0.97% / mean 70.9, every D 0.422% / 1,618 / 3.50% /
#: 69.2-70.6 (out: the same loans' delays pass to a woken pool's queue, whose jobs can no longer
#: be lent out of it); Graham's training days off 1 job / mean 222, every D 0 / 21.9-22.3
#: (out): off. On Figure 13 (measured after the choice) D = 1 or 2 slows 0.079% against 0.91%.
#: Again (2026-11-29, later) with ``loan_ramp_wake_until: quiet`` and the later-window fits, by the
#: same kind of rule fixed before the runs (within the Philly bounds and 90% of off's geometric
#: mean on both training sets, then the fewest slowed jobs summed, a tie to the higher geometric
#: mean on Philly's weeks): Philly's weeks off 275 slowed / geomean 1.870644, D = 1 276 / 1.86632,
#: D = 2 275 / 1.870642; Graham's days off 1 / 2.018, D = 1 or 2 1 / 1.873: D = 2 ties off on
#: slowed jobs and loses the tie by 2e-6 of geometric mean, so off.
DEFAULT_WAKE_DAYS: float | None = None
#: When a woken pool is warm again (module docstring).
WAKE_UNTIL = ("fit", "quiet")
#: What a witnessed job's miss does (module docstring).
WITNESS_RULES = ("hold", "reset", "tolerate")
#: SIA's default ``loan_ramp_witness``, chosen on training data only by the rule of
#: :data:`DEFAULT_EVIDENCE`'s choice, fixed before the run (among the values whose slowed jobs
#: are <= 0.5% pooled and <= 2% in every experiment, the highest mean speedup), on
#: ``experiments/risk_training_weeks.yaml`` (Philly days 35-56) and
#: ``experiments/graham_training_weeks.yaml`` (Graham days 16-24, predictors trained on days 3-12
#: and validated on days 12-16). Measured (2026-11-29, `sia evaluate ... --set policies=[fcfs,maxmin,sia,{name: sia,
#: options: {loan_ramp_witness: ...}}]`), % slowed / total slowdown min / worst experiment /
#: mean speedup on Philly's training weeks: hold 0.109% / 339 / 1.15% / 65.6; reset 0.580% /
#: 10,250 / 2.64% / 78.6 (out); tolerate 0.141% / 642 / 0.97% / 70.9; on Graham's training
#: days all three slow one job (0.065%) at a mean of 222: ``tolerate``.
DEFAULT_WITNESS = "tolerate"
#: Witnessed outcomes per pool and window that ``tolerate`` weighs against eps.
WITNESS_MEMORY = 20


class LoanRamp:
    """Per pool and window: the running loans, their deadlines and the cap (module docstring)."""

    def __init__(self, initial: int, ceiling: int = 1 << 20, backoff: str = "reset",
                 memory: int = 0, evidence: str = "loans", warmup: int = 0,
                 witness: str = DEFAULT_WITNESS, wake_days: float | None = DEFAULT_WAKE_DAYS,
                 wake_until: str = "fit", name: str = "sia"):
        if isinstance(initial, bool) or not isinstance(initial, int) or initial < 1:
            raise ConfigError(f"policy {name!r}: loan_ramp must be a whole number of loans >= 1 "
                              f"(or unset), not {initial!r}")
        if backoff not in BACKOFFS:
            raise ConfigError(f"policy {name!r}: loan_ramp_backoff must be one of {BACKOFFS}, "
                              f"not {backoff!r}")
        if evidence not in EVIDENCE:
            raise ConfigError(f"policy {name!r}: loan_ramp_evidence must be one of {EVIDENCE}, "
                              f"not {evidence!r}")
        if witness not in WITNESS_RULES:
            raise ConfigError(f"policy {name!r}: loan_ramp_witness must be one of "
                              f"{WITNESS_RULES}, not {witness!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ConfigError(f"policy {name!r}: loan_ramp_warmup must be a whole number of "
                              f"jobs >= 0, not {warmup!r}")
        if warmup and evidence == "loans":
            raise ConfigError(f"policy {name!r}: loan_ramp_warmup needs loan_ramp_evidence "
                              f"'misses' or 'all' (a cold pool makes no loan to prove it)")
        if wake_days is not None:
            if (isinstance(wake_days, bool) or not isinstance(wake_days, int | float)
                    or not math.isfinite(wake_days) or wake_days <= 0):
                raise ConfigError(f"policy {name!r}: loan_ramp_wake_days must be a number of "
                                  f"days > 0 (or unset), not {wake_days!r}")
            if evidence == "loans":
                raise ConfigError(f"policy {name!r}: loan_ramp_wake_days needs "
                                  f"loan_ramp_evidence 'misses' or 'all' (a cold pool makes no "
                                  f"loan to prove it)")
        if wake_until not in WAKE_UNTIL:
            raise ConfigError(f"policy {name!r}: loan_ramp_wake_until must be one of "
                              f"{WAKE_UNTIL}, not {wake_until!r}")
        if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
            raise ConfigError(f"policy {name!r}: loan_ramp_memory must be a whole number of "
                              f"loans >= 0, not {memory!r}")
        self.initial = int(initial)
        self.backoff = backoff
        self.evidence = evidence
        self.warmup = int(warmup)
        #: silence (days) after which a pool's next job makes it cold again; None: never
        self.wake_days = None if wake_days is None else float(wake_days)
        #: a woken pool is also warm after a quiet largest window (``wake_until="quiet"``)
        self.quiet = wake_until == "quiet"
        self.witness_rule = witness
        #: True when the pool's own (dedicated) jobs are witnessed (:meth:`witness`)
        self.witnesses = evidence != "loans"
        #: with ``memory`` L > 0, a miss backs the cap off only when more than ``tolerance[k]
        #: * L`` of the pool's last L scored loans in window k missed (the overruns the
        #: lending rule accepted, eps_k, do not count against the pool); 0: every miss does
        self.memory = int(memory)
        self.tolerance: list[float] | None = None
        self.ceiling = max(int(ceiling), self.initial)

    def reset(self, n_pools: int, n_windows: int, tolerance=None, last_submit=None,
              windows=None) -> None:
        """Forget everything (a new replay); ``tolerance``: per window, the overrun rate the
        lending rule accepts (eps; None: 0); ``last_submit``: per pool, its last submission
        before the replay (s, the trace's submission clock, which a replay's speed-up leaves
        alone; NaN or None: unknown, no wake-up at its first job); ``windows``: the windows'
        lengths (s; None: a job that overruns its window warms no later one)."""
        from collections import deque

        self.windows = () if windows is None else tuple(float(w) for w in windows)

        self.cap = [[self.initial] * n_windows for _ in range(n_pools)]
        self.tolerance = [0.0] * n_windows if tolerance is None else [float(t) for t in tolerance]
        self.recent = [[deque(maxlen=max(self.memory, 1)) for _ in range(n_windows)]
                       for _ in range(n_pools)]
        #: per pool and window: the last witnessed outcomes (1: missed), for ``tolerate``
        self.witnessed = [[deque(maxlen=WITNESS_MEMORY) for _ in range(n_windows)]
                          for _ in range(n_pools)]
        #: per pool: running loan or witnessed job -> [window index, deadline s, missed
        #: already, started at s, witnessed (not a loan), counted against the cap]
        self.open: list[dict[int, list[Any]]] = [{} for _ in range(n_pools)]
        self.count = [[0] * n_windows for _ in range(n_pools)]
        #: per pool and window: its jobs (loans or witnesses) that ended within the window (or
        #: within an earlier one), also when predicted to fit an earlier one that they ran past;
        #: counted only when a warmup needs them
        self.fits = [[0] * n_windows for _ in range(n_pools)]
        self._done = [0] * n_pools
        #: per pool: the jobs (loans or witnesses) that must fit a window before it lends
        #: there: ``warmup``, or at least 1 since the pool woke from a silence
        self.need = [self.warmup] * n_pools
        self._last = [math.nan] * n_pools if last_submit is None else [
            float(x) for x in last_submit]
        self._wake_s = None if self.wake_days is None else self.wake_days * 86400.0
        #: per pool: when it last woke (s); only its jobs started since then warm it
        self._woke_at = [-math.inf] * n_pools
        #: per pool: one of its jobs started since it woke ran past its window (``quiet``)
        self._woke_missed = [False] * n_pools
        self._quiet_s = self.windows[-1] if self.windows else math.inf
        self._now = -math.inf
        #: no running unscored loan has a deadline before this (s): the overrun scan skips
        #: until then (a loan scored or ended since may leave it early: only a wasted scan)
        self._next_deadline = math.inf
        self.stats = {"proven": 0, "missed": 0, "held_back": 0, "witnessed": 0,
                      "witness_missed": 0}
        if self._wake_s is not None:
            self.stats["woke"] = 0  # pools made cold again by a job after a silence

    def arrived(self, p: int, t: float) -> None:
        """A job of pool ``p`` was submitted at ``t`` (s): after a silence of ``wake_days`` or
        more the pool is cold again in every window (its fits forgotten, its cap reset)."""
        last = self._last[p]
        self._last[p] = t
        if self._wake_s is not None and t - last >= self._wake_s:  # False for NaN
            fits, cap = self.fits[p], self.cap[p]
            for k in range(len(fits)):
                fits[k] = 0
                cap[k] = self.initial
            self.need[p] = max(self.warmup, 1)
            self._woke_at[p] = t
            self._woke_missed[p] = False
            self.stats["woke"] += 1

    def update(self, now: float, completed_counts: list[int], completed_jobs,
               duration) -> None:
        """Score the loans that ended since the last call (proven when they ended by their
        deadline) and the ones running past their windows (missed); ``completed_jobs(p)``
        returns pool p's completed job indices in completion order, ``duration`` the jobs'
        run times (s; read only for jobs that have finished)."""
        self._now = now
        for p, n in enumerate(completed_counts):
            if n > self._done[p]:
                opened = self.open[p]
                if opened:
                    for j in completed_jobs(p)[self._done[p]:n].tolist():
                        rec = opened.pop(j, None)
                        if rec is not None:
                            k, deadline, missed, lent_at, seen, held = rec
                            if held:  # a loan, or a witness held since its miss
                                self.count[p][k] -= 1
                            if missed or lent_at + float(duration[j]) > deadline:
                                if not missed:
                                    self._miss(p, k, seen)
                                    if lent_at >= self._woke_at[p]:
                                        self._woke_missed[p] = True
                                if self.need[p] and lent_at >= self._woke_at[p]:
                                    self._fit_later(p, k, float(duration[j]))
                                continue
                            if seen and self.witness_rule == "tolerate":
                                self.witnessed[p][k].append(0)
                            if self.need[p] and lent_at >= self._woke_at[p]:
                                # a fit of window k also fits every later one
                                fits = self.fits[p]
                                for kk in range(k, len(fits)):
                                    fits[kk] += 1
                            if seen and self.evidence != "all":
                                pass  # a witnessed fit proves nothing under "misses"
                            else:
                                self.cap[p][k] = min(2 * self.cap[p][k], self.ceiling)
                                self.stats["proven"] += 1
                                self.recent[p][k].append(0)
                self._done[p] = n
        if now <= self._next_deadline:
            return
        nxt = math.inf
        for p, opened in enumerate(self.open):
            for rec in opened.values():
                if not rec[2]:
                    if now > rec[1]:
                        rec[2] = True
                        if rec[3] >= self._woke_at[p]:
                            self._woke_missed[p] = True
                        if self._miss(p, rec[0], rec[4]) and rec[4]:
                            rec[5] = True  # a witness counts against the cap from its miss on
                            self.count[p][rec[0]] += 1
                    elif rec[1] < nxt:
                        nxt = rec[1]
        self._next_deadline = nxt

    def _fit_later(self, p: int, k: int, d: float) -> None:
        """A job of pool ``p`` predicted to fit window ``k`` ran ``d`` s, past it: for the
        warm-up it fits the first later window it ended within, and every one after (its
        prediction said it fits those too)."""
        w = self.windows
        for kk in range(k + 1, len(w)):
            if d <= w[kk]:
                fits = self.fits[p]
                for k2 in range(kk, len(w)):
                    fits[k2] += 1
                return

    def _miss(self, p: int, k: int, witnessed: bool = False) -> bool:
        """A loan (or a witnessed job) of pool ``p`` overran window ``k``: back off the cap.
        Return whether a witness's miss holds the cap until it ends (``loan_ramp_witness``)."""
        self.stats["witness_missed" if witnessed else "missed"] += 1
        if witnessed and self.witness_rule != "hold":
            if self.witness_rule == "tolerate":
                rec = self.witnessed[p][k]
                rec.append(1)
                if sum(rec) <= self.tolerance[k] * WITNESS_MEMORY:
                    return False  # within the overruns the lending rule accepted
            self._back_off(p, k)
            return self.witness_rule == "tolerate"
        rec = self.recent[p][k]
        rec.append(1)
        if not (self.memory and sum(rec) <= self.tolerance[k] * self.memory):
            self._back_off(p, k)  # else within the overruns the lending rule accepted
        return True

    def _back_off(self, p: int, k: int) -> None:
        """Lower pool ``p``'s cap in window ``k`` after a miss (``backoff``: reset or halve)."""
        self.cap[p][k] = (self.initial if self.backoff == "reset"
                          else max(self.initial, self.cap[p][k] // 2))

    def holds(self, p: int, k: int) -> bool:
        """True when pool ``p`` may not have another loan running in window ``k`` now (at its
        cap, or cold there); counts nothing (a woken pool whose quiet window has passed,
        ``wake_until="quiet"``, is marked warm here, where that is first asked)."""
        if self.count[p][k] >= self.cap[p][k]:
            return True
        if self.fits[p][k] < self.need[p]:
            if (self.quiet and not self._woke_missed[p]
                    and self._now >= self._woke_at[p] + self._quiet_s > -math.inf):
                self.need[p] = 0  # a quiet largest window since the wake: warm again
                return False
            return True
        return False

    def full(self, p: int, k: int) -> bool:
        """:meth:`holds`, counting each time a pool is held back (``stats["held_back"]``)."""
        if self.holds(p, k):
            self.stats["held_back"] += 1
            return True
        return False

    def forget(self, j: int, p: int) -> None:
        """Drop loan ``j`` of pool ``p`` without scoring it (it was evicted or refused: it
        proved nothing, and must not hold its pool's cap until it runs again)."""
        rec = self.open[p].pop(j, None)
        if rec is not None and rec[5]:
            self.count[p][rec[0]] -= 1

    def lent(self, j: int, p: int, k: int, now: float, deadline: float) -> None:
        """Record loan ``j`` of pool ``p`` lent ``now`` in window ``k`` that must end by
        ``deadline`` (s)."""
        self.open[p][j] = [k, deadline, False, now, False, True]
        self._next_deadline = min(self._next_deadline, deadline)
        self.count[p][k] += 1

    def witness(self, j: int, p: int, k: int, now: float, deadline: float) -> None:
        """Record job ``j`` of pool ``p`` started ``now`` on its own quota, predicted to fit
        window ``k`` (it should end by ``deadline``, s): scored like a loan, never counted
        against the cap (a no-op unless ``evidence`` is ``misses`` or ``all``)."""
        if not self.witnesses:
            return
        self.open[p][j] = [k, deadline, False, now, True, False]
        self._next_deadline = min(self._next_deadline, deadline)
        self.stats["witnessed"] += 1
