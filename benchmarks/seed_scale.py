"""The research's panel at its own scale and at the default work (issue 34), as one resumable campaign.

The research bracketed 3,326 operators at three tolerances without certificates.  This campaign
brackets 3,240 operators of two real models at eps 0.1 / 0.25 / 0.5, every bracket at the
driver's default work, every end kernel-VERIFIED and every certificate re-checked by
``softrank-verify`` before its unit is recorded:

    width  64: apache2, py-compound, py-typesmapping, gpl3, py-execmodel   all heads   1,710 operators
    width 128: apache2, py-compound, py-typesmapping                        all heads   1,026
    width 256: py-typesmapping                                              all heads     342
    width 512: py-typesmapping    MiniLM all 72 heads, SmolLM2 layers 0, 3, ..., 27     162

Models: all-MiniLM-L6-v2 (6 layers x 12 heads) and SmolLM2-135M-Instruct as distributed in its
Q4_1 GGUF file (30 layers x 9 heads, causal; ``softrank panel --gguf smollm2``).  Documents:
``examples/data/`` (real texts nobody here wrote); ``py-typesmapping`` was never used by any run
before this campaign.  Widths 256 and 512 use it alone, so that rank against width can be read
per head on one text.

The campaign is cut into **units** (a model, a document, a width and a range of layers, at most
about 40 minutes of CPU on two cores).  A unit is one ``softrank bracket PANEL --all --jobs 2
--resume`` run followed by ``softrank-verify`` of its folder; only then is its record written
(atomically) to ``benchmarks/results/seed_scale/units/UNIT.json``: the verified ends of every
operator and eps (taken from the verify report, not from the certificate), the SHA-256 of
every certificate, the solver seconds, the unit's CPU and wall seconds, the commit.  Every
certificate is also copied to ``WORK/store/SHA256.json`` (content-addressed: a duplicated or
resubmitted task writes the same name with the same bytes), and a deterministic sample (per
model, document and width, the head whose name has the smallest SHA-256) to
``benchmarks/results/seed_scale/sample/``.

Resuming: a unit with a committed record is done (``--redo UNIT`` computes it again); an
interrupted unit resumes from the certificates in ``WORK/certs/UNIT/`` that still verify.  Each
run stops starting units after ``--max-hours`` (default 1.5), so that it fits one working
session; run it again to go on.

    python benchmarks/seed_scale.py --list            # the plan: units, status, estimated CPU
    python benchmarks/seed_scale.py                   # run units for at most 1.5 h, then the summary
    python benchmarks/seed_scale.py --max-hours 8     # a night
    python benchmarks/seed_scale.py --summary-only    # rewrite benchmarks/results/seed_scale/README.md
    python benchmarks/seed_scale.py --reverify        # softrank-verify WORK/store once more, hashes and records too
    python benchmarks/seed_scale.py --profiles        # certified profiles of typical heads, then the summary
    python benchmarks/seed_scale.py --reproduce UNIT  # bracket a recorded unit again, compare every result

The summary (``README.md`` and ``summary.json`` beside the units) gives ``softrank report``'s
group table per model x width (median ends, median upper/lower -- the report's ratio, verified
upper end over verified lower end -- and resolved share per eps) and its rank-against-width
figure, CPU and wall hours, and the cost per operator by width.  ``--profiles`` adds the certified profile (``softrank profile`` at the
default work, a certificate at the three eps, re-checked by ``softrank-verify``) of one
typical head per model and width 64 / 128: the recorded operator whose verified ends lie
nearest the medians of its model and width (``profiles/``).  The issue-16 campaign (MiniLM only, 1-6 s budgets) was produced by this
script at commit 13bc742; its results are ``benchmarks/results/seed_scale.{md,jsonl,json}``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import softrank_cert  # noqa: E402,F401  (before numpy: pins its kernels here and in every child, blas_kernels)
import numpy as np  # noqa: E402

EPS = ("0.1", "0.25", "0.5")
JOBS = 2
#: model -> (layers, heads per layer)
MODELS = {"minilm": (6, 12), "smollm2": (30, 9)}
WIDE_DOCUMENT = "py-typesmapping"
#: width -> documents
DOCUMENTS = {64: ("apache2", "py-compound", WIDE_DOCUMENT, "gpl3", "py-execmodel"),
             128: ("apache2", "py-compound", WIDE_DOCUMENT), 256: (WIDE_DOCUMENT,), 512: (WIDE_DOCUMENT,)}
#: (model, width) -> (layers bracketed, layers per unit)
LAYERS = {("minilm", 64): (range(6), 6), ("minilm", 128): (range(6), 6), ("minilm", 256): (range(6), 6),
          ("minilm", 512): (range(6), 2), ("smollm2", 64): (range(30), 30), ("smollm2", 128): (range(30), 10),
          ("smollm2", 256): (range(30), 5), ("smollm2", 512): (range(0, 30, 3), 2)}
RESULTS = ROOT / "benchmarks" / "results" / "seed_scale"
RESEARCH = ("the research (float64, no certificates): median upper/lower 2.6-3.8 by family at eps 0.25 on its "
            "2,302-operator primary panel; BERT resolves 219 of 512 operators")


@dataclass(frozen=True)
class Unit:
    """One ``softrank bracket --all`` campaign: every head of ``layers`` of ``model`` on the first
    ``width`` tokens of ``document``."""

    model: str
    document: str
    width: int
    layers: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.model}-{self.document}-w{self.width}-L{self.layers[0]}-{self.layers[-1]}"

    def operators(self) -> list[str]:
        heads = MODELS[self.model][1]
        return [f"{self.model}/{self.document}/w{self.width}/L{layer}H{head}" for layer in self.layers
                for head in range(heads)]


def plan() -> list[Unit]:
    """Every unit, narrow widths first (so that any prefix of the campaign is whole widths)."""
    units = []
    for width, documents in DOCUMENTS.items():
        for document in documents:
            for model in MODELS:
                layers, per_unit = LAYERS[(model, width)]
                chosen = list(layers)
                units += [Unit(model, document, width, tuple(chosen[i:i + per_unit]))
                          for i in range(0, len(chosen), per_unit)]
    return units


def nominal_cpu_seconds(width: int) -> float:
    """The driver's nominal seconds per operator at ``width`` (the default work's seconds on a quiet machine)."""
    from softrank_cert.solvers import default_seconds

    return default_seconds(width, width)


def sample_operators(units: list[Unit]) -> set[str]:
    """Per (model, document, width): the planned operator whose name has the smallest SHA-256."""
    groups: dict[tuple[str, str, int], list[str]] = {}
    for unit in units:
        groups.setdefault((unit.model, unit.document, unit.width), []).extend(unit.operators())
    return {min(names, key=lambda n: hashlib.sha256(n.encode()).hexdigest()) for names in groups.values()}


def record_path(unit: Unit, results: Path | None = None) -> Path:
    """Where ``unit``'s record goes: ``RESULTS/units/`` (or that folder of ``results``)."""
    return (results or RESULTS) / "units" / f"{unit.name}.json"


