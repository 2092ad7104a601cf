"""The research's causal studies on a real causal LLM: SmolLM2-135M-Instruct from its GGUF file.

The model is ``SmolLM2-135M-Instruct.Q4_1.gguf`` (``softrank panel --gguf smollm2``: the
dequantized Q4_1 weights, i.e. the model as distributed; 30 layers x 9 query heads, 3 key/value
heads, head dimension 64, causal).  Settings (fixed before the blind document was chosen):

* documents ``apache2`` (a licence) and ``py-execmodel`` (a Python documentation topic) of
  ``examples/data``; widths 64 / 128 / 256 / 512 (common-prefix blocks: the first w tokens);
* **panel** at width 128, eps 0.1 / 0.25 / 0.5, the default work per operator (all tolerances
  together), on all 270 heads of both documents (540 operators, about 3 CPU hours: more than one
  session, so the step resumes). Operators run in rounds, one head index of every layer of both
  documents a round (:func:`panel_order`), so a partial panel covers every layer evenly; the
  :data:`PANEL_SAMPLE` heads first (evenly spread over the (layer, head) pairs; the blind panel
  brackets only those);
* **budgets**: the block-width budget study (``softrank_cert.studies.budgets.campaign``: feasible /
  impossible / unresolved per width at rank budgets 8 / 16 / 32, eps 0.25, every class from
  kernel-VERIFIED ends) on :data:`BUDGET_SAMPLE` heads per document, the same heads at every
  width, :data:`BUDGET_SECONDS` s of search per operator (the MiniLM study's setting);
* **sinks**: per head, the mean attention on the first token over rows 1..w-1 at width 128
  (a float64 estimate, not certified), for all 270 heads, next to the certified ranks;
* **blind**: the budget study and the panel on one more document, chosen after these settings
  were committed (``--blind``; recorded in the results).

After ``budgets`` / ``blind``, ``softrank-verify WORK/budgets-certs`` (``WORK/blind-budgets-certs``)
re-checks every certificate behind a class; its last line goes to
``benchmarks/results/smollm2/budgets-verify.txt`` (``blind-budgets-verify.txt``).

Every step is resumable: ``capture`` writes the panels (work folder), ``panel`` appends one
JSON line per finished operator and skips those already there, ``budgets`` / ``blind`` run the
budget study with a campaign manifest (``resume``) and write the certificate behind every
feasible / impossible class to ``WORK/budgets-certs/`` (``softrank-verify`` re-checks them).
``report`` writes the summary.  One job
(``--jobs 1``) throughout.  Results: ``benchmarks/results/smollm2/``.

    python benchmarks/smollm2_study.py capture --blind py-compound
    python benchmarks/smollm2_study.py panel
    python benchmarks/smollm2_study.py budgets
    python benchmarks/smollm2_study.py blind
    python benchmarks/smollm2_study.py report
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import softrank_cert  # noqa: E402,F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np  # noqa: E402

DOCUMENTS = ("apache2", "py-execmodel")
WIDTHS = (64, 128, 256, 512)
PANEL_WIDTH = 128
PANEL_EPS = ("0.1", "0.25", "0.5")
PANEL_SAMPLE = 12
BUDGET_SAMPLE = 6
BUDGET_EPS = "0.25"
BUDGETS = (8, 16, 32)
BUDGET_SECONDS = 6.0
LAYERS, HEADS = 30, 9
OUT = ROOT / "benchmarks" / "results" / "smollm2"


def spread(count: int) -> list[tuple[int, int]]:
    """``count`` (layer, head) pairs evenly spread over all LAYERS x HEADS pairs, in order."""
    pairs = [(layer, head) for layer in range(LAYERS) for head in range(HEADS)]
    picks = np.linspace(0, len(pairs) - 1, count).round().astype(int)
    return [pairs[i] for i in sorted(set(picks.tolist()))]


def panel_order(names: list[str]) -> list[str]:
    """The panel's operators, the :data:`PANEL_SAMPLE` sample first, then round by round.

    Round ``h`` is head ``h`` of every layer (``L<l>H<h>``), so after any number of finished
    rounds each layer has the same number of bracketed heads.
    """
    sample = {f"L{l}H{h}" for l, h in spread(PANEL_SAMPLE)}

    def key(name: str) -> tuple[int, int, int, str]:
        tag = name.rsplit("/", 1)[1]
        layer, head = (int(x) for x in tag[1:].split("H"))
        return (tag not in sample, head, layer, name)

    return sorted(names, key=key)


def _subset(arrays: dict, names: set[str]) -> dict:
    from softrank_cert.util.operator_files import PROVENANCE_KEY

    provenance = json.loads(str(arrays[PROVENANCE_KEY]))
    out = {k: v for k, v in arrays.items() if k.endswith("/tokens") or k.rsplit("/", 1)[0] in names}
    out[PROVENANCE_KEY] = np.array(json.dumps({n: provenance[n] for n in sorted(names)}, sort_keys=True))
    return out


def sink_mass(arrays: dict, base: str) -> dict[str, float]:
    """Per head ``L<l>H<h>``: mean over rows 1..w-1 of A[i, 0] (float64 estimate)."""
    out = {}
    for layer in range(LAYERS):
        for head in range(HEADS):
            q, k = arrays[f"{base}/L{layer}H{head}/Q"], arrays[f"{base}/L{layer}H{head}/K"]
            s = (q @ k.T) / np.sqrt(q.shape[1])
            s = np.where(np.tril(np.ones_like(s, dtype=bool)), s, -np.inf)
            a = np.exp(s - s.max(axis=1, keepdims=True))
            a /= a.sum(axis=1, keepdims=True)
            out[f"L{layer}H{head}"] = float(a[1:, 0].mean())
    return out


def capture(work: Path, blind: str) -> None:
    """Capture every document at every width; write the sampled panels and capture.json."""
    from softrank_cert.models import write_panel
    from softrank_cert.models.hf_panel import HFCheckpoint, hf_panel, open_gguf

    t0, c0 = time.perf_counter(), time.process_time()
    ckpt = HFCheckpoint(open_gguf("smollm2"))
    load = {"wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(time.process_time() - c0, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    record: dict = {"model": ckpt.meta, "load": load, "documents": {}, "blind": blind, "sinks": {}}
    for doc in (*DOCUMENTS, blind):
        t0, c0 = time.perf_counter(), time.process_time()
        arrays = hf_panel(ckpt, ROOT / "examples" / "data" / f"{doc}.txt", list(WIDTHS))
        record["documents"][doc] = {"widths": list(WIDTHS), "operators": LAYERS * HEADS * len(WIDTHS),
                                    "wall_s": round(time.perf_counter() - t0, 1),
                                    "cpu_s": round(time.process_time() - c0, 1)}
        record["sinks"][doc] = sink_mass(arrays, f"smollm2/{doc}/w{PANEL_WIDTH}")
        panel = {f"smollm2/{doc}/w{PANEL_WIDTH}/L{l}H{h}" for l in range(LAYERS) for h in range(HEADS)}
        budget = {f"smollm2/{doc}/w{w}/L{l}H{h}" for w in WIDTHS for l, h in spread(BUDGET_SAMPLE)}
        (work / "panel").mkdir(parents=True, exist_ok=True)
        (work / "budgets").mkdir(parents=True, exist_ok=True)
        write_panel(work / "panel" / f"{doc}.npz", _subset(arrays, panel))
        if not (work / "budgets" / f"{doc}.npz").is_file():  # a budget manifest may already name it
            write_panel(work / "budgets" / f"{doc}.npz", _subset(arrays, budget))
        del arrays
    record["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    record["machine"] = {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                         "note": "2 cores shared with other jobs"}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "capture.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def _done(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    return {json.loads(line)["operator"] for line in path.read_text().splitlines() if line.strip()}


def panel(work: Path, documents: list[str], out_name: str = "panel.jsonl", sample_only: bool = False) -> None:
    """Bracket the width-128 operators at PANEL_EPS with the default work, in panel_order (resumable).

    ``sample_only``: the :data:`PANEL_SAMPLE` heads only (the blind panel).
    """
    import softrank_cert as sc

    out = OUT / out_name
    done = _done(out)
    operators = {name: op for doc in documents for name, op in sc.load_panel(work / "panel" / f"{doc}.npz").items()}
    sample = {f"L{l}H{h}" for l, h in spread(PANEL_SAMPLE)}
    todo = [n for n in panel_order(list(operators)) if n not in done
            and (not sample_only or n.rsplit("/", 1)[1] in sample)]
    print(f"panel: {len(done)} operators done, {len(todo)} to go", file=sys.stderr, flush=True)
    for name in todo:
        op, doc = operators[name], name.split("/")[1]
        t0, c0 = time.perf_counter(), time.process_time()
        result = sc.bracket(op, list(PANEL_EPS))
        row = {"operator": name, "document": doc, "layer": sc.operator_provenance(op)["layer"],
               "head": sc.operator_provenance(op)["head"],
               "lower": {e: result.lower[e] for e in PANEL_EPS}, "upper": {e: result.upper[e] for e in PANEL_EPS},
               "wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2)}
        with out.open("a") as handle:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
        print(json.dumps(row), flush=True)




def budgets(work: Path, documents: list[str], name: str) -> None:
    """The block-width budget study on the sampled operators (campaign manifest: resumable)."""
    from softrank_cert.studies.budgets.campaign import study

    from softrank_cert.util.files import write_json_atomic

    manifest = work / f"{name}-manifest.json"
    staged: dict = {}
    report = study([str(work / "budgets" / f"{d}.npz") for d in documents], BUDGET_EPS, list(BUDGETS),
                   BUDGET_SECONDS, jobs=1, manifest=manifest, resume=manifest.exists(),
                   certificates=work / f"{name}-certs", staged=staged)
    for path, document in staged.items():  # the certificates behind every feasible / impossible class
        write_json_atomic(path, document)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")


def _classes(report: dict) -> list[str]:
    rows = ["| document | width | heads | " + " | ".join(f"b={b} F/I/U" for b in BUDGETS) + " |",
            "|---|---:|---:|" + "---|" * len(BUDGETS)]
    for g in report["groups"]:
        if g["width"] == "-":  # the pooled row
            continue
        cells = [f"{g['budgets'][str(b)]['feasible']}/{g['budgets'][str(b)]['impossible']}/"
                 f"{g['budgets'][str(b)]['unresolved']}" for b in BUDGETS]
        rows.append(f"| {g['document']} | {g['width']} | {g['heads']} | " + " | ".join(cells) + " |")
    return rows


def _panel_rows(rows: list[dict], sinks: dict) -> list[str]:
    lines = ["| eps | operators | median upper/lower | resolved | median lower | median upper |",
             "|---|---:|---:|---:|---:|---:|"]
    for e in PANEL_EPS:
        ratio = [r["upper"][e] / max(r["lower"][e], 1) for r in rows]
        res = sum(r["upper"][e] == r["lower"][e] for r in rows)
        lines.append(f"| {e} | {len(rows)} | {statistics.median(ratio):.2f} | {res / len(rows):.0%} | "
                     f"{statistics.median(r['lower'][e] for r in rows):g} | "
                     f"{statistics.median(r['upper'][e] for r in rows):g} |")
    for split in (0.5,):
        heavy = [r for r in rows if sinks[r["document"]][f"L{r['layer']}H{r['head']}"] >= split]
        light = [r for r in rows if sinks[r["document"]][f"L{r['layer']}H{r['head']}"] < split]
        if heavy and light:
            lines += ["", f"At eps 0.25, heads with sink mass >= {split} ({len(heavy)}): median verified ends "
                      f"[{statistics.median(r['lower']['0.25'] for r in heavy):g}, "
                      f"{statistics.median(r['upper']['0.25'] for r in heavy):g}]; the others ({len(light)}): "
                      f"[{statistics.median(r['lower']['0.25'] for r in light):g}, "
                      f"{statistics.median(r['upper']['0.25'] for r in light):g}]."]
    lines += ["", "| operator | sink mass | " + " | ".join(f"eps {e}" for e in PANEL_EPS) + " | CPU s |",
              "|---|---:|" + "---|" * len(PANEL_EPS) + "---:|"]
    for r in sorted(rows, key=lambda r: (r["document"], r["layer"], r["head"])):
        sink = sinks[r["document"]][f"L{r['layer']}H{r['head']}"]
        cells = [f"[{r['lower'][e]}, {r['upper'][e]}]" for e in PANEL_EPS]
        lines.append(f"| {r['operator']} | {sink:.2f} | " + " | ".join(cells) + f" | {r['cpu_s']:.0f} |")
    return lines


MINILM_W128 = ROOT / "benchmarks" / "results" / "solvers_three_docs_w128.jsonl"


def _ratio(lower: int, upper: int) -> float:
    return upper / max(lower, 1)


def _layer_rows(rows: list[dict], sinks: dict) -> list[str]:
    """Per layer: heads bracketed, median upper/lower and resolved share per eps, median sink mass."""
    head = ("| layer | heads | " + " | ".join(f"eps {e}: ratio / resolved" for e in PANEL_EPS)
            + " | median sink mass |")
    lines = [head, "|---:|---:|" + "---:|" * len(PANEL_EPS) + "---:|"]
    for layer in sorted({r["layer"] for r in rows}):
        mine = [r for r in rows if r["layer"] == layer]
        cells = [f"{statistics.median(_ratio(r['lower'][e], r['upper'][e]) for r in mine):.2f} / "
                 f"{sum(r['lower'][e] == r['upper'][e] for r in mine) / len(mine):.0%}" for e in PANEL_EPS]
        sink = statistics.median(sinks[r["document"]][f"L{r['layer']}H{r['head']}"] for r in mine)
        lines.append(f"| {layer} | {len(mine)} | " + " | ".join(cells) + f" | {sink:.2f} |")
    return lines


def _minilm_rows() -> list[str]:
    """The committed MiniLM width-128 panel (three documents) in the panel table's terms."""
    if not MINILM_W128.is_file():
        return []
    rows = [json.loads(line) for line in MINILM_W128.read_text().splitlines() if line.strip()]
    lines = [f"Beside all-MiniLM-L6-v2 at width 128 (`{MINILM_W128.relative_to(ROOT)}`: {len(rows)} operators "
             "of three documents, 16 s budget = the default work's nominal seconds at 128):", "",
             "| eps | MiniLM median upper/lower | MiniLM resolved | MiniLM median lower | MiniLM median upper |",
             "|---|---:|---:|---:|---:|"]
    for e in PANEL_EPS:
        ends = [next(b for b in r["brackets"] if b["eps"] == e) for r in rows]
        lines.append(f"| {e} | {statistics.median(_ratio(b['lower'], b['upper']) for b in ends):.2f} | "
                     f"{sum(b['lower'] == b['upper'] for b in ends) / len(ends):.0%} | "
                     f"{statistics.median(b['lower'] for b in ends):g} | {statistics.median(b['upper'] for b in ends):g} |")
    return lines


