"""The pipelines' fuzz campaign in full (issue 36, item 7): every generated case, not a sample.

The test suite (``tests/pipelines/test_fuzz_pipeline.py``) runs a fixed-seed sample of each
family; this script runs all of them (refused ``--out`` for every command that writes, hostile
configs, misbehaving MLflow stores) and prints, per family, how many were clean one-line
errors, tracebacks, unclear messages and hangs, then the cases that were not clean. Run it
from the repository root: ``python benchmarks/bench_fuzz_pipeline.py [--deadline S]``
(``--deadline`` sets SIA_MLFLOW_DEADLINE_S for the MLflow cases; default: the product's
10 s). A case that takes longer than 15 s counts as a hang (issue 36's goal).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _suite():
    spec = importlib.util.spec_from_file_location(
        "fuzz_pipeline", ROOT / "tests" / "pipelines" / "test_fuzz_pipeline.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=None,
                        help="SIA_MLFLOW_DEADLINE_S for the MLflow cases (default: 10 s)")
    parser.add_argument("--families", default="out,config,mlflow")
    args = parser.parse_args()
    fz = _suite()
    families = args.families.split(",")
    counts: dict[str, Counter] = {}
    bad = []
    slowest = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SIA_OUTPUT"] = str(Path(tmp) / "store")  # never the caller's store
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        for i, case in enumerate([c for c in fz.out_cases() + fz.config_cases()
                                  + fz.mlflow_cases() if c.family in families]):
            folder = Path(tmp) / f"case-{i}"
            folder.mkdir()
            if case.family == "mlflow":
                outcome = fz.run_mlflow(case, folder, args.deadline)
            else:
                outcome = fz.run_case(case, folder)
            counts.setdefault(case.family, Counter())[outcome.kind] += 1
            slowest[case.family] = max(slowest.get(case.family, 0.0), outcome.seconds)
            if outcome.kind != "clean":
                bad.append((case.family, case.name, outcome))
            print(f"{case.family:7} {case.name:34} {outcome.kind:9} {outcome.seconds:6.1f} s  "
                  f"{outcome.message[:110]}", flush=True)
    print()
    print(f"{'family':8} {'tried':>6} {'clean':>6} {'traceback':>10} {'unclear':>8} "
          f"{'hang':>5} {'slowest s':>10}")
    for fam, c in counts.items():
        print(f"{fam:8} {sum(c.values()):6} {c['clean']:6} {c['traceback']:10} {c['unclear']:8} "
              f"{c['hang']:5} {slowest[fam]:10.1f}")
    for fam, name, outcome in bad:
        print(f"NOT CLEAN {fam} {name}: {outcome.kind} code={outcome.code} "
              f"{outcome.message[:300]!r}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
