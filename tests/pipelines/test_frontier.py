"""The speedup / slowdown frontier over SIA's risk budget: config expansion, plot, sweep."""

from __future__ import annotations

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.pipelines.plots import frontier
from sia.pipelines.studies import evaluate as ev
from sia.pipelines.studies.experiment import parse_config, risk_label, risk_of_label


def spec(policies: list) -> dict:
    return {"name": "fr", "seed": 3, "trace": {"synthetic": "higher-load", "days": 2},
            "warmup_days": 0.25, "experiments": 1, "pools_per_experiment": "all",
            "quotas": "recorded", "policies": policies}


def test_risk_list_expands_into_labelled_policies():
    cfg = parse_config(spec(["fcfs", "maxmin",
                             {"name": "sia-perfect", "options": {"risk": [0, 0.01, 1]}}]))
    labels = [p.label for p in cfg.policies]
    assert labels == ["fcfs", "maxmin", "sia-perfect+risk0", "sia-perfect+risk0.01",
                      "sia-perfect+risk1"]
    assert [p.options["risk"] for p in cfg.policies[2:]] == [0.0, 0.01, 1.0]
    assert risk_of_label("sia-perfect+risk0.01") == ("sia-perfect", 0.01)
    assert risk_of_label(risk_label("sia", 1e-05)) == ("sia", 1e-05)
    assert risk_of_label("sia-perfect") is None


@pytest.mark.parametrize("risk, msg", [([], "non-empty list"), (["a"], "non-empty list"),
                                       ([0.1, 0.1], "appears twice")])
def test_bad_risk_lists_name_the_option(risk, msg):
    with pytest.raises(ConfigError, match=rf"policies\[1\]\.options\.risk.*{msg}"):
        parse_config(spec(["fcfs", {"name": "sia-perfect", "options": {"risk": risk}}]))


def test_frontier_png(tmp_path):
    m = {"mean_speedup": 3.0, "geomean_speedup": 1.5, "pct_slowed": 0.0, "total_slowdown_min": 0}
    curves = {"sia": [(0.0, m), (0.1, {**m, "mean_speedup": 5.0, "pct_slowed": 2.0,
                                        "total_slowdown_min": 300.0})]}
    out = frontier(curves, {"maxmin": {**m, "pct_slowed": 10.0, "total_slowdown_min": 5e4}},
                   tmp_path / "f.png")
    assert out.exists() and out.stat().st_size > 10_000


def test_sweep_draws_the_frontier_and_budget_zero_slows_nobody(tmp_path):
    cfg = parse_config(spec(["fcfs", "maxmin", {"name": "sia-perfect",
                                                "options": {"risk": [0, 0.5]}}]))
    out = ev.run_sweep(cfg, tmp_path / "sw", progress=False, make_plots=True, log_mlflow=False,
                       say=lambda _: None)
    agg = {r["policy"]: r for r in out.aggregate.iter_rows(named=True)}
    assert agg["sia-perfect+risk0"]["pct_slowed"] == 0.0
    # perfect durations are certain: the budget changes nothing
    assert agg["sia-perfect+risk0"]["mean_speedup"] == agg["sia-perfect+risk0.5"]["mean_speedup"]
    pngs = list((tmp_path / "sw" / "plots").glob("*_frontier.png"))
    assert len(pngs) == 1
    assert pl.read_csv(tmp_path / "sw" / "aggregate.csv")["policy"].to_list()[-1] == \
        "sia-perfect+risk0.5"


def test_replay_risk_option_is_for_sia_only(tmp_path, capsys):
    from sia.pipelines.cli import main

    assert main(["replay", "--policy", "maxmin", "--risk", "0.1", "--no-mlflow",
                 "--out", str(tmp_path / "r")]) == 2
    assert "--risk is an option of SIA's policies" in capsys.readouterr().err
    assert main(["replay", "--policy", "sia-perfect", "--risk", "-1", "--no-mlflow",
                 "--synthetic", "base", "--days", "1", "--out", str(tmp_path / "s")]) == 2
    assert "risk must be a number in [0, 100]" in capsys.readouterr().err
    assert main(["replay", "--policy", "sia-perfect", "--risk", "0", "--no-mlflow",
                 "--synthetic", "base", "--days", "1", "--warmup-days", "0.2",
                 "--out", str(tmp_path / "ok")]) == 0
    assert (tmp_path / "ok" / "summary.json").exists()


def test_replay_risk_mode_option_is_checked_and_reaches_the_policy(tmp_path, capsys):
    import json

    from sia.pipelines.cli import main

    assert main(["replay", "--policy", "sia-perfect", "--risk", "off", "--risk-mode", "veto",
                 "--no-mlflow", "--out", str(tmp_path / "r")]) == 2
    assert "--risk-mode veto needs a budget, not --risk off" in capsys.readouterr().err
    assert main(["replay", "--policy", "sia-perfect", "--risk", "lots", "--no-mlflow",
                 "--out", str(tmp_path / "r")]) == 2
    assert "--risk must be a number or off, not 'lots'" in capsys.readouterr().err
    assert main(["replay", "--policy", "sia-perfect", "--risk", "1", "--risk-mode", "both",
                 "--no-mlflow", "--out", str(tmp_path / "r")]) == 2
    assert "--risk-mode must be replace or veto, not 'both'" in capsys.readouterr().err
    assert main(["replay", "--policy", "sia-perfect", "--risk", "1", "--risk-mode", "veto",
                 "--no-mlflow", "--synthetic", "base", "--days", "1", "--warmup-days", "0.2",
                 "--out", str(tmp_path / "ok")]) == 0
    summary = json.loads((tmp_path / "ok" / "summary.json").read_text())
    assert summary["policy_options"] == {"risk": 1.0, "risk_mode": "veto"}


