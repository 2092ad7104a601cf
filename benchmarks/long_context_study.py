"""Rank against width on one real document (issue 44, item 4): the same heads bracketed at every
width of a panel, with the figure.

The panels (what produced ``benchmarks/results/long_context_smollm2_lgpl21.*`` and
``long_context_qwen2.5-1.5b_lgpl21.*``)::

    softrank panel --gguf smollm2 --text examples/data/lgpl21.txt --widths 128,256,512,1024,2048 \
        --layers 2,10,15 --heads 0,1,4,6 --out /tmp/smol_lgpl21.npz
    softrank panel --gguf qwen2.5-1.5b --text examples/data/lgpl21.txt --widths 128,256,512,1024,2048 \
        --layers 1,14,27 --out /tmp/qwen15_lgpl21.npz

``lgpl21.txt`` (26,530 characters, more than 2,048 tokens of either model) is a document no solver
setting was tuned on.  SmolLM2's heads (classified at width 512 from ``A`` in float64, not
certified): L15H6 sink-heavy (mean attention on the first token 0.76), L2H1 local (0.95 of each
row's mass within 16 tokens of the diagonal), L2H0 broad (row entropy 4.48 nats), and the issue's
L10H4 and L15H4.  ``--heads auto`` picks such heads in any panel: the most sink-heavy, then the
most local, then the broadest of the heads at ``--classify-width``, and a typical one (the median
row entropy of the rest; :func:`classify`).

Usage::

    python benchmarks/long_context_study.py run /tmp/smol_lgpl21.npz --heads L15H6,L2H1,L2H0,L15H4
    python benchmarks/long_context_study.py run /tmp/qwen15_lgpl21.npz --heads auto --name qwen2.5-1.5b_lgpl21
    python benchmarks/long_context_study.py report --name qwen2.5-1.5b_lgpl21

``run`` brackets each (width, head) at eps 0.1 / 0.25 / 0.5 with ``--work-scale`` times the
driver's default work of that width (:func:`softrank_cert.solvers.work.default_work`; 1: the
default), smallest widths first, one JSON line per finished operator in
``benchmarks/results/long_context_<name>.jsonl``; finished operators are skipped, so it resumes.
Progress goes to stderr (``stage bracket: i/n operator``).  Every end is kernel-VERIFIED
(``bracket_operator`` returns only sealed ends).  ``report`` writes the ``.md`` table (with the
median upper/lower per width) and the ``.png`` figure: verified rank (bracket) against width, one
panel per tolerance, one line per head, log-log, with ``r = w`` for reference.
"""

from __future__ import annotations

import argparse
import json
import sys
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import softrank_cert  # noqa: E402,F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np  # noqa: E402

HEADS = {"L15H6": "sink-heavy", "L2H1": "local", "L2H0": "broad", "L10H4": "issue head", "L15H4": "issue head"}
EPS = ["0.1", "0.25", "0.5"]
#: Tokens either side of the diagonal that count as "local" in :func:`head_profile`.
LOCAL_BAND = 16
#: How the report names a panel's model (the first segment of its operator names).
MODEL_TITLES = {"smollm2": "SmolLM2-135M (Q4_1 GGUF)", "qwen2.5-1.5b": "Qwen2.5-Coder-1.5B (Q4_K_M GGUF)",
                "qwen2.5-0.5b": "Qwen2.5-Coder-0.5B (Q4_K_M GGUF)"}
KIND_ORDER = ["sink-heavy", "local", "broad", "typical", "issue head"]


def out_path(args: argparse.Namespace, suffix: str) -> Path:
    tag = "" if args.work_scale == 1 else f"_work{args.work_scale:g}"
    return args.out_dir / f"long_context_{args.name}{tag}{suffix}"


