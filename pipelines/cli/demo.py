"""`sia demo`: the product's main job on the real Philly trace shipped in the package.

Reads the embedded Philly trace (``builtin:philly``, CC-BY-4.0, Microsoft;
its 65 duplicate rows dropped and counted), trains the predictors on the
default split (training days 23-44, validation 44-58; one MLflow run in
``sia-predictors``, models registered under the alias ``demo``), replays the
two weeks after validation (days 58-72, the first 2 a warm-up) with all
pools sharing under FCFS, MaxMin, HiveD*, learned SIA and SIA with perfect
predictions (one evaluation run in ``sia-evaluations``), prints the speedup /
slowdown table, writes the plots and prints the command that opens the
MLflow UI. ``experiments/demo.yaml`` is the same config.

``--synthetic`` runs it on the synthetic SIA base workload instead
(``experiments/demo_synthetic.yaml``), whose random durations give the
predictors little to learn.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from sia.data.errors import ConfigError
from sia.pipelines.cli.evaluate import report, wide_console
from sia.pipelines.studies.experiment import parse_config

#: The demo's policies in display order; those not registered yet are skipped (and said so).
DEMO_POLICIES = ("fcfs", "maxmin", "hived", "sia", "sia-perfect")
#: The synthetic demo's policies (HiveD* adds little on 8-GPU pools of random jobs).
SYNTHETIC_POLICIES = ("fcfs", "maxmin", "sia", "sia-perfect")

# ---- Philly (the default): the default split of models/split.py (active start day 20 +
# 3 days warm-up, 21 days training, 14 validation), then two weeks replayed.
PHILLY_TRACE = "builtin:philly"
PHILLY_WARMUP_DAYS, PHILLY_TRAIN_DAYS, PHILLY_VAL_DAYS = 3.0, 21.0, 14.0
PHILLY_REPLAY_START = 58.0  # where the default split's validation ends
PHILLY_REPLAY_DAYS = 14.0
PHILLY_REPLAY_WARMUP = 2.0
#: ``--small`` (tests): a shorter training period and a 3-day replay.
SMALL_PHILLY = {"train_days": 7.0, "val_days": 4.0, "replay_days": 3.0, "replay_warmup": 0.5}

# ---- synthetic (--synthetic)
DEMO_DAYS = 12.0
SMALL_DAYS = 9.0
#: JobDuration bins the smallest quantile of similar jobs' durations whose under-prediction
#: rate on the training period is at most this (a calibrated choice, like the calibrated
#: NewLoadEstimate). The paper's median under-predicts 17% of this workload's jobs (its
#: durations are bimodal and untagged), and lent jobs that overrun slowed 5.4% of jobs.
DURATION_TARGET_UNDER = 0.1
#: The synthetic predictors' period (days): warm-up, training, validation; the replay follows.
TRAIN_WARMUP_DAYS, TRAIN_DAYS, VAL_DAYS = 1.0, 5.0, 2.0


def philly_demo_config(seed: int = 0, policies: tuple[str, ...] = DEMO_POLICIES, *,
                       small: bool = False) -> dict[str, Any]:
    """Return the Philly demo's experiment config (a dict for :func:`parse_config`).

    All pools with at least 20 jobs in the replay share, quotas from load (SIA
    6.1, target loads U[0.6, 1.1] drawn with ``seed``). The predictors train
    on the default split (days 23-44, validation 44-58) and days 58-72 are
    replayed, the first 2 a warm-up. ``small`` trains on days 47-58 (7 + 4)
    and replays days 58-61 (half a day of warm-up): a quick run for tests.
    """
    train, val = PHILLY_TRAIN_DAYS, PHILLY_VAL_DAYS
    days, warm = PHILLY_REPLAY_DAYS, PHILLY_REPLAY_WARMUP
    if small:
        train, val = SMALL_PHILLY["train_days"], SMALL_PHILLY["val_days"]
        days, warm = SMALL_PHILLY["replay_days"], SMALL_PHILLY["replay_warmup"]
    start = PHILLY_REPLAY_START
    return {
        "name": "demo",
        "seed": seed,
        "trace": {"path": PHILLY_TRACE, "clean": True},
        "replay": {"start_day": start, "end_day": start + days},
        "warmup_days": warm,
        "experiments": 1,
        "pools_per_experiment": "all",
        "min_jobs_per_pool": 20,
        "quotas": "from_load",
        "load_range": [0.6, 1.1],
        "policies": list(policies),
        "predictors": {"train": "on_the_fly", "alias": "demo", "warmup_days": PHILLY_WARMUP_DAYS,
                       "train_days": train, "val_days": val},
    }


def demo_config(days: float = DEMO_DAYS, seed: int = 0,
                policies: tuple[str, ...] = SYNTHETIC_POLICIES) -> dict[str, Any]:
    """Return the synthetic demo's experiment config (a dict for :func:`parse_config`).

    The synthetic base workload over ``days`` days: the predictors train on
    the first 8 (1 day warm-up, 5 days training, 2 days validation; shorter
    periods leave the 12-hour window with arrivals in every training row),
    and days 8 .. ``days`` are replayed with a warm-up of a quarter of the
    replay, at most 1 day. ``days`` = 12 gives a 4-day replay.
    """
    start = TRAIN_WARMUP_DAYS + TRAIN_DAYS + VAL_DAYS
    if days < start + 1:
        raise ConfigError(f"--days must be at least {start + 1:g} ({start:g} days to train and "
                          f"validate the predictors, then at least 1 to replay), not {days:g}")
    return {
        "name": "demo_synthetic",
        "seed": seed,
        "trace": {"synthetic": "base", "days": days},
        "replay": {"start_day": start, "end_day": days},
        "warmup_days": min(1.0, (days - start) / 4.0),
        "experiments": 1,
        "pools_per_experiment": "all",
        "quotas": "recorded",
        "policies": list(policies),
        "predictors": {"train": "on_the_fly", "alias": "demo", "warmup_days": TRAIN_WARMUP_DAYS,
                       "train_days": TRAIN_DAYS, "val_days": VAL_DAYS,
                       "duration_target_under": DURATION_TARGET_UNDER},
    }


def available_policies(names: tuple[str, ...] = DEMO_POLICIES) -> tuple[list[str], list[str]]:
    """Return (policies that can be built now, policies skipped with the reason)."""
    from sia.scheduler.registry import policy_class

    ok, skipped = [], []
    for name in names:
        try:
            policy_class(name)
        except ConfigError as exc:
            skipped.append(f"{name} ({str(exc).split(';')[0]})")
        else:
            ok.append(name)
    return ok, skipped


class _Stages:
    """Numbered progress lines with the time since the demo started (no long silences)."""

    def __init__(self, console: Console, total: int):
        self.console, self.total, self.n, self.t0 = console, total, 0, time.perf_counter()

    def __call__(self, msg: str) -> None:
        """Print ``msg`` as the next stage line."""
        self.n += 1
        self.console.print(f"[bold cyan][{self.n}/{self.total}][/] {msg} "
                           f"[dim]({time.perf_counter() - self.t0:.0f} s)[/]",
                           soft_wrap=True, highlight=False)

    def say(self, msg: str) -> None:
        """Print ``msg`` as a detail line of the current stage."""
        self.console.print(f"      {msg}", soft_wrap=True, highlight=False)


#: Lines MLflow prints on stderr while models are registered: chatter, not news.
_CHATTER = ("Successfully registered model", "Created version", "color_warning(",
            "INFO mlflow.store.db.utils", "Add type hints to the `predict` method")


def _quiet_mlflow() -> None:
    """Keep MLflow's logging below warnings out of the demo's output."""
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


@contextlib.contextmanager
def _without_chatter():
    """Capture stderr while in the block; re-print every line but MLflow's chatter."""
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            yield
    finally:
        keep = [line for line in buf.getvalue().splitlines()
                if line.strip() and not any(c in line for c in _CHATTER)]
        if keep:
            print("\n".join(keep), file=sys.stderr)


