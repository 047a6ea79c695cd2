"""The studies: evaluation sweeps and the paper's experiments (Figure 5, Figure 13, Figure 16,
the backtest, the regions and slowdown reports) and the config schema they read. The commands
in :mod:`sia.pipelines.cli` call them; they call the shared stages beside this package."""
