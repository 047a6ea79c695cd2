"""Global scheduling in a whole replay: the negative cache on and off (prints a table).

Run: ``.venv/bin/python benchmarks/bench_regions_replay.py [CONFIG] [--label LABEL]``

Replays one region policy of a `sia evaluate` config with regions (default:
``experiments/regions_philly.yaml``, policy ``global-history``) twice, with
the scan's negative cache on and off, checks that every job starts at the
same time in the same region, and prints the scan passes, placement
attempts, cache hits, the attempts the cache saved (off / on) and the
scan-pass time.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path


def main() -> None:
    from sia.pipelines.engine import run_replay
    from sia.pipelines.studies import evaluate as ev
    from sia.pipelines.studies.experiment import load_config

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", type=Path,
                    default=Path(__file__).resolve().parents[1] / "experiments" / "regions_philly.yaml")
    ap.add_argument("--label", default="global-history")
    args = ap.parse_args()
    cfg = load_config(args.config)
    # only the policy measured: the config's learned rows would need trained predictors
    chosen = tuple(p for p in cfg.policies if p.label == args.label)
    if not chosen:
        ap.error(f"no policy labelled {args.label!r} in {args.config} "
                 f"(labels: {', '.join(p.label for p in cfg.policies)})")
    cfg = replace(cfg, policies=chosen)
    wl = ev.load_trace(cfg)
    jobs, experiments = ev.sweep_experiments(cfg, wl)
    spec = next(s for s in ev.experiment_specs(cfg, experiments[0], jobs, None)
                if s.where[-1] == args.label)
    rows, results = [], {}
    for cache in (True, False):
        t0 = time.perf_counter()
        out = run_replay(replace(spec, regions=replace(spec.regions, neg_cache=cache)))
        wall = time.perf_counter() - t0
        f = out.facts
        results[cache] = out.result
        rows.append((("on" if cache else "off"), f["scan_passes"], f["scan_attempts"],
                     f["scan_cache_hits"], f["scan_s_total"], f["scan_s_total"] / max(1, f["scan_passes"]),
                     f["routed"], wall))
    same = all(results[True][c].to_list() == results[False][c].to_list()
               for c in ("start_time", "end_time", "region"))
    print(f"{args.config.name} {args.label}: {jobs.height} jobs")
    print(f"{'cache':6}{'passes':>8}{'attempts':>11}{'hits':>11}{'scan_s':>9}{'ms/pass':>9}"
          f"{'routed':>8}{'replay_s':>10}")
    for name, passes, att, hits, scan_s, per, routed, wall in rows:
        print(f"{name:6}{passes:>8}{att:>11}{hits:>11}{scan_s:>9.2f}{1000 * per:>9.3f}"
              f"{routed:>8}{wall:>10.1f}")
    print(f"attempts without / with the cache: {rows[1][2] / max(1, rows[0][2]):.1f}x; "
          f"decisions identical: {same}")


if __name__ == "__main__":
    main()
