"""Draw the speedup / slowdown frontier, or the README's overview, from finished sweeps.

Usage:
    python experiments/readme_frontier.py OUT.png "TITLE" SWEEP_DIR [SWEEP_DIR ...]
    python experiments/readme_frontier.py --overview OUT.png "TITLE" "STUDY=DIR[,DIR...]" ...

Each SWEEP_DIR is a `sia evaluate` output folder (its `aggregate.csv`, first group). Policies
labelled `<base>+risk<r>` become curves over the budget; every other policy (FCFS excepted) a
point; a label met in several sweeps keeps its first. The first form draws one study's 2 x 2
frontier (`plots.frontier`); `--overview` draws one column per study (`plots.promise_overview`:
mean and geometric-mean speedup against the share of jobs slowed), keeping only the policies
of `OVERVIEW` under the names given there. The README and the results pages name the sweeps
they draw.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
from sia.pipelines import plots
from sia.pipelines.studies.experiment import risk_of_label
from sia.scheduler.policies.sia.risk import DEFAULT_RISK

METRICS = ("mean_speedup", "geomean_speedup", "pct_slowed", "total_slowdown_min")
#: The overview's policies (sweep label -> name in the legend), in the legend's order.
OVERVIEW = {"maxmin": "MaxMin", "hived": "HiveD*", "sia": "learned SIA (defaults: budget 3)",
            "sia-nobudget": "learned SIA, no budget (defaults before)",
            "sia-perfect": "SIA, perfect predictions"}


def read_sweeps(dirs: list[Path]) -> tuple[dict[str, list], dict[str, dict]]:
    """Return (curves, points) of the sweeps' first groups (see the module doc)."""
    curves: dict[str, list] = {}
    points: dict[str, dict] = {}
    seen: set[str] = set()
    for d in dirs:
        agg = pl.read_csv(d / "aggregate.csv")
        group = agg["group"][0]
        for row in agg.filter(pl.col("group") == group).iter_rows(named=True):
            label = row["policy"]
            if label == "fcfs" or label in seen:
                continue
            seen.add(label)
            m = {k: row[k] for k in METRICS}
            swept = risk_of_label(label)
            if swept is None:
                points[label] = m
            else:
                curves.setdefault(swept[0], []).append((swept[1], m))
    return curves, points


def overview_study(spec: str) -> plots.Study:
    """One ``STUDY=DIR[,DIR...]`` argument as the overview's (title, curves, points)."""
    title, sep, dirs = spec.partition("=")
    if not sep or not dirs:
        raise SystemExit(f"--overview: {spec!r} is not STUDY=DIR[,DIR...]")
    curves, points = read_sweeps([Path(d) for d in dirs.split(",")])
    # learned SIA's risk-budget curve under its own name, through the default budget's point
    # (the sweeps' plain `sia`); other curves are left out
    kept_curves = {}
    if "sia" in curves:
        curve = list(curves["sia"])
        if "sia" in points and all(r != DEFAULT_RISK for r, _ in curve):
            curve.append((DEFAULT_RISK, points["sia"]))
        kept_curves["learned SIA"] = sorted(curve, key=lambda rm: rm[0])
    kept = {OVERVIEW[k]: points[k] for k in OVERVIEW if k in points}
    return title, kept_curves, kept


def main(argv: list[str]) -> int:
    if argv[:1] == ["--overview"] and len(argv) >= 4:
        out, title = Path(argv[1]), argv[2]
        plots.promise_overview([overview_study(s) for s in argv[3:]], out, title)
    elif len(argv) >= 3 and not argv[0].startswith("--"):
        out, title = Path(argv[0]), argv[1]
        curves, points = read_sweeps([Path(d) for d in argv[2:]])
        plots.frontier(curves, points, out, title)
    else:
        print(__doc__)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
