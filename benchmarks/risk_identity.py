"""Check that a change to the risk budget's bookkeeping keeps every SIA decision identical.

Replays the whole Philly trace (as ``bench_sia.py`` does: quotas from load,
seed 0) under learned SIA with the risk budget and writes the replay's result
table (each job's start and end time, whether it ran on loan), the policy's
counters and, with the calibrated arrival side, the calibration's report (thresholds, load
offsets, counts, realized precision and recall per pool and window). Run it once with the reference checkout's interpreter and once with
the changed one, on the same trained predictors (``--fc``: a pickle, written
on the first run), then compare:

    /work/main/.venv/bin/python benchmarks/risk_identity.py --fc /tmp/fc.pkl --out /tmp/main
    .venv/bin/python benchmarks/risk_identity.py --fc /tmp/fc.pkl --out /tmp/new --compare /tmp/main

The budget is ``--risk`` (default 0.1) met with SIA's own rule as ``--risk-mode`` (default
SIA's, ``veto``); SIA's default budget is ``--risk 3``.

It also prints the budget's bookkeeping (its methods' CPU, timed as ``bench_sia.py`` times
them) as a share of the CPU in the policy, raw and net of the timer's own cost. The net
figure replays the trace a second time with each timer around an empty body (the two clock
reads alone) at the same call sites, which must make the same decisions and calls: the
timer's cost as the replay pays it (cold, after the policy's own work), subtracted from the
bookkeeping and from the policy's CPU, per method too. The warm loop's figure
(``timer_overhead``, the fifth cut's method) is printed beside it: it under-subtracts.
``--no-calibrate`` skips the second replay. Run this checkout's script with another
checkout's interpreter to measure that checkout the same way (``bench_sia`` is imported from
this script's folder, ``sia`` from the interpreter's install; a budget method the other
checkout lacks is not timed).

Since the budget bounds the owners' arrivals too (``risk_arrivals: calibrated``, the default),
its arrival side, the per-pool calibration inside the forecaster (``load_bound``,
``arrivals``), is timed the same way and reported beside the duration side. Measured
2026-11-29 (session 23, one run on a quiet machine, risk 0.1): duration side 6.32 s net,
arrival side 6.96 s net, of 69.8 s in policy: **19.0%** for the budget's two sides (9.1% for
the duration side alone, the figure the earlier cuts were measured by); the issue's < 10% is
met by neither the whole budget nor, before the calibration grew the denominator, by the
duration side (10.8% at 4346981).

Measured 2026-11-29 (riskfast6, the arrival side cut; every decision kept): the calibration
keeps all pools' arrivals in one timeline with each pool's cumulative GPUs per grid point as
one row (:mod:`sia.models.calibration`, "Bookkeeping"): a grid record scores only the pools
whose row grew over its window, a tick's forecast gets its labels from two rows, the rings'
order statistics come from rank tables. main (a6ca8a1's policy and calibration; main moved to
8cffcf3 during the runs, no change to the policy) and the branch run concurrently, pairwise, on
the 2 shared cores (``/tmp/riskfast6/pair.sh N``, N = 1, 2, 3: each checkout's own script and
interpreter, ``--compare`` against the reference written first by main at a6ca8a1). Net of the
timer as this script measures it (CPU s):

| run | main: arrival side | durations | in policy | **both** | branch: arrival side | durations | in policy | **both** |
|---|---|---|---|---|---|---|---|---|
| 1 | 7.33 | 6.42 | 71.11 | 19.3% | 4.49 | 6.41 | 68.05 | 16.0% |
| 2 | 9.27 | 7.71 | 83.11 | 20.4% | 5.57 | 7.57 | 77.91 | 16.9% |
| 3 | 7.97 | 6.84 | 74.08 | 20.0% | 5.34 | 7.12 | 72.49 | 17.2% |
| median | 7.97 | 6.84 | 74.08 | **20.0%** | 5.34 | 7.12 | 72.49 | **16.9%** |

Every run's result table (82,182 rows) and counters identical to the reference, every
calibration replay identical to its timed one. The arrival side is a third cheaper in context
(median 7.97 -> 5.34 s; 71,128 calls, 75 us each instead of 112); the calls recorded from the
whole replay and replayed alone on the calibration (``/tmp/riskfast6/record.py``,
``replay.py``; every answer and the final report identical) take 2.3 s against main's 4.4 s
(min of 3). The issue's < 10% is NOT met: the two sides are 16.9%, and the duration side alone
is 9.4-9.8% (unchanged code). What is left on the arrival side is its per-record work: about
290,000 load scores and 289,000 positives over the replay, each moving a sorted ring of 288
values and its bound or threshold, and two calls per tick that cost about twice as much in the
replay as alone (cold caches after the policy's own work).

Measured 2026-11-29 (riskfast7, the duration side's refresh made lazier; every decision kept;
the issue's < 10% is NOT met). Profile first (cProfile of the whole replay, and of the
budget's 440,977 calls recorded from it and replayed alone, ``/tmp/riskfast7/brec.py``,
``brep.py``: every answer and counter identical): ``allowed`` runs at 189,277 of the 190,318
decisions and its rows are read at 94% of them (178,765; 91% of the pools it scans), so a
memo or a lazy table per decision saves nothing: ``allowed`` already returns its last answer
when nothing moved (120,614 calls), and the rest is one rescan per 300 s tick (new loads, so a
new cost, and a new prior) plus one per retaken pool. Per tick: the loads (``RecentUse``), the
prior and its floor, the stale pools' snapshots (about 270,000 pool refreshes in all) and the
rescan. The arrival side gets one record per 5-minute slot (each of its 35,564 forecasts is at
a new slot, so no call finds nothing changed) and its cost is the records' ring updates.
Cut: a retake no longer resets each moved window's quantiles; a window's quantiles carry the
stamp (outcomes seen, prior version) they were computed for and are forgotten when first read
under another (``RiskBudget._valid_raw``: both counters only grow, so an equal stamp means the
same parameters); the refresh times are a FIFO (the clock never goes back; an earlier time, as
after ``bounds()`` at +inf, is inserted in order) instead of a heap; the due pools are
intersected with the candidates only when they meet. Tried and dropped (counted on the recorded
calls): deciding the floor's cdf from the points already computed (the floor's quantile grows
with its first parameter and falls with its second, so a failing point at a larger threshold
decides): per floor only 11% of its ``betainc`` calls are decided, across floors 45% with a
frontier of 128 points, whose search in Python costs about what it saves.
main (dce38d9) and the branch (f831f64) run concurrently, pairwise (``/tmp/riskfast7/pair.sh
N``, N = 1, 2, 3: each checkout's own script and interpreter, ``--compare`` against the
reference ``/tmp/riskfast7/main`` written first by main), on a machine loaded by other
engineers' jobs (load average 4-7: CPU times about 1.5x the quiet ones above, and the arrival
side grows most). Net of the timer as this script measures it (CPU s):

| run | main: arrival side | durations | in policy | **both** | branch: arrival side | durations | in policy | **both** |
|---|---|---|---|---|---|---|---|---|
| 1 | 9.62 | 12.23 | 117.36 | 18.6% | 9.56 | 11.68 | 117.03 | 18.2% |
| 2 | 8.27 | 10.41 | 99.76 | 18.7% | 8.15 | 9.96 | 98.00 | 18.5% |
| 3 | 8.95 | 10.95 | 105.52 | 18.9% | 8.87 | 10.55 | 104.60 | 18.6% |
| median | 8.95 | 10.95 | 105.52 | **18.7%** | 8.87 | 10.55 | 104.60 | **18.5%** |

Every run's result table (82,182 rows) and counters identical to the reference, every
calibration replay identical to its timed one; Graham's training days (``sia evaluate
experiments/graham_training_weeks.yaml`` at budgets 0.1 and 1, main's and the branch's
interpreters) give identical per-job starts and ends. The duration side alone (over this
table's denominator): 10.4% in all three runs against 10.0-10.2%; ``allowed`` 8.25 / 6.99 /
7.25 s net against 7.69 / 6.47 / 6.83 s (-7%), ``resolve``, ``classify_rows`` and ``started``
unchanged. Where the time goes now, and why the rest does not yield to caching: every ``allowed`` call that is not a cached answer
follows a real change (a tick or a retaken pool); ``resolve`` does one Python update per
outcome (246,546) whose order the floats depend on; ``classify_rows`` one per new job; the
arrival side one sorted-ring update per load score (~290,000) and per positive (~289,000), the
records being new at every forecast. Under 10% needs that per-event work in compiled code, or
fewer events (a coarser refresh or prior, which would change decisions and is not
bookkeeping-only).

Measured 2026-11-30 (session 33: both sides' per-event work compiled with numba, every decision
kept). The arrival side's rings of recent values are one :class:`~sia.models.rings.RingBank`
(numpy arrays, a compiled push that keeps each ring sorted), the calibration's grid rows one
array built by a compiled fill, and a window's load scores and an arrival record's positives
one compiled call each (:mod:`sia.models.rings`); the duration side's recent loads
(:class:`~sia.scheduler.policies.sia.recent_use.RecentUse`, the two sweeps per 300 s tick)
are compiled too. The same float operations in the same order: the result tables (82,182 rows),
the counters and the calibration's report are identical to a reference of main at 2f7556a in
every run below (risk 3, veto) and at ``--risk 0.1 --risk-mode replace`` (against session 30's
reference). First the arrival side alone: the calls of one replay recorded and replayed alone
(``/tmp/s33/calrec.py``, ``calrep.py``: every report identical), min of three: 3.76 s on main,
1.70 s compiled. Then three alternating pairs of whole replays (``/tmp/s33/pairs.sh``: main
through ``PYTHONPATH`` links to a worktree of 2f7556a, this checkout's script for both), on the
idle 2-core machine (1-minute load 0.7-1.1 at the starts); net of the timer (CPU s):

| run | main: arrival side | durations | in policy | **both** | compiled: arrival side | durations | in policy | **both** |
|---|---|---|---|---|---|---|---|---|
| 1 | 7.36 | 10.36 | 101.09 | 17.6% | 3.85 | 9.60 | 90.46 | 14.9% |
| 2 | 7.06 | 9.98 | 99.30 | 17.2% | 3.71 | 9.47 | 87.58 | 15.1% |
| 3 | 4.88 | 7.20 | 74.22 | 16.3% | 3.45 | 8.47 | 83.03 | 14.4% |
| median | 7.06 | 9.98 | 99.30 | **17.2%** | 3.71 | 9.47 | 87.58 | **14.9%** |

(Main's third run was a quarter faster than any other run of the same code this session:
the machine's speed varies between runs; the ratios hold better than the seconds.) The
arrival side is half what it was (7.06 -> 3.71 s), and the duration side 0.5 s less
(``started`` 0.53 -> 0.43 s, ``resolve`` 1.52 -> 1.38 s, ``allowed`` 6.98 -> 6.77 s in the
medians' runs), but the policy's CPU fell more than the bookkeeping did (99.3 -> 87.6 s), so
the duration side's *share* rose: 10.1% -> 10.6% (its seconds fell). The cuts explain about
4 s of the 12; garbage collection is not the rest (one replay of each with the collector's
time counted, ``/tmp/s33/gcm.py``, run side by side: 0.46 s against 0.18 s, 97.2 s against
94.8 s of replay CPU), so the rest is the machine's variance (main alone ran 74-101 s). Timed replays (wall)
104.1 s -> 91.7 s (medians). **The issue's < 10% is NOT met**: 14.9% for both sides, and the
duration side alone is above 10% again in these pairs (it was 9.8-9.9% in session 32's). A
first, arrival-only pass (the same pairs, the calibration compiled, RecentUse not yet):
arrival side 6.80 -> 4.00 s, both sides 17.2% -> 14.6% (medians). Tried and dropped: one
compiled call per forecast for all windows' records (batched), 1.9x slower alone than one
call per window (the arrays to build for a batch cost more than the calls they save).
Then (a sampling profile of the replay, py-spy at 200 Hz) the new RecentUse spent most of its
time turning each tick's few new starts into sorted arrays (about 20 numpy calls); now they go
in as one array and are sorted and pushed in the compiled sweep. One more pair after that
change (main at 2f7556a, then the change; net of the timer): durations 9.82 -> 8.99 s
(``allowed`` 6.85 -> 6.28, ``started`` 0.52 -> 0.45, ``resolve`` 1.51 -> 1.37 s), arrival
side 7.06 -> 3.74 s, policy 99.15 -> 90.62 s; both sides **17.0% -> 14.1%**, the duration
side 9.9% in both. The same sampling profile, without any timer, puts the bookkeeping at about
11% of the policy's samples (``allowed`` 6.5%, the calibration 3.5%, ``resolve`` 0.6%,
``classify_rows`` 0.3%, ``started`` 0.1%): lower than the timers' in-context figure, and over
10% either way.

Measured 2026-11-30 (session 34; every decision kept). Two more compiled pieces of the duration
side: the loads' refresh (``_take_loads``: each pool's cost of a miss and the pools by load in
one pass over the loads' array) and the window certificates (``_window_certificate``, calling
scipy's scalar ``betainc`` for doubles through its ``cython_special`` symbol). The duration
side's calls of one replay recorded and replayed alone (``/tmp/s34/brec.py``, ``brep.py``:
every answer identical), eight alternating pairs of whole processes: **7.17 -> 5.97 s**
(medians; the pairs' ratio 0.86). In context the cut does not show: two alternating pairs of
this script (main at 3a3003e through ``PYTHONPATH`` links, then the change; main's first run
was spoiled by the rings' kernels compiling inside it) gave both sides 14.0% and 14.0% (main)
against 14.0% and 14.3% (the change), the duration side 9.8% against 9.9% and 10.1%
(``allowed`` 5.90 s against 5.61 and 7.07 s, the last in a slow phase of the machine: policy
100.3 s against 82-87). Every table, counter and calibration report identical. Tried and
dropped: the outcome counts as arrays with ``resolve`` and ``started``'s event heap compiled
(the same floats, every recorded answer identical): alone **slower**, 5.09 -> 6.88 s, because
``resolve`` handles about 2.5 outcomes per call, so the kernel's dispatch with 25 arguments and
the numpy reads and writes that the rest of the budget's Python then makes on the arrays
(snapshots, priors, certificates, the classification) cost more than the Python loop they
replaced. The budget's Python is now a sum of small per-call costs (about 440,000 calls per
replay), which only compiling the whole of ``allowed`` and its state would remove.
``bookkeeping_share.py`` measures what the bookkeeping adds to the replay without timers.

Measured 2026-12-01 (session 35; every decision kept). That rewrite: the budget's state in
three buffers (``_layout``), ``allowed`` (snapshots, per-window certificates, scans),
``resolve`` (the event heap and the counts), ``started``'s pushes and the prior's update
compiled; the arrival side's per-forecast loops fused (merged from ``calib-speed``). Every
answer of the recorded calls identical (443,168 of the duration side; 63,562 of the
calibration), and this script's checks: ``--risk 3`` as a veto (through
``bookkeeping_share.py``, eight replays) and ``--risk 0.1 --risk-mode replace --compare
/tmp/wtspeed/ref01`` (tables, counters and report identical). That last run timed, net of the
timer: the duration side 9.14 s of 93.52 s in the policy (9.8%), both sides 13.1% (``allowed``
5.18 s at 27 us a call, ``started`` 1.49 s at 20 us, ``resolve`` 1.33 s, ``classify_rows``
1.13 s, the calibration 3.09 s). Alone, the duration side's recorded calls replay in 5.2-5.7 s
against main's 6.1-7.3 s. In context a kernel's call costs about what the Python it replaced
did: ``started`` (one call pushing a decision's events) is slower than the ``heapq`` pushes it
replaced. The sampling profile puts the bookkeeping at 13.5% -> 11.3% of the replay's samples
(``bookkeeping_share.py``'s docstring): what is left is the number of calls (about 470,000 per
replay).
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
from pathlib import Path

import polars as pl
from bench_sia import PHILLY, Clocked, TimedBudget, learned_forecaster, timer_overhead
from sia.data.quotas import quotas_from_load
from sia.data.readers import read_philly
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.policies.sia.risk import DEFAULT_RISK_MODE


def load_forecaster(path: Path, jobs: pl.DataFrame, pools: pl.DataFrame):
    """Return the learned forecaster pickled at ``path``, training and pickling it if absent."""
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    fc, secs = learned_forecaster(jobs, pools)
    print(f"trained the learned predictors in {secs:.1f} s; pickled to {path}")
    with path.open("wb") as f:
        pickle.dump(fc, f)
    return fc


def compare(new: Path, ref: Path) -> bool:
    """Print and return whether the two outputs' result tables and counters are identical."""
    a, b = pl.read_parquet(new / "result.parquet"), pl.read_parquet(ref / "result.parquet")
    same = a.equals(b)
    print(f"result tables ({a.height} rows): {'identical' if same else 'DIFFERENT'}")
    if not same and a.shape == b.shape:
        for c in a.columns:
            diff = int((a[c] != b[c]).sum())
            if diff:
                print(f"  column {c}: {diff} rows differ")
    sa = json.loads((new / "summary.json").read_text())
    sb = json.loads((ref / "summary.json").read_text())
    keys = sorted(set(sa) | set(sb))
    diff_keys = [k for k in keys if sa.get(k) != sb.get(k)]
    print(f"policy counters: {'identical' if not diff_keys else 'DIFFERENT: ' + str(diff_keys)}")
    cal_same = True
    if (ref / "calibration.json").exists() and (new / "calibration.json").exists():
        cal_same = (json.loads((new / "calibration.json").read_text())
                    == json.loads((ref / "calibration.json").read_text()))
        print(f"arrival side's calibration report: {'identical' if cal_same else 'DIFFERENT'}")
    return same and not diff_keys and cal_same


