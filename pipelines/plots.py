"""The evaluation plots as PNG files (matplotlib, Agg backend, no display needed).

- :func:`speedup_cdf`: CDF of per-job speedup per policy (SIA Figures 11, 13).
- :func:`box_plot`: one box per policy (slowdowns, per-experiment totals), log scale.
- :func:`metric_cdfs`: CDFs across experiments of per-run metrics (SIA Figure 13).
- :func:`table_png`: a table (e.g. the per-pool geometric means of SIA Table 12) as an image.

Every function writes ``path`` and returns it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for ax in fig.axes:  # minor tick labels on log axes cost most of the drawing time
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_minor_formatter(NullFormatter())
            if axis.get_scale() == "log":  # labels at 1, 2, 5 x 10^k even on narrow ranges
                axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    fig.savefig(path, dpi=90)
    _plt().close(fig)
    return path


def speedup_cdf(speedups: Mapping[str, np.ndarray], path: Path, title: str = "") -> Path:
    """Draw the CDF of per-job speedup (log x axis) for each policy to ``path``; return it.

    Speedups below 1 are slowed jobs; a vertical line marks 1.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.13, top=0.92)
    for label, values in speedups.items():
        x = np.sort(np.asarray(values, dtype=np.float64))
        x = x[np.isfinite(x) & (x > 0)]
        if x.size == 0:
            continue
        y = np.arange(1, x.size + 1) / x.size
        ax.step(x, y, where="post", label=f"{label} (n={x.size})")
    ax.axvline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("per-job speedup over FCFS (JCT_FCFS / JCT)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.0)
    ax.set_title(title or "per-job speedup")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def box_plot(values: Mapping[str, np.ndarray], path: Path, title: str, ylabel: str) -> Path:
    """Draw one box per policy (symmetric-log y axis, so zeros show) to ``path``; return it.

    Each box is labeled with its count and the number of non-zero values.
    """
    plt = _plt()
    labels = list(values)
    data = [np.asarray(values[k], dtype=np.float64) for k in labels]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(labels) + 2), 4))
    fig.subplots_adjust(left=0.15, right=0.97, bottom=0.18, top=0.92)
    if labels:
        ax.boxplot([d if d.size else np.zeros(1) for d in data], whis=(5, 95), showfliers=True)
        ax.set_xticks(range(1, len(labels) + 1))
        ax.set_xticklabels([f"{k}\n{int((d > 0).sum())}/{d.size} > 0" for k, d in
                            zip(labels, data, strict=True)], fontsize=8)
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return _save(fig, path)


def metric_cdfs(summary: pl.DataFrame, metrics: Sequence[tuple[str, str, str]], path: Path,
                title: str = "") -> Path:
    """Draw, per metric, the CDF across experiments of each policy's value (SIA Figure 13).

    ``summary`` has one row per (experiment, policy) with a ``policy`` column
    and the metric columns; ``metrics`` lists (column, axis label, x scale) with
    the scale ``"linear"``, ``"log"`` (positive values) or ``"symlog"`` (zeros show).
    """
    plt = _plt()
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.15, top=0.88, wspace=0.3)
    policies = list(dict.fromkeys(summary["policy"].to_list())) if summary.height else []
    for ax, (col, label, scale) in zip(axes[0], metrics, strict=True):
        for pol in policies:
            x = summary.filter(pl.col("policy") == pol)[col].drop_nulls().to_numpy()
            x = np.sort(x.astype(np.float64))
            if x.size == 0:
                continue
            ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=pol)
        if scale == "symlog":
            ax.set_xscale("symlog", linthresh=1.0)
        elif scale == "log":
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of experiments")
        ax.set_ylim(0, 1.0)
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
    width = max(4.0, 1.1 * table.width)
    fig, ax = plt.subplots(figsize=(width, 0.45 * (table.height + 2)))
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.85)
    ax.axis("off")
    if cells:
        tab = ax.table(cellText=cells, colLabels=table.columns, loc="center", cellLoc="center")
        tab.auto_set_font_size(False)
        tab.set_fontsize(8)
        tab.scale(1.0, 1.3)
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, path)
