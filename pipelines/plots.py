"""The evaluation plots as PNG files (matplotlib, Agg backend, no display needed).

- :func:`speedup_cdf`: CDF of per-job speedup per policy (SIA Figures 11, 13).
- :func:`box_plot`: one box per policy of positive values (slowdowns), log scale;
  a policy with none is said in words.
- :func:`metric_cdfs`: CDFs across experiments of per-run metrics (SIA Figure 13).
- :func:`table_png`: a table (e.g. the per-pool geometric means of SIA Table 12) as an image.

Every function writes ``path`` (150 dpi, trimmed to what is drawn, so titles
are never clipped) and returns it. Log axes get tick labels that read at any
range (:func:`log_ticks`); curves that may overlap differ in line style and
marker as well as color.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

DPI = 150
#: Per-policy styles, cycled: curves that coincide stay distinguishable.
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
NO_SLOWDOWN = "no job\nslowed"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(i: int) -> dict:
    """Return the line style keywords of the ``i``-th curve (color, dashes, marker).

    Markers sit every 10% of the curve's length, shifted per curve, so curves
    that coincide still show each policy's markers.
    """
    return {"color": f"C{i % 10}", "ls": LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)], "markevery": (0.02 * (i % 5), 0.1),
            "ms": 4, "lw": 1.4}


def log_label(v: float) -> str:
    """Return a short tick label for ``v`` > 0 on a log axis: plain numbers from 0.001
    to 9999 (``0.05``, ``2``, ``300``), powers of ten as ``10^k`` beyond."""
    if v <= 0 or not math.isfinite(v):
        return ""
    k = math.log10(v)
    if 1e-3 <= v < 1e4:
        return f"{v:.6g}"
    if abs(k - round(k)) < 1e-9:
        return f"$10^{{{int(round(k))}}}$"
    # mantissa to 3 significant digits: a narrow range's ticks (95,000 next to 100,000)
    # must not round to the same label
    exp = math.floor(k)
    mant = float(f"{v / 10.0 ** exp:.3g}")
    if mant >= 10.0:
        mant, exp = mant / 10.0, exp + 1
    return f"${mant:g}\\times10^{{{exp}}}$"


def log_ticks(axis, lo: float, hi: float, max_labels: int = 8) -> None:
    """Put readable major ticks on the log-scale ``axis`` spanning [lo, hi] (lo > 0).

    Wide ranges get powers of ten (every 2nd, 3rd ... so at most
    ``max_labels``), about two decades 1-2-5 steps, and a narrow range (less
    than a factor 3) evenly spaced round values, so labels never run together
    and a range within one decade still has labels.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

    lo, hi = min(lo, hi), max(lo, hi)
    decades = math.log10(hi / lo)
    if decades <= math.log10(3.0):
        ticks = [t for t in MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
                 if lo <= t <= hi and t > 0]
    else:
        subs = (1.0, 2.0, 5.0) if decades <= 2.2 else (1.0, 3.0) if decades <= 3.5 else (1.0,)
        k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        ticks = [s * 10.0 ** k for k in range(k0, k1 + 1) for s in subs
                 if lo * (1 - 1e-9) <= s * 10.0 ** k <= hi * (1 + 1e-9)]
        if len(ticks) > max_labels and subs == (1.0,):
            step = math.ceil(len(ticks) / max_labels)
            one = min(range(len(ticks)), key=lambda i: abs(math.log10(ticks[i])))  # keep 1
            ticks = [t for i, t in enumerate(ticks) if (i - one) % step == 0]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: log_label(v)))
    axis.set_minor_formatter(NullFormatter())


