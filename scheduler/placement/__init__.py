"""Batch placement of gangs on cells: the protocol and cost model, the solver chain, and the
solvers (min-cost flow, Hungarian, MILP)."""