def write_atomic(path: Path, text: str) -> None:
    """``text`` into ``path`` (its folder made if missing), never a partial file."""
    from softrank_cert.util.files import write_text_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)


# --- panels -------------------------------------------------------------------------------------

class Panels:
    """The panel files of the units, captured once per (model, document, width) and cut per unit."""

    def __init__(self, work: Path) -> None:
        self.folder = work / "panels"
        self._smollm2 = None

    def _capture(self, model: str, document: str, width: int) -> dict[str, np.ndarray]:
        text = ROOT / "examples" / "data" / f"{document}.txt"
        if model == "minilm":
            from softrank_cert.models import build_panel

            return build_panel("minilm", text, [width])
        from softrank_cert.models.hf_panel import HFCheckpoint, hf_panel, open_gguf

        if self._smollm2 is None:
            print("[stage capture] loading SmolLM2-135M (GGUF, dequantized to float64)", file=sys.stderr, flush=True)
            self._smollm2 = HFCheckpoint(open_gguf("smollm2"))
        return hf_panel(self._smollm2, text, [width])

    def unit_panel(self, unit: Unit) -> Path:
        from softrank_cert.models import write_panel
        from softrank_cert.util.operator_files import PROVENANCE_KEY

        path = self.folder / "units" / f"{unit.name}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():
            return path
        full = self.folder / f"{unit.model}-{unit.document}-w{unit.width}.npz"
        if full.is_file():
            with np.load(full, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
        else:
            print(f"[stage capture] {unit.model} on {unit.document}, width {unit.width}", file=sys.stderr, flush=True)
            arrays = self._capture(unit.model, unit.document, unit.width)
            write_panel(full, arrays)
        names = set(unit.operators())
        provenance = json.loads(str(arrays[PROVENANCE_KEY]))
        missing = names - set(provenance)
        if missing:
            raise SystemExit(f"seed_scale: the {unit.model} panel of {unit.document} at width {unit.width} lacks "
                             f"{sorted(missing)[0]} (and {len(missing) - 1} more)")
        subset = {k: v for k, v in arrays.items() if k.rsplit("/", 1)[0] in names}
        subset[PROVENANCE_KEY] = np.array(json.dumps({n: provenance[n] for n in sorted(names)}, sort_keys=True))
        return write_panel(path, subset)


# --- one unit -----------------------------------------------------------------------------------

def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str], log: Path, capture: bool = False) -> tuple[int, str, float, float]:
    """Run ``command`` (BLAS single-threaded); exit code, stdout when ``capture``, wall and CPU seconds."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    start, cpu = time.perf_counter(), _children_cpu()
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(command)}\n")
        handle.flush()
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE if capture else handle,
                              stderr=handle, text=True)
    return done.returncode, done.stdout or "", time.perf_counter() - start, _children_cpu() - cpu


def _commit() -> dict:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "softrank_cert"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return {"commit": head, "package_modified": bool(dirty)}


def result_sha256(certificate: dict) -> str:
    """SHA-256 of what a certificate proves (operator, claims, witnesses), without the issue time
    and the signature: equal for the same result computed twice."""
    body = {"operator": certificate.get("operator"), "brackets": certificate.get("brackets")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def verified_rows(report: dict, unit: Unit) -> tuple[list[dict], list[str]]:
    """Rows (operator, eps, lower, upper, methods, sha256) from a ``softrank-verify --json`` report of
    ``unit``'s folder, and the problems: a file not checked, a claim missing, repeated or not VERIFIED, an
    operator missing, repeated or not of ``unit``."""
    rows, problems, seen, names = [], [], set(), set(unit.operators())
    for entry in report["files"]:
        operator = entry.get("operator")
        if entry.get("status") == "skipped" and Path(entry.get("path", "")).name == "softrank-campaign.json":
            continue  # the manifest (bookkeeping, not a certificate)
        if entry.get("status") != "checked" or entry.get("exit_code") != 0:
            problems.append(f"{entry.get('path')}: {entry.get('status')}, exit {entry.get('exit_code')}")
            continue
        claims = {(c["eps"], c["side"]): c for c in entry["claims"]}
        if operator not in names or operator in seen:
            problems.append(f"{operator}: {'a second certificate' if operator in seen else 'not of this unit'}")
            continue
        if set(claims) != {(e, side) for e in EPS for side in ("lower", "upper")} or len(claims) != len(entry["claims"]):
            problems.append(f"{operator}: the claims are not one lower and one upper end per eps {', '.join(EPS)}")
            continue
        if any(c["verdict"] != "VERIFIED" for c in claims.values()):
            problems.append(f"{operator}: a claim is not VERIFIED")
            continue
        data = Path(entry["path"]).read_bytes()
        digest, result = hashlib.sha256(data).hexdigest(), result_sha256(json.loads(data))
        seen.add(operator)
        for eps in EPS:
            lower, upper = claims[(eps, "lower")], claims[(eps, "upper")]
            rows.append({"operator": operator, "eps": eps, "lower": lower["rank"], "upper": upper["rank"],
                         "lower_method": lower["method"], "upper_method": upper["method"], "sha256": digest,
                         "result_sha256": result})
    problems += [f"{name}: no verified certificate" for name in unit.operators() if name not in seen]
    return rows, problems


def uncosted_operators(manifest: dict, ledger_runs: int) -> int:
    """How many of a unit's operators were computed by bracket runs its cost ledger does not hold.

    Every ``softrank bracket --resume`` run of the unit's folder appends one entry to the campaign
    manifest's ``runs``; the ledger holds the runs this script started and saw end, which are the
    manifest's last ``ledger_runs``.  Earlier manifest runs (one started by hand, or one whose
    campaign was killed before its ledger line) computed operators whose CPU is not in
    ``bracket_cpu_s``."""
    earlier = manifest.get("runs", [])[:max(len(manifest.get("runs", [])) - ledger_runs, 0)]
    return sum(int(run.get("computed", 0)) for run in earlier)


def run_unit(unit: Unit, panels: Panels, work: Path, log: Path, sample: set[str], results: Path | None = None) -> bool:
    """Bracket, verify and record ``unit`` (under ``results``, default :data:`RESULTS`); False
    (nothing recorded) when anything does not check."""
    results = results or RESULTS
    panel = panels.unit_panel(unit)
    out = work / "certs" / unit.name
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    bracket = [sys.executable, "-m", "softrank_cert.cli.main", "bracket", str(panel), "--all", "--eps", ",".join(EPS),
               "--out", str(out) + "/", "--jobs", str(JOBS), "--resume"]
    rc, _, wall, cpu = _run(bracket, log)
    ledger = work / "costs" / f"{unit.name}.jsonl"  # every bracket run of this unit in this work folder
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with open(ledger, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"exit_code": rc, "wall_s": wall, "cpu_s": cpu}) + "\n")
    runs = [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines() if line.strip()]
    wall, cpu = sum(r["wall_s"] for r in runs), sum(r["cpu_s"] for r in runs)
    if rc != 0:
        print(f"  {unit.name}: softrank bracket exited {rc} (see {log}); not recorded", flush=True)
        return False
    verify = [sys.executable, "-m", "softrank_cert.cli.verify", str(out), "--json"]
    vrc, stdout, vwall, vcpu = _run(verify, log, capture=True)
    report = json.loads(stdout) if stdout.strip() else {"files": [], "summary": {}}
    rows, problems = verified_rows(report, unit)
    if vrc != 0 or problems:
        print(f"  {unit.name}: softrank-verify exited {vrc}; {len(problems)} problems, first: "
              f"{problems[0] if problems else '-'}; not recorded", flush=True)
        return False
    manifest = json.loads((out / "softrank-campaign.json").read_text(encoding="utf-8"))
    seconds = {name: entry.get("seconds") for name, entry in manifest["operators"].items()}
    uncosted = uncosted_operators(manifest, len(runs))
    for row in rows:
        row["solver_seconds"] = seconds.get(row["operator"])
    store = work / "store"
    store.mkdir(parents=True, exist_ok=True)
    digests = {row["operator"]: row["sha256"] for row in rows}
    for entry in (e for e in report["files"] if e.get("operator") in digests):
        digest = digests[entry["operator"]]
        if not (store / f"{digest}.json").is_file():
            shutil.copyfile(entry["path"], store / f"{digest}.json")
        if entry["operator"] in sample:
            (results / "sample").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(entry["path"], results / "sample" / f"{digest}.json")
    record = {"unit": unit.name, "model": unit.model, "document": unit.document, "width": unit.width,
              "layers": list(unit.layers), "operators": len(unit.operators()), "eps": list(EPS), "jobs": JOBS,
              "work": "default", "started": started, "bracket_wall_s": round(wall, 1), "bracket_cpu_s": round(cpu, 1),
              "verify": {"exit_code": vrc, "wall_s": round(vwall, 1), "cpu_s": round(vcpu, 1),
                         "claims": report["summary"].get("claims"), "verified": report["summary"].get("verified")},
              "runs": len(runs), "uncosted_operators": uncosted, **_commit(), "rows": rows}
    write_atomic(record_path(unit, results), json.dumps(record, indent=0, sort_keys=True) + "\n")
    print(f"  {unit.name}: {len(unit.operators())} operators, {wall:.0f} s wall, {cpu:.0f} s CPU, "
          f"{report['summary'].get('verified')} claims VERIFIED", flush=True)
    return True


def reproduce_unit(unit: Unit, panels: Panels, work: Path, log: Path) -> bool:
    """Bracket a recorded ``unit`` again from scratch in ``WORK/reproduce/UNIT/``, verify it, and
    compare every operator's result (:func:`result_sha256`: operator, claims and witness arrays)
    with the committed record; the comparison goes to ``RESULTS/reproduced/UNIT.json``.  True when
    every result is identical (the certificates of the campaign can be made again, bit for bit)."""
    record = json.loads(record_path(unit).read_text(encoding="utf-8"))
    out = work / "reproduce" / unit.name
    shutil.rmtree(out, ignore_errors=True)
    panel = panels.unit_panel(unit)
    bracket = [sys.executable, "-m", "softrank_cert.cli.main", "bracket", str(panel), "--all", "--eps", ",".join(EPS),
               "--out", str(out) + "/", "--jobs", str(JOBS)]
    rc, _, wall, cpu = _run(bracket, log)
    verify = [sys.executable, "-m", "softrank_cert.cli.verify", str(out), "--json"]
    vrc, stdout, _, _ = _run(verify, log, capture=True)
    rows, problems = verified_rows(json.loads(stdout) if stdout.strip() else {"files": []}, unit)
    recorded = {(r["operator"], r["eps"]): r for r in record["rows"]}
    differing = sorted({r["operator"] for r in rows if recorded.get((r["operator"], r["eps"]), {}).get("result_sha256")
                        != r["result_sha256"]})
    same = len({r["operator"] for r in rows}) - len(differing)
    result = {"unit": unit.name, "operators": len(unit.operators()), "bracket_exit_code": rc, "verify_exit_code": vrc,
              "problems": problems[:10], "identical_results": same, "differing": differing,
              "recorded_commit": record["commit"], **{f"now_{k}": v for k, v in _commit().items()},
              "bracket_wall_s": round(wall, 1), "bracket_cpu_s": round(cpu, 1),
              "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_atomic(RESULTS / "reproduced" / f"{unit.name}.json", json.dumps(result, indent=1) + "\n")
    print(f"  {unit.name}: {same} of {len(unit.operators())} results identical to the record"
          + (f"; differing: {', '.join(differing[:3])}" if differing else "") + (f"; {problems[0]}" if problems else ""),
          flush=True)
    return rc == 0 and vrc == 0 and not problems and same == len(unit.operators())


# --- summary ------------------------------------------------------------------------------------

def load_records(results: Path | None = None) -> list[dict]:
    """Every unit record under ``results`` (default :data:`RESULTS`), by file name."""
    folder = (results or RESULTS) / "units"
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def report_records(records: list[dict]) -> list[dict]:
    """The unit records' verified ends as ``softrank report``'s operator records (status
    ``verified``, one bracket per eps of :data:`EPS`, in that order), for its table and figure."""
    ends: dict[str, dict[str, dict]] = {}
    for record in records:
        for row in record["rows"]:
            ends.setdefault(row["operator"], {})[row["eps"]] = {"lower": row["lower"], "upper": row["upper"]}
    return [{"operator": name, "status": "verified", "brackets": [by_eps[eps] for eps in EPS]}
            for name, by_eps in ends.items()]


def model_width(name: str) -> str:
    """The summary's group of an operator: ``minilm/apache2/w64/L0H3`` -> ``minilm/w64`` (its
    model and width, every document together)."""
    parts = name.split("/")
    return f"{parts[0]}/{parts[2]}"


def report_table(records: list[dict]) -> list[dict]:
    """``softrank report``'s group table (:func:`~softrank_cert.studies.report.summary.group_rows`)
    per model and width (:func:`model_width`): per eps the verified operators, the median ends,
    the median upper/lower (the report's :func:`~softrank_cert.studies.report.summary.bracket_ratio`:
    verified upper end over verified lower end) and the share resolved."""
    from softrank_cert.studies.report.summary import group_rows

    return group_rows(report_records(records), list(EPS), group=model_width)


def table(records: list[dict]) -> list[dict]:
    """:func:`report_table` flat, one row per model x width x eps: ``model``, ``width``, ``eps``,
    ``operators``, ``median_ratio`` (2 decimals), ``resolved_percent``, ``median_lower``,
    ``median_upper`` (``summary.json``; ``family_table.py`` reads the same rows)."""
    out = []
    for group in report_table(records):
        model, width = group["group"].rsplit("/w", 1)
        for eps in EPS:
            cell = group["eps"][eps]
            ratio = cell["median_ratio"]
            out.append({"model": model, "width": int(width), "eps": eps, "operators": group["verified"],
                        "median_ratio": float("nan") if ratio is None else round(ratio, 2),
                        "resolved_percent": round(100.0 * (cell["resolved_share"] or 0.0), 1),
                        "median_lower": cell["median_lower"], "median_upper": cell["median_upper"]})
    return out


def costs(records: list[dict]) -> list[dict]:
    """Per model x width: operators, CPU seconds per operator (the bracket runs, all processes, over
    the units whose ledgers hold every run: a unit with ``uncosted_operators`` is left out of both sums),
    median solver seconds, and the verify seconds."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for record in records:
        groups.setdefault((record["model"], record["width"]), []).append(record)
    out = []
    for (model, width), group in sorted(groups.items()):
        operators = sum(r["operators"] for r in group)
        solver = [row["solver_seconds"] for r in group for row in r["rows"][::len(EPS)] if row.get("solver_seconds")]
        costed = [r for r in group if not r.get("uncosted_operators")]
        costed_operators = sum(r["operators"] for r in costed)
        cpu = sum(r["bracket_cpu_s"] for r in costed) / costed_operators if costed_operators else float("nan")
        out.append({"model": model, "width": width, "operators": operators, "costed_operators": costed_operators,
                    "cpu_s_per_operator": round(cpu, 1),
                    "nominal_s": round(nominal_cpu_seconds(width), 1),
                    "median_solver_s": round(_median(solver), 1),
                    "verify_s_per_operator": round(sum(r["verify"]["cpu_s"] for r in group) / operators, 2)})
    return out


