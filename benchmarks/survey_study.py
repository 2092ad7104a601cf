"""The survey study (issue 47 item 5): two families surveyed on one real document at widths 128
and 512, and how far eviction policies are from the certified minimum cache size, per layer.

Each unit is one ``softrank survey`` (resumable: a unit whose folder holds a complete survey is
resumed, which re-verifies every certificate and recomputes nothing that still verifies):

* SmolLM2-135M (``--gguf smollm2``) and Qwen2.5-Coder-0.5B (``--gguf qwen2.5-0.5b``), seven layers
  spread over the depth x three heads (21 heads a model), on ``examples/data/mpl2.txt``;
* width 128 at the default work, width 512 at ``--work quick`` (an eighth: the lower ends are
  then looser, so the policy / lower-bound ratios at 512 overstate the gap; said in the table);
* eps 0.1 / 0.25 / 0.5; the survey's kv-budgets stage certifies StreamingLLM and H2O budgets.

The summary derives each survey's KV budgets again from its certificates
(:func:`softrank_cert.studies.kv_budgets.recheck.rechecked_report`: every bracket and policy
certificate re-verified, minimality re-decided by the kernel) and the survey manifests' CPU seconds, and writes
``benchmarks/results/survey_study/survey_study.{md,json}`` with each unit's KV figure and page
heatmaps copied beside them.

    python benchmarks/survey_study.py --work-dir /work/survey-study      # all units (about 40 CPU min)
    python benchmarks/survey_study.py --work-dir /tmp/s --units smollm2-w128 --summary-only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from softrank_cert.studies.kv_budgets.plot import kv_figures  # noqa: E402
from softrank_cert.studies.kv_budgets.recheck import rechecked_report  # noqa: E402
from softrank_cert.util.files import write_json_atomic, write_text_atomic  # noqa: E402

DOCUMENT = ROOT / "examples" / "data" / "mpl2.txt"
EPS = "0.1,0.25,0.5"
RESULTS = ROOT / "benchmarks" / "results" / "survey_study"


@dataclass(frozen=True)
class Unit:
    """One survey: a model shortcut at one width and work level, on the chosen layers and heads."""

    model: str
    width: int
    work: str
    layers: str
    heads: str

    @property
    def name(self) -> str:
        return f"{self.model}-w{self.width}"

    def command(self, out: Path, resume: bool) -> list[str]:
        return ([sys.executable, "-m", "softrank_cert.cli.main", "survey", "--gguf", self.model, "--text",
                 str(DOCUMENT), "--widths", str(self.width), "--layers", self.layers, "--heads", self.heads,
                 "--eps", EPS, "--work", self.work, "--out", str(out), "--json"] + (["--resume"] if resume else []))


SMOL = ("0,5,10,15,20,25,29", "0,4,8")
QWEN = ("0,4,8,12,16,20,23", "0,7,13")
UNITS = [Unit("smollm2", 128, "default", *SMOL), Unit("qwen2.5-0.5b", 128, "default", *QWEN),
         Unit("smollm2", 512, "quick", *SMOL), Unit("qwen2.5-0.5b", 512, "quick", *QWEN)]


def run_unit(unit: Unit, work: Path) -> None:
    """Run (or resume) the unit's survey in ``work/NAME``; a failed survey is reported, not fatal."""
    out = work / unit.name
    resume = (out / "survey.json").is_file()
    started = time.perf_counter()
    print(f"survey_study: {unit.name} ({'resume' if resume else 'start'})", file=sys.stderr, flush=True)
    done = subprocess.run(unit.command(out, resume), capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    (work / f"{unit.name}.stderr.log").write_text(done.stderr)
    print(f"survey_study: {unit.name} exit {done.returncode} in {time.perf_counter() - started:.0f} s wall",
          file=sys.stderr, flush=True)


def _ratio_rows(report: dict) -> list[dict]:
    """Per (layer, policy, eps): median lower bound, median budget, median budget / lower."""
    return [{k: row[k] for k in ("layer", "policy", "eps", "heads", "median_lower", "median_budget", "median_ratio",
                                 "minimal", "uncertified")} for row in report["layers"]]


def _overall(report: dict) -> dict[str, dict[str, float | None]]:
    """Median over heads of budget / lower, per policy and eps (heads with both ends)."""
    ratios: dict[str, dict[str, list[float]]] = {}
    for record in report["operators"]:
        if record.get("status") != "done":
            continue
        lower = {b["eps"]: b["lower"] for b in record["brackets"]}
        for b in record["budgets"]:
            if b["budget"] is not None and lower.get(b["eps"]):
                ratios.setdefault(b["policy"], {}).setdefault(b["eps"], []).append(b["budget"] / lower[b["eps"]])
    return {p: {e: float(statistics.median(v)) for e, v in by.items()} for p, by in ratios.items()}


def summarize_unit(unit: Unit, work: Path, results: Path = RESULTS) -> dict | None:
    """The unit's row (None: its survey is not there), its figures copied into ``results/NAME``."""
    out = work / unit.name
    manifest_path = out / "survey.json"
    if not manifest_path.is_file():
        return None
    manifest = json.loads(manifest_path.read_text())
    report = rechecked_report(out / "certs")
    if report is None:
        return None
    stages = {s["name"]: s for s in manifest["stages"]}
    heads = sum(1 for r in report["operators"] if r.get("status") == "done")
    brackets = stages.get("brackets", {}).get("cpu_seconds")
    figures = results / unit.name
    figures.mkdir(parents=True, exist_ok=True)
    for figure in kv_figures(report).values():  # one model a unit: drawn from the re-derived budgets
        figure.savefig(figures / "kv-budgets.png", dpi=110)
    for png in sorted((out / "report-figures").glob("heatmap-*.png")):
        shutil.copy(png, figures / png.name)
    budgets = [b for r in report["operators"] if r.get("status") == "done" for b in r["budgets"]]
    certified = [b for b in budgets if b["budget"] is not None]
    kv_cpu = stages.get("kv-budgets", {}).get("cpu_seconds")
    return {"unit": unit.name, "model": unit.model, "width": unit.width, "work": unit.work, "state": manifest["state"],
            "budgets": len(budgets), "certified": len(certified), "minimal": sum(bool(b["minimal"]) for b in certified),
            "kv_cpu_per_head": None if not (kv_cpu and heads) else kv_cpu / heads,
            "heads": heads, "rechecked_budgets": report["rechecked"],
            "cpu_seconds": {name: s.get("cpu_seconds") for name, s in stages.items()},
            "brackets_cpu_per_head": None if not (brackets and heads) else brackets / heads,
            "overall": _overall(report), "layers": _ratio_rows(report)}


def _fmt(value: float | None, digits: str = ".3g") -> str:
    return "-" if value is None else format(value, digits)


def markdown(rows: list[dict]) -> str:
    lines = ["# Survey study: certified ranks and KV budgets, two families (issue 47 item 5)", "",
             f"Document `examples/data/mpl2.txt`; eps {EPS.replace(',', ' / ')}; 21 heads a model (7 layers x 3 "
             "heads); width 128 at the default work, width 512 at `--work quick` (looser lower ends: the ratios at "
             "512 overstate the gap). Every budget below was re-verified from its certificate when this table was "
             "written. Reproduce: `python benchmarks/survey_study.py`.", "",
             "| unit | state | heads | brackets CPU s / head | kv-budgets CPU s / head | budgets certified (minimal) "
             "| StreamingLLM budget / lower (eps 0.1 / 0.25 / 0.5) | H2O budget / lower |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        cells = [" / ".join(_fmt(r["overall"].get(p, {}).get(e)) for e in EPS.split(","))
                 for p in ("streaming-llm", "h2o")]
        lines.append(f"| {r['unit']} ({r['work']}) | {r['state']} | {r['heads']} | "
                     f"{_fmt(r['brackets_cpu_per_head'], '.1f')} | {_fmt(r['kv_cpu_per_head'], '.2f')} | "
                     f"{r['certified']} of {r['budgets']} ({r['minimal']}) | {cells[0]} | {cells[1]} |")
    lines += ["", "Per layer (median over the layer's heads: certified lower bound -> policy budget, ratio):", ""]
    for r in rows:
        lines += [f"### {r['unit']}", "", "| layer | eps | lower | StreamingLLM | H2O |", "|---:|---:|---:|---|---|"]
        by = {(x["layer"], x["eps"], x["policy"]): x for x in r["layers"]}
        for layer, eps in sorted({(x["layer"], x["eps"]) for x in r["layers"]}, key=lambda k: (k[0], float(k[1]))):
            s, h = by.get((layer, eps, "streaming-llm")), by.get((layer, eps, "h2o"))
            lower = (s or h or {}).get("median_lower")
            lines.append(f"| {layer} | {eps} | {_fmt(lower)} | "
                         + " | ".join("-" if x is None else f"{_fmt(x['median_budget'])} ({_fmt(x['median_ratio'])}x)"
                                      for x in (s, h)) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", type=Path, default=ROOT / "out" / "survey-study")
    ap.add_argument("--units", help="comma-separated unit names (default: all)")
    ap.add_argument("--summary-only", action="store_true", help="only summarise what the work folder holds")
    args = ap.parse_args(argv)
    wanted = set(args.units.split(",")) if args.units else None
    units = [u for u in UNITS if wanted is None or u.name in wanted]
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        for unit in units:
            run_unit(unit, args.work_dir)
    rows = [row for row in (summarize_unit(u, args.work_dir) for u in units) if row is not None]
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_json_atomic(RESULTS / "survey_study.json", {"document": str(DOCUMENT.relative_to(ROOT)), "units": rows})
    write_text_atomic(RESULTS / "survey_study.md", markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
