"""The compiled SIA_VC pass: merged clocks and the bulk visit against direct re-computations."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sia.scheduler.policies.siavc import vc_pass
from sia.scheduler.policies.siavc.vc_pass import (
    CandidateWalk,
    WalkTables,
    argsort_floats,
    bulk_pass,
    changed_span,
    cut_merged,
    drop_job,
    lazy_pass,
    merge_clocks,
    next_vst,
    pending_tail,
    replace_pools,
    update_merged,
)
from sia.scheduler.policies.siavc.vst import ResourcePlan


def random_clocks(rng: np.random.Generator, n_pools: int, ids: np.ndarray) -> list[tuple]:
    """Per pool: (VSTs, jobs, GPUs, durations), sorted by VST then job; VSTs on a coarse grid
    so that ties across pools are common. ``ids`` are the job indices to spread over pools."""
    owner = rng.integers(0, n_pools, ids.shape[0])
    out = []
    for p in range(n_pools):
        J = np.sort(ids[owner == p])
        V = np.sort(rng.integers(0, 12, J.shape[0]).astype(np.float64) * 100.0)
        G = rng.choice([0, 1, 2, 4, 8], J.shape[0]).astype(np.int64)
        D = rng.choice([0.0, 50.0, 100.0, 250.0, 1000.0], J.shape[0])
        out.append((V, J, G, D))
    return out


def lay_out(clocks: list[tuple]) -> tuple[tuple, np.ndarray]:
    seg = np.zeros(len(clocks) + 1, dtype=np.int64)
    np.cumsum([c[0].shape[0] for c in clocks], out=seg[1:])
    return tuple(np.concatenate([c[i] for c in clocks]) for i in range(4)), seg


def assert_same_merge(got: tuple, want: tuple) -> None:
    """The same entries in the same (VST, job) order, all alive, and an end order that lists
    every entry once, by end."""
    for a, b in zip(got[:5], want[:5], strict=True):
        assert a.tolist() == b.tolist()
    assert sorted(got[5].tolist()) == list(range(got[0].shape[0]))
    assert (got[0][got[5]] + got[3][got[5]]).tolist() == got[7].tolist() == sorted(want[7].tolist())
    assert got[6].all()
    assert_reserved(got)


def assert_reserved(merged: tuple) -> None:
    """The reserved GPUs, in (VST, job) order and in end order, are each entry's GPUs if it is
    alive, at least 1 wide and of a positive duration, else 0."""
    V, J, G, D, P, eo, alive, ends, reserved, reserved_by_end = merged
    assert reserved.tolist() == np.where(alive & (G > 0) & (D > 0), G, 0).tolist()
    assert reserved_by_end.tolist() == reserved[eo].tolist()


def test_merge_orders_by_vst_then_job_and_remembers_pool_and_ends():
    """Two pools; job 5 (pool 0) and job 2 (pool 1) tie at VST 10: job 2 comes first."""
    clocks = [
        (np.array([0.0, 10.0]), np.array([1, 5]), np.array([1, 1]), np.array([30.0, 5.0])),
        (np.array([10.0, 20.0]), np.array([2, 3]), np.array([2, 1]), np.array([1.0, 1.0])),
    ]
    (V, J, G, D), seg = lay_out(clocks)
    mV, mJ, mG, mD, mP, eo, alive, ends, reserved, reserved_by_end = merge_clocks(V, J, G, D, seg)
    assert mJ.tolist() == [1, 2, 5, 3]
    assert mP.tolist() == [0, 1, 0, 1] and alive.all()
    assert (mV + mD)[eo].tolist() == ends.tolist() == [11.0, 15.0, 21.0, 30.0]
    assert reserved.tolist() == [1, 2, 1, 1] and reserved_by_end.tolist() == [2, 1, 1, 1]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 60), n_pools=st.integers(1, 5))
def test_replacing_pools_equals_merging_from_scratch(seed, n, n_pools):
    """Drop some pools' entries and merge their new clocks in: the same arrays as a full merge."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(3 * n + 3)[:n]
    old = random_clocks(rng, n_pools, ids)
    changed = sorted(set(rng.integers(0, n_pools, rng.integers(1, n_pools + 1)).tolist()))
    fresh = random_clocks(rng, n_pools, rng.permutation(3 * n + 3)[: n + 3] + 10 * n + 10)
    new = list(old)
    for p in changed:
        new[p] = fresh[p]
    (V, J, G, D), seg = lay_out(old)
    merged = merge_clocks(V, J, G, D, seg)
    (cV, cJ, cG, cD), cseg = lay_out([new[p] for p in changed])
    part = merge_clocks(cV, cJ, cG, cD, cseg, pools=np.array(changed))
    lo = np.where(np.isin(np.arange(n_pools), changed), 0, 1)
    hi = np.where(np.isin(np.arange(n_pools), changed), 10**9, 0)
    got = replace_pools(merged, lo, hi, part)
    fused = update_merged(merged, lo, hi, cV, cJ, cG, cD, cseg, changed)
    (V, J, G, D), seg = lay_out(new)
    want = merge_clocks(V, J, G, D, seg)
    for m in (got, fused):
        assert_same_merge(m, want)
    ends = got[0] + got[3]
    assert sorted(got[5].tolist()) == list(range(ends.shape[0]))
    assert ends[got[5]].tolist() == sorted(ends.tolist()) == got[7].tolist()
    assert got[6].all()


def test_replacing_pools_also_sheds_dead_entries():
    """An entry dropped in place (drop_job) is gone after the next replacement."""
    clocks = [
        (np.array([0.0, 10.0]), np.array([1, 5]), np.array([1, 1]), np.array([30.0, 5.0])),
        (np.array([10.0, 20.0]), np.array([2, 3]), np.array([2, 1]), np.array([1.0, 1.0])),
    ]
    (V, J, G, D), seg = lay_out(clocks)
    merged = merge_clocks(V, J, G, D, seg)
    drop_job(merged, 5)
    assert merged[6].tolist() == [True, True, False, True]
    assert merged[8].tolist() == [1, 2, 0, 1] and merged[9].tolist() == [2, 0, 1, 1]
    assert_reserved(merged)
    new = merge_clocks(np.array([15.0]), np.array([3]), np.array([1]), np.array([1.0]),
                       np.array([0, 1]), pools=np.array([1]))
    got = replace_pools(merged, np.array([1, 0]), np.array([0, 10]), new)
    assert got[1].tolist() == [1, 3] and got[6].all()


@settings(max_examples=300, deadline=None)
@given(xs=st.lists(st.one_of(st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, 1.5, 3e6])),
                   max_size=300))