def rank_figure(records: list[dict], path: Path) -> bool:
    """``softrank report``'s rank-against-width figure of the recorded heads
    (:func:`~softrank_cert.studies.report.figures.width_figure`: each head's own verified ends,
    per eps), written to ``path``; False (nothing written) when no head carries two widths."""
    from softrank_cert.studies.report.figures import width_figure
    from softrank_cert.studies.report.summary import width_series
    from softrank_cert.util.files import OutputFiles

    series = width_series(report_records(records), list(EPS))
    if series is None:
        return False
    with OutputFiles() as outputs:
        outputs.stage_figure(width_figure(series, list(EPS)), path)
    return True


# --- certified profiles of typical heads ------------------------------------------------------

#: The widths whose typical heads get a certified profile (at 512 one profile costs many CPU minutes).
PROFILE_WIDTHS = (64, 128, 256)


def profiles_folder() -> Path:
    return RESULTS / "profiles"


def _distance_to_medians(rows: list[dict], medians: dict[str, tuple[float, float]]) -> float:
    """Sum over eps of |log(end / median end)| for both ends (rank 0 counted as 1)."""
    import math

    return sum(abs(math.log(max(r[side], 1) / max(medians[r["eps"]][i], 1)))
               for r in rows for i, side in enumerate(("lower", "upper")))


