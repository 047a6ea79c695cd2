"""The whole input fuzz campaign (issue 16's corruptions and issue 36's hostile inputs), by
suite: how many cases end as a clean one-line error, an acceptance with a report line, the
same jobs, or a kept column / count, and how many escape as a traceback, a silent change, an
unclear exit or a hang, with the time each suite takes.

The test suite runs issue 16's cases and a fixed-seed sample of issue 36's
(tests/pipelines/test_fuzz_inputs.py); this runs every case, in process, in
its own temporary folder.

Usage: .venv/bin/python benchmarks/bench_fuzz_inputs.py [--hostile-only] [--skip SUITE]... [-v]

(``--skip sizes`` before measuring an older version: its sizes cases allocate gigabytes.)
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOOD = ("clean", "noted", "same", "kept")
BAD = ("traceback", "silent", "unclear", "hang")


def _fuzz_module():
    path = ROOT / "tests" / "pipelines" / "test_fuzz_inputs.py"
    spec = importlib.util.spec_from_file_location("fuzz_inputs", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    from sia.pipelines.cli import main as cli

    fz = _fuzz_module()
    cases = fz.HOSTILE if "--hostile-only" in sys.argv else fz.CASES + fz.HOSTILE
    skip = {sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--skip"}
    cases = [c for c in cases if c.suite not in skip]
    suites: dict[str, list] = {}
    for case in cases:
        suites.setdefault(case.suite, []).append(case)
    rows, failures = [], []
    for suite, group in suites.items():
        t0 = time.perf_counter()
        results = fz.run_all(cli, group)
        seconds = time.perf_counter() - t0
        counts = Counter(outcome for outcome, _ in results.values())
        rows.append((suite, len(group), counts, seconds))
        failures += [(suite, name, outcome, msg) for name, (outcome, msg) in results.items()
                     if outcome in BAD]
    cols = ("suite", "tried", *GOOD, *BAD, "seconds")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    total = Counter()
    for suite, n, counts, seconds in rows:
        total.update(counts)
        print(f"| {suite} | {n} | " + " | ".join(str(counts[k]) for k in (*GOOD, *BAD))
              + f" | {seconds:.1f} |")
    print(f"| all | {len(cases)} | " + " | ".join(str(total[k]) for k in (*GOOD, *BAD))
          + f" | {sum(r[3] for r in rows):.1f} |")
    for suite, name, outcome, msg in failures if failures and "-v" not in sys.argv else []:
        print(f"  {outcome:9s} [{suite}] {name}: {msg.strip().splitlines()[-1][:200] if msg.strip() else ''}")
    if "-v" in sys.argv:
        for suite, name, outcome, msg in failures:
            print(f"--- {outcome} [{suite}] {name}\n{msg.strip()[-1500:]}")


if __name__ == "__main__":
    main()