def test_the_radix_argsort_sorts_like_numpy(xs):
    """Any floats but NaN (both signs, zeros, infinities, ties, tiny and huge magnitudes): an
    order that sorts them as numpy does (ties in any order)."""
    x = np.array(xs, dtype=np.float64)
    o = argsort_floats(x)
    assert sorted(o.tolist()) == list(range(x.shape[0]))
    assert x[o].tolist() == np.sort(x).tolist()


@settings(max_examples=300, deadline=None)
@given(base=st.integers(0, 2**62), shift=st.integers(0, 60), negative=st.booleans(),
       steps=st.lists(st.integers(0, 15), min_size=2, max_size=1500))
def test_the_radix_argsort_on_keys_differing_in_a_few_bits(base, shift, negative, steps):
    """Floats whose bits differ only in a few neighbouring places at any position (as the
    merges' ends differ in their top mantissa bits only), of either sign: the bits sorted on
    are found exactly (none left out at either end of the range)."""
    # no NaN or infinity; masked in Python first (base + 15 << 60 can pass 2^64)
    raw = np.array([(base + (k << shift)) & 0x7FEFFFFFFFFFFFFF for k in steps], dtype=np.uint64)
    x = raw.view(np.float64) * (-1.0 if negative else 1.0)
    o = argsort_floats(x)
    assert np.array_equal(x[o], np.sort(x)) and np.array_equal(np.sort(o), np.arange(x.size))


