"""Side-by-side table of bench_solvers.py results on the same operators (before / after / ablations).

Usage (what produced the committed comparison)::

    python benchmarks/compare_solvers.py --name pyimport \
        benchmarks/results/solvers_pyimport_w128_before.json benchmarks/results/solvers_pyimport_w128_after.json \
        benchmarks/results/solvers_pyimport_w128_signed.json \
        benchmarks/results/solvers_pyimport_w512_before.json benchmarks/results/solvers_pyimport_w512_after.json

Writes ``benchmarks/results/solvers_compare_<name>.md``: per results file and tolerance the
median upper/lower ratio, the resolved share, the median lower and upper ends, the median wall
and CPU seconds per operator (all tolerances together) and which method / construction produced
the ends, on the operators all files of the same width share.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def width(report: dict) -> int:
    return int(report["operators"][0]["operator"].rsplit("/w", 1)[1].split("/")[0])


def table(reports: list[tuple[str, dict]], eps_list: list[str]) -> list[str]:
    names = [set(r["operator"] for r in rep["operators"]) for _, rep in reports]
    shared = set.intersection(*names)
    lines = [f"{len(shared)} operators of width {width(reports[0][1])} in every file.", "",
             "| run | eps | median upper/lower | resolved | median lower | median upper | lower ends by | upper ends by |",
             "|---|---|---|---|---|---|---|---|"]
    for label, rep in reports:
        rows = [r for r in rep["operators"] if r["operator"] in shared]
        for i, eps in enumerate(eps_list):
            per = [r["brackets"][i] for r in rows]
            ratio = statistics.median(b["upper"] / max(b["lower"], 1) for b in per)
            resolved = sum(b["lower"] == b["upper"] for b in per) / len(per)
            methods = ", ".join(f"{m} {n}" for m, n in Counter(b["method"] for b in per).most_common())
            constructions = ", ".join(f"{c} {n}" for c, n in Counter(b["construction"] for b in per).most_common())
            lines.append(f"| {label} | {eps} | {ratio:.2f} | {100 * resolved:.0f}% | "
                         f"{statistics.median(b['lower'] for b in per):g} | {statistics.median(b['upper'] for b in per):g} | "
                         f"{methods} | {constructions} |")
    lines += ["", "| run | median wall s | median CPU s | max wall s | median budget s |", "|---|---|---|---|---|"]
    for label, rep in reports:
        rows = [r for r in rep["operators"] if r["operator"] in shared]
        cpu = [r["cpu_seconds"] for r in rows if "cpu_seconds" in r]
        lines.append(f"| {label} | {statistics.median(r['seconds'] for r in rows):.1f} | "
                     f"{statistics.median(cpu) if cpu else float('nan'):.1f} | {max(r['seconds'] for r in rows):.1f} | "
                     f"{statistics.median(r['budget_seconds'] for r in rows):.0f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--eps", default="0.1,0.25,0.5")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    eps_list = args.eps.split(",")
    by_width: dict[int, list[tuple[str, dict]]] = {}
    for path in args.files:
        rep = json.loads(path.read_text())
        by_width.setdefault(width(rep), []).append((rep["name"], rep))
    lines = [f"# Bracket solvers compared: {args.name}", ""]
    for w in sorted(by_width):
        lines += [f"## Width {w}", ""] + table(by_width[w], eps_list) + [""]
    out = args.out_dir / f"solvers_compare_{args.name}.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
