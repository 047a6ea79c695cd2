"""HiveD's buddy-cell allocation, as SIA 5.5 adapts it to non-preemptible jobs.

Cells and levels are those of :mod:`sia.scheduler.locality.topology` (cell ``(l, i)``
holds GPUs ``[i * 2**l, (i + 1) * 2**l)``). Each pool has a quota of cells per
level. The allocator keeps, as HiveD does, *free lists per level* and splits
and merges cells like a buddy memory allocator.

Binding (HiveD's virtual-to-physical mapping, done lazily)
    A pool's quota cells are *unbound* until the pool needs one. When a
    dedicated job or a reservation of the pool needs a level-k cell and the
    pool's bound cells have no free room, one of its unbound quota cells (the
    smallest level >= k it still has) is *bound* to a physical free cell. A
    bound cell leaves the global free lists; the pool's own free lists then
    hold its free sub-cells, so the pool's later dedicated cells land inside
    it, next to its other dedicated cells (its buddies). When everything in a
    bound cell is released, the cell is unbound and merges back globally.

Opportunistic jobs
    take cells from the global free lists only, so they never land inside a
    pool's bound cells (but a pool may bind a cell they already sit in, see
    below); with ``strict_buddies`` (default) they also never take
    (any part of) a free cell whose buddy is a bound cell, so a pool's bound
    cells keep free neighbours to grow into (SIA 5.5: "does not start opportunistic jobs
    in buddy cells of dedicated jobs"; ``spare_full_pools`` narrows this to
    pools that still have unbound quota, i.e. could still grow there). They are refused while a reservation
    is pending (a reservation that could not be met: SIA 5.5, "all subsequent
    requests to allocate opportunistic jobs will fail until the reservation is
    released").

Binding over loans (``adopt_loans``)
    With quota cells as large as a server, one small opportunistic job in
    every unbound server keeps a pool from binding any (its 1-GPU job waits
    although whole servers' worth of GPUs are idle). When no free cell can
    be bound, the pool may bind a cell that opportunistic jobs hold part of,
    if its request fits a free sub-cell there: the loans stay in it as
    *guests* and run to completion (their cells then go to the pool), and
    the cell is unbound again when the pool's last dedicated cell or
    reservation in it leaves (guests return to the global domain). The cell
    with the fewest guest GPUs is taken. HiveD binds such cells too (and
    preempts the low-priority jobs); without preemption the guests stay.

Packing inside a pool (``pack``)
    Among a pool's free cells of the smallest fitting level, take the one in
    the most occupied region (fewest free GPUs in its grandparent, then
    higher ancestors), keeping larger free cells whole; otherwise the
    lowest-numbered one.

Cell state machine (``state[l][i]``)::

    COVERED --(parent splits)--> FREE --(taken whole)--> OPP | DED | RES
    FREE --(split: children become FREE)--> SPLIT
    OPP | DED | RES --(release)--> FREE --(buddy FREE in same domain)--> COVERED,
                                            parent SPLIT -> FREE  (merge)

    COVERED: not a node of the current tree (inside a larger FREE or used
    cell). A cell's *domain* is the pool whose bound cell contains it, or the
    global domain. Binding marks a global FREE cell as the bound cell of a
    pool; unbinding happens when a bound cell is FREE again.

Invariants (:meth:`BuddyAllocator.check_invariants`, run after every
operation when ``debug=True``):

1. Tree: a SPLIT cell has two live children; any other live cell has COVERED
   children; top-level (rack) cells are live.
2. Free lists hold exactly the FREE cells, each in its domain's list, and
   are merged: no two FREE buddies in one domain (a bound cell is a boundary).
3. Bound cells never nest; a pool binds at most its quota per level.
4. DED/RES cells lie inside their pool's bound cells; OPP cells lie outside
   every bound cell (unless ``adopt_loans``: guests); every bound cell holds
   at least one DED/RES cell, as its counter says.
5. Counters (dedicated / reserved / opportunistic cells per pool and level)
   match the live allocations.
6. HiveD's safety: cells not bound to any pool (free or held by
   opportunistic jobs, which return them when they finish) can still host
   every pool's unbound quota cells, counted level by level from the top
   (:func:`sia.scheduler.locality.topology.cells_shortfall`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from sia.scheduler.locality.topology import Topology, cells_shortfall, check_quotas

COVERED, FREE, SPLIT, OPP, DED, RES = 0, 1, 2, 3, 4, 5
_STATE_NAMES = {COVERED: "COVERED", FREE: "FREE", SPLIT: "SPLIT", OPP: "OPP", DED: "DED", RES: "RES"}
_KIND_STATE = {"dedicated": DED, "reservation": RES, "opportunistic": OPP}

_GLOBAL = -1  # domain id of the global free lists


class CannotAllocate(Exception):
    """The allocator refused a request; the message says why (over quota, no cell, blocked)."""


class InvariantError(AssertionError):
    """An invariant of the allocator is broken (a bug, never a user error)."""


@dataclass(frozen=True)
class Allocation:
    """One cell handed out: to a job (dedicated or opportunistic) or as a reservation.

    ``gpus`` are the GPU ids the job uses: the first ``num_gpus`` of the cell.
    """

    alloc_id: str
    pool: str
    kind: str  # "dedicated" | "reservation" | "opportunistic"
    level: int
    index: int
    num_gpus: int
    gpus: tuple[int, ...]


class BuddyAllocator:
    """Buddy-cell allocator with per-pool quotas of cells (see the module docstring)."""

    def __init__(
        self,
        topology: Topology,
        quotas: Mapping[str, Mapping[int, int]],
        *,
        debug: bool = False,
        strict_buddies: bool = True,
        spare_full_pools: bool = False,
        adopt_loans: bool = False,
        pack: bool = False,
    ) -> None:
        self.topology = topology
        self.debug = debug
        self.strict_buddies = strict_buddies
        #: when no free cell can be bound, bind a cell partly held by opportunistic jobs (which
        #: stay in it as guests) if the request fits its free part (see the module docstring)
        self.adopt_loans = adopt_loans
        #: inside a pool's bound cells, take the free cell in the most occupied region
        #: (fewest free GPUs in its ancestors) instead of the lowest-numbered one
        self.pack = pack
        #: with strict_buddies: still allow the buddy of a bound cell whose pool has bound all
        #: its quota (it can never grow into the buddy, so keeping it free protects nobody)
        self.spare_full_pools = spare_full_pools
        per_level = check_quotas(topology, quotas)  # ConfigError if unsatisfiable
        self.pools: list[str] = list(per_level)
        self._pool_index = {p: k for k, p in enumerate(self.pools)}
        self._quota = np.array([per_level[p] for p in self.pools], dtype=np.int64).reshape(
            len(self.pools), topology.top_level + 1
        )
        n_levels = topology.top_level + 1
        self._top = topology.top_level
        self._state = [np.full(topology.n_cells(lv), COVERED, dtype=np.int8) for lv in range(n_levels)]
        self._state[self._top][:] = FREE
        self._bound = [np.full(topology.n_cells(lv), -1, dtype=np.int32) for lv in range(n_levels)]
        self._bound_sub = [np.zeros(topology.n_cells(lv), dtype=np.int32) for lv in range(n_levels)]
        self._bound_count = np.zeros_like(self._quota)
        # free lists: domain -> level -> set of cell indices
        self._free: dict[int, list[set[int]]] = {_GLOBAL: [set() for _ in range(n_levels)]}
        for k in range(len(self.pools)):
            self._free[k] = [set() for _ in range(n_levels)]
        self._free[_GLOBAL][self._top] = set(range(topology.n_cells(self._top)))
        self._allocs: dict[str, Allocation] = {}
        self._count = {
            kind: np.zeros_like(self._quota) for kind in ("dedicated", "reservation", "opportunistic")
        }
        self._pending: dict[str, tuple[str, int]] = {}
        #: bound cell (level, index) -> dedicated cells and reservations inside it
        self._owned: dict[tuple[int, int], int] = {}
        self.adoptions = 0  # bindings of cells that held opportunistic guests
        self._check()

    # ------------------------------------------------------------------ queries
    def allocation(self, alloc_id: str) -> Allocation:
        """The live allocation ``alloc_id`` (KeyError if none)."""
        return self._allocs[alloc_id]

    @property
    def allocations(self) -> dict[str, Allocation]:
        """All live allocations by id (a copy)."""
        return dict(self._allocs)

    @property
    def pending_reservations(self) -> dict[str, tuple[str, int]]:
        """Reservations that could not be met: id -> (pool, level). Opportunistic jobs wait while any is pending."""
        return dict(self._pending)

    def free_cells(self, level: int, pool: str | None = None) -> list[int]:
        """Sorted indices of free cells of ``level`` in the global lists (or in ``pool``'s bound cells)."""
        domain = _GLOBAL if pool is None else self._pool_index[pool]
        return sorted(self._free[domain][level])

    def has_free_cell(self, level: int) -> bool:
        """True if the global free lists hold a cell of ``level`` or larger (an aligned free cell exists)."""
        return any(self._free[_GLOBAL][lv] for lv in range(level, self._top + 1))

    def usage(self, pool: str) -> dict[str, list[int]]:
        """Cells per level held by ``pool``: keys quota, bound, dedicated, reservation, opportunistic."""
        k = self._pool_index[pool]
        out = {"quota": self._quota[k].tolist(), "bound": self._bound_count[k].tolist()}
        for kind, arr in self._count.items():
            out[kind] = arr[k].tolist()
        return out

    def quota_gpus_left(self, pool: str) -> int:
        """GPUs of ``pool``'s quota cells not taken by its dedicated cells and reservations."""
        k = self._pool_index[pool]
        size = 1 << np.arange(self._top + 1)
        used = (self._count["dedicated"][k] + self._count["reservation"][k]) @ size
        return int(self._quota[k] @ size - used)

    def unbound_quota(self) -> list[int]:
        """Quota cells per level, summed over pools, not yet bound to a physical cell."""
        return (self._quota - self._bound_count).sum(axis=0).tolist()

    def available_cells(self) -> list[int]:
        """Maximal cells per level not bound to any pool (free or opportunistic count as available)."""
        counts = []
        for lv in range(self._top + 1):
            mask = self._bound_sub[lv] == 0
            if lv < self._top:
                parent_sub = np.repeat(self._bound_sub[lv + 1], 2)
                parent_bound = np.repeat(self._bound[lv + 1] >= 0, 2)
                mask &= (parent_sub > 0) & ~parent_bound
            counts.append(int(mask.sum()))
        return counts

    def is_safe(self) -> bool:
        """True if unbound cells can still honour every pool's unbound quota (HiveD's safety)."""
        return cells_shortfall(self.available_cells(), self.unbound_quota()) is None

    def free_gpu_mask(self, pool: str | None = None) -> np.ndarray:
        """Bool array [n_gpus]: GPUs in FREE cells of the global lists (or of ``pool``'s bound cells)."""
        mask = np.zeros(self.topology.n_gpus, dtype=bool)
        domain = _GLOBAL if pool is None else self._pool_index[pool]
        for lv, cells in enumerate(self._free[domain]):
            for i in cells:
                mask[i << lv : (i + 1) << lv] = True
        return mask

    def bound_pool_map(self) -> np.ndarray:
        """Int array [n_gpus]: index into :attr:`pools` of the pool whose bound cell holds each GPU, -1 if none."""
        out = np.full(self.topology.n_gpus, -1, dtype=np.int32)
        for lv in range(self._top + 1):
            for i in np.flatnonzero(self._bound[lv] >= 0):
                out[i << lv : (i + 1) << lv] = self._bound[lv][i]
        return out

    # -------------------------------------------------------------- operations
    def allocate_dedicated(self, job_id: str, pool: str, num_gpus: int) -> Allocation:
        """Allocate a dedicated cell for ``job_id`` inside ``pool``'s quota, next to its other cells.

        Raises CannotAllocate (over quota, or no safe free cell right now).
        """
        return self._allocate_in_quota(job_id, pool, num_gpus, "dedicated")

    def reserve(self, reservation_id: str, pool: str, num_gpus: int, *,
                short_is_pending: bool = False) -> Allocation:
        """Reserve a cell of ``pool``'s quota for no job (SIA's reservations are dedicated cells).

        If it cannot be met now (not over quota, but cells are busy) it stays
        pending and opportunistic allocations fail until it is met or cancelled;
        CannotAllocate is raised either way. With ``short_is_pending``, a
        request refused "over quota" whose cell still fits the pool's quota in
        GPUs (:meth:`quota_gpus_left`: its bound cells are held by guests or
        fragmented, so the cells it is owed cannot be met now) is pending too.
        """
        level = self._level(num_gpus)
        try:
            alloc = self._allocate_in_quota(reservation_id, pool, num_gpus, "reservation")
        except CannotAllocate as err:
            if "over quota" not in str(err) or (
                    short_is_pending and (1 << level) <= self.quota_gpus_left(pool)):
                self._pending[reservation_id] = (pool, level)
            raise
        self._pending.pop(reservation_id, None)
        return alloc

    def cancel_reservation(self, reservation_id: str) -> None:
        """Drop a pending reservation (one that was never met); a met one is freed with :meth:`release`."""
        self._pending.pop(reservation_id, None)

    def allocate_opportunistic(self, job_id: str, pool: str, num_gpus: int) -> Allocation:
        """Allocate a cell outside every pool's bound cells for ``job_id`` of ``pool``.

        Raises CannotAllocate if a reservation is pending or no suitable free cell exists.
        """
        self._check_new(job_id, pool)
        level = self._level(num_gpus)
        if self._pending:
            first = next(iter(self._pending))
            raise CannotAllocate(
                f"opportunistic job {job_id!r} blocked: reservation {first!r} is pending"
            )
        picked = self._pick_global(level, self._opportunistic_score, self._opportunistic_ok)
        if picked is None:
            raise CannotAllocate(
                f"no free {1 << level}-GPU cell for opportunistic job {job_id!r} outside dedicated cells"
            )
        src_level, src = picked
        index = self._split_down(_GLOBAL, src_level, src, level)
        return self._commit(job_id, pool, "opportunistic", level, index, num_gpus)

    def allocate_at(self, job_id: str, pool: str, num_gpus: int, index: int, *,
                    guest: bool = False) -> Allocation:
        """Take the given cell (level ``level_for(num_gpus)``, ``index``) for an opportunistic job.

        For a cell a fallback solver chose (or to put back a job whose cell was
        freed for a preemption that was then not needed). The cell must lie in
        a FREE cell of the global lists (outside every pool's bound cells), or,
        with ``guest=True`` (a put-back), in a FREE cell of the bound cell that
        holds it; the buddy rule ``strict_buddies`` is not applied (that is why a
        fallback is asked at all). Raises CannotAllocate if a reservation is
        pending or the cell is not free.
        """
        self._check_new(job_id, pool)
        level = self._level(num_gpus)
        if self._pending:
            first = next(iter(self._pending))
            raise CannotAllocate(f"opportunistic job {job_id!r} blocked: reservation {first!r} is pending")
        if not 0 <= index < self.topology.n_cells(level):
            raise CannotAllocate(f"cell ({level},{index}) does not exist")
        domain = self._domain_of(level, index)
        if domain != _GLOBAL and not guest:
            raise CannotAllocate(f"cell ({level},{index}) for {job_id!r} lies in a bound cell")
        if self._free_ancestor(domain, level, index) is None:
            raise CannotAllocate(f"cell ({level},{index}) for {job_id!r} is not inside a free cell")
        self._take_cell(level, index)
        self._free[domain][level].add(index)  # _commit takes it
        return self._commit(job_id, pool, "opportunistic", level, index, num_gpus)

    def domain_cells(self, pool: str | None = None) -> list[tuple[int, int]]:
        """Disjoint cells (level, index) making up ``pool``'s bound cells, or the global domain (None).

        The global domain is every GPU outside all bound cells, as its maximal cells.
        """
        if pool is not None:
            k = self._pool_index[pool]
            return [(lv, int(i)) for lv in range(self._top + 1)
                    for i in np.flatnonzero(self._bound[lv] == k)]
        out = []
        for lv in range(self._top + 1):
            mask = self._bound_sub[lv] == 0
            if lv < self._top:
                mask &= (np.repeat(self._bound_sub[lv + 1], 2) > 0) & ~np.repeat(self._bound[lv + 1] >= 0, 2)
            out.extend((lv, int(i)) for i in np.flatnonzero(mask))
        return out

    def domain_pool(self, level: int, index: int) -> str | None:
        """Pool whose bound cell holds cell (level, index), or None (global domain)."""
        d = self._domain_of(level, index)
        return None if d == _GLOBAL else self.pools[d]

    def relocate(self, moves: Mapping[str, int], new: tuple[str, str, str, int, int] | None = None
                 ) -> Allocation | None:
        """Move live allocations to other cells of their domain at once (migration); optionally add one.

        ``moves``: allocation id -> index of its new cell (same level, same
        domain: its pool's bound cells for dedicated cells, the global domain for
        opportunistic ones). ``new``: (alloc_id, pool, kind, num_gpus, index), a
        cell to allocate in the same step (the gang the moves made room for).
        Pool, kind, level and counters of moved allocations are unchanged; a
        bound cell left without dedicated cells is unbound as by :meth:`release`.
        The new cells must be free once the moved ones are freed; otherwise
        CannotAllocate is raised before anything changes. Returns the new allocation.
        """
        olds = self._moved_allocations(moves)
        targets = [(a.level, moves[aid]) for aid, a in olds.items()]
        if new is not None:
            nid, npool, nkind, ngpus, nindex = new
            self._check_new(nid, npool)
            if nkind == "opportunistic" and self._pending:
                raise CannotAllocate(f"opportunistic job {nid!r} blocked: a reservation is pending")
            targets.append((self._level(ngpus), nindex))
        self._check_free_after_moves(olds, targets)
        emptied = self._free_moved(olds)
        for aid, a in olds.items():
            self._take_cell(a.level, moves[aid])
            self._state[a.level][moves[aid]] = _KIND_STATE[a.kind]
            first = moves[aid] << a.level
            self._allocs[aid] = replace(a, index=moves[aid],
                                        gpus=tuple(range(first, first + a.num_gpus)))
            if a.kind != "opportunistic":
                owner = self._bound_ancestor(a.level, moves[aid])
                self._owned[owner] = self._owned.get(owner, 0) + 1
        out = None
        if new is not None:
            level = self._level(ngpus)
            self._take_cell(level, nindex)
            self._free[self._domain_of(level, nindex)][level].add(nindex)
            debug, self.debug = self.debug, False  # checked once the step is complete
            try:
                out = self._commit(nid, npool, nkind, level, nindex, ngpus)
            finally:
                self.debug = debug
        self._unbind_emptied(emptied)
        self._check()
        return out

    def _moved_allocations(self, moves: Mapping[str, int]) -> dict[str, Allocation]:
        """Return the live allocations :meth:`relocate` moves, by id (sorted); refuse an
        unknown id or a move out of its domain."""
        olds = {}
        for aid in sorted(moves):
            a = self._allocs.get(aid)
            if a is None:
                raise KeyError(f"no live allocation {aid!r} to move")
            if self._domain_of(a.level, moves[aid]) != self._domain_of(a.level, a.index):
                raise CannotAllocate(f"move of {aid!r} to ({a.level},{moves[aid]}) leaves its domain")
            olds[aid] = a
        return olds

    def _check_free_after_moves(self, olds: Mapping[str, Allocation],
                                targets: list[tuple[int, int]]) -> None:
        """Raise CannotAllocate unless every target cell is free once the moved cells are
        (checked on GPUs, before anything changes)."""
        busy = np.zeros(self.topology.n_gpus, dtype=bool)
        for a in self._allocs.values():
            if a.alloc_id not in olds:
                busy[a.index << a.level : (a.index + 1) << a.level] = True
        for lv, i in targets:
            span = slice(i << lv, (i + 1) << lv)
            if busy[span].any():
                raise CannotAllocate(f"cell ({lv},{i}) is not free for a move")
            busy[span] = True

    def _free_moved(self, olds: Mapping[str, Allocation]) -> set[tuple[int, int]]:
        """Free the moved allocations' cells, merging inside their domain only; return the
        bound cells that lost a dedicated cell."""
        emptied: set[tuple[int, int]] = set()
        for aid, a in olds.items():
            del self._allocs[aid]
            if a.kind != "opportunistic":
                owner = self._bound_ancestor(a.level, a.index)
                self._owned[owner] -= 1
                emptied.add(owner)
            lv, i = a.level, a.index
            domain = self._domain_of(lv, i)
            self._state[lv][i] = FREE
            self._free[domain][lv].add(i)
            while lv < self._top and self._bound[lv][i] < 0 and self._bound[lv][i ^ 1] < 0:
                up = self._merge_with_buddy(domain, lv, i)
                if up is None:
                    break
                lv, i = up
        return emptied

    def _unbind_emptied(self, emptied: set[tuple[int, int]]) -> None:
        """Unbind the bound cells of ``emptied`` left without dedicated cells, as :meth:`release`."""
        for owner in sorted(emptied):
            if self._owned.get(owner, 1) > 0:
                continue
            self._owned.pop(owner)
            lv, i = owner
            if self._state[lv][i] == FREE:  # wholly free: unbind and merge globally
                self._unbind(lv, i)
                up = (lv, i)
                while up is not None:
                    up = self._merge_with_buddy(_GLOBAL, *up)
            else:
                self._unbind_with_guests(lv, i)

    def _free_ancestor(self, domain: int, level: int, index: int) -> tuple[int, int] | None:
        """The free cell of ``domain`` holding cell ``(level, index)`` (itself or an ancestor),
        as (level, index), or None."""
        free = self._free[domain]
        for lv in range(level, self._top + 1):
            anc = index >> (lv - level)
            if anc in free[lv]:
                return lv, anc
        return None

    def _take_cell(self, level: int, index: int) -> None:
        """Split the free cell holding cell (level, index) down to it and take it off the free lists."""
        domain = self._domain_of(level, index)
        free = self._free[domain]
        found = self._free_ancestor(domain, level, index)
        if found is None:
            raise InvariantError(f"cell ({level},{index}) is not inside a free cell")
        lv, anc = found
        free[lv].remove(anc)
        while lv > level:
            self._state[lv][anc] = SPLIT
            lv -= 1
            self._state[lv][2 * anc] = FREE
            self._state[lv][2 * anc + 1] = FREE
            anc = index >> (lv - level)
            free[lv].add(anc ^ 1)

    def release(self, alloc_id: str) -> None:
        """Free the cell of allocation ``alloc_id``, merge buddies and unbind bound cells left without dedicated cells."""
        alloc = self._allocs.pop(alloc_id, None)
        if alloc is None:
            raise KeyError(f"no live allocation {alloc_id!r}")
        k = self._pool_index[alloc.pool]
        self._count[alloc.kind][k, alloc.level] -= 1
        lv, i = alloc.level, alloc.index
        domain = self._domain_of(lv, i)
        owner = self._bound_ancestor(lv, i) if alloc.kind != "opportunistic" else None
        self._state[lv][i] = FREE
        self._free[domain][lv].add(i)
        while True:
            if domain != _GLOBAL and self._bound[lv][i] == domain:
                self._unbind(lv, i)
                domain = _GLOBAL
                continue
            up = self._merge_with_buddy(domain, lv, i)
            if up is None:
                break
            lv, i = up
        if owner is not None:
            left = self._owned.get(owner, 0) - 1
            if left > 0:
                self._owned[owner] = left
            else:
                self._owned.pop(owner, None)
                if self._bound[owner[0]][owner[1]] >= 0:  # only guests are left in it
                    self._unbind_with_guests(*owner)
        self._check()

    # ----------------------------------------------------------------- internals
    def _merge_with_buddy(self, domain: int, level: int, index: int) -> tuple[int, int] | None:
        """If the buddy of FREE cell ``(level, index)`` is FREE in ``domain`` too, merge the two
        into their FREE parent and return it; else None (nothing changes)."""
        sib = index ^ 1
        free = self._free[domain][level]
        if level >= self._top or self._state[level][sib] != FREE or sib not in free:
            return None
        free.discard(index)
        free.discard(sib)
        self._state[level][index] = COVERED
        self._state[level][sib] = COVERED
        level, index = level + 1, index >> 1
        self._state[level][index] = FREE
        self._free[domain][level].add(index)
        return level, index

    def _level(self, num_gpus: int) -> int:
        try:
            return self.topology.level_for(num_gpus)
        except ValueError as err:
            raise CannotAllocate(str(err)) from None

    def _check_new(self, alloc_id: str, pool: str) -> None:
        if pool not in self._pool_index:
            raise KeyError(f"unknown pool {pool!r}")
        if alloc_id in self._allocs:
            raise ValueError(f"allocation id {alloc_id!r} is already live")

    def _domain_of(self, level: int, index: int) -> int:
        for lv in range(level, self._top + 1):
            owner = self._bound[lv][index >> (lv - level)]
            if owner >= 0:
                return int(owner)
        return _GLOBAL

    def _bound_ancestor(self, level: int, index: int) -> tuple[int, int] | None:
        """The bound cell (level, index) containing cell (level, index), or None."""
        for lv in range(level, self._top + 1):
            anc = index >> (lv - level)
            if self._bound[lv][anc] >= 0:
                return lv, anc
        return None

    def _allocate_in_quota(self, alloc_id: str, pool: str, num_gpus: int, kind: str) -> Allocation:
        self._check_new(alloc_id, pool)
        level = self._level(num_gpus)
        k = self._pool_index[pool]
        # 1. inside the pool's bound cells (buddies of its other dedicated cells)
        index = self._take_in_pool(k, level)
        if index is not None:
            return self._commit(alloc_id, pool, kind, level, index, num_gpus)
        # 2. bind one more quota cell, smallest level first
        unbound = self._quota[k] - self._bound_count[k]
        levels = [lv for lv in range(level, self._top + 1) if unbound[lv] > 0]
        if not levels:
            raise CannotAllocate(
                f"pool {pool!r} over quota: no unused quota cell of >= {1 << level} GPUs "
                f"for {alloc_id!r}"
            )
        for lv in levels:
            if self._bind(k, lv) or (self.adopt_loans and self._bind_over_loans(k, lv, level)):
                index = self._take_in_pool(k, level)
                assert index is not None, "a freshly bound cell has no room"
                return self._commit(alloc_id, pool, kind, level, index, num_gpus)
        raise CannotAllocate(
            f"no free cell can be bound to pool {pool!r} for {alloc_id!r} now "
            "(cells held by opportunistic jobs, or binding would break safety)"
        )

    def _take_in_pool(self, k: int, level: int) -> int | None:
        """Split the smallest free cell of level >= ``level`` in pool k's lists down to ``level``; its index."""
        free = self._free[k]
        for lv in range(level, self._top + 1):
            if free[lv]:
                pick = min(free[lv]) if not self.pack or len(free[lv]) == 1 else min(
                    free[lv], key=lambda c, lv=lv: (self._region_free(free, lv, c), c))
                return self._split_down(k, lv, pick, level)
        return None

    def _region_free(self, free: list[set[int]], level: int, index: int) -> tuple[int, ...]:
        """Free GPUs in each ancestor of cell (level, index), from its grandparent up to the top."""
        out = []
        for anc_lv in range(level + 2, self._top + 1):
            anc = index >> (anc_lv - level)
            out.append(sum((1 << lv) for lv in range(anc_lv) for c in free[lv]
                           if c >> (anc_lv - lv) == anc))
        return tuple(out)

    def _bind_over_loans(self, k: int, level: int, need: int) -> bool:
        """Bind to pool k a global cell of ``level`` that opportunistic jobs hold part of.

        Only when no free cell could be bound: the cell must lie outside every
        bound cell, hold no bound cell, and have a free sub-cell of level >=
        ``need`` (the request's level) in the global lists. Its opportunistic
        jobs stay as *guests* (they run to completion; their cells then go to
        the pool) and its free sub-cells move to the pool's lists. Among the
        candidates, the one with the most free GPUs (fewest guests), then near
        the pool's other cells, then the lowest index; HiveD's safety is
        checked as for any binding. Returns False if none qualifies.
        """
        span = 1 << level
        free_in: dict[int, int] = {}
        room: set[int] = set()
        for lv in range(level):
            for c in self._free[_GLOBAL][lv]:
                anc = c >> (level - lv)
                free_in[anc] = free_in.get(anc, 0) + (1 << lv)
                if lv >= need:
                    room.add(anc)
        cands = []
        for i in room:
            if (self._state[level][i] != SPLIT or self._bound_sub[level][i] != 0
                    or self._domain_of(level, i) != _GLOBAL):
                continue
            cands.append(((span - free_in[i], self._near_pool(k, level, i), i), i))
        if not cands:
            return False
        cands.sort()
        demand_after = self.unbound_quota()
        demand_after[level] -= 1
        for _, i in cands:
            self._mark_bound(level, i, k, +1)
            if cells_shortfall(self.available_cells(), demand_after) is None:
                for lv in range(level):
                    inside = [c for c in self._free[_GLOBAL][lv] if c >> (level - lv) == i]
                    for c in inside:
                        self._free[_GLOBAL][lv].remove(c)
                        self._free[k][lv].add(c)
                self.adoptions += 1
                return True
            self._mark_bound(level, i, k, -1)
        return False

    def _near_pool(self, k: int, level: int, index: int) -> int:
        """0 if cell shares a rack with a bound cell of pool k, else 1."""
        rack_level = self._top
        rack = index >> (rack_level - level)
        lo, hi = rack << rack_level, (rack + 1) << rack_level
        for lv in range(rack_level + 1):
            cells = np.flatnonzero(self._bound[lv][lo >> lv : hi >> lv] == k)
            if cells.size:
                return 0
        return 1

    def _bind(self, k: int, level: int) -> bool:
        """Bind a global free cell of ``level`` to pool k, keeping safety; False if none can be."""
        candidates: list[tuple[tuple[int, int, int], int, int]] = []
        for lv in range(level, self._top + 1):
            for i in self._free[_GLOBAL][lv]:
                candidates.append(((lv, self._near_pool(k, lv, i), i), lv, i))
        candidates.sort()
        demand_after = self.unbound_quota()
        demand_after[level] -= 1
        for _, lv, i in candidates:
            target = i << (lv - level)  # left-most descendant at `level`
            self._mark_bound(level, target, k, +1)
            safe = cells_shortfall(self.available_cells(), demand_after) is None
            self._mark_bound(level, target, k, -1)
            if not safe:
                continue
            index = self._split_down(_GLOBAL, lv, i, level)
            self._free[_GLOBAL][level].discard(index)
            self._mark_bound(level, index, k, +1)
            self._free[k][level].add(index)
            return True
        return False

    def _mark_bound(self, level: int, index: int, k: int, sign: int) -> None:
        self._bound[level][index] = k if sign > 0 else -1
        self._bound_count[k, level] += sign
        for lv in range(level, self._top + 1):
            self._bound_sub[lv][index >> (lv - level)] += sign

    def _unbind(self, level: int, index: int) -> None:
        k = int(self._bound[level][index])
        self._free[k][level].discard(index)
        self._mark_bound(level, index, k, -1)
        self._free[_GLOBAL][level].add(index)

    def _unbind_with_guests(self, level: int, index: int) -> None:
        """Unbind a bound cell whose last dedicated cell left while guests remain: back to the global domain."""
        k = int(self._bound[level][index])
        self._mark_bound(level, index, k, -1)
        for lv in range(level):
            inside = [c for c in self._free[k][lv] if c >> (level - lv) == index]
            for c in inside:
                self._free[k][lv].remove(c)
                self._free[_GLOBAL][lv].add(c)

    def _opportunistic_ok(self, level: int, index: int) -> bool:
        if not self.strict_buddies or level == self._top:
            return True
        owner = int(self._bound[level][index ^ 1])
        if owner < 0:
            return True
        return self.spare_full_pools and not (self._quota[owner] > self._bound_count[owner]).any()

    def _opportunistic_score(self, level: int, index: int) -> tuple[int, ...]:
        server_level = self.topology.server_level
        if level <= server_level:
            server = index >> (server_level - level)
            on_bound_server = int(self._bound_sub[server_level][server] > 0)
        else:
            on_bound_server = 0
        rack = index >> (self._top - level)
        on_bound_rack = int(self._bound_sub[self._top][rack] > 0)
        return (level, on_bound_server, on_bound_rack, index)

    def _pick_global(self, level, score, ok) -> tuple[int, int] | None:
        best = None
        for lv in range(level, self._top + 1):
            for i in self._free[_GLOBAL][lv]:
                if not ok(lv, i):
                    continue
                s = score(lv, i)
                if best is None or s < best[0]:
                    best = (s, lv, i)
            if best is not None:
                return best[1], best[2]
        return None

    def _split_down(self, domain: int, level: int, index: int, target: int) -> int:
        """Take free cell (level, index) from ``domain``'s list and split it down to ``target``.

        Returns the index of the target-level cell (left-most); right halves go to the free list.
        """
        self._free[domain][level].remove(index)
        while level > target:
            self._state[level][index] = SPLIT
            level -= 1
            left, right = 2 * index, 2 * index + 1
            self._state[level][left] = FREE
            self._state[level][right] = FREE
            self._free[domain][level].add(right)
            index = left
        self._free[domain][level].add(index)  # caller decides what it becomes
        return index

    def _commit(self, alloc_id, pool, kind, level, index, num_gpus) -> Allocation:
        domain = self._domain_of(level, index)
        self._free[domain][level].remove(index)
        if kind != "opportunistic":
            owner = self._bound_ancestor(level, index)
            self._owned[owner] = self._owned.get(owner, 0) + 1
        self._state[level][index] = _KIND_STATE[kind]
        first = index << level
        alloc = Allocation(
            alloc_id, pool, kind, level, index, num_gpus, tuple(range(first, first + num_gpus))
        )
        self._allocs[alloc_id] = alloc
        self._count[kind][self._pool_index[pool], level] += 1
        self._check()
        return alloc

    def _check(self) -> None:
        if self.debug:
            self.check_invariants()

    # ----------------------------------------------------------------- checking
    def check_invariants(self) -> None:
        """Raise InvariantError naming the first broken invariant (see the module docstring)."""
        top = self._top
        st = self._state
        if np.any(st[top] == COVERED):
            raise InvariantError("tree: a rack cell is COVERED")
        for lv in range(1, top + 1):
            live_children = (st[lv - 1] != COVERED).reshape(-1, 2)
            split = st[lv] == SPLIT
            if np.any(split & ~live_children.all(axis=1)):
                raise InvariantError(f"tree: a SPLIT cell of level {lv} lacks a live child")
            if np.any(~split & live_children.any(axis=1)):
                raise InvariantError(f"tree: a non-SPLIT cell of level {lv} has a live child")
        # free lists
        for lv in range(top + 1):
            listed: dict[int, int] = {}
            for domain, lists in self._free.items():
                for i in lists[lv]:
                    if i in listed:
                        raise InvariantError(f"free lists: cell ({lv},{i}) listed twice")
                    listed[i] = domain
            free_cells = set(np.flatnonzero(st[lv] == FREE).tolist())
            if free_cells != set(listed):
                raise InvariantError(f"free lists at level {lv} differ from the FREE cells")
            for i, domain in listed.items():
                if self._domain_of(lv, i) != domain:
                    raise InvariantError(f"free lists: cell ({lv},{i}) is in the wrong domain")
                sib = i ^ 1
                if lv < top and listed.get(sib) == domain and self._bound[lv][i] < 0 and self._bound[lv][sib] < 0:
                    raise InvariantError(f"free lists: buddies ({lv},{i}) and ({lv},{sib}) not merged")
        # binding
        if np.any(self._bound_count > self._quota):
            raise InvariantError("binding: a pool bound more cells than its quota")
        for lv in range(top + 1):
            for i in np.flatnonzero(self._bound[lv] >= 0):
                if self._bound_sub[lv][i] != 1:
                    raise InvariantError(f"binding: bound cells nest under ({lv},{i})")
        recount = np.zeros_like(self._bound_count)
        for lv in range(top + 1):
            owners = self._bound[lv][self._bound[lv] >= 0]
            np.add.at(recount[:, lv], owners, 1)
        if not np.array_equal(recount, self._bound_count):
            raise InvariantError("binding: bound counters disagree with bound cells")
        # allocations and counters
        counts = {kind: np.zeros_like(self._quota) for kind in self._count}
        for alloc in self._allocs.values():
            if st[alloc.level][alloc.index] != _KIND_STATE[alloc.kind]:
                raise InvariantError(f"allocation {alloc.alloc_id!r}: cell state mismatch")
            domain = self._domain_of(alloc.level, alloc.index)
            k = self._pool_index[alloc.pool]
            if alloc.kind == "opportunistic" and domain != _GLOBAL and not self.adopt_loans:
                raise InvariantError(f"allocation {alloc.alloc_id!r}: opportunistic inside a bound cell")
            if alloc.kind != "opportunistic" and domain != k:
                raise InvariantError(f"allocation {alloc.alloc_id!r}: dedicated outside its pool's cells")
            counts[alloc.kind][k, alloc.level] += 1
        for kind, arr in counts.items():
            if not np.array_equal(arr, self._count[kind]):
                raise InvariantError(f"counters: {kind} cells per pool/level disagree")
        owned: dict[tuple[int, int], int] = {}
        for alloc in self._allocs.values():
            if alloc.kind != "opportunistic":
                owner = self._bound_ancestor(alloc.level, alloc.index)
                owned[owner] = owned.get(owner, 0) + 1
        if owned != self._owned:
            raise InvariantError("binding: dedicated cells per bound cell disagree with the counters")
        for lv in range(top + 1):
            for i in np.flatnonzero(self._bound[lv] >= 0).tolist():
                if (lv, i) not in owned:
                    raise InvariantError(f"binding: bound cell ({lv},{i}) holds no dedicated cell")
        used = sum(int(np.isin(st[lv], (OPP, DED, RES)).sum()) for lv in range(top + 1))
        if used != len(self._allocs):
            raise InvariantError("allocations: used cells and live allocations disagree")
        short = cells_shortfall(self.available_cells(), self.unbound_quota())
        if short is not None:
            lv, missing = short
            raise InvariantError(
                f"safety: {missing} cell(s) of {1 << lv} GPUs short for the pools' unbound quota"
            )
