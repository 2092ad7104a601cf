"""Rank against width on one real document (issue 44, item 4): the same SmolLM2 heads (or any
panel's) bracketed at every width of a panel, with the figure.

The panel (what produced ``benchmarks/results/long_context_smollm2_lgpl21.*``)::

    softrank panel --gguf smollm2 --text examples/data/lgpl21.txt --widths 128,256,512,1024,2048 \
        --layers 2,10,15 --out /tmp/smol_lgpl21.npz

``lgpl21.txt`` (26,530 characters, more than 2,048 SmolLM2 tokens) is a document no solver setting
was tuned on.  Heads (classified at width 512 from ``A`` in float64, not certified): L15H6
sink-heavy (mean attention on the first token 0.76), L2H1 local (0.95 of each row's mass within 16
tokens of the diagonal), L2H0 broad (row entropy 4.48 nats), and the issue's L10H4 and L15H4.

Usage::

    nice -n 10 python benchmarks/long_context_study.py run /tmp/smol_lgpl21.npz --work-scale 0.0625
    python benchmarks/long_context_study.py report --work-scale 0.0625

``run`` brackets each (width, head) at eps 0.1 / 0.25 / 0.5 with ``--work-scale`` times the
driver's default work of that width (:func:`softrank_cert.solvers.work.default_work`; 1: the
default), smallest widths first, one JSON line per finished operator in
``benchmarks/results/long_context_<name>.jsonl``; finished operators are skipped, so it resumes.
Every end is kernel-VERIFIED (``bracket_operator`` returns only sealed ends).  ``report`` writes
the ``.md`` table and the ``.png`` figure: verified rank (bracket) against width, one panel per
tolerance, one line per head, log-log, with ``r = w`` for reference.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HEADS = {"L15H6": "sink-heavy", "L2H1": "local", "L2H0": "broad", "L10H4": "issue head", "L15H4": "issue head"}
EPS = ["0.1", "0.25", "0.5"]


def out_path(args: argparse.Namespace, suffix: str) -> Path:
    tag = "" if args.work_scale == 1 else f"_work{args.work_scale:g}"
    return args.out_dir / f"long_context_{args.name}{tag}{suffix}"


def finished(path: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return {r["operator"]: r for r in rows}


def run(args: argparse.Namespace) -> None:
    from softrank_cert.api import load_panel
    from softrank_cert.solvers import bracket_operator, default_work, one_blas_thread

    ops = load_panel(args.panel)
    path = out_path(args, ".jsonl")
    done = finished(path)
    wanted = [w for w in (int(x) for x in args.widths.split(","))]
    for width in wanted:
        for head in args.heads.split(","):
            name = next((n for n in ops if n.endswith(f"/w{width}/{head}")), None)
            if name is None or name in done:
                continue
            op = ops[name]
            work = round(args.work_scale * default_work(*op.shape))
            cpu = time.process_time()
            with one_blas_thread():
                brackets = bracket_operator(op, EPS, work=work)
            row = {"operator": name, "width": width, "head": head, "kind": HEADS.get(head, ""), "work": work,
                   "work_scale": args.work_scale, "cpu_seconds": round(time.process_time() - cpu, 1),
                   "brackets": [{"eps": b.eps, "lower": b.lower.k, "upper": b.upper.r} for b in brackets]}
            with path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(name, [(b["lower"], b["upper"]) for b in row["brackets"]], row["cpu_seconds"], flush=True)


def report(args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(finished(out_path(args, ".jsonl")).values())
    order = list(HEADS)
    heads = sorted({r["head"] for r in rows}, key=lambda h: (order.index(h) if h in order else len(order), h))
    widths = sorted({r["width"] for r in rows})
    label = "the default work" if args.work_scale == 1 else f"{args.work_scale:g} x the default work of each width"
    lines = [f"# Rank against width: SmolLM2 on lgpl21 ({label})", "",
             "Kernel-VERIFIED brackets [lower, upper] at eps " + " / ".join(EPS)
             + " (`benchmarks/long_context_study.py`); CPU seconds per operator on a 2-core machine shared"
             " with other jobs.", "",
             "| head | kind | " + " | ".join(f"w{w}" for w in widths) + " |", "|---|---|" + "---|" * len(widths)]
    for h in heads:
        cells = []
        for w in widths:
            r = next((r for r in rows if r["head"] == h and r["width"] == w), None)
            cells.append("-" if r is None else " ".join(f"[{b['lower']}, {b['upper']}]" for b in r["brackets"])
                         + f" ({r['cpu_seconds']:.0f} s)")
        lines.append(f"| {h} | {HEADS.get(h, '')} | " + " | ".join(cells) + " |")
    out_path(args, ".md").write_text("\n".join(lines) + "\n")
    fig, axes = plt.subplots(1, len(EPS), figsize=(4.2 * len(EPS), 3.8), sharey=True)
    for i, (ax, eps) in enumerate(zip(axes, EPS)):
        for h in heads:
            mine = sorted((r for r in rows if r["head"] == h), key=lambda r: r["width"])
            x = [r["width"] for r in mine]
            lo = [max(r["brackets"][i]["lower"], 1) for r in mine]
            hi = [r["brackets"][i]["upper"] for r in mine]
            line, = ax.plot(x, hi, marker="v", label=f"{h} ({HEADS.get(h, '')})")
            ax.plot(x, lo, marker="^", color=line.get_color(), linestyle="--")
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15)
        ax.plot(widths, widths, color="grey", linewidth=0.8, label="r = w")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_title(f"eps {eps}")
        ax.set_xlabel("width (tokens)")
    axes[0].set_ylabel("certified rank: upper (solid) / lower (dashed)")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=8, frameon=False)
    fig.suptitle(f"SmolLM2-135M on lgpl21: verified rank bracket against width ({label})", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(out_path(args, ".png"), dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["run", "report"])
    parser.add_argument("panel", type=Path, nargs="?")
    parser.add_argument("--widths", default="128,256,512,1024,2048")
    parser.add_argument("--heads", default=",".join(HEADS))
    parser.add_argument("--work-scale", type=float, default=1.0, help="fraction of the default work of each width")
    parser.add_argument("--name", default="smollm2_lgpl21")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    if args.step == "run":
        if args.panel is None:
            raise SystemExit("run needs the panel file")
        run(args)
    else:
        report(args)


if __name__ == "__main__":
    main()