def replay(jobs: pl.DataFrame, pools: pl.DataFrame, fc, risk: float, empty: bool = False,
           mode: str = DEFAULT_RISK_MODE):
    """Replay under learned SIA with the risk budget (``mode``: its ``risk_mode``), its methods
    timed (``empty``: the timer around an empty body, see :class:`TimedBudget`); return
    (result, policy, budget timer, policy CPU s, wall s)."""
    pol = SiaPolicy(fc, name="sia-learned/risk", risk=risk, risk_mode=mode)
    budget = TimedBudget(pol.risk_budget, empty=empty)  # timed as bench_sia.py times it
    # the budget's arrival side (risk_arrivals "calibrated", the default): the per-pool
    # calibration inside the forecaster, timed the same way
    cal = getattr(fc, "calibration", None) if pol._arrival_side == "calibrate" else None
    pol.arrival_clock = (None if cal is None
                         else TimedBudget(cal, ("load_bound", "arrivals"), empty=empty))
    clocked = Clocked(pol)
    clock = time.perf_counter()
    res = simulate(jobs, pools, clocked)
    return res, pol, budget, sum(clocked.cpu), time.perf_counter() - clock


def report_arrivals(pol, empty_pol, budget: TimedBudget, empty: TimedBudget, cpu: float) -> None:
    """Print the arrival side's calibration CPU, net of the timer (measured on the empty-body
    replay), and the whole budget's share of the policy's CPU."""
    arr, arr_e = pol.arrival_clock, empty_pol.arrival_clock
    if arr is None or arr_e is None:
        return
    net_a = arr.cpu - arr_e.cpu
    net_b = budget.cpu - empty.cpu
    den = cpu - empty.cpu - arr_e.cpu
    print(f"  the arrival side's calibration: {net_a:.2f} s net in {arr.calls} calls; the "
          f"budget's two sides together: {net_a + net_b:.2f} s of {den:.2f} s in policy: "
          f"NET {100 * (net_a + net_b) / max(den, 1e-9):.1f}% (durations alone "
          f"{100 * net_b / max(den, 1e-9):.1f}%)")