def typical_operators(records: list[dict], widths: tuple[int, ...]) -> list[tuple[str, int, str, str]]:
    """Per model and width (of ``widths``, once every planned unit of it is recorded): the
    recorded operator whose verified ends at all three eps lie nearest the medians of its model
    and width (:func:`_distance_to_medians`; ties: the smaller SHA-256 of the name), as
    ``(model, width, operator, unit)``."""
    planned = {(u.model, u.width) for u in plan()}
    done = {r["unit"] for r in records}
    chosen = []
    for model in MODELS:
        for width in widths:
            if (model, width) not in planned or any(u.name not in done for u in plan() if (u.model, u.width) == (model, width)):
                continue
            group = [r for r in records if (r["model"], r["width"]) == (model, width)]
            by_operator: dict[str, list[dict]] = {}
            units = {}
            for record in group:
                for row in record["rows"]:
                    by_operator.setdefault(row["operator"], []).append(row)
                    units[row["operator"]] = record["unit"]
            medians = {eps: (_median([r["lower"] for rows in by_operator.values() for r in rows if r["eps"] == eps]),
                             _median([r["upper"] for rows in by_operator.values() for r in rows if r["eps"] == eps]))
                       for eps in EPS}
            name = min(by_operator, key=lambda n: (round(_distance_to_medians(by_operator[n], medians), 9),
                                                    hashlib.sha256(n.encode()).hexdigest()))
            chosen.append((model, width, name, units[name]))
    return chosen


