"""Arrays that grow by appending, at amortized cost (the live service's per-job state).

The live service (`sia serve`, :mod:`sia.service.core`) learns of jobs one at a time, so the
replay's per-job arrays (the trace, the simulator's state, the policies' and forecasters'
bookkeeping) grow while the replay runs. Two helpers, both doubling their buffers so that n
appends cost O(n) in all:

* :func:`extend` for arrays whose length means something (the trace's columns, the
  simulator's per-job state): it returns an exact-length view of a buffer with room to
  spare, writing only the new entries when the room suffices;
* :func:`reserve` for arrays only ever indexed by job (a cache of per-job values): it returns
  an array at least ``n`` long whose entries past the old length hold ``fill``.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

#: the buffers :func:`extend` allocated, by id: only these are written past an array's end
_OWNED: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()


def extend(arr: np.ndarray, extra: Any) -> np.ndarray:
    """Return ``arr`` followed by ``extra`` (same dtype; rows for a 2-d array) as a view of a
    buffer with room to spare (the buffer doubles when full). ``arr`` must not be used again:
    the next call may write into the buffer past its end. The view is writable when ``arr``
    was. Only buffers this function allocated are reused (never a caller's array)."""
    extra = np.asarray(extra, dtype=arr.dtype)
    if extra.ndim < arr.ndim:
        extra = extra.reshape((-1, *arr.shape[1:]))
    old, add = arr.shape[0], extra.shape[0]
    n = old + add
    base = arr.base
    mine = (isinstance(base, np.ndarray) and _OWNED.get(id(base)) is base
            and base.shape[0] >= n and base.shape[1:] == arr.shape[1:]
            and base.__array_interface__["data"][0] == arr.__array_interface__["data"][0]
            and base[:old].strides == arr.strides)
    if not mine:
        base = np.empty((max(n, 2 * old, 16), *arr.shape[1:]), dtype=arr.dtype)
        base[:old] = arr
        _OWNED[id(base)] = base
    base[old:n] = extra
    out = base[:n]
    out.setflags(write=bool(arr.flags.writeable))
    return out


def reserve(arr: np.ndarray, n: int, fill: Any) -> np.ndarray:
    """Return ``arr`` when it has at least ``n`` rows, else a copy with at least ``n`` rows
    (twice the old count when more), the new rows holding ``fill``. For arrays read only at
    job indices below ``n``: their length past that means nothing."""
    old = arr.shape[0]
    if old >= n:
        return arr
    out = np.full((max(n, 2 * old, 16), *arr.shape[1:]), fill, dtype=arr.dtype)
    out[:old] = arr
    return out
