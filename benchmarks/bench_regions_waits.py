"""Why jobs wait under global reservations: where the waiting job-hours are, hour by hour.

Run: ``.venv/bin/python benchmarks/bench_regions_waits.py [CONFIG] [--label L ...]
[--sweep DIR] [--foothold off|backlog] [--set KEY=VALUE ...]``

Replays each label of a `sia evaluate` config with regions (default:
``experiments/regions_philly.yaml``, ``home`` and ``reservations-perfect``; SIA labels
only, learned ones need the predictors their sweep ``DIR`` trained, as in
``bench_regions_diagnose.py``) and samples the
regions at the first decision of every hour after the warm-up. It prints:

- mean JCT and wait, and the wait of jobs that fit SIA's largest window (lendable) and of
  longer ones (they run only on their pool's own share);
- the waiting job-hours by class: ``long`` (longer than the largest window), ``here``
  (its queue's SIA lends enough GPUs in that window), ``share`` (another region where its
  pool has share and usable data does: what the lending route takes), ``noshare`` (only
  regions where the pool has no share, ``nodata`` when it has no usable copy there either),
  ``nowhere``;
- ``free share``: job-hours whose pool has free share and free GPUs for the job's head in
  another eligible region (what routing to dedicated room takes), and ``fragmented``:
  pool-hours whose oldest waiting job fits the pool's free share summed over regions but no
  single region;
- per region: GPUs, idle GPUs, queued GPUs and the GPUs SIA reserves in its largest window.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def _snapshot(policy, view) -> dict:  # noqa: ANN001 - a GlobalRegionPolicy and its view
    regs, P = policy._regions, policy._trace.n_pools
    reserved = []
    for r in regs:
        pol, tnl = r.policy, getattr(r.policy, "_tnl", None)
        if not tnl:
            reserved.append(0.0)
            continue
        col = np.array(tnl[-1]) * (1.0 if getattr(pol, "_arrival_frac", None) is None
                                   else np.array(pol._arrival_frac))
        unused = np.maximum(np.array(pol._quota) - np.array(r.state.used_ded), 0)
        reserved.append(float(np.minimum(np.array(pol._pend_gpus) + col, unused).sum()))
    ledger = getattr(policy, "_ledger", None)
    usable = policy._replicas.usable(view.now)[policy._lrow] if ledger is not None else \
        np.eye(len(regs), dtype=bool)[policy._home]
    return dict(
        t=view.now, free=np.array([r.cluster.free for r in regs]), reserved=np.array(reserved),
        share=np.array([r.trace.quota for r in regs]).T, usable=usable,
        ded=np.array([r.state.used_ded for r in regs]).T,
        # (a region's pending jobs are indices of its sub-trace; r.glob maps them to the trace)
        pend=[[(int(r.glob[j]), p, int(r.trace.num_gpus[j]), float(r.trace.duration[j]))
               for p in range(P) for j in r.state.pending[p]] for r in regs])


def attach_sampler(policy) -> list[dict]:  # noqa: ANN001 - a GlobalRegionPolicy
    """Sample ``policy``'s regions at the first decision of every hour (wraps its ``decide``);
    returns the list the snapshots go into."""
    snaps: list[dict] = []
    nxt = [0.0]
    decide = policy.decide

    def sampled(view):  # noqa: ANN001, ANN202
        out = decide(view)
        if view.now >= nxt[0]:
            nxt[0] = (np.floor(view.now / 3600.0) + 1) * 3600.0
            snaps.append(_snapshot(policy, view))
        return out

    policy.decide = sampled
    return snaps


def waits_of(res, policy, warmup_days: float, snaps: list[dict]  # noqa: ANN001
             ) -> tuple[dict, list[dict], float]:
    """(the waits of a replay's results ``res``, its snapshots after the warm-up, SIA's
    largest window in seconds)."""
    sub, start, end = (res[c].to_numpy() for c in ("submit_time", "start_time", "end_time"))
    t0 = sub.min() + warmup_days * 86400.0
    window = float(max(policy._regions[0].policy.windows_s))
    warm = sub >= t0
    short = (end - start) <= window
    out = dict(jct=(end - sub)[warm].mean() / 3600, wait=(start - sub)[warm].mean() / 3600,
               wait_short=(start - sub)[warm & short].mean() / 3600,
               wait_long=(start - sub)[warm & ~short].mean() / 3600,
               n_short=int((warm & short).sum()), n_long=int((warm & ~short).sum()),
               gpus=policy.layout.gpus)
    return out, [s for s in snaps if s["t"] >= t0], window


def _replay(config: Path, label: str, sets: list[str], sweep: Path | None = None,
            foothold: str | None = None) -> tuple[dict, list[dict], float]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_regions_diagnose import _spec
    from sia.pipelines.engine.run import build_policy
    from sia.scheduler.core.simulator import simulate

    cfg, spec = _spec(argparse.Namespace(config=config, label=label, sweep=sweep, set=sets))
    jobs, pools = spec.workload.frames()
    policy = build_policy(spec)
    if foothold is not None and hasattr(policy, "foothold"):
        policy.foothold = foothold
    snaps = attach_sampler(policy)
    res = simulate(jobs, pools, policy, tick_s=spec.tick_s)
    return waits_of(res, policy, cfg.warmup_days, snaps)


def _classes(snaps: list[dict], window: float) -> tuple[dict, int, int, int]:
    """Waiting job-hours by class, free-share job-hours, fragmented and waiting pool-hours."""
    c = dict(long=0, here=0, share=0, noshare=0, nodata=0, nowhere=0)
    free_share = frag = pools = 0
    for s in snaps:
        lend = s["free"] - s["reserved"]
        room = np.maximum(s["share"] - s["ded"], 0) * s["usable"] * (s["share"] > 0)
        R = len(lend)
        oldest: dict[int, tuple[int, int, int]] = {}
        for a in range(R):
            for j, p, g, dur in s["pend"][a]:
                if j < oldest.get(p, (1 << 62,))[0]:
                    oldest[p] = (j, g, a)
                others = [b for b in range(R) if b != a]
                if any(min(room[p, b], s["free"][b]) >= g for b in others):
                    free_share += 1
                if dur > window:
                    k = "long"
                elif lend[a] >= g:
                    k = "here"
                else:
                    ok = [b for b in others if lend[b] >= g]
                    k = ("nowhere" if not ok else "share" if any(
                        s["share"][p, b] > 0 and s["usable"][p, b] for b in ok)
                        else "noshare" if any(s["usable"][p, b] for b in ok) else "nodata")
                c[k] += 1
        for p, (_, g, _) in oldest.items():
            pools += 1
            single = max(min(room[p, b], s["free"][b]) for b in range(R))
            frag += int(room[p].sum() >= g > single)
    return c, free_share, frag, pools


def report(label: str, out: dict, snaps: list[dict], window: float, secs: float) -> None:
    """Print the waits, the waiting job-hours by class and the per-region means."""
    c, free_share, frag, pools = _classes(snaps, window)
    n = max(sum(c.values()), 1)
    print(f"{label}: mean JCT {out['jct']:.3f} h, wait {out['wait']:.3f} h (jobs within "
          f"{window / 3600:g} h: {out['wait_short']:.2f} h over {out['n_short']}; longer: "
          f"{out['wait_long']:.2f} h over {out['n_long']}); {len(snaps)} hours, {secs:.0f} s")
    print("  waiting job-hours " + ", ".join(f"{k} {v} ({v / n:.1%})" for k, v in c.items()))
    print(f"  free share elsewhere {free_share} job-hours; fragmented {frag} of {pools} "
          "pool-hours")
    mean = {k: np.mean([s[k] for s in snaps], axis=0).round(1) for k in ("free", "reserved")}
    queued = np.mean([[sum(x[2] for x in q) for q in s["pend"]] for s in snaps], axis=0)
    print(f"  per region: GPUs {out['gpus'].tolist()} idle {mean['free'].tolist()} queued "
          f"{queued.round(1).tolist()} reserved (largest window) {mean['reserved'].tolist()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", type=Path,
                    default=Path(__file__).resolve().parents[1] / "experiments" / "regions_philly.yaml")
    ap.add_argument("--label", action="append", default=None)
    ap.add_argument("--sweep", type=Path, default=None,
                    help="the sweep whose predictors a learned label uses")
    ap.add_argument("--foothold", choices=["off", "backlog"], default=None,
                    help="override foothold (ReservationRegionPolicy)")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    for label in args.label or ["home", "reservations-perfect"]:
        t0 = time.perf_counter()
        out, snaps, window = _replay(args.config, label, args.set, args.sweep, args.foothold)
        report(label, out, snaps, window, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
