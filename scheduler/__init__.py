"""Cluster model, event-driven trace-replay simulator, policies, placement and metrics.

Never imports `sia.models`: predictions arrive through the forecasting protocol.
"""