def test_choose_budget_takes_the_largest_budget_within_the_rule():
    labels = ["maxmin", "sia+risk0.1", "sia+risk1", "sia+risk10", "x+risk1"]
    agg = pl.DataFrame({"group": ["g"] * 5, "policy": labels,
                        "pct_slowed": [9.0, 0.0, 0.4, 0.3, 3.0],
                        "mean_speedup": [5.0, 1.5, 2.0, 3.0, 4.0],
                        "geomean_speedup": [2.0, 1.1, 1.2, 1.3, 1.4]})
    # sia+risk10 is within 0.5% pooled but one experiment slowed 2.5%: risk 1 is chosen
    summ = pl.DataFrame({"policy": labels * 2, "pct_slowed": [9.0, 0.0, 0.4, 0.1, 3.0,
                                                              9.0, 0.0, 0.4, 2.5, 3.0]})
    got = ev.choose_budget(summ, agg)
    assert got["sia"] == {"risk": 1.0, "pct_slowed": 0.4, "max_exp_pct_slowed": 0.4,
                          "mean_speedup": 2.0, "geomean_speedup": 1.2}
    assert got["x"] == {"risk": None}
    assert ev.choose_budget(summ, agg, max_exp_pct=3.0)["sia"]["risk"] == 10.0


def test_promise_overview_png_keeps_one_style_per_policy(tmp_path, monkeypatch):
    import matplotlib.figure
    from sia.pipelines.plots import promise_overview

    m = {"mean_speedup": 3.0, "geomean_speedup": 1.5, "pct_slowed": 0.0, "total_slowdown_min": 0}
    a = ("A", {"sia": [(0.0, m), (1.0, {**m, "mean_speedup": 6.0, "pct_slowed": 0.5})]},
         {"maxmin": {**m, "pct_slowed": 10.0}, "sia": {**m, "pct_slowed": 0.1}})
    b = ("B", {}, {"sia": {**m, "pct_slowed": 0.2}, "maxmin": {**m, "pct_slowed": 3.0},
                   "hived": {**m, "pct_slowed": 4.0}})
    seen: list = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, *a, **k: seen.append(fig) or open(a[0], "wb").write(b"png"))
    out = promise_overview([a, b], tmp_path / "o.png", "t")
    assert out.exists()
    fig = seen[0]
    colors: dict[float, set] = {}  # a single point's x -> the colors drawn there
    for ax in fig.axes:
        for line in ax.get_lines():
            if len(line.get_xdata()) == 1:
                colors.setdefault(float(line.get_xdata()[0]), set()).add(line.get_color())
    # each policy's marker has one color in both studies and both rows, policies differ
    assert colors[10.0] == colors[3.0] and len(colors[10.0]) == 1  # maxmin in A and B
    assert colors[0.1] == colors[0.2] and colors[0.1] != colors[10.0]  # sia, not maxmin
    legend = fig.legends[0]
    names = [t.get_text() for t in legend.get_texts()]
    assert names == ["maxmin", "sia", "sia (risk budget)", "hived"]  # a curve after its point
    assert len(fig.axes) == 4


def test_overview_study_reads_sweeps_and_names_the_policies(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "readme_frontier.py"
    mod_spec = importlib.util.spec_from_file_location("readme_frontier", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    cols = {"group": ["g"] * 4, "policy": ["fcfs", "maxmin", "sia", "sia+risk1"],
            "mean_speedup": [1.0, 9.0, 5.0, 3.0], "geomean_speedup": [1.0, 3.0, 2.0, 1.5],
            "pct_slowed": [0.0, 9.0, 0.1, 0.0], "total_slowdown_min": [0.0, 9e4, 10.0, 0.0]}
    (tmp_path / "s").mkdir()
    pl.DataFrame(cols).write_csv(tmp_path / "s" / "aggregate.csv")
    title, curves, points = mod.overview_study(f"Study X={tmp_path / 's'}")
    assert title == "Study X"
    assert list(points) == ["MaxMin", "learned SIA (defaults: budget 3)"]
    # the budget's curve runs through the default budget's point (the sweep's plain `sia`)
    curve = curves["learned SIA"]
    assert [r for r, _ in curve] == [1.0, 3.0]
    assert curve[0][1]["pct_slowed"] == 0 and curve[1][1]["mean_speedup"] == 5.0
    with pytest.raises(SystemExit, match="STUDY=DIR"):
        mod.overview_study("no-equals-sign")
