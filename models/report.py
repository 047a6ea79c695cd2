"""The predictor report: SIA's tables for one trace, as polars frames, rich tables, CSV and Markdown.

Tables (one row per window unless said otherwise):

- ``will_arrive``: the model's precision / recall / F beside persistence
  and always-yes, and whether the model beats persistence on F;
- ``ablation``: one row per (window, cumulative feature set) (SIA Tables 20, 23);
- ``new_load`` (validation) and ``new_load_holdout`` (the training period's
  last days): one row per (window, method: sliding max, calibrated,
  quantile): exceedance rate, over-reservation and shortfall;
- ``job_duration``: one row: accuracy, under- and over-prediction rates, and
  the confusion matrix flattened (``true_i_pred_j``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table


def will_arrive_table(results: list[Any]) -> pl.DataFrame:
    """Return the P/R/F table of the models (``WindowResult``s) and the two baselines.

    Beside validation's P/R/F: what model selection registered (``method``,
    its number of ``features``) and why (the training tail's F of the
    classifier, with cross-fitted thresholds, and of persistence).
    """
    rows = []
    for r in results:
        m, per, yes = r.metrics, r.baselines["persistence"], r.baselines["always_yes"]
        sel = {row["candidate"]: row for row in getattr(r.model, "selection_", [])}
        rows.append({
            "k_min": r.k_min,
            "method": getattr(r.model, "method_", "xgboost"),
            "features": len(r.feature_columns),
            "tail_xgb_F": sel.get("xgboost", {}).get("f1", float("nan")),
            "tail_persist_F": sel.get("persistence", {}).get("f1", float("nan")),
            "P": m["precision"], "R": m["recall"], "F": m["f1"],
            "threshold": r.threshold,
            "persist_P": per["precision"], "persist_R": per["recall"], "persist_F": per["f1"],
            "yes_P": yes["precision"], "yes_R": yes["recall"], "yes_F": yes["f1"],
            "beats_persistence_F": m["f1"] > per["f1"],
            "val_rows": m["rows"], "val_positive_rate": m["positives"] / max(m["rows"], 1),
        })
    return pl.DataFrame(rows)


def ablation_table(results: list[Any]) -> pl.DataFrame:
    """Return one row per (window, feature set): P, R, F on validation."""
    rows = [
        {"k_min": a["k_min"], "feature_set": a["feature_set"], "P": a["precision"],
         "R": a["recall"], "F": a["f1"]}
        for r in results for a in r.ablation
    ]
    return pl.DataFrame(rows)


def new_load_table(results: list[Any], *, holdout: bool = False) -> pl.DataFrame:
    """Return one row per (window, NewLoadEstimate method): exceedance, over-reservation, shortfall.

    ``results`` are :class:`~sia.models.new_load.LoadResult`. Metrics are on
    the validation period, or with ``holdout`` on the last days of the
    training period (fit on the days before: where the registered method is
    chosen). GPUs are means over the windows with arrivals; ``registered``
    marks the method registered for the window.
    """
    rows = []
    for r in results:
        est = r.estimator
        for method, m in (r.holdout if holdout else r.validation).items():
            # the constants of the estimator fit on all training rows (not the hold-out's)
            fitted = None if holdout else r.estimators.get(method)
            rows.append({
                "k_min": r.k_min,
                "method": method,
                "registered": method == est.method,
                "windows_with_arrivals": m["windows_with_arrivals"],
                "exceed": m["exceedance_rate"],
                "target_exceed": float(est.alpha),
                "over_gpus": m["mean_over_reservation_gpus"],
                "short_gpus": m["mean_shortfall_gpus"],
                "mean_estimate_gpus": m["mean_estimate_gpus"],
                "scale": float(fitted.scale_) if fitted is not None else float("nan"),
                "empty_gpus": float(fitted.empty_) if fitted is not None else float("nan"),
                "offset_gpus": float(fitted.offset_) if fitted is not None else float("nan"),
                # quantile: exceedance on its conformal split's later part, before / after offset
                "calib_exceed_raw": (fitted.holdout_exceedance_raw_ if fitted is not None
                                     else float("nan")),
                "calib_exceed": (fitted.holdout_exceedance_ if fitted is not None
                                 else float("nan")),
            })
    return pl.DataFrame(rows)


def job_duration_table(metrics: dict[str, Any]) -> pl.DataFrame:
    """Return the JobDuration metrics as one row (the confusion matrix flattened)."""
    row = {k: v for k, v in metrics.items() if k != "confusion"}
    for i, line in enumerate(metrics["confusion"]):
        for j, n in enumerate(line):
            row[f"true{i}_pred{j}"] = n
    return pl.DataFrame([row])


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def rich_table(df: pl.DataFrame, title: str, columns: list[str] | None = None) -> Table:
    """Return a rich Table of ``df`` (floats to 3 decimals)."""
    cols = columns or df.columns
    table = Table(title=title)
    for c in cols:
        table.add_column(c, justify="right")
    for row in df.select(cols).iter_rows():
        table.add_row(*(_fmt(v) for v in row))
    return table


def to_markdown(df: pl.DataFrame, title: str) -> str:
    """Return ``df`` as a Markdown table under a ``## title`` heading."""
    lines = [f"## {title}", "", "| " + " | ".join(df.columns) + " |",
             "|" + "---|" * len(df.columns)]
    for row in df.iter_rows():
        lines.append("| " + " | ".join(_fmt(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def save_report(tables: dict[str, pl.DataFrame], out_dir: Path) -> list[Path]:
    """Write each table as ``<name>.csv`` and all of them in ``report.md``; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    md = ["# Predictor report", ""]
    for name, df in tables.items():
        p = out_dir / f"{name}.csv"
        df.write_csv(p)
        paths.append(p)
        md.append(to_markdown(df, name))
    p = out_dir / "report.md"
    p.write_text("\n".join(md))
    paths.append(p)
    return paths


#: Tables that are a plot's data (in report.md and their CSV, drawn beside them): not printed.
PLOT_ONLY = frozenset({"job_duration_reliability"})


def print_report(tables: dict[str, pl.DataFrame], console: Console | None = None) -> None:
    """Print the report tables with rich."""
    console = console or Console(width=max(Console().width, 160))
    for name, df in tables.items():
        if not df.height or name in PLOT_ONLY:
            continue
        if name == "job_duration":  # the summary, then the confusion matrix as a square
            summary = [c for c in df.columns if not c.startswith("true")]
            console.print(rich_table(df, name, summary))
            n = sum(c.startswith("true0_") for c in df.columns)
            square = pl.DataFrame({"true_bin": list(range(n)), **{
                f"pred{j}": [df[f"true{i}_pred{j}"][0] for i in range(n)] for j in range(n)}})
            console.print(rich_table(square, "job_duration confusion (rows: true bin)"))
        else:
            console.print(rich_table(df, name))
