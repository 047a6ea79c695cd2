"""Synthetic workloads of SIA Appendix A.1 / C, seeded and deterministic.

The base workload (SIA A.1, C): ``num_pools`` = 4 pools ("queues") of 8 GPUs
each over 3 days;

* job durations bimodal: uniform in [sqrt(10), 100] minutes with probability
  0.8, uniform in [100, 1000] minutes with probability 0.2;
* job widths 1, 2, 4, 8 GPUs with probabilities 0.7, 0.1, 0.15, 0.05;
* jobs arrive in bursts; a burst's total width is uniform over the integers
  {1, ..., pool size}; the gaps between bursts are exponential (a Poisson
  process) with the rate chosen so that the *expected* offered load of the
  pool (GPU-seconds submitted per second, over the pool's GPUs) equals a
  per-pool target load drawn uniformly in [0.6, 0.95].

How a burst's total width becomes jobs (the paper does not say; this is our
reading, chosen so that *both* stated distributions hold): job widths are
drawn i.i.d. from the width distribution until their running total reaches or
passes the burst's drawn total; the last job is kept whole, never capped.
Every job width therefore stays in {1, 2, 4, 8} and, by Wald's identity (the
number of jobs is a stopping time), the long-run width frequencies are exactly
the specified probabilities; the realised total of a burst is its drawn total
plus the overshoot of its last job (at most width - 1 GPUs). Capping the last
job would create 3-, 5-, 6- and 7-GPU jobs, which the spec never has and buddy
cells cannot hold; redrawing widths that do not fit would make 8-GPU jobs
rare. The expected GPU-seconds of a burst, used to set the burst rate, is
computed exactly with this rule (see :func:`expected_burst_width`). All jobs
of a burst share its submission time. A job is never wider than its pool:
with ``pool_gpus`` < 8 the width distribution is restricted to widths that
fit and renormalised.

The variants of Appendix C differ from the base in exactly one aspect (see
:data:`VARIANTS`). The three duration distributions have (nearly) the same
mean, about 151 minutes, as the paper notes.

Randomness: one ``numpy.random.Generator`` per pool, spawned from
``SeedSequence(seed)``, and one for the target loads; pool ``q{i}`` gets the
same stream whatever the number of pools, so the "more queues" variant
extends the base workload's pools rather than redrawing them.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.data.schema import validate
from sia.data.variants import _BASE, _VARIANT_SPECS, VARIANTS, WorkloadSpec  # noqa: F401 (re-exported)

MINUTE = 60.0
DAY = 86_400.0
WIDTHS = (1, 2, 4, 8)


def variant_spec(variant: str) -> WorkloadSpec:
    """Return the :class:`WorkloadSpec` of a named variant (ConfigError if unknown)."""
    if variant not in _VARIANT_SPECS:
        raise ConfigError(
            f"unknown synthetic variant {variant!r}; choose one of: {', '.join(VARIANTS)}"
        )
    return _VARIANT_SPECS[variant][1]


def width_distribution(spec: WorkloadSpec, pool_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (widths, probabilities) restricted to widths <= ``pool_gpus``, renormalised."""
    widths = np.array(WIDTHS, dtype=np.int64)
    probs = np.array(spec.width_probs, dtype=float)
    fits = widths <= pool_gpus
    probs = probs[fits] / probs[fits].sum()
    return widths[fits], probs


def mean_duration_s(spec: WorkloadSpec) -> float:
    """Return the expected job duration of ``spec`` in seconds."""
    total_p = sum(p for p, _, _ in spec.duration_modes)
    return sum(p * (lo + hi) / 2 for p, lo, hi in spec.duration_modes) / total_p * MINUTE


def expected_burst_width(spec: WorkloadSpec, pool_gpus: int) -> float:
    """Return the expected total GPUs of one burst under the draw-until-reached rule.

    With f(r) the expected total width drawn to cover a remainder r > 0,
    f(r) = sum_w p_w (w + f(r - w)) and f(r <= 0) = 0; the burst target is
    uniform over {1, ..., pool_gpus}.
    """
    widths, probs = width_distribution(spec, pool_gpus)
    f = [0.0] * (pool_gpus + 1)
    for r in range(1, pool_gpus + 1):
        f[r] = sum(p * (w + (f[r - w] if r - w > 0 else 0.0)) for w, p in zip(widths, probs, strict=True))
    return float(np.mean(f[1:]))


def burst_rate_per_s(spec: WorkloadSpec, pool_gpus: int, load: float) -> float:
    """Return the Poisson burst rate (bursts per second) giving expected offered load ``load``."""
    work_per_burst = expected_burst_width(spec, pool_gpus) * mean_duration_s(spec)  # GPU-seconds
    return load * pool_gpus / work_per_burst


