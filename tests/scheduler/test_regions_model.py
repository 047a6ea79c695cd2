"""Regions model: validation messages, replicas becoming usable after their transfer time."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from sia.scheduler.regions.model import (
    PoolData,
    Region,
    RegionLayout,
    RegionsError,
    layout_from_mapping,
)


def layout(rate=10.0):
    return RegionLayout([Region("A", 8), Region("B", 16, storage=500.0)],
                        [PoolData("p", "A", 100.0), PoolData("q", "B", 30.0, replicas=("A", "B"))], rate)


@pytest.mark.parametrize("build, match", [
    (lambda: Region("A", 0), "region 'A': gpus must be an integer >= 1, got 0"),
    (lambda: Region("A", 2.5), "region 'A': gpus"),
    (lambda: Region("A", 8, storage=float("nan")), "region 'A': storage"),
    (lambda: Region("", 8), "region name"),
    (lambda: PoolData("p", "A", -1.0), "pool 'p': size must be a finite number >= 0, got -1.0"),
    (lambda: RegionLayout([Region("A", 8), Region("A", 4)], [], 1.0), "region 'A' is given twice"),
    (lambda: RegionLayout([Region("A", 8)], [PoolData("p", "Z", 1.0)], 1.0),
     r"pool 'p': home region 'Z' is not a region \(known: A\)"),
    (lambda: RegionLayout([Region("A", 8)], [PoolData("p", "A", 1.0, replicas=("B",))], 1.0),
     "pool 'p': replica region 'B' is not a region"),
    (lambda: RegionLayout([Region("A", 8)], [PoolData("p", "A", 1.0), PoolData("p", "A", 2.0)], 1.0),
     "pool 'p' is given twice"),
    (lambda: RegionLayout([Region("A", 8)], [], 0.0), "transfer_rate must be a finite number > 0"),
    (lambda: RegionLayout([], [], 1.0), "at least one region"),
])
def test_validation_names_what_and_where(build, match):
    with pytest.raises(RegionsError, match=match):
        build()


def test_initial_replicas_are_homes_or_given_holders():
    lay = layout()
    held = lay.initial_replicas().held()
    assert held.tolist() == [[True, False], [True, True]]
    assert lay.initial_replicas().usable(0.0).tolist() == held.tolist()
    assert lay.storage.tolist() == [np.inf, 500.0]


def test_new_replica_usable_after_size_over_rate():
    lay = layout(rate=10.0)
    reps, moved = lay.initial_replicas().apply(lay, np.array([[True, True], [True, True]]), now=50.0)
    assert moved == 100.0
    # p's copy in B: 100 size units at 10 per second, ready at 50 + 10
    assert not reps.usable(59.9)[0, 1]
    assert reps.usable(60.0)[0, 1]
    assert reps.held()[0, 1]
    # re-applying the same plan later does not restart the transfer nor count data again
    again, moved2 = reps.apply(lay, reps.held(), now=55.0)
    assert moved2 == 0.0 and again.usable_at[0, 1] == 60.0


def test_plan_must_keep_a_usable_copy_and_have_the_right_shape():
    lay = layout()
    reps = lay.initial_replicas()
    with pytest.raises(RegionsError, match="plan drops every usable copy of pool 'p'"):
        reps.apply(lay, np.array([[False, True], [True, True]]), now=0.0)
    with pytest.raises(RegionsError, match="pool 'q' holds no replica"):
        reps.apply(lay, np.array([[True, False], [False, False]]), now=0.0)
    with pytest.raises(RegionsError, match=r"shape \(2,\) is not \(pools, regions\) = \(2, 2\)"):
        reps.apply(lay, np.array([True, True]), now=0.0)
    # dropping one of two usable copies is fine
    kept, _ = reps.apply(lay, np.array([[True, False], [False, True]]), now=0.0)
    assert kept.held().tolist() == [[True, False], [False, True]]


CONFIG = {
    "transfer_rate": 2.0,
    "regions": {"A": {"gpus": 8}, "B": {"gpus": 16, "storage": 500.0}},
    "pools": {"p": {"home": "A", "size": 100.0}, "q": {"home": "B", "size": 30.0, "replicas": ["A", "B"]}},
}


#: marks a key to delete in with_change
DELETE = object()


def with_change(path, value):
    """CONFIG with the key at ``path`` set to ``value`` (or deleted)."""
    cfg = copy.deepcopy(CONFIG)
    node = cfg
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return cfg


def test_layout_from_mapping_reads_regions_pools_and_replicas():
    lay = layout_from_mapping(CONFIG)
    assert [r.name for r in lay.regions] == ["A", "B"] and lay.gpus.tolist() == [8, 16]
    assert lay.initial_replicas().held().tolist() == [[True, False], [True, True]]
    assert lay.transfer_s().tolist() == [50.0, 15.0]


@pytest.mark.parametrize("path, value, match", [
    (("regions", "B", "gpus"), 0, r"^site.yaml: regions.B: gpus must be an integer >= 1, got 0$"),
    (("regions", "B", "cpus"), 4, r"^site.yaml: regions.B.cpus: unknown key \(known: gpus, storage\)$"),
    (("regions", "A", "gpus"), DELETE, r"^site.yaml: regions.A.gpus: is required$"),
    (("pools", "p", "home"), "Z", r"^site.yaml: pools.p.home: 'Z' is not a region \(known: A, B\)$"),
    (("pools", "q", "replicas"), ["A", "C"], r"^site.yaml: pools.q.replicas\[1\]: 'C' is not a region"),
    (("pools", "q", "replicas"), "A", r"^site.yaml: pools.q.replicas: must be a list of region names"),
    (("pools", "p", "size"), "big", r"^site.yaml: pools.p: size must be a finite number >= 0, got 'big'$"),
    (("pools",), [], r"^site.yaml: pools: must be a mapping, got list$"),
    (("regions",), {}, r"^site.yaml: regions: at least one region is needed$"),
    (("transfer_rate",), -1.0, r"^site.yaml: transfer_rate: must be a finite number > 0"),
    (("transfer_rate",), DELETE, r"^site.yaml: transfer_rate: is required$"),
])
def test_layout_from_mapping_names_the_key_at_fault(path, value, match):
    with pytest.raises(RegionsError, match=match):
        layout_from_mapping(with_change(path, value), source="site.yaml")


def test_layout_from_mapping_wants_a_mapping():
    with pytest.raises(RegionsError, match=r"^site.yaml: \(top level\): must be a mapping, got list$"):
        layout_from_mapping([1, 2], source="site.yaml")
