"""Sizes a study is refused at before any work, unless ``--allow-large`` (issue 36).

A config can ask for more than a machine can do in any reasonable time (``grid.experiments:
1000000``, a synthetic trace of a thousand years): the sweep would run for hours before anyone
noticed. :func:`check_sizes` estimates the work up front (replays, days of synthetic jobs to
generate) and raises one :class:`~sia.data.errors.ConfigError` line saying what the estimate
is, the limit, and that ``--allow-large`` lifts it. Limits no option lifts (a seed CP-SAT takes,
a name that fits in a file name, days below 100,000) are in the config schema
(:mod:`sia.pipelines.studies.study_schema`).
"""

from __future__ import annotations

from typing import Any

from sia.data.errors import ConfigError

#: replays a study may plan without --allow-large (figure13.yaml, the largest shipped, plans 600)
MAX_REPLAYS = 20_000
#: days of a synthetic workload a study may generate without --allow-large (the shipped
#: configs use at most 60)
MAX_SYNTHETIC_DAYS = 1_000.0
ALLOW = "--allow-large"


def check_sizes(source: str, *, replays: int, synthetic_days: float | None = None,
                allow_large: bool = False) -> None:
    """Raise ConfigError when a study planning ``replays`` replays (over synthetic workloads of
    ``synthetic_days`` days) is past the limits and ``allow_large`` is false."""
    if allow_large:
        return
    if replays > MAX_REPLAYS:
        raise ConfigError(f"{source}: the study plans {replays:,} replays, more than "
                          f"{MAX_REPLAYS:,}; lower the grid (grid.experiments, seeds, policies) "
                          f"or pass {ALLOW} to run it anyway")
    if synthetic_days is not None and synthetic_days > MAX_SYNTHETIC_DAYS:
        raise ConfigError(f"{source}: a synthetic workload of {synthetic_days:g} days is more "
                          f"than {MAX_SYNTHETIC_DAYS:g}; shorten it or pass {ALLOW} to run it "
                          "anyway")


def evaluate_replays(cfg: Any) -> int:
    """Return the replays an evaluate config plans at most: experiments x groups x (policies +
    the FCFS baseline)."""
    groups = len(cfg.pools_per_experiment) * len(cfg.quota_scale)
    return int(cfg.experiments) * groups * (len(cfg.policies) + 1)


def check_evaluate(cfg: Any, allow_large: bool = False) -> None:
    """Check an :class:`~sia.pipelines.studies.experiment.ExperimentConfig`'s sizes."""
    days = cfg.trace.days if cfg.trace.synthetic is not None else None
    check_sizes(cfg.source, replays=evaluate_replays(cfg), synthetic_days=days,
                allow_large=allow_large)


def check_figure5(cfg: Any, source: str, allow_large: bool = False) -> None:
    """Check a Figure 5 config's sizes (workloads x seeds x (policies + FCFS), its days)."""
    replays = len(cfg.workloads) * len(cfg.seeds) * (len(cfg.policies) + 1)
    check_sizes(source, replays=replays, synthetic_days=cfg.days, allow_large=allow_large)


def check_figure16(cfg: Any, source: str, allow_large: bool = False) -> None:
    """Check a Figure 16 config's sizes (its replays per variant and seed, the chains' replays,
    the longer of its workload and the learned predictors' training workload)."""
    per = len(cfg.policies) + len(cfg.no_locality_policies) + 1
    replays = len(cfg.variants) * len(cfg.seeds) * per
    replays += len(cfg.chain_variants) * len(cfg.seeds) * max(1, len(cfg.chains))
    days = max(float(cfg.days), float(cfg.learned_train_days))
    check_sizes(source, replays=replays, synthetic_days=days, allow_large=allow_large)