def _save(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from sia.pipelines.output import save_figure

    save_figure(fig, path, dpi=DPI, bbox_inches="tight", pad_inches=0.08)
    _plt().close(fig)
    return path


def _positive_range(arrays) -> tuple[float, float] | None:
    """Return (min, max) of the positive finite values of ``arrays`` (None when none)."""
    vals = [a[np.isfinite(a) & (a > 0)] for a in arrays]
    vals = [v for v in vals if v.size]
    if not vals:
        return None
    return float(min(v.min() for v in vals)), float(max(v.max() for v in vals))


def _pad_log(lo: float, hi: float, frac: float = 0.04) -> tuple[float, float]:
    """Return [lo, hi] widened by ``frac`` of its log span (a point range gets x/1.5..x*1.5)."""
    if hi <= lo * 1.0001:
        return lo / 1.5, hi * 1.5
    span = math.log10(hi / lo)
    return lo / 10 ** (frac * span), hi * 10 ** (frac * span)


def _log_y(ax, rng: tuple[float, float] | None, frac: float) -> None:
    """A log y axis over the positive range ``rng`` padded by ``frac`` (left linear: None)."""
    if rng is None:
        return
    ax.set_yscale("log")
    lo, hi = _pad_log(*rng, frac=frac)
    ax.set_ylim(lo, hi)
    log_ticks(ax.yaxis, lo, hi)


def speedup_cdf(speedups: Mapping[str, np.ndarray], path: Path, title: str = "",
                slowed_pct: Mapping[str, float] | None = None) -> Path:
    """Draw the CDF of per-job speedup (log x axis) for each policy to ``path``; return it.

    Speedups below 1 are slowed jobs; a vertical line marks 1 and each
    legend entry says which percentage of jobs the policy slowed: from
    ``slowed_pct`` when given (the metrics' own count), else speedup < 1.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    arrays = {}
    for label, values in speedups.items():
        x = np.sort(np.asarray(values, dtype=np.float64))
        arrays[label] = x[np.isfinite(x) & (x > 0)]
    for i, (label, x) in enumerate(arrays.items()):
        if x.size == 0:
            continue
        y = np.arange(1, x.size + 1) / x.size
        slowed = (slowed_pct or {}).get(label, float((x < 1.0).mean()) * 100)
        ax.step(x, y, where="post", label=f"{label} (n={x.size}, {slowed:.2g}% slowed)",
                **_style(i))
    ax.axvline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    rng = _positive_range(list(arrays.values()))
    if rng is not None:
        lo, hi = _pad_log(min(rng[0], 1.0), max(rng[1], 1.0))
        ax.set_xlim(lo, hi)
        log_ticks(ax.xaxis, lo, hi)
    ax.set_xlabel("per-job speedup over FCFS (JCT_FCFS / JCT); < 1: slowed")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.0)
    ax.grid(True, which="major", alpha=0.25)
    ax.set_title(title or "per-job speedup")
    if any(x.size for x in arrays.values()):
        ax.legend(fontsize=7.5, loc="upper left")
    else:  # nothing scored (e.g. the warm-up covers the replay): say so instead of a legend
        ax.text(0.5, 0.5, "no job scored", transform=ax.transAxes, ha="center", va="center")
    return _save(fig, path)


def box_plot(values: Mapping[str, np.ndarray], path: Path, title: str, ylabel: str,
             empty: str = NO_SLOWDOWN, count: str = "{k}/{n} > 0") -> Path:
    """Draw one box per policy of its positive values (log y axis) to ``path``; return it.

    Zeros cannot sit on a log axis and are not slowdowns: each policy's label
    counts its positive values (``k/n > 0``), a policy with none gets the
    words ``empty`` ("no job slowed") instead of a box, and one with fewer
    than 5 is drawn as labeled points. ``count`` formats the count under each
    policy's name from ``k`` (positive values) and ``n`` (all values).
    """
    plt = _plt()
    labels = list(values)
    data = [np.asarray(values[k], dtype=np.float64) for k in labels]
    pos = [d[np.isfinite(d) & (d > 0)] for d in data]
    fig, ax = plt.subplots(figsize=(max(4.5, 1.25 * len(labels) + 1.5), 4.2))
    ax.set_yscale("log")
    rng = _positive_range(pos)
    lo, hi = _pad_log(*rng, frac=0.08) if rng is not None else (0.1, 10.0)
    for i, p in enumerate(pos, start=1):
        if p.size >= 5:
            ax.boxplot([p], positions=[i], whis=(5, 95), widths=0.55, showfliers=True,
                       flierprops={"marker": ".", "ms": 3, "alpha": 0.5})
        elif p.size:
            ax.plot(np.full(p.size, i), p, "o", color="C0", ms=6)
            for v in p:
                ax.annotate(f"{v:,.0f}" if v >= 100 else f"{v:.3g}", (i, v), xytext=(8, 0), textcoords="offset points",
                            va="center", fontsize=8)
        else:
            ax.text(i, math.sqrt(lo * hi), empty,
                    ha="center", va="center", fontsize=9, color="0.3", style="italic")
    ax.set_xlim(0.4, len(labels) + 0.6)
    ax.set_ylim(lo, hi)
    log_ticks(ax.yaxis, lo, hi)
    ax.set_xticks(range(1, len(labels) + 1))
    ax.set_xticklabels([f"{name}\n" + count.format(k=f"{p.size:,}", n=f"{d.size:,}")
                        for name, p, d in zip(labels, pos, data, strict=True)], fontsize=8)
    ax.grid(True, axis="y", which="major", alpha=0.25)
    ax.set_ylabel(ylabel + " (log scale)")
    ax.set_title(title)
    return _save(fig, path)


def metric_cdfs(summary: pl.DataFrame, metrics: Sequence[tuple[str, str, str]], path: Path,
                title: str = "") -> Path:
    """Draw, per metric, the CDF across experiments of each policy's value (SIA Figure 13).

    ``summary`` has one row per (experiment, policy) with a ``policy`` column
    and the metric columns; ``metrics`` lists (column, axis label, x scale) with
    the scale ``"linear"``, ``"log"`` (positive values) or ``"symlog"`` (zeros
    show; the axis starts at 0: these are counts and totals).
    """
    plt = _plt()
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.8), squeeze=False)
    fig.subplots_adjust(wspace=0.3)
    policies = list(dict.fromkeys(summary["policy"].to_list())) if summary.height else []
    for ax, (col, label, scale) in zip(axes[0], metrics, strict=True):
        arrays = []
        for i, pol in enumerate(policies):
            x = summary.filter(pl.col("policy") == pol)[col].drop_nulls().to_numpy()
            x = np.sort(x.astype(np.float64))
            arrays.append(x)
            if x.size == 0:
                continue
            ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=pol, **_style(i))
        finite = [a[np.isfinite(a)] for a in arrays]
        top = max((float(a.max()) for a in finite if a.size), default=1.0)
        if scale == "symlog":
            from matplotlib.ticker import FixedLocator, FuncFormatter

            right = max(top * 1.5, 10.0)
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlim(0, right)
            decades = [10.0 ** k for k in range(0, int(math.log10(right)) + 1)]
            step = math.ceil(len(decades) / 5)
            ax.xaxis.set_major_locator(FixedLocator([0.0, *decades[::step]]))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "0" if v == 0 else log_label(v)))
        elif scale == "log":
            ax.set_xscale("log")
            rng = _positive_range(arrays)
            if rng is not None:
                lo, hi = _pad_log(*rng)
                ax.set_xlim(lo, hi)
                log_ticks(ax.xaxis, lo, hi, max_labels=6)
        else:
            ax.set_xlim(left=0, right=max(top * 1.05, 1e-9))
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of experiments")
        ax.set_ylim(0, 1.02)
        ax.grid(True, which="major", alpha=0.25)
    if policies:
        axes[0][0].legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def table_png(table: pl.DataFrame, path: Path, title: str = "", digits: int = 2) -> Path:
    """Render ``table`` (first column = row labels) as a PNG image; return ``path``.

    Floats are shown with ``digits`` decimals, missing values as '-'.
    """
    plt = _plt()

    def fmt(v) -> str:
        if v is None or (isinstance(v, float) and not np.isfinite(v)):
            return "-"
        if isinstance(v, float):
            return f"{v:.{digits}f}"
        return str(v)

    cells = [[fmt(v) for v in row] for row in table.iter_rows()]
    width = max(4.0, 1.0 * table.width)
    fig, ax = plt.subplots(figsize=(width, 0.3 * (table.height + 2)))
    ax.axis("off")
    if cells:
        tab = ax.table(cellText=cells, colLabels=table.columns, loc="center", cellLoc="center")
        tab.auto_set_font_size(False)
        tab.set_fontsize(8)
        tab.scale(1.0, 1.3)
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, path)


def reliability_png(table: pl.DataFrame, path: Path,
                    title: str = "JobDuration on validation: reliability") -> Path:
    """Draw a reliability diagram: predicted P(duration <= w) against the share that fit, per window.

    ``table`` has ``window_min``, ``predicted`` and ``observed``
    (:func:`sia.models.job_duration.reliability_table`); the diagonal is a
    perfectly calibrated predictor.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 4.2))
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls=":", label="calibrated")
    for i, (w, part) in enumerate(table.sort("window_min", "predicted")
                                  .group_by("window_min", maintain_order=True)):
        style = {k: v for k, v in _style(i).items() if k != "markevery"}
        ax.plot(part["predicted"], part["observed"], label=f"{w[0]} min", **style)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted P(duration <= window)")
    ax.set_ylabel("share of jobs that fit the window")
    ax.set_title(title)
    ax.legend(loc="upper left")
    return _save(fig, path)


