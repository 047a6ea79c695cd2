"""Cluster topology and the cell hierarchy used for locality (SIA 5.5, HiveD).

A cluster is ``racks x servers_per_rack x gpus_per_server`` GPUs. GPUs are
numbered ``0 .. n_gpus - 1`` server by server, so GPU ``g`` sits on server
``g // gpus_per_server`` and server ``s`` in rack ``s // servers_per_rack``.

Cells form a binary buddy tree. A cell of *level* ``l`` holds ``2**l`` GPUs,
and cell ``(l, i)`` covers GPUs ``[i * 2**l, (i + 1) * 2**l)``; its children
are ``(l - 1, 2i)`` and ``(l - 1, 2i + 1)`` (buddies of each other). With the
defaults (8 GPUs per server, 4 servers per rack) the levels are:

====== ====== =====================================
level  GPUs   what the cell is
====== ====== =====================================
0      1      one GPU
1      2      aligned GPU pair inside a server
2      4      aligned half server
3      8      a server
4      16     aligned pair of servers inside a rack
5      32     a rack
====== ====== =====================================

so ``gpus_per_server`` and ``servers_per_rack`` must be powers of two (the
buddy structure needs it). A gang of ``w`` GPUs must sit inside the smallest
cell that holds it: level ``ceil(log2(w))`` (1, 2, 4, 8 GPUs in one server,
16 or 32 in one rack). A job whose width is not a power of two (say 3) still
needs a cell of the next level (4) but uses only ``w`` of its GPUs.

Pool quotas are counts of cells per level (by cell size in GPUs, e.g.
``{8: 2, 4: 1}``); :func:`check_quotas` rejects an assignment the cluster
cannot host all at once, with a :class:`~sia.data.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sia.data.errors import ConfigError


def _is_pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


@dataclass(frozen=True)
class Topology:
    """A homogeneous cluster: ``racks`` racks of ``servers_per_rack`` servers of ``gpus_per_server`` GPUs."""

    racks: int
    servers_per_rack: int = 4
    gpus_per_server: int = 8

    def __post_init__(self) -> None:
        for name in ("racks", "servers_per_rack", "gpus_per_server"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"topology: {name} must be a positive integer, got {value!r}")
        for name in ("servers_per_rack", "gpus_per_server"):
            value = getattr(self, name)
            if not _is_pow2(value):
                raise ConfigError(
                    f"topology: {name} must be a power of two for buddy cells, got {value}"
                )

    # -- sizes -------------------------------------------------------------
    @property
    def n_servers(self) -> int:
        """Number of servers."""
        return self.racks * self.servers_per_rack

    @property
    def n_gpus(self) -> int:
        """Number of GPUs."""
        return self.n_servers * self.gpus_per_server

    @property
    def server_level(self) -> int:
        """Level of a whole-server cell (3 for 8-GPU servers)."""
        return self.gpus_per_server.bit_length() - 1

    @property
    def top_level(self) -> int:
        """Level of a rack cell, the largest cell."""
        return self.server_level + self.servers_per_rack.bit_length() - 1

    @property
    def levels(self) -> range:
        """All cell levels, 0 (one GPU) to :attr:`top_level` (a rack)."""
        return range(self.top_level + 1)

    def cell_gpus(self, level: int) -> int:
        """Number of GPUs in a cell of ``level``."""
        return 1 << level

    def n_cells(self, level: int) -> int:
        """Number of cells of ``level`` in the whole cluster."""
        return self.n_gpus >> level

    def level_for(self, num_gpus: int) -> int:
        """Level of the smallest cell that holds a gang of ``num_gpus`` GPUs.

        Raises ``ValueError`` for a gang wider than a rack or narrower than 1.
        """
        if num_gpus < 1:
            raise ValueError(f"a gang needs at least one GPU, got {num_gpus}")
        level = (num_gpus - 1).bit_length()
        if level > self.top_level:
            raise ValueError(
                f"a gang of {num_gpus} GPUs is wider than a rack ({self.cell_gpus(self.top_level)} GPUs)"
            )
        return level

    def level_of_size(self, cell_gpus: int, *, where: str = "cell size") -> int:
        """Level whose cells hold exactly ``cell_gpus`` GPUs; ConfigError if there is none."""
        if not isinstance(cell_gpus, int) or not _is_pow2(cell_gpus):
            raise ConfigError(f"{where}: {cell_gpus!r} is not a power-of-two cell size")
        level = cell_gpus.bit_length() - 1
        if level > self.top_level:
            raise ConfigError(
                f"{where}: cells of {cell_gpus} GPUs are larger than a rack "
                f"({self.cell_gpus(self.top_level)} GPUs)"
            )
        return level

    # -- geometry ------------------------------------------------------------
    def cell_of_gpu(self, gpu: int, level: int) -> int:
        """Index of the level-``level`` cell that contains GPU ``gpu``."""
        return gpu >> level

    def cell_gpu_range(self, level: int, index: int) -> range:
        """GPU ids covered by cell ``(level, index)``."""
        return range(index << level, (index + 1) << level)

    def server_of_gpu(self, gpu: int) -> int:
        """Server index of GPU ``gpu``."""
        return gpu // self.gpus_per_server

    def rack_of_server(self, server: int) -> int:
        """Rack index of server ``server``."""
        return server // self.servers_per_rack

    def describe(self) -> str:
        """A `--topology` string that parses back to this topology."""
        return f"servers={self.n_servers},gpus={self.gpus_per_server},rack={self.servers_per_rack}"


def quota_levels(
    topology: Topology, quotas: Mapping[str, Mapping[int, int]]
) -> dict[str, list[int]]:
    """Convert ``{pool: {cell_gpus: count}}`` to ``{pool: counts indexed by level}``.

    Raises ConfigError for a cell size that is not a level of the topology or a negative count.
    """
    out: dict[str, list[int]] = {}
    for pool, cells in quotas.items():
        counts = [0] * (topology.top_level + 1)
        for size, count in cells.items():
            level = topology.level_of_size(size, where=f"quota of pool {pool!r}")
            if not isinstance(count, int) or count < 0:
                raise ConfigError(
                    f"quota of pool {pool!r}: count of {size}-GPU cells must be a non-negative "
                    f"integer, got {count!r}"
                )
            counts[level] += count
        out[pool] = counts
    return out


def cells_shortfall(available: list[int], demand: list[int]) -> tuple[int, int] | None:
    """Return ``(level, missing)`` if free cells cannot honour ``demand``, else None.

    ``available[l]`` counts maximal free cells of level l (free cells whose parent
    is not free); ``demand[l]`` counts cells of level l that must still be
    handed out. Walking from the top, a free cell not needed at level l splits
    into two cells of level l - 1. For power-of-two cells this count is exact.
    """
    spare = 0
    for level in range(len(demand) - 1, -1, -1):
        have = available[level] + 2 * spare
        if have < demand[level]:
            return level, demand[level] - have
        spare = have - demand[level]
    return None


def check_quotas(topology: Topology, quotas: Mapping[str, Mapping[int, int]]) -> dict[str, list[int]]:
    """Check that the cluster can host every pool's quota cells at once.

    Returns the quotas as counts per level (see :func:`quota_levels`); raises
    ConfigError naming the cell size and how many cells are missing.
    """
    per_level = quota_levels(topology, quotas)
    demand = [sum(counts[level] for counts in per_level.values()) for level in topology.levels]
    available = [0] * (topology.top_level + 1)
    available[topology.top_level] = topology.racks
    short = cells_shortfall(available, demand)
    if short is not None:
        level, missing = short
        raise ConfigError(
            f"pool quotas cannot be satisfied on {topology.describe()}: "
            f"{missing} more cell(s) of {topology.cell_gpus(level)} GPUs are needed than the "
            f"cluster has left after the larger cells; shrink the quotas or grow the cluster"
        )
    return per_level