def run_demo(out: Path, *, synthetic: bool = False, days: float = DEMO_DAYS, small: bool = False,
             workers: int | None = 1, seed: int = 0, console: Console | None = None) -> Any:
    """Run the demo into ``out``; return the :class:`~sia.pipelines.studies.evaluate.SweepResult`.

    On the embedded Philly trace unless ``synthetic`` (then ``days`` days of
    the synthetic base workload; ``small`` means :data:`SMALL_DAYS`).
    """
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    _quiet_mlflow()
    from sia.pipelines.executors import make_executor
    from sia.pipelines.studies import evaluate as ev

    console = console or wide_console()
    stage = _Stages(console, 4)
    ok, skipped = available_policies(SYNTHETIC_POLICIES if synthetic else DEMO_POLICIES)
    if synthetic:
        days = SMALL_DAYS if small else days
        raw = demo_config(days, seed, tuple(ok))
        what = f"the synthetic SIA base workload, {days:g} days, seed {seed}"
    else:
        raw = philly_demo_config(seed, tuple(ok), small=small)
        what = ("the real Philly trace shipped in the package (builtin:philly; Microsoft, "
                "CC-BY-4.0)")
    cfg = parse_config(raw, source="sia demo")
    executor = make_executor(workers)
    console.print(f"[bold]sia demo[/]: {what} -> {out} ({executor.description})",
                  soft_wrap=True, highlight=False)
    if skipped:
        console.print(f"[yellow]skipped (not available yet): {', '.join(skipped)}[/]")
    p = cfg.predictors
    stage(f"reading {cfg.trace.path or 'the synthetic workload'}")
    try:
        wl = ev.load_trace(cfg)
        rep = wl.report
        dropped = ", ".join(f"{k} {v}" for k, v in rep.dropped.items()) or "none"
        stage.say(f"{rep.rows_read:,} rows, {rep.rows_kept:,} jobs kept in {rep.pools} pools; "
                  f"dropped and counted: {dropped}")
        val_start = cfg.replay_start_day - p.val_days
        stage(f"{ev.training_days_text(val_start - p.train_days, p.train_days, p.val_days)} "
              f"(the predictors; MLflow, registered under the alias {p.alias})")
        out.mkdir(parents=True, exist_ok=True)
        from sia.pipelines.tracking import PREDICTOR_EXPERIMENT, setup_tracking

        with _without_chatter():
            setup_tracking(experiment=PREDICTOR_EXPERIMENT)
            trained = ev.train_on_the_fly(cfg, wl, out, stage.say)
        stage.say(f"MLflow run {trained['run_id']} (experiment sia-predictors)")
        stage(f"replaying days {cfg.replay_start_day:g}-{cfg.replay_end_day:g} "
              f"({cfg.warmup_days:g} days of warm-up) under {', '.join(ok)}")

        def say(msg: str) -> None:  # the sweep reuses the training of stage 2: not news
            if not msg.startswith("predictors: reusing"):
                stage.say(msg)

        result = ev.run_sweep(cfg, out, executor, progress=True, say=say)
    finally:
        executor.close()
    stage("results")
    report(result, console, "sia demo")
    trained = (result.predictors or {}).get("trained_run")
    if trained:
        console.print(f"predictors: MLflow run {trained} (experiment sia-predictors, alias demo)")
    console.print(f"plots: {out}/plots/, {out}/exp-000/plots/ and the predictors' "
                  f"{out}/predictors/precision_recall.png (WillJobsArrive's precision-recall "
                  "curves with persistence)", soft_wrap=True, highlight=False)
    console.print(f"demo done in {time.perf_counter() - stage.t0:.0f} s", highlight=False)
    return result


