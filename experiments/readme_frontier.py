"""Draw the README's speedup / slowdown frontier from the aggregates of finished sweeps.

Usage: python experiments/readme_frontier.py OUT.png "TITLE" SWEEP_DIR [SWEEP_DIR ...]

Each SWEEP_DIR is a `sia evaluate` output folder (its `aggregate.csv`, first group). Policies
labelled `<base>+risk<r>` become curves over the budget; every other policy (FCFS excepted) a
point; a label met in several sweeps keeps its first. The README names the sweeps it draws.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
from sia.pipelines import plots
from sia.pipelines.studies.experiment import risk_of_label

METRICS = ("mean_speedup", "geomean_speedup", "pct_slowed", "total_slowdown_min")


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__)
        return 2
    out, title, dirs = Path(argv[0]), argv[1], [Path(d) for d in argv[2:]]
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
    plots.frontier(curves, points, out, title)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
