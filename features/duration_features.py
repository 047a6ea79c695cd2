"""JobDuration features: what is known about a job when it is submitted (DESIGN.md 5.3).

An incremental builder, :class:`SubmissionFeatures`, makes them online (the
scheduler's forecaster feeds it the simulator's completions and arrivals);
offline (training) :func:`submission_features` computes the same numbers for
a whole schedule at once, as feeding the builder its completions and
submissions in time order would (the tests hold the two to bit equality,
ties included), so training and serving compute the same numbers.

For a job submitted at t, with the history = the jobs *finished* by t
(``end_time <= t``; a job ending exactly at t counts), the columns are:

per history level L in ``tag``, ``user``, ``pool_gpus`` (same pool and GPU
count), ``pool``: ``L_count`` (finished jobs of the group), ``L_median_s``,
``L_q90_s`` (their median and 90th percentile duration, s), ``L_last_s``
(the duration of the group's most recently finished job, s), ``L_le5m``,
``L_le60m``, ``L_le720m`` (the share of them that ran at most 5 / 60 / 720
minutes: the group's empirical CDF at the duration-bin edges),
``L_recent_le5m``, ``L_recent_le60m``, ``L_recent_le720m`` (the same shares
over only the group's last :data:`RECENT_JOBS` finished jobs: what its users
run *now*; sweeps and failing retries come in runs of look-alike jobs, and a
pool's mix drifts over weeks). NaN when the group has no finished job (or the
job has no tag / user).

burst context: ``pool_subs_5m``, ``pool_subs_60m`` (jobs submitted to the
pool in [t - 5 min, t] / [t - 60 min, t] before this one),
``pool_same_width_60m`` (of those in the last hour, the ones with the same GPU
count), ``since_pool_sub_s`` (seconds since the pool's previous submission,
NaN for its first), ``log2_gpus``.

calendar (on the trace's own clock): ``hour_of_day`` (t mod 1 day, hours)
and ``day_of_week`` (floor(t / 1 day) mod 7).

time limit (only when the trace has limits: ``limits=True``; see
:data:`LIMIT_COLUMNS`; a trace without limits gets exactly the columns above,
so nothing changes for it): ``limit_log_s`` (natural log of the requested
limit, s), ``limit_fits_5m``, ``limit_fits_60m``, ``limit_fits_720m`` (1 when
``limit + TIME_LIMIT_GRACE_S`` is at most the window: the job is *certain* to
fit it, Slurm ends it there; else 0), the *use* of their limits (duration /
limit) by the user's finished jobs that had one: ``user_use_count``,
``user_use_median``, ``user_use_q90``, ``user_use_last`` (a user who always
runs 5% of a 12 h limit), the same pool and width's ``pool_gpus_use_median`` /
``pool_gpus_use_q90`` (for users with no history), and this job's limit
times the user's median / q90 use, ``limit_x_user_use_median_s`` /
``limit_x_user_use_q90_s`` (s: what the user's habit predicts for this
job), and ``user_use_fit_le5m`` / ``_le60m`` / ``_le720m`` (the share of the user's
finished jobs with a limit whose use, times this job's limit, is at most 5 /
60 / 720 minutes: the user's habit as this job's CDF at the bin edges) with
the same shares over the pool and width, ``pool_gpus_use_fit_le*``. All NaN for a job with no limit (and the use columns for a user or
group with no finished job with a limit; ``user_use_count`` is then 0).

Queue state (pending / running jobs of the pool) is deliberately not a
feature: in training it comes from the FCFS replay, whose queues are far
longer than those of the sharing policy that uses the predictions (on
Philly FCFS's mean queueing delay is about 100x SIA's), so a model keyed on
it would be fed values it never saw in training.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections import defaultdict, deque
from collections.abc import Hashable

import numpy as np
import polars as pl
from sia.data.errors import TraceError
from sia.data.schema import TIME_LIMIT_GRACE_S
from sia.data.windows import DURATION_BIN_EDGES_S

LEVELS: tuple[str, ...] = ("tag", "user", "pool_gpus", "pool")
_STATS: tuple[str, ...] = ("count", "median_s", "q90_s", "last_s", "le5m", "le60m", "le720m",
                           "recent_le5m", "recent_le60m", "recent_le720m")
#: How many of a group's most recently finished jobs its ``recent_le*`` shares cover. Chosen on
#: Philly's default training period (days 23-44; see the JobDuration section of the README) as
#: the best mean, over the three windows, of the ROC AUC of "fits 5 / 60 / 720 min" by the
#: pool-and-width group's share, among the last 10, 30, 50, 100 and 300 jobs (0.873, 0.875,
#: 0.881, 0.880, 0.872); per window 0.94 / 0.81 / 0.90 at 50, against 0.78 / 0.69 / 0.86 over
#: all of the group's history.
RECENT_JOBS = 50
BURST_COLUMNS: list[str] = ["pool_subs_5m", "pool_subs_60m", "pool_same_width_60m",
                            "since_pool_sub_s", "log2_gpus"]
CALENDAR_COLUMNS: list[str] = ["hour_of_day", "day_of_week"]
HISTORY_COLUMNS: list[str] = [f"{lv}_{s}" for lv in LEVELS for s in _STATS]
#: Every JobDuration feature, in the order of a feature row.
DURATION_FEATURES: list[str] = HISTORY_COLUMNS + BURST_COLUMNS + CALENDAR_COLUMNS
#: The time-limit features (module doc), appended to :data:`DURATION_FEATURES` when the trace
#: has limits.
LIMIT_COLUMNS: list[str] = ["limit_log_s", "limit_fits_5m", "limit_fits_60m", "limit_fits_720m",
                            "user_use_count", "user_use_median", "user_use_q90", "user_use_last",
                            "pool_gpus_use_median", "pool_gpus_use_q90",
                            "limit_x_user_use_median_s", "limit_x_user_use_q90_s",
                            "user_use_fit_le5m", "user_use_fit_le60m", "user_use_fit_le720m",
                            "pool_gpus_use_fit_le5m", "pool_gpus_use_fit_le60m",
                            "pool_gpus_use_fit_le720m"]
#: Where the "limit fits window" columns are in a feature row with limits (5 / 60 / 720 min).
LIMIT_FITS_COLUMNS: list[str] = ["limit_fits_5m", "limit_fits_60m", "limit_fits_720m"]


def feature_names(limits: bool = False) -> list[str]:
    """Return the JobDuration feature columns in row order: :data:`DURATION_FEATURES`, then
    :data:`LIMIT_COLUMNS` with ``limits``."""
    return DURATION_FEATURES + LIMIT_COLUMNS if limits else list(DURATION_FEATURES)

_EDGES = tuple(float(e) for e in DURATION_BIN_EDGES_S)
_N_EDGES = len(_EDGES)
_DAY_S = 86400.0
_NAN = float("nan")
_EMPTY = (0.0, *([_NAN] * (len(_STATS) - 1)))
_N_HISTORY = len(HISTORY_COLUMNS)
#: log2 of each GPU count met so far (``submit``'s ``log2_gpus``, one numpy call per count)
_LOG2: dict[int, float] = {}


class _Group:
    """The finished durations of one group, sorted, with the last one finished.

    ``recent`` holds, for each of the last :data:`RECENT_JOBS` durations (in
    finishing order), how many bin edges lie below it (it fits the others)
    and ``fit_recent`` the counts of them fitting each edge, kept up to date
    in O(1) per finished job. ``cached`` holds the
    last :meth:`stats` until the next finished job (a pool's group answers
    every submission to the pool, and most come between two completions).
    """

    __slots__ = ("values", "last", "recent", "fit_recent", "cached")

    def __init__(self) -> None:
        self.values: list[float] = []
        self.last = _NAN
        self.recent: deque[int] = deque()
        self.fit_recent = [0] * len(_EDGES)
        self.cached: tuple[float, ...] | None = None

    def add(self, d: float) -> None:
        insort(self.values, d)
        self.last = d
        self._push_recent(d)
        self.cached = None

    def extend(self, durations: list[float]) -> None:
        """Absorb finished durations in finishing order: the same state as ``add`` of each."""
        if not durations:
            return
        self.cached = None
        self.values.extend(durations)
        self.values.sort()
        self.last = durations[-1]
        for d in durations[-RECENT_JOBS:]:  # only the last ones stay in ``recent``
            self._push_recent(d)

    def _push_recent(self, d: float) -> None:
        # d fits edges[b:] (d <= edge), b = the number of edges below d (all: NaN fits none)
        b = bisect_left(_EDGES, d) if d <= _EDGES[-1] else _N_EDGES
        recent, counts = self.recent, self.fit_recent
        if len(recent) == RECENT_JOBS:
            for i in range(recent.popleft(), _N_EDGES):
                counts[i] -= 1
        recent.append(b)
        for i in range(b, _N_EDGES):
            counts[i] += 1

    def stats(self) -> tuple[float, ...]:
        """Return (count, median, q90, last, le5m, le60m, le720m, recent_le5m, ..._le720m)."""
        if self.cached is None:
            self.cached = self._stats()
        return self.cached

    def _stats(self) -> tuple[float, ...]:
        v = self.values
        n = len(v)
        if n == 0:
            return _EMPTY
        h = n // 2
        med = v[h] if n % 2 else (v[h - 1] + v[h]) / 2.0
        pos = 0.9 * (n - 1)
        i = int(pos)
        q90 = v[i] if i + 1 >= n else v[i] + (v[i + 1] - v[i]) * (pos - i)
        r = len(self.recent)
        return (float(n), med, q90, self.last,
                *(bisect_right(v, e) / n for e in _EDGES),
                *(c / r for c in self.fit_recent))


class SubmissionFeatures:
    """Incremental JobDuration features (see the module doc).

    Feed it, in time order, ``complete(...)`` for each finished job and
    ``submit(...)`` for each submitted job; ``submit`` returns the job's
    feature row (float64, :data:`DURATION_FEATURES` order) as of just
    before its own submission. At equal times, complete first. Keys (tag,
    user, pool) are any hashables; ``None`` means no tag / no user.
    """

    def __init__(self, limits: bool = False, grace_s: float = TIME_LIMIT_GRACE_S) -> None:
        self._groups: tuple[dict, ...] = tuple(defaultdict(_Group) for _ in LEVELS)
        self._subs: dict[Hashable, list[float]] = defaultdict(list)
        self._subs_width: dict[Hashable, list[float]] = defaultdict(list)
        #: with the time-limit columns (:data:`LIMIT_COLUMNS`); ``grace_s``: Slurm's grace
        #: past the limit, on the clock of the durations (a replay's speed-up divides it)
        self.limits = bool(limits)
        self.grace_s = float(grace_s)
        #: the use (duration / limit) of the finished jobs with a limit, by user and by
        #: (pool, GPUs)
        self._use: tuple[dict, dict] = (defaultdict(_Group), defaultdict(_Group))

    def complete(self, tag: Hashable, user: Hashable, pool: Hashable, gpus: int,
                 duration_s: float, time_limit_s: float = _NAN) -> None:
        """Absorb one finished job (``time_limit_s``: its limit, NaN for none)."""
        g_tag, g_user, g_pg, g_pool = self._groups
        d = float(duration_s)
        if tag is not None:
            g_tag[tag].add(d)
        if user is not None:
            g_user[user].add(d)
        g_pg[(pool, int(gpus))].add(d)
        g_pool[pool].add(d)
        if self.limits and time_limit_s == time_limit_s:  # not NaN
            use = d / float(time_limit_s)
            if user is not None:
                self._use[0][user].add(use)
            self._use[1][(pool, int(gpus))].add(use)

    def complete_many(self, jobs: list[tuple]) -> None:
        """Absorb finished jobs (tag, user, pool, gpus, duration[, time limit]) in finishing
        order at once.

        The same state as ``complete`` of each in turn (each group's durations
        are sorted once instead of inserted one by one): for a replay's prior history.
        """
        batches: dict[tuple[int, Hashable], list[float]] = defaultdict(list)
        for job in jobs:
            tag, user, pool, gpus, d = job[:5]
            limit = float(job[5]) if len(job) > 5 and job[5] is not None else _NAN
            d = float(d)
            gpus = int(gpus)
            if tag is not None:
                batches[(0, tag)].append(d)
            if user is not None:
                batches[(1, user)].append(d)
            batches[(2, (pool, gpus))].append(d)
            batches[(3, pool)].append(d)
            if self.limits and limit == limit:
                if user is not None:
                    batches[(4, user)].append(d / limit)
                batches[(5, (pool, gpus))].append(d / limit)
        groups = (*self._groups, *self._use)
        for (level, key), durations in batches.items():
            groups[level][key].extend(durations)

    def submit(self, t: float, tag: Hashable, user: Hashable, pool: Hashable,
               gpus: int, time_limit_s: float = _NAN) -> np.ndarray:
        """Return the features of a job submitted at ``t`` (s), then record its submission.

        ``time_limit_s``: the job's limit (s, NaN for none), read only with ``limits``.
        """
        gpus = int(gpus)
        row = self._history(tag, user, pool, gpus)
        subs = self._subs[pool]
        width = self._subs_width[(pool, gpus)]
        n = len(subs)
        row.append(float(n - bisect_left(subs, t - 300.0)))
        row.append(float(n - bisect_left(subs, t - 3600.0)))
        row.append(float(len(width) - bisect_left(width, t - 3600.0)))
        row.append(t - subs[-1] if n else _NAN)
        log2 = _LOG2.get(gpus)
        if log2 is None:
            log2 = _LOG2[gpus] = float(np.log2(max(gpus, 1)))
        row.append(log2)
        row.append((t % _DAY_S) / 3600.0)
        row.append(float(int(t // _DAY_S) % 7))
        subs.append(t)
        width.append(t)
        if self.limits:
            row.extend(self._limit_row(float(time_limit_s), user, (pool, gpus)))
        return np.asarray(row, dtype=np.float64)

    def _history(self, tag: Hashable, user: Hashable, pool: Hashable, gpus: int) -> list[float]:
        """Return the :data:`HISTORY_COLUMNS` of a job of these keys: its groups' finished jobs
        as of now."""
        row: list[float] = []
        for groups, key in zip(self._groups, (tag, user, (pool, gpus), pool), strict=True):
            grp = groups.get(key) if key is not None else None
            row.extend(grp.stats() if grp is not None else _EMPTY)
        return row

    def refresh(self, row: np.ndarray, tag: Hashable, user: Hashable, pool: Hashable,
                gpus: int, time_limit_s: float = _NAN) -> np.ndarray:
        """Return a copy of a submitted job's ``row`` whose look-alike history is as of now: the
        :data:`HISTORY_COLUMNS` (and, with ``limits``, the :data:`LIMIT_COLUMNS`) read from the
        jobs finished so far; its burst and calendar columns stay those of its submission.
        Records nothing (a pending job predicted again after its look-alikes ended)."""
        out = np.array(row, dtype=np.float64)
        out[:_N_HISTORY] = self._history(tag, user, pool, int(gpus))
        if self.limits:
            out[len(DURATION_FEATURES):] = self._limit_row(float(time_limit_s), user,
                                                           (pool, int(gpus)))
        return out

    def _limit_row(self, limit: float, user: Hashable, pool_gpus: tuple) -> list[float]:
        """Return the :data:`LIMIT_COLUMNS` of a job with limit ``limit`` (s, NaN: none)."""
        if limit != limit:
            return [_NAN] * len(LIMIT_COLUMNS)
        user_grp = self._use[0].get(user) if user is not None else None
        u = user_grp.stats()[:4] if user_grp is not None else _EMPTY[:4]
        pg_grp = self._use[1].get(pool_gpus)
        pg = pg_grp.stats()[1:3] if pg_grp is not None else _EMPTY[1:3]
        ends = limit + self.grace_s
        # a use r fits edge e when r * limit <= e: r <= e / limit
        at = [e / limit for e in _EDGES]
        fit = [[bisect_right(g.values, a) / len(g.values) for a in at] if g is not None
               and g.values else [_NAN] * _N_EDGES for g in (user_grp, pg_grp)]
        return [math.log(limit), *(1.0 if ends <= e else 0.0 for e in _EDGES), *u, *pg,
                limit * u[1], limit * u[2], *fit[0], *fit[1]]


def _keys(col: pl.Series) -> list:
    """Return a column's values with empty strings as None (no tag / user)."""
    return [None if v is None or v == "" else v for v in col.to_list()]


