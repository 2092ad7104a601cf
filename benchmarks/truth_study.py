"""Where the truth lies: which end of the bracket is loose on small MiniLM operators.

Usage (what produced the committed results, benchmarks/results/truth_study.{json,md})::

    nice -n 10 python benchmarks/truth_study.py --docs apache2,mpl2 --widths 16,32 \
        --layers 0,3 --heads 0,6 --level-seconds 25 --push-seconds 12 --max-seconds 840 --resume
    python benchmarks/truth_study.py --smoke --out-dir /tmp/truth    # CI-sized (1 operator, tiny work)

Per operator (the MiniLM-L6 heads ``Lx Hy`` of the first ``width`` tokens of
examples/data/DOC.txt) and per tolerance (eps 0.1, 0.25, 0.5):

1. **levels** of effort of the driver (:func:`softrank_cert.solvers.bracket_operator`, which
   verifies every end with the kernel): the default work, 16x and 64x that work, and an
   unbounded work budget (``work=inf``) -- the last three each capped at ``--level-seconds``
   of wall time (recorded: ``capped`` says whether the cap, not the search, ended it).
   A level is run only while some tolerance is still open.
2. **pushes** of each end separately, from the best verified bracket of all levels, with the
   solvers' own functions (nothing in the solvers is changed):

   * upper end down: at ranks ``r = upper - 1, upper - 2, ...`` (never below lower), the
     smoothed-minimax continuation (:func:`softrank_cert.solvers.upper.smooth.smooth`) with long
     stages from the truncated SVD, from the best verified witness truncated to rank r, and
     from ``--restarts`` random perturbations of the truncated SVD;
   * lower end up: at ``k = lower + 1, lower + 2, ...`` (never above upper), general key
     sides (:func:`softrank_cert.solvers.lower.general.alternate`, 4 sweeps) from the pivoted-QR,
     complete-pivoting and ``--selections`` random query selections, then the signed-group /
     general search (:class:`softrank_cert.solvers.lower.search.LowerSearch`) with the general
     family unrestricted (any k, no patience limit) under several seeds;

   every float64 candidate that clears eps is sent to the kernel
   (:func:`softrank_cert.kernel.verify_upper` / :func:`~softrank_cert.kernel.verify_lower`) and
   only a VERIFIED one moves the end.  Each push is capped at ``--push-seconds`` per
   (operator, eps).

Each finished operator is appended to ``truth_study.jsonl`` at once; ``--resume`` skips the
operators already there.  ``--max-seconds`` bounds the whole run: operators not started by then
are left out (listed as ``skipped`` in the JSON).  The summary per (width, eps): resolved at
the default work, resolved only with more effort, and for the brackets still open which end
moved (``lower up`` / ``upper down`` / ``both`` / ``neither``) from the default bracket to the
best verified one.  Everything runs single-threaded BLAS.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import softrank_cert  # noqa: F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np

from softrank_cert.util.dense import Dense, threshold
from softrank_cert.kernel import Operator, Status, verify_lower, verify_upper
from softrank_cert.solvers import bracket_operator
from softrank_cert.solvers.lower.general import KeyLP, alternate
from softrank_cert.solvers.lower.lp import RowLP
from softrank_cert.solvers.lower.search import LowerSearch
from softrank_cert.solvers.lower.starts import qr_queries, selection
from softrank_cert.solvers.lower.pivot import pivot_order
from softrank_cert.solvers.upper.smooth import STAGES, smooth
from softrank_cert.solvers.work import Budget, Until, default_work, key_lp_scale, one_blas_thread, row_lp_scale
from softrank_cert.util.dense import row_errors

ROOT = Path(__file__).resolve().parents[1]
EPS = ("0.1", "0.25", "0.5")
#: Effort levels: (name, multiple of the default work; inf = unbounded work, wall-capped).
LEVELS = (("default", 1.0), ("16x", 16.0), ("64x", 64.0), ("inf", math.inf))
#: Seeds of the lower push's LowerSearch runs.
LOWER_SEEDS = (1, 2, 3)


def panel(docs: list[str], widths: list[int], layers: list[int], heads: list[int]) -> list[tuple[str, Operator]]:
    """The selected MiniLM heads of each document at each width (built from the local model)."""
    from softrank_cert.models import build_panel, provenance_names

    out = []
    for doc in docs:
        arrays = build_panel("minilm", ROOT / "examples" / "data" / f"{doc}.txt", widths, layers=layers, heads=heads)
        out += [(n, Operator("qk", {"Q": arrays[f"{n}/Q"], "K": arrays[f"{n}/K"]})) for n in provenance_names(arrays)]
    return out


def _deadline(seconds: float) -> Until:
    return Until(Budget(), math.inf, time.perf_counter() + seconds)


def push_upper(op: Operator, d: Dense, eps: str, lower: int, upper: int, witness: tuple | None,
               restarts: int, seconds: float) -> dict:
    """Smallest rank below ``upper`` (>= lower) whose smoothed witness the kernel VERIFIES."""
    target, best, tried = float(eps), None, []
    stop = time.perf_counter() + seconds
    u, s, vt = d.svd
    rng = np.random.default_rng(0)
    for r in range(upper - 1, max(lower, 1) - 1, -1):
        starts = [("tsvd", (u[:, :r] * s[:r], vt[:r].T.copy()))]
        if witness is not None:  # best verified witness, truncated to rank r
            bu, bs, bvt = np.linalg.svd(witness[0] @ witness[1].T)
            starts.append(("truncated", (bu[:, :r] * bs[:r], bvt[:r].T.copy())))
        for i in range(restarts):
            U0, W0 = starts[0][1]
            starts.append((f"random{i}", (U0 + 0.1 * rng.standard_normal(U0.shape) * np.abs(U0).mean(),
                                          W0 + 0.1 * rng.standard_normal(W0.shape) * np.abs(W0).mean())))
        found = None
        for name, start in starts:
            if time.perf_counter() >= stop:
                break
            U, W = smooth(d, r, start=start, iterations=1000, stages=len(STAGES) + 6,
                          until=_deadline(stop - time.perf_counter()), target=target)
            err = float(row_errors(d.A, U, W).max())
            if err <= target:
                v = verify_upper(op, eps, r, U, W, method="smooth")
                tried.append({"r": r, "start": name, "error": err, "status": v.status.value})
                if v.status is Status.VERIFIED:
                    found = (r, U, W, name)
                    break
        if found is None:
            break
        best = {"r": found[0], "start": found[3], "status": "VERIFIED"}
    return {"best": best, "tried": tried}


def push_lower(op: Operator, d: Dense, eps: str, lower: int, upper: int, selections: int, seconds: float) -> dict:
    """Largest k above ``lower`` (<= upper) with a pair the kernel VERIFIES: general key sides
    from pivoted-QR, complete-pivoting and random selections, then LowerSearch (signed groups and
    general sides without limits) under several seeds."""
    A, value = d.A, float(eps)
    m, n = A.shape
    stop = time.perf_counter() + seconds
    key_lp, row_lp = KeyLP(key_lp_scale(m, n)), RowLP(row_lp_scale(m, n))
    queries, (pivot_rows, _) = qr_queries(A), pivot_order(A)
    rng = np.random.default_rng(0)
    best, tried = None, []

    def check(k: int, X: np.ndarray, Y: np.ndarray, origin: str) -> bool:
        t = threshold(A, X, Y)
        if not t > value * (1 + 1e-9):
            return False
        v = verify_lower(op, eps, k, X, Y, method=origin)
        tried.append({"k": k, "origin": origin, "threshold": t, "status": v.status.value})
        return v.status is Status.VERIFIED

    for k in range(lower + 1, upper + 1):
        ok = False
        rows = [("general_qr", queries[:k]), ("general_pivot", pivot_rows[:k])]
        rows += [(f"general_random{i}", rng.choice(m, k, replace=False)) for i in range(selections)]
        for origin, sel in rows:
            if time.perf_counter() >= stop:
                break
            found = alternate(A, selection(np.asarray(sel), m), key_lp, row_lp, _deadline(stop - time.perf_counter()),
                              sweeps=4)
            if found is not None and check(k, found[0], found[1], origin):
                ok = True
                break
        for seed in LOWER_SEEDS if not ok else ():
            if time.perf_counter() >= stop:
                break
            pairs: list = []
            search = LowerSearch(d, [value], pairs.append, lambda _e, k=k: k, lambda _e, k=k: k - 1, seed=seed)
            search.general_max_k, search.general_patience = d.p, 10 ** 9
            search.run(_deadline(min(stop - time.perf_counter(), seconds / 3)))
            for c in sorted(pairs, key=lambda c: -c.threshold):
                if c.k == k and check(k, c.X, c.Y, f"search_{c.method}_seed{seed}"):
                    ok = True
                    break
            if ok:
                break
        if not ok:
            break
        best = {"k": k, "origin": tried[-1]["origin"], "status": "VERIFIED"}
    return {"best": best, "tried": tried}


def study_operator(name: str, op: Operator, args: argparse.Namespace) -> dict:
    """Levels and pushes of one operator (see the module docstring)."""
    m, n = op.shape
    base = default_work(m, n) if args.work is None else args.work
    row: dict = {"operator": name, "width": m, "default_work": base, "levels": [], "pushes": {}}
    best: dict[str, dict] = {}
    witnesses: dict[str, tuple] = {}
    for level, factor in LEVELS[:args.levels]:
        if best and all(b["lower"] == b["upper"] for b in best.values()):
            break
        work = base * factor
        seconds = None if level == "default" else args.level_seconds
        start = time.perf_counter()
        brackets = bracket_operator(op, list(EPS), work=work, budget_seconds=seconds)
        wall = time.perf_counter() - start
        ends = {}
        for b in brackets:
            lo, up = b.lower, b.upper
            ends[b.eps] = {"lower": lo.k, "lower_method": lo.method, "lower_status": lo.verdict.status.value,
                           "upper": up.r, "upper_construction": up.construction, "upper_status": up.verdict.status.value}
            old = best.get(b.eps)
            if old is None or lo.k > old["lower"]:
                best.setdefault(b.eps, {}).update(lower=lo.k, lower_from=level)
            if old is None or up.r < old["upper"]:
                best.setdefault(b.eps, {}).update(upper=up.r, upper_from=level)
                if up.U is not None:
                    witnesses[b.eps] = (up.U, up.W)
        row["levels"].append({"level": level, "work": None if math.isinf(work) else work, "seconds": wall,
                              "capped": seconds is not None and wall >= 0.95 * seconds, "ends": ends})
    d = Dense.of(op)
    for eps in EPS:
        b = best[eps]
        if b["lower"] >= b["upper"] or args.push_seconds <= 0:
            continue
        start = time.perf_counter()
        up = push_upper(op, d, eps, b["lower"], b["upper"], witnesses.get(eps), args.restarts, args.push_seconds)
        lo = push_lower(op, d, eps, b["lower"], up["best"]["r"] if up["best"] else b["upper"],
                        args.selections, args.push_seconds)
        row["pushes"][eps] = {"upper": up, "lower": lo, "seconds": time.perf_counter() - start}
        if up["best"]:
            b.update(upper=up["best"]["r"], upper_from="push")
        if lo["best"]:
            b.update(lower=lo["best"]["k"], lower_from="push")
    row["best"] = best
    return row


def classify(row: dict, eps: str) -> str:
    """How the bracket at eps fared: resolved at the default work, resolved with more effort,
    or still open with the end(s) that moved from the default bracket."""
    first, best = row["levels"][0]["ends"][eps], row["best"][eps]
    if first["lower"] == first["upper"]:
        return "resolved_default"
    if best["lower"] == best["upper"]:
        return "resolved_more"
    moved = (best["lower"] > first["lower"], best["upper"] < first["upper"])
    return {(True, True): "open_both_moved", (True, False): "open_lower_up",
            (False, True): "open_upper_down", (False, False): "open_neither"}[moved]


KINDS = ("resolved_default", "resolved_more", "open_lower_up", "open_upper_down", "open_both_moved", "open_neither")


def summarise(rows: list[dict]) -> dict:
    """Counts of :func:`classify` per (width, eps), and for brackets resolved with more effort
    which end moved to meet the other."""
    out: dict = {}
    for width in sorted({r["width"] for r in rows}):
        for eps in EPS:
            group = [r for r in rows if r["width"] == width]
            kinds = [classify(r, eps) for r in group]
            closing = {"lower": 0, "upper": 0, "both": 0}
            for r in group:
                if classify(r, eps) == "resolved_more":
                    f, b = r["levels"][0]["ends"][eps], r["best"][eps]
                    key = ("both" if b["lower"] > f["lower"] and b["upper"] < f["upper"]
                           else "lower" if b["lower"] > f["lower"] else "upper")
                    closing[key] += 1
            ratios = [r["best"][eps]["upper"] / max(r["best"][eps]["lower"], 1) for r in group]
            out[f"w{width} eps {eps}"] = {"operators": len(group), **{k: kinds.count(k) for k in KINDS},
                                          "resolved_more_closed_by": closing,
                                          "median_best_ratio": statistics.median(ratios)}
    return out


def markdown(summary: dict, rows: list[dict], seconds: float) -> str:
    lines = ["# Where the truth lies (benchmarks/truth_study.py)", "",
             f"{len(rows)} operators, {seconds:.0f} s in all. Every end below was VERIFIED by the kernel.", "",
             "| width, eps | ops | resolved at default | resolved with more effort (closed by lower / upper / both) "
             "| open: lower up | open: upper down | open: both moved | open: neither moved | median best upper/lower |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, s in summary.items():
        c = s["resolved_more_closed_by"]
        lines.append(f"| {key} | {s['operators']} | {s['resolved_default']} | {s['resolved_more']} "
                     f"({c['lower']} / {c['upper']} / {c['both']}) | {s['open_lower_up']} | {s['open_upper_down']} "
                     f"| {s['open_both_moved']} | {s['open_neither']} | {s['median_best_ratio']:.2f} |")
    lines += ["", "| operator | eps | default | " + " | ".join(n for n, _ in LEVELS[1:]) + " | best (from) |",
              "|---|---|---|" + "---|" * (len(LEVELS) - 1) + "---|"]
    for r in rows:
        for eps in EPS:
            cells = []
            for name, _ in LEVELS:
                lv = next((x for x in r["levels"] if x["level"] == name), None)
                cells.append("-" if lv is None else f"[{lv['ends'][eps]['lower']}, {lv['ends'][eps]['upper']}]")
            b = r["best"][eps]
            lines.append(f"| {r['operator']} | {eps} | " + " | ".join(cells)
                         + f" | [{b['lower']}, {b['upper']}] ({b['lower_from']} / {b['upper_from']}) |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="example: python benchmarks/truth_study.py "
                                "--docs apache2,mpl2 --widths 16,32 --resume")
    p.add_argument("--docs", default="apache2,mpl2")
    p.add_argument("--widths", default="16,32")
    p.add_argument("--layers", default="0,2,4")
    p.add_argument("--heads", default="0,6")
    p.add_argument("--work", type=float, default=None, help="base work units (default: the driver's default)")
    p.add_argument("--levels", type=int, default=len(LEVELS), help="how many effort levels (1: default only)")
    p.add_argument("--level-seconds", type=float, default=40.0, help="wall cap of each level above the default")
    p.add_argument("--push-seconds", type=float, default=20.0, help="wall cap of each push per (operator, eps)")
    p.add_argument("--restarts", type=int, default=4)
    p.add_argument("--selections", type=int, default=12)
    p.add_argument("--max-seconds", type=float, default=1500.0, help="no operator is started after this")
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--resume", action="store_true")
    p.add_argument("--smoke", action="store_true", help="1 operator at width 16, tiny work")
    args = p.parse_args(argv)
    if args.smoke:
        args.docs, args.widths, args.layers, args.heads = "apache2", "16", "0", "0"
        args.work, args.levels, args.level_seconds, args.push_seconds = 300.0, 2, 3.0, 3.0
        args.restarts, args.selections = 1, 2
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "truth_study.jsonl"
    done = {}
    if args.resume and jsonl.exists():
        done = {r["operator"]: r for r in map(json.loads, jsonl.read_text().splitlines())}
    elif jsonl.exists():
        jsonl.unlink()
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    ops = panel(args.docs.split(","), ints(args.widths), ints(args.layers), ints(args.heads))
    start = time.perf_counter()
    rows, skipped = [], []
    with one_blas_thread():
        for name, op in ops:
            if name in done:
                rows.append(done[name])
                continue
            if time.perf_counter() - start > args.max_seconds:
                skipped.append(name)
                continue
            print(f"[truth] {name}", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            row = study_operator(name, op, args)
            row["seconds"] = time.perf_counter() - t0
            rows.append(row)
            with jsonl.open("a") as f:
                f.write(json.dumps(row) + "\n")
    seconds = sum(r["seconds"] for r in rows)
    summary = summarise(rows)
    report = {"command": " ".join(sys.argv), "eps": list(EPS), "levels": [n for n, _ in LEVELS[:args.levels]],
              "level_seconds": args.level_seconds, "push_seconds": args.push_seconds, "seconds": seconds,
              "summary": summary, "skipped": skipped, "operators": rows}
    (out / "truth_study.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "truth_study.md").write_text(markdown(summary, rows, seconds))
    print(markdown(summary, rows, seconds).split("\n\n| operator")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