def report() -> None:
    """benchmarks/results/smollm2/README.md from the pieces that exist."""
    from benchmarks.budget_study import comparison

    cap = json.loads((OUT / "capture.json").read_text())
    text = ["# SmolLM2-135M (GGUF Q4_1) causal studies", "",
            f"Model: `{cap['model']['gguf_file']}` (SHA-256 `{cap['model']['gguf_sha256'][:16]}...`, "
            f"{cap['model']['gguf_file_type']}), dequantized to float64; settings in "
            "`benchmarks/smollm2_study.py`; blind document: "
            f"`{cap['blind']}`. Machine: 2 cores shared with other jobs.", "",
            f"Capture: load {cap['load']['wall_s']} s wall / {cap['load']['cpu_s']} s CPU; per document "
            + ", ".join(f"{d} {v['wall_s']} s wall / {v['cpu_s']} s CPU ({v['operators']} operators)"
                        for d, v in cap["documents"].items())
            + f"; peak RSS {cap['peak_rss_mb']} MB.", ""]
    for name, title in (("panel.jsonl", "Panel at width 128"), ("blind-panel.jsonl", "Blind panel at width 128")):
        if (OUT / name).is_file():
            rows = [json.loads(line) for line in (OUT / name).read_text().splitlines() if line.strip()]
            if rows:
                text += [f"## {title}", ""] + _panel_rows(rows, cap["sinks"]) + [""]
                if name == "panel.jsonl":
                    text += ["### Per layer", ""] + _layer_rows(rows, cap["sinks"]) + [""] + _minilm_rows() + [""]
    for name, title in (("budgets.json", "Block-width budget study"), ("blind-budgets.json", "Blind run: budgets")):
        if (OUT / name).is_file():
            text += [f"## {title} (F/I/U = feasible / impossible / unresolved heads)", ""]
            study_report = json.loads((OUT / name).read_text())
            text += _classes(study_report) + ["", comparison(study_report), ""]
            checked = OUT / name.replace(".json", "-verify.txt")
            if checked.is_file():
                text += [f"softrank-verify on the certificates behind these classes: {checked.read_text().strip()}", ""]
    sinks = [v for doc in cap["sinks"].values() for v in doc.values()]
    text += ["## Sink mass (all 270 heads per document, width 128, float64 estimate)", "",
             f"median {statistics.median(sinks):.2f}; heads with mass >= 0.5: "
             f"{sum(v >= 0.5 for v in sinks)} of {len(sinks)}.", ""]
    (OUT / "README.md").write_text("\n".join(text))
    print("\n".join(text))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("capture", "panel", "budgets", "blind", "report"))
    ap.add_argument("--blind", default=None, help="capture: the blind document (a stem in examples/data)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/smollm2-study"), help="panels and manifests")
    args = ap.parse_args(argv)
    if args.step == "capture":
        if not args.blind:
            ap.error("capture needs --blind DOCUMENT")
        capture(args.work, args.blind)
        return 0
    blind = json.loads((OUT / "capture.json").read_text())["blind"]
    if args.step == "panel":
        panel(args.work, list(DOCUMENTS))
    elif args.step == "budgets":
        budgets(args.work, list(DOCUMENTS), "budgets")
    elif args.step == "blind":
        budgets(args.work, [blind], "blind-budgets")
        panel(args.work, [blind], "blind-panel.jsonl", sample_only=True)
    else:
        report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