#: The most jobs a synthetic workload may be expected to hold unless told otherwise
#: (``--max-jobs``): about 180 years of the base workload (150 jobs a day), some 2 GB of jobs.
MAX_JOBS = 10_000_000


def expected_jobs(variant: str = "base", days: float = 3.0, *, num_pools: int | None = None,
                  pool_gpus: int = 8) -> float:
    """Return an upper estimate of the jobs :func:`generate_workload` draws: every pool at the
    top of its load range (jobs per second = load x GPUs / (mean duration x mean width), by
    Wald's identity), over ``days``."""
    spec = variant_spec(variant)
    n_pools = spec.num_pools if num_pools is None else int(num_pools)
    widths, probs = width_distribution(spec, pool_gpus)
    mean_width = float((widths * probs).sum())
    top = spec.load_range[1] * spec.load_factor
    per_s = top * pool_gpus / (mean_duration_s(spec) * mean_width)
    return n_pools * per_s * days * DAY


def check_size(expected: float, days: float, what: str, max_jobs: int | None) -> None:
    """Raise ConfigError when ``expected`` jobs exceed ``max_jobs`` (default :data:`MAX_JOBS`)."""
    limit = MAX_JOBS if max_jobs is None else max_jobs
    if expected > limit:
        raise ConfigError(
            f"--days {days:g}: the {what} workload would hold about {expected:,.3g} jobs, more "
            f"than the limit of {limit:,} (--max-jobs); generate fewer days, or raise "
            "--max-jobs knowingly (memory grows with the jobs: some 200 bytes each)")


def _durations_s(rng: np.random.Generator, spec: WorkloadSpec, n: int) -> np.ndarray:
    probs = np.array([p for p, _, _ in spec.duration_modes], dtype=float)
    probs = probs / probs.sum()
    mode = rng.choice(len(probs), size=n, p=probs)
    lo = np.array([lo for _, lo, _ in spec.duration_modes])[mode]
    hi = np.array([hi for _, _, hi in spec.duration_modes])[mode]
    return rng.uniform(lo, hi) * MINUTE


def _pool_jobs(rng: np.random.Generator, spec: WorkloadSpec, pool_gpus: int, load: float,
               horizon_s: float) -> dict[str, np.ndarray]:
    """Draw one pool's jobs: submit times (s), durations (s), widths and burst numbers."""
    rate = burst_rate_per_s(spec, pool_gpus, load)
    # Burst times: a Poisson process on [0, horizon_s); draw gaps in blocks until past it.
    expected = rate * horizon_s
    times: list[np.ndarray] = []
    last = 0.0
    while True:
        block = int(expected + 10 * math.sqrt(expected + 1) + 16)
        t = last + np.cumsum(rng.exponential(1.0 / rate, size=block))
        times.append(t)
        last = float(t[-1])
        if last >= horizon_s:
            break
    burst_times = np.concatenate(times)
    burst_times = burst_times[burst_times < horizon_s]
    n_bursts = burst_times.size
    targets = rng.integers(1, pool_gpus + 1, size=n_bursts)  # uniform over {1..pool_gpus}
    widths_all, probs = width_distribution(spec, pool_gpus)
    stream = widths_all[rng.choice(widths_all.size, size=int(targets.sum()), p=probs)]
    cum = np.cumsum(stream)
    # Burst j takes stream[start:end] where end is the first index whose running
    # total (since start) reaches its target.
    ends = np.empty(n_bursts, dtype=np.int64)
    start, base = 0, 0
    for j in range(n_bursts):
        end = int(np.searchsorted(cum, base + targets[j], side="left")) + 1
        ends[j] = end
        base = int(cum[end - 1])
        start = end
    n_jobs = int(start)
    counts = np.diff(np.concatenate([[0], ends]))
    burst_of_job = np.repeat(np.arange(n_bursts), counts)
    return {
        "submit_time": burst_times[burst_of_job],
        "duration": _durations_s(rng, spec, n_jobs),
        "num_gpus": stream[:n_jobs],
        "burst": burst_of_job,
    }