def profile_stem(operator: str) -> str:
    """``smollm2/apache2/w128/L3H2`` -> ``smollm2-apache2-w128-L3H2``."""
    return operator.replace("/", "-")


def run_profiles(panels: Panels, log: Path) -> bool:
    """``softrank profile`` (default work; marks and certificate at ``EPS``) of each typical head
    into ``RESULTS/profiles/``: STEM.png, STEM.json (every VERIFIED step), STEM.cert.json; then
    ``softrank-verify`` of the certificates.  Heads already drawn are kept (resume); files of
    heads no longer typical are removed.  False when a profile or the verification failed."""
    records = load_records()
    heads = typical_operators(records, PROFILE_WIDTHS)
    if not heads:
        print(f"[stage profiles] no width of {PROFILE_WIDTHS} is wholly recorded yet: nothing to profile", flush=True)
        return True
    units = {u.name: u for u in plan()}
    folder = profiles_folder()
    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for position, (model, width, operator, unit) in enumerate(heads, 1):
        stem = profile_stem(operator)
        png, report, certificate = (folder / f"{stem}{suffix}" for suffix in (".png", ".json", ".cert.json"))
        print(f"[stage profiles] {position}/{len(heads)}: {operator} (typical of {model} at width {width})", flush=True)
        entry = {"model": model, "width": width, "operator": operator, "stem": stem}
        if png.is_file() and report.is_file() and certificate.is_file():
            entry.update(json.loads(report.read_text(encoding="utf-8")).get("_run", {}))
            index.append(entry)
            continue
        panel = panels.unit_panel(units[unit])
        command = [sys.executable, "-m", "softrank_cert.cli.main", "profile", str(panel), "--operator", operator,
                   "--eps", ",".join(EPS), "--plot", str(png), "--out", str(certificate), "--json",
                   "--force"]  # what an interrupted stage left is made again
        rc, stdout, wall, cpu = _run(command, log, capture=True)
        if rc != 0:
            print(f"  {operator}: softrank profile exited {rc} (see {log})", flush=True)
            return False
        document = json.loads(stdout)
        document["_run"] = {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1)}
        write_atomic(report, json.dumps(document, indent=0, sort_keys=True) + "\n")
        entry.update(document["_run"])
        index.append(entry)
    keep = {f"{profile_stem(h[2])}{suffix}" for h in heads for suffix in (".png", ".json", ".cert.json")} | {"index.json"}
    for stale in (p for p in folder.iterdir() if p.name not in keep):
        stale.unlink()
    certificates = sorted(str(p) for p in folder.glob("*.cert.json"))
    rc, stdout, _, _ = _run([sys.executable, "-m", "softrank_cert.cli.verify", *certificates, "--json"], log,
                            capture=True)
    summary = json.loads(stdout)["summary"] if stdout.strip() else {}
    write_atomic(folder / "index.json", json.dumps({"heads": index, "verify": {"exit_code": rc, **summary}},
                                                      indent=1, sort_keys=True) + "\n")
    print(f"  profiles: {len(index)} heads, softrank-verify of their certificates exit {rc}", flush=True)
    return rc == 0


