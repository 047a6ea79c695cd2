"""Trace the shares, free GPUs, SIA reservations and loans of a few pools around an event.

Run: ``.venv/bin/python benchmarks/bench_regions_swaptrace.py [CONFIG] --sweep DIR
--pools P1,P2 --from-h H0 --to-h H1 [--consolidate off|swap|free] [--set KEY=VALUE ...]``

Replays one reservations label (default ``learned-reservations`` of
``experiments/regions_philly.yaml``; a learned label needs its sweep ``DIR``, as in
``bench_regions_slowed.py``) and prints:

* every consolidation (``ShareLedger.consolidate``) over the whole replay that changed a
  share of one of ``--pools``: when, which pool it was for, and the shares before and after;
* every change of the shares in force of ``--pools`` (the ledger moving shares back towards
  the plan's target, a new plan, a consolidation) between ``--from-h`` and ``--to-h``;
* at every decision in that span: per region, its free GPUs and, for each traced pool, its
  share, dedicated and lent GPUs, pending GPUs, and the part of its predicted arrivals the
  region reserves (``set_arrival_share``);
* after the replay, after how many decisions some region's policy held quotas other than
  the shares in force (0: every share move reached the region's SIA);
* every reservation a region's SIA made in that span while lending (window, the pools'
  predicted new load, their reservations, free GPUs), and every loan started, with its pool.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def _fmt(v) -> str:  # noqa: ANN001
    return "[" + " ".join(f"{x:g}" for x in v) + "]"


def _hook_ledger(policy, pools: list[int], names: list[str]) -> None:  # noqa: ANN001
    """Log every consolidation that changes a share of a traced pool."""
    ledger = policy._ledger
    orig = ledger.consolidate

    def consolidate(p, a, g, used, usable, partners=None, idle=None):  # noqa: ANN001, ANN202
        before = ledger.shares.copy()
        got = orig(p, a, g, used, usable, partners=partners, idle=idle)
        if got is not None:
            diff = np.flatnonzero((ledger.shares != before).any(axis=1)).tolist()
            if set(diff) & set(pools) or p in pools:
                print(f"  consolidate t={policy._now / 3600:.3f} h for {names[p]} ({g} GPUs into "
                      f"region {a}): " + "; ".join(
                          f"{names[q]} {_fmt(before[q])}->{_fmt(ledger.shares[q])}" for q in diff))
        return got

    ledger.consolidate = consolidate


def _hook_regions(policy, pools: list[int], names: list[str], t0: float, t1: float) -> None:  # noqa: ANN001
    """Log each region SIA's reservations and loans between t0 and t1."""
    for r, reg in enumerate(policy._regions):
        pol = reg.policy
        orig_res = pol._reserved

        def reserved(tnl_k, k, pend, unused, distrust, _r=r, _pol=pol, _orig=orig_res):  # noqa: ANN001, ANN202
            col, res = _orig(tnl_k, k, pend, unused, distrust)
            now = policy._now
            if t0 <= now <= t1:
                print(f"    r{_r} reserve t={now / 3600:.3f} k={k} total={sum(res):.1f} "
                      f"free={policy._regions[_r].cluster.free}: " + ", ".join(
                          f"{names[q]} tnl={tnl_k[q]:.1f} part={col[q]:.1f} pend={pend[q]} "
                          f"unused={unused[q]} res={res[q]:.1f}"
                          + (" DISTRUST" if distrust is not None and distrust[q][k] else "")
                          for q in pools))
            return col, res

        pol._reserved = reserved
        orig_lend = pol._lend_in_window

        def lend_in_window(view, d, k, lk, unused, cands, distrust, dur_distrust, recoverable,  # noqa: ANN001, ANN202
                           maxbin=None, _r=r, _pol=pol, _orig=orig_lend):
            now = policy._now
            if t0 <= now <= t1:
                ramp = _pol.loan_ramp
                print(f"    r{_r} lend t={now / 3600:.3f} k={k} lk={lk} free={d.free}: " + ", ".join(
                    f"{names[q]} cand={q in cands} first={_pol._first_fit(q, lk, 1e9)} "
                    f"dur_distrust={dur_distrust is not None and dur_distrust[q][lk]} "
                    f"ramp_full={ramp is not None and ramp.full(q, lk)} "
                    f"maxbin={None if maxbin is None else maxbin[q][lk]}" for q in pools))
            return _orig(view, d, k, lk, unused, cands, distrust, dur_distrust, recoverable, maxbin)

        pol._lend_in_window = lend_in_window