def test_the_radix_argsort_on_times_like_the_merges():
    """Ends over a month with sub-second parts and many ties, 20,000 of them."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 3e6, 20_000)
    x[::3] = np.round(x[::3], -2)
    o = argsort_floats(x)
    assert np.array_equal(x[o], np.sort(x)) and np.array_equal(np.sort(o), np.arange(x.size))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 80), n_pools=st.integers(1, 16))
def test_merging_many_clocks_orders_by_vst_then_job(seed, n, n_pools):
    """Up to 16 clocks, some empty (as when the bound moves on and every pool adds entries):
    the merge is the (VST, job) sort of all their entries, each with its pool."""
    rng = np.random.default_rng(seed)
    clocks = random_clocks(rng, n_pools, rng.permutation(3 * n + 3)[:n])
    (V, J, G, D), seg = lay_out(clocks)
    got = merge_clocks(V, J, G, D, seg)
    o = np.lexsort((J, V))
    pool = np.repeat(np.arange(n_pools), np.diff(seg))
    assert got[0].tolist() == V[o].tolist() and got[1].tolist() == J[o].tolist()
    assert got[4].tolist() == pool[o].tolist()
    assert_reserved(got)


def test_changed_span_finds_the_shared_head_and_tail():
    J = np.array([1, 2, 3, 4, 5])
    V = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    # job 3 taken out and job 4 moved earlier: head [1, 2], tail [5]
    assert changed_span(J, V, np.array([1, 2, 4, 5]), np.array([0.0, 1.0, 2.5, 4.0])) == (2, 1)
    assert changed_span(J, V, J, V) == (5, 0)
    assert changed_span(J, V, J[:3], V[:3]) == (3, 0)  # a shorter clock: its end is gone
    # head and tail never overlap, even when the clocks repeat
    assert changed_span(np.array([1, 1]), np.array([0.0, 0.0]), np.array([1]),
                        np.array([0.0])) == (1, 0)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 60), n_pools=st.integers(1, 5))
def test_replacing_only_the_changed_span_equals_merging_from_scratch(seed, n, n_pools):
    """New clocks share a head and a tail with the old ones (a job taken out, VSTs moved in
    between, the clock cut or extended at the end): replacing only the span between gives
    the full merge of the new clocks."""
    rng = np.random.default_rng(seed)
    old = random_clocks(rng, n_pools, rng.permutation(3 * n + 3)[:n])
    new = []
    for V, J, G, D in old:
        a = int(rng.integers(0, J.shape[0] + 1))
        b = int(rng.integers(a, J.shape[0] + 1))
        keep = np.ones(J.shape[0], dtype=bool)
        if a < b and rng.random() < 0.5:
            keep[a] = False  # a job taken out
        V2 = V.copy()
        V2[a:b] = np.maximum.accumulate(V2[a:b] - rng.integers(0, 2, b - a) * 100.0)
        V2 = np.maximum.accumulate(V2)  # clocks stay sorted
        new.append((V2[keep], J[keep], G[keep], D[keep]))
    (V, J, G, D), seg = lay_out(old)
    merged = merge_clocks(V, J, G, D, seg)
    lo, hi, parts, pools = np.ones(n_pools, int), np.zeros(n_pools, int), [], []
    for p, ((oV, oJ, _, _), (nV, nJ, nG, nD)) in enumerate(zip(old, new, strict=True)):
        pre, suf = changed_span(oJ, oV, nJ, nV)
        if pre + suf < oJ.shape[0]:
            lo[p], hi[p] = oJ[pre], oJ[oJ.shape[0] - suf - 1]
        if pre + suf < nJ.shape[0]:
            e = nJ.shape[0] - suf
            parts.append((nV[pre:e], nJ[pre:e], nG[pre:e], nD[pre:e]))
            pools.append(p)
    (cV, cJ, cG, cD), cseg = lay_out(parts) if parts else ((np.empty(0),) * 4, np.zeros(1, int))
    got = replace_pools(merged, lo, hi, merge_clocks(cV, cJ, cG, cD, cseg, pools=np.array(pools,
                                                                                        int)))
    fused = update_merged(merged, lo, hi, cV, cJ, cG, cD, cseg, pools)
    (V, J, G, D), seg = lay_out(new)
    want = merge_clocks(V, J, G, D, seg)
    for m in (got, fused):
        assert_same_merge(m, want)


def direct_pass(clocks, horizon, n_arr, now, C, free, run_e, run_g, dead=()):
    """Figure 6's visit written out plainly: the pending jobs and the rest before the horizon,
    in (VST, job) order; each candidate checked with MaxReservation over a ResourcePlan of
    the running jobs and the jobs before it."""
    rows = [(V, j, g, d) for Vs, Js, Gs, Ds in clocks
            for V, j, g, d in zip(Vs, Js, Gs, Ds, strict=True)
            if (j < n_arr or V < horizon) and j not in dead]
    rows.sort(key=lambda r: (r[0], r[1]))
    arrived = [i for i, r in enumerate(rows) if r[1] < n_arr]
    if not arrived:
        return []
    plan = ResourcePlan()
    plan.add_busy(np.array(run_e), np.array(run_g, dtype=np.int64), now)
    out = []
    for v, j, g, d in rows[: arrived[-1] + 1]:
        at_now = plan.level_at(now)
        if j < n_arr and g <= free and at_now + g <= C:
            out.append((j, plan.max_reservation(now, d) + g > C))
        plan.reserve(g, v, d)
        if plan.level_at(now) >= C:
            break
    return out


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 50), n_pools=st.integers(1, 4))
@example(seed=361, n=8, n_pools=3)
def test_bulk_pass_equals_a_direct_visit(seed, n, n_pools):
    """Same candidates in the same order, and the same MaxReservation verdicts. (The example:
    the running jobs fill the cluster at now and the first visited job lies past the cut;
    the visit ends there, so a zero-wide pending job after it is no candidate.)"""
    rng = np.random.default_rng(seed)
    clocks = random_clocks(rng, n_pools, rng.permutation(2 * n + 2)[:n])
    now = float(rng.integers(0, 3) * 100)
    clocks = [(np.maximum(V, now), J, G, D) for V, J, G, D in clocks]  # VSTs are never past
    horizon = float(rng.integers(0, 14) * 100)
    n_arr = int(rng.integers(0, 2 * n + 3))
    C = int(rng.integers(4, 24))
    free = int(rng.integers(0, C + 1))
    k = int(rng.integers(0, 4))
    run_e = (now + rng.choice([50.0, 100.0, 400.0], k)).tolist()
    run_g = rng.integers(1, 3, k).tolist()
    (V, J, G, D), seg = lay_out(clocks)
    merged = merge_clocks(V, J, G, D, seg)
    dead = set(rng.choice(J, min(J.shape[0], int(rng.integers(0, 3))), replace=False).tolist())
    for j in dead:
        drop_job(merged, j)
    want = direct_pass(clocks, horizon, n_arr, now, C, free, run_e, run_g, dead)
    # the longest possible candidate (a live pending job within the free GPUs), or a bound
    fit = (J < n_arr) & (G <= free) & ~np.isin(J, list(dead))
    longest = float(D[fit].max()) if fit.any() else 0.0
    # the live pending entries: told, the search for candidates ends once it met them all
    n_pending = int(((J < n_arr) & ~np.isin(J, list(dead))).sum())
    for bound in (np.inf, longest, longest + float(rng.integers(0, 3) * 100)):
        for told in (-1, n_pending):
            jobs, _, _, _, fails = bulk_pass(
                merged, horizon=horizon, n_arrived=n_arr, now=now, capacity=C, free=free,
                run_end=np.array(run_e), run_gpus=np.array(run_g), longest=bound,
                n_pending=told)
            assert list(zip(jobs.tolist(), fails.tolist(), strict=True)) == want


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 50), n_pools=st.integers(1, 4))
def test_bulk_pass_with_the_policys_horizon_equals_a_direct_visit(seed, n, n_pools):
    """With the horizon as the policy sets it (now + the longest pending job within the free
    GPUs), no candidate reads the plan past the horizon, and the pass counts the reserved
    GPUs that ended by each start straight from the end order: the same candidates and
    verdicts as the plain visit, with dead entries and jobs of no width or duration."""
    clocks, merged, kw, dead = random_pass(seed, n, n_pools, policy_horizon=True)
    want = direct_pass(clocks, kw["horizon"], kw["n_arrived"], kw["now"], kw["capacity"],
                       kw["free"], kw["run_end"].tolist(), kw["run_gpus"].tolist(), dead)
    jobs, _, _, _, fails = bulk_pass(merged, **kw)
    assert list(zip(jobs.tolist(), fails.tolist(), strict=True)) == want


def _walk_stops_at(D, G, fails, k) -> bool:
    """Whether candidate k is reached by the walk (no earlier failed candidate no wider and no
    shorter) and passes MaxReservation: written out plainly."""
    return not fails[k] and not any(fails[c] and G[c] <= G[k] and D[c] <= D[k]
                                    for c in range(k))


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 50), n_pools=st.integers(1, 4))
def test_a_pass_ending_at_a_sure_start_returns_the_candidates_up_to_it(seed, n, n_pools):
    """With the pools' free capacities and an instant, the pass returns a prefix of the full
    pass's candidates (and verdicts): up to the first one that is sure (VST by the instant,
    its pool's free capacity at least its width) if the walk reaches it and it passes, and
    all of them otherwise; always so for a sure one before the cut with room at now."""
    rng = np.random.default_rng(seed)
    clocks = random_clocks(rng, n_pools, rng.permutation(2 * n + 2)[:n])
    now = float(rng.integers(0, 3) * 100)
    clocks = [(np.maximum(V, now), J, G, D) for V, J, G, D in clocks]
    n_arr = int(rng.integers(0, 2 * n + 3))
    C = int(rng.integers(4, 24))
    free = int(rng.integers(0, C + 1))
    k = int(rng.integers(0, 4))
    run_e = np.array((now + rng.choice([50.0, 100.0, 400.0], k)).tolist())
    run_g = rng.integers(1, 3, k)
    (V, J, G, D), seg = lay_out(clocks)
    merged = merge_clocks(V, J, G, D, seg)
    fit = (J < n_arr) & (G <= free)
    longest = float(D[fit].max()) if fit.any() else 0.0
    kw = dict(horizon=now + longest, n_arrived=n_arr, now=now, capacity=C, free=free,
              run_end=run_e, run_gpus=run_g, longest=longest, n_pending=int((J < n_arr).sum()))
    full = bulk_pass(merged, **kw)
    pool_free = rng.integers(0, 5, n_pools)
    by = now + float(rng.choice([0.0, 1e-6, 100.0, 1e9]))
    got = bulk_pass(merged, sure_free=pool_free, sure_by=by, **kw)
    m = got[0].shape[0]
    for a, b in zip(got, full, strict=True):
        assert a.tolist() == b[:m].tolist()
    pool = {int(j): p for p, c in enumerate(clocks) for j in c[1]}
    sure = [c for c in range(full[0].shape[0])
            if full[1][c] <= by and pool_free[pool[int(full[0][c])]] >= full[3][c]]
    if m < full[0].shape[0]:  # cut short: at the first sure candidate, where the walk stops
        assert sure and m == sure[0] + 1 and _walk_stops_at(full[2], full[3], full[4], sure[0])
    # it is looked for before the cut (now + the longest candidate; the policy's sure ones,
    # by now + 1 us, are there) while the running jobs leave room at now
    cut = now + longest
    if (sure and full[1][sure[0]] <= cut and int(run_g[run_e > now].sum()) < C
            and _walk_stops_at(full[2], full[3], full[4], sure[0])):
        assert m == sure[0] + 1


def test_pending_tail_takes_each_pools_pending_jobs_past_the_merge_in_visit_order():
    """Pool 0: jobs 1, 4 pending (VSTs 10, 50), job 9 future; pool 1: jobs 2, 3 pending (VSTs
    50, 70). With the merge cut at 50 (pool 0's first entry in it, none of pool 1's), the
    tail is jobs 2 and 4 at 50 (job order breaks the tie), then 3; job 9 is not pending."""
    clocks = [(np.array([1, 4, 9]), np.array([10.0, 50.0, 60.0])),
              (np.array([2, 3]), np.array([50.0, 70.0]))]
    gpus, dur = np.arange(10) + 1, np.arange(10) * 10.0
    V, J, G, D = pending_tail(clocks, [1, 0], [2, 2], gpus, dur)
    assert V.tolist() == [50.0, 50.0, 70.0] and J.tolist() == [2, 4, 3]
    assert G.tolist() == [3, 5, 4] and D.tolist() == [20.0, 40.0, 30.0]
    assert pending_tail(clocks, [2, 2], [2, 2], gpus, dur) is None


def test_a_visit_that_fills_the_cluster_on_the_merges_last_entry_meets_no_tail():
    """now = 0, 4 GPUs. Pool 0: job 0 (pending) and job 5 (future), both 2 wide at VST 0;
    pool 1: job 1 (pending, zero-wide) at VST 100. Job 5 fills the cluster at now, which ends
    the visit; with the merge cut at 50 that is its last entry, and job 1, in the tail, must
    not become a candidate either."""
    clocks = [(np.array([0.0, 0.0]), np.array([0, 5]), np.array([2, 2]), np.array([10.0, 10.0])),
              (np.array([100.0]), np.array([1]), np.array([0]), np.array([10.0]))]
    kw = dict(horizon=10.0, n_arrived=2, now=0.0, capacity=4, free=4, run_end=np.empty(0),
              run_gpus=np.empty(0, dtype=np.int64), longest=10.0, n_pending=2)
    (V, J, G, D), seg = lay_out(clocks)
    assert bulk_pass(merge_clocks(V, J, G, D, seg), **kw)[0].tolist() == [0]
    (V, J, G, D), seg = lay_out([clocks[0], tuple(x[:0] for x in clocks[1])])
    tail = (np.array([100.0]), np.array([1]), np.array([0]), np.array([10.0]))
    assert bulk_pass(merge_clocks(V, J, G, D, seg), tail=tail, **kw)[0].tolist() == [0]


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 50), n_pools=st.integers(1, 4))
def test_a_pass_over_a_merge_cut_past_the_horizon_plus_its_pending_tail_is_unchanged(
        seed, n, n_pools):
    """Merging only the entries before a bound past the horizon (and past now + the longest
    possible candidate), and handing the pass the pending jobs past it as a tail, gives the
    same candidates, in the same order, with the same verdicts as the whole merge; the
    merge cut from the whole one equals the one merged from the cut clocks."""
    rng, clocks, (V, J, G, D), seg, kw = _cut_pass_case(seed, n, n_pools)
    horizon, n_arr = kw["horizon"], kw["n_arrived"]
    whole = merge_clocks(V, J, G, D, seg)
    want = bulk_pass(whole, **kw)
    bound = horizon + float(rng.choice([0.5, 50.0, 100.0, 1000.0]))
    cut = [tuple(x[V_ < bound] for x in (V_, J_, G_, D_)) for V_, J_, G_, D_ in clocks]
    (cV, cJ, cG, cD), cseg = lay_out(cut)
    merged = merge_clocks(cV, cJ, cG, cD, cseg)
    assert_same_merge(cut_merged(whole, bound), merged)
    tail = pending_tail([(J_, V_) for V_, J_, _, _ in clocks], [c[0].shape[0] for c in cut],
                        [int((J_ < n_arr).sum()) for _, J_, _, _ in clocks], G_all(clocks, n),
                        D_all(clocks, n))
    for x, y in zip(bulk_pass(merged, tail=tail, **kw), want, strict=True):
        assert x.tolist() == y.tolist()


def G_all(clocks: list[tuple], n: int) -> np.ndarray:  # noqa: N802
    """Trace-wide GPUs (indexed by job) of the jobs laid out in ``clocks``."""
    out = np.zeros(2 * n + 3, dtype=np.int64)
    for _, J, G, _ in clocks:
        out[J] = G
    return out


def D_all(clocks: list[tuple], n: int) -> np.ndarray:  # noqa: N802
    """Trace-wide durations (indexed by job) of the jobs laid out in ``clocks``."""
    out = np.zeros(2 * n + 3, dtype=np.float64)
    for _, J, _, D in clocks:
        out[J] = D
    return out


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 50), n_pools=st.integers(1, 5))
def test_next_vst_is_the_per_pool_first_vst_ahead(seed, n, n_pools):
    """The wake-up read off the merged clocks equals the per-pool rule: each pool's first VST
    after now counts if its job has arrived or arrives before the horizon; dead entries are
    not in any clock."""
    rng = np.random.default_rng(seed)
    clocks = random_clocks(rng, n_pools, rng.permutation(2 * n + 2)[:n])
    (V, J, G, D), seg = lay_out(clocks)
    merged = merge_clocks(V, J, G, D, seg)
    dead = set(rng.choice(J, min(J.shape[0], int(rng.integers(0, 3))), replace=False).tolist())
    for j in dead:
        drop_job(merged, j)
    submit = rng.integers(0, 12, 2 * n + 3) * 100.0
    now = float(rng.integers(0, 12) * 100)
    n_arr = int(rng.integers(0, 2 * n + 3))
    horizon = float(rng.integers(0, 14) * 100)
    want = np.inf
    for Vs, Js, _, _ in clocks:
        live = [(v, j) for v, j in zip(Vs.tolist(), Js.tolist(), strict=True) if j not in dead]
        ahead = [(v, j) for v, j in live if v > now]
        if ahead and (ahead[0][1] < n_arr or submit[ahead[0][1]] < horizon):
            want = min(want, ahead[0][0])
    assert next_vst(merged, now=now, n_arrived=n_arr, submit=submit, horizon=horizon,
                    n_pools=n_pools) == want


def test_walk_skips_dominated_and_failed_verdict_candidates_and_counts_them():
    """now = 100. Candidates (D, width, pool, fails MaxReservation):
    0: (30, 2, 0, yes) -> skipped, and every later job at least 2 wide lasting >= 30 too;
    1: (40, 2, 1, no)  -> dominated by 0 (no narrower, no shorter): skipped;
    2: (10, 1, 0, no)  -> pool 0 width 1 has no verdict: the walk stops there first;
       with the verdict "fails past 112" it ends at 110: its guard must run;
    3: (20, 1, 0, no)  -> ends at 120 > 112: skipped, counts (1, 2) added;
    4: (20, 2, 1, no)  -> shorter than 0: needs a verdict; with "never": its guard runs."""
    walk = CandidateWalk(np.array([30.0, 40, 10, 20, 20]), np.array([2, 2, 1, 1, 2]),
                         np.array([0, 1, 0, 0, 1]), np.array([True, False, False, False, False]),
                         n_pools=2, now=100.0)
    i = walk.next(0)
    assert i == 2 and walk.needs_verdict(2)
    walk.set_verdict(0, 1, 112.0, 1, 2)
    assert walk.next(2) == 2 and not walk.needs_verdict(2)
    i = walk.next(3)
    assert i == 4 and walk.needs_verdict(4) and walk.counts.tolist() == [1, 2]
    walk.set_verdict(1, 2, np.inf, 0, 0)
    assert walk.next(4) == 4 and not walk.needs_verdict(4)
    assert walk.next(5) == -1 and walk.counts.tolist() == [1, 2]
    # "always" (-inf) skips every candidate of that pool and width, counting each
    always = CandidateWalk(np.array([5.0, 6.0]), np.array([1, 1]), np.array([0, 0]),
                           np.array([False, False]), n_pools=1, now=0.0)
    assert always.next(0) == 0
    always.set_verdict(0, 1, -np.inf, 1, 0)
    assert always.next(0) == -1 and always.counts.tolist() == [2, 0]


def test_verdicts_worked_out_on_demand_read_the_plan_only_as_far_as_asked():
    """C = 4, now = 0, one running GPU until 20, free = 3, jobs 0-2 pending (n_arrived = 3):
    future job 3 reserves 2 GPUs on [5, 15); job 0 (VST 10, 1 wide, 30 s) sees at most
    1 + 2 = 3 on [0, 30): passes, reserves [10, 40); job 1 (VST 30, 2 wide, 20 s) sees 4 on
    [10, 15): fails; job 2 (VST 40, 1 wide, 50 s) sees 4: fails. The first verdict reads
    the plan up to job 0's VST (entries of jobs 3 and 0), all of them up to job 2's."""
    clocks = [(np.array([5.0]), np.array([3]), np.array([2]), np.array([10.0])),
              (np.array([10.0, 30.0, 40.0]), np.array([0, 1, 2]), np.array([1, 2, 1]),
               np.array([30.0, 20.0, 50.0]))]
    (V, J, G, D), seg = lay_out(clocks)
    found = lazy_pass(merge_clocks(V, J, G, D, seg), horizon=50.0, n_arrived=3, now=0.0,
                      capacity=4, free=3, run_end=np.array([20.0]), run_gpus=np.array([1]),
                      longest=50.0, n_pending=3)
    assert found.jobs.tolist() == [0, 1, 2] and found.known == 0
    found.verdicts_upto(1)
    assert found.known == 1 and found.fails[:1].tolist() == [False] and found.plan_read == 2
    found.verdicts_upto(1)  # nothing more to do
    assert found.known == 1 and found.plan_read == 2
    # a walk stopping at the first candidate (its guard's verdict unknown) asks for no more
    fresh = lazy_pass(merge_clocks(V, J, G, D, seg), horizon=50.0, n_arrived=3, now=0.0,
                      capacity=4, free=3, run_end=np.array([20.0]), run_gpus=np.array([1]),
                      longest=50.0, n_pending=3)
    with patch.object(vc_pass, "_FIRST_VERDICTS", 1):
        walk = CandidateWalk(fresh.durations, fresh.gpus, np.zeros(3, dtype=np.int64), fresh,
                             n_pools=1, now=0.0)
        assert walk.next(0) == 0 and walk.needs_verdict(0)
    assert fresh.known == 1 and fresh.plan_read == 2
    assert found.known == 1 and found.plan_read == 2
    found.verdicts_upto(10)  # at most every candidate
    assert found.known == 3 and found.fails.tolist() == [False, True, True]
    assert found.plan_read == 4


def random_pass(seed: int, n: int, n_pools: int, policy_horizon: bool):
    """A random pass's inputs as the pass tests draw them: (clocks, merged, keywords for
    bulk_pass, dead jobs). With ``policy_horizon`` the horizon is now + the longest pending
    job within the free GPUs (no candidate reads past it), else drawn at random."""
    rng = np.random.default_rng(seed)
    clocks = random_clocks(rng, n_pools, rng.permutation(2 * n + 2)[:n])
    now = float(rng.integers(0, 3) * 100)
    clocks = [(np.maximum(V, now), J, G, D) for V, J, G, D in clocks]
    n_arr = int(rng.integers(0, 2 * n + 3))
    C = int(rng.integers(4, 24))
    free = int(rng.integers(0, C + 1))
    k = int(rng.integers(0, 4))
    run_e = now + rng.choice([50.0, 100.0, 400.0], k)
    run_g = rng.integers(1, 3, k)
    (V, J, G, D), seg = lay_out(clocks)
    merged = merge_clocks(V, J, G, D, seg)
    dead = set(rng.choice(J, min(J.shape[0], int(rng.integers(0, 4))), replace=False).tolist())
    for j in dead:
        drop_job(merged, j)
    fit = (J < n_arr) & (G <= free) & ~np.isin(J, list(dead))
    longest = float(D[fit].max()) if fit.any() else 0.0
    horizon = now + longest if policy_horizon else float(rng.integers(0, 14) * 100)
    kw = dict(horizon=horizon, n_arrived=n_arr, now=now, capacity=C, free=free, run_end=run_e,
              run_gpus=run_g, longest=longest if policy_horizon else np.inf,
              n_pending=int(((J < n_arr) & ~np.isin(J, list(dead))).sum()))
    return clocks, merged, kw, dead


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 50), n_pools=st.integers(1, 4),
       policy_horizon=st.booleans(), steps=st.lists(st.integers(0, 60), max_size=6))
def test_verdicts_worked_out_in_steps_equal_a_direct_visit(seed, n, n_pools, policy_horizon,
                                                           steps):
    """Asking for the verdicts in any increasing steps (a call that reads the plan past the
    horizon after one that read it directly from the end order, repeated and shrinking
    asks) gives the plain visit's candidates and verdicts, and never reads more of the plan
    than all of them at once; with a sure candidate, a prefix of them."""
    clocks, merged, kw, dead = random_pass(seed, n, n_pools, policy_horizon)
    want = direct_pass(clocks, kw["horizon"], kw["n_arrived"], kw["now"], kw["capacity"],
                       kw["free"], kw["run_end"].tolist(), kw["run_gpus"].tolist(), dead)
    whole = lazy_pass(merged, **kw)
    whole.verdicts_upto(len(want))
    found = lazy_pass(merged, **kw)
    assert found.jobs.tolist() == [j for j, _ in want]
    for k in steps:
        before = found.known
        found.verdicts_upto(k)
        assert found.known == max(before, min(k, len(want)))
        assert found.fails[: found.known].tolist() == [f for _, f in want[: found.known]]
        assert found.plan_read <= whole.plan_read
    found.verdicts_upto(len(want))
    assert list(zip(found.jobs.tolist(), found.fails.tolist(), strict=True)) == want
    assert found.plan_read == whole.plan_read
    # a sure candidate: every pool with room, any VST by now + 100 s
    sure = lazy_pass(merged, sure_free=np.full(n_pools, 99), sure_by=kw["now"] + 100.0, **kw)
    sure.verdicts_upto(sure.jobs.shape[0])
    got = list(zip(sure.jobs.tolist(), sure.fails.tolist(), strict=True))
    assert got == want[: len(got)]


def walk_all(walk: CandidateWalk, rng: np.random.Generator, pools: np.ndarray,
             gpus: np.ndarray) -> list:
    """Walk a pass as the policy does (candidate i of pool ``pools[i]``, ``gpus[i]`` wide),
    verdicts drawn per (pool, width) and each guard run starting its job with chance 1/4
    (both from ``rng``): the candidates stopped at, in order, and the counts."""
    seen, verdicts = [], {}
    i = walk.next(0)
    while i >= 0:
        if walk.needs_verdict(i):
            key = (int(pools[i]), int(gpus[i]))
            if key not in verdicts:
                verdicts[key] = (float(rng.choice([-np.inf, 150.0, 300.0, np.inf])),
                                 int(rng.integers(0, 3)), int(rng.integers(0, 3)))
            walk.set_verdict(*key, *verdicts[key])
            seen.append(("verdict", i))
            i = walk.next(i)
            continue
        seen.append(("guard", i))
        if rng.random() < 0.25:
            break
        i = walk.next(i + 1)
    return [seen, walk.counts.tolist()]


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 50), n_pools=st.integers(1, 4),
       first=st.integers(1, 4))
def test_a_walk_over_verdicts_worked_out_on_demand_equals_one_over_all_of_them(seed, n,
                                                                             n_pools, first):
    """The walk asks for MaxReservation verdicts as it reaches candidates (``first`` at
    first, then twice as many): it stops at the same candidates, in the same order, with
    the same counts as over verdicts all worked out."""
    _, merged, kw, _ = random_pass(seed, n, n_pools, True)
    full = lazy_pass(merged, **kw)
    full.verdicts_upto(full.jobs.shape[0])
    lazy = lazy_pass(merged, **kw)
    pools = np.arange(full.jobs.shape[0]) % n_pools
    runs = []
    widest = int(full.gpus.max()) if full.gpus.size else 0
    with patch.object(vc_pass, "_FIRST_VERDICTS", first):
        for fails, sized in ((full.fails.copy(), -1), (lazy, -1),
                             (lazy_pass(merged, **kw), widest + first % 3)):
            walk = CandidateWalk(full.durations, full.gpus, pools, fails, n_pools, kw["now"],
                                 sized)  # (sized for the widest candidate or wider: the same)
            runs.append(walk_all(walk, np.random.default_rng(seed), pools, full.gpus))
    assert runs[0] == runs[1] == runs[2]
    assert lazy.fails[: lazy.known].tolist() == full.fails[: lazy.known].tolist()


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10**6), n_pools=st.integers(1, 4), sizes=st.lists(
    st.integers(0, 40), min_size=1, max_size=5))
def test_walks_taking_one_set_of_tables_in_turn_equal_walks_with_new_ones(seed, n_pools, sizes):
    """Walks over several passes in a row (verdicts on demand, set per pool and width) taking
    the tables one WalkTables keeps, each cleared only where the walk before set verdicts:
    each stops at the same candidates with the same counts as a walk with tables of its
    own."""
    tables = WalkTables()
    for k, n in enumerate(sizes):
        _, merged, kw, _ = random_pass(seed + k, n, n_pools, True)
        runs = []
        for shared in (tables, None):
            found = lazy_pass(merged, **kw)
            pools = np.arange(found.jobs.shape[0]) % n_pools
            walk = CandidateWalk(found.durations, found.gpus, pools, found, n_pools, kw["now"],
                                 24, shared)
            runs.append(walk_all(walk, np.random.default_rng(seed + k), pools, found.gpus))
        assert runs[0] == runs[1]


def test_the_pending_tail_is_merged_only_when_the_walk_gets_past_the_other_candidates():
    """C = 10, 4 GPUs running until 60 s, free = 6. Pool 0's pending job 0 (VST 0, 1 wide,
    50 s: level 4 on [0, 50), passes) is merged; pool 1's pending job 1 (VST 500, past the
    bound, 4 wide: wider than every merged candidate; level 5 after job 0, 9 <= 10: a
    candidate that passes) is in the tail. A walk stopping at job 0 never asks for the
    tail; one going past it gets job 1 next, asking for the tail once, with the tables per
    width grown to 4 GPUs (job 1's verdict is kept there)."""
    merged = merge_clocks(np.array([0.0]), np.array([0]), np.array([1]), np.array([50.0]),
                          np.array([0, 1]))
    asked = []

    def tail():
        asked.append(1)
        return (np.array([500.0]), np.array([1]), np.array([4]), np.array([50.0]))

    kw = dict(horizon=50.0, n_arrived=2, now=0.0, capacity=10, free=6,
              run_end=np.array([60.0]), run_gpus=np.array([4]), longest=50.0, n_pending=2,
              n_tail=1, job_pool=np.array([0, 1]))
    found = lazy_pass(merged, tail=tail, **kw)
    walk = CandidateWalk(found.durations, found.gpus, found.pools, found, n_pools=2, now=0.0)
    assert walk.next(0) == 0 and walk.needs_verdict(0) and asked == []
    found = lazy_pass(merged, tail=tail, **kw)
    walk = CandidateWalk(found.durations, found.gpus, found.pools, found, n_pools=2, now=0.0)
    walk.set_verdict(0, 1, -np.inf, 1, 0)  # job 0's guard fails without a re-run
    assert walk.next(0) == 1 and walk.needs_verdict(1) and asked == [1]
    assert found.jobs.tolist() == [0, 1] and found.pools.tolist() == [0, 1]
    walk.set_verdict(1, 4, np.inf, 0, 0)
    assert walk.next(1) == 1 and walk.next(2) == -1 and asked == [1]
    assert walk.counts.tolist() == [1, 0] and found.fails.tolist() == [False, False]


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 50), n_pools=st.integers(1, 4),
       first=st.integers(1, 4))
