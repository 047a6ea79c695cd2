"""`sia serve`: the live decision service over the replay's own policies (DESIGN.md 6.7).

- :mod:`sia.service.core`: the steppable scheduling core (the replay's event loop on an
  event-time clock, rebuilt from the event log when new jobs arrive);
- :mod:`sia.service.app`: the ASGI app (the guard, and FastAPI for the reads);
  :mod:`sia.service.ingest`: ``POST /events``, the hot path; :mod:`sia.service.api_models`:
  the wire format; :mod:`sia.service.service`: what the endpoints share (core, log, lock);
  :mod:`sia.service.writer`: the group commit; :mod:`sia.service.store`: the SQLite event
  log; :mod:`sia.service.metrics`: Prometheus text;
- :mod:`sia.service.server`: uvicorn on a bound socket;
- :mod:`sia.service.drive`: drive a service with a trace (`sia shadow`);
  :mod:`sia.service.client`: an HTTP client; :mod:`sia.service.slurm`: a Slurm poller sketch;
  :mod:`sia.service.process`: the server as a child process (tests, benchmarks).

The service imports only the scheduler and the data layer; what it starts from (the pools,
history, predictors and the policy built by the replay engine) is given to it by the
pipelines (:mod:`sia.pipelines.service_inputs`), whose commands are
:mod:`sia.pipelines.cli.serve` and :mod:`sia.pipelines.cli.shadow`.
"""