def profile_lines(records: list[dict]) -> list[str]:
    """The summary's section on the certified profiles of typical heads (none before they are drawn)."""
    index_path = profiles_folder() / "index.json"
    if not index_path.is_file():
        return []
    index = json.loads(index_path.read_text(encoding="utf-8"))
    ends = {(row["operator"], row["eps"]): (row["lower"], row["upper"]) for r in records for row in r["rows"]}
    check = index["verify"]
    lines = ["", "## Certified profiles of typical heads", "",
             "Per model and width, the head whose verified ends at all three eps lie nearest the medians of its "
             "model and width (`typical_operators` in `benchmarks/seed_scale.py`), profiled by `softrank profile` at "
             "the default work: every drawn step is a kernel-VERIFIED end.  The campaign's bracket and the one read "
             "off the profile come from two independent searches, both proved; the profile spreads the same work "
             "over its whole grid of tolerances, so at one eps its bracket can be the wider.  The profiles' certificates "
             f"(`profiles/*.cert.json`): `softrank-verify` exit {check['exit_code']}, {check.get('verified', 0)} of "
             f"{check.get('claims', 0)} claims VERIFIED.", "",
             "| head | typical of | campaign bracket eps 0.1 / 0.25 / 0.5 | profile bracket | verified steps | CPU s |",
             "|---|---|---|---|---:|---:|"]

    def shown(pair: tuple[int, int]) -> str:
        return f"{pair[0]}" if pair[0] == pair[1] else f"[{pair[0]}, {pair[1]}]"

    images = []
    for head in index["heads"]:
        report = json.loads((profiles_folder() / f"{head['stem']}.json").read_text(encoding="utf-8"))
        profiled = {b["eps"]: (b["lower"], b["upper"]) for b in report["brackets"]}
        campaign = " / ".join(shown(ends[(head["operator"], e)]) for e in EPS)
        lines.append(f"| `{head['operator']}` | {head['model']}, width {head['width']} | {campaign} | "
                     f"{' / '.join(shown(profiled[e]) for e in EPS)} | {len(report['lower']) + len(report['upper'])} | "
                     f"{head.get('cpu_s', float('nan')):.0f} |")
        images.append(f"![Certified profile of {head['operator']}](profiles/{head['stem']}.png)")
    return lines + [""] + images


