"""benchmarks/bookkeeping_profile.py: the budget's share of a replay from py-spy's raw stacks,
checked on a hand-made profile."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "bookkeeping_profile", Path(__file__).parents[2] / "benchmarks" / "bookkeeping_profile.py")
bp = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bp)

RISK = "RiskBudget.allowed (/x/scheduler/policies/sia/risk.py:10)"
CAL = "PoolCalibration.arrivals (/x/models/calibration.py:5)"
SIM = "simulate (/x/scheduler/core/simulator.py:1)"
POL = "SiaPolicy.decide (/x/scheduler/policies/sia/policy.py:3)"
JIT = "_DispatcherBase._compile_for_args (/v/numba/core/dispatcher.py:374)"


def test_budget_samples_are_counted_inside_simulate_without_compiling(tmp_path):
    prof = tmp_path / "p.txt"
    prof.write_text("\n".join([
        f"main (b.py:1);{SIM};{POL};{RISK} 7",  # the budget, by its outermost method
        f"main (b.py:1);{SIM};{POL};{CAL};{RISK} 2",  # (charged once, to the outer one)
        f"main (b.py:1);{SIM};{POL} 81",  # the rest of the replay
        f"main (b.py:1);{SIM};{POL};{RISK};{JIT} 5",  # a kernel compiling: left out
        f"main (b.py:1);load (b.py:9);{RISK} 4",  # outside the replay: left out
        " 3",  # (py-spy's stack without frames)
    ]) + "\n")
    sim, own, comp, parts = bp.read(prof)
    assert (sim, own, comp) == (90, 9, 5)
    assert parts == {"RiskBudget.allowed": 7, "PoolCalibration.arrivals": 2}


def test_a_file_not_in_the_raw_format_names_its_line(tmp_path):
    prof = tmp_path / "p.txt"
    prof.write_text(f"{SIM} 3\n<svg>\n")
    with pytest.raises(ValueError, match=r"p.txt, line 2: not py-spy's raw format"):
        bp.read(prof)
