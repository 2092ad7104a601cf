"""Benchmark of the bracket solvers: kernel-verified brackets on a panel of operators.

Usage (what produced the committed results: default work unless --work; two operators at a
time, one core each; every run resumable with --resume)::

    python benchmarks/bench_solvers.py --docs apache2,mpl2,pydoc:customization --width 128 --jobs 2 \
        --name three_docs_w128 --before benchmarks/results/solvers_minilm_w128_all.json   # ~21 min
    python benchmarks/bench_solvers.py --docs apache2,mpl2,pydoc:customization --width 128 --every 3 \
        --work 448000 --jobs 2 --name three_docs_w128_4x                                  # 4x work
    python benchmarks/bench_solvers.py --docs apache2,mpl2 --width 512 --every 12 --offset 0,6 --jobs 2 \
        --name twelve_w512 --before benchmarks/results/solvers_minilm_w512_twelve.json     # ~9 min
    python benchmarks/bench_solvers.py --docs pydoc:customization,pydoc:import --width 512 --heads H1,H6 \
        --layers 1,4 --jobs 2 --name pydoc_w512 --before benchmarks/results/solvers_pyimport_w512_after.json
    python benchmarks/bench_solvers.py --docs pydoc:customization --width 512 --heads H1,H6 --layers 1,4 \
        --work 6240108 --jobs 2 --name customization_w512_4x                             # 4x work
    python benchmarks/bench_solvers.py --docs pydoc:import --width 128 --heads H1,H6 --jobs 2 \
        --name pyimport_w128_now --before benchmarks/results/solvers_pyimport_w128_after.json
    python benchmarks/bench_solvers.py --docs pydoc:customization --width 512 --heads H1,H6 --layers 1,4 \
        --work 390007 --jobs 1 --name quarter_w512 --before benchmarks/results/solvers_pydoc_w512.json  # 1/4 work
    python benchmarks/bench_solvers.py --docs pydoc:typesseq --width 1024 --offset 13 --every 100 --jobs 1 \
        --name stack_w1024 --before benchmarks/results/solvers_share_w1024.json
                                     # L1H1 of two stacked 512-token windows (stacked_panel); ~400 s CPU
    python benchmarks/bench_solvers.py --docs artistic,lgpl3,bsd --width 128 --every 3 --offset 0,1,2 --jobs 2 \
        --name heldout_w128                                  # 72 heads of three licences no solver run had used
    python benchmarks/bench_solvers.py --docs gpl3 --width 2048 --every 100 --offset 13 --jobs 1 --name gpl3_w2048
                                     # L1H1 of four stacked windows at the default work (600 s nominal)

Runs of a driver variant that was not kept (a witness share of 0.85 from 512 x 512 on;
docs/solvers.md, "Wide operators"): ``solvers_share_w512``, ``solvers_share_w512_quarter`` (the
pydoc_w512 and quarter_w512 commands) and ``solvers_share_w1024`` (the stack_w1024 command).
Warm starts of new ranks in the witness search (not kept; docs/solvers.md, "Wide operators"):
``solvers_warm_w512_{before,above,both}`` and their ``_quarter`` runs (``--work 390007``) came from
one call per head, today's tree and a variant's tree alternating (``PYTHONPATH``), then one call
over all four with ``--resume`` (and ``--before benchmarks/results/solvers_warm_w512_before.json``)
for the summary::

    nice -n 5 python benchmarks/bench_solvers.py --docs gfdl13 --width 512 --heads H1 --layers 1 --jobs 1 \
        --resume --name warm_w512_before                 # then H6 1, H1 4, H6 4; likewise warm_w512_above
    python benchmarks/bench_solvers.py --docs gfdl13 --width 128 --every 12 --offset 1 --jobs 1 --name warm_w128_before

The large-k lower family (``general_smooth_*``; docs/solvers.md, "Lower pairs beyond signed
groups"): ``solvers_lowk_w512`` (kept) and ``solvers_lowk_w512_ungated`` (its first version, every
per-k unit run)::

    nice -n 5 python benchmarks/bench_solvers.py --docs gfdl13 --width 512 --heads H1,H6 --layers 1,4 --jobs 1 \
        --name lowk_w512 --before benchmarks/results/solvers_warm_w512_before.json

Two-stage probes on wide operators (kept; docs/solvers.md, "Wide operators"): ``solvers_upper512_stagesonly``
(the warm_w512 command over all four heads, ``--before benchmarks/results/solvers_warm_w512_before.json``).
With a fresh-rank squeeze abort as well (not kept): ``solvers_upper512_wide2`` and ``_wide2_quarter``
(``--work 390007``), ``solvers_upper512_wide2_w128_ungated`` (the warm_w128 command on a copy with
``WIDE_FROM = 0``); the abort alone: ``solvers_upper512_abortnew_quarter`` and the one-head
``solvers_upper512_abortnew.jsonl``.

Earlier committed results (older drivers; ``PYTHONPATH=/path/to/that/tree`` runs another
tree's solvers)::

    python benchmarks/bench_solvers.py --pydoc-topic import --width 128 --heads H1,H6 --name pyimport_w128_after
    python benchmarks/bench_solvers.py --pydoc-topic import --width 512 --heads H1,H6 --layers 1,4 \
        --name pyimport_w512_after --resume
    python benchmarks/bench_solvers.py --docs apache2 --width 128 --jobs 1 --name minilm_w128_all \
        --before benchmarks/results/solvers_minilm_w128_before.json
    python benchmarks/bench_solvers.py --docs apache2,mpl2 --width 512 --every 12 --offset 0,6 --jobs 1 \
        --name minilm_w512_twelve --before benchmarks/results/solvers_minilm_w512_before.json
    python benchmarks/bench_solvers.py --panel synthetic --count 12        # no model needed
    python benchmarks/bench_solvers.py --smoke                             # CI-sized

Per tolerance it reports the median upper/lower ratio, the resolved share, the median and
maximum seconds per operator (all tolerances together, with the budget each had), which
construction / method produced each end, and the median rank ratio of the truncated SVD to the
best verified witness.  ``--before`` adds a before/after table against an earlier results file
(same operators only).  Everything, per operator too, goes to
``benchmarks/results/solvers_<name>.{json,md}``; every finished operator is appended to
``solvers_<name>.jsonl`` at once, and ``--resume`` skips the operators already there (same
arguments).  Per operator it also records the CPU seconds and the stage times of the driver
(``stages``: wall seconds spent in each progress stage).  Each worker runs single-threaded BLAS.
``--pydoc-topic NAME`` (or a ``pydoc:NAME`` entry of ``--docs``) takes the document from the interpreter's own ``pydoc_data.topics``
(first 8,000 characters at a line break, SHA-256 recorded): a text the project's studies have
not used when NAME is not one of examples/data/py-*.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import softrank_cert  # noqa: F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np

from softrank_cert.kernel import Operator
from softrank_cert.solvers import Dense, bracket_operator

try:
    from softrank_cert.solvers import tsvd_errors
except ImportError:  # an older tree's solvers (before/after runs with PYTHONPATH)
    try:
        from softrank_cert.solvers.candidates import tsvd_errors
    except ImportError:
        from softrank_cert.solvers.profiles import tsvd_errors

ROOT = Path(__file__).resolve().parents[1]


def minilm_panel(width: int, doc: str = "apache2", path: Path | None = None) -> list[tuple[str, Operator]]:
    """All 72 MiniLM-L6 heads on the first ``width`` tokens of examples/data/DOC.txt (or ``path``)."""
    from softrank_cert.models import build_panel, provenance_names

    arrays = build_panel("minilm", path or ROOT / "examples" / "data" / f"{doc}.txt", [width])
    return [(n, Operator("qk", {"Q": arrays[f"{n}/Q"], "K": arrays[f"{n}/K"]})) for n in provenance_names(arrays)]


#: Positions one MiniLM window holds; wider operators stack consecutive windows (:func:`stacked_panel`).
MINILM_WINDOW = 512


def stacked_panel(width: int, path: Path) -> list[tuple[str, Operator]]:
    """All 72 MiniLM-L6 heads of ``width / 512`` consecutive 512-token windows of a document,
    stacked: window ``w`` is ``[CLS] + word pieces 510 w .. 510 w + 509 + [SEP]``, run through the
    encoder on its own, and the operator of a head is ``softmax(beta Q K^T)`` with ``Q``, ``K`` the
    windows' queries and keys one above the other (``width x width``: every query of every window
    against every key, as a concatenated key cache would be; the model itself stops at 512)."""
    from softrank_cert.models import load_model
    from softrank_cert.models.panel import _head_operators

    model = load_model("minilm")
    windows = width // MINILM_WINDOW
    if windows * MINILM_WINDOW != width:
        raise SystemExit(f"--width {width}: stacked widths are multiples of {MINILM_WINDOW}")
    pieces = model.word_pieces(path.read_text())
    inner = MINILM_WINDOW - 2
    if len(pieces) < windows * inner:
        raise SystemExit(f"{path.name} has {len(pieces)} word pieces; {windows} windows need {windows * inner}")
    parts: list[dict[str, np.ndarray]] = []
    for w in range(windows):
        ids = model.prefix_ids("", MINILM_WINDOW, pieces[w * inner:(w + 1) * inner])
        arrays: dict[str, np.ndarray] = {}
        list(_head_operators(arrays, "h", model.forward(ids), list(range(model.num_layers)), list(range(model.num_heads))))
        parts.append(arrays)
    names = sorted({k.rsplit("/", 1)[0] for k in parts[0]}, key=lambda n: [int(x) for x in n[3:].split("H")])
    base = f"minilm/{path.stem}/w{width}stack"
    return [(f"{base}/{n[2:]}", Operator("qk", {"Q": np.vstack([a[f"{n}/Q"] for a in parts]),
                                                "K": np.vstack([a[f"{n}/K"] for a in parts])})) for n in names]


def document_text(source: str, out_dir: Path, chars: int = 8000) -> tuple[Path, str | None]:
    """A document as a file: ``pydoc:TOPIC`` (:func:`pydoc_text`, written under ``out_dir``, with
    its SHA-256) or ``NAME`` (examples/data/NAME.txt, a committed file: no digest)."""
    if source.startswith("pydoc:"):
        return pydoc_text(source.split(":", 1)[1], out_dir, chars)
    return ROOT / "examples" / "data" / f"{source}.txt", None


def pydoc_text(topic: str, out_dir: Path, chars: int = 8000) -> tuple[Path, str]:
    """The pydoc topic's first ``chars`` characters (8,000), cut at the last line break, as a file under
    ``out_dir`` named like the examples (``py-TOPIC.txt``), and its SHA-256."""
    import hashlib
    from pydoc_data.topics import topics

    text = topics[topic][:chars]
    text = text[:text.rfind("\n") + 1] if "\n" in text else text
    path = out_dir / f"py-{topic}.txt"
    path.write_text(text)
    return path, hashlib.sha256(text.encode()).hexdigest()


def keep_head(name: str, heads: set[str] | None, layers: set[str] | None) -> bool:
    """Whether operator ``.../LxHy`` is among ``heads`` (``Hy``) and ``layers`` (``Lx``)."""
    layer, head = name.rsplit("/", 1)[-1].split("H")
    return (heads is None or f"H{head}" in heads) and (layers is None or layer in layers)


def synthetic_panel(count: int, width: int, d: int = 64) -> list[tuple[str, Operator]]:
    """Random qk operators, score scale log-uniform in [0.7, 6], power-law key/query spectra."""
    out = []
    for seed in range(count):
        rng = np.random.default_rng(seed)
        scale, decay = np.exp(rng.uniform(np.log(0.7), np.log(6.0))), rng.uniform(0.0, 1.5)
        spec = (1.0 + np.arange(d)) ** -decay
        spec *= np.sqrt(d / (spec ** 2).sum() * scale)
        Q, K = rng.standard_normal((width, d)) * spec, rng.standard_normal((width, d)) * spec
        out.append((f"synthetic/s{seed}/w{width}", Operator("qk", {"Q": Q, "K": K})))
    return out


def tsvd_rank(errors: np.ndarray, eps: float, p: int) -> int:
    return next((r for r in range(len(errors)) if errors[r] <= eps), p)


def solve(task: tuple[str, dict, list[str], float | None]) -> dict:
    """Bracket one (packed) operator in a worker process and describe the result."""
    from softrank_cert.plumbing.parallel import unpack_operator
    from softrank_cert.solvers import default_budget_seconds

    name, spec, eps_list, budget, work = task
    op = unpack_operator(spec)
    stages: dict[str, float] = {}
    last = [0.0]

    def progress(stage: str, _elapsed: float, _nominal: float) -> None:
        now = time.perf_counter() - start
        stages[stage] = stages.get(stage, 0.0) + now - last[0]
        last[0] = now

    kwargs: dict = {"progress": progress}
    if work is not None:
        kwargs["work"] = work
    if budget is not None:
        kwargs["budget_seconds"] = budget
    start, cpu = time.perf_counter(), time.process_time()
    brackets = bracket_operator(op, eps_list, **kwargs)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if budget is None:
        budget = default_budget_seconds(*op.shape)
    d = Dense.of(op)
    errors = tsvd_errors(d.A, d.svd)
    return {
        "operator": name, "seconds": seconds, "cpu_seconds": cpu, "budget_seconds": budget, "work": work,
        "stages": {k: round(v, 3) for k, v in stages.items()},
        "brackets": [{"eps": b.eps, "lower": b.lower.k, "upper": b.upper.r, "method": b.lower.method,
                      "construction": b.upper.construction,
                      "tsvd_rank": tsvd_rank(errors, float(b.eps), op.p)} for b in brackets],
    }


def summarise(rows: list[dict], eps_list: list[str]) -> dict:
    summary: dict = {}
    for i, eps in enumerate(eps_list):
        per = [r["brackets"][i] for r in rows]
        summary[eps] = {
            "median_ratio": statistics.median(b["upper"] / max(b["lower"], 1) for b in per),
            "resolved_fraction": sum(b["lower"] == b["upper"] for b in per) / len(per),
            "median_lower": statistics.median(b["lower"] for b in per),
            "median_upper": statistics.median(b["upper"] for b in per),
            "median_tsvd_over_best_upper": statistics.median(b["tsvd_rank"] / max(b["upper"], 1) for b in per),
            "lower_methods": {m: sum(b["method"] == m for b in per) for m in sorted({b["method"] for b in per})},
            "upper_constructions": {c: sum(b["construction"] == c for b in per)
                                    for c in sorted({b["construction"] for b in per})},
        }
    seconds = [r["seconds"] for r in rows]
    summary["median_seconds_per_operator"] = statistics.median(seconds)
    summary["max_seconds_per_operator"] = max(seconds)
    summary["max_seconds_over_budget"] = max(r["seconds"] / r["budget_seconds"] for r in rows)
    summary["operators"] = len(rows)
    return summary


def before_after(rows: list[dict], before_path: Path, eps_list: list[str]) -> dict:
    """Per eps: median ratio / resolved share / median seconds of an earlier run against this
    one, on the operators both contain."""
    old = {r["operator"]: r for r in json.loads(before_path.read_text())["operators"]}
    both = [r for r in rows if r["operator"] in old]
    if not both:
        return {}
    out: dict = {"file": str(before_path.relative_to(ROOT)), "operators": len(both)}
    before, after = summarise([old[r["operator"]] | {"budget_seconds": old[r["operator"]].get("budget_seconds", 1)}
                               for r in both], eps_list), summarise(both, eps_list)
    for eps in eps_list:
        out[eps] = {key: [before[eps][key], after[eps][key]]
                    for key in ("median_ratio", "resolved_fraction", "median_lower", "median_upper")}
    out["median_seconds_per_operator"] = [before["median_seconds_per_operator"], after["median_seconds_per_operator"]]
    return out


def markdown(report: dict) -> str:
    s, eps_list = report["summary"], report["args"]["eps"].split(",")
    lines = [f"# Bracket solvers: {report['name']}", "",
             f"{s['operators']} operators; default budget per operator (all tolerances together) unless "
             f"`--budget` was given; median {s['median_seconds_per_operator']:.1f} s, max "
             f"{s['max_seconds_per_operator']:.1f} s, max seconds / budget {s['max_seconds_over_budget']:.2f}.", "",
             "| eps | median upper/lower | resolved | median lower | median upper | tsvd / best upper | lower ends by | upper ends by |",
             "|---|---|---|---|---|---|---|---|"]
    for eps in eps_list:
        e = s[eps]
        fmt = lambda counts: ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))  # noqa: E731
        lines.append(f"| {eps} | {e['median_ratio']:.2f} | {100 * e['resolved_fraction']:.1f}% | {e['median_lower']:g} | "
                     f"{e['median_upper']:g} | {e['median_tsvd_over_best_upper']:.2f} | {fmt(e['lower_methods'])} | "
                     f"{fmt(e['upper_constructions'])} |")
    ba = report.get("before_after")
    if ba:
        lines += ["", f"Before ({ba['file']}) / after, on the {ba['operators']} operators both ran:", "",
                  "| eps | median upper/lower | resolved | median lower | median upper |", "|---|---|---|---|---|"]
        for eps in eps_list:
            b = ba[eps]
            lines.append(f"| {eps} | {b['median_ratio'][0]:.2f} -> {b['median_ratio'][1]:.2f} | "
                         f"{100 * b['resolved_fraction'][0]:.1f}% -> {100 * b['resolved_fraction'][1]:.1f}% | "
                         f"{b['median_lower'][0]:g} -> {b['median_lower'][1]:g} | {b['median_upper'][0]:g} -> {b['median_upper'][1]:g} |")
        sec = ba["median_seconds_per_operator"]
        lines.append(f"| seconds per operator (median) | {sec[0]:.1f} -> {sec[1]:.1f} | | | |")
    return "\n".join(lines) + "\n"


def _single_thread() -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--panel", choices=("minilm", "synthetic"), default="minilm")
    parser.add_argument("--docs", default="apache2",
                        help="comma list of examples/data documents or pydoc:TOPIC entries (minilm)")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--count", type=int, default=12, help="synthetic operators")
    parser.add_argument("--every", type=int, default=1, help="take every n-th operator")
    parser.add_argument("--offset", default="0", help="first operator taken, per document (comma list)")
    parser.add_argument("--eps", default="0.1,0.25,0.5")
    parser.add_argument("--budget", type=float, default=None, help="seconds per operator (a wall-time cap)")
    parser.add_argument("--work", type=float, default=None, help="work units per operator (default: the driver's)")
    parser.add_argument("--pydoc-topic", default=None, help="document: this topic of pydoc_data.topics (minilm)")
    parser.add_argument("--heads", default=None, help="comma list of heads per layer to keep, e.g. H1,H6")
    parser.add_argument("--layers", default=None, help="comma list of layers to keep, e.g. 1,4")
    parser.add_argument("--resume", action="store_true", help="skip the operators already in solvers_NAME.jsonl")
    parser.add_argument("--signed-only", action="store_true",
                        help="ablation: no general key sides in the lower search (signed key groups only)")
    parser.add_argument("--jobs", type=int, default=1, help="operators at a time (worker processes)")
    parser.add_argument("--before", type=Path, default=None, help="earlier results file for a before/after table")
    parser.add_argument("--smoke", action="store_true", help="CI-sized: 2 synthetic 48-wide operators, 2 s each")
    parser.add_argument("--name", default=None, help="results file suffix")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    _single_thread()
    if args.signed_only:  # the worker processes are forked: they inherit the class attribute
        from softrank_cert.solvers.lower.search import LowerSearch

        LowerSearch.general = LowerSearch.smooth = ()
    if args.smoke:
        args.panel, args.count, args.width, args.budget = "synthetic", 2, 48, 2.0
    eps_list = args.eps.split(",")
    ops: list[tuple[str, Operator]] = []
    document = None
    if args.panel == "minilm" and args.pydoc_topic:
        import tempfile

        path, digest = pydoc_text(args.pydoc_topic, Path(tempfile.mkdtemp()))
        document = {"pydoc_topic": args.pydoc_topic, "sha256": digest}
        ops = minilm_panel(args.width, path=path)
    elif args.panel == "minilm":
        import tempfile

        offsets = [int(o) for o in args.offset.split(",")]
        document = {}
        stacked = args.width > MINILM_WINDOW
        for i, doc in enumerate(args.docs.split(",")):
            path, digest = document_text(doc, Path(tempfile.mkdtemp()), 8000 * (args.width // MINILM_WINDOW if stacked else 1))
            if digest is not None:  # a pydoc topic: a text no shipped file holds
                document[doc] = {"pydoc_topic": doc.split(":", 1)[1], "sha256": digest}
            panel = stacked_panel(args.width, path) if stacked else minilm_panel(args.width, doc, path)
            ops += panel[offsets[min(i, len(offsets) - 1)]:: args.every]
    else:
        ops = synthetic_panel(args.count, args.width)[:: args.every]
    if args.heads or args.layers:
        heads = set(args.heads.split(",")) if args.heads else None
        layers = {f"L{x}" for x in args.layers.split(",")} if args.layers else None
        ops = [(n, op) for n, op in ops if keep_head(n, heads, layers)]
    from softrank_cert.plumbing.parallel import pack_operator

    name = args.name or ("smoke" if args.smoke else f"{args.panel}_w{args.width}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    partial = args.out_dir / f"solvers_{name}.jsonl"
    done: dict[str, dict] = {}
    if args.resume and partial.exists():
        done = {row["operator"]: row for row in map(json.loads, partial.read_text().splitlines())}
    elif partial.exists():
        partial.unlink()
    tasks = [(n, pack_operator(op), eps_list, args.budget, args.work) for n, op in ops if n not in done]
    rows: list[dict] = [done[n] for n, _ in ops if n in done]
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(solve, tasks):
            rows.append(row)
            with partial.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(row["operator"], f"{row['seconds']:.1f} s ({row['cpu_seconds']:.1f} s CPU) / {row['budget_seconds']:.0f} s",
                  [(b["lower"], b["upper"]) for b in row["brackets"]], flush=True)
    order = {n: i for i, (n, _) in enumerate(ops)}
    rows.sort(key=lambda r: order.get(r["operator"], len(order)))
    report = {"name": name, "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "document": document, "wall_seconds": time.perf_counter() - start,
              "summary": summarise(rows, eps_list), "operators": rows}
    if args.before is not None:
        report["before_after"] = before_after(rows, args.before.resolve(), eps_list)
    (args.out_dir / f"solvers_{name}.json").write_text(json.dumps(report, indent=1))
    (args.out_dir / f"solvers_{name}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