def test_a_walk_with_the_tail_found_on_demand_equals_one_over_the_whole_pass(seed, n, n_pools,
                                                                           first):
    """A merge cut past the horizon with its pending tail: walking the lazy pass (verdicts on
    demand, the tail merged when the walk gets past the others) stops at the same
    candidates, in the same order, with the same counts, as walking bulk_pass's whole
    result; the tail is merged at most once, and only by a walk that got past every
    merged candidate."""
    rng, clocks, (V, J, G, D), seg, kw = _cut_pass_case(seed, n, n_pools)
    horizon, n_arr, now = kw["horizon"], kw["n_arrived"], kw["now"]
    bound = horizon + float(rng.choice([0.5, 50.0, 100.0, 1000.0]))
    cut = [tuple(x[V_ < bound] for x in (V_, J_, G_, D_)) for V_, J_, G_, D_ in clocks]
    (cV, cJ, cG, cD), cseg = lay_out(cut)
    merged = merge_clocks(cV, cJ, cG, cD, cseg)
    n_pend = [int((J_ < n_arr).sum()) for _, J_, _, _ in clocks]
    starts = [c[0].shape[0] for c in cut]
    tail = pending_tail([(J_, V_) for V_, J_, _, _ in clocks], starts, n_pend,
                        G_all(clocks, n), D_all(clocks, n))
    job_pool = np.zeros(2 * n + 3, dtype=np.int64)
    for p, (_, J_, _, _) in enumerate(clocks):
        job_pool[J_] = p
    jobs, _, durations, gpus, fails = bulk_pass(merged, tail=tail, **kw)
    asked = []

    def later():
        asked.append(1)
        return tail

    found = lazy_pass(merged, tail=later, n_tail=sum(max(0, a - b) for a, b in zip(
        n_pend, starts, strict=True)), job_pool=job_pool, **kw)
    n_merged = found.jobs.shape[0]
    sized = lazy_pass(merged, tail=tail, job_pool=job_pool, **kw)  # tables sized up front
    runs = []
    with patch.object(vc_pass, "_FIRST_VERDICTS", first):
        for f in (fails, found, sized):
            walk = CandidateWalk(durations if f is fails else f.durations,
                                 gpus if f is fails else f.gpus,
                                 job_pool[jobs] if f is fails else f.pools, f, n_pools, now,
                                 int(G.max()) if f is sized and G.size else -1)
            runs.append(walk_all(walk, np.random.default_rng(seed), job_pool[jobs], gpus))
    assert runs[0] == runs[1] == runs[2]
    assert len(asked) <= 1
    if asked:
        assert found.jobs.tolist() == jobs.tolist()[: found.jobs.shape[0]]
    else:
        assert all(i < n_merged for _, i in runs[1][0])


