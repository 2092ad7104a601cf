"""Where the bracket driver's seconds go: a stage-by-stage CPU-time profile (cProfile timed by
``time.process_time``) of ``bracket_operator`` on MiniLM heads, at the default work or ``--work``.

Usage (what produced the committed results)::

    nice -n 10 python benchmarks/profile_driver.py --pydoc-topic import --width 512 --heads L1H1,L4H6 \
        --name w512_import
    nice -n 10 python benchmarks/profile_driver.py --pydoc-topic typesseq --width 1024 --chars 16000 \
        --heads L1H1,L4H1,L4H6 --work 1455000 --no-cprofile --prefix solvers_fast --name w1024_charges

Writes ``benchmarks/results/<prefix>_<name>.{json,md}`` (prefix ``solvers_profile``): per head the CPU seconds of each
part (cumulative time of the functions named in :data:`PARTS`; they do not nest in one
another) and the rest, the work units the driver counted, and the units charged inside each
part (:data:`CHARGED`: the work model's view of the same part, so that ``CPU s / (units /
units_per_second)`` says how honest its charges are).  Widths above 512 stack 512-token windows
(``bench_solvers.stacked_panel``).  Single-threaded BLAS, as the driver runs.  The profiles
committed before 2026-12-03 (``solvers_profile_w512_import*``) timed wall clock, not CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import hashlib
import importlib
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

#: Part of the driver -> (module file suffix, function name) whose cumulative time it is.
PARTS = {
    "set-up: SVD, truncated-SVD errors": [("dense.py", "svd"), ("solvers/one_shot.py", "tsvd_errors")],
    "smoothed objective evaluations": [("solvers/upper/smooth.py", "__call__")],
    "L-BFGS outside the evaluations": [],  # minimize's cumulative time less the evaluations
    "pivot stage (complete pivoting, swaps)": [("solvers/one_shot.py", "lower_pair")],
    "X-step LPs (RowLP)": [("solvers/lower/lp.py", "solve")],
    "Y-step LPs (KeyLP, general key side)": [("solvers/lower/general.py", "solve")],
    "key moves (screens, Sherman-Morrison)": [("solvers/lower/moves.py", "key_moves")],
    "large-k pairs (smoothed key side, threshold)": [("solvers/lower/smooth_key.py", "selection_pair")],
    "growth pivots": [("solvers/lower/starts.py", "growth_pivot")],
    "starts: pivoted QR, pivot order": [("solvers/lower/starts.py", "qr_queries"), ("solvers/lower/pivot.py", "pivot_order")],
    "kernel verification": [("solvers/settle.py", "seal")],
}


#: Parts whose charged units are recorded -> (module, attribute path) of the function wrapped.
CHARGED = {
    "smoothed objective evaluations": ("softrank_cert.solvers.upper.smooth", "_Objective.__call__"),
    "pivot stage (complete pivoting, swaps)": ("softrank_cert.solvers.one_shot", "OneShot.lower_pair"),
    "X-step LPs (RowLP)": ("softrank_cert.solvers.lower.lp", "RowLP.solve"),
    "key moves (screens, Sherman-Morrison)": ("softrank_cert.solvers.lower.base", "key_moves"),
    "large-k pairs (smoothed key side, threshold)": ("softrank_cert.solvers.lower.families.general_smooth", "selection_pair"),
}


@contextlib.contextmanager
def charged_units(into: dict[str, float], seconds: dict[str, float], budgets: list | None = None) -> Iterator[None]:
    """Record into ``into[part]`` the work units charged while a :data:`CHARGED` function runs
    (the innermost one), and into ``seconds[part]`` its CPU seconds; every budget charged goes
    into ``budgets`` (once)."""
    from softrank_cert.solvers import Budget

    current: list[str] = []
    plain_charge = Budget.charge

    def charge(self, units: float) -> None:
        if budgets is not None and not any(b is self for b in budgets):
            budgets.append(self)
        if current:
            into[current[-1]] = into.get(current[-1], 0.0) + units
        plain_charge(self, units)

    def wrap(part: str, f):
        @functools.wraps(f)
        def inner(*args, **kwargs):
            current.append(part)
            start = time.process_time()
            try:
                return f(*args, **kwargs)
            finally:
                seconds[part] = seconds.get(part, 0.0) + time.process_time() - start
                current.pop()
        return inner

    saved = []
    for part, (module, attr) in CHARGED.items():
        owner = importlib.import_module(module)
        *outer, name = attr.split(".")
        for o in outer:
            owner = getattr(owner, o)
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, wrap(part, getattr(owner, name)))
    Budget.charge = charge
    try:
        yield
    finally:
        Budget.charge = plain_charge
        for owner, name, f in saved:
            setattr(owner, name, f)


def cumulative(stats: pstats.Stats, suffix: str, name: str) -> float:
    return sum(v[3] for (path, _line, func), v in stats.stats.items() if path.endswith(suffix) and func == name)


def profile_head(name: str, op, eps: list[str], work: float | None = None, profile: bool = True) -> dict:
    from softrank_cert.solvers import search_operator, units_per_second

    prof = cProfile.Profile(time.process_time)
    charged: dict[str, float] = {}
    timed: dict[str, float] = {}
    budgets: list = []  # the search's budget (search_operator makes one)
    start, cpu = time.perf_counter(), time.process_time()
    with charged_units(charged, timed, budgets):
        if profile:
            prof.enable()
        _, ends = search_operator(op, eps, work=work)
        prof.disable()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    parts = {part: 0.0 for part in [*PARTS, "rest"]}
    total = 0.0
    if profile:
        stats = pstats.Stats(prof)
        parts = {part: sum(cumulative(stats, s, f) for s, f in funcs) for part, funcs in PARTS.items()}
        lbfgs = sum(v[3] for (path, _l, func), v in stats.stats.items()  # the project's loop (older trees: scipy's)
                    if (func == "minimise" and path.endswith("lbfgs.py")) or (func == "minimize" and "scipy" in path))
        lbfgs -= cumulative(stats, "solvers/lower/smooth_key.py", "smooth_key_side")  # its own L-BFGS runs
        parts["L-BFGS outside the evaluations"] = max(lbfgs - parts["smoothed objective evaluations"], 0.0)
        total = sum(v[2] for v in stats.stats.values())  # all own time
        parts["rest"] = max(total - sum(parts.values()), 0.0)
    return {"operator": name, "wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
            "profiled_seconds": round(total, 2), "work_units": round(budgets[0].used if budgets else 0.0),
            "work_budget": budgets[0].work if budgets else None,
            "parts": {k: round(v, 2) for k, v in parts.items()},
            "charged_units": {k: round(v) for k, v in charged.items()},
            "charged_parts_cpu_seconds": {k: round(v, 2) for k, v in timed.items()}, "cprofile": profile,
            "units_per_second": units_per_second(*op.shape),
            "brackets": [{"eps": e.eps, "lower": e.lower.k, "upper": e.upper.r, "lower_origin": e.lower.method,
                          "upper_origin": e.upper.construction} for e in ends]}


def markdown(report: dict) -> str:
    heads = report["heads"]
    lines = [f"# Where the driver's seconds go: {report['name']}", "",
             "CPU seconds per part (cProfile cumulative CPU times; single-threaded BLAS)." if heads[0]["cprofile"]
             else "cProfile off: the whole run's CPU seconds and those of the charged parts (single-threaded BLAS).", "",
             "| part | " + " | ".join(h["operator"].rsplit("/", 1)[-1] for h in heads) + " |",
             "|---|" + "---|" * len(heads)]
    for part in (list(PARTS) + ["rest"]) if heads[0]["cprofile"] else []:
        lines.append(f"| {part} | " + " | ".join(f"{h['parts'][part]:.1f} ({100 * h['parts'][part] / max(h['profiled_seconds'], 1e-9):.0f}%)"
                                                for h in heads) + " |")
    if heads[0]["cprofile"]:
        lines.append("| total (profiled) | " + " | ".join(f"{h['profiled_seconds']:.1f}" for h in heads) + " |")
    lines.append("| CPU s (wall s) | " + " | ".join(f"{h['cpu_seconds']:.1f} ({h['wall_seconds']:.1f})" for h in heads) + " |")
    lines += ["", "CPU seconds (timed around each call" + (", under cProfile" if heads[0]["cprofile"] else ", cProfile off")
              + ") per charged second (units / units_per_second) of the parts whose charges are recorded:", "",
              "| part | " + " | ".join(h["operator"].rsplit("/", 1)[-1] for h in heads) + " |", "|---|" + "---|" * len(heads)]
    for part in CHARGED:
        cells = []
        for h in heads:
            units = h["charged_units"].get(part, 0)
            cpu = h["charged_parts_cpu_seconds"].get(part, 0.0)
            cells.append(f"{cpu / (units / h['units_per_second']):.2f}x ({cpu:.1f} s)" if units else "-")
        lines.append(f"| {part} | " + " | ".join(cells) + " |")
    lines.append("| work units used / budget | " + " | ".join(f"{h['work_units']:,} / {h['work_budget']:,.0f}" for h in heads) + " |")
    return "\n".join(lines) + "\n"


def panel_operators(path: Path, width: int) -> tuple[dict, dict]:
    """The width-``width`` operators of a panel file (``softrank panel`` output) by name, and
    what the report records of the file."""
    from softrank_cert.api import load_panel

    ops = {name: op for name, op in load_panel(path).items() if f"/w{width}/" in name}
    return ops, {"panel": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pydoc-topic", default="import")
    parser.add_argument("--doc", default=None, help="MiniLM on examples/data/DOC.txt instead of a pydoc topic")
    parser.add_argument("--panel", type=Path, default=None,
                        help="operators of a `softrank panel` file instead (e.g. --gguf smollm2), by --width and --heads")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--heads", default="L1H1,L4H6", help="comma list of LxHy")
    parser.add_argument("--eps", default="0.1,0.25,0.5")
    parser.add_argument("--chars", type=int, default=None,
                        help="characters of the topic (default 8,000 per 512-token window)")
    parser.add_argument("--work", type=float, default=None, help="work units per operator (default: the driver's)")
    parser.add_argument("--no-cprofile", action="store_true",
                        help="time only the charged parts (no profiler overhead; the parts table is then empty)")
    parser.add_argument("--name", default=None)
    parser.add_argument("--prefix", default="solvers_profile", help="file names: PREFIX_NAME.{json,md}")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    from bench_solvers import MINILM_WINDOW, minilm_panel, pydoc_text, stacked_panel
    from threadpoolctl import threadpool_limits

    windows = max(args.width // MINILM_WINDOW, 1)
    chars = args.chars or 8000 * windows
    if args.panel is not None:
        panel, document = panel_operators(args.panel, args.width)
    else:
        if args.doc is not None:
            path = ROOT / "examples" / "data" / f"{args.doc}.txt"
            document = {"doc": args.doc, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        else:
            path, digest = pydoc_text(args.pydoc_topic, Path(tempfile.mkdtemp()), chars)
            document = {"pydoc_topic": args.pydoc_topic, "chars": chars, "sha256": digest}
        panel = dict(stacked_panel(args.width, path) if args.width > MINILM_WINDOW else minilm_panel(args.width, path=path))
    wanted = args.heads.split(",")
    heads = []
    with threadpool_limits(1, "blas"):
        for name, op in panel.items():
            if name.rsplit("/", 1)[-1] in wanted:
                heads.append(profile_head(name, op, args.eps.split(","), args.work, not args.no_cprofile))
                print(json.dumps(heads[-1]), flush=True)
    name = args.name or f"w{args.width}_{args.doc or args.pydoc_topic}"
    report = {"name": name, "document": document,
              "work": args.work, "clock": "cpu", "heads": heads}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.prefix}_{name}.json").write_text(json.dumps(report, indent=1))
    (args.out_dir / f"{args.prefix}_{name}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