def finished(path: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return {r["operator"]: r for r in rows}


def head_profile(A: np.ndarray) -> dict[str, float]:
    """Float64 (not certified) shape of one attention matrix: the mean attention on the first
    token (``sink``), the mean row mass within ``LOCAL_BAND`` tokens of the diagonal (``local``)
    and the mean row entropy in nats (``entropy``)."""
    m, n = A.shape
    i, j = np.indices((m, n))
    band = np.abs(i - j) <= LOCAL_BAND
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(A > 0, A * np.log(A), 0.0).sum(axis=1)
    return {"sink": float(A[:, 0].mean()), "local": float((A * band).sum(axis=1).mean()),
            "entropy": float(entropy.mean())}


def classify(ops: dict, width: int) -> dict[str, dict]:
    """The most sink-heavy, then the most local, then the broadest (largest mean row entropy)
    head among the panel's operators at ``width``, and a typical one (the median entropy of the
    rest, when there is a rest): ``{head: {"kind": ..., **profile}}``."""
    from softrank_cert.util.dense import attention_matrix

    profiles = {name.rsplit("/", 1)[1]: head_profile(attention_matrix(op))
                for name, op in ops.items() if f"/w{width}/" in name}
    if len(profiles) < 3:
        raise SystemExit(f"--heads auto needs at least 3 heads at width {width} in the panel")
    chosen: dict[str, dict] = {}
    for kind, key in (("sink-heavy", "sink"), ("local", "local"), ("broad", "entropy")):
        head = max((h for h in profiles if h not in chosen), key=lambda h: profiles[h][key])
        chosen[head] = {"kind": kind, **{k: round(v, 3) for k, v in profiles[head].items()}}
    rest = sorted((h for h in profiles if h not in chosen), key=lambda h: (profiles[h]["entropy"], h))
    if rest:
        head = rest[(len(rest) - 1) // 2]
        chosen[head] = {"kind": "typical", **{k: round(v, 3) for k, v in profiles[head].items()}}
    return chosen


def wanted_heads(args: argparse.Namespace, ops: dict) -> dict[str, str]:
    """``{head: kind}`` to bracket: ``--heads auto`` classifies (and records the profiles next
    to the results), otherwise the named heads with the SmolLM2 kinds of ``HEADS``."""
    if args.heads != "auto":
        return {h: HEADS.get(h, "") for h in args.heads.split(",")}
    chosen = classify(ops, args.classify_width)
    path = out_path(args, "_heads.json")
    path.write_text(json.dumps({"width": args.classify_width, "heads": chosen}, indent=1) + "\n")
    return {h: c["kind"] for h, c in chosen.items()}


def run(args: argparse.Namespace) -> None:
    from softrank_cert.api import load_panel
    from softrank_cert.solvers import bracket_operator, default_work, one_blas_thread

    ops = load_panel(args.panel)
    heads = wanted_heads(args, ops)
    path = out_path(args, ".jsonl")
    done = finished(path)
    plan = [(w, h, n) for w in (int(x) for x in args.widths.split(",")) for h in heads
            for n in [next((n for n in ops if n.endswith(f"/w{w}/{h}")), None)] if n is not None]
    for i, (width, head, name) in enumerate(plan, 1):
        if name in done:
            continue
        print(f"long_context_study: stage bracket: {i}/{len(plan)} {name}", file=sys.stderr, flush=True)
        op = ops[name]
        work = round(args.work_scale * default_work(*op.shape))
        cpu = time.process_time()
        with one_blas_thread():
            brackets = bracket_operator(op, EPS, work=work)
        row = {"operator": name, "width": width, "head": head, "kind": heads[head], "work": work,
               "work_scale": args.work_scale, "cpu_seconds": round(time.process_time() - cpu, 1),
               "brackets": [{"eps": b.eps, "lower": b.lower.k, "upper": b.upper.r} for b in brackets]}
        with path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(name, [(b["lower"], b["upper"]) for b in row["brackets"]], row["cpu_seconds"], flush=True)


def title(rows: list[dict]) -> str:
    """``MODEL on DOCUMENT`` from the first operator's name (``model/document/wN/LxHy``)."""
    model, document = rows[0]["operator"].split("/")[:2]
    return f"{MODEL_TITLES.get(model, model)} on {document}"


def median_ratios(rows: list[dict]) -> list[float]:
    """Median upper/lower over ``rows`` (at least one), per tolerance."""
    return [statistics.median(r["brackets"][i]["upper"] / max(r["brackets"][i]["lower"], 1) for r in rows)
            for i in range(len(EPS))]


def table(rows: list[dict], heads: list[str], widths: list[int], label: str) -> str:
    """The markdown report: brackets per head and width, then the median upper/lower per width."""
    kind = {r["head"]: r["kind"] for r in rows}
    lines = [f"# Rank against width: {title(rows)} ({label})", "",
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
        lines.append(f"| {h} | {kind[h]} | " + " | ".join(cells) + " |")
    lines += ["", "Median upper/lower over the heads at each width (eps " + " / ".join(EPS) + "):", "",
              "| width | heads | median upper/lower | median CPU s |", "|---:|---:|---|---:|"]
    for w in widths:
        mine = [r for r in rows if r["width"] == w]
        ratios = " / ".join(f"{x:.2f}" for x in median_ratios(mine))
        cpu = statistics.median(r["cpu_seconds"] for r in mine)
        lines.append(f"| {w} | {len(mine)} | {ratios} | {cpu:.0f} |")
    return "\n".join(lines) + "\n"


def report(args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(finished(out_path(args, ".jsonl")).values())
    if not rows:
        raise SystemExit(f"no finished operators in {out_path(args, '.jsonl')}")
    kind = {r["head"]: r["kind"] for r in rows}
    heads = sorted(kind, key=lambda h: (KIND_ORDER.index(kind[h]) if kind[h] in KIND_ORDER else len(KIND_ORDER), h))
    widths = sorted({r["width"] for r in rows})
    label = "the default work" if args.work_scale == 1 else f"{args.work_scale:g} x the default work of each width"
    out_path(args, ".md").write_text(table(rows, heads, widths, label))
    fig, axes = plt.subplots(1, len(EPS), figsize=(4.2 * len(EPS), 3.8), sharey=True)
    for i, (ax, eps) in enumerate(zip(axes, EPS)):
        for h in heads:
            mine = sorted((r for r in rows if r["head"] == h), key=lambda r: r["width"])
            x = [r["width"] for r in mine]
            lo = [max(r["brackets"][i]["lower"], 1) for r in mine]
            hi = [r["brackets"][i]["upper"] for r in mine]
            line, = ax.plot(x, hi, marker="v", label=f"{h} ({kind[h]})")
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
    fig.suptitle(f"{title(rows)}: verified rank bracket against width ({label}); the band between the ends"
                 " holds the true rank", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(out_path(args, ".png"), dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["run", "report"])
    parser.add_argument("panel", type=Path, nargs="?")
    parser.add_argument("--widths", default="128,256,512,1024,2048")
    parser.add_argument("--heads", default=",".join(HEADS),
                        help="comma-separated heads (e.g. L2H0), or 'auto': a sink-heavy, a local, a broad and a typical head")
    parser.add_argument("--classify-width", type=int, default=512, help="the width --heads auto classifies at")
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
