"""The cluster model: servers of G GPUs, and which job holds which GPU (DESIGN.md 6.1, 6.3).

The cluster is the sum of the pools' quotas, laid out on servers of
``gpus_per_server`` GPUs (the last server may be smaller). Pools own quota,
not particular GPUs: without locality every GPU is fungible, which is the
one-level special case of the cell hierarchy of SIA 5.5.

Two modes, one interface:

* **count mode** (``track_gpus=False``, the fast path): only the number of
  free GPUs is kept; ``allocate`` / ``release`` are counter updates.
* **tracked mode** (``track_gpus=True``): an owner array maps every GPU to the
  job holding it (-1 = free). ``allocate`` picks concrete GPUs (best-fit on one
  server, else the emptiest servers first) or takes the ``placement`` a
  policy chose, and refuses a GPU that is already held; :meth:`check` verifies
  that owners and counts agree. The simulator uses it with
  ``check_invariants=True`` ("no GPU double-booked").

Seam for locality: a placement layer (buddy cells, the fallback solvers)
subclasses :class:`Cluster` (or wraps it) and overrides :meth:`choose_gpus`
and/or :meth:`can_place`; policies pass their choice as ``Start.placement``
(a sequence of GPU ids). The simulator only ever calls ``can_place``,
``allocate``, ``release`` and ``check``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sia.data.errors import ConfigError


class PlacementError(ValueError):
    """A placement names GPUs that do not exist, are held, or do not match the gang size."""


class Cluster:
    """GPUs on servers, with a free counter and (optionally) per-GPU owners.

    Attributes: ``total_gpus``, ``gpus_per_server``, ``server_sizes`` (GPUs per
    server), ``n_servers``, ``free`` (GPUs held by no job), ``quota`` (int64
    [P], each pool's dedicated GPUs, summing to ``total_gpus``) and
    ``track_gpus``.
    """

    def __init__(self, quota: Sequence[int] | np.ndarray, gpus_per_server: int = 8,
                 track_gpus: bool = False):
        quota = np.asarray(quota, dtype=np.int64)
        if quota.ndim != 1 or (quota < 0).any():
            raise ConfigError(f"cluster: quotas must be a list of GPU counts >= 0, got {quota}")
        if int(gpus_per_server) < 1:
            raise ConfigError(f"cluster: gpus_per_server must be >= 1, got {gpus_per_server}")
        self.quota = quota
        self.total_gpus = int(quota.sum())
        self.gpus_per_server = int(gpus_per_server)
        full, rest = divmod(self.total_gpus, self.gpus_per_server)
        self.server_sizes = [self.gpus_per_server] * full + ([rest] if rest else [])
        self.n_servers = len(self.server_sizes)
        #: first GPU id of each server (GPU ids are 0..total-1, server-major)
        self.server_first = np.concatenate([[0], np.cumsum(self.server_sizes)[:-1]]).astype(
            np.int64
        ) if self.server_sizes else np.zeros(0, dtype=np.int64)
        self.track_gpus = bool(track_gpus)
        self.reset()

    def reset(self) -> None:
        """Free every GPU."""
        self.free = self.total_gpus
        if self.track_gpus:
            self.owner = np.full(self.total_gpus, -1, dtype=np.int64)
            self.server_free = np.array(self.server_sizes, dtype=np.int64)
            self.held: dict[int, np.ndarray] = {}

    def server_of(self, gpu: int | np.ndarray) -> np.ndarray:
        """Return the server index of GPU id(s) ``gpu``."""
        return np.searchsorted(self.server_first, gpu, side="right") - 1

    # -- the seam a placement layer overrides
    def can_place(self, num_gpus: int, placement: object = None) -> bool:
        """Return True when a gang of ``num_gpus`` can start now (count mode: enough free GPUs)."""
        return num_gpus <= self.free

    def choose_gpus(self, num_gpus: int) -> np.ndarray:
        """Return GPU ids for a gang: best-fit on one server, else the emptiest servers first.

        Tracked mode only. A placement layer with locality overrides this.
        """
        sf = self.server_free
        fits = np.flatnonzero(sf >= num_gpus)
        if fits.size:
            servers = [int(fits[np.argmin(sf[fits])])]
        else:
            servers = list(np.argsort(-sf, kind="stable"))
        chosen: list[np.ndarray] = []
        need = num_gpus
        for s in servers:
            if need == 0:
                break
            first = self.server_first[s]
            block = np.flatnonzero(self.owner[first : first + self.server_sizes[s]] < 0) + first
            take = block[:need]
            chosen.append(take)
            need -= take.size
        if need:
            raise PlacementError(f"cannot find {num_gpus} free GPUs (only {self.free} free)")
        return np.concatenate(chosen)

    # -- what the simulator calls
    def allocate(self, job: int, num_gpus: int, placement: object = None) -> None:
        """Give ``num_gpus`` GPUs to ``job`` (at ``placement`` if given); raise PlacementError if not possible."""
        if num_gpus > self.free:
            raise PlacementError(f"job {job} needs {num_gpus} GPUs but only {self.free} are free")
        if self.track_gpus:
            if placement is None:
                gpus = self.choose_gpus(num_gpus)
            else:
                gpus = np.asarray(placement, dtype=np.int64).ravel()
                if gpus.size != num_gpus or np.unique(gpus).size != gpus.size:
                    raise PlacementError(
                        f"job {job}: placement {gpus.tolist()} is not {num_gpus} distinct GPUs"
                    )
                if (gpus < 0).any() or (gpus >= self.total_gpus).any():
                    raise PlacementError(f"job {job}: placement {gpus.tolist()} names unknown GPUs")
            busy = gpus[self.owner[gpus] >= 0]
            if busy.size:
                raise PlacementError(
                    f"job {job}: GPU {int(busy[0])} is already held by job {int(self.owner[busy[0]])}"
                )
            if job in self.held:
                raise PlacementError(f"job {job} already holds GPUs")
            self.owner[gpus] = job
            np.subtract.at(self.server_free, self.server_of(gpus), 1)
            self.held[job] = gpus
        elif placement is not None:
            raise PlacementError(
                f"job {job}: a placement was given but this cluster does not track GPUs"
            )
        self.free -= num_gpus

    def release(self, job: int, num_gpus: int) -> None:
        """Take back the ``num_gpus`` GPUs held by ``job``."""
        if self.track_gpus:
            gpus = self.held.pop(job, None)
            if gpus is None or gpus.size != num_gpus or (self.owner[gpus] != job).any():
                raise PlacementError(f"job {job} releases GPUs it does not hold")
            self.owner[gpus] = -1
            np.add.at(self.server_free, self.server_of(gpus), 1)
        self.free += num_gpus
        if self.free > self.total_gpus:
            raise PlacementError(f"job {job}: more GPUs released than the cluster has")

    def check(self) -> None:
        """Raise AssertionError unless owners, per-server and total free counts agree (tracked mode)."""
        assert 0 <= self.free <= self.total_gpus, f"free GPUs {self.free} out of range"
        if not self.track_gpus:
            return
        held = sum(g.size for g in self.held.values())
        assert int((self.owner >= 0).sum()) == held, "GPU owners disagree with held GPUs"
        assert self.free == self.total_gpus - held, (
            f"free counter {self.free} != total {self.total_gpus} - held {held}"
        )
        for job, gpus in self.held.items():
            assert (self.owner[gpus] == job).all(), f"job {job}'s GPUs are double-booked"
        per_server = np.bincount(
            self.server_of(np.flatnonzero(self.owner < 0)), minlength=self.n_servers
        )
        assert (per_server == self.server_free).all(), "per-server free counts are wrong"

    def __repr__(self) -> str:
        return (
            f"Cluster(total_gpus={self.total_gpus}, servers={self.n_servers}x"
            f"{self.gpus_per_server}, free={self.free}, track_gpus={self.track_gpus})"
        )
