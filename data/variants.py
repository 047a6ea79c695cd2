"""The synthetic workload families of SIA Appendix C: names, descriptions and parameters.

Kept apart from :mod:`sia.data.synthetic` (which re-exports them) so that the
command line's help can list the variants without importing numpy and polars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class WorkloadSpec:
    """The parameters of one synthetic workload family (durations in minutes)."""

    num_pools: int = 4
    load_factor: float = 1.0
    load_range: tuple[float, float] = (0.6, 0.95)
    #: (probability, low minutes, high minutes) of each uniform duration mode
    duration_modes: tuple[tuple[float, float, float], ...] = (
        (0.8, math.sqrt(10), 100.0),
        (0.2, 100.0, 1000.0),
    )
    width_probs: tuple[float, ...] = (0.7, 0.1, 0.15, 0.05)  # for synthetic.WIDTHS


_BASE = WorkloadSpec()

#: Variant name -> (description, spec). Names as used on the command line.
_VARIANT_SPECS: dict[str, tuple[str, WorkloadSpec]] = {
    "base": ("4 pools x 8 GPUs; durations sqrt(10)-100 min (p .8) / 100-1000 min (p .2); "
             "widths 1/2/4/8 with p .7/.1/.15/.05; load U[0.6, 0.95] per pool", _BASE),
    "higher-load": ("base with every pool's target load x 1.05",
                    WorkloadSpec(load_factor=1.05)),
    "lower-load": ("base with every pool's target load x 0.75",
                   WorkloadSpec(load_factor=0.75)),
    "more-queues": ("base with 8 pools", WorkloadSpec(num_pools=8)),
    "fewer-queues": ("base with 2 pools", WorkloadSpec(num_pools=2)),
    "more-duration-skew": (
        "durations sqrt(10)-100 min (p .9) / 100-2000 min (p .1)",
        WorkloadSpec(duration_modes=((0.9, math.sqrt(10), 100.0), (0.1, 100.0, 2000.0))),
    ),
    "less-duration-skew": (
        "durations uniform in sqrt(10)-300 min",
        WorkloadSpec(duration_modes=((1.0, math.sqrt(10), 300.0),)),
    ),
    "more-wide-jobs": ("widths 1/2/4/8 equally likely",
                       WorkloadSpec(width_probs=(0.25, 0.25, 0.25, 0.25))),
    "fewer-wide-jobs": ("widths 1/2/4/8 with p .9/.033/.05/.017",
                        WorkloadSpec(width_probs=(0.9, 0.033, 0.05, 0.017))),
}

#: Variant name -> one-line description (for --help).
VARIANTS: dict[str, str] = {name: desc for name, (desc, _) in _VARIANT_SPECS.items()}