def _cut_pass_case(seed: int, n: int, n_pools: int):
    """A random pass for the cut-merge tests: (rng, the clocks, their lay-out, its segments,
    the pass's keywords). Short jobs (a tenth of the time) keep the horizon early, so many
    pending jobs lie past it."""
    rng = np.random.default_rng(seed)
    clocks = random_clocks(rng, n_pools, rng.permutation(2 * n + 2)[:n])
    now = float(rng.integers(0, 3) * 100)
    scale = float(rng.choice([1.0, 10.0]))
    clocks = [(np.maximum(V, now), J, G, D / scale) for V, J, G, D in clocks]
    n_arr = int(rng.integers(0, 2 * n + 3))
    C = int(rng.integers(4, 24))
    free = int(rng.integers(0, C + 1))
    (V, J, G, D), seg = lay_out(clocks)
    fit = (J < n_arr) & (G <= free)
    longest = float(D[fit].max()) if fit.any() else 0.0
    k = int(rng.integers(0, 4))
    kw = dict(horizon=now + longest, n_arrived=n_arr, now=now, capacity=C, free=free,
              run_end=now + rng.choice([50.0, 100.0, 400.0], k),
              run_gpus=rng.integers(1, 3, k), longest=longest,
              n_pending=int((J < n_arr).sum()))
    return rng, clocks, (V, J, G, D), seg, kw


