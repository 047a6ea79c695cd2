"""SIA_VC replay cost on prefixes of the Philly trace, before and after, and its slowdowns vs FCFS.

Reads the Philly per-VC trace (bad rows dropped), derives quotas from load on
the whole trace (SIA 6.1, seed 0), keeps the first N jobs by submit time and
replays FCFS and SIA_VC on them. Prints per prefix and code version: wall and
CPU seconds of the SIA_VC replay (after a small warm-up replay, so numba's
compilation is not counted), decisions, guards (early starts tried, counted as
the paper's algorithm would try them) and how many failed, opportunistic
starts, the jobs ending > 1 s later than under FCFS (Theorem 1: must be 0),
and whether the schedule is identical to the first version's.

``--before REV`` also runs the same measurement with the code of git revision
REV (extracted with ``git archive`` into a temporary directory and run in a
child process that imports it instead of the working tree), in the same run
on the same machine; ``--order`` says which goes first.

    .venv/bin/python benchmarks/bench_siavc.py [--prefixes 1000,5000,20000] [--before main]

The whole trace is ``--prefixes 82182`` (goal: under 60 s).
Measured 2026-11-22 (session 3), CPU s by prefix: 1,000: 0.55; 5,000: 1.8;
10,000: 5.1; 20,000: 15.4; 40,000: 42.2; all 82,182: 90.7, with 0 jobs slowed
(session 2: 0.6 / 2.5 / 6.9 / 21.3 / 58 / 126; session 1: over 600 for all).
2026-11-24, same code, machine shared with four other engineers: all 82,182:
106.8 s CPU (132 s wall), 0 slowed; on average 31.7k merged clock entries per
pass, of which ~900 pending and ~8.9k before the horizon.
2026-11-24 (session 4), same code, quieter machine: all 82,182: 98.1 s CPU,
0 slowed. Profile of the whole trace (cProfile under load, CPU s of ~118): merge upkeep
~31 (span replacement 17.2, the span's end-order argsort 10.3, the rest 3),
the compiled pass 17.5, virtual-clock runs 14.3 (+ ~10 of Python around them),
the rest Python glue spread over decide / _pass / _try_charge. Three tries that
kept the schedules identical but did NOT pay (CPU medians, new/old, of runs
paired with the code above; not kept): (a) the merge limited to pending jobs
and entries before a bound a quarter to half way from the horizon to
horizon + D, rebuilt when the horizon passes it or it lies past horizon + D:
entries per pass 31.7k -> 12.8k but 11.4k rebuilds; with (b), 1.22x (slower)
on 40,000 jobs; without the shrinking rebuild the bound stays weeks ahead and
holds everything; (b) the clock kernel reading the pool's future jobs in place
instead of copying them (1.58G job ids copied over the trace) and (c) a
stable (run-aware) argsort for the span's end order: (b) 1.00x on 20,000
(3 pairs, (c) entering part-way); (b) + (c) 1.00x on 40,000 (3 pairs) and
1.01x on 82,182 (this script, one run each). The next step has to remove the
merge's per-update linear work and the end order itself (e.g. per-pool
occupancy profiles from the clock kernel, which already pops ends in order),
not trim them.
2026-11-24 (session 5), issue 18 item 3, two schedule-preserving changes: (1) a guard's
re-run is cached cut to what a refresh would hold (pending jobs, then future ones up to
the first VST past horizon + D; counted on main's clocks, a pass's merge would hold
~17.4k entries on average instead of 31.7k), and the pass
stops looking for candidates once it has met every pending job; (2) the merge's end
order covers only entries with a VST before a bound 6 h past the horizon (moved on when
passed, pulled back when over a day ahead): of the changed spans' 268M entries over the
trace only 143M (+28M when the bound moves) are sorted by end. Whole process on the
whole trace (replay plus imports and trace reading), 3 runs each, alternated with
main's: CPU median 86.0 s vs 97.1 s for main, paired ratio median 0.895 (0.83-0.92).
This script, one run (--prefixes 82182 --before main --order after-first, quiet):

       jobs code     wall s    cpu s decisions    guards    failed opport. slowed same plan
      82182 after     81.30    81.28    154340  18821194  37508603   34362      0       yes
      82182 before    99.06    99.03    154340  18821194  37508603   34362      0       yes

Not under 60 s. Where the rest goes (whole trace, final code, CPU s of 89.1 with
per-call timers): guards that re-run clocks 26.1 (the clock runs, with the refreshes',
15.1), merge upkeep 22.0 (span replacement 10.2, the spans' merge and end sort 6.6, the
rest Python), the compiled pass 15.1, guard verdicts 4.2, clock refreshes 2.1, and ~20
of Python glue in decide / _pass and the simulator. A pass and the merge still cost in
proportion to the entries before the horizon (~9k) and to a changed span (~3.9k),
because a guard's early start re-times its pool's whole clock. Next step (not tried):
keep only the entries before a bound in the merge and read the pending jobs past it
straight from the per-pool clocks (they can only be candidates there, and their
MaxReservation is read at now + d, which does not depend on their VST), so that a
shifted backlog costs no merge update at all.
2026-11-24/25 (session 6), issue 18 item 3, schedule-preserving changes: (1) that next
step: the merge holds only the entries before a bound 6 h past the horizon (moved as
before), and the pass takes the pending jobs past it from the per-pool clocks as a tail
of candidates; counted on the whole trace, a pass reads 9.05k merged entries instead of
20.3k (~250 pending jobs in the tail), and a changed span's in-bound part is 2.06k of its
3.87k entries; (2) the pass: past the ~3 entries at or before now the level at now is
fixed, so the visit to the horizon only looks for pending entries, and the reserved-GPU
prefix sums are written only as far as the candidates read the plan (5.9k of 8.9k
entries); (3) Python glue: the running jobs stay arrays, only the ~4 of ~650 candidates
per pass the walk stops at are read out, a guard's pending jobs and its reference come off
the cached clock without list conversions or np.delete, refreshes and resumed clocks read
a pool's future only up to the job that stops them, and the clock kernel is called
without fcfs_clock_against's argument handling. Tried, not kept: (a) the kernel's arrays
starting at 1,024 entries and doubling (not sized for the whole order): an early stop on a
25k-job order 40 -> 9 us, but a long run ~20-35% dearer per job (40k jobs: 2.4-2.8 ms vs
1.9-2.0 ms), and whole Philly no faster; (b) the merge bound 15 min, 1 h or 24 h ahead
instead of 6 h: no difference beyond the noise on 40,000 jobs.
The machine was heavily loaded throughout (another engineer's two processes at 100% of
both cores, load average 2-4.6): main's code (session 5's) took 107.7-115.6 s CPU here
against 81.3 in session 5. This script, final code, one run (--prefixes 82182 --before main --order
after-first, load average 4.5):

       jobs code     wall s    cpu s decisions    guards    failed opport. slowed same plan
      82182 after     95.19    91.87    154340  18821194  37508603   34362      0       yes
      82182 before   115.64   107.74    154340  18821194  37508603   34362      0       yes

CPU ratio 0.85. Right after, the same command with --order before-first (load 4.1-4.6):
before 104.16 s CPU (110.63 wall), after 99.11 (101.36 wall), ratio 0.95, 0 slowed, same
plan. Earlier single runs at intermediate commits in the same session: 0.84, 0.90, 0.89
(and 0.99, 1.02 with (a) in); 20,000 jobs, three runs each way: 0.94, 1.09, 0.90. So
about 0.85-0.95 on this loaded machine; not under 60 s (0.85-0.95 x main's 81.3 s of
session 5 would be about 69-77 s on a quiet machine; not measured). Where the rest goes (whole trace, per-call timers, wall s under
load, code before the last two glue changes): guards 34.0 (clock runs 18.4, with the
resumed clocks'), merge upkeep 26.8 (span replacement with the span's merge and end sort
20.1, bound moves 4.1), the compiled pass 21.8, guard verdicts 5.2, the pending tail 2.9,
the candidate walk 2.5, refreshes 2.8, and ~13 of Python in decide. Next step: a merge
update is still linear in the merged entries (~9k) and sorts the changed span by end
(~73k updates), and a pass still walks the ~8.9k entries before the horizon to find the
~900 pending ones. Both come from one global (VST, job) array with a global end order;
per-pool reservation profiles (the clock kernel already pops each pool's ends in order)
would let a changed pool replace only its own profile, and an index of the pending
entries would let the pass find its candidates without walking the future entries
between the end of the plan it reads (5.9k entries in) and the horizon.
2026-11-25 (session 12), issue 18 item 3. Counted first: a pass reads the plan up to
5.4k entries (20,000 jobs); only as far as the candidates the walk examines read it,
3.0k; stopping once the plan's running maximum already fails a candidate, 5.6k of 6.3k
(whole trace, sampled: the plan does not fill the cluster early). Merge updates are
~0.6 per pass (73k vs 124k) and their spans 2.3k entries on average of ~9k (median
460): per-pool profiles would move the merging into every pass (~6k entries from up to
15 pools, starts and ends) for about what they save in updates, so they were not
built. Schedule-preserving changes made instead (each checked against the plain
reference, and each new test broken on purpose once): (1) the pass: the merge keeps
each entry's reserved GPUs in both orders, so the plan's level at a start subtracts
the ended reservations straight along the end order (no reads scattered through the
end order's positions); the candidate search stops at the last pending entry; a pass
whose first candidate sure to start (VST by now + 1 us, its pool's free charged
capacity covering it: the guard's on-time branch) is reached by the walk and passes
returns only the candidates up to it (~15% of passes, ~1/3 of starts being on time);
(2) merge upkeep: a changed span's ends sorted by a radix sort on their bits (half of
numpy's argsort on the spans), clocks merged two by two in rounds, the replacement
in one sweep (updates ~12% cheaper on captured Philly updates); (3) guards: a re-run
is handed its cached clock's future jobs plus 256, not the pool's whole future
(re-runs go ~130 jobs past the pending ones; one that uses them all is run again on
all of them); a clock resumed without a job that starts on lent GPUs runs to the
horizon + D/5, not + D (a prefix of the same run; resumes 16.1 -> 11.9 s of the
trace, paired); verdicts memoised while no pool's version changes (~15% of them) and
the lenders' thresholds read in one loop; (4) glue: the running jobs come from the
policy's own starts (the view rebuilt and sorted them at every decision, ~4%), and
the wake-up read off the clocks skips pools with no VST ahead. Tried, not kept: the
guards' cached re-runs cut at horizon + D/4 instead of + D (no difference beyond the
noise on 20,000 jobs); resumed clocks to the horizon itself (70.0 vs 69.3 s for D/5,
paired, whole trace). This script, final code (quiet machine, load ~1, but CPU s of
main's code moved 83.5 -> 98.1 between the two runs):

       jobs code     wall s    cpu s decisions    guards    failed opport. slowed same plan
      82182 after     71.59    71.57    154340  18821194  37508603   34362      0       yes
      82182 before    83.53    83.51    154340  18821194  37508603   34362      0       yes
(--order before-first, right after)
      82182 before    98.39    98.11    154340  18821194  37508603   34362      0       yes
      82182 after     87.38    87.15    154340  18821194  37508603   34362      0       yes

CPU ratios 0.857 and 0.888; the two codes run at the same time on the two cores (same
load for both): 0.887 (74.6 vs 84.1 s, before the last verdict change). On 20,000 and
40,000 jobs (--prefixes 20000,40000), CPU s after / before: after-first 19.42 / 17.62 and
40.01 / 40.16 (1.10, 1.00); before-first right after 14.93 / 17.72 and 34.28 / 41.93
(0.84, 0.82); the two at the same time, 20,000 jobs, twice: 14.40 / 18.85 and 13.96 /
17.83 (0.76, 0.78). The machine's speed drifts by 10-20% within minutes, so one-after-
the-other pairs scatter; the same-time pairs are the ones to trust: ~0.8-0.89. At the
last commit (a pass edge case the policy never meets), once more after-first on the
whole trace: after 74.64 s CPU (74.66 wall), before 78.69 (78.71), 0.949, same plan, 0
slowed.
Not under 60 s: about 72 s on a quiet machine. Where the time goes now (whole trace,
per-call timers, 88 s wall in a slow spell): guards 25.8 (resumed clocks 10.4 of which
the clock 7.1, re-runs and refreshes 12.5 of which the clock 6.7, verdicts 3.6), merge
upkeep 20.9 (span replacement 15.5, bound moves 3.3), the compiled pass 15.3, the
candidate walk 3.2, the pending tail 2.9, refreshes 2.7, and ~10 of Python in decide and
_pass. Next step: the pass and the merge are both linear in the ~9k merged entries and
nearly as frequent, so only a structure that is sublinear on both sides pays (e.g. the
plan's level kept per entry in the merge and updated only from a change's first entry,
with the pass reading a prefix maximum instead of re-summing ~6k entries), and the
guards' clock runs (14 s) only by simulating less of a backlog (a resumed clock still
re-times all of its pool's pending jobs after the one that left).
2026-11-25 (session 13), issue 18 item 3. The machine was shared all session (another
engineer's processes at 1.4-2 cores, load average 2-7), so CPU s moved by 10-25%; main's code
alone at the start: 72.54 s CPU (97.86 wall) on the whole trace, 0 slowed. Counted
first (Philly, 40,000 jobs unless said): (a) merge updates: the first merged position an
update touches is at 0.1% of the merge (median; 75th percentile 10%) and the span from the
first to the last touched position covers 90% of it (median; 20,000 jobs, all 15.4k
updates), so a replace that kept an untouched head or tail would copy nearly as much; a
captured update (15% sample, 4.9k) costs ~194 us: the span's merge_clocks 75, _replace 120
(~11 ns per entry written). (b) A pass (5% sample, 3.4k passes, 9.9k merged entries, 180 in
the tail, 174 running jobs), bulk_pass cut after each stage: call and arguments ~14 us,
candidate search ~20, prefix sums and candidate arrays ~17, the plan's levels at the
distinct starts ~60, the candidates' verdicts ~28. (c) The walk: 746 candidates per pass,
the walk stops at candidate 244 on average (41% of passes start nothing and walk them
all), and the plan the walked candidates read is 3.7k merged entries, against 6.2k for
all candidates. (d) The tail: 48k of 67k passes have tail candidates, the walk reaches
them in 23k. (e) Resumed clocks (28.3k, their kernel 4.4 s of 44 s CPU): handed 6.7k
jobs, run 3.45k, 77% of them before the merge's bound (horizon + D is far: D is the
longest pending job that fits, often days), 18% meeting the cached clock; so a lazily
resumed clock (VSTs only up to the bound) would save little.
Schedule-preserving changes: (1) the pass's MaxReservation verdicts are worked out as the
walk reaches them (bulk_pass split into the candidate search and the verdicts, which keep
their pointers in a state array and go on from there; 64 verdicts first, then doubling);
(2) the pending tail is merged only when the walk gets past every other candidate. Same
candidates, verdicts, walk and counts (tests against the plain visit and the eager pass).
Measured: passes captured on 20,000 jobs (every 8th, 5.3k) and replayed in one process,
alternating (walk outcomes as recorded): eager (bulk_pass with the tail, then the walk)
245 / 267 / 223 us per pass, on demand 205 / 220 / 210 (~15%, ~30 us). The two codes at
the same time on the whole trace (load 4-7): 82.84 vs 86.94 s CPU after (1) (0.953), and
90.95 vs 89.80 after (2) (1.01); on 40,000 jobs, main / (1) / (2) at the same time, twice:
45.86 / 44.82 / 46.15 and 45.09 / 42.85 / 43.65 s. So a gain of a few %, within this
machine's noise; not under 60 s. This script, final code (--prefixes 82182 --before main,
load 3.7-4.5; then --order after-first right after, load 4.3-5.1):

       jobs code     wall s    cpu s decisions    guards    failed opport. slowed same plan
      82182 before    80.30    76.27    154340  18821194  37508603   34362      0       yes
      82182 after     92.22    86.70    154340  18821194  37508603   34362      0       yes
(--order after-first)
      82182 after     73.66    69.53    154340  18821194  37508603   34362      0       yes
      82182 before    71.65    70.62    154340  18821194  37508603   34362      0       yes

CPU ratios 1.14 and 0.985: the machine's drift between two runs one after the other is
larger than the change. Measured instead in one process, the policy's pass swapped
between main's (bulk_pass with the tail, every verdict; the rest of the code the same)
and the on-demand one, replays alternated (eager, lazy, lazy, eager, ...), 40,000 jobs,
CPU s: eager 36.84 / 39.52 / 40.12 / 37.11, on demand 37.05 / 35.83 / 37.05 / 34.87
(paired 1.006, 0.907, 0.923, 0.940; means 38.40 vs 36.20, 0.94), same starts; the whole
trace (eager, lazy, lazy, eager; load falling 2.1 -> 0.4): eager 77.08 / 72.75, on demand
66.12 / 66.79 (0.858, 0.918; means 74.9 vs 66.5, 0.89), same starts. These favour the
change somewhat: the "eager" pass there runs on the new code's bulk_pass (two kernel
calls, a PassVerdicts, the tail joined), not on main's single kernel. Then this script
twice on the quieter machine (load 0.4-1.0):

       jobs code     wall s    cpu s decisions    guards    failed opport. slowed same plan
      82182 before    71.19    71.17    154340  18821194  37508603   34362      0       yes
      82182 after     78.69    78.68    154340  18821194  37508603   34362      0       yes
(--order after-first, right after)
      82182 after     75.92    75.91    154340  18821194  37508603   34362      0       yes
      82182 before    85.71    85.68    154340  18821194  37508603   34362      0       yes

Whichever code ran second was 10-13% slower in all four of these runs; averaged over both
orders, 77.3 vs 78.4 s (0.99). So the change is worth between ~1% and ~10% of the whole
trace, most likely a few %: about 76-78 s CPU here, not under 60 s.

Tried, not kept: a branch-free _replace (kept entries compacted, one select per output)
on the captured updates: 0.77 / 0.82 / 0.76 s vs 0.80 / 0.66 / 0.65 (no gain); skipping
16-entry blocks with no pending job (a per-block minimum job index) in the candidate
search: pending entries are clustered (32% of the blocks up to the last hold one), but the
search stage went 29.9 / 27.5 / 26.4 -> 26.0 / 26.3 / 25.5 us and the whole pass 142.5 /
140.7 / 126.5 -> 143.9 / 139.5 / 134.6 (no gain: the scan was not the cost); caching the
tail by the pools' versions, bounds and pending counts would hit 20% of passes (8.7k of
42.5k on 20,000 jobs), not built. Where the time goes now: as in session 12 but for the
pass (about 30 us less of ~140-200 per pass); a pass's remaining cost is the call, the
candidate search to the last pending entry and the candidate arrays (~50 us with the
dispatch of ~27 arguments), and the plan's levels up to the walked candidates. Next step:
find the candidates on demand too (the search's position kept like the verdicts'), and
hand the compiled pass one tuple per merge instead of ~27 arguments; beyond the pass, the
merge updates (each replaces about half the merge, as counted above) and the guards'
clocks stay the big items, and neither has a cheap exact shortcut left that these counts
show.
2026-11-27 (session 14), issue 18 item 3. Main's code on this machine all session: 78.0-83.6 s
CPU for the replay (other engineer's replays on the other core, load ~1). Counted first (20,000
jobs unless said): 49% of passes run over the same merge as the pass before with no start in
between (the last pass of a decision started nothing, the next decision changed no clock) and
they do 57% of all passes' plan reading (86M of 151M entries); the verdicts were 17% of the
replay there (per-call timers), the merge updates 16%, the guards 23%. Sampling the whole
replay, about half of it was Python around the compiled calls, in many small pieces. Changes,
all schedule-preserving, each tested against a plain construction (hypothesis and hand cases)
and each test seen failing once with the piece broken on purpose: (1) a pass over the same
merge with the same count of starts takes over the plan levels the last pass worked out
(lazy_pass's plan_key, _carry_levels: the distinct starts before either horizon and either
visit's end; only the running jobs' pointer is recomputed, the running jobs now kept in end
order so no verdict call sorts them): verdicts 3.36 -> 1.73 s on 20,000 jobs; (2) the end
sort of a merge update reads only the bits that differ (14-23 bits on Philly's integer
seconds: 2-3 passes of <= 11 bits instead of 3-4 bytes; 2,000 keys 46 -> 16 us) and an update
is one compiled call (merge_clocks + _replace); (3) guards: a lender's reference is its cached
clock itself, its previous starts kept per clock version (72% of 49k lender references on
20,000 jobs repeat a version); an own pool's built in one compiled call (clock_reference); a
resumed clock's starting state (resume_state) and a lender's threshold (first_short) in one
compiled loop each; (4) glue: drop_job compiled, np.insert / np.delete / np.cumsum(list) /
np.searchsorted's wrapper replaced by slices, accumulate and the arrays' method, the walk's
tables sized once by the trace's widest job, the pending lists copied only for pools that
start a job. Tried, not kept: a scatter-based _replace (merge positions first, then one copy
loop per array) on 1,500 captured updates of 40,000 jobs: 261 vs 238 us per update (slower).

Whole process (imports, trace, warm-up and replay; user + sys CPU s), the whole trace, main's
code and this one alternated (main, this; this, main; main, this), numba caches warm for both:
main 81.23 / 80.12 / 83.83 (median 81.23), this 63.04 / 63.69 / 63.18 (median 63.18): ratio of
medians 0.778, pairs 0.776 / 0.795 / 0.754; the replays alone 79.80 vs 61.56 s (medians, 0.771),
the same start times in all six. This script (--prefixes 82182 --before main, load ~1; the
--order after-first run was made before the last two small glue commits):

       jobs code     wall s    cpu s decisions    guards    failed opport. slowed same plan
      82182 before    83.03    83.03    154340  18821194  37508603   34362      0       yes
      82182 after     61.34    61.34    154340  18821194  37508603   34362      0       yes
(--order after-first)
      82182 after     62.09    62.08    154340  18821194  37508603   34362      0       yes
      82182 before    78.84    78.83    154340  18821194  37508603   34362      0       yes

CPU ratios 0.739 and 0.788, 0 slowed, same plan. On 40,000 jobs, paired the same way: 0.72-0.82
over the session's commits (main 42.4-48.2 s). Not under 60 s on this machine, where main's
code took 78.0-83.6 s: about 61-62 s; with main at the 72-78 s of the sessions before, the
same ratios (0.74-0.79) would be about 53-62 s, not measured. Where the time goes now (whole
trace, sampled, before the last five commits): merge updates ~21% (the compiled update
~15%), guards ~33% (resumed clocks ~13.5% of which their clock runs ~10.6, re-runs ~16% of
which the clock ~9.4), the walk ~13% (verdicts ~7, the pending tail ~3), the candidate search
~3.5%, and the rest Python spread thin (no function above ~1.5% outside those). Next step:
the three compiled items (the merge's _replace at ~12 ns per entry written, the resumed
clocks re-timing a backlog at ~40 ns per job, the verdicts) now dominate; the pending tail's
Python (pending_tail, the joins in add_tail: ~2.6%) and the guards' Python (shares, verdicts,
busy arrays: ~5%) are the largest pieces of glue left.
After the merge into main, on a quiet machine (nothing else running): this script,
--prefixes 82182 alone, 60.49 s CPU (60.48 wall), 0 slowed; the whole command `sia replay
builtin:philly --clean --policy sia-vc --no-mlflow` (imports, trace, the FCFS baseline and
the replay), 3 alternating pairs against session 13's code (e4bb9fa, a regular install
beside this editable one): wall median 63.98 s against 81.65 s, ratio 0.79, identical
jobs.parquet. At the 60 s goal, not under it.
2026-11-27 (session 15), issue 18 item 3. The machine was shared most of the session
(another engineer's processes on one or both cores, load average 1.5-8) and quiet at its
end, when the figures below were taken (before/after in one command, both orders). Counted
first (whole trace, main's code):
sampled (py-spy, 250 Hz) the compiled merge update was 16.4% of the process, the clock runs
21.1% (resumed clocks 11.4, guard re-runs and refreshes 10.0, each with its Python around
it), the verdicts 7.0%, the candidate search 3.9%, the walk 2.6%, and the rest Python spread
thin (no line above ~0.8%). Per-call timers: 276k clock runs ran 286M jobs (1.04k a run) in
13.3 s, ~46 ns a job; 61k resumes took 9.3 s (the kernel ~7.1) and 209k other runs 10.7 s
(the kernel ~6.0, so ~22 us of Python around each guard re-run); 60k merge updates at 176 us
(8.3k old entries, 2.8k new: the new span's merge and end sort 50 us, _replace 125 us, of
which its VST-order sweep 82 and its end-order sweep 53). The clock's heap held 24 ends on
average (90% at most 41; pools of 1-128 GPUs), ~1.0 pop per job at a depth of ~5; a
synthetic backlog cost 53 ns a job at 32 GPUs, 31 at 8, 64 at 128: the heap's levels, not
the jobs' data (one gather pass over the captured orders: 2.6 ns a job warm). No guard
re-run repeats within a decision with the same versions (0 of 51.8k on 20,000 jobs), so no
memo of failed re-runs. Changes, all schedule-preserving, each compiled piece tested against
a plain construction (hypothesis and hand cases) and each test seen failing once with the
piece broken on purpose: (1) a resumed clock in one compiled call (resume_clock: the state,
the order's cut and joins, the run, the result's joins; ~9 us of Python a resume before);
(2) a guard's re-run in one compiled call (guard_clock: the pending jobs off the cached
clock, the future handed and the retry, the reference, the run and the joins; ~12 numpy
calls before), _sim keeping the refreshes only; (3) the clock's heap 8-ary instead of
binary (a third of the levels), and the meeting test reading the reference only once
nothing that differs holds GPUs: on 6.9k captured clock runs (every 40th of the whole
trace) 0.338 -> 0.264 s (4-ary alone 0.289); (4) each pool's charges kept as arrays until
they change, and a guard's tentative charge handed to its re-runs instead of added to the
pools' charges and taken back when the guard fails; (5) the walk's tables kept across
passes (WalkTables), only the verdicts the last walk set cleared. Tried, not kept (measured
on the captured clock runs, alternated in one process, same results): a sorted run of ends
instead of a heap (pop from the front, insert by a backward scan): 54 vs 46 ns a job,
slower; Floyd's bottom-up pop with inf sentinels: 0.339 vs 0.334 s, and a branch-free child
select: 0.330 vs 0.335, no gain; the jobs' data interleaved in one (n, 4) array: 0.332 vs
0.332, no gain; a 16-ary heap: 51 vs 39 ns a job for the 8-ary one, slower. Not built: a
merge without its GPUs, durations and pools (read from the trace by job): _replace 134 ->
112 us on 1.5k captured updates (-16%), ~1.5 s of the trace, but the merge's layout is
read by the pass, drop_job, the wake-up and ~30 tests. This script, final code, on the
quiet machine (nothing else running, load ~1: this process; --prefixes 82182 --before main,
then --order after-first right after):

       jobs code     wall s    cpu s decisions    guards    failed opport. slowed same plan
      82182 before    60.98    60.98    154340  18821194  37508603   34362      0       yes
      82182 after     54.19    54.19    154340  18821194  37508603   34362      0       yes
(--order after-first)
      82182 after     53.45    53.46    154340  18821194  37508603   34362      0       yes
      82182 before    60.86    60.85    154340  18821194  37508603   34362      0       yes

CPU ratios 0.889 and 0.879, 0 slowed, same plan: 53.5-54.2 s, under the 60 s goal by ~10%.
Earlier, with the other engineer's processes running (load 2.2-3.4), the same two runs gave
55.85 vs 61.18 (0.913) and 54.48 vs 62.10 (0.877); before the last two commits, load 3-4,
54.83 vs 67.62 (0.811). The whole command `sia replay builtin:philly --clean --policy sia-vc
--no-mlflow` (imports, trace, the FCFS baseline and the replay), main's venv and this one
alternated (main, this; this, main; main, this) on the quiet machine, wall s: main 65.24 /
64.74 / 63.83, this 57.51 / 57.77 / 57.89 (user CPU 64.19 / 63.80 / 63.18 vs 56.48 / 56.62 /
57.05); pairs 0.882 / 0.892 / 0.907, ratio of medians 0.892; jobs.parquet byte-identical
(under load, earlier: medians 65.90 vs 58.89, 0.894).
Where the time goes now (sampled, whole trace, before the last two commits): the merge
update ~17.6%, resumed clocks ~10.6%, guard re-runs ~9.2% (about a third of it outside the
kernel: the order, the reference and the joins, ~9 us a call), the verdicts ~7.8%, the
candidate search ~4.4%, the walk ~3.1%, refreshes ~2.1%, and ~40% Python spread thin (each
pass ~21 us of fixed overhead in lazy_pass, PassVerdicts and the walk on a tiny merge,
about half of it the dispatch and boxing of ~6 compiled calls). Next step: the merge's
layout (point above), and fewer compiled calls per pass (the search and the first
verdicts in one).
"""

