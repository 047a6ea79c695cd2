"""Replay windows: the same study on several windows of days, side by side and pooled.

One replay is one window of a trace; a number measured on it (a share of jobs slowed, a mean
speedup) can move a lot with the window (docs/results/graham.md replays six of Graham's).
``sia evaluate CONFIG --windows 24:38,31:45,38:end`` runs the config's sweep once per window
(``replay.start_day`` / ``replay.end_day`` set to it; predictors trained on the fly train
on the days before each window, as for one replay), each into its own folder, then writes
``windows.csv`` / ``windows.md``: every window's aggregate rows, and per group and policy a
``pooled`` row over all the windows' counted jobs (:func:`pooled_summary`, so the pooled
share of jobs slowed is over jobs, not a mean of shares) with the worst window's share.
Windows may overlap; a job counted in two windows counts twice in the pooled row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from sia.data.errors import ConfigError
from sia.pipelines.engine.store import atomic_write_text
from sia.pipelines.studies.evaluate import SUMMARY_METRICS, pooled_summary

#: The per-window columns of ``windows.csv`` after its keys (the sweep's aggregate's).
COLUMNS = ("experiments", *SUMMARY_METRICS)
POOLED = "pooled"


@dataclass(frozen=True)
class Window:
    """A replay window in days since the trace's first submission (``end`` None: the end)."""

    start: float
    end: float | None

    @property
    def label(self) -> str:
        """``days 24-38`` (``days 38-end``)."""
        return f"days {self.start:g}-{'end' if self.end is None else f'{self.end:g}'}"

    @property
    def dirname(self) -> str:
        """The window's results folder under the study's: ``days-24-38``."""
        return self.label.replace(" ", "-")

    def overrides(self) -> list[str]:
        """The ``--set`` items that make a config replay this window."""
        return [f"replay.start_day={self.start:g}",
                f"replay.end_day={'null' if self.end is None else f'{self.end:g}'}"]


def parse_windows(text: str, option: str = "--windows") -> list[Window]:
    """Return the windows of ``START:END[,START:END...]`` (days; END may be ``end``), in the
    order given; a ConfigError names ``option`` and the item that is wrong."""
    items = [s.strip() for s in str(text).split(",")]
    out: list[Window] = []
    for item in items:
        start_s, sep, end_s = item.partition(":")
        start = _day(start_s)
        end = None if end_s.strip() == "end" else _day(end_s)
        if not sep or start is None or (end is None and end_s.strip() != "end"):
            raise ConfigError(f"{option} {item!r}: expected START:END in days since the trace's "
                              "first submission (END may be 'end'), e.g. 24:38,31:45,38:end")
        if end is not None and end <= start:
            raise ConfigError(f"{option} {item!r}: the end ({end:g}) must be after the start "
                              f"({start:g})")
        window = Window(start, end)
        if window in out:
            raise ConfigError(f"{option} {item!r}: the window is given twice")
        out.append(window)
    return out


def _day(text: str) -> float | None:
    """A day number >= 0 from ``text``, or None when it is not one."""
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) and v >= 0 else None


def check_no_replay_sets(sets: list[str], option: str = "--windows") -> None:
    """A ConfigError when ``--set`` also gives the replay window, which ``option`` sets."""
    for item in sets:
        key = item.partition("=")[0].strip()
        if key in ("replay.start_day", "replay.end_day", "replay"):
            raise ConfigError(f"--set {item!r} and {option} both set the replay window; "
                              f"drop one")


def alias_override(cfg: Any, w: Window) -> list[str]:
    """The ``--set`` item that gives window ``w``'s predictors, when trained on the fly, an
    alias of their own (``<alias>-days-24-38``): with one alias for every window, a re-run
    that reuses a window's training would resolve the alias to the last window's models,
    trained on days inside the earlier windows. Registry predictors keep their alias."""
    p = cfg.predictors
    if p is None or p.train != "on_the_fly":
        return []
    return [f"predictors.alias={p.alias}-{w.dirname}"]  # (parsing set the default alias)


def check_windows(chosen: list[Window], cfgs: list[Any], allow_large: bool) -> None:
    """Before any work: each window's config within the size limits, and each window holding
    jobs of the trace (a ConfigError naming the window otherwise)."""
    from sia.pipelines.inputs import replay_window
    from sia.pipelines.studies.evaluate import load_trace
    from sia.pipelines.studies.limits import check_evaluate

    for cfg in cfgs:
        check_evaluate(cfg, allow_large)
    jobs = load_trace(cfgs[0]).jobs
    for w, cfg in zip(chosen, cfgs, strict=True):
        replay_window(jobs, cfg.replay_start_day, cfg.replay_end_day,
                      where=f"--windows {w.label.removeprefix('days ')}")


def windows_table(done: list[tuple[Window, Path]]) -> pl.DataFrame:
    """Return ``windows.csv``'s table from the finished sweeps (each window and its folder):
    every window's aggregate rows, then one pooled row per group and policy (module doc)."""
    rows, per_job = [], []
    for w, folder in done:
        agg = pl.read_csv(folder / "aggregate.csv")
        keep = ["group", "policy", *[c for c in COLUMNS if c in agg.columns]]
        rows.append(agg.select(keep).with_columns(
            pl.lit(w.label).alias("window"), pl.lit(w.start).alias("start_day"),
            pl.lit(w.end, dtype=pl.Float64).alias("end_day")))
        groups = pl.read_csv(folder / "summary.csv").select("exp_id", "group").unique()
        for f in sorted(folder.glob("exp-*/per_job.parquet")):
            jobs = pl.read_parquet(f).join(groups, on="exp_id", how="left")
            per_job.append(jobs.with_columns(
                pl.concat_str([pl.lit(w.dirname), pl.col("exp_id")], separator="/")
                .alias("exp_id")))
    each = pl.concat(rows, how="diagonal_relaxed")
    each = each.select("window", "start_day", "end_day", *[c for c in each.columns
                                                           if c not in ("window", "start_day",
                                                                        "end_day")])
    return pl.concat([each, _pooled(each, per_job)], how="diagonal_relaxed")


def _pooled(each: pl.DataFrame, per_job: list[pl.DataFrame]) -> pl.DataFrame:
    """One row per group and policy over every window's counted jobs, with the worst window's
    share of jobs slowed."""
    jobs = pl.concat(per_job, how="diagonal_relaxed") if per_job else None
    out = []
    for (group, policy), part in each.group_by(["group", "policy"], maintain_order=True):
        mine = jobs.filter((pl.col("group") == group) & (pl.col("policy") == policy)) \
            if jobs is not None else pl.DataFrame()
        summary = pooled_summary(mine)
        row = {"window": POOLED, "group": group, "policy": policy,
               "experiments": int(part["experiments"].sum())}
        row |= {c: summary.get(c) for c in COLUMNS if c != "experiments"}
        row["worst_window_pct_slowed"] = part["pct_slowed"].max()
        out.append(row)
    return pl.DataFrame(out)


def write_windows(table: pl.DataFrame, out_dir: Path) -> list[Path]:
    """Write ``windows.csv`` and ``windows.md`` into ``out_dir``; return their paths."""
    csv, md = out_dir / "windows.csv", out_dir / "windows.md"
    table.write_csv(csv)
    head = [c for c in table.columns if c not in ("start_day", "end_day")]
    lines = ["# Replay windows: each window's aggregate, then pooled over the windows", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table.select(head).iter_rows():
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    atomic_write_text(md, "\n".join(lines) + "\n")
    return [csv, md]


def _cell(v: object) -> str:
    """A table cell: 4 significant digits for floats, '-' for none."""
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)
