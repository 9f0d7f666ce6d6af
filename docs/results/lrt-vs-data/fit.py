#!/usr/bin/env python3
"""Where would the gap change sign? An extrapolation from stage B's results (not a measurement).

Reads stage-b/results.csv (lrt-ablate's, one row per run) and, per LRT arm paired with the
baseline, takes per seed at each budget C:
  gap = LRT(C) - Base(C),  g = LRT(C) - Base(C/2),  delta = Base(C/2) - Base(C)
then fits
  delta(t) = A * t^-k           (least squares on log delta against log t; t = tokens/param),
  g(t)     = a + b * log2(t)    (least squares),
and prints the t where delta(t) + g(t) = 0 (the gap's sign change), if the fits cross, under four
models for g: its mean over the budgets (b = 0), its value at the largest budget (b = 0), the
line, and a power law -B t^-m like delta's.
Also prints val - train per arm.

  python3 docs/results/lrt-vs-data/fit.py [stage-b/results.csv]
Standard library only; run by hand, never by the tests.
"""
import csv
import math
import os
import statistics
import sys
from collections import defaultdict

here = os.path.dirname(os.path.abspath(__file__))
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "stage-b", "results.csv")
rows = list(csv.DictReader(open(path)))
bpb = {}  # (arm, budget, seed) -> val_bpb
tpp = {}  # baseline budget -> tokens per parameter
gen = defaultdict(list)  # (arm, budget) -> val - train
for r in rows:
    b = float(r["budget"])
    bpb[(r["arm"], b, int(r["seed"]))] = float(r["val_bpb"])
    if r["arm"] == "baseline" and r["tokens_per_param"]:
        tpp[b] = float(r["tokens_per_param"])
    if r.get("train_bpb"):
        gen[(r["arm"], b)].append(float(r["val_bpb"]) - float(r["train_bpb"]))

arms = sorted({a for (a, _, _) in bpb if a != "baseline"})
budgets = sorted({b for (a, b, _) in bpb if a != "baseline"})


def fit_line(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


def crossing(A, k, a, b):
    """The t > 0 where A t^-k + a + b log2 t = 0, by bisection on log2 t in [-10, 60]; None if none."""
    f = lambda u: A * 2 ** (-k * u) + a + b * u
    lo, hi = -10.0, 60.0
    if f(lo) * f(hi) > 0:
        return None
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(lo) * f(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return 2 ** lo


for arm in arms:
    ts, gs, ds, gaps = [], [], [], []
    print(f"{arm} against baseline (means over seeds; t = baseline tokens per parameter)")
    print("    t      gap       g      delta")
    for C in budgets:
        seeds = [s for (a, b, s) in bpb if a == arm and b == C]
        g = [bpb[(arm, C, s)] - bpb[("baseline", C / 2, s)] for s in seeds if ("baseline", C / 2, s) in bpb]
        d = [bpb[("baseline", C / 2, s)] - bpb[("baseline", C, s)]
             for s in seeds if ("baseline", C / 2, s) in bpb and ("baseline", C, s) in bpb]
        if not g or not d or C not in tpp:
            continue
        ts.append(tpp[C]), gs.append(statistics.fmean(g)), ds.append(statistics.fmean(d))
        gaps.append(gs[-1] + ds[-1])
        print(f"  {tpp[C]:5.1f}  {gaps[-1]:+.4f}  {gs[-1]:+.4f}  {ds[-1]:+.4f}")
    if len(ts) < 2 or min(ds) <= 0:
        print("  (too few budgets, or a delta <= 0: no fit)\n")
        continue
    lt = [math.log2(t) for t in ts]
    c, slope = fit_line(lt, [math.log2(d) for d in ds])
    A, k = 2 ** c, -slope
    print(f"  delta(t) = {A:.3f} t^-{k:.3f}  (halves every {1 / k:.2f} doublings of the data)" if k > 0 else
          f"  delta(t) = {A:.3f} t^{-k:.3f}")
    for name, (a, b) in (("g constant", (statistics.fmean(gs), 0.0)), ("g at its latest value", (gs[-1], 0.0)),
                         ("g linear in log2 t", fit_line(lt, gs))):
        t = crossing(A, k, a, b)
        where = f"changes sign at t = {t:.0f} tokens per parameter" if t else "does not change sign (t < 2^60)"
        print(f"  {name}: g(t) = {a:+.4f} {b:+.4f} log2 t -> the gap {where}")
    if max(gs) < 0:  # g(t) = -B t^-m: the gap changes sign where the two power laws meet, if m < k
        cg, sg = fit_line(lt, [math.log2(-g) for g in gs])
        B, m = 2 ** cg, -sg
        t = (A / B) ** (1 / (k - m)) if m < k and B > 0 else None
        where = f"changes sign at t = {t:.0f} tokens per parameter" if t else "does not change sign"
        print(f"  g a power law: g(t) = -{B:.4f} t^-{m:.3f} -> |g|/delta grows as t^{k - m:.3f}; the gap {where}")
    print()

if gen:
    print("val - train (mean over seeds), per budget in token-forwards")
    for arm in ["baseline"] + arms:
        cells = [f"{C:.4g}: {statistics.fmean(gen[(arm, C)]):+.4f}" for C in sorted({b for (a, b) in gen if a == arm})]
        print(f"  {arm}: " + ", ".join(cells))
