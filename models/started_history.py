"""What is known *now* of each group's last started jobs: JobDuration's censoring cap.

JobDuration's look-alike shares (``history_cdf``) count *finished* jobs, and a
job enters them only when it ends. A long job therefore shows up days after a
short one started at the same time: while a run of long jobs is in flight,
the group's last finished jobs are mostly short and the shares say "fits".
That is right-censoring, and it is where learned SIA's worst loans came from
(jobs lent in the 12 h window that ran for days).

:class:`StartedLookAlikes` keeps, per group (the rule's chain: same tag, same
pool and GPU count, same pool), its last :data:`RECENT_STARTED` jobs in start
order. At time t a job of the group is

- *known to fit* edge e when it finished having run at most e;
- *known not to fit* when it ran, or has been running, longer than e;
- *unknown* otherwise (still running, for less than e so far).

:meth:`StartedLookAlikes.share_within` is the share known to fit among the
known ones, at the first level with at least ``min_known`` known jobs (NaN when
none has; each edge takes the first level with enough known jobs for it, since
the 12 h edge knows a job only after 12 h or its end). The forecaster caps
P(duration <= e) by it: a group whose recent starts are still running long
cannot look short. It reads only what a
cluster knows at t: starts, ends of finished jobs, elapsed times of running
ones (the prior jobs' ends only once they are past).

Chosen on Philly's training days 23-44 (zero-queue schedule, the pool-and-width
level, the 50 last jobs either way): capping the finished-job shares by this
one cut the GPU-hours of lent jobs that overran their window by 26% / 61% /
43% at 5 / 60 / 720 min (eps 0.2 / 0.2 / 0.05) for 4% / 3.5% / 1.2% fewer
GPU-hours lent within the window, and never raised them in any of the three
weeks.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
from sia.data.forecast_view import ForecastView, TraceView

#: How many of a group's most recently started jobs the share covers (as the finished shares
#: cover the last 50 finished: ``sia.features.duration_features.RECENT_JOBS``).
RECENT_STARTED = 50


class StartedLookAlikes:
    """Per group, the last ``recent`` started jobs and what is known of them (see the module doc).

    Feed it the replay's view (``update``); ``prior`` (optional, a frame of
    the jobs submitted before the replay: ``pool``, ``num_gpus``,
    ``submit_time``, ``duration``, optional ``tag``) are jobs that started
    before it (each at its submission, as the no-queue schedule the
    predictors are trained on), known to have finished only once their end
    is past. ``use_tag`` False leaves the tag level out of the chain (as
    JobDuration's ``history_tag`` False does).
    """

    def __init__(self, recent: int = RECENT_STARTED, min_known: int = 3,
                 prior: Any = None, *, use_tag: bool = True) -> None:
        if recent < 1 or min_known < 1:
            raise ValueError(f"recent and min_known must be >= 1, not {recent}, {min_known}")
        self.recent = int(recent)
        self.min_known = int(min_known)
        self.prior = prior
        #: whether the chain starts at the same tag (JobDuration.history_tag)
        self.use_tag = bool(use_tag)
        self._trace_id: int | None = None

    # ------------------------------------------------------------------ state
    def _reset(self, trace: TraceView) -> None:
        self._trace_id = id(trace)
        starts, ends, durs, keys = self._prior_entries(trace)
        self._n_prior = len(starts)
        n = trace.n_jobs
        self._start = np.concatenate([np.asarray(starts, dtype=np.float64), np.full(n, np.nan)])
        self._end = np.concatenate([np.asarray(ends, dtype=np.float64), np.full(n, np.inf)])
        self._dur = np.concatenate([np.asarray(durs, dtype=np.float64), np.full(n, np.nan)])
        self._groups: dict[tuple, deque[int]] = {}
        self._seen = [0] * trace.n_pools
        # shares kept per chain of groups until one of its groups sees a start or an end (or
        # time passes what it knew), and the chains kept for each group
        self._cache: dict[tuple, tuple[np.ndarray, float]] = {}
        self._chains_of: dict[tuple, set[tuple]] = {}
        self._cache_at: bytes | None = None
        self._state_key: tuple[int, int] | None = None
        for i in np.argsort(np.asarray(starts, dtype=np.float64), kind="stable").tolist():
            self._push(keys[i], i)
        tags = trace.tag_code.tolist() if self.use_tag else [-1] * n
        pools, gpus = trace.pool.tolist(), trace.num_gpus.tolist()
        self._keys = [_group_keys(t, p, g) for t, p, g in zip(tags, pools, gpus, strict=True)]

    def grow(self, trace: TraceView, n_old: int) -> None:
        """Take the jobs the live service appended to ``trace`` after index ``n_old`` (not yet
        started): room for their start, end and run time, and their look-alike groups."""
        if self._trace_id != id(trace):
            return  # not started on this trace: its reset reads the trace as it is then
        from sia.data.growth import reserve

        size = self._n_prior + trace.n_jobs
        self._start = reserve(self._start, size, np.nan)
        self._end = reserve(self._end, size, np.inf)
        self._dur = reserve(self._dur, size, np.nan)
        tags = (trace.tag_code[n_old:].tolist() if self.use_tag
                else [-1] * (trace.n_jobs - n_old))
        pools, gpus = trace.pool[n_old:].tolist(), trace.num_gpus[n_old:].tolist()
        self._keys.extend(_group_keys(t, p, g) for t, p, g in zip(tags, pools, gpus,
                                                                  strict=True))

    def _prior_entries(self, trace: TraceView) -> tuple[list, list, list, list]:
        """Return (start, end, duration, group keys) of the prior jobs of the replay's pools."""
        from sia.models.job_duration import prior_jobs

        speedup = float(getattr(trace, "speedup", 1.0))
        starts, ends, durs, keys = [], [], [], []
        for tag, p, g, submit, d in prior_jobs(self.prior, trace):
            d = d / speedup
            starts.append(submit)
            ends.append(submit + d)
            durs.append(d)
            keys.append(_group_keys(tag if self.use_tag else -1, p, g))
        return starts, ends, durs, keys

    def _push(self, keys: tuple, entry: int) -> None:
        for key in keys:
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = deque(maxlen=self.recent)
            group.append(entry)

    def update(self, view: ForecastView) -> None:
        """Absorb the starts and completions since the last call."""
        trace = view.trace
        if self._trace_id != id(trace):
            self._reset(trace)
        done = [view.n_completed(p) for p in range(trace.n_pools)]
        key = (sum(done), int(view.n_running))
        if key == self._state_key:  # no start and no end since the last call (a start without
            return  # an end raises the running count; an end raises the completed count)
        self._state_key = key
        base = self._n_prior
        new: list[tuple[float, int]] = []
        changed: list[int] = []
        for p, n in enumerate(done):
            if n > self._seen[p]:
                jobs = view.completed_jobs(p)[self._seen[p]:n]
                ends = view.completions(p)[self._seen[p]:n]
                for j, end in zip(jobs.tolist(), ends.tolist(), strict=True):
                    d = float(trace.duration[j])  # known: the job finished
                    e = base + j
                    self._end[e], self._dur[e] = end, d
                    changed.append(j)
                    if np.isnan(self._start[e]):  # started and ended since the last call
                        self._start[e] = end - d
                        new.append((end - d, j))
                self._seen[p] = n
        run = view.running()
        fresh = np.isnan(self._start[base + run.job])
        if fresh.any():
            for j, s in zip(run.job[fresh].tolist(), run.start[fresh].tolist(), strict=True):
                self._start[base + j] = s
                new.append((s, j))
                changed.append(j)
        if new:
            for _, j in sorted(new):
                self._push(self._keys[j], base + j)
        self._forget({key for j in changed for key in self._keys[j]})

    def _forget(self, groups: set[tuple]) -> None:
        """Drop the kept shares of every chain through ``groups`` (a job of theirs started or
        ended: their last started jobs, or what is known of one, changed)."""
        for key in groups:
            for chain in self._chains_of.pop(key, ()):
                self._cache.pop(chain, None)

    # ------------------------------------------------------------------ queries
    def share_within(self, view: ForecastView, jobs: np.ndarray,
                     edges_s: np.ndarray) -> np.ndarray:
        """Return float [len(jobs), len(edges_s)]: per job, the share of its group's last started
        jobs known at now to fit each edge among those known (NaN: no level with enough known)."""
        self.update(view)
        now = float(view.now)
        edges = np.asarray(edges_s, dtype=np.float64)
        at = edges.tobytes()
        if self._cache_at != at:  # other edges: every kept share is for the old ones
            self._cache, self._chains_of, self._cache_at = {}, {}, at
        rows: list[np.ndarray] = []
        which: dict[tuple, int] = {}
        ids = []
        for j in np.asarray(jobs, dtype=np.int64).tolist():  # one share per chain of groups
            keys = self._keys[j]
            i = which.get(keys)
            if i is None:
                i = which[keys] = len(rows)
                rows.append(self._chain_share(keys, now, edges))
            ids.append(i)
        if not rows:
            return np.full((0, edges.size), np.nan)
        return np.asarray(rows)[np.asarray(ids, dtype=np.int64)]

    def _chain_share(self, keys: tuple, now: float, edges: np.ndarray) -> np.ndarray:
        """Per edge, the share of the first group of ``keys`` with enough known jobs (else NaN).

        Kept until a job of one of the groups starts or ends (:meth:`_forget`) or
        the time it can next change without either (a running job's run
        passing an edge, a prior job's end passing).
        """
        hit = self._cache.get(keys)
        if hit is not None and now < hit[1]:
            return hit[0]
        out = np.full(edges.size, np.nan)
        until = np.inf
        for key in keys:
            share, change = self._group_share(key, now, edges)
            until = min(until, change)
            if share is not None:
                gap = np.isnan(out)
                out[gap] = share[gap]
                if not np.isnan(out).any():
                    break
        self._cache[keys] = (out, until)
        for key in keys:
            self._chains_of.setdefault(key, set()).add(keys)
        return out

    def _group_share(self, key: tuple, now: float,
                     edges: np.ndarray) -> tuple[np.ndarray | None, float]:
        """Return (the group's share per edge, None when no edge has enough known jobs; the
        first time after ``now`` at which it can change while nothing starts or ends)."""
        group = self._groups.get(key)
        if not group:
            return None, np.inf
        idx = np.fromiter(group, dtype=np.int64, count=len(group))
        end, start, dur = self._end[idx], self._start[idx], self._dur[idx]
        done = end <= now
        ran = np.where(done, dur, now - start)  # run time so far (all of it when finished)
        fits = done[:, None] & (ran[:, None] <= edges[None, :])
        known = fits | (ran[:, None] > edges[None, :])
        # running jobs change what is known when their run passes an edge or (prior jobs) they end
        passing = np.where(known, np.inf, start[:, None] + edges[None, :])
        change = min(float(passing.min(initial=np.inf)), float(end[~done].min(initial=np.inf)))
        n_known = known.sum(axis=0)
        need = self.min_known if key[0] != "pool" else 1
        if not (n_known >= need).any():
            return None, change
        share = np.where(n_known >= need, fits.sum(axis=0) / np.maximum(n_known, 1), np.nan)
        return share, change


def _group_keys(tag: int, pool: int, gpus: int) -> tuple:
    """Return the job's groups in the rule's order: same tag (if any), pool and GPUs, pool."""
    keys = (("pool_gpus", pool, gpus), ("pool", pool))
    return (("tag", tag), *keys) if tag >= 0 else keys


def cap_cdf(cdf: np.ndarray, share: np.ndarray) -> np.ndarray:
    """Return P(duration <= edge) [n, edges] capped by the started jobs' shares (NaN: no cap),
    kept non-decreasing across the edges (a job that cannot fit an edge fits no smaller one)."""
    capped = np.where(np.isnan(share), cdf, np.minimum(cdf, share))
    return np.minimum.accumulate(capped[:, ::-1], axis=1)[:, ::-1]


def zero_queue_shares(jobs: Any, prior: Any = None, edges_s: Any = (300.0, 3600.0, 43200.0),
                      *, recent: int = RECENT_STARTED, min_known: int = 3,
                      use_tag: bool = True) -> np.ndarray:
    """Return float [jobs, edges]: each job's started look-alike shares at its submission, in a
    schedule with no queue (what the cap reads when the scheduler first sees it, for the report
    of a model trained on that schedule).

    ``jobs``: a frame (``pool``, ``num_gpus``, ``submit_time``, ``duration`` > 0, optional
    ``tag``); ``prior``: the jobs before them (as :class:`StartedLookAlikes`'s). Rows in
    ``jobs``' order. ``use_tag``: as :class:`StartedLookAlikes`'s.

    The numbers :class:`StartedLookAlikes` gives when a replay with no queue asks it for the jobs
    submitted at each instant (every job runs from its submission to submission + duration),
    computed for all jobs at once: per level, each job's window of its group's last ``recent``
    starts is a slice of the group's starts in the order the replay pushes them (the prior jobs
    by start, then the jobs by submission, those of one instant by their start as the replay
    records it, then row).
    """
    if recent < 1 or min_known < 1:
        raise ValueError(f"recent and min_known must be >= 1, not {recent}, {min_known}")
    order = np.argsort(jobs["submit_time"].to_numpy(), kind="stable")
    edges = np.asarray(edges_s, dtype=np.float64)
    if jobs.height == 0:
        return np.full((0, edges.size), np.nan)
    q = _coded_jobs(jobs[order], prior, use_tag)
    e = _push_entries(q)
    out = np.full((q.n, edges.size), np.nan)
    for level in _levels(q, e, min_known):
        _fill_level(out, level, q, e, edges, recent)
    back = np.empty_like(out)
    back[order] = out
    return back


def _coded_jobs(s: Any, prior: Any, use_tag: bool) -> Any:
    """Step 1 of :func:`zero_queue_shares`: the jobs (sorted by submission) and the prior jobs
    as integer-coded arrays (tag code -1: none; pools by sorted name)."""
    import polars as pl

    n = s.height
    names = tuple(sorted(set(s["pool"].cast(pl.String).to_list())))
    index = {nm: i for i, nm in enumerate(names)}
    tags = s["tag"].to_list() if "tag" in s.columns and use_tag else [None] * n
    codes: dict[Any, int] = {}
    tag_code = np.array([-1 if t is None or t == "" else codes.setdefault(t, len(codes))
                         for t in tags], dtype=np.int64)
    from types import SimpleNamespace

    from sia.models.job_duration import prior_jobs

    trace = SimpleNamespace(
        n_jobs=n, n_pools=len(names), pool_names=names,
        tag=np.array([None if c < 0 else t for t, c in zip(tags, tag_code, strict=True)],
                     dtype=object), tag_code=tag_code)
    before = prior_jobs(prior, trace)
    m = len(before)
    p_tag, p_pool, p_gpus, p_submit, p_dur = (
        np.array([r[c] for r in before], dtype=np.int64 if c < 3 else np.float64)
        for c in range(5))
    if not use_tag:
        p_tag = np.full(m, -1, dtype=np.int64)
    return SimpleNamespace(
        n=n, m=m, tag_code=tag_code,
        pool=np.array([index[p] for p in s["pool"].cast(pl.String).to_list()], dtype=np.int64),
        gpus=s["num_gpus"].to_numpy().astype(np.int64),
        submit=s["submit_time"].to_numpy().astype(np.float64),
        dur=s["duration"].to_numpy().astype(np.float64),
        p_tag=p_tag, p_pool=p_pool, p_gpus=p_gpus, p_submit=p_submit, p_dur=p_dur)


def _push_entries(q: Any) -> Any:
    """Step 2: every entry (prior, then jobs) with its push rank, start, end, duration, the time
    from which it is in its group's window, and integer time ranks for the searches."""
    from types import SimpleNamespace

    n, m, submit, dur = q.n, q.m, q.submit, q.dur
    # push order: prior jobs by start (stable), then the jobs of each instant when the replay
    # first sees them started: at the next instant, those ended by then with start end - d
    nxt = np.append(submit, np.inf)[np.searchsorted(submit, submit, side="right")]
    ended = submit + dur <= nxt
    seen_start = np.where(ended, (submit + dur) - dur, submit)
    trace_rank = np.lexsort((np.arange(n), seen_start, submit))
    rank = np.empty(m + n, dtype=np.int64)
    rank[:m][np.argsort(q.p_submit, kind="stable")] = np.arange(m)
    rank[m + trace_rank] = m + np.arange(n)
    # the time from which an entry is in its group's window: prior ones always, jobs once past
    e_from = np.concatenate([np.full(m, -np.inf), submit])
    # integer time ranks so (group, time) compares exactly as one int64 key
    times, inv = np.unique(np.concatenate([e_from, submit]), return_inverse=True)
    return SimpleNamespace(
        rank=rank,
        start=np.concatenate([q.p_submit, submit]),
        end=np.concatenate([q.p_submit + q.p_dur, submit + dur]),
        dur=np.concatenate([q.p_dur, dur]),
        pool=np.concatenate([q.p_pool, q.pool]), gpus=np.concatenate([q.p_gpus, q.gpus]),
        tag=np.concatenate([q.p_tag, q.tag_code]),
        t_rank=inv[:m + n], q_rank=inv[m + n:], width=np.int64(times.size + 1))


def _levels(q: Any, e: Any, min_known: int) -> list[tuple]:
    """Step 3: the look-alike levels in the rule's order (tag, pool and GPUs, pool), each as
    (entry group, query group, entries in it, queries in it, known jobs needed)."""
    n_all = q.m + q.n
    span = int(max(e.gpus.max(initial=0), q.gpus.max(initial=0))) + 1
    return [(e.tag, q.tag_code, e.tag >= 0, q.tag_code >= 0, min_known),
            (e.pool * span + e.gpus, q.pool * span + q.gpus, np.ones(n_all, bool),
             np.ones(q.n, bool), min_known),
            (e.pool, q.pool, np.ones(n_all, bool), np.ones(q.n, bool), 1)]


def _fill_level(out: np.ndarray, level: tuple, q: Any, e: Any, edges: np.ndarray,
                recent: int) -> None:
    """Step 4: fill the rows of ``out`` still without a share with this level's shares."""
    e_group, q_group, e_in, q_in, need = level
    ent = np.flatnonzero(e_in)
    ent = ent[np.lexsort((e.rank[ent], e_group[ent]))]  # by group, then push order
    key = e_group[ent] * e.width + e.t_rank[ent]
    qs = np.flatnonzero(q_in)
    if ent.size == 0 or qs.size == 0:
        return
    first = np.searchsorted(e_group[ent], q_group[qs], side="left")
    stop = np.searchsorted(key, q_group[qs] * e.width + e.q_rank[qs], side="left")
    pos = stop[:, None] - recent + np.arange(recent)[None, :]  # [queries, recent]
    valid = pos >= first[:, None]
    idx = ent[np.clip(pos, 0, ent.size - 1)]
    now = q.submit[qs][:, None]
    done = e.end[idx] <= now
    ran = np.where(done, e.dur[idx], now - e.start[idx])[:, :, None]
    fits = (valid & done)[:, :, None] & (ran <= edges)
    known = fits | (valid[:, :, None] & (ran > edges))
    n_known = known.sum(axis=1)
    share = np.where(n_known >= need, fits.sum(axis=1) / np.maximum(n_known, 1), np.nan)
    rows = out[qs]
    gap = np.isnan(rows)
    rows[gap] = share[gap]
    out[qs] = rows