def _later_pass(rng: np.random.Generator, merged: tuple, kw: dict, dead: set,
                policy_horizon: bool) -> dict:
    """The keywords of a later pass over the same merge as ``kw``'s: an instant from ``kw``'s
    ``now`` up to the first merged VST (a clock never starts before now), the running jobs
    but those over by then, more jobs arrived, other free GPUs and another horizon."""
    V, J, G, D = merged[:4]
    first = float(V.min()) if V.shape[0] else kw["now"] + 300.0
    now = float(rng.choice([kw["now"], (kw["now"] + first) / 2, first, kw["now"] + 50.0]))
    now = min(now, first)
    keep = kw["run_end"] > now
    n_arr = kw["n_arrived"] + int(rng.integers(0, 4))
    C = kw["capacity"]
    free = int(rng.integers(0, C + 1))
    alive = ~np.isin(J, list(dead))
    fit = (J < n_arr) & (G <= free) & alive
    longest = float(D[fit].max()) if fit.any() else 0.0
    horizon = now + longest if policy_horizon else float(rng.integers(0, 14) * 100)
    return dict(horizon=horizon, n_arrived=n_arr, now=now, capacity=C, free=free,
                run_end=kw["run_end"][keep], run_gpus=kw["run_gpus"][keep],
                longest=longest if policy_horizon else np.inf,
                n_pending=int(((J < n_arr) & alive).sum()))