def _snapshot(policy, pools: list[int], names: list[str], starts, trace) -> None:  # noqa: ANN001
    now = policy._now
    parts = policy._arrival_parts()
    shares = policy._ledger.shares
    line = []
    for r, reg in enumerate(policy._regions):
        st = reg.state
        cols = []
        for q in pools:
            pend = sum(policy._gpus[j] for j in st.pending[q])
            cols.append(f"{names[q]} sh={shares[q, r]} ded={st.used_ded[q]} opp={st.used_opp[q]} "
                        f"pend={pend} part={parts[q, r]:.2f}")
        line.append(f"r{r} free={reg.cluster.free} | " + " | ".join(cols))
    print(f"  t={now / 3600:.3f} h")
    for x in line:
        print("    " + x)
    for s in starts:
        j = s.job
        p = policy._pool[j]
        kind = "LOAN" if s.opportunistic else "ded"
        print(f"    start {kind} job {trace.job_ids[j]} pool {names[p]} g={policy._gpus[j]} "
              f"region {int(policy.ran_in[j])} dur {trace.duration[j] / 3600:.2f} h")


def _ramps(policy, pools: list[int], names: list[str]) -> None:  # noqa: ANN001
    """Each region's loan ramp for the traced pools: per window, loans running / cap, and
    whether the pool is cold there (fewer fits than it needs)."""
    for r, reg in enumerate(policy._regions):
        ramp = getattr(reg.policy, "loan_ramp", None)
        if ramp is None:
            continue
        st = reg.state
        print(f"  ramp t={policy._now / 3600:.3f} r{r}: " + ", ".join(
            f"{names[q]} opp={st.used_opp[q]} loans/cap=" + "/".join(
                f"{ramp.count[q][k]}:{ramp.cap[q][k]}" for k in range(len(ramp.cap[q])))
            + f" fits={ramp.fits[q]} need={ramp.need[q]}" for q in pools)
            + f" (missed {ramp.stats['missed']})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", type=Path,
                    default=Path(__file__).resolve().parents[1] / "experiments" / "regions_philly.yaml")
    ap.add_argument("--label", default="learned-reservations")
    ap.add_argument("--sweep", type=Path, default=None)
    ap.add_argument("--pools", required=True, help="pool names, comma-separated")
    ap.add_argument("--from-h", type=float, required=True)
    ap.add_argument("--to-h", type=float, required=True)
    ap.add_argument("--consolidate", choices=["off", "swap", "free"], default=None)
    ap.add_argument("--ramp-from-h", type=float, default=None,
                    help="also print the traced pools' loan ramps hourly from this hour on")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_regions_diagnose import _spec
    from sia.pipelines.engine.run import build_policy
    from sia.scheduler.core.simulator import simulate

    _, spec = _spec(args)
    jobs, pools_df = spec.workload.frames()
    policy = build_policy(spec)
    if args.consolidate is not None:
        policy.consolidate = args.consolidate
    t0, t1 = args.from_h * 3600, args.to_h * 3600
    orig_reset, orig_decide = policy.reset, policy.decide

    def reset(trace, cluster):  # noqa: ANN001, ANN202
        orig_reset(trace, cluster)
        names = list(trace.pool_names)
        want = [names.index(n) for n in args.pools.split(",")]
        policy._tr = (trace, names, want)
        print("regions: " + ", ".join(f"r{r}={reg.name}" for r, reg in enumerate(policy._regions)))
        print("quotas: " + ", ".join(f"{names[q]}={int(trace.quota[q])}" for q in want))
        _hook_ledger(policy, want, names)
        _hook_regions(policy, want, names, t0, t1)

    def decide(view):  # noqa: ANN001, ANN202
        trace, names, want = policy._tr
        before = [s.copy() for _, s in policy.share_log[-1:]]
        starts = orig_decide(view)
        shares = policy._ledger.shares
        for r, reg in enumerate(policy._regions):  # does every region's SIA know its shares?
            q = getattr(reg.policy, "_quota", None)
            if q is not None and list(q) != shares[:, r].tolist():
                policy._out_of_sync += 1
        if args.ramp_from_h is not None and args.ramp_from_h * 3600 <= view.now <= t1 \
                and int(view.now // 3600) > policy._ramp_h:
            policy._ramp_h = int(view.now // 3600)
            _ramps(policy, want, names)
        if t0 <= view.now <= t1:
            last = policy.share_log[-1][1]
            if before and (last[want] != before[0][want]).any():
                print(f"  shares changed t={view.now / 3600:.3f}: " + "; ".join(
                    f"{names[q]} {_fmt(before[0][q])}->{_fmt(last[q])}" for q in want))
            _snapshot(policy, want, names, starts, trace)
        return starts

    policy.reset, policy.decide = reset, decide
    policy._ramp_h = -1
    policy._out_of_sync = 0  # decisions after which a region's quotas differ from its shares
    res = simulate(jobs, pools_df, policy, tick_s=spec.tick_s)
    print(f"done: {policy.stats['consolidations']} consolidations, {res.height} jobs; "
          f"region quotas out of step with the shares after {policy._out_of_sync} decisions")


if __name__ == "__main__":
    main()
