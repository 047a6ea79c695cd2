"""One replay engine for every study (DESIGN.md 7): a spec in, a scored outcome out.

- :class:`ReplaySpec` names a replay (workload, policy and options,
  predictors, locality, tick, speedup); :func:`run_replay` runs it and
  returns a :class:`ReplayOutcome` (result, placement counters, policy facts,
  wall time); :func:`score` compares an outcome with its baseline.
- :func:`execute` runs a sweep's specs into the store (resuming: finished
  replays with the same key are reused) and :func:`stored_outcome` reads one
  back.
- The studies (`sia replay`, `sia evaluate`, `sia figure5`, `sia figure16`)
  are planners: their config in, a list of specs out, and a report over the
  outcomes.
"""

from sia.pipelines.engine.execute import Executed, execute, run_stored, stored_outcome
from sia.pipelines.engine.run import policy_facts, require_scored, run_replay, score
from sia.pipelines.engine.spec import (
    FrameWorkload,
    RegistryPredictors,
    ReplayOutcome,
    ReplaySpec,
    SyntheticTrainedPredictors,
    SyntheticWorkload,
    locality_options,
)

__all__ = [
    "Executed", "FrameWorkload", "RegistryPredictors", "ReplayOutcome", "ReplaySpec",
    "SyntheticTrainedPredictors", "SyntheticWorkload", "execute", "locality_options",
    "policy_facts", "require_scored", "run_replay", "run_stored", "score", "stored_outcome",
]