def report(budget: TimedBudget, cpu: float, empty: TimedBudget | None, warm: float) -> None:
    """Print the bookkeeping's share of the policy's CPU, raw and net of the timer's cost."""
    print(f"in policy {cpu:.2f} s CPU, of which the budget's bookkeeping {budget.cpu:.2f} s "
          f"({100 * budget.cpu / max(cpu, 1e-9):.1f}%) in {budget.calls} timed calls")
    net = budget.net(warm)
    print(f"  less the timer's warm-loop cost ({warm * 1e6:.2f} us x {budget.calls} calls, "
          f"the fifth cut's method): {net:.2f} s ({100 * net / max(cpu, 1e-9):.1f}%)")
    if empty is None:
        return
    per = empty.cpu / max(empty.calls, 1)
    net = budget.cpu - empty.cpu  # the same calls (identical replays): checked below
    den = cpu - empty.cpu
    print(f"  less the timer's in-context cost ({per * 1e6:.2f} us x {empty.calls} calls, "
          f"measured on an empty body at the same call sites): {net:.2f} s of "
          f"{den:.2f} s in policy: NET {100 * net / max(den, 1e-9):.1f}%")
    for name, (c, n) in budget.per_method.items():
        ce, ne = empty.per_method[name]
        if n:
            print(f"    {name:9s} {n:8d} calls  raw {c:6.2f} s  net {c - ce:6.2f} s "
                  f"({1e6 * (c - ce) / n:6.2f} us/call; timer {1e6 * ce / max(ne, 1):.2f} us)")