def register(app: typer.Typer) -> None:
    """Add the `demo` command to ``app``."""

    @app.command("demo", help=__doc__)
    def demo(
        out: Annotated[Path, typer.Option("--out", help="Results folder.")] = Path("out/demo"),
        synthetic: Annotated[bool, typer.Option(
            "--synthetic", help="Run on the synthetic SIA base workload instead of Philly.")
        ] = False,
        days: Annotated[float | None, typer.Option(
            "--days", help=f"With --synthetic: days of workload (default {DEMO_DAYS:g}); the "
                           "first 8 train the predictors, the rest is replayed.",
            show_default=False)] = None,
        small: Annotated[bool, typer.Option(
            "--small", help="A quick run (for tests): Philly trains on 11 days and replays 3; "
                            f"--synthetic uses {SMALL_DAYS:g} days.")] = False,
        workers: Annotated[int, typer.Option(
            "--workers", help="Local worker processes for the replays (1: in-process).")] = 1,
        seed: Annotated[int, typer.Option(
            "--seed", help="Seed of the target loads (Philly) or the synthetic workload.")] = 0,
    ) -> None:
        if days is not None and not synthetic:
            raise ConfigError("--days applies to --synthetic only (the Philly demo replays "
                              "days 58-72 of the trace)")
        from sia.pipelines.output import FolderLock, prepare_dir

        out = prepare_dir(out)
        with FolderLock(out):  # a second command on this --out stops at once
            run_demo(out, synthetic=synthetic, days=DEMO_DAYS if days is None else days,
                     small=small, workers=workers, seed=seed)
