"""Which mechanism slows a job under global reservations (sia.scheduler.regions.slowed)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from sia.data.schema import make_pools, validate
from sia.scheduler.core.simulator import simulate
from sia.scheduler.regions import reserved_policy
from sia.scheduler.regions.global_policy import layout_for_pools
from sia.scheduler.regions.reservations import ReservationPlan
from sia.scheduler.regions.reserved_policy import ReservationRegionPolicy
from sia.scheduler.regions.slowed import (
    GROUP,
    MECHANISMS,
    SlowedProbe,
    WaitState,
    classify,
    held_by_loans,
    resolve,
)
from sia.scheduler.registry import make_policy

H = 3600.0

# a late 2-GPU job whose queue's share (4) is free, whose region has 4 free GPUs, with no
# older job ahead: nothing explains its wait; each case below changes one thing
FREE = WaitState(job=5, g=2, share=4, used=0, eligible=True, quota=6, used_all=0, free=4,
                 older=-1, younger_running=False, lent_away=False, loan=-1, loan_routed=False)


@pytest.mark.parametrize("change, kind, ref", [
    (dict(), "unexplained", -1),
    (dict(lent_away=True, older=3, free=0), "lent-away", -1),  # rule 1 comes first
    (dict(eligible=False, older=3), "queue-lost", -1),
    (dict(share=1, used=0), "queue-lost", -1),  # a share smaller than the job
    (dict(older=3, used=4), "cascade", 3),
    (dict(used=3, used_all=3), "split", -1),  # 1 free here, 3 of the quota unused elsewhere
    (dict(used=3, used_all=5, younger_running=True), "overtaken", -1),
    (dict(used=3, used_all=5), "own-late", -1),
    (dict(free=1, loan=7), "loan-local", 7),
    (dict(free=1, loan=7, loan_routed=True), "loan-routed", 7),
])
def test_classify_names_the_first_rule_that_holds(change, kind, ref):
    assert classify(replace(FREE, **change)) == (kind, ref)


def test_cascades_resolve_to_their_root_with_their_depth():
    kind = {1: "loan-routed", 2: "cascade", 3: "own-late", 4: "cascade", 5: "cascade", 6: "cascade"}
    ref = {1: 9, 2: 1, 3: 2, 4: 8, 5: 6, 6: 5}  # 4 points at a job never seen; 5 <-> 6 loop
    out = resolve(kind, ref)
    assert out[1] == ("loan-routed", 0, 1)
    assert out[2] == ("loan-routed", 1, 1) and out[3] == ("loan-routed", 2, 1)
    assert out[4][0] == "unexplained" and out[5][0] == "unexplained" and out[6][0] == "unexplained"
    assert set(GROUP) == set(MECHANISMS)


def table(rows):
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    return validate(raw)[0]


def test_a_job_late_behind_a_split_share_and_its_cascade(monkeypatch):
    # A and B have 4 GPUs each (a's quota in A, b's in B). The plan at 0 splits both quotas
    # 3 + 1: a gets 3 in A and 1 in B. a1 (2 GPUs, 2 h) starts in A at 0, leaving 1 GPU of
    # a's share in A and 1 in B. a2 (2 GPUs) arrives at 30 min: home FCFS (a's 4 GPUs in one
    # place) starts it then; here no region has 2 GPUs of a's share (FCFS inside regions: no
    # loans), so it waits for a1 to end at 2 h: "split". a3 (2 GPUs, 45 min) starts at 1.5 h
    # under home FCFS (a2 ends) but waits behind a2 in A here: a cascade of a2, depth 1
    split = [[3, 1], [1, 3]]

    def plan(layout, quota, demand, prev_held, prev_shares, keep=None, **kw):
        s = np.array(split)
        return ReservationPlan("optimal", prev_held | (s > 0), s, 0.0, 0.0, 0, 0.0, False, "")

    monkeypatch.setattr(reserved_policy, "plan_reservations", plan)
    rows = [("a1", "a", 0.0, 2 * H, 2), ("a2", "a", H / 2, H, 2), ("a3", "a", 0.75 * H, H, 2)]
    quotas = {"a": 4, "b": 4}
    lay = layout_for_pools({"a": "A", "b": "B"}, quotas,
                           replicas={"a": ["A", "B"], "b": ["B", "A"]})
    fcfs = simulate(table(rows), make_pools(quotas), make_policy("fcfs"))
    base = dict(zip(fcfs["job_id"], fcfs["start_time"], strict=True))
    assert base == {"a1": 0.0, "a2": H / 2, "a3": 1.5 * H}
    pol = ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), inner_name="fcfs",
                                  period_s=100 * H)
    probe = SlowedProbe(pol, base)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert got == {"a1": 0.0, "a2": 2 * H, "a3": 3 * H}
    ids = list(pol._trace.job_ids)
    rows_out = {r["job"]: r for r in probe.report(np.array([ids.index("a2"), ids.index("a3")]))}
    assert (rows_out["a2"]["mechanism"], rows_out["a2"]["kind"], rows_out["a2"]["depth"]) == \
        ("split", "split", 0)
    assert (rows_out["a3"]["mechanism"], rows_out["a3"]["kind"], rows_out["a3"]["depth"],
            rows_out["a3"]["root"]) == ("split", "cascade", 1, "a2")
    assert rows_out["a3"]["group"] == "c"
    assert ids.index("a1") not in probe.kind  # a1 started at its baseline start: not looked at
    assert rows_out["a2"]["loans"] is None and rows_out["a2"]["loan_gpus"] is None  # no loan


def test_a_wait_on_loans_counts_every_loan_running_not_only_the_last():
    # jobs 0-4 run in the region: 1 (2 GPUs), 3 (1 GPU) and 4 (3 GPUs) are loans
    running = {0: None, 1: None, 3: None, 4: None}
    opportunistic = [False, True, False, True, True]
    gpus = [4, 2, 8, 1, 3]
    assert held_by_loans(running, opportunistic, gpus) == (3, 6)
    assert held_by_loans({0: None}, opportunistic, gpus) == (0, 0)
