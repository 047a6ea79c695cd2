"""Fast-path global scheduling (MAST's GMS-scan pass with exhaustive search and a negative cache).

One pass visits the pending jobs of the global queue in priority/credit
order (:func:`queue_order`). For each job, every region that holds a
*usable* copy of its pool's data and has its hardware computes a placement
plan (:meth:`RegionScheduler.try_plan`); the plan with the best
:func:`plan_quality` wins and is committed at once (late binding: a job is
only sent to a region that can start it now); a job no region can start
waits for the next pass.

The negative cache remembers, per region and request shape (hardware,
locality, lending window), the smallest GPU count that failed in this pass; an equal or
larger request of the same shape is then skipped in that region without
asking it. It is created empty at the start of every pass and dropped at the
end. It is exact (the decisions are the same with the cache off) as long as
a region keeps the contract of :class:`RegionScheduler`: within a pass, a
request that failed keeps failing for requests of the same shape that are
equal or larger (true when a pass only consumes resources, as here).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from sia.scheduler.regions.model import RegionsError


@dataclass(frozen=True, slots=True)
class JobRequest:
    """A pending job: ``gpus`` GPUs of ``hardware`` for ``job_id`` of ``pool``.

    ``locality``: ``any`` (any machines of the region) or ``server`` (one
    machine). ``priority`` (higher first) and ``credit`` (higher first within
    a priority) order the global queue. ``window``: the job's lending class
    in a region that lends only to jobs predicted to end within a window (SIA's
    windows, shortest first; 0 otherwise): part of the request's shape, since
    such a region refuses by window as well as by GPUs.
    """

    job_id: str
    pool: str
    gpus: int
    hardware: str = "gpu"
    locality: str = "any"
    priority: int = 0
    credit: float = 0.0
    window: int = 0


@dataclass(frozen=True, slots=True)
class Plan:
    """A region's plan to start a job now: ``machines`` used, running jobs it ``preempts``.

    ``detail`` is the region's own description (e.g. GPUs per server), read
    back by its :meth:`RegionScheduler.commit`.
    """

    region: str
    job_id: str
    gpus: int
    machines: int
    preempts: int = 0
    detail: object = None


@runtime_checkable
class RegionScheduler(Protocol):
    """A region as the global pass sees it (the simulator's regional schedulers implement it).

    Contract: ``try_plan`` does not change the region; ``commit`` applies a
    plan ``try_plan`` just returned; within a pass, a request that
    ``try_plan`` refused is refused for any equal or larger request of the
    same hardware and locality (the negative cache relies on it).
    """

    name: str
    hardware: frozenset[str]
    total_gpus: int

    def free_gpus(self) -> int: ...

    def try_plan(self, request: JobRequest) -> Plan | None: ...

    def commit(self, plan: Plan) -> None: ...


def plan_quality(plan: Plan, is_home: bool, free_after: float) -> tuple:
    """Placement-quality score of a plan (compared as a tuple; higher is better).

    In order: no preemption beats preemption (fewer preempted jobs next),
    fewer machines (tighter locality), the job's home region, then the
    region left least loaded (``free_after``: free fraction of its GPUs after
    the plan).
    """
    return (-plan.preempts, -plan.machines, is_home, free_after)


@dataclass(frozen=True)
class ScanResult:
    """One pass: ``region[i]`` is the region index job i (input order) went to, -1 if it waits.

    ``attempts``: calls to ``try_plan``; ``cache_hits``: region checks the
    negative cache answered instead; ``hit_rate`` = hits / (hits + attempts);
    ``seconds`` wall time of the pass.
    """

    region: np.ndarray
    attempts: int
    cache_hits: int
    placed: int
    seconds: float

    @property
    def hit_rate(self) -> float:
        checks = self.attempts + self.cache_hits
        return self.cache_hits / checks if checks else 0.0


def queue_order(priority: Sequence[int] | np.ndarray, credit: Sequence[float] | np.ndarray) -> np.ndarray:
    """Indices of jobs in global-queue order: priority, then credit, both descending; ties by position."""
    priority = np.asarray(priority)
    credit = np.asarray(credit, dtype=float)
    return np.lexsort((np.arange(priority.size), -credit, -priority))


class NegativeCache:
    """Per pass: smallest failed GPU count per (region, shape), with hit counting.

    ``low[r, s]`` is that count (a large number when nothing failed); it only
    falls during a pass, so a job blocked once stays blocked for the rest of it.
    """

    NONE = np.iinfo(np.int64).max

    def __init__(self, n_regions: int, n_shapes: int) -> None:
        self.low = np.full((n_regions, n_shapes), self.NONE, dtype=np.int64)
        # the same numbers as Python ints for the per-job checks (numpy scalar reads cost
        # several times a list's); record() keeps both
        self._low = [[self.NONE] * n_shapes for _ in range(n_regions)]
        self.hits = 0

    def blocked(self, region: int, shape: int, gpus: int) -> bool:
        """True (and counted as a hit) if an equal or smaller request of this shape failed here."""
        if gpus >= self._low[region][shape]:
            self.hits += 1
            return True
        return False

    def record(self, region: int, shape: int, gpus: int) -> None:
        """Remember that ``gpus`` failed for this region and shape."""
        if gpus < self._low[region][shape]:
            self._low[region][shape] = gpus
            self.low[region, shape] = gpus

    def all_blocked(self, gpus: np.ndarray, shape: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Bool per job: every candidate region (``candidates`` [job, region]) is blocked for it."""
        return ((gpus[:, None] >= self.low[:, shape].T) | ~candidates).all(axis=1)


def scan_pass(
    jobs: Sequence[JobRequest],
    regions: Sequence[RegionScheduler],
    usable: np.ndarray,
    pool_index: Mapping[str, int],
    home: np.ndarray,
    *,
    use_cache: bool = True,
    chunk: int = 2048,
    vector_min: int = 64,
) -> ScanResult:
    """Run one global pass over ``jobs`` (routing and committing each); returns a :class:`ScanResult`.

    ``usable`` [pool, region] bool says which regions hold a usable copy of
    each pool's data now (``Replicas.usable(now)``), ``pool_index`` maps a
    pool name to its row, ``home`` gives each pool's home region index.
    ``regions`` are in the same order as ``usable``'s columns.

    With the cache, each ``chunk`` of jobs of the queue is first checked against it at
    once (numpy): a job whose every candidate region is blocked is skipped (counting
    one hit per region, as the per-job loop would), since blocks only grow
    during a pass. A chunk of fewer than ``vector_min`` jobs skips that check (the
    per-job loop answers the same, with the same hits; for a few jobs its numpy calls
    cost more than they save).
    """
    usable = np.asarray(usable, dtype=bool)
    if usable.ndim != 2 or usable.shape[1] != len(regions):
        raise RegionsError(f"usable: shape {usable.shape} does not have one column per region ({len(regions)})")
    if chunk < 1:
        raise RegionsError(f"chunk must be >= 1 job, got {chunk}")
    t0 = time.perf_counter()
    n = len(jobs)
    pool_of = np.fromiter((pool_index.get(j.pool, -1) for j in jobs), dtype=np.int64, count=n)
    if (pool_of < 0).any():
        bad = jobs[int(np.flatnonzero(pool_of < 0)[0])]
        raise RegionsError(f"job {bad.job_id!r}: pool {bad.pool!r} is not in the region layout")
    shapes: dict[tuple[str, str], int] = {}
    shape_of = np.fromiter((shapes.setdefault((j.hardware, j.locality, j.window), len(shapes)) for j in jobs),
                           dtype=np.int64, count=n)
    gpus = np.fromiter((j.gpus for j in jobs), dtype=np.int64, count=n)
    order = queue_order(np.fromiter((j.priority for j in jobs), dtype=np.int64, count=n),
                        np.fromiter((j.credit for j in jobs), dtype=float, count=n))
    # candidate regions per (pool, shape): usable data and the hardware
    has_hw = np.array([[hw in reg.hardware for reg in regions] for hw, *_ in shapes],
                      dtype=bool).reshape(len(shapes), len(regions))
    cand_of = pool_of * len(shapes) + shape_of
    cand_mask = (usable[:, None, :] & has_hw[None, :, :]).reshape(-1, len(regions))
    cand_lists: dict[int, tuple[int, ...]] = {}
    totals = [float(max(1, reg.total_gpus)) for reg in regions]
    cache = NegativeCache(len(regions), len(shapes))
    chosen = np.full(n, -1, dtype=np.int64)
    attempts = 0
    for lo in range(0, n, chunk):
        idx = order[lo:lo + chunk]
        if use_cache and idx.size >= vector_min:
            skip = cache.all_blocked(gpus[idx], shape_of[idx], cand_mask[cand_of[idx]])
            cache.hits += int(cand_mask[cand_of[idx[skip]]].sum())
            idx = idx[~skip]
        for i in idx.tolist():
            c = int(cand_of[i])
            cand = cand_lists.get(c)
            if cand is None:
                cand = cand_lists[c] = tuple(np.flatnonzero(cand_mask[c]).tolist())
            job, s, g, p = jobs[i], int(shape_of[i]), int(gpus[i]), int(pool_of[i])
            best = best_key = None
            for r in cand:
                if use_cache and cache.blocked(r, s, g):
                    continue
                attempts += 1
                plan = regions[r].try_plan(job)
                if plan is None:
                    if use_cache:
                        cache.record(r, s, g)
                    continue
                q = plan_quality(plan, r == home[p], (regions[r].free_gpus() - plan.gpus) / totals[r])
                if best is None or q > best_key:
                    best, best_key, chosen[i] = plan, q, r
            if best is not None:
                regions[chosen[i]].commit(best)
    return ScanResult(chosen, attempts, cache.hits, int((chosen >= 0).sum()), time.perf_counter() - t0)
