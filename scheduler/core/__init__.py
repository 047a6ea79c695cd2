"""The replay core: the policy interface and view, needs, the cluster model, the simulator, metrics
and the forecasting protocol. Imports nothing else of the scheduler."""