from __future__ import annotations

import argparse
import json
import os
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PHILLY = "builtin:philly"  # the trace shipped in the package (sia.data.datasets)
_PACKAGES = ("data", "features", "models", "scheduler", "pipelines")


def measure(trace: str, prefixes: list[int], starts_out: str) -> list[dict]:
    """Replay FCFS and SIA_VC on each prefix with the code this process imports; return one
    dict of figures per prefix and save each prefix's SIA_VC start times (s) to ``starts_out``."""
    from sia.data.quotas import quotas_from_load
    from sia.data.readers import read_philly
    from sia.scheduler.registry import make_policy

    try:
        from sia.scheduler.core.simulator import simulate
        from sia.scheduler.policies.siavc.policy import SiaVCPolicy
    except ImportError:  # a revision from before the scheduler's packages (core/, policies/)
        from sia.scheduler.policy_siavc import SiaVCPolicy
        from sia.scheduler.simulator import simulate

    jobs, _ = read_philly(trace, on_bad_rows="drop")
    pools = quotas_from_load(jobs, seed=0)
    jobs = jobs.sort("submit_time", maintain_order=True)
    simulate(jobs.head(300), pools, SiaVCPolicy())  # compile (or load) the numba kernels
    rows, saved = [], {}
    for n in prefixes:
        part = jobs.head(n)
        pol = SiaVCPolicy()
        t, c = time.perf_counter(), time.process_time()
        res = simulate(part, pools, pol)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        fcfs = simulate(part, pools, make_policy("fcfs"))
        st = pol.stats
        rows.append(dict(jobs=n, wall=wall, cpu=cpu, decisions=st["calls"],
                         guards=st["early_starts"], failed=st["checks_failed"],
                         opport=int(res["opportunistic"].sum()),
                         slowed=int(((res["end_time"] - fcfs["end_time"]) > 1.0).sum())))
        saved[str(n)] = res["start_time"].to_numpy()
    np.savez(starts_out, **saved)
    return rows


