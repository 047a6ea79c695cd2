"""Topology, cell levels, --topology parsing and quota satisfiability."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.pipelines.locality_options import parse_topology
from sia.scheduler.locality.topology import Topology, cells_shortfall, check_quotas


def test_parse_topology_defaults_and_levels():
    topo = parse_topology("servers=16,gpus=8,rack=4")
    assert (topo.racks, topo.servers_per_rack, topo.gpus_per_server) == (4, 4, 8)
    assert topo.n_gpus == 128 and topo.server_level == 3 and topo.top_level == 5
    assert [topo.level_for(w) for w in (1, 2, 3, 4, 5, 8, 9, 16, 17, 32)] == [0, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    with pytest.raises(ValueError, match="wider than a rack"):
        topo.level_for(33)
    assert list(topo.cell_gpu_range(2, 3)) == [12, 13, 14, 15]
    assert topo.server_of_gpu(17) == 2 and topo.rack_of_server(5) == 1
    assert parse_topology(topo.describe()) == topo
    assert parse_topology("racks=2") == Topology(racks=2)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("servers=10,rack=4", "not a whole number of racks"),
        ("servers=8,gpus=6", "power of two"),
        ("servers=x", "not an integer"),
        ("nodes=4", "cannot read 'nodes=4'"),
        ("gpus=8", "give servers=N or racks=N"),
        ("servers=8,servers=4", "given twice"),
        ("servers=8,racks=3", "disagrees"),
        ("", "empty topology"),
    ],
)
def test_parse_topology_errors_name_the_option(spec, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_topology(spec)
    assert "--topology" in str(err.value)


def test_quotas_checked_against_cells():
    topo = parse_topology("servers=4,gpus=8,rack=2")  # 2 racks of 16 GPUs
    per_level = check_quotas(topo, {"a": {16: 1}, "b": {8: 1, 4: 2}})
    assert per_level["a"][4] == 1 and per_level["b"][3] == 1 and per_level["b"][2] == 2
    with pytest.raises(ConfigError, match="1 more cell"):
        check_quotas(topo, {"a": {16: 1}, "b": {8: 3}})
    with pytest.raises(ConfigError, match="larger than a rack"):
        check_quotas(topo, {"a": {32: 1}})
    with pytest.raises(ConfigError, match="not a power-of-two"):
        check_quotas(topo, {"a": {6: 1}})
    with pytest.raises(ConfigError, match="non-negative"):
        check_quotas(topo, {"a": {8: -1}})


def test_cells_shortfall_hand_case():
    # one free 8-cell: it can give one 4-cell and two 2-cells, not three 4-cells
    assert cells_shortfall([0, 0, 0, 1], [0, 2, 1, 0]) is None
    assert cells_shortfall([0, 0, 0, 1], [0, 0, 3, 0]) == (2, 1)
    assert cells_shortfall([1, 0, 0, 0], [2, 0, 0, 0]) == (0, 1)


@settings(max_examples=60, deadline=None)
@given(
    racks=st.integers(1, 3),
    counts=st.lists(st.dictionaries(st.sampled_from([1, 2, 4, 8, 16, 32]), st.integers(0, 3), max_size=3), min_size=1, max_size=4),
)
def test_quota_check_matches_total_capacity(racks, counts):
    """With power-of-two cells no larger than a rack, a quota fits iff its GPUs fit (divisible packing)."""
    topo = Topology(racks=racks)
    quotas = {f"p{k}": c for k, c in enumerate(counts)}
    total = sum(size * n for c in counts for size, n in c.items())
    if total <= topo.n_gpus:
        check_quotas(topo, quotas)
    else:
        with pytest.raises(ConfigError):
            check_quotas(topo, quotas)
