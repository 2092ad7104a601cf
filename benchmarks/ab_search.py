"""Before / after of a search change, interleaved head by head: ``profile_driver.py`` run on
each head with two source trees in turn (``PYTHONPATH``), so that both see the same load.

Usage (what produced ``benchmarks/results/solvers_active_*``)::

    nice -n 10 python benchmarks/ab_search.py --before /work/main --panel /tmp/smol_lgpl21.npz \
        --width 512 --heads L10H4,L15H4,L2H0 --out benchmarks/results/solvers_active_smollm2_w512.jsonl
    nice -n 10 python benchmarks/ab_search.py --before /work/main --doc gfdl12 --width 512 \
        --heads L1H1,L4H6 --out benchmarks/results/solvers_active_minilm_w512.jsonl

(the panel: ``softrank panel --gguf smollm2 --text examples/data/lgpl21.txt --widths
128,256,512,1024,2048 --layers 2,10,15 --out /tmp/smol_lgpl21.npz``).  Each finished run is one
line of ``--out`` (``tree`` "before" or "after", ``profile_driver``'s head record); a run already
there is skipped, so an interrupted campaign resumes.  ``--summary`` writes the ``.md`` beside
it: per head and tree the brackets, CPU seconds and work units, and per tree the median
upper/lower ratio per tolerance and the median CPU seconds.  Each run is one
``profile_driver.py --no-cprofile`` process, niced by the caller, one BLAS thread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def done(out: Path) -> dict[tuple[str, str], dict]:
    """Finished runs of ``out``: (tree, head suffix) -> record."""
    runs: dict[tuple[str, str], dict] = {}
    if out.exists():
        for line in out.read_text().splitlines():
            row = json.loads(line)
            runs[(row["tree"], row["head"])] = row
    return runs


def run_one(tree: Path, head: str, args: argparse.Namespace) -> dict:
    """One head on one source tree, through ``profile_driver.py`` in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        source = ["--panel", str(args.panel)] if args.panel else ["--doc", args.doc]
        command = [sys.executable, str(ROOT / "benchmarks" / "profile_driver.py"), *source, "--width", str(args.width),
                   "--heads", head, "--eps", args.eps, "--no-cprofile", "--out-dir", tmp, "--name", "run"]
        if args.work:
            command += ["--work", str(args.work)]
        env = dict(os.environ, PYTHONPATH=str(tree))
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
        report = json.loads((Path(tmp) / "solvers_profile_run.json").read_text())
    (record,) = report["heads"]
    return record


def summary(rows: list[dict], eps: list[str]) -> str:
    """The markdown table of a campaign's lines."""
    heads = sorted({r["head"] for r in rows})
    lines = ["| head | tree | " + " | ".join(f"eps {e}" for e in eps) + " | CPU s | work units |",
             "|---|---|" + "---|" * len(eps) + "---:|---:|"]
    for head in heads:
        for r in sorted((r for r in rows if r["head"] == head), key=lambda r: r["tree"] != "before"):
            b = r["record"]["brackets"]
            lines.append(f"| {head} | {r['tree']} | " + " | ".join(f"[{x['lower']}, {x['upper']}]" for x in b)
                         + f" | {r['record']['cpu_seconds']:.0f} | {r['record']['work_units']:,} |")
    lines += ["", "| tree | " + " | ".join(f"median upper/lower eps {e}" for e in eps) + " | median CPU s | runs |",
              "|---|" + "---:|" * (len(eps) + 2)]
    for tree in ("before", "after"):
        mine = [r for r in rows if r["tree"] == tree and any(s["head"] == r["head"] and s["tree"] != tree for s in rows)]
        if not mine:
            continue
        ratios = [statistics.median(r["record"]["brackets"][i]["upper"] / max(r["record"]["brackets"][i]["lower"], 1)
                                    for r in mine) for i in range(len(eps))]
        cpu = statistics.median(r["record"]["cpu_seconds"] for r in mine)
        lines.append(f"| {tree} | " + " | ".join(f"{x:.2f}" for x in ratios) + f" | {cpu:.0f} | {len(mine)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--panel", type=Path, help="a `softrank panel` file")
    source.add_argument("--doc", help="MiniLM on examples/data/DOC.txt")
    parser.add_argument("--before", type=Path, required=True, help="the source tree of 'before' (e.g. /work/main)")
    parser.add_argument("--after", type=Path, default=ROOT, help="the source tree of 'after' (default: this one)")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--heads", required=True, help="comma list of LxHy")
    parser.add_argument("--eps", default="0.1,0.25,0.5")
    parser.add_argument("--work", type=float, default=None, help="work units per operator (default: the driver's)")
    parser.add_argument("--out", type=Path, required=True, help="the campaign's .jsonl (resumed when it exists)")
    args = parser.parse_args()
    finished = done(args.out)
    for head in args.heads.split(","):
        for tree, path in (("before", args.before), ("after", args.after)):
            if (tree, head) in finished:
                continue
            record = run_one(path, head, args)
            row = {"tree": tree, "head": head, "width": args.width, "work": args.work, "record": record}
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            finished[(tree, head)] = row
            print(tree, head, [(b["lower"], b["upper"]) for b in record["brackets"]], record["cpu_seconds"], flush=True)
    source_line = f"panel {args.panel.name}" if args.panel else f"MiniLM on examples/data/{args.doc}.txt"
    text = (f"# Before / after, {source_line}, width {args.width}, "
            f"{'default work' if not args.work else f'{args.work:,.0f} work units'}\n\n"
            f"Interleaved head by head (`benchmarks/ab_search.py`); brackets at eps {args.eps}.\n\n")
    args.out.with_suffix(".md").write_text(text + summary(list(done(args.out).values()), args.eps.split(",")))


if __name__ == "__main__":
    main()