def measure_revision(rev: str, trace: str, prefixes: list[int], starts_out: str) -> list[dict]:
    """Run :func:`measure` in a child process on the package code of git revision ``rev``."""
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="bench-siavc-") as tmp:
        src, pkg = Path(tmp, "src"), Path(tmp, "sia")
        src.mkdir()
        pkg.mkdir()
        archive = subprocess.run(["git", "-C", str(repo), "archive", rev, *_PACKAGES],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        for name in _PACKAGES:
            (pkg / name).symlink_to(src / name)
        # -S: no site hooks, so the editable install of the working tree is not seen
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([tmp, *site.getsitepackages()]))
        out = subprocess.run(
            [sys.executable, "-S", __file__, "--worker", "--trace", trace, "--prefixes",
             ",".join(map(str, prefixes)), "--starts-out", starts_out],
            env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=PHILLY)
    ap.add_argument("--prefixes", default="1000,5000,20000")
    ap.add_argument("--before", default=None, help="git revision to compare with")
    ap.add_argument("--order", choices=("before-first", "after-first"), default="before-first")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--starts-out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    prefixes = [int(x) for x in args.prefixes.split(",")]
    if args.worker:
        print(json.dumps(measure(args.trace, prefixes, args.starts_out)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-siavc-starts-") as tmp:
        runs = [("after", lambda out: measure(args.trace, prefixes, out))]
        if args.before:
            before = ("before", lambda out: measure_revision(args.before, args.trace, prefixes,
                                                             out))
            runs.insert(0 if args.order == "before-first" else 1, before)
        table = {}
        for name, run in runs:
            rows = run(f"{tmp}/{name}.npz")
            with np.load(f"{tmp}/{name}.npz") as saved:
                table[name] = (rows, dict(saved.items()))
    first = next(iter(table.values()))[1]
    print(f"{'jobs':>7} {'code':<7}{'wall s':>8} {'cpu s':>8} {'decisions':>9} {'guards':>9} "
          f"{'failed':>9} {'opport.':>7} {'slowed':>6} {'same plan':>9}")
    for i, n in enumerate(prefixes):
        for name, (rows, starts) in table.items():
            r = rows[i]
            same = np.array_equal(starts[str(n)], first[str(n)])
            print(f"{n:>7} {name:<7}{r['wall']:>8.2f} {r['cpu']:>8.2f} {r['decisions']:>9} "
                  f"{r['guards']:>9} {r['failed']:>9} {r['opport']:>7} {r['slowed']:>6} "
                  f"{'yes' if same else 'NO':>9}")


if __name__ == "__main__":
    main()
