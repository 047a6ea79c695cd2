"""Global scheduling across regions (MAST): region model, data placement, global scan pass.

``model`` holds regions, pools' home regions, data sizes and replicas (with
the time each becomes usable); ``data_placement`` is the slow path (a MIP that
chooses where each pool's data is kept from predicted demand); ``global_scan``
is the fast path (one pass of the global queue routing jobs to the regions
that hold their data, with a negative cache). The simulator plugs its
regional schedulers in through :class:`global_scan.RegionScheduler`.
"""
