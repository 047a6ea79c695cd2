"""A reference region for the global pass: servers of equal size, no preemption.

Stands in for a regional scheduler until the simulator plugs its own in
through :class:`~sia.scheduler.regions.global_scan.RegionScheduler`. Servers
are bucketed by their free GPU count so a plan costs O(GPUs per server):

* locality ``server``: the job's GPUs on one server, best fit (the fullest
  server that still fits it);
* locality ``any``: the servers with the most free GPUs first (MAST's RMS:
  fewest machines), so ``machines`` is the least number of servers possible.

A pass only consumes GPUs, so a refused request stays refused for equal or
larger ones of its shape (the negative cache's contract).
"""

from __future__ import annotations

from sia.scheduler.regions.global_scan import JobRequest, Plan
from sia.scheduler.regions.model import RegionsError

LOCALITIES = ("any", "server")


class ServerRegion:
    """``servers`` servers of ``gpus_per_server`` GPUs each, all free, of the given ``hardware`` types."""

    def __init__(self, name: str, servers: int, gpus_per_server: int = 8,
                 hardware: frozenset[str] = frozenset({"gpu"})) -> None:
        if servers < 1 or gpus_per_server < 1:
            raise RegionsError(f"region {name!r}: servers and gpus_per_server must be >= 1, "
                               f"got {servers} and {gpus_per_server}")
        self.name = name
        self.hardware = frozenset(hardware)
        self.gpus_per_server = gpus_per_server
        self.total_gpus = servers * gpus_per_server
        self.free = [gpus_per_server] * servers
        self._free_total = self.total_gpus
        self._bucket: list[set[int]] = [set() for _ in range(gpus_per_server + 1)]
        self._bucket[gpus_per_server] = set(range(servers))

    def free_gpus(self) -> int:
        """Free GPUs in the region."""
        return self._free_total

    def try_plan(self, request: JobRequest) -> Plan | None:
        """A plan starting ``request`` now on free GPUs, or None; the region is not changed."""
        g, gps = request.gpus, self.gpus_per_server
        if request.locality not in LOCALITIES:
            raise RegionsError(f"job {request.job_id!r}: locality {request.locality!r} is not one of {LOCALITIES}")
        if g < 1 or g > self._free_total:
            return None
        if request.locality == "server":
            for k in range(g, gps + 1):
                if self._bucket[k]:
                    return Plan(self.name, request.job_id, g, 1, 0, ((min(self._bucket[k]), g),))
            return None
        use, need = [], g
        for k in range(gps, 0, -1):
            for s in sorted(self._bucket[k]):
                take = min(k, need)
                use.append((s, take))
                need -= take
                if need == 0:
                    return Plan(self.name, request.job_id, g, len(use), 0, tuple(use))
        return None

    def commit(self, plan: Plan) -> None:
        """Take the plan's GPUs; raises if the plan is not this region's or no longer fits."""
        if plan.region != self.name:
            raise RegionsError(f"plan for job {plan.job_id!r} is for region {plan.region!r}, not {self.name!r}")
        for s, take in plan.detail:
            if take > self.free[s]:
                raise RegionsError(f"region {self.name!r}: plan for job {plan.job_id!r} needs {take} GPUs "
                                   f"on server {s}, which has {self.free[s]} free")
        for s, take in plan.detail:
            self._bucket[self.free[s]].discard(s)
            self.free[s] -= take
            self._bucket[self.free[s]].add(s)
        self._free_total -= plan.gpus