def _codes(keys: list) -> np.ndarray:
    """Return an int code per key, by first appearance (-1 for None: no group)."""
    seen: dict[Hashable, int] = {}
    return np.fromiter((-1 if k is None else seen.setdefault(k, len(seen)) for k in keys),
                       dtype=np.int64, count=len(keys))


class _KthSmallest:
    """k-th smallest of a slice of an int sequence, many slices at once (a wavelet matrix).

    Per bit, from the highest, the sequence is stably split by that bit (zeros first) and the
    prefix counts of zeros are kept; a query follows its slice down the bits, all queries in
    one numpy step per bit.
    """

    def __init__(self, values: np.ndarray):
        self.bits = max(1, int(values.max(initial=0)).bit_length())
        self.zeros: list[np.ndarray] = []
        cur = values.astype(np.int64)
        for b in reversed(range(self.bits)):
            one = ((cur >> b) & 1).astype(bool)
            self.zeros.append(np.concatenate([[0], np.cumsum(~one)]))
            cur = np.concatenate([cur[~one], cur[one]])

    def query(self, lo: np.ndarray, hi: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Return the k-th smallest (0-based) of ``values[lo:hi]``, per query (0 <= k < hi - lo)."""
        lo, hi, k = lo.copy(), hi.copy(), k.copy()
        out = np.zeros(lo.size, dtype=np.int64)
        for level, b in enumerate(reversed(range(self.bits))):
            zeros = self.zeros[level]
            z_lo, z_hi = zeros[lo], zeros[hi]
            n_zero = z_hi - z_lo
            left = k < n_zero
            total = zeros[-1]
            lo = np.where(left, z_lo, total + lo - z_lo)
            hi = np.where(left, z_hi, total + hi - z_hi)
            k = np.where(left, k, k - n_zero)
            out |= (~left).astype(np.int64) << b
        return out

    def count_less(self, lo: np.ndarray, hi: np.ndarray, bound: np.ndarray) -> np.ndarray:
        """Return how many of ``values[lo:hi]`` are < ``bound``, per query."""
        every = hi - lo
        lo, hi = lo.copy(), hi.copy()
        bound = np.asarray(bound, dtype=np.int64)
        out = np.zeros(lo.size, dtype=np.int64)
        beyond = bound >= (1 << self.bits)  # every value is below it
        for level, b in enumerate(reversed(range(self.bits))):
            zeros = self.zeros[level]
            z_lo, z_hi = zeros[lo], zeros[hi]
            total = zeros[-1]
            one = ((bound >> b) & 1).astype(bool)
            out += np.where(one, z_hi - z_lo, 0)  # a 0 bit where the bound has a 1: below it
            lo = np.where(one, total + lo - z_lo, z_lo)
            hi = np.where(one, total + hi - z_hi, z_hi)
        return np.where(beyond, every, out)


def _history_stats(group: np.ndarray, dur: np.ndarray, end: np.ndarray,
                   sub: np.ndarray) -> np.ndarray:
    """Return [jobs, len(_STATS)]: per job, its group's stats (:meth:`_Group.stats`) over the
    group's jobs finished by its submission (``end <= sub``), in finishing order (end, row).

    ``group``: an int code per job (-1: no group: count 0, the rest NaN).
    """
    n = group.size
    out = np.tile(np.asarray(_EMPTY, dtype=np.float64), (n, 1))
    fin = np.flatnonzero((group >= 0) & np.isfinite(end))
    fin = fin[np.lexsort((fin, end[fin], group[fin]))]  # by group, then finishing order
    ask = np.flatnonzero(group >= 0)
    if fin.size == 0 or ask.size == 0:
        return out
    g, d = group[fin], dur[fin]
    # (group, time) as one exact int64 key: times by their rank among every time compared
    times, rank = np.unique(np.concatenate([end[fin], sub[ask]]), return_inverse=True)
    width = np.int64(times.size + 1)
    first = np.searchsorted(g, group[ask], side="left")
    stop = np.searchsorted(g * width + rank[:fin.size], group[ask] * width + rank[fin.size:],
                           side="right")
    has = stop > first
    ask, first, stop = ask[has], first[has], stop[has]
    count = stop - first
    # order statistics of the finished durations (as _Group._stats reads its sorted list)
    values, value_rank = np.unique(d, return_inverse=True)
    kth = _KthSmallest(value_rank)

    def nth(k: np.ndarray) -> np.ndarray:
        return values[kth.query(first, stop, np.minimum(k, count - 1))]

    h = count // 2
    v_h = nth(h)
    med = np.where(count % 2 == 1, v_h, (nth(np.maximum(h - 1, 0)) + v_h) / 2.0)
    pos = 0.9 * (count - 1).astype(np.float64)
    i = pos.astype(np.int64)
    v_i = nth(i)
    q90 = np.where(i + 1 >= count, v_i, v_i + (nth(i + 1) - v_i) * (pos - i))
    recent = np.minimum(count, RECENT_JOBS)
    le, le_recent = [], []
    for e in _EDGES:
        fits = np.concatenate([[0], np.cumsum(d <= e)])
        le.append((fits[stop] - fits[first]) / count)
        le_recent.append((fits[stop] - fits[stop - recent]) / recent)
    out[ask] = np.column_stack([count.astype(np.float64), med, q90, d[stop - 1],
                                *le, *le_recent])
    return out


def has_limits(frame: pl.DataFrame) -> bool:
    """Return whether ``frame`` has a ``time_limit`` column with at least one limit."""
    return ("time_limit" in frame.columns
            and bool(frame["time_limit"].cast(pl.Float64).fill_nan(None).is_not_null().any()))


def _shares_at_most(group: np.ndarray, values: np.ndarray, end: np.ndarray, sub: np.ndarray,
                    at: np.ndarray) -> np.ndarray:
    """Return [jobs, at.shape[1]]: per job, the share of its group's jobs finished by its
    submission (``end <= sub``) whose value is <= ``at[job, i]`` (NaN when none finished, or
    the job has no group: ``group`` < 0), as ``bisect_right`` on the group's sorted values."""
    n = group.size
    out = np.full((n, at.shape[1]), np.nan)
    fin = np.flatnonzero((group >= 0) & np.isfinite(end))
    fin = fin[np.lexsort((fin, end[fin], group[fin]))]
    ask = np.flatnonzero(group >= 0)
    if fin.size == 0 or ask.size == 0:
        return out
    g = group[fin]
    times, rank = np.unique(np.concatenate([end[fin], sub[ask]]), return_inverse=True)
    width = np.int64(times.size + 1)
    first = np.searchsorted(g, group[ask], side="left")
    stop = np.searchsorted(g * width + rank[:fin.size], group[ask] * width + rank[fin.size:],
                           side="right")
    has = stop > first
    ask, first, stop = ask[has], first[has], stop[has]
    distinct, value_rank = np.unique(values[fin], return_inverse=True)
    counter = _KthSmallest(value_rank)
    count = (stop - first).astype(np.float64)
    for i in range(at.shape[1]):
        # values <= a: the distinct values at or below a, i.e. ranks below searchsorted(right)
        bound = np.searchsorted(distinct, at[ask, i], side="right")
        out[ask, i] = counter.count_less(first, stop, bound) / count
    return out


def submission_features(schedule: pl.DataFrame, *, limits: bool | None = None,
                        grace_s: float = TIME_LIMIT_GRACE_S) -> pl.DataFrame:
    """Return ``job_id`` and the :data:`DURATION_FEATURES` of every job of ``schedule``.

    ``limits`` (None: :func:`has_limits` of the schedule) appends the
    :data:`LIMIT_COLUMNS` from its ``time_limit`` column (s; null or NaN: no
    limit); without them the frame is exactly what a trace with no limits gets.

    ``schedule`` has ``job_id``, ``pool``, ``submit_time``, ``num_gpus``,
    ``duration`` and ``end_time`` (a replay, e.g. FCFS; jobs without an end
    never complete), and optionally ``tag`` / ``user``. Each row uses only
    jobs finished by its submission (``end_time <= submit_time``) and
    submitted before it; rows are in (submit_time, job_id) order. The same
    numbers as feeding :class:`SubmissionFeatures` the completions and
    submissions in time order (completions first at equal times; submissions
    in row order), computed for all jobs at once.
    """
    needed = ("job_id", "pool", "submit_time", "num_gpus", "duration", "end_time")
    missing = [c for c in needed if c not in schedule.columns]
    if missing:
        raise TraceError(f"schedule: missing column(s) {missing} for the JobDuration features "
                         "(a replay with end_time, e.g. the FCFS schedule)")
    s = schedule.sort("submit_time", "job_id")
    n = s.height
    none = [None] * n
    pool_keys = s["pool"].to_list()
    gpus = s["num_gpus"].to_numpy().astype(np.int64)
    pool = _codes(pool_keys)
    pool_gpus = _codes(list(zip(pool.tolist(), gpus.tolist(), strict=True)))
    levels = (_codes(_keys(s["tag"]) if "tag" in s.columns else none),
              _codes(_keys(s["user"]) if "user" in s.columns else none), pool_gpus, pool)
    dur = s["duration"].cast(pl.Float64).to_numpy()
    sub = s["submit_time"].to_numpy().astype(np.float64)
    end = s["end_time"].fill_null(np.inf).fill_nan(np.inf).to_numpy().astype(np.float64)
    history = [_history_stats(g, dur, end, sub) for g in levels]
    # burst context: each job's earlier submissions to its pool (and of its width), row order
    row = np.arange(n)
    by_pool = np.lexsort((row, pool))
    by_width = np.lexsort((row, pool_gpus))

    def since(by: np.ndarray, codes: np.ndarray, back_s: float) -> np.ndarray:
        """Per job, its group's earlier submissions at or after ``sub - back_s``."""
        g, t = codes[by], sub[by]
        first = np.searchsorted(g, g, side="left")
        times, rank = np.unique(np.concatenate([t, t - back_s]), return_inverse=True)
        width = np.int64(times.size + 1)
        lo = np.searchsorted(g * width + rank[:n], g * width + rank[n:], side="left")
        out = np.empty(n)
        out[by] = (np.arange(n) - np.maximum(lo, first)).astype(np.float64)
        return out

    g_pool = pool[by_pool]
    prev = np.full(n, np.nan)
    later = np.flatnonzero(g_pool[1:] == g_pool[:-1]) + 1
    prev[by_pool[later]] = sub[by_pool[later]] - sub[by_pool[later - 1]]
    log2 = {w: float(np.log2(max(w, 1))) for w in set(gpus.tolist())}
    burst = [since(by_pool, pool, 300.0), since(by_pool, pool, 3600.0),
             since(by_width, pool_gpus, 3600.0), prev,
             np.array([log2[w] for w in gpus.tolist()], dtype=np.float64)]
    calendar = [(sub % _DAY_S) / 3600.0, ((sub // _DAY_S).astype(np.int64) % 7).astype(np.float64)]
    if limits is None:
        limits = has_limits(s)
    extra = []
    if limits:
        if "time_limit" not in s.columns:
            raise TraceError("schedule: limits=True needs a time_limit column (s)")
        extra = _limit_columns(s, dur, end, sub, levels[1], pool_gpus, float(grace_s))
    names = feature_names(bool(limits))
    out = np.column_stack([*history, *burst, *calendar, *extra]) if n else \
        np.empty((0, len(names)), dtype=np.float64)
    frame = pl.DataFrame(out, schema=names, orient="row")
    return frame.insert_column(0, s["job_id"])


def _limit_columns(s: pl.DataFrame, dur: np.ndarray, end: np.ndarray, sub: np.ndarray,
                   user: np.ndarray, pool_gpus: np.ndarray, grace_s: float) -> list[np.ndarray]:
    """Return the :data:`LIMIT_COLUMNS` of the rows of ``s`` (sorted as submission_features
    sorts them), as :meth:`SubmissionFeatures._limit_row` computes them one job at a time."""
    limit = s["time_limit"].cast(pl.Float64).fill_null(np.nan).to_numpy().astype(np.float64)
    has = ~np.isnan(limit)
    use = np.full(limit.size, np.nan)
    use[has] = dur[has] / limit[has]
    # only the finished jobs with a limit are members of the use groups
    member_end = np.where(has, end, np.inf)
    u = _history_stats(user, use, member_end, sub)[:, :4]
    pg = _history_stats(pool_gpus, use, member_end, sub)[:, 1:3]
    log = np.array([math.log(v) if v == v else _NAN for v in limit.tolist()], dtype=np.float64)
    ends = limit + grace_s
    fits = [np.where(ends <= e, 1.0, 0.0) for e in _EDGES]
    at = np.column_stack([e / limit for e in _EDGES])  # a use fits edge e when <= e / limit
    fit_u = _shares_at_most(user, use, member_end, sub, at)
    fit_pg = _shares_at_most(pool_gpus, use, member_end, sub, at)
    cols = [log, *fits, *u.T, *pg.T, limit * u[:, 1], limit * u[:, 2], *fit_u.T, *fit_pg.T]
    return [np.where(has, c, np.nan) for c in cols]