def generate_workload(variant: str = "base", seed: int = 0, *, days: float = 3.0,
                      num_pools: int | None = None, pool_gpus: int = 8,
                      max_jobs: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (jobs, pools) of a synthetic SIA workload.

    ``jobs`` is a canonical job table (validated; times in seconds from the
    generator's clock start 0, durations in seconds) with an extra ``burst``
    column (the burst's number within its pool). Job ids are ``p{i}-{n:06d}``
    and pools ``q0 .. q{N-1}``; ``tag`` and ``user`` are null. ``pools`` has
    ``pool``, ``quota_gpus`` (= ``pool_gpus``) and ``target_load`` (the pool's
    expected offered load, after the variant's load factor). ``num_pools``
    overrides the variant's pool count. Same arguments, same tables. A workload
    expected to hold more than ``max_jobs`` jobs (default :data:`MAX_JOBS`, see
    :func:`expected_jobs`) is a ConfigError before anything is drawn.
    """
    spec = variant_spec(variant)
    if not (math.isfinite(days) and days > 0):
        raise ConfigError(f"--days must be a finite number > 0, not {days}")
    if pool_gpus < 1:
        raise ConfigError(f"pool size must be >= 1 GPU, not {pool_gpus}")
    n_pools = spec.num_pools if num_pools is None else int(num_pools)
    if n_pools < 1:
        raise ConfigError(f"number of pools must be >= 1, not {n_pools}")
    check_size(expected_jobs(variant, days, num_pools=n_pools, pool_gpus=pool_gpus), days,
               variant, max_jobs)
    horizon_s = days * DAY
    load_seq, *pool_seqs = np.random.SeedSequence(seed).spawn(n_pools + 1)
    lo, hi = spec.load_range
    loads = np.random.default_rng(load_seq).uniform(lo, hi, size=n_pools) * spec.load_factor

    frames = []
    for i in range(n_pools):
        cols = _pool_jobs(np.random.default_rng(pool_seqs[i]), spec, pool_gpus, float(loads[i]),
                          horizon_s)
        n = cols["num_gpus"].size
        frames.append(pl.DataFrame({
            "job_id": [f"p{i}-{k:06d}" for k in range(n)],
            "pool": [f"q{i}"] * n,
            "submit_time": cols["submit_time"].astype(np.float64),
            "duration": cols["duration"].astype(np.float64),
            "num_gpus": cols["num_gpus"].astype(np.int32),
            "burst": cols["burst"].astype(np.int64),
        }, schema={"job_id": pl.String, "pool": pl.String, "submit_time": pl.Float64,
                   "duration": pl.Float64, "num_gpus": pl.Int32, "burst": pl.Int64}))
    raw = pl.concat(frames)
    jobs, _ = validate(raw, source=f"synthetic:{variant}")
    pools = pl.DataFrame({
        "pool": [f"q{i}" for i in range(n_pools)],
        "quota_gpus": [pool_gpus] * n_pools,
        "target_load": loads.astype(float),
    }, schema={"pool": pl.String, "quota_gpus": pl.Int32, "target_load": pl.Float64})
    return jobs, pools


# ----------------------------------------------------------------------------- regions
#: The multi-region workload (issue 17): (region, variant, pools, GPUs per pool). Uneven supply
#: (32, 24 and 32 GPUs) and demand: the pools of ``hot`` run the higher-load variant (x1.05 on
#: U[0.6, 0.95], on twice as many pools as ``cold``), ``cold``'s fewer, larger pools the
#: lower-load one (x0.75).
REGIONS_LAYOUT: tuple[tuple[str, str, int, int], ...] = (
    ("hot", "higher-load", 4, 8), ("mid", "base", 3, 8), ("cold", "lower-load", 2, 16))


def generate_regions_workload(seed: int = 0, *, days: float = 3.0,
                              layout: tuple[tuple[str, str, int, int], ...] = REGIONS_LAYOUT,
                              max_jobs: int | None = None,
                              ) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, str]]:
    """Return (jobs, pools, pool -> home region) of a synthetic workload over several regions.

    Each region of ``layout`` is a :func:`generate_workload` of its variant, pool count and
    pool size, seeded by its own stream spawned from ``seed``; its pools and job ids are
    prefixed with the region (``hot-q0``, ``hot-p0-000000``). Same arguments, same tables.
    """
    if not layout:
        raise ConfigError("regions layout: at least one region is needed")
    if not (math.isfinite(days) and days > 0):
        raise ConfigError(f"--days must be a finite number > 0, not {days}")
    check_size(sum(expected_jobs(v, days, num_pools=n, pool_gpus=g) for _, v, n, g in layout),
               days, "multi-region", max_jobs)
    streams = np.random.SeedSequence(seed).spawn(len(layout))
    jobs, pools, homes = [], [], {}
    for (region, variant, n_pools, gpus), stream in zip(layout, streams, strict=True):
        sub_seed = int(stream.generate_state(1)[0])
        j, p = generate_workload(variant, sub_seed, days=days, num_pools=n_pools, pool_gpus=gpus,
                                 max_jobs=max_jobs)
        prefix = pl.lit(f"{region}-")
        jobs.append(j.with_columns((prefix + pl.col("job_id")).alias("job_id"),
                                   (prefix + pl.col("pool")).alias("pool")))
        pools.append(p.with_columns((prefix + pl.col("pool")).alias("pool")))
        homes.update({f"{region}-{name}": region for name in p["pool"]})
    out, _ = validate(pl.concat(jobs).sort("submit_time", "job_id"), source="synthetic:regions")
    return out, pl.concat(pools), homes
