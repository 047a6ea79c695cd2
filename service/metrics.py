"""Prometheus text metrics of `sia serve` (exposition format 0.0.4, written by hand: a few
counters, two histograms and per-pool gauges need no client library)."""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any

#: Histogram bucket bounds (s).
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Histogram:
    """Cumulative-bucket histogram of seconds."""

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0
        self.n = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds
        self.n += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        out, acc = [], 0
        sep = "," if labels else ""
        for bound, c in zip((*BUCKETS, float("inf")), self.counts, strict=True):
            acc += c
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {acc}')
        lab = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{lab} {self.sum}", f"{name}_count{lab} {self.n}"]
        return out


class Metrics:
    """The service's counters (updated under the service's lock or by the event loop)."""

    def __init__(self) -> None:
        self.events: Counter[str] = Counter()
        self.duplicates = 0
        self.rejected = 0
        self.starts: Counter[str] = Counter()  # dedicated / lent
        self.requests: Counter[tuple[str, int]] = Counter()
        self.request_seconds = Histogram()
        self.decide_seconds = Histogram()  # applying a clock event: the policy's decisions
        self.decisions_seconds = Histogram()  # answering GET /decisions
        self.commits = 0  # log transactions (one per group of write requests)
        self.committed_requests = 0  # write requests those transactions answered

    def count_events(self, events: list[Any], duplicates: int, decided: list[Any]) -> None:
        for e in events:
            self.events[e.kind] += 1
        self.duplicates += duplicates
        for d in decided:
            self.starts["lent" if d.lent else "dedicated"] += 1

    def request(self, path: str, status: int, seconds: float) -> None:
        known = path if path in ("/events", "/decisions", "/forecast", "/report", "/metrics",
                                 "/healthz") else "other"
        self.requests[(known, status)] += 1
        self.request_seconds.observe(seconds)

    def render(self, core: Any) -> str:
        """The exposition text, with per-pool gauges read from ``core`` now."""
        out = ["# HELP sia_events_total Events accepted, by type.",
               "# TYPE sia_events_total counter"]
        out += [f'sia_events_total{{type="{k}"}} {v}' for k, v in sorted(self.events.items())]
        out += ["# HELP sia_events_duplicate_total Retried events acknowledged again.",
                "# TYPE sia_events_duplicate_total counter",
                f"sia_events_duplicate_total {self.duplicates}",
                "# HELP sia_events_rejected_total Requests refused for a bad event (4xx).",
                "# TYPE sia_events_rejected_total counter",
                f"sia_events_rejected_total {self.rejected}",
                "# HELP sia_starts_total Starts decided, dedicated or lent.",
                "# TYPE sia_starts_total counter"]
        out += [f'sia_starts_total{{kind="{k}"}} {v}' for k, v in sorted(self.starts.items())]
        out += ["# HELP sia_http_requests_total Requests by path and status.",
                "# TYPE sia_http_requests_total counter"]
        out += [f'sia_http_requests_total{{path="{p}",status="{s}"}} {v}'
                for (p, s), v in sorted(self.requests.items())]
        out += ["# HELP sia_http_request_seconds Request latency.",
                "# TYPE sia_http_request_seconds histogram"]
        out += self.request_seconds.lines("sia_http_request_seconds")
        out += ["# HELP sia_decision_seconds Time to decide the instants a clock event closes.",
                "# TYPE sia_decision_seconds histogram"]
        out += self.decide_seconds.lines("sia_decision_seconds")
        out += ["# HELP sia_decisions_read_seconds Time to answer GET /decisions.",
                "# TYPE sia_decisions_read_seconds histogram"]
        out += self.decisions_seconds.lines("sia_decisions_read_seconds")
        out += ["# HELP sia_log_commits_total Event log transactions (group commits).",
                "# TYPE sia_log_commits_total counter", f"sia_log_commits_total {self.commits}",
                "# HELP sia_log_committed_requests_total Write requests answered by those "
                "transactions (their ratio: requests per fsync).",
                "# TYPE sia_log_committed_requests_total counter",
                f"sia_log_committed_requests_total {self.committed_requests}"]
        state = core.state()
        clock = state["clock"]
        out += ["# HELP sia_clock_seconds The service's event-time clock.",
                "# TYPE sia_clock_seconds gauge", f"sia_clock_seconds {clock or 0}",
                "# HELP sia_log_rebuilds_total Re-runs of the event log (new jobs, restarts).",
                "# TYPE sia_log_rebuilds_total counter", f"sia_log_rebuilds_total {core.rebuilds}",
                "# HELP sia_grows_total Arrivals of new jobs taken into the arrays in place.",
                "# TYPE sia_grows_total counter", f"sia_grows_total {core.grows}"]
        pools = state["pools"]
        for name, help_, key in (("sia_pool_lent_gpus", "GPUs a pool's jobs use beyond its "
                                  "quota (lent to it).", "used_lent"),
                                 ("sia_pool_dedicated_gpus", "GPUs a pool uses on its quota.",
                                  "used_dedicated"),
                                 ("sia_pool_pending_jobs", "Jobs waiting per pool.", "pending")):
            out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
            out += [f'{name}{{pool="{_label(p)}"}} {s[key]}' for p, s in sorted(pools.items())]
        misses = _misses(core.policy)
        if misses is not None:
            out += ["# HELP sia_prediction_misses_total Duration predictions found wrong, by "
                    "pool (SIA's online adaptation).", "# TYPE sia_prediction_misses_total counter"]
            names = core._pool_names
            out += [f'sia_prediction_misses_total{{pool="{_label(names[p])}"}} {int(m)}'
                    for p, m in enumerate(misses) if p < len(names)]
        return "\n".join(out) + "\n"


def _misses(policy: Any) -> Any:
    tracker = getattr(policy, "duration_tracker", None)
    counts = getattr(tracker, "miss_counts", None)
    if not callable(counts):
        return None
    try:
        return counts().sum(axis=1)
    except Exception:  # a tracker not reset yet
        return None


def _label(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
