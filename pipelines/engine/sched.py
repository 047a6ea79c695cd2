"""The pipelines' one door into the scheduler (DESIGN.md 2: pipelines -> scheduler).

Every name the pipelines use from :mod:`sia.scheduler` (and the locality
option parsing of :mod:`sia.pipelines.locality_options`) is imported here and
nowhere else in the studies, so moving a scheduler module changes one file. Names are re-exported as they are; see their own modules for docs.
"""

from __future__ import annotations

from sia.pipelines.locality_options import (
    options_from_cli,
    parse_cells_options,
    parse_placement,
)
from sia.scheduler.core.metrics import SLOWED_AFTER_S, compare
from sia.scheduler.core.simulator import RESULT_COLUMNS, PreemptionConfig, simulate
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import config_for_policy, replay_maybe_cells, simulate_cells
from sia.scheduler.regions.config import RegionsFile, read_regions_file, regions_from_jobs
from sia.scheduler.regions.global_policy import GlobalRegionPolicy
from sia.scheduler.regions.reserved_policy import ReservationRegionPolicy
from sia.scheduler.registry import (
    POLICIES,
    POLICY_NAMES,
    check_policy,
    make_policy,
    option_type_problems,
    policies_with,
    policy_class,
    policy_needs,
    policy_options,
    unknown_options,
)

__all__ = [
    "GlobalRegionPolicy", "ReservationRegionPolicy", "RegionsFile", "read_regions_file", "regions_from_jobs", "POLICIES", "POLICY_NAMES", "PreemptionConfig", "RESULT_COLUMNS", "SLOWED_AFTER_S", "LocalityConfig",
    "check_policy", "compare", "config_for_policy", "make_policy", "option_type_problems", "unknown_options", "options_from_cli",
    "parse_cells_options", "parse_placement", "policies_with", "policy_class", "policy_needs",
    "policy_options", "replay_maybe_cells", "simulate", "simulate_cells",
]
