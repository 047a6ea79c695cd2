"""Themis* (SIA 6.1): finish-time fairness auctions, with true durations and run to completion.

Themis (NSDI'20) gives GPUs to applications by *finish-time fairness*: an
app's ``rho = T_shared / T_independent`` compares its finish time in the
shared cluster with the finish time it would have on its own ``1/N`` share.
Whenever GPUs free up, Themis offers them to the ``1 - f`` fraction of apps
with the largest ``rho`` (``f`` is its fairness knob), the offered apps bid
with how much each allocation would lower their ``rho``, and the auction
picks the allocation that lowers the ``rho`` values the most (partial
allocation over a product of ratios). Leases expire, so allocations change
over time. SIA's Themis* is identical except that jobs run to completion
(no lease expiry, no preemption), and it gets *accurate* job durations.

Our reading, with pools as Themis' apps and a pool's quota as its
independent share (pools own unequal quotas, so the share is the quota
rather than ``1/N`` of the cluster). For a pool with allocation ``A`` GPUs
(dedicated + opportunistic), remaining work ``W`` (GPU-seconds: the rest of
its running jobs plus its pending jobs, from true durations) and longest
remaining running or pending job ``M`` seconds, its projected finish time
on ``C`` GPUs is ``T(C) = max(M, W / C)`` (infinite when ``C = 0``), and

    rho = T(A) / T(quota)

(> 1 for a pool below its share, < 1 above it). At every decision, while
GPUs are free:

1. the *bidders* are the pools with a pending job that fits the free GPUs;
   each bids its first such job in arrival order (FCFS with backfill within
   the app);
2. the offer goes to the ``ceil((1 - f) * bidders)`` bidders with the
   largest ``rho`` (ties: earlier first pending job, then pool index);
3. the winner is the offered pool whose ``rho`` falls by the largest factor
   ``rho / rho_after`` if its job starts (``rho_after`` with ``A + g`` GPUs
   and ``M`` at least the job's duration; a pool with nothing running has an
   infinite factor; ties as above); its job starts, dedicated when it fits
   the pool's unused quota, opportunistic otherwise.

Perfect information: reads true durations (as the paper gives Themis*).
"""

from __future__ import annotations

import math

import numpy as np
from sia.data.errors import ConfigError
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.needs import PolicyNeeds
from sia.scheduler.core.view import SimView, Start, TraceArrays


def finish_time(work_gpu_s: float, longest_s: float, gpus: float) -> float:
    """Return the projected finish time in seconds of ``work`` GPU-seconds on ``gpus`` GPUs.

    ``max(longest_s, work / gpus)``: no faster than the longest job, no
    faster than the work spread on all GPUs; infinite with no GPU and work left.
    """
    if gpus <= 0:
        return math.inf if work_gpu_s > 0 else 0.0
    return max(longest_s, work_gpu_s / gpus)


def fairness_ratio(work_gpu_s: float, longest_s: float, alloc: float, quota: float) -> float:
    """Return Themis' rho = T(alloc) / T(quota) for a pool (1.0 when it has no work)."""
    t_id = finish_time(work_gpu_s, longest_s, quota)
    if t_id <= 0:
        return 1.0
    return finish_time(work_gpu_s, longest_s, alloc) / t_id


class ThemisPolicy:
    """Themis* (finish-time fairness, accurate durations, run to completion); see the module doc."""

    name = "themis"
    perfect_information = True
    uses_ticks = False
    needs = PolicyNeeds(seed=True, locality=True)  # on cells, the simulator places its starts

    def __init__(self, fairness_knob: float = 0.8, seed: int = 0):
        if not 0.0 <= fairness_knob < 1.0:
            raise ConfigError(f"themis: fairness_knob f must be in [0, 1), not {fairness_knob}")
        self.fairness_knob = float(fairness_knob)
        self.seed = seed  # deterministic; accepted for a uniform interface

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Remember widths, durations and quotas."""
        self._trace = trace
        self._gpus = trace.num_gpus
        self._dur = trace.duration
        self._quota = trace.quota.tolist()
        self._P = trace.n_pools

    def decide(self, view: SimView) -> list[Start]:
        """Return the auction winners' jobs, one per round, while GPUs are free."""
        free = view.free_gpus
        if free <= 0 or not view.has_pending:
            return []
        P, quota = self._P, self._quota
        now = view.now
        run = view.running()
        rem = run.start + self._dur[run.job] - now
        work = np.bincount(run.pool, weights=rem * run.num_gpus, minlength=P)
        longest = np.zeros(P)
        if rem.size:
            np.maximum.at(longest, run.pool, rem)
        pend = {p: view.pending_array(p) for p in range(P) if view.n_pending(p)}
        for p, arr in pend.items():
            work[p] += float(self._dur[arr] @ self._gpus[arr])
            longest[p] = max(longest[p], float(self._dur[arr].max()))
        work_l, longest_l = work.tolist(), longest.tolist()
        alloc = view.allocation.tolist()
        ded = view.used_dedicated.tolist()
        taken = {p: np.zeros(arr.size, dtype=bool) for p, arr in pend.items()}
        starts: list[Start] = []
        while free > 0:
            bids = []  # (pool, position, job)
            for p, arr in pend.items():
                fits = (self._gpus[arr] <= free) & ~taken[p]
                i = int(np.argmax(fits))
                if fits[i]:
                    bids.append((p, i, int(arr[i])))
            if not bids:
                break
            rho = {p: fairness_ratio(work_l[p], longest_l[p], alloc[p], quota[p]) for p, _, _ in bids}
            first = {p: int(pend[p][~taken[p]][0]) for p, _, _ in bids}
            bids.sort(key=lambda b: (-rho[b[0]], first[b[0]], b[0]))
            n_offer = max(1, math.ceil((1.0 - self.fairness_knob) * len(bids)))
            best, best_key = None, None
            for b in bids[:n_offer]:
                p, _, j = b
                g = int(self._gpus[j])
                after = fairness_ratio(work_l[p], max(longest_l[p], float(self._dur[j])),
                                       alloc[p] + g, quota[p])
                gain = math.inf if math.isinf(rho[p]) else rho[p] / after
                key = (-gain, -rho[p], first[p], p)
                if best_key is None or key < best_key:
                    best, best_key = b, key
            p, i, j = best
            g = int(self._gpus[j])
            opp = ded[p] + g > quota[p]
            if not opp:
                ded[p] += g
            starts.append(Start(j, opp))
            taken[p][i] = True
            alloc[p] += g
            free -= g
        return starts

    def refused(self, jobs: list[int]) -> None:
        """Nothing to undo: each decision reads the pending jobs from the view afresh."""