#: The frontier's panels: (y metric, y label) x (x metric, x label, x scale).
FRONTIER_Y = (("mean_speedup", "mean speedup over FCFS"),
              ("geomean_speedup", "geometric-mean speedup over FCFS"))
FRONTIER_X = (("pct_slowed", "% of jobs slowed", "symlog"),
              ("total_slowdown_min", "total slowdown (minutes)", "symlog"))


#: One study of :func:`promise_overview`: (title, curves, points) as :func:`frontier` takes them.
Study = tuple[str, Mapping[str, Sequence[tuple[float, Mapping[str, float]]]],
              Mapping[str, Mapping[str, float]]]


def promise_overview(studies: Sequence[Study], path: Path, title: str = "") -> Path:
    """Plot several studies' speedup against their share of jobs slowed, one column each.

    Rows: mean and geometric-mean speedup over FCFS (log); x: % of jobs slowed
    (symlog: 0, the promise, is drawn at the left). Each policy keeps one color
    and marker in every column (risk-budget curves as lines labelled by their
    budgets, the rest as points), with one legend for the figure, so the
    studies read side by side at a glance.
    """
    plt = _plt()
    n = max(1, len(studies))
    fig, axes = plt.subplots(2, n, figsize=(4.2 * n, 7.2), squeeze=False)
    styles: dict[str, int] = {}
    for _, curves, points in studies:  # points first: the legend lists them first
        for name in [*points, *curves]:
            styles.setdefault(name, len(styles))
    drawn: dict[str, Any] = {}
    for c, (stitle, curves, points) in enumerate(studies):
        for r, (ym, ylab) in enumerate(FRONTIER_Y):
            ax = axes[r][c]
            ys_all: list[float] = []
            for name, pts in curves.items():
                pts = sorted(pts, key=lambda t: t[0])
                i = styles[name]
                xs = [_metric(m, "pct_slowed") for _, m in pts]
                ys = [_metric(m, ym) for _, m in pts]
                ys_all += ys
                (h,) = ax.plot(xs, ys, color=f"C{i % 10}", marker="o", ms=4, lw=1.4)
                drawn.setdefault(f"{name} (risk budget)", h)
                for (rk, _), x, y in zip(pts, xs, ys, strict=True):
                    if math.isfinite(x) and math.isfinite(y):
                        ax.annotate(f"{rk:g}", (x, y), textcoords="offset points",
                                    xytext=(4, 2), fontsize=7, color=f"C{i % 10}")
            for name, m in points.items():
                i = styles[name]
                x, y = _metric(m, "pct_slowed"), _metric(m, ym)
                ys_all.append(y)
                (h,) = ax.plot([x], [y], ls="none", marker=MARKERS[i % len(MARKERS)], ms=9,
                               color=f"C{i % 10}", markeredgecolor="black")
                drawn.setdefault(name, h)
            ax.set_xscale("symlog", linthresh=0.01)
            ax.set_xlim(left=-0.002)
            ax.grid(True, which="major", alpha=0.3)
            _log_y(ax, _positive_range([np.asarray(ys_all, dtype=np.float64)]), 0.15)
            if r == 0:
                ax.set_title(stitle, fontsize=10)
            if r == len(FRONTIER_Y) - 1:
                ax.set_xlabel("% of jobs slowed (symlog: 0 at the left)")
            if c == 0:
                ax.set_ylabel(ylab)
    order = sorted(drawn, key=lambda k: (styles.get(k.removesuffix(" (risk budget)"), 0),
                                         k.endswith(" (risk budget)")))
    fig.legend([drawn[k] for k in order], order, loc="lower center",
               ncol=min(5, max(1, len(drawn))), fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, -0.01))
    fig.suptitle(title or "speedup against jobs slowed (up and left is better)", fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    return _save(fig, path)


def _metric(m: Mapping[str, float], k: str) -> float:
    """``m[k]`` as a float (NaN when missing or None)."""
    v = m.get(k)
    return float("nan") if v is None else float(v)


def frontier(curves: Mapping[str, Sequence[tuple[float, Mapping[str, float]]]],
             points: Mapping[str, Mapping[str, float]], path: Path, title: str = "") -> Path:
    """Plot the speedup / slowdown frontier over SIA's risk budget (2 x 2 panels).

    ``curves``: per policy, (risk budget, metrics) pairs, drawn as a line through
    the budgets in increasing order with each point labelled by its budget;
    ``points``: per policy, its metrics (one marker each). Metrics are the
    aggregate's ``mean_speedup``, ``geomean_speedup``, ``pct_slowed`` (%) and
    ``total_slowdown_min``. Rows: mean and geometric-mean speedup (log); columns:
    share of jobs slowed and total slowdown minutes (symlog: 0 is drawn, at the left).
    """
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), squeeze=False)
    for r, (ym, ylab) in enumerate(FRONTIER_Y):
        ys_all = []
        for c, (xm, xlab, xscale) in enumerate(FRONTIER_X):
            ax = axes[r][c]
            i = 0
            for name, pts in curves.items():
                pts = sorted(pts, key=lambda t: t[0])
                xs = [_metric(m, xm) for _, m in pts]
                ys = [_metric(m, ym) for _, m in pts]
                ys_all += ys
                st = _style(i)
                ax.plot(xs, ys, color=st["color"], ls=st["ls"], marker=st["marker"], ms=5,
                        lw=1.6, label=f"{name} (risk budget)")
                # one label per distinct point: budgets that give the same result share it
                # ("0, 0.1, 1"), instead of labels printed over each other
                same: dict[tuple[float, float], list[str]] = {}
                for (rk, _), x, y in zip(pts, xs, ys, strict=True):
                    if math.isfinite(x) and math.isfinite(y):
                        same.setdefault((x, y), []).append(f"{rk:g}")
                for (x, y), budgets in same.items():
                    ax.annotate(", ".join(budgets), (x, y), textcoords="offset points",
                                xytext=(4, 3), fontsize=7, color=st["color"])
                i += 1
            for name, m in points.items():
                st = _style(i)
                x, y = _metric(m, xm), _metric(m, ym)
                ys_all.append(y)
                ax.plot([x], [y], ls="none", marker=MARKERS[i % len(MARKERS)], ms=9,
                        color=st["color"], markeredgecolor="black",
                        label=f"{name} (risk unset)" if name in curves else name)
                i += 1
            if xscale == "symlog":
                lin = 0.01 if xm == "pct_slowed" else 1.0
                ax.set_xscale("symlog", linthresh=lin)
                ax.set_xlim(left=-0.2 * lin)
            ax.set_xlabel(xlab + (" (symlog: 0 at the left)" if xscale == "symlog" else ""))
            ax.set_ylabel(ylab)
            ax.grid(True, which="major", alpha=0.3)
        rng = _positive_range([np.asarray(ys_all, dtype=np.float64)])
        for c in range(len(FRONTIER_X)):
            ax = axes[r][c]
            _log_y(ax, rng, 0.1)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))),
               fontsize=9, frameon=False, bbox_to_anchor=(0.5, -0.01))
    fig.suptitle(title or "speedup vs slowdown over the risk budget "
                          "(up and left is better; numbers: the budget)", fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return _save(fig, path)