def main() -> None:
    """Replay, write the outputs and optionally compare them with a reference run's."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fc", type=Path, required=True, help="pickled learned forecaster")
    ap.add_argument("--out", type=Path, required=True, help="folder for the outputs")
    ap.add_argument("--risk", type=float, default=0.1)
    ap.add_argument("--risk-mode", default=DEFAULT_RISK_MODE, choices=("veto", "replace"),
                    help="how the budget meets SIA's own rule (SiaPolicy's risk_mode)")
    ap.add_argument("--compare", type=Path, default=None, help="a reference run's --out")
    ap.add_argument("--no-calibrate", action="store_true", help="skip the second replay that "
                    "measures the timer's in-context cost (the net figure is then the warm loop's)")
    args = ap.parse_args()
    jobs, _ = read_philly(PHILLY, on_bad_rows="drop")
    pools = quotas_from_load(jobs, seed=0).select("pool", "quota_gpus")
    fc = load_forecaster(args.fc, jobs, pools)
    res, pol, budget, cpu, wall = replay(jobs, pools, fc, args.risk, mode=args.risk_mode)
    print(f"replay: {wall:.1f} s")
    empty = None
    if not args.no_calibrate:  # the same replay, the timer around an empty body
        res_e, pol_e, empty, cpu_e, wall_e = replay(jobs, pools, fc, args.risk, empty=True,
                                                     mode=args.risk_mode)
        same = res_e.equals(res) and pol_e.summary() == pol.summary()
        print(f"calibration replay: {wall_e:.1f} s, in policy {cpu_e:.2f} s CPU; "
              f"{'identical' if same else 'DIFFERENT'} decisions, {empty.calls} calls")
        if not same or empty.calls != budget.calls:
            raise SystemExit("the calibration replay differs from the timed one")
    report(budget, cpu, empty, timer_overhead())
    if empty is not None:
        report_arrivals(pol, pol_e, budget, empty, cpu)
    args.out.mkdir(parents=True, exist_ok=True)
    res.write_parquet(args.out / "result.parquet")
    summary = {k: v for k, v in pol.summary().items()}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    print(json.dumps(summary, sort_keys=True))
    cal = getattr(fc, "calibration", None)
    if cal is not None and getattr(cal, "pool_names", None):  # thresholds, bounds, counts
        (args.out / "calibration.json").write_text(
            json.dumps(cal.report(cal.pool_names), indent=1, sort_keys=True))
    if args.compare is not None and not compare(args.out, args.compare):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