def write_summary(units: list[Unit]) -> str:
    from softrank_cert.studies.report.summary import group_table_markdown

    records = load_records()
    by_name = {r["unit"]: r for r in records}
    planned = sum(len(u.operators()) for u in units)
    done_units = [u for u in units if u.name in by_name]
    cpu = sum(r["bracket_cpu_s"] + r["verify"]["cpu_s"] for r in records)
    wall = sum(r["bracket_wall_s"] + r["verify"]["wall_s"] for r in records)
    rows, cost = table(records), costs(records)
    stats = {"planned_units": len(units), "done_units": len(done_units), "planned_operators": planned,
             "done_operators": sum(r["operators"] for r in records), "cpu_hours": round(cpu / 3600, 2),
             "wall_hours": round(wall / 3600, 2), "claims_verified": sum(r["verify"]["verified"] or 0 for r in records),
             "table": rows, "costs": cost, "commits": sorted({r["commit"] for r in records})}
    unrecorded = sum(r.get("uncosted_operators", 0) for r in records)
    uncosted = f"; not the {unrecorded} operators computed by runs no cost ledger holds" if unrecorded else ""
    lines = ["# Seed-scale campaign at the default work (issue 34)", "",
             f"{stats['done_operators']:,} of {planned:,} planned operators ({len(done_units)} of {len(units)} units), "
             f"eps {' / '.join(EPS)}, default work, `--jobs {JOBS}` on a 2-core machine; "
             f"{stats['claims_verified']:,} claims, every one VERIFIED by `softrank-verify` before its unit was "
             f"recorded. CPU {stats['cpu_hours']:.2f} h, wall {stats['wall_hours']:.2f} h (bracket and verify runs{uncosted}). "
             "Plan and method: `benchmarks/seed_scale.py`; one record per unit in `units/`, a deterministic "
             "sample of certificates in `sample/` (named by SHA-256); `softrank report "
             "benchmarks/results/seed_scale/sample --out /tmp/sample/index.html` re-verifies it and renders it as a "
             "page.", "", "Per model and width, every document together: `softrank report`'s group table "
             "(`studies/report/summary.py`; upper/lower is the report's ratio, the verified upper end over the "
             "verified lower end).", ""]
    lines += group_table_markdown(report_table(records), list(EPS), heading="model/width")
    lines += ["", f"For comparison, {RESEARCH}.", "",
              "| model | width | operators | CPU s per operator (over how many) | nominal s | median solver wall s | "
              "verify CPU s per operator |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {c['model']} | {c['width']} | {c['operators']} | {c['cpu_s_per_operator']:.1f} ({c['costed_operators']}) | {c['nominal_s']:.1f} | "
              f"{c['median_solver_s']:.1f} | {c['verify_s_per_operator']:.2f} |" for c in cost]
    if rank_figure(records, RESULTS / "rank_vs_width.png"):
        lines += ["", "![Certified rank against block width, per head: softrank report's figure](rank_vs_width.png)"]
    for check in reverify_checks():
        lines += ["", f"`--reverify` ({check['checked']}): `softrank-verify` on the store of {check['in_store']:,} of the "
                  f"{check['recorded_certificates']:,} recorded certificates, {check['summary'].get('verified', 0):,} of "
                  f"{check['summary'].get('claims', 0):,} claims VERIFIED, exit {check['exit_code']}, "
                  f"{check['cpu_s']:.0f} CPU s."]
    for path in sorted((RESULTS / "reproduced").glob("*.json")):
        check = json.loads(path.read_text(encoding="utf-8"))
        lines += ["", f"`--reproduce` ({check['checked']}): unit `{check['unit']}` bracketed again from scratch at commit "
                  f"{check['now_commit'][:10]} (recorded at {check['recorded_commit'][:10]}): **{check['identical_results']} "
                  f"of {check['operators']} results identical** to the record (claims and witness arrays, by "
                  f"`result_sha256`), {check['bracket_cpu_s']:.0f} CPU s."]
    dask = RESULTS / "dask_check.json"
    if dask.is_file():
        check = json.loads(dask.read_text(encoding="utf-8"))
        killed = check.get("killed") or {}
        lines += ["", f"**On a Dask cluster** (`benchmarks/seed_scale_dask.py`, {check['checked']}): unit "
                  f"`{check['unit']}` on a loopback `dask scheduler` with 2 `dask worker` processes, one killed with "
                  f"SIGKILL after {killed.get('after_certificates')} certificates: exit {check['exit_code']}, "
                  f"{check['identical_results']} of {check['compared']} results identical to the pool run's, "
                  f"{check['verify']['verified']} of {check['verify']['claims']} claims VERIFIED; "
                  f"{check['dask_wall_s_per_operator']:.2f} s wall per operator against "
                  f"{check['pool_wall_s_per_operator']:.2f} s for the pool (`--jobs {check['pool_jobs']}`)."]
    lines += profile_lines(records)
    todo = [u for u in units if u.name not in by_name]
    if todo:
        estimate = sum(len(u.operators()) * 1.25 * nominal_cpu_seconds(u.width) for u in todo) / 3600
        lines += ["", f"Still to run: {len(todo)} units, {sum(len(u.operators()) for u in todo):,} operators, about "
                  f"{estimate:.1f} CPU hours at 1.25x the nominal seconds (`python benchmarks/seed_scale.py --list`)."]
    text = "\n".join(lines) + "\n"
    write_atomic(RESULTS / "README.md", text)
    write_atomic(RESULTS / "summary.json", json.dumps(stats, indent=1) + "\n")
    return text


def reverify_checks() -> list[dict]:
    """The ``--reverify`` runs recorded in ``reverify.json``, oldest first (one per work folder and
    session: certificates stay on the machine that made them)."""
    path = RESULTS / "reverify.json"
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["checks"] if isinstance(data, dict) and "checks" in data else [data]


