"""The trace contract: job and pool tables, readers, validation, synthetic workloads.

Bottom layer of the product: imports nothing from the other packages.
"""
