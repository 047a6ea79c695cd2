"""`sia figure16` migration rows: config checks, the planned rows and a tiny run end to end."""

from __future__ import annotations

from sia.pipelines.studies.figure16 import load_figure16_config, plan, run_figure16

TINY = """
variants: [fewer-queues]
seeds: [3]
policies: [sia-perfect]
no_locality_policies: []
chain_variants: []
days: 1.0
warmup_s: 0
allocators: {adopt-loans: {adopt_loans: true}}
preemption: {policy: sia-perfect, preemptible_fraction: 0.5, lost_work_s: 600, restart_delay_s: 60}
migration: true
"""


def test_migration_rows_share_the_preemption_and_baseline(tmp_path):
    path = tmp_path / "f16.yaml"
    path.write_text(TINY)
    cfg = load_figure16_config(path)
    main_rows, chains = plan(cfg)
    by = {r.policy: r for r in main_rows}
    assert list(by) == ["sia-perfect", "sia-perfect+preempt", "sia-perfect+preempt+migrate",
                        "sia-perfect+preempt+migrate vs fcfs+migrate"]
    pre, mig = by["sia-perfect+preempt"], by["sia-perfect+preempt+migrate"]
    assert mig.baseline == pre.baseline  # the same FCFS on cells
    both = by["sia-perfect+preempt+migrate vs fcfs+migrate"]
    assert both.replay == mig.replay and both.baseline.locality.migrate
    assert both.baseline.policy == "fcfs" and both.baseline.locality.seed == mig.replay.locality.seed
    assert mig.replay.locality.migrate and not pre.replay.locality.migrate
    assert mig.replay.locality.preemptible_fraction == pre.replay.locality.preemptible_fraction == 0.5
    assert mig.replay.key != pre.replay.key and chains == []
    run = run_figure16(cfg, tmp_path / "out", workers=1)
    rows = {r["policy"]: r for r in run.main.iter_rows(named=True)}
    assert rows["sia-perfect+preempt"]["migrations"] == 0
    assert rows["sia-perfect+preempt+migrate"]["migrations"] is not None  # the count is carried
    assert "migrations" in (tmp_path / "out" / "figure16.md").read_text()
