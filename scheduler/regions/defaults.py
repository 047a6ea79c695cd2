"""Defaults of the region plans that the config layer reads too; imports nothing (the CLI's
``--help`` must not load numpy)."""

#: Default wall-clock safety net of each region plan (s): plans stop on solver work first
#: (:func:`~sia.scheduler.regions.data_placement.solve_within`).
PLAN_TIME_S = 60.0
