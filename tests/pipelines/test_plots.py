"""The evaluation plots: readable log ticks at any range, words instead of empty boxes, 150 dpi."""

from __future__ import annotations

import matplotlib
import numpy as np
import polars as pl
import pytest
from sia.pipelines import plots

matplotlib.use("Agg")


def _ticks(lo: float, hi: float) -> list[float]:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    plots.log_ticks(ax.xaxis, lo, hi)
    ticks = [t for t in ax.xaxis.get_majorticklocs() if lo <= t <= hi]
    plt.close(fig)
    return ticks


def _read_label(label):
    """The number a log_label shows ('300', '$10^{4}$', '$9.5\\times10^{4}$')."""
    import re

    m = re.fullmatch(r"\$(?:([\d.]+)\\times)?10\^\{(-?\d+)\}\$", label)
    return float(label) if m is None else float(m.group(1) or 1.0) * 10.0 ** int(m.group(2))


@pytest.mark.parametrize("lo,hi", [(1e-4, 1e5), (0.3, 3000.0), (1.0, 60.0), (0.9, 1.6),
                                   (1.02, 1.09), (2e-7, 3e9), (7.5e4, 1.05e5), (2.2e6, 3.1e6)])
def test_log_ticks_label_every_range_without_crowding(lo, hi):
    ticks = _ticks(lo, hi)
    assert 2 <= len(ticks) <= 8, ticks
    labels = [plots.log_label(t) for t in ticks]
    assert all(labels) and len(set(labels)) == len(labels)
    assert max(len(s) for s in labels) <= 20
    # each label reads as its tick (95,000 was once labeled 1 x 10^5)
    for t, s in zip(ticks, labels, strict=True):
        assert _read_label(s) == pytest.approx(t, rel=0.005), (t, s)


def test_log_label_reads_plainly():
    assert [plots.log_label(v) for v in (0.01, 0.5, 1, 2, 300, 1e4, 1e-5)] == [
        "0.01", "0.5", "1", "2", "300", "$10^{4}$", "$10^{-5}$"]
    assert [plots.log_label(v) for v in (9.5e4, 8e4, 2.25e6, 9.996e4, 3e-5)] == [
        "$9.5\\times10^{4}$", "$8\\times10^{4}$", "$2.25\\times10^{6}$", "$1\\times10^{5}$",
        "$3\\times10^{-5}$"]


def _png_size(path):
    from PIL import Image

    with Image.open(path) as im:
        return im.size, im.info.get("dpi")


def test_box_plot_says_no_slowdown_in_words_and_saves_at_150_dpi(tmp_path):
    import matplotlib.pyplot as plt

    captured = {}
    real_save = plots._save

    def keep(fig, path):
        captured["texts"] = [t.get_text() for t in fig.axes[0].texts]
        captured["ylim"] = fig.axes[0].get_ylim()
        captured["ticks"] = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        return real_save(fig, path)

    plots._save = keep
    try:
        path = plots.box_plot({"maxmin": np.array([0, 0, 3.0, 40.0, 500.0, 7.0, 9.0]),
                               "sia": np.array([0.0, 2.5]), "sia-perfect": np.zeros(4)},
                              tmp_path / "box.png", "slowed jobs", "slowdown (minutes)")
    finally:
        plots._save = real_save
    assert plots.NO_SLOWDOWN in captured["texts"]  # said, not drawn as a box at 0
    assert "2.5" in captured["texts"]  # few values: labeled points
    assert captured["ylim"][0] > 0  # no room spent on impossible negative slowdowns
    assert captured["ticks"][0] == "maxmin\n5/7 > 0"
    _, dpi = _png_size(path)
    assert dpi is not None and round(dpi[0]) == 150
    plt.close("all")


def test_speedup_cdf_and_metric_cdfs_draw_distinguishable_curves(tmp_path):
    rng = np.random.default_rng(0)
    same = rng.lognormal(0, 2, 500)
    path = plots.speedup_cdf({"a": same, "b": same.copy(), "c": same * 1.01},
                             tmp_path / "cdf.png", "t")
    assert path.stat().st_size > 10_000
    styles = {(s["ls"], s["marker"]) for s in (plots._style(i) for i in range(5))}
    assert len(styles) == 5
    summary = pl.DataFrame({"policy": ["a", "b"] * 3, "mean_speedup": [1.2, 1.3, 2.0, 2.1, 0.9, 1.0],
                            "total_slowdown_min": [0.0, 5.0, 0.0, 0.0, 100.0, 2.0]})
    out = plots.metric_cdfs(summary, [("mean_speedup", "mean", "log"),
                                      ("total_slowdown_min", "slow", "symlog")],
                            tmp_path / "m.png", "title")
    assert out.exists()


def test_reliability_png_draws_one_curve_per_window_and_the_diagonal(tmp_path, monkeypatch):
    drawn = {}
    real = plots._save

    def keep(fig, path):
        drawn["lines"] = [(ln.get_label(), list(ln.get_xdata())) for ln in fig.axes[0].lines]
        return real(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    table = pl.DataFrame({"window_min": [60, 5, 5], "predicted": [0.5, 0.9, 0.1],
                          "observed": [0.4, 0.8, 0.2]})
    path = plots.reliability_png(table, tmp_path / "r.png")
    assert path.exists() and path.read_bytes()[:4] == b"\x89PNG"
    # the diagonal, then the windows in increasing order, each by increasing predicted P
    assert drawn["lines"] == [("calibrated", [0, 1]), ("5 min", [0.1, 0.9]), ("60 min", [0.5])]


def test_precision_recall_plot_colours_each_window_and_names_its_points():
    """Issue 36: persistence's markers were all black and the operating points unnamed."""
    from types import SimpleNamespace as N

    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import to_rgba
    from sia.pipelines.train import pr_curve_figure

    rng = np.random.default_rng(0)
    results = []
    for k, method in ((5, "xgboost"), (60, "either")):
        y = (rng.random(200) < 0.4).astype(int)
        results.append(N(k_min=k, val_true=y, val_proba=rng.random(200), model=N(method_=method),
                         metrics={"precision": 0.6, "recall": 0.7},
                         baselines={"persistence": {"precision": 0.5, "recall": 0.4}}))
    fig = pr_curve_figure(results)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "5 min operating point (P 0.60, R 0.70)" in labels
    assert "60 min persistence (P 0.50, R 0.40)" in labels
    lines = {ln.get_label(): to_rgba(ln.get_color()) for ln in ax.get_lines()}
    points = {c.get_label(): to_rgba(c.get_facecolor()[0]) for c in ax.collections}
    for k, curve in (("5", "5 min"), ("60", "60 min (either)")):
        assert points[f"{k} min persistence (P 0.50, R 0.40)"] == lines[curve]
        assert points[f"{k} min operating point (P 0.60, R 0.70)"] == lines[curve]
    assert lines["5 min"] != lines["60 min (either)"]
    plt.close(fig)
