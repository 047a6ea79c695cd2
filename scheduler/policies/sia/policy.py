"""SIA: share idle GPUs across pools using coarse predictions (SIA 5.3, Figures 7 and 8).

A *realistic* policy: it reads only arrived jobs' pools and widths and the
simulator's state; everything about the future comes from the forecaster
given at construction (learned, perfect or random; only a perfect one reads
the future). The policy itself is deterministic.

At every decision (arrivals, completions, and the periodic tick, whenever
GPUs are idle and jobs pend; otherwise it returns ``[]`` at once):

1. **AllocateDedicatedResources (Figure 7).** Repeatedly, visiting pools in
   ``dedicated_order`` (:mod:`~sia.scheduler.policies.sia.dedicated`; by default pools
   holding no loans first, then the most jobs pending, then Figure 7's increasing
   CurrentAllocation / Quota: dedicated + opportunistic GPUs, counting this
   decision's starts; ties by pool index), start the first
   pool whose *next job in order* fits both its unused quota (quota -
   dedicated use) and the free GPUs; one start per pass; stop when no pool
   starts. "In order" is strict head-of-line blocking within the pool's
   *dedicated stream*, exactly like FCFS: the stream is the pool's pending
   jobs in arrival order, and when its head does not fit, no later job of
   the pool starts on dedicated resources. A job started opportunistically
   (step 2) leaves the stream for good: it runs beyond its pool's quota (its
   GPUs never count against the quota), and the stream's next job becomes
   the head. Dedicated starts are therefore in arrival order within a pool:
   every job of a pool that arrived before a dedicated job started no later
   than it.

2. **AllocateSpareResources (Figure 8).** For each window ``w`` in
   increasing order (default 5 min, 1 h, 12 h), ``do { ... } while`` a job
   started:

   - ReserveResourcesForFuture for every pool ``p``:
     ``reserved_p = min(pending_load_p + TotalNewLoad(p, w), unused_quota_p)``
     over ``[now, now + w)``, where pending_load is the GPUs of ``p``'s
     pending jobs, unused_quota = quota - dedicated use, and TotalNewLoad =
     NewLoadEstimate when WillJobsArrive says 1, else 0. A pool the online
     adaptation distrusts in ``w`` reserves its whole unused quota.
   - ``usable = free GPUs - MaxReservation(now, w)``: the reservations are
     constant over ``[now, now + w)``, so MaxReservation is
     ``sum_p reserved_p``. With fungible GPUs this is a count argument: a
     pool can only ever claim, as dedicated, GPUs within its unused quota;
     the free GPUs are all the pools' unused quotas minus what opportunistic
     jobs hold, so keeping ``sum_p reserved_p`` of them free keeps each
     pool's predicted claims satisfiable for as long as the new job runs.
   - FindNextJob for pools in increasing CurrentAllocation / Quota: the
     pool's first pending job in arrival order whose *predicted* duration bin
     fits ``w`` (the bin's upper edge <= ``w``; the open last bin never fits)
     and whose GPUs fit ``usable``; the first pool that has one starts it
     *opportunistically* (beyond its quota, on idle GPUs) and the
     reservations are recomputed (ClearReservations; a start shrinks its
     pool's pending load).

   Windows are not revisited once passed (Figure 8's loop order).

Certainty first (``lend_on_limit``, on by default): a job whose requested
time limit (the trace's ``time_limit``, e.g. Slurm's Timelimit) plus
:data:`~sia.data.schema.TIME_LIMIT_GRACE_S` fits window ``w`` cannot run
longer than ``w`` (the scheduler ends it there), so it is lendable in ``w``
whatever its predicted duration: its P(duration <= w) is 1. The served
report counts the loans made on such a guarantee apart from those made on a
prediction, with the overruns of each. On a trace without limits nothing
changes.

Risk budget (``risk``, :mod:`sia.scheduler.policies.sia.risk`; by default
:data:`~sia.scheduler.policies.sia.risk.DEFAULT_RISK` = 3 as a veto, below;
``risk: null`` = the rules above alone): ``risk`` is the allowed expected
number of owners' jobs that one loan delays (so a budget <= 1 also bounds the
probability that a loan delays an owner's job). With ``risk_mode: replace`` it
replaces FindNextJob's fit test: a job is lendable in window ``w`` when its time limit guarantees the fit (at any
budget, also 0), or when its pool is warm (``risk_cold_n`` scored outcomes in
``w``) and the pool's calibrated upper bound on the overrun rate of jobs
predicted like it (the ``risk_level`` quantile, learned online from the
outcomes of the pool's considered jobs, a miss tightening it at once), times
the cost of a miss (``1 / (1 - load)`` of the busiest pool with unused quota,
its recent load over ``risk_load_days``; at most ``risk_cost_cap`` jobs), is
within ``risk``. ``risk=0`` lends only on certainty, of the owners' arrivals
too: unless the forecaster's arrival and load predictions are perfect
information, every pool then reserves its whole unused quota, so nothing is
lent (:func:`arrival_side`). For ``risk > 0`` the arrival side is
``risk_arrivals``: ``"calibrated"`` (the default) bounds the arrivals too, by
per-pool calibration of both predictions (as ``calibration: true``) at miss
rate ``risk / (1 + risk)``; ``"predicted"`` keeps SIA's reservations and
online adaptation, so the bound covers the duration side only. Three options, off by
default (tried in session 31, none chosen on the training data), change this:
``risk_durations`` (the duration side's own budget), ``risk_arrival_cost`` (each pool's
arrival miss rate ``risk / (risk + c_p)`` by its own cost) and ``risk_cost: expected`` (the
cost as the mean over the pools with unused quota, weighted by their unused GPUs; ``reclaim``,
session 32: weighted by their unused GPUs times their loads). With
``risk=0`` the arrival side reserves everything, so no duration budget lends then.

With ``risk_mode: veto`` (the default) the budget is a veto on SIA's own rule
instead: a job is lendable in a window only when the rule above (its bin or
``lend_risk``, a fitting time limit first) and the budget both allow it, and
the calibrated arrival side answers at least the registered predictions (a
"yes" stays a "yes", the load bound is at least the registered estimate; the
online adaptation still scores the registered ones). The budget can then only
take loans away, so it runs from SIA's own lending (a large budget, but for
pools still cold: too few outcomes for the duration bound, or no arrival yet
for the calibration) to certainty (0). The perfect-information and random
variants (:data:`NO_BUDGET_VARIANTS`) take no budget unless one is passed.

Per-pool calibration (``calibration``: true, ``"arrivals"`` or ``"load"``, off by default;
:mod:`sia.models.calibration` in the learned forecaster): WillJobsArrive is
thresholded per pool at a conformal recall threshold and NewLoadEstimate is
each pool's conformal upper bound over the sliding max, both at miss rate
``calibration_alpha`` from the pool's last ``calibration_memory`` 5-minute
records, each scored only once its window has passed (the load side also
from the jobs of the ``calibration_prior_days`` before the replay). A pool
too cold for a bound reserves its whole unused quota in that window
(``calibration_cold="reserve"``) or keeps the uncalibrated answers
(``"registered"``). ``calibration_held``: where WillJobsArrive is the persistence rule, a pool
whose queue holds jobs not yet eligible (the trace's ``hold_time``: Slurm's dependencies,
``--begin`` times and holds) ranks above a pool without them, so its calibrated threshold can
say "yes" while it holds jobs instead of in every window (no effect on a trace without held
jobs). A
forecaster without ``calibrate`` (perfect, random) is left as it is.

``nested_reservations`` (default True) makes TotalNewLoad non-decreasing in
``w`` (a running max over the windows): a job that runs up to 1 h also
occupies the first 5 minutes, so it must respect the 5-minute window's
predicted load even when a learned model's 1-hour answer is lower
(independent per-window models can disagree). With consistent predictions
(perfect ones) it changes nothing; ``False`` is Figure 8 to the letter.

Predictions are batched: one ``will_jobs_arrive`` and one
``new_load_estimate`` call for all pools and windows per forecast, and one
``duration_bins`` call for the jobs that arrived since the previous one. A
job's duration bin is predicted once, on its first consideration, and kept
(the JobDuration prediction of a submitted job, as a production scheduler
would make it at submission time; this is also how a random strawman draws
one bin per job).

When to forecast (``refresh_s``, default 300 s = the tick): SIA asks the
forecaster at every tick, and between ticks only when its last forecast is
``refresh_s`` or more old (``refresh_s=0``: at every decision). A decision
between forecasts reuses the last one *conservatively*: a forecast made
``age`` seconds ago covers arrivals in ``(now - age, now - age + w]`` only,
so in window ``w`` it lends only jobs whose predicted bin fits
``w - age`` (in practice: the next smaller window's jobs; nothing in the
smallest window), and the arrivals since the forecast count twice (as
pending load and in the forecast). With perfect predictions the
zero-slowdown property holds either way. SIA also skips the forecast when
nothing could be lent anyway: every pool reserves at least
``min(pending_load, unused_quota)`` whatever the predictions, so when the
free GPUs minus those amounts leave no lendable job, it stops there.

Online adaptation (:mod:`sia.scheduler.policies.sia.adaptation`, on by default): the
predictions made at ticks are scored against the actual arrivals; while a
pool's recent predictions in window ``w`` missed arrivals, the pool lends
nothing in ``w`` (and, with nested reservations, in the larger windows).
JobDuration can be scored too (``adapt_durations``, off by default; needs
``adaptation``): every job whose bin SIA predicted is scored, in each window
its bin fits, as a miss once it runs longer than that window; while a pool's
recent outcomes in ``w`` hold ``duration_max_misses`` misses, none of its
jobs is lent in ``w`` (a loan in ``w`` relies on exactly that prediction; an
overrunning loan holds the owner's GPUs past the window its reservations
covered). ``duration_earn_trust`` starts every pool distrusted until
``duration_lookback`` outcomes have been scored. Why off by default
(measured; the README's evaluation section has the table): on Philly (the
Table 17 config, and Figure 16 on Philly-drawn pools) every setting tried
cost speedup (Table 17 geometric mean 24.2 off, 7.6 at the strictest
setting), and none slowed fewer jobs everywhere (a lenient one spared the
2-pool experiments' slowed jobs but slowed more at 8 pools); on the
synthetic workloads, whose durations carry no signal by construction, it is
what keeps learned SIA from slowing jobs, so the synthetic Figure 16 config
turns it on.

Locality (SIA 5.5; on a cell-aware cluster, :mod:`sia.scheduler.locality.cell_cluster`):
every start also needs a buddy cell (the view's ``can_place``; the
simulator's placer stage places the starts); a dedicated head
that gets none blocks its pool's stream (as under FCFS with cells), and, when
the cluster allows preemption, first preempts running preemptible
opportunistic jobs until its cell is free (returning a
:class:`~sia.scheduler.core.simulator.Preempt` per victim). In Figure 8 each
pool's reservation becomes *cells* of its quota (its pending jobs' widths in
arrival order, the rest as the largest cells its quota has): a reservation
that cannot be met stays pending and blocks every opportunistic start in
that window; reservations are cleared after each window. A lendable job
that gets no cell ends its pool's turn in that window.

Lending with preemption (the rule of SIA 5.5's "partial support"): with
``preempt`` on, let ``R`` be the GPUs of running preemptible opportunistic
jobs (what a preemption can give back) and ``cost`` the preemption cost
(lost work + restart delay, seconds). In window ``w`` the reservations
are lowered by a credit of ``floor(R * max(0, 1 - cost / w))`` GPUs, taken
from the pools in index order (a pool's reservation never below 0): a
pool's predicted claim may be covered by GPUs SIA can take back, so the
larger the preemptible share of what is running, and the cheaper a
preemption relative to the window, the more SIA lends. A dedicated job that
then finds its cells held preempts (Figure 7 above).

Preemption on fungible GPUs (``preempt``, :mod:`sia.scheduler.policies.sia.preempt`):
the replay's preemptible jobs are also lent beyond the predictions (on any idle
GPU by default), Figure 8 sees those loans' GPUs as idle, and a dedicated head
that fits its quota but not the free GPUs evicts the newest preemptible loans;
non-preemptible jobs are lent on the same rules as without it.

With perfect coarse predictions no job starts later than under FCFS: the
dedicated streams are FCFS on a subset of the jobs, and every opportunistic
job fits its window, within which all pools' arrivals were reserved (see
tests/scheduler/test_sia.py for the property test).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

import numpy as np
from sia.data.errors import ConfigError, SiaError
from sia.data.schema import TIME_LIMIT_GRACE_S
from sia.data.windows import limit_certain
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.forecast import (
    DEFAULT_WINDOWS_S,
    DURATION_BIN_EDGES_S,
    DurationCdfForecaster,
    Forecaster,
    PerfectForecaster,
    cdf_from_bins,
)
from sia.scheduler.core.needs import PolicyNeeds
from sia.scheduler.core.served import ServedPredictions
from sia.scheduler.core.simulator import Preempt
from sia.scheduler.core.view import SimView, Start, TraceArrays
from sia.scheduler.policies.sia.adaptation import (
    DEFAULT_LOOKBACK,
    ArrivalMissTracker,
    DurationMissTracker,
)
from sia.scheduler.policies.sia.dedicated import (
    DEFAULT_DEDICATED_ORDER,
    NO_FAIL,
    DedicatedPass,
    check_dedicated_order,
)
from sia.scheduler.policies.sia.forecast_mix import (
    perfect_arrivals,
    perfect_durations,
    random_arrivals,
    random_arrivals_and_durations,
)
from sia.scheduler.policies.sia.preempt import (
    DEFAULT_PREEMPT_LEND,
    DEFAULT_PREEMPT_YIELD,
    FungiblePreemption,
    check_preempt_lend,
    check_preempt_yield,
)
from sia.scheduler.policies.sia.ramp import (
    DEFAULT_EVIDENCE,
    DEFAULT_LOAN_RAMP,
    DEFAULT_WAKE_DAYS,
    DEFAULT_WARMUP,
    DEFAULT_WITNESS,
    LoanRamp,
)
from sia.scheduler.policies.sia.risk import DEFAULT_RISK, DEFAULT_RISK_MODE, NEVER, RiskBudget
from sia.scheduler.policies.sia.spare import (
    _EPS,
    DEFAULT_REBIN_PENDING,
    DEFAULT_RESERVE_FLOOR,
    REBIN_MAX,
    SparePass,
    check_rebin_pending,
    check_reserve_floor,
)

#: The risk budget's arrival side when ``risk`` is set (``risk_arrivals``): ``"calibrated"``,
#: per-pool calibrated arrivals at miss rate risk / (1 + risk). Chosen on the training data
#: (Philly's training weeks, experiments/risk_training_weeks.yaml, and Graham's training days,
#: experiments/graham_training_weeks.yaml) by a rule fixed before the runs: the mode whose harm
#: per loan (slowed jobs / loans) stays within the budget at 0.1 and 1 on both. "predicted"
#: slowed 297 of Graham's 1,542 jobs at budget 0.1 with 399 loans (0.74 per loan, partition
#: 48's arrivals behind loans of 47); "calibrated" 0 there, and 0.012 / 0.033 per loan on
#: Philly's weeks (docs/concepts/lending.md, "The budget's arrival side").
DEFAULT_RISK_ARRIVALS = "calibrated"
RISK_ARRIVALS = ("predicted", "calibrated")
#: Whether the calibrated arrival side ranks a pool holding jobs not yet eligible above one
#: without (``calibration_held``; only a trace with ``hold_time`` has such jobs).
DEFAULT_CALIBRATION_HELD = False
#: How the risk budget meets SIA's own lending rule (``risk_mode``): ``"replace"`` (the budget
#: decides alone) or ``"veto"`` (a loan needs both: the budget can only take loans away).
RISK_MODES = ("replace", "veto")


class Decision:
    """One decision's running totals, shared by the two passes: free GPUs, each pool's
    dedicated use and allocation (GPUs, counting this decision's starts), the items so far."""

    __slots__ = ("free", "ded", "alloc", "starts")

    def __init__(self, free: int, ded: list[int], alloc: list[int]):
        self.free = free
        self.ded = ded
        self.alloc = alloc
        self.starts: list = []


def _checked_inputs(forecaster: Any, windows_s: Sequence[float], refresh_s: float,
                    name: str) -> tuple[float, ...]:
    """Return SIA's windows (seconds) once ``forecaster`` has the three predictors, the windows
    increase and ``refresh_s`` >= 0; else a ConfigError naming the policy and the option."""
    if forecaster is None:
        raise ConfigError(
            "policy 'sia' needs a forecaster (forecaster=...): the pipeline passes the learned "
            "predictors; use 'sia-perfect' for perfect coarse predictions")
    for method in ("will_jobs_arrive", "new_load_estimate", "duration_bins"):
        if not callable(getattr(forecaster, method, None)):
            raise ConfigError(f"policy {name!r}: forecaster {forecaster!r} has no {method}()")
    windows = tuple(float(w) for w in windows_s)
    if not windows or any(w <= 0 for w in windows) or any(
            b <= a for a, b in zip(windows, windows[1:], strict=False)):
        raise ConfigError(
            f"policy {name!r}: windows_s must be increasing positive seconds, not {windows_s}")
    if not refresh_s >= 0:
        raise ConfigError(f"policy {name!r}: refresh_s must be >= 0 seconds, not {refresh_s}")
    return windows


class SiaPolicy(DedicatedPass, SparePass, FungiblePreemption):
    """SIA's scheduler (Figures 7 and 8) with online adaptation; see the module docstring.

    Options: ``forecaster`` (required; implements
    :class:`~sia.scheduler.core.forecast.Forecaster`), ``windows_s`` (increasing
    windows in seconds), ``adaptation`` (on/off), ``lookback`` and
    ``max_misses`` (the adaptation's memory in tick records, and in job
    outcomes for JobDuration, and its strictness), ``count_load_misses``,
    ``adapt_durations`` (also distrust pools whose duration predictions
    overran; needs ``adaptation``; off by default), ``duration_max_misses``
    and ``duration_lookback`` (its rule; default ``max_misses`` and
    ``lookback``), ``duration_earn_trust`` (a pool starts distrusted until
    it has ``duration_lookback`` outcomes), ``nested_reservations``,
    ``lend_on_limit`` (certainty first: a job whose requested time limit plus
    Slurm's grace fits a window is lendable there whatever its predicted
    duration; on by default, and a no-op on traces without limits),
    ``risk`` (the risk budget: allowed expected owners' jobs delayed per loan;
    default :data:`~sia.scheduler.policies.sia.risk.DEFAULT_RISK`; None = the bin /
    ``lend_risk`` rule alone) with ``risk_level``, ``risk_prior_n``,
    ``risk_cold_n``, ``risk_memory``, ``risk_load_days`` and ``risk_cost_cap``
    (:class:`~sia.scheduler.policies.sia.risk.RiskBudget`), ``risk_durations`` (the duration
    side's own budget, in the same unit: owners' jobs delayed per loan through an overrun;
    None, the default: ``risk``; needs ``risk``), ``risk_arrival_cost`` (False, the default:
    the calibrated arrival side's miss rate is ``risk / (1 + risk)`` in every pool; True:
    ``risk / (risk + c_p)`` per pool, ``c_p = 1 / max(1 - load_p, 1 / risk_cost_cap)`` the
    jobs a miss in the pool delays, ``load_p`` its load over the last ``risk_load_days``, so
    busier pools reserve more), ``risk_cost`` (the duration side's cost of a miss:
    ``"busiest"``, the default, the pool with unused quota whose load is largest; ``"expected"``,
    the mean over the pools with unused quota weighted by their unused GPUs; ``"reclaim"``,
    weighted by their unused GPUs times their loads: the owners who take the GPUs back),
    ``risk_arrivals`` (the
    budget's arrival side, :func:`arrival_side`: ``"calibrated"``, the default, or
    ``"predicted"``; at ``risk=0`` every pool whose arrivals are not known for certain
    reserves its whole unused quota), ``risk_mode`` (``"veto"``, the default: a job is
    lent only where SIA's own rule (the bin or ``lend_risk`` rule, time limits first)
    *and* the budget allow it, and a calibrated arrival side never reserves less than the
    registered predictions, so the budget can only take loans away: a large budget lends
    as SIA without it, but for cold pools, and 0 only on certainty; ``"replace"``: the
    budget decides alone which jobs are lent),
    ``loan_ramp`` (the loan ramp's initial cap, ``"auto"`` or null) with
    ``loan_ramp_backoff``, ``loan_ramp_memory``, ``loan_ramp_evidence``,
    ``loan_ramp_warmup``, ``loan_ramp_witness``, ``loan_ramp_wake_days`` and
    ``loan_ramp_wake_until`` (:class:`~sia.scheduler.policies.sia.ramp.LoanRamp`),
    ``refresh_s`` (seconds between forecasts outside ticks; 0 = every
    decision), ``seed`` (kept for the record; SIA itself draws nothing),
    ``preempt`` (fungible GPUs: lend preemptible jobs beyond the predictions and
    evict them, newest loan first, for an owner's head; off by default) and
    ``preempt_lend`` (``"idle"``, the default, or ``"unreserved"``: where those loans go; see
    :mod:`sia.scheduler.policies.sia.preempt`), ``preempt_yield`` (``"loans"``, the default:
    Figure 8's loans may evict the loans made beyond the predictions; ``"once"``: the same,
    but a job they evicted is not lent beyond the predictions again; ``"owners"``: only an
    owner's head evicts them), ``reserve_floor`` (None, the default: a pool predicted to
    submit nothing reserves only its pending jobs; ``"last_width"``: every pool reserves at
    least the GPUs of its last submitted job, within its unused quota; ``"margin"``: each
    window keeps room for one job as wide as some pool's last, :func:`~sia.scheduler.policies.sia.spare.margin`), ``rebin_pending``
    (False, the default: a job's duration is predicted once, when SIA first considers it;
    True: the pending jobs of a pool that completed jobs are predicted again, at most once per
    ``refresh_s``, with their look-alikes' history as of now, and become lendable in any
    smaller window the new prediction fits; not with ``risk``), ``dedicated_order`` (which
    pool's head starts first on dedicated resources, :mod:`~sia.scheduler.policies.sia.dedicated`:
    ``"allocation"``, Figure 7's increasing CurrentAllocation / Quota, or ``"oldest"``, the
    head that arrived first, ``"longest"``, the pool with the most jobs pending, or ``"repay"``,
    pools holding no loans first, then as ``"longest"``, or ``"fresh"``, as ``"repay"`` with
    the newest debt before the longest queue), ``name``.

    After a replay, :attr:`stats` holds counters (decisions, forecasts,
    dedicated / opportunistic starts, adaptation records and misses).
    """

    uses_ticks = True
    needs = PolicyNeeds(forecaster="forecaster", seed=True, locality=True)

    def __init__(self, forecaster: Forecaster | None = None, *,
                 windows_s: tuple[float, ...] | list[float] = DEFAULT_WINDOWS_S,
                 adaptation: bool = True, lookback: int = DEFAULT_LOOKBACK, max_misses: int = 1,
                 count_load_misses: bool = True, adapt_durations: bool = False,
                 duration_max_misses: int | None = None, duration_lookback: int | None = None,
                 duration_earn_trust: bool = False,
                 lend_risk: float | Sequence[float] | str | None = "auto",
                 nested_reservations: bool = True, lend_on_limit: bool = True,
                 risk: float | None = DEFAULT_RISK, risk_level: float = 0.9, risk_prior_n: float = 10.0,
                 risk_cold_n: float = 10.0, risk_memory: float = 100.0, risk_cost: str = "busiest",
                 risk_load_days: float = 1.0, risk_cost_cap: float = 100.0,
                 risk_durations: float | None = None, risk_arrival_cost: bool = False,
                 risk_arrivals: str = DEFAULT_RISK_ARRIVALS, risk_mode: str = DEFAULT_RISK_MODE,
                 loan_ramp: int | str | None = "auto", loan_ramp_backoff: str = "reset",
                 loan_ramp_memory: int = 0, loan_ramp_evidence: str = DEFAULT_EVIDENCE,
                 loan_ramp_warmup: int = DEFAULT_WARMUP, loan_ramp_witness: str = DEFAULT_WITNESS,
                 loan_ramp_wake_days: float | None = DEFAULT_WAKE_DAYS, loan_ramp_wake_until="fit",
                 calibration: bool | str = False,
                 calibration_alpha: float = 0.1, calibration_memory: int = 288,
                 calibration_prior_days: float = 7.0, calibration_cold: str = "reserve",
                 calibration_held: bool = DEFAULT_CALIBRATION_HELD,
                 refresh_s: float = 300.0, seed: int = 0, preempt: bool = False,
                 preempt_lend: str = DEFAULT_PREEMPT_LEND,
                 preempt_yield: str = DEFAULT_PREEMPT_YIELD,
                 reserve_floor: str | None = DEFAULT_RESERVE_FLOOR,
                 rebin_pending: bool = DEFAULT_REBIN_PENDING,
                 dedicated_order: str = DEFAULT_DEDICATED_ORDER, name: str = "sia"):
        windows = _checked_inputs(forecaster, windows_s, refresh_s, name)
        self.forecaster, self.windows_s, self.refresh_s = forecaster, windows, float(refresh_s)
        self.adaptation, self.nested_reservations = bool(adaptation), bool(nested_reservations)
        self.seed, self.name = seed, name
        self.dedicated_order = check_dedicated_order(dedicated_order, name)
        self.preempt = bool(preempt)
        self.preempt_lend = check_preempt_lend(preempt_lend, name)
        self.preempt_yield = check_preempt_yield(preempt_yield, name)
        self.reserve_floor = check_reserve_floor(reserve_floor, name)
        self.rebin_pending = check_rebin_pending(rebin_pending, risk, name)
        self.perfect_information = bool(getattr(forecaster, "perfect_information", False))
        # certainty first: a job whose time limit fits a window is lendable there whatever the
        # duration prediction says (skipped when the durations are perfect: they know better,
        # e.g. of a job that ran past its limit)
        self.lend_on_limit = bool(lend_on_limit)
        perfect_d = bool(getattr(getattr(forecaster, "durations", forecaster),
                                 "perfect_information", False))
        self._use_limits = self.lend_on_limit and not perfect_d
        self.tracker = (ArrivalMissTracker(windows, lookback=lookback, max_misses=max_misses,
                                           count_load_misses=count_load_misses)
                        if self.adaptation else None)
        dmax = max_misses if duration_max_misses is None else duration_max_misses
        dlook = lookback if duration_lookback is None else duration_lookback
        # built (and so its options checked) even when off
        duration_tracker = DurationMissTracker(windows, lookback=dlook, max_misses=dmax,
                                               earn_trust=duration_earn_trust)
        self.duration_tracker = duration_tracker if self.adaptation and adapt_durations else None
        # window k admits bin b iff the bin's upper edge <= w_k: kmin[b] = first such k
        upper = np.array((*DURATION_BIN_EDGES_S, math.inf))
        self._kmin_of_bin = np.searchsorted(np.asarray(windows), upper, side="left").tolist()
        self._n_bins = len(upper)
        # the risk budget (risk.py) replaces the bin rule and lend_risk when set
        d_risk = _duration_risk(risk, risk_durations, name)
        self.risk_budget = None if d_risk is None else RiskBudget(
            windows, d_risk, perfect_durations=perfect_d,
            level=risk_level, prior_n=risk_prior_n, cold_n=risk_cold_n, memory=risk_memory,
            load_days=risk_load_days, cost_cap=risk_cost_cap, cost_mode=risk_cost, name=name)
        self.risk = None if risk is None else float(risk)
        # the loan ramp (ramp.py): a cap on each pool's unproven loans per window
        loan_ramp = _ramp_cap(loan_ramp, perfect_d, name)
        self.loan_ramp = None if loan_ramp is None else LoanRamp(
            loan_ramp, backoff=loan_ramp_backoff, memory=loan_ramp_memory,
            evidence=loan_ramp_evidence, warmup=loan_ramp_warmup, witness=loan_ramp_witness,
            wake_days=loan_ramp_wake_days, wake_until=loan_ramp_wake_until, name=name)
        self.risk_mode = check_risk_mode(risk_mode, risk, name)
        self._veto = self.risk_mode == "veto"  # the budget only vetoes the rule's loans
        self.lend_risk = (None if risk is not None and not self._veto
                          else _lend_risk(lend_risk, forecaster, tuple(windows), name))
        self._arrival_cost = risk_arrival_cost  # (checked in _check_arrival_cost)
        self._calibrate(calibration, risk_arrivals, alpha=calibration_alpha,
                        memory=calibration_memory, prior_days=calibration_prior_days,
                        cold=calibration_cold, held=bool(calibration_held))
        self.stats: dict[str, Any] = {}

    def _calibrate(self, calibration: bool | str, risk_arrivals: str, **options: Any) -> None:
        """Turn on the per-pool calibration of the arrival side (models/calibration.py) in the
        forecasters that offer it: the learned one, or the arrival / load source of a mixed one
        (``options``: alpha, memory, prior_days, cold; checked there); and set the risk
        budget's arrival side (:func:`arrival_side`), which may turn the calibration on."""
        if calibration not in (True, False, "both", "arrivals", "load"):
            raise ConfigError(f"policy {self.name!r}: calibration must be true, false, "
                              f"'arrivals' or 'load', not {calibration!r}")
        side = arrival_side(self.forecaster, self.risk, risk_arrivals, self.name)
        self.risk_arrivals, self._arrival_side = risk_arrivals, side
        self._arrivals_unbounded = side == "reserve"
        if side == "calibrate":  # the budget sets the miss rate (calibration_alpha unused)
            calibration = calibration or True
            options["alpha"] = self.risk / (1.0 + self.risk)
            if self._veto:  # never reserve less than SIA's own (registered) predictions
                options["floor"] = True
        # the sources whose registered answers SIA's adaptation scores under the floor (None:
        # it scores the answers the reservations use)
        fc = self.forecaster
        self._floor_sources = ((getattr(fc, "arrivals", fc), getattr(fc, "load", fc))
                               if side == "calibrate" and self._veto else None)
        parts = "both" if calibration is True else calibration
        self.calibration = parts or False
        self._calibrated: list[Any] = []
        if self.calibration:
            fc = self.forecaster
            for src in (fc, getattr(fc, "arrivals", None), getattr(fc, "load", None)):
                cal = getattr(src, "calibrate", None)
                if callable(cal) and all(src is not s for s in self._calibrated):
                    cal(self.windows_s, parts=parts, name=self.name, **options)
                    self._calibrated.append(src)
        self._check_arrival_cost(side)

    def _check_arrival_cost(self, side: str) -> None:
        """Check ``risk_arrival_cost``: it needs the budget's calibrated arrival side, and every
        calibrated source must take per-pool miss rates (``set_pool_alpha``)."""
        if not isinstance(self._arrival_cost, bool):
            raise ConfigError(f"policy {self.name!r}: risk_arrival_cost must be true or false, "
                              f"not {self._arrival_cost!r}")
        if not self._arrival_cost:
            return
        if side != "calibrate":
            raise ConfigError(f"policy {self.name!r}: risk_arrival_cost needs the budget's "
                              f"calibrated arrival side (risk > 0, risk_arrivals: calibrated, "
                              f"a forecaster that calibrates), not {side!r}")
        for src in self._calibrated:
            if not callable(getattr(src, "set_pool_alpha", None)):
                raise ConfigError(f"policy {self.name!r}: risk_arrival_cost needs per-pool miss "
                                  f"rates, which {type(src).__name__} does not take")

    # ------------------------------------------------------------------ life cycle
    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Prepare for a replay of ``trace``: per-pool queues of lendable jobs, counters."""
        P, K = trace.n_pools, len(self.windows_s)
        self._trace = trace
        self._P = P
        self._gpus = trace.num_gpus.tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()
        self._seen = 0  # jobs admitted (arrived) so far
        self._binned = 0  # jobs whose duration bin was asked for
        self._rebin: list[int] = []  # readmitted jobs below _binned that were never binned
        self._started = bytearray(trace.n_jobs)
        self._pend_gpus = [0] * P  # GPUs of each pool's pending jobs
        self._owed_since = [-1.0] * P  # dedicated_order "fresh": when each pool's debt began
        # reserve_floor: per pool, the GPUs of its last submitted job (the prior history's
        # before the replay's first; 0: none known), each pool's floor ("last_width") or the
        # widths one margin covers ("margin")
        self._widths: list[int] | None = self._prior_width(trace) if self.reserve_floor else None
        self._floor = self._widths if self.reserve_floor == "last_width" else None
        self._margin_widths = self._widths if self.reserve_floor == "margin" else None
        # per pool and window: jobs whose predicted bin fits the window, arrival order; under
        # the risk budget one list per window and risk bin (index k * NEVER + bin), so a scan
        # never walks the jobs that the budget does not allow
        L = K * NEVER if self.risk_budget is not None else K
        self._elig: list[list[list[int]]] = [[[] for _ in range(L)] for _ in range(P)]
        self._head = [[0] * L for _ in range(P)]  # first possibly-pending entry
        self._fail = [[NO_FAIL] * L for _ in range(P)]  # (usable, length) of the last miss
        self._checked_shape = False
        self._kmin_job: dict[int, int] = {}  # job -> first window its predicted bin fits
        # rebin_pending: per pool, its completions and the time at its last re-prediction
        self._rb_done, self._rb_time = [0] * P, [-math.inf] * P
        self._tnl: list[list[float]] = []
        self._tnl_time = -math.inf
        # lend_window (spare.py): bins of jobs asked about before SIA binned them; a forecast
        # made for the questions at one instant, (now, TotalNewLoad [window][pool])
        self._probe_bins: dict[int, tuple[int, int]] = {}
        self._probe_tnl: tuple[float, list] | None = None
        self._arrival_frac: list[float] | None = None  # set_arrival_share; None: all here
        if self.tracker is not None:
            self.tracker.reset(trace)
        if self.duration_tracker is not None:  # preemptible jobs: scored at their end only
            self.duration_tracker.reset(trace, getattr(cluster, "preemptible", None))
        if self.risk_budget is not None:
            self.risk_budget.reset(trace)
        if self.loan_ramp is not None:
            self.loan_ramp.reset(P, K, None if self.lend_risk is None else self.lend_risk.tolist(),
                                 last_submit=self._prior_last_submit(trace),
                                 windows=self.windows_s)
            self._wakes = self.loan_ramp.wake_days is not None
        self._sure_job: dict[int, int] = {}  # job -> first window its time limit guarantees
        self._held: list[int] = []  # evicted on cells by the last decision (dedicated.py)
        # every pool distrusted in every window (reserving its unused quota) when the risk
        # budget has no bound on the arrivals (arrival_side "reserve"), else None (spare.py)
        self._all_distrusted = ([[True] * K for _ in range(P)] if self._arrivals_unbounded
                                else None)
        self.stats = dict(decisions=0, forecasts=0, dedicated=0, opportunistic=0)
        self.served = ServedPredictions(self.windows_s)  # written only: never read by a decision
        self.served.reset(trace)
        self._arrive = np.zeros((P, K), dtype=bool)  # the last forecast's WillJobsArrive
        self._distrusted_forecasts = 0
        self._duration_distrusted = 0
        self._cells = cluster if getattr(cluster, "cell_aware", False) else None
        self._preempt = bool(self._cells is not None and self._cells.config.preempt)
        if self._cells is not None:
            self.stats["preemptions"] = 0
        self._preempt = self._fp_reset(trace, cluster) or self._preempt  # fungible: preempt.py

    @property
    def growable(self) -> bool:
        """True when :meth:`grow` can take new jobs: fungible GPUs, and a forecaster whose
        every part has a ``grow`` hook (the learned one, the perfect one; not the random
        strawmen, whose draws follow the arrays)."""
        return getattr(self, "_cells", None) is None and _forecaster_grows(self.forecaster)

    def grow(self, trace: TraceArrays, cluster: Cluster, n_old: int) -> bool:
        """Take the jobs the live service appended to ``trace`` after index ``n_old`` (none has
        arrived; :meth:`TraceArrays.grow`): extend every per-job list and array as
        :meth:`reset` would have made them for these jobs, in the policy, its trackers, its
        risk budget, its record of predictions and its forecaster. False (the service then
        rebuilds) when it cannot: see :attr:`growable`."""
        if not self.growable or not self.forecaster.grow(trace, n_old):
            return False
        k = trace.n_jobs - n_old
        self._gpus.extend(trace.num_gpus[n_old:].tolist())
        self._pool.extend(trace.pool[n_old:].tolist())
        self._started.extend(bytes(k))
        mask = getattr(cluster, "preemptible", None)
        if self.duration_tracker is not None:
            self.duration_tracker.grow(trace, n_old, None if mask is None else mask[n_old:])
        if self.risk_budget is not None:
            self.risk_budget.grow(trace)
        self.served.grow(trace, n_old)
        if self._fp_on:
            self._fp_mask.extend([False] * k if mask is None else mask[n_old:].tolist())
        return True

    # ------------------------------------------------------------------ helpers
    def _prior_last_submit(self, trace: TraceArrays) -> list[float] | None:
        """Per pool, its last submission before the replay (s on the replay's clock; NaN when
        unknown), from the forecaster's prior history when it has one."""
        last = getattr(self.forecaster, "last_submit_s", None)
        return None if not callable(last) else [float(x) for x in last(trace.pool_names)]

    def _prior_width(self, trace: TraceArrays) -> list[int]:
        """Per pool, the GPUs of its last job before the replay, from the forecaster's prior
        history when it has one (0 when unknown)."""
        last = getattr(self.forecaster, "last_width", None)
        if not callable(last):
            return [0] * trace.n_pools
        return [0 if not math.isfinite(w) else int(w) for w in last(trace.pool_names)]

    def _admit(self, view: SimView) -> None:
        hi = view.n_arrived
        if hi > self._seen:
            pend, gpus, pool = self._pend_gpus, self._gpus, self._pool
            for j in range(self._seen, hi):
                pend[pool[j]] += gpus[j]
            if self._widths is not None:
                for j in range(self._seen, hi):
                    self._widths[pool[j]] = gpus[j]
            if self.loan_ramp is not None and self._wakes:
                submit, ramp = self._trace.submit, self.loan_ramp
                for j in range(self._seen, hi):
                    ramp.arrived(pool[j], float(submit[j]))
            self._seen = hi

    def _bin_new(self, view: SimView) -> None:
        """Predict the duration bins of the jobs arrived since the last call (one batched call)."""
        lo, hi = self._binned, self._seen
        started = self._started
        rebin = [j for j in self._rebin if not started[j] and j not in self._kmin_job]
        self._rebin = []
        if hi <= lo and not rebin:
            return
        jobs = rebin + [j for j in range(lo, hi) if not started[j]]
        self._binned = max(lo, hi)
        if not jobs:
            return
        arr = np.array(jobs, dtype=np.int64)
        K = len(self.windows_s)
        sure = self._kmin_guaranteed(arr)
        cdf = None
        if self.risk_budget is not None:
            cdf = self._cdf(view, arr)
            bins = self.risk_budget.classify_rows(jobs, cdf, sure)  # (lists: no numpy per job)
            if self._veto:  # not lendable below the rule's first window (the budget still
                # scores every considered job by its own bin)
                rule = self._kmins_of(view, arr, sure, cdf).tolist()
                bins = [[NEVER if k < r else b for k, b in enumerate(row)]
                        for row, r in zip(bins, rule, strict=True)]
            # the first window with a bin lendable at some budget (K: none); the budget decides
            # per decision
            kmins = np.array([next((k for k, b in enumerate(r) if b < NEVER), K) for r in bins],
                             dtype=np.int64)
        else:
            kmins, cdf = self._kmins(view, arr, sure)
        pool, elig = self._pool, self._elig
        fail = self._fail
        kmin_job = self._kmin_job
        if self.duration_tracker is not None:
            self.duration_tracker.predicted(arr, kmins)
        self.served.considered(arr, kmins, cdf, guaranteed=sure)
        if sure is not None and self.loan_ramp is not None:  # certain loans skip the ramp
            self._sure_job.update((j, s) for j, s in zip(jobs, sure.tolist(), strict=True)
                                  if s < K)
        if self.risk_budget is not None:
            for i, (j, km) in enumerate(zip(jobs, kmins.tolist(), strict=True)):
                p = pool[j]
                kmin_job[j] = km
                lists = elig[p]
                for k in range(km, K):
                    b = bins[i][k]
                    if b < NEVER:
                        lists[k * NEVER + b].append(j)
                        fail[p][k * NEVER + b] = NO_FAIL
            return
        for j, km in zip(jobs, kmins.tolist(), strict=True):
            p = pool[j]
            kmin_job[j] = km
            lists = elig[p]
            for k in range(km, K):
                lists[k].append(j)
                fail[p][k] = NO_FAIL

    def _kmins(self, view: SimView, arr: np.ndarray, sure: np.ndarray | None,
               now: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """Without the risk budget: each job's first window by its prediction (K: none) and
        the P(duration <= w) it came from (None under the bin rule); ``now``: predicted again
        with the forecaster's ``duration_cdf_now`` when it has one."""
        if self.lend_risk is None:
            return self._kmins_of(view, arr, sure), None
        again = getattr(self.forecaster, "duration_cdf_now", None) if now else None
        cdf = (self._cdf(view, arr) if not callable(again) else
               self._checked_cdf(np.asarray(again(view, arr, self.windows_s), dtype=np.float64),
                                 arr))
        return self._kmins_of(view, arr, sure, cdf), cdf

    def _kmins_of(self, view: SimView, arr: np.ndarray, sure: np.ndarray | None,
                  cdf: np.ndarray | None = None) -> np.ndarray:
        """Return each job's first window by SIA's own rule (K: none): its predicted bin's
        (the bin rule), or the first w with P(duration <= w) >= 1 - eps_w from ``cdf``
        (``lend_risk``); a time limit that fits (``sure``) counts as certain."""
        K = len(self.windows_s)
        if self.lend_risk is None:
            kmins = np.asarray(self._kmin_of_bin)[self._bins(view, arr)]
            return kmins if sure is None else np.minimum(kmins, sure)
        if sure is not None:  # a limit that fits w makes P(duration <= w) = 1
            cdf = np.where(np.arange(K)[None, :] >= sure[:, None], 1.0, cdf)
        # risk-aware: the first window w with P(duration <= w) >= 1 - eps_w (K: never)
        ok = cdf >= 1.0 - self.lend_risk[None, :]
        return np.where(ok.any(axis=1), np.argmax(ok, axis=1), K)

    def _rebin_pending(self, view: SimView) -> None:
        """``rebin_pending``: predict again the pending jobs (the first :data:`REBIN_MAX` of
        each pool) of the pools that completed a job since their last re-prediction, at most
        once per ``refresh_s`` per pool, and make each lendable in the windows its new
        prediction fits (never in fewer: a job's first prediction still counts)."""
        now, counts = view.now, view.completed_counts()
        done, when, kmin_job = self._rb_done, self._rb_time, self._kmin_job
        jobs: list[int] = []
        for p in range(self._P):
            if self._pend_gpus[p] and counts[p] > done[p] and now - when[p] >= self.refresh_s:
                done[p], when[p] = counts[p], now
                jobs.extend(j for j in view.pending(p)[:REBIN_MAX] if kmin_job.get(j, 0) > 0)
        if not jobs:
            return
        arr = np.array(jobs, dtype=np.int64)
        kmins, _ = self._kmins(view, arr, self._kmin_guaranteed(arr), now=True)
        pool, elig, head, fail = self._pool, self._elig, self._head, self._fail
        moved = 0
        for j, km in zip(jobs, kmins.tolist(), strict=True):
            old = kmin_job[j]
            if km >= old:
                continue
            p = pool[j]
            kmin_job[j] = km
            moved += 1
            for k in range(km, old):  # arrival order, after the list's started prefix
                lst = elig[p][k]
                lst.insert(max(bisect_left(lst, j), head[p][k]), j)
                fail[p][k] = NO_FAIL
        self.stats["rebinned"] = self.stats.get("rebinned", 0) + moved

    def _cdf(self, view: SimView, arr: np.ndarray) -> np.ndarray:
        """Return P(duration <= w) [jobs, windows] of ``arr``, checked (0/1 from the predicted
        bins when the forecaster gives no probabilities)."""
        if callable(getattr(self.forecaster, "duration_cdf", None)):
            cdf = np.asarray(self.forecaster.duration_cdf(view, arr, self.windows_s),
                             dtype=np.float64)
        else:
            cdf = cdf_from_bins(self._bins(view, arr), self.windows_s)
        return self._checked_cdf(cdf, arr)

    def _checked_cdf(self, cdf: np.ndarray, arr: np.ndarray) -> np.ndarray:
        """Return ``cdf`` after checking its shape [jobs, windows] (SiaError naming it)."""
        K = len(self.windows_s)
        if cdf.shape != (arr.size, K):
            raise SiaError(f"policy {self.name}: forecaster returned duration_cdf of shape "
                           f"{cdf.shape}, expected [jobs, windows] = {(arr.size, K)}")
        return cdf

    def _kmin_guaranteed(self, arr: np.ndarray) -> np.ndarray | None:
        """Return, per job of ``arr``, the first window its time limit guarantees it fits
        (``limit + TIME_LIMIT_GRACE_S <= w``; K: none), or None when no guarantee is used (the
        trace has no limits, ``lend_on_limit`` is off, or the durations are perfect anyway)."""
        limit = self._trace.time_limit
        if limit is None or not self._use_limits:
            return None
        # the grace is trace time, like the limit: divided by the replay's speed-up
        fits = limit_certain(limit[arr], self.windows_s, TIME_LIMIT_GRACE_S / self._trace.speedup)
        return np.where(fits.any(axis=1), np.argmax(fits, axis=1), len(self.windows_s))

    def _bins(self, view: SimView, arr: np.ndarray) -> np.ndarray:
        """Return the forecaster's duration bins of ``arr``, checked."""
        bins = np.asarray(self.forecaster.duration_bins(view, arr))
        if bins.shape != arr.shape:
            raise SiaError(f"policy {self.name}: forecaster returned {bins.shape} duration bins "
                           f"for {arr.size} jobs")
        if bins.size and (int(bins.min()) < 0 or int(bins.max()) >= self._n_bins):
            raise SiaError(f"policy {self.name}: forecaster returned duration bins outside "
                           f"0..{self._n_bins - 1}: {sorted(set(bins.tolist()))[:5]}")
        return bins

    def _first_fit(self, q: int, k: int, usable: float, maxbin: int = NEVER) -> int:
        """Return pool q's first pending job lendable in window k with GPUs <= usable (and, under
        the risk budget, a bin <= maxbin in window k; maxbin NEVER: any bin), else -1."""
        if self.risk_budget is None:
            return self._scan(q, k, usable)
        best = -1
        base = k * NEVER
        for b in range(min(maxbin, NEVER - 1) + 1):  # arrival order = job index order
            j = self._scan(q, base + b, usable)
            if j >= 0 and (best < 0 or j < best):
                best = j
        return best

    def _first_sure(self, q: int, k: int, usable: float) -> int:
        """Return pool q's first pending job lendable in window k with GPUs <= usable whose
        time limit guarantees window k, else -1 (what a pool the loan ramp holds back may
        still lend: a certain loan cannot overrun)."""
        sure, started, gpus = self._sure_job, self._started, self._gpus
        lst = self._elig[q][k]
        for i in range(self._head[q][k], len(lst)):
            j = lst[i]
            if not started[j] and gpus[j] <= usable and sure.get(j, k + 1) <= k:
                return j
        return -1

    def _scan(self, q: int, k: int, usable: float) -> int:
        """Return the first pending job of pool q's lendable list k with GPUs <= usable, else -1."""
        lst = self._elig[q][k]
        n = len(lst)
        fu, fn = self._fail[q][k]
        if fn == n and usable <= fu:
            return -1  # nothing was added and nothing fitted a larger usable
        started = self._started
        h = self._head[q][k]
        while h < n and started[lst[h]]:
            h += 1
        if h > 256 and 2 * h > n:
            del lst[:h]
            n -= h
            h = 0
            self._fail[q][k] = NO_FAIL
        self._head[q][k] = h
        gpus = self._gpus
        dead = 0
        for i in range(h, n):
            j = lst[i]
            if started[j]:
                dead += 1
            elif gpus[j] <= usable:
                return j
        if dead > 64:
            lst[h:] = [j for j in lst[h:] if not started[j]]
            n = len(lst)
        # lists only grow by appends (which clear this); removals only remove candidates
        self._fail[q][k] = (usable, n)
        return -1

    def _forecast(self, view: SimView) -> np.ndarray:
        """Return TotalNewLoad [pools, windows] in GPUs (one batched call per predictor)."""
        fc, W = self.forecaster, self.windows_s
        if self._arrival_cost:
            self._set_arrival_alpha(float(view.now))
        arrive = np.asarray(fc.will_jobs_arrive(view, W), dtype=bool)
        load = np.asarray(fc.new_load_estimate(view, W), dtype=np.float64)
        if not self._checked_shape:
            want = (self._P, len(W))
            if arrive.shape != want or load.shape != want:
                raise SiaError(
                    f"policy {self.name}: forecaster answers have shapes {arrive.shape} and "
                    f"{load.shape}, expected [pools, windows] = {want}")
            self._checked_shape = True
        self._arrive = arrive
        if self._calibrated:  # a cold pool's bound is +inf: its quota reserves the same
            load = np.where(np.isfinite(load), load, np.asarray(self._quota, dtype=np.float64)[:, None])
        tnl = self._total_new_load(arrive, load)
        # what the online adaptation scores: SIA's own TotalNewLoad under the veto's floor (a
        # larger calibrated answer would hide the misses that make it distrust a pool)
        self._tnl_adapt = tnl if self._floor_sources is None else self._registered_tnl()
        self.stats["forecasts"] += 1
        return tnl

    def _set_arrival_alpha(self, now: float) -> None:
        """``risk_arrival_cost``: give each pool the miss rate ``risk / (risk + c_p)``, ``c_p =
        1 / (1 - load_p)`` the jobs a miss in pool ``p`` delays (its recent load, as the
        duration side's cost; at most ``risk_cost_cap``). At ``c_p = 1`` it is the budget's
        one rate, ``risk / (1 + risk)``; a busier pool gets a smaller one."""
        cost = self.risk_budget.pool_costs(now)
        alpha = self.risk / (self.risk + cost)
        for src in self._calibrated:
            src.set_pool_alpha(alpha)

    def registered_answers(self, *, required: bool = False
                           ) -> tuple[np.ndarray, np.ndarray] | None:
        """Return the registered (uncalibrated) WillJobsArrive and NewLoadEstimate answers
        [pools, windows] of the forecaster's last call when the budget floors its calibrated
        answers at them (``risk_mode`` veto with calibrated arrivals), else None: then the
        forecaster's answers are the registered ones, or the calibration replaces them. A
        floored source that kept none is None too, or with ``required`` a SiaError naming it."""
        if self._floor_sources is None:
            return None
        kept = []
        for src, attr in zip(self._floor_sources, ("registered_arrive", "registered_load"),
                             strict=True):
            value = getattr(src, attr, None)
            if value is None:
                if required:
                    raise SiaError(f"policy {self.name}: {type(src).__name__} was calibrated "
                                   f"with a floor (risk_mode veto) but keeps no {attr}")
                return None
            kept.append(value)
        return np.asarray(kept[0], dtype=bool), np.asarray(kept[1], dtype=np.float64)

    def _registered_tnl(self) -> np.ndarray:
        """Return the TotalNewLoad of the registered answers that the floored sources kept at
        their last call (:meth:`registered_answers`; a SiaError when a source keeps none)."""
        return self._total_new_load(*self.registered_answers(required=True))

    def _total_new_load(self, arrive: np.ndarray, load: np.ndarray) -> np.ndarray:
        """Return TotalNewLoad [pools, windows]: the load where an arrival is predicted (running
        max over the windows with ``nested_reservations``)."""
        tnl = np.where(arrive, np.maximum(load, 0.0), 0.0)
        return np.maximum.accumulate(tnl, axis=1) if self.nested_reservations else tnl

    # ------------------------------------------------------------------ decision
    def decide(self, view: SimView) -> list[Start]:
        """Return the dedicated starts (Figure 7), then the opportunistic ones (Figure 8)."""
        self._admit(view)
        if self.dedicated_order == "fresh":  # before any early return: a debt begins anyway
            self._note_debts(view)
        rb = self.risk_budget
        if rb is not None and view.now >= rb.next_due:  # (before it: nothing to take in)
            rb.resolve(view.now)
        free = view.free_gpus
        if not any(self._pend_gpus) or (free <= 0 and not (self._preempt and (
                self._fp_can_reclaim() if self._fp_on else self._cells.preemptible_running()))):
            return []
        self.stats["decisions"] += 1
        d = Decision(free, view.used_dedicated.tolist(), view.allocation.tolist())
        self._allocate_dedicated(view, d)  # Figure 7: dedicated resources, strict FCFS per pool
        if self._fp_on:  # fungible preemption: Figure 8 sees evictable loans as idle (preempt.py)
            self._fp_allocate_spare(view, d)
        elif d.free > 0:
            self._allocate_spare(view, d)  # Figure 8: spare resources, window by window
        if self.risk_budget is not None and d.starts:
            self.risk_budget.started(view.now, [s.job for s in d.starts if type(s) is Start])
        return d.starts

    # ------------------------------------------------------------------ locality helpers
    def _reserve_cells(self, view: SimView, res: list, pools) -> bool:
        """Reserve ``res[p]`` GPUs of cells for each pool in ``pools``; False if one is pending."""
        cells, gpus, started = self._cells, self._gpus, self._started
        for p in pools:
            if res[p] <= _EPS:
                cells.clear_reservations(p)
                continue
            widths = [gpus[j] for j in view.pending(p) if not started[j]]
            if not cells.reserve(p, cells.reservation_widths(res[p], widths, p)):
                return False
        return True

    def _recoverable(self, starts: list) -> int:
        """GPUs of running preemptible opportunistic jobs (not preempted in this decision)."""
        gone = {s.job for s in starts if type(s) is Preempt}
        return sum(self._gpus[v] for v in self._cells.preemptible_running() if v not in gone)

    def refused(self, jobs: list[int]) -> None:
        """Put starts the placer stage refused back among the pending and lendable jobs (on
        cells it refuses none: every start got its cell from can_place or preempt_for)."""
        for j in jobs:
            self._requeue(j)

    def withdraw(self, jobs: list[int]) -> None:
        """Forget pending jobs another scheduler started (global scheduling across regions runs
        a waiting job in another region): they leave this policy's pending load and lendable
        lists for good. Harmless for a job not yet admitted: its admission adds back what
        this takes."""
        started, pend, pool, gpus = self._started, self._pend_gpus, self._pool, self._gpus
        for j in jobs:
            if not started[j]:
                started[j] = 1
                pend[pool[j]] -= gpus[j]

    def readmit(self, jobs: list[int]) -> None:
        """Take back pending jobs this policy withdrew (global reservations move a waiting job
        between regions): each becomes pending here again with its pending load and, once its
        duration bin is known, its lendable lists, as if never withdrawn. A job that was never
        withdrawn is left as it is."""
        started, pend, pool, gpus = self._started, self._pend_gpus, self._pool, self._gpus
        for j in jobs:
            if not started[j]:
                continue
            if j >= self._seen:  # withdrawn before its admission: undo the withdrawal only
                started[j] = 0
                pend[pool[j]] += gpus[j]
            elif j in self._kmin_job or j >= self._binned:
                self._requeue(j)  # binned already, or binned by the next _bin_new
            else:  # admitted and withdrawn before it was binned: bin it at the next decision
                self._requeue(j)
                self._rebin.append(j)

    def set_quota(self, quota: list[int]) -> None:
        """Use ``quota`` (GPUs per pool) from the next decision on (global reservations move a
        pool's share between regions; running jobs keep what they hold)."""
        self._quota[:] = [int(q) for q in quota]
        if self.risk_budget is not None:  # its loads are per GPU of quota
            self.risk_budget._quota = np.maximum(np.asarray(quota, dtype=np.float64), 1.0)

    def set_arrival_share(self, frac: list[float] | None) -> None:
        """The part of each pool's predicted new arrivals (TotalNewLoad) to reserve here, from
        the next decision on (None: all of it, as on one cluster). Global reservations split a
        pool's quota over regions and every region's forecaster predicts the pool's global
        arrivals; reserving them in full in each region holding unused share of the pool
        reserved the same arrivals once per region (docs/results/regions.md). The reservation
        becomes ``min(pending + frac * TotalNewLoad, unused quota)``."""
        self._arrival_frac = None if frac is None else [float(f) for f in frac]

    def _requeue(self, j: int) -> None:
        """Put a preempted (or refused) job back among the pending and lendable jobs."""
        self._started[j] = 0
        p = self._pool[j]
        self._pend_gpus[p] += self._gpus[j]
        if self.loan_ramp is not None:  # an evicted loan proves nothing either way
            self.loan_ramp.forget(j, p)
        kmin = self._kmin_job.get(j, len(self.windows_s))  # unbinned: dedicated only
        rb = self.risk_budget
        for i, lst in enumerate(self._elig[p]):
            k, b = divmod(i, NEVER) if rb is not None else (i, -1)
            if k >= kmin and (rb is None or rb.job_bin[k][j] == b) and j not in lst:
                lst.insert(bisect_right(lst, j), j)  # keep arrival order
            self._head[p][i] = 0
            self._fail[p][i] = NO_FAIL

    def summary(self) -> dict[str, Any]:
        """Return the replay's counters: decisions, forecasts, starts, adaptation records/misses."""
        out = dict(self.stats)
        if self.tracker is not None:
            out["adaptation_records"] = self.tracker.n_records
            out["adaptation_misses"] = int(self.tracker.miss_counts().sum())
            out["forecasts_with_distrust"] = self._distrusted_forecasts
        if self.duration_tracker is not None:
            out["duration_outcomes"] = self.duration_tracker.n_outcomes
            out["duration_misses"] = int(self.duration_tracker.miss_counts().sum())
            out["decisions_with_duration_distrust"] = self._duration_distrusted
        if self.risk_budget is not None:
            out.update({f"risk_{k}": v for k, v in self.risk_budget.summary().items()})
        return out

    def facts(self) -> dict[str, Any]:
        """Return what the replay reports about the policy: ``served``, its predictions as it used
        them, scored against the trace after the fact (:mod:`sia.scheduler.core.served`)."""
        out = {"served": self.served.report()}
        if self.risk_budget is not None:
            out["risk"] = {**self.risk_budget.summary(), "arrival_side": self._arrival_side,
                           "mode": self.risk_mode}
        if self.loan_ramp is not None:
            out["loan_ramp"] = dict(self.loan_ramp.stats)
        if getattr(self, "_fp_on", False):  # fungible preemption: loans and evictions by reason
            out["preemption"] = {k: self.stats[k] for k in
                                 ("preemptible_loans", "preemptions", "preemptions_for_owners")}
        for src in self._calibrated:  # what was calibrated per pool (the last state)
            rep = src.calibration_report()
            if rep is not None:
                out["calibration"] = rep
        return out


def _forecaster_grows(forecaster: Any) -> bool:
    """True when ``forecaster`` (and each part of a mixed one) has a ``grow`` hook."""
    if not callable(getattr(forecaster, "grow", None)):
        return False
    parts = getattr(forecaster, "parts", None)
    return all(_forecaster_grows(p) for p in parts()) if callable(parts) else True


def arrival_side(forecaster: Any, risk: float | None, mode: str, name: str) -> str:
    """What the risk budget does with the arrival side (WillJobsArrive, NewLoadEstimate).

    ``"as_is"``: SIA's reservations and online adaptation as without the budget: ``risk``
    unset, or the arrival and load sources are perfect information (nothing to bound), or
    ``mode`` ``"predicted"`` with ``risk > 0``. ``"reserve"``: every pool reserves its whole
    unused quota in every window (so Figure 8 lends nothing): ``risk = 0`` with sources that
    are not certain (``risk=0`` lends only on certainty, of the owners' arrivals too), or
    ``mode`` ``"calibrated"`` with a source that cannot calibrate (a random strawman: no
    bound). ``"calibrate"``: ``mode`` ``"calibrated"`` with ``risk > 0``: per-pool
    calibration of both predictions (:mod:`sia.models.calibration`) at miss rate
    ``risk / (1 + risk)`` (<= ``risk``): each pool's reservation covers its arrivals in the
    window except with at most that probability."""
    if mode not in RISK_ARRIVALS:
        raise ConfigError(f"policy {name!r}: risk_arrivals must be one of "
                          f"{', '.join(RISK_ARRIVALS)}, not {mode!r}")
    if risk is None:
        return "as_is"
    srcs = (getattr(forecaster, "arrivals", forecaster), getattr(forecaster, "load", forecaster))
    if all(getattr(s, "perfect_information", False) for s in srcs):
        return "as_is"
    if risk == 0:
        return "reserve"
    if mode == "predicted":
        return "as_is"
    return "calibrate" if all(callable(getattr(s, "calibrate", None)) for s in srcs) else "reserve"


def _ramp_cap(loan_ramp: Any, perfect_durations: bool, name: str) -> Any:
    """Return the loan ramp's initial cap: ``"auto"`` is DEFAULT_LOAN_RAMP unless the durations
    are perfect (they never overrun: None, off); any other value as given (LoanRamp checks it)."""
    if not isinstance(loan_ramp, str):
        return loan_ramp
    if loan_ramp != "auto":
        raise ConfigError(f"policy {name!r}: loan_ramp must be 'auto', a whole number "
                          f"of loans >= 1 or null (off), not {loan_ramp!r}")
    return None if perfect_durations else DEFAULT_LOAN_RAMP


def _duration_risk(risk: float | None, risk_durations: Any, name: str) -> float | None:
    """Return the duration side's budget: ``risk_durations`` when set (a number in [0, 100]; the
    arrival side keeps ``risk``), else ``risk`` (None: no budget)."""
    if risk_durations is None:
        return risk
    if risk is None:
        raise ConfigError(f"policy {name!r}: risk_durations={risk_durations!r} needs a risk "
                          f"budget (risk is null)")
    # the budget checks the value it is built with: here risk_durations, so risk is checked here
    if isinstance(risk, bool) or not isinstance(risk, (int, float)) or not 0.0 <= risk <= 100.0:
        raise ConfigError(f"policy {name!r}: risk must be a number in [0, 100] (expected owners' "
                          f"jobs delayed per loan), not {risk!r}")
    if isinstance(risk_durations, bool) or not isinstance(risk_durations, (int, float)) \
            or not 0.0 <= risk_durations <= 100.0:
        raise ConfigError(f"policy {name!r}: risk_durations must be a number in [0, 100] "
                          f"(owners' jobs delayed per loan) or null (= risk), "
                          f"not {risk_durations!r}")
    return float(risk_durations)


def check_risk_mode(mode: Any, risk: float | None, name: str) -> str:
    """Return ``risk_mode`` checked: one of :data:`RISK_MODES` ("replace" when ``risk`` is
    None: without a budget there is nothing to veto with)."""
    if mode not in RISK_MODES:
        raise ConfigError(f"policy {name!r}: risk_mode must be one of {', '.join(RISK_MODES)}, "
                          f"not {mode!r}")
    return "replace" if risk is None else mode


# ---------------------------------------------------------------------- registered variants
#: The registered variants that take no risk budget unless one is passed: perfect information
#: (the budget changes nothing there: every fit is certain and the arrivals are known, so it
#: would only cost time) and the paper's random strawmen (random arrivals cannot be calibrated,
#: so a budget would reserve every pool's unused quota and lend nothing: no strawman left).
#: The attribution ablations (perfect durations or arrivals) keep learned SIA's default budget.
NO_BUDGET_VARIANTS = ("sia-perfect", "sia-random", "sia-random-both")


def _lend_risk(value: Any, forecaster: Any, windows: tuple[float, ...],
               name: str) -> np.ndarray | None:
    """Return eps per window for risk-aware lending, or None for the paper's bin rule.

    ``"auto"``: the forecaster's ``lend_risk_at(windows)`` (its eps for these
    windows, chosen when its JobDuration was trained) when it answers
    ``duration_cdf``, else the bin rule. A float is the same eps for every
    window; a sequence gives one per window.
    """
    if value is None:
        return None
    n_windows = len(windows)
    has_cdf = isinstance(forecaster, DurationCdfForecaster)
    if isinstance(value, str):
        if value != "auto":
            raise ConfigError(f"policy {name!r}: lend_risk must be 'auto', a probability or one "
                              f"per window, not {value!r}")
        at = getattr(forecaster, "lend_risk_at", None) if has_cdf else None
        value = at(windows) if callable(at) else None
        if value is None:
            return None
    elif not has_cdf:
        raise ConfigError(f"policy {name!r}: lend_risk needs a forecaster with duration "
                          f"probabilities (duration_cdf); {type(forecaster).__name__} has none")
    eps = np.broadcast_to(np.asarray(value, dtype=np.float64), (n_windows,)).copy() if np.ndim(
        value) == 0 else np.asarray(value, dtype=np.float64)
    if eps.shape != (n_windows,) or not np.all((eps >= 0.0) & (eps < 1.0)):
        raise ConfigError(f"policy {name!r}: lend_risk must be in [0, 1), one value or one per "
                          f"window ({n_windows}), not {value!r}")
    return eps


class SiaPerfectPolicy(SiaPolicy):
    """SIA with perfect coarse predictions (:class:`PerfectForecaster`; perfect information)."""

    needs = PolicyNeeds(locality=True)

    def __init__(self, **options: Any):
        options.setdefault("name", "sia-perfect")
        options.setdefault("risk", None)  # (see NO_BUDGET_VARIANTS)
        super().__init__(forecaster=PerfectForecaster(), **options)


class SiaRandomPolicy(SiaPolicy):
    """SIA with WillJobsArrive ~ U{0, 1} (seeded); load and durations from ``base``.

    ``base`` defaults to :class:`PerfectForecaster`; the evaluation pipeline
    passes the learned forecaster, as in the paper's Figure 15a.
    """

    needs = PolicyNeeds(forecaster="base", seed=True, locality=True)

    def __init__(self, base: Forecaster | None = None, seed: int = 0, **options: Any):
        options.setdefault("name", "sia-random")
        options.setdefault("risk", None)  # (see NO_BUDGET_VARIANTS)
        fc = random_arrivals(base if base is not None else PerfectForecaster(), seed=seed)
        super().__init__(forecaster=fc, seed=seed, **options)


class SiaRandomBothPolicy(SiaPolicy):
    """SIA with random WillJobsArrive and random JobDuration bins; load from ``base``.

    ``base`` defaults to :class:`PerfectForecaster` (the pipeline passes the learned one).
    """

    needs = PolicyNeeds(forecaster="base", seed=True, locality=True)

    def __init__(self, base: Forecaster | None = None, seed: int = 0, **options: Any):
        options.setdefault("name", "sia-random-both")
        options.setdefault("risk", None)  # (see NO_BUDGET_VARIANTS)
        fc = random_arrivals_and_durations(base if base is not None else PerfectForecaster(),
                                           seed=seed)
        super().__init__(forecaster=fc, seed=seed, **options)


class SiaPerfectDurationsPolicy(SiaPolicy):
    """SIA with ``base``'s arrival and load predictions and perfect JobDuration bins.

    An attribution ablation (with :class:`SiaPerfectArrivalsPolicy`): how many of a
    learned SIA's slowdowns its duration predictions cause. ``base`` defaults
    to :class:`PerfectForecaster` (the pipeline passes the learned one).
    """

    needs = PolicyNeeds(forecaster="base", locality=True)

    def __init__(self, base: Forecaster | None = None, **options: Any):
        options.setdefault("name", "sia-perfect-durations")
        super().__init__(forecaster=perfect_durations(base if base is not None
                                                      else PerfectForecaster()), **options)


class SiaPerfectArrivalsPolicy(SiaPolicy):
    """SIA with perfect WillJobsArrive / NewLoadEstimate and ``base``'s JobDuration bins."""

    needs = PolicyNeeds(forecaster="base", locality=True)

    def __init__(self, base: Forecaster | None = None, **options: Any):
        options.setdefault("name", "sia-perfect-arrivals")
        super().__init__(forecaster=perfect_arrivals(base if base is not None
                                                     else PerfectForecaster()), **options)


class SiaLearnedPolicy(SiaPolicy):
    """SIA on the learned predictors (``forecaster``, required), named ``sia-learned``: the
    name SIA Figure 16 (:mod:`sia.pipelines.studies.figure16`) reports it under."""

    needs = PolicyNeeds(forecaster="forecaster", seed=True, locality=True)

    def __init__(self, forecaster: Forecaster | None = None, *, seed: int = 0, **options: Any):
        options.setdefault("name", "sia-learned")
        super().__init__(forecaster, seed=seed, **options)


class SiaPreemptPolicy(SiaPolicy):
    """Learned SIA with preemption (``preempt`` on), named ``sia-preempt``: on fungible GPUs
    :mod:`sia.scheduler.policies.sia.preempt`'s rules; on cells the locality layer's (it
    replays there with the locality option ``preempt`` on)."""

    needs = PolicyNeeds(forecaster="forecaster", seed=True, locality=True,
                        locality_requires={"preempt": True})

    def __init__(self, forecaster: Forecaster | None = None, *, seed: int = 0, **options: Any):
        options.setdefault("name", "sia-preempt")
        options.setdefault("preempt", True)
        super().__init__(forecaster, seed=seed, **options)