@settings(max_examples=600, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 50), n_pools=st.integers(1, 4),
       policy_horizon=st.booleans(), steps=st.lists(st.integers(0, 5), max_size=3),
       sure=st.booleans())
def test_a_pass_taking_over_the_last_ones_plan_equals_a_direct_visit(seed, n, n_pools,
                                                                    policy_horizon, steps,
                                                                    sure):
    """A pass over the same merge with the same plan key as the last one (its verdicts worked
    out for a few candidates, or none) takes over the plan's levels that one worked out:
    at a later instant, with the running jobs over by then gone, more jobs arrived, other
    free GPUs and a horizon nearer or farther (or a visit ended elsewhere), it still gives
    the plain visit's candidates and verdicts, and a third pass goes on from the second
    alike."""
    clocks, merged, kw, dead = random_pass(seed, n, n_pools, policy_horizon)
    rng = np.random.default_rng(seed + 1)
    scratch = vc_pass.PassScratch()
    key = ("plan", 7)
    sure_kw = dict(sure_free=np.full(n_pools, 99), sure_by=kw["now"]) if sure else {}
    first = lazy_pass(merged, scratch=scratch, plan_key=key, **sure_kw, **kw)
    for k in steps:
        first.verdicts_upto(k)
    for _ in range(3):
        kw = _later_pass(rng, merged, kw, dead, policy_horizon)
        want = direct_pass(clocks, kw["horizon"], kw["n_arrived"], kw["now"], kw["capacity"],
                           kw["free"], kw["run_end"].tolist(), kw["run_gpus"].tolist(), dead)
        later = lazy_pass(merged, scratch=scratch, plan_key=key, **kw)
        assert scratch.last[2] is later
        for k in np.sort(rng.integers(0, 6, 2)):
            later.verdicts_upto(int(k))
            assert later.fails[: later.known].tolist() == [f for _, f in want[: later.known]]
        later.verdicts_upto(len(want))
        assert list(zip(later.jobs.tolist(), later.fails.tolist(), strict=True)) == want