def store_problems(report: dict, store: Path, records: list[dict]) -> list[str]:
    """What does not check in a store (``report``: ``softrank-verify --json`` of it): a file whose
    SHA-256 is not its name, a file that did not verify, a recorded row whose stored certificate
    is about another operator or proves other ends than the record says.  Rows whose certificate
    is not in this store (another session's) are not looked for."""
    entries = {Path(e.get("path", "")).name: e for e in report.get("files", [])}
    problems = []
    for path in sorted(store.glob("*.json")):
        if hashlib.sha256(path.read_bytes()).hexdigest() != path.stem:
            problems.append(f"{path.name}: its SHA-256 is not its name")
        entry = entries.get(path.name, {})
        if entry.get("status") != "checked" or entry.get("exit_code") != 0:
            problems.append(f"{path.name}: {entry.get('status', 'not in the report')}, exit {entry.get('exit_code')}")
    for row in (row for record in records for row in record["rows"]):
        entry = entries.get(f"{row['sha256']}.json")
        if entry is None:
            continue
        if entry.get("operator") != row["operator"]:
            problems.append(f"{row['sha256']}.json: about {entry.get('operator')}, recorded for {row['operator']}")
            continue
        ranks = {(c.get("eps"), c.get("side")): c.get("rank") for c in entry.get("claims", [])}
        if (ranks.get((row["eps"], "lower")), ranks.get((row["eps"], "upper"))) != (row["lower"], row["upper"]):
            problems.append(f"{row['sha256']}.json: other ends at eps {row['eps']} than recorded for {row['operator']}")
    return list(dict.fromkeys(problems))  # one line for a file, not one per row of it


def reverify(work: Path, log: Path) -> int:
    """``softrank-verify`` every certificate of ``WORK/store`` once more and check the store's
    addresses and the records against it (:func:`store_problems`); the summary is added to
    ``reverify.json`` beside the earlier runs'.  0 when everything checks, else 1."""
    store = work / "store"
    rc, stdout, wall, cpu = _run([sys.executable, "-m", "softrank_cert.cli.verify", str(store), "--json"], log,
                                 capture=True)
    report = json.loads(stdout) if stdout.strip() else {}
    records = load_records()
    problems = store_problems(report, store, records)
    known = {row["sha256"] for record in records for row in record["rows"]}
    present = {p.stem for p in store.glob("*.json")}
    result = {"exit_code": rc, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "summary": report.get("summary", {}),
              "recorded_certificates": len(known), "in_store": len(known & present), "problems": problems[:20],
              "problem_count": len(problems), "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_atomic(RESULTS / "reverify.json", json.dumps({"checks": reverify_checks() + [result]}, indent=1) + "\n")
    print(json.dumps(result), flush=True)
    return 0 if rc == 0 and not problems else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", type=Path, default=ROOT / "out" / "seed-scale")
    ap.add_argument("--max-hours", type=float, default=1.5, help="start no unit after this many hours (default 1.5)")
    ap.add_argument("--units", default=None, help="run only units whose name contains this text")
    ap.add_argument("--redo", action="append", default=[], help="compute this unit again (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the plan with each unit's status and stop")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--reproduce", metavar="UNIT",
                    help="bracket the recorded unit of this exact name again from scratch and compare every result "
                         "with its record (reproduced/UNIT.json), then the summary")
    ap.add_argument("--profiles", action="store_true",
                    help="profile the typical heads of each fully recorded width of 64, 128 and 256 (a few CPU minutes; "
                         "drawn heads are kept), then the summary")
    ap.add_argument("--reverify", action="store_true",
                    help="softrank-verify every certificate in WORK/store; check each file's SHA-256 against its name "
                         "and each recorded row's operator and ends against its certificate")
    args = ap.parse_args(argv)
    units, work = plan(), args.work_dir
    log = work / "campaign.log"
    work.mkdir(parents=True, exist_ok=True)
    if args.list:
        for unit in units:
            status = "done" if record_path(unit).is_file() else "to do"
            print(f"{unit.name:45s} {len(unit.operators()):4d} operators  "
                  f"~{len(unit.operators()) * 1.25 * nominal_cpu_seconds(unit.width) / 60:5.0f} CPU min  {status}")
        return 0
    if args.reverify:
        return reverify(work, log)
    failed = 0
    if args.reproduce:
        chosen = [u for u in units if u.name == args.reproduce and record_path(u).is_file()]
        if not chosen:
            raise SystemExit(f"seed_scale: no recorded unit named {args.reproduce!r} (see --list)")
        failed += not reproduce_unit(chosen[0], Panels(work), work, log)
    elif args.profiles:
        failed += not run_profiles(Panels(work), log)
    elif not args.summary_only:
        todo = [u for u in units if (not record_path(u).is_file() or u.name in args.redo)
                and (args.units is None or args.units in u.name)]
        panels, sample, deadline = Panels(work), sample_operators(units), time.monotonic() + 3600 * args.max_hours
        for index, unit in enumerate(todo, 1):
            if time.monotonic() > deadline:
                print(f"[stage bracket] --max-hours {args.max_hours:g} reached: {len(todo) - index + 1} units left; "
                      "run the same command again to go on", flush=True)
                break
            print(f"[stage bracket] unit {index}/{len(todo)}: {unit.name} ({len(unit.operators())} operators)",
                  flush=True)
            if unit.name in args.redo:  # from scratch: no kept certificate, no earlier cost
                shutil.rmtree(work / "certs" / unit.name, ignore_errors=True)
                (work / "costs" / f"{unit.name}.jsonl").unlink(missing_ok=True)
            failed += not run_unit(unit, panels, work, log, sample)
    print(write_summary(units))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
