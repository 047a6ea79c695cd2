"""The pipelines' one door into the scheduler (DESIGN.md 2: pipelines -> scheduler).

Every name the pipelines use from :mod:`sia.scheduler` is imported here and
nowhere else in :mod:`sia.pipelines`, so moving a scheduler module changes
one file. Names are re-exported as they are; see their own modules for docs.
"""

from __future__ import annotations

from sia.scheduler.locality import (
    LocalityConfig,
    config_for_policy,
    options_from_cli,
    parse_cells_options,
    parse_placement,
    replay_maybe_cells,
    simulate_cells,
)
from sia.scheduler.metrics import SLOWED_AFTER_S, compare
from sia.scheduler.registry import (
    POLICIES,
    POLICY_NAMES,
    check_policy,
    make_policy,
    policies_with,
    policy_class,
    policy_needs,
    policy_options,
)
from sia.scheduler.simulator import RESULT_COLUMNS, simulate

__all__ = [
    "POLICIES", "POLICY_NAMES", "RESULT_COLUMNS", "SLOWED_AFTER_S", "LocalityConfig",
    "check_policy", "compare", "config_for_policy", "make_policy", "options_from_cli",
    "parse_cells_options", "parse_placement", "policies_with", "policy_class", "policy_needs",
    "policy_options", "replay_maybe_cells", "simulate", "simulate_cells",
]