def _first_then_wider_pass(V, J, G, D):
    """Cluster of 8, no running job: a first pass at horizon 300 with one pending job, then a
    second at horizon 600 with two, on the same scratch (so the second may take the first's
    levels over). Returns (first pass after its first verdict, second after its two, the
    plain visit's verdicts of the second)."""
    merged = merge_clocks(V, J, G, D, np.array([0, 4]))
    scratch = vc_pass.PassScratch()
    kw = dict(now=0.0, capacity=8, free=8, run_end=np.empty(0), run_gpus=np.empty(0, int))
    first = lazy_pass(merged, horizon=300.0, n_arrived=1, longest=300.0, n_pending=1,
                      scratch=scratch, plan_key=0, **kw)
    first.verdicts_upto(1)
    later = lazy_pass(merged, horizon=600.0, n_arrived=2, longest=600.0, n_pending=2,
                      scratch=scratch, plan_key=0, **kw)
    later.verdicts_upto(2)
    return first, later, direct_pass([(V, J, G, D)], 600.0, 2, 0.0, 8, 8, [], [])


def test_a_pass_takes_over_only_the_levels_before_the_nearer_horizon():
    """Hand case, cluster of 8, entries (VST, job, GPUs, duration): (200, 5, 3, 500) and
    (300, 6, 3, 500) future, (300, 0, 2, 300) and (400, 1, 3, 600) pending from the second
    pass on. The first pass (job 0 the only pending one: horizon 300) reads the level at 300
    without job 6 (at the horizon and not pending, it is not visited): 3 + 2 = 5. The second
    (horizon 600) visits job 6: the level at 300 is 8, so job 1 (reading [0, 400)) fails
    (8 + 3 > 8); the level it would take over from the first pass, 5, would pass it."""
    V = np.array([200.0, 300.0, 300.0, 400.0])
    J = np.array([5, 0, 6, 1])
    G = np.array([3, 2, 3, 3])
    D = np.array([500.0, 300.0, 500.0, 600.0])
    first, later, want = _first_then_wider_pass(V, J, G, D)
    assert first.jobs.tolist() == [0] and first.fails.tolist() == [False]
    assert first.plan_read == 3
    assert want == [(0, False), (1, True)]
    assert list(zip(later.jobs.tolist(), later.fails.tolist(), strict=True)) == want


def test_a_pass_whose_visit_ends_at_now_takes_over_no_level_there():
    """Hand case, cluster of 4, no running job: jobs 0, 1, 2 pending at VST 100 (2 GPUs, 100 s
    each), job 3 pending at 300 (1 GPU, 500 s). The first pass (now 0, horizon 500) reads
    the level at 100: all three, 6. The second, at 100 (horizon 600), ends its visit at job
    1 (jobs 0 and 1 fill the cluster at now), so its level at 100 is 4 and job 1 (after
    job 0 at the same VST: it reads the level there without itself, 2) passes; the level
    taken over from the first pass would fail it (6 - 2 + 2 > 4)."""
    V = np.array([100.0, 100.0, 100.0, 300.0])
    J = np.array([0, 1, 2, 3])
    G = np.array([2, 2, 2, 1])
    D = np.array([100.0, 100.0, 100.0, 500.0])
    merged = merge_clocks(V, J, G, D, np.array([0, 4]))
    scratch = vc_pass.PassScratch()
    kw = dict(n_arrived=4, capacity=4, free=4, run_end=np.empty(0), run_gpus=np.empty(0, int),
              longest=500.0, n_pending=4, scratch=scratch, plan_key=0)
    first = lazy_pass(merged, horizon=500.0, now=0.0, **kw)
    first.verdicts_upto(1)
    assert first.jobs.tolist() == [0, 1, 2, 3] and first.plan_read == 3
    later = lazy_pass(merged, horizon=600.0, now=100.0, **kw)
    later.verdicts_upto(2)
    want = direct_pass([(V, J, G, D)], 600.0, 4, 100.0, 4, 4, [], [])
    assert want == [(0, False), (1, False)]
    assert list(zip(later.jobs.tolist(), later.fails.tolist(), strict=True)) == want


def test_a_pass_taking_over_every_level_still_visits_the_entries_after_them():
    """Hand case, cluster of 8: (200, 5, 3, 500) and (300, 6, 3, 40) future, (350, 0, 2, 300)
    and (400, 1, 3, 600) pending from the second pass on. The first pass (horizon 300: job
    0 reads [0, 300)) has one start, 200, and passes over job 6 (at the horizon and not
    pending: it reserves nothing then). The second (horizon 600) takes over that start but
    must visit job 6 now: job 1 (reading [0, 400)) sees 3 + 3 = 6 at 300 and fails; seeing
    job 6 only in the level at 350 (5: it ended at 340), it would pass."""
    V = np.array([200.0, 300.0, 350.0, 400.0])
    J = np.array([5, 6, 0, 1])
    G = np.array([3, 3, 2, 3])
    D = np.array([500.0, 40.0, 300.0, 600.0])
    first, later, want = _first_then_wider_pass(V, J, G, D)
    assert first.jobs.tolist() == [0] and first.fails.tolist() == [False]
    assert first.plan_read == 2
    assert want == [(0, False), (1, True)]
    assert list(zip(later.jobs.tolist(), later.fails.tolist(), strict=True)) == want


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 60), n_pools=st.integers(1, 4),
       k=st.integers(0, 5))
def test_dropping_jobs_marks_their_entries_as_the_plain_scans_do(seed, n, n_pools, k):
    """drop_job (compiled) marks the same entries dead and unreserved, in (VST, job) order and
    in end order, as scanning the jobs and the end order's positions for them; also after a
    merge cut at a bound and for a job not in the merge."""
    rng = np.random.default_rng(seed)
    clocks = random_clocks(rng, n_pools, rng.permutation(2 * n + 2)[:n])
    (V, J, G, D), seg = lay_out(clocks)
    merged = merge_clocks(V, J, G, D, seg)
    if rng.random() < 0.5:
        merged = cut_merged(merged, float(rng.integers(0, 13) * 100))
    want = tuple(x.copy() for x in merged)
    for job in rng.choice(2 * n + 3, k).tolist():
        drop_job(merged, job)
        at = np.flatnonzero(want[1] == job)
        want[6][at] = False
        want[8][at] = 0
        for a in at.tolist():
            want[9][want[5] == a] = 0
    for a, b in zip(merged, want, strict=True):
        assert a.tolist() == b.tolist()
    assert_reserved(merged)
