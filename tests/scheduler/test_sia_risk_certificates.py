"""The risk budget's row certificates (scheduler/policies/sia/risk.py ``_window_certificate``,
kept per pool and window by ``_allowed_rows``): a certified row is the row a scan would give,
anywhere in the certificate's box, and a budget that keeps its certificates answers as one that
scans anew."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import betaincinv
from sia.scheduler.policies.sia.risk import NEVER, RiskBudget
from sia.scheduler.policies.sia.risk import _window_certificate as _compiled_certificate

from tests.scheduler.test_sia_risk import (
    fake_trace,
    feed,
    forget_reuse,
)

B = NEVER - 1


def _window_certificate(nk, mk, f, g, i, t, n0, level):
    """The compiled certificate as a tuple ``(t_lo, t_hi, g_lo, his)``, or None."""
    his = np.empty(NEVER)
    ok, t_lo, t_hi, g_lo = _compiled_certificate(
        np.asarray(nk, dtype=np.float64), np.asarray(mk, dtype=np.float64), f,
        np.asarray(g, dtype=np.float64), i, t, n0, level, his)
    return (t_lo, t_hi, g_lo, his[:i].tolist()) if ok else None


def exact_row(nk, mk, f, g, t, n0=10.0, level=0.9) -> int:
    """A window's row by the exact quantiles: the leading bins whose quantile is <= ``t``,
    each bin's posterior by the scan's arithmetic (counts ``f`` x (``nk``, ``mk``), from
    CERTAIN; prior rates ``g``)."""
    i = 0
    while i < B:
        nd, md = f * nk[i + 1], f * mk[i + 1]
        a, b = md + n0 * g[i], max(max(nd - md, 0.0) + n0 * (1.0 - g[i]), 1e-9)
        if not float(betaincinv(a, b, level)) <= t:
            break
        i += 1
    return i


@st.composite
def windows(draw):
    n = [0.0] + [float(draw(st.integers(0, 40))) for _ in range(B)] + [0.0]
    m = [0.0] + [float(draw(st.integers(0, int(x)))) for x in n[1:-1]] + [0.0]
    f = draw(st.floats(0.2, 1.0))
    g = [draw(st.floats(1e-4, 0.6)) for _ in range(B)]
    t = draw(st.floats(1e-4, 0.8))
    return n, m, f, g, t


@settings(max_examples=400, deadline=None)
@given(win=windows(), u=st.floats(0.0, 1.0), v=st.lists(st.floats(0.0, 1.0), min_size=B,
                                                          max_size=B))
def test_a_window_certificate_holds_everywhere_in_its_box(win, u, v):
    # the row at the box's centre is certified or not; a certified row is the exact row at any
    # threshold of the box and any prior whose rates meet its bounds (bin i's rate above lo,
    # the bins before it below his), whatever the other bins' rates
    n, m, f, g, t = win
    i = exact_row(n, m, f, g, t)
    got = _window_certificate(n, m, f, g, i, t, 10.0, 0.9)
    if got is None:
        return
    t_lo, t_hi, lo, his = got
    assert len(his) == i and t_lo <= t <= t_hi
    assert (i == B or g[i] >= lo) and all(x <= y for x, y in zip(g[:i], his, strict=True))
    # a threshold of the box (at most 1.5: from 1 on everything passes, none fails)
    a, b = max(t_lo, t / 3.0), min(t_hi, 1.5)
    t2 = min(max(a + u * (b - a), a), b)
    g2 = [0.9 * x for x in v]  # any rates ...
    for j, x in enumerate(his):  # ... within the certificate's bounds
        g2[j] = max(x * v[j], 1e-6)
    if i < B:
        g2[i] = lo + v[i] * (0.95 - lo) if lo < 0.95 else lo
    assert exact_row(n, m, f, g2, t2) == i


@settings(max_examples=300, deadline=None)
@given(win=windows(), off=st.sampled_from([-1, 1]))
def test_a_window_certificate_never_certifies_another_row(win, off):
    # the box holds its centre, so a row the exact quantiles do not give there is not certified
    n, m, f, g, t = win
    i = exact_row(n, m, f, g, t) + off
    if 0 <= i <= B:
        assert _window_certificate(n, m, f, g, i, t, 10.0, 0.9) is None


def test_a_certified_pool_is_not_scanned_again_when_only_the_prior_moves():
    # pool 0 warm, a third of its jobs overrunning the first window; outcomes of pool 1 move
    # the prior; at the next refresh pool 0's rows come from certificates, kept or made anew
    # at its snapshot, the same rows as a budget that scans anew
    W3 = (300.0, 3600.0)
    P, jobs = 2, 60
    pools = [0] * 30 + [1] * 30
    d = [400.0 if j % 3 == 0 else 100.0 for j in range(30)] + [100.0] * 30
    rbs = [RiskBudget(W3, 0.05, cold_n=1.0, memory=50.0) for _ in range(2)]
    for rb in rbs:
        rb.reset(fake_trace(pools, d, [4] * P))
        feed(rb, list(range(25)), 0.02, 0.0)
        rb.resolve(5000.0)
    unused = [0, 0]  # (no pool with unused quota: the cost is 1 at both calls)
    first = [rb.allowed(5000.0, unused) for rb in rbs]
    assert first[0] == first[1]
    for rb in rbs:
        feed(rb, list(range(30, 31)), 0.02, 5000.0)  # one outcome of pool 1: the prior moves
        feed(rb, list(range(31, jobs)), 0.02, 5100.0)
    got = []
    for i, rb in enumerate(rbs):
        rb.resolve(6000.0)
        if i == 1:
            forget_reuse(rb)
        certs = rb._cert[0].copy(), rb._cert_i[0].copy()
        prior = rb._snap_ab[0].copy()
        got.append(rb.allowed(6000.0, unused))
        if i == 0:
            assert not np.array_equal(rb._snap_ab[0], prior)  # pool 0 took the new prior
            assert np.all(rb._cert_i[0, :, 0] >= 0)  # its windows' rows are certified there:
            # the second window's certificate held (its box took the new rates), the first's
            # bound on its failing bin's rate did not, so its row was certified anew
            assert np.array_equal(rb._cert[0, 1], certs[0][1])
            assert not np.array_equal(rb._cert[0, 0], certs[0][0])
            assert np.array_equal(rb._cert_i[0], certs[1])  # (the same rows and counts)
    assert got[0] == got[1]
    assert np.asarray(got[0]).shape == (P, len(W3))


def _prior_moves_pool_0(first_d: float, then_d: float, n1: int, n2: int) -> list[tuple]:
    """Pool 0's two fits, then pool 1's ``n1`` jobs of duration ``first_d`` and ``n2`` of
    ``then_d`` (all in the first bin): two budgets, the second forgetting every certificate
    and scan, answer at 6,000 s (after pool 1's first jobs) and 7,000 s (after the others)."""
    pools = [0, 0] + [1] * (n1 + n2)
    d = [100.0, 100.0] + [first_d] * n1 + [then_d] * n2
    got = []
    for i in range(2):
        rb = RiskBudget((300.0, 3600.0), 0.3, cold_n=1.0, memory=20.0)
        rb.reset(fake_trace(pools, d, [4, 4]))
        feed(rb, list(range(2 + n1)), 0.0005, 0.0)
        rb.resolve(6000.0)
        before = rb.allowed(6000.0, [0, 0])  # (no pool with unused quota: the cost is 1)
        feed(rb, list(range(2 + n1, 2 + n1 + n2)), 0.0005, 6000.0)
        rb.resolve(7000.0)
        if i == 1:
            forget_reuse(rb)
        got.append((before, rb.allowed(7000.0, [0, 0])))
    return got


def test_a_certificate_fails_when_the_prior_moves_out_of_its_bounds():
    # pool 0's own outcomes (two fits) stay; only the prior moves, by pool 1's outcomes. Its
    # overruns, then many fits, lower the first bin's rate: pool 0's row goes from 0 to 4;
    # fits, then many overruns, raise it: from 4 to 0 (in the first window). The first row's
    # certificate must not hold at the second (a lower bound on the failing bin's rate, upper
    # bounds on the passing bins'), so the budget answers as one that scans anew (each bound
    # dropped from _rates_within fails this test)
    for first_d, then_d, n1, n2, rows in ((5000.0, 100.0, 30, 500, ([0, 0], [4, 4])),
                                          (100.0, 5000.0, 30, 500, ([4, 4], [0, 4]))):
        kept, anew = _prior_moves_pool_0(first_d, then_d, n1, n2)
        assert kept == anew
        assert (kept[0][0], kept[1][0]) == rows


def python_window_certificate(nk, mk, f, g, i, t, n0, level):
    """The Python certificate the compiled one replaced (session 34), kept as the reference:
    scipy's scalar ``betainc`` and Python's ``max``, in the same order."""
    from scipy.special.cython_special import betainc
    from sia.scheduler.policies.sia.risk import _BRACKET, _CDF_SLACK, _CERT_BOXES, _TINY_T
    hi, lo = level + _CDF_SLACK, level - _CDF_SLACK
    t_lo, t_hi, g_lo, his = -np.inf, np.inf, -np.inf, []
    if i < B:
        nd, md = f * nk[i + 1], f * mk[i + 1]
        r = max(nd - md, 0.0)
        for w in _CERT_BOXES:
            th = t * (1.0 + w)
            if th * (1.0 + _BRACKET) >= 1.0:
                continue
            x = g[i] * (1.0 - w)
            if betainc(md + n0 * x, max(r + n0 * (1.0 - x), 1e-9), th * (1.0 + _BRACKET)) <= lo:
                t_hi, g_lo = th, x
                break
        else:
            return None
    for j in range(i):
        nd, md = f * nk[j + 1], f * mk[j + 1]
        r = max(nd - md, 0.0)
        for w in _CERT_BOXES:
            tl = t * (1.0 - w)
            if tl < _TINY_T:
                continue
            x = g[j] * (1.0 + w)
            if betainc(md + n0 * x, max(r + n0 * (1.0 - x), 1e-9), tl * (1.0 - _BRACKET)) >= hi:
                t_lo = max(t_lo, tl)
                his.append(x)
                break
        else:
            return None
    return t_lo, t_hi, g_lo, his


@settings(max_examples=600, deadline=None)
@given(win=windows(), i=st.integers(0, B), t=st.one_of(
    st.floats(1e-14, 1.0), st.sampled_from([1e-13, 0.9, 0.99, 1.0 / 1.1, 1.0 / 1.02])),
    n0=st.sampled_from([10.0, 0.5, 100.0]), level=st.sampled_from([0.9, 0.5, 0.99]))
def test_the_compiled_window_certificate_gives_the_python_floats_exactly(win, i, t, n0, level):
    # any row (not only the exact one: the budget asks about its last row at a new threshold),
    # thresholds from tiny (below _TINY_T) to where the boxes reach 1, other priors and levels;
    # some bins with more overruns than outcomes (the clamp at 0 of their difference)
    n, m, f, g, _ = win
    m = [x + (3.0 if b % 3 == 1 and i % 2 else 0.0) for b, x in enumerate(m)]
    assert (_window_certificate(n, m, f, g, i, t, n0, level)
            == python_window_certificate(n, m, f, g, i, t, n0, level))
    his = np.empty(NEVER)  # (the tuple's floats are the kernel's)
    got = _compiled_certificate(np.asarray(n), np.asarray(m), f, np.asarray(g), i, t, n0, level,
                                his)
    assert got[0] == (python_window_certificate(n, m, f, g, i, t, n0, level) is not None)


def test_the_kernels_bind_scipys_double_betainc_and_name_what_is_missing():
    # the double specialisation of a fused function (or the function itself), found by its
    # capsule's signature; a name scipy lacks is an ImportError naming scipy's version
    import pytest
    import scipy
    from sia.scheduler.policies.sia.risk import _cython_double
    assert _cython_double("betainc", 3) > 0
    assert _cython_double("betainc", 3) != _cython_double("betaincinv", 3)
    with pytest.raises(ImportError, match=f"scipy {scipy.__version__}.*no no_such_function"):
        _cython_double("no_such_function", 3)
    with pytest.raises(ImportError, match="betainc with the signature"):
        _cython_double("betainc", 2)  # (no two-argument betainc)
