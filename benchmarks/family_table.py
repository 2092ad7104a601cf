"""The research's table by family and its construction comparison, certified (issue 46 items 4 and 5).

The research reports, without certificates, a median upper/lower of 2.6-3.8 by family (eps 0.25,
2,302 operators of BERT, GPT-2, Qwen2.5-1.5B and ViT-Base) and, on a held-out panel of 1,152
operators, the best of six constructions at 2.6-3.7 times the lower certificate (family medians)
with truncated SVD at 1.62 times the rank of alternating l1.  This campaign measures both on the
real weights this project has, at the driver's default work, every end kernel-VERIFIED and every
certificate re-checked by ``softrank-verify`` before its record is written:

    family          capture                          widths (heads sampled)
    minilm          --model minilm                   64 (60), 128 (16), 256 (4), 512 (2)
    smollm2         --gguf smollm2                   64 (60), 128 (16), 256 (4), 512 (2)
    qwen2.5-0.5b    --gguf qwen2.5-0.5b              64 (60), 128 (16), 256 (4), 512 (2)
    qwen2.5-1.5b    --gguf qwen2.5-1.5b              64 (60), 128 (16), 256 (4), 512 (2)
    gemma3-270m     --gguf gemma3-270m               64 (60), 128 (16), 256 (4), 512 (2)
    dinov2-small    --hf dinov2-small (a photograph) 257 (12): a ViT's one width at 224 px

Heads: per family a fixed random order of all (layer, head) pairs (``numpy.random.default_rng``
seeded with :data:`SEED` and the family's name, :func:`head_order`); a width takes the first n
of that order, so the heads of width 512 are bracketed at 64, 128 and 256 as well.  The 422
operators cost about 95 CPU minutes at the driver's nominal seconds, most of them at width 64, so
that the comparison's panel passes 300 operators early; width 512 (the widest every text family
allows: MiniLM's positions, Gemma's sliding window) comes last.  Text: the first w
tokens of ``examples/data/py-specialnames.txt`` (a document no earlier run or calibration used:
held out); image: matplotlib's ``grace_hopper.jpg`` (a real photograph shipped offline).

A **unit** is one family at one width (at most ``Family.chunk`` heads: width 64 is two units,
DINOv2's width two). It is captured once per family and capture group (``softrank panel``, the
group's widths, the layers its heads need: :data:`SEPARATE_CAPTURES`), bracketed and verified by
``seed_scale.run_unit`` (the same record, store and sample as the seed-scale campaign, under
``benchmarks/results/family_table/``), then compared with the truncated SVD (:func:`svd_unit`):
per operator and eps, the least rank r whose rank-r truncated SVD the kernel VERIFIES (searched
in float64 from the least rank whose float64 error meets eps, upwards; the kernel decides), the
kernel's verdict on the SVD one rank below, and a certificate of ``[trivial lower, SVD upper]``
re-checked by ``softrank-verify``.
Its record goes to ``svd/UNIT.json`` only when every claim checks.

Resuming: a unit with both records is done; an interrupted bracket resumes from the certificates
that still verify (``--resume``), an interrupted SVD stage from the certificates it wrote.  Each
run stops starting units after ``--max-hours``; run it again to go on.

    python benchmarks/family_table.py --list             # the plan: units, status, estimated CPU
    python benchmarks/family_table.py --work-dir /work/family-table-run
    python benchmarks/family_table.py --summary-only     # rewrite README.md, summary.json, the jsonl, the figure
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import seed_scale  # noqa: E402  (first: it imports softrank_cert before numpy)
import numpy as np  # noqa: E402
from seed_scale import EPS, ROOT, _median, _run, load_records, write_atomic  # noqa: E402

SEED = 46
HEADLINE_EPS = "0.25"
DOCUMENT = "py-specialnames"
#: width -> heads sampled, for the text families (nested: a width's heads are the first of the order)
TEXT_SAMPLE = {64: 60, 128: 16, 256: 4, 512: 2}
#: Widths captured apart, each alone (added after the narrower widths had been captured, and
#: needing the layers of two heads only); a family's other widths are captured together.
SEPARATE_CAPTURES = (512,)
RESULTS = ROOT / "benchmarks" / "results" / "family_table"
RESEARCH = {"ratio": "2.6-3.8 (median upper/lower by family, eps 0.25, 2,302 operators, float64, no certificates)",
            "svd": "1.62x (truncated SVD against alternating l1, held-out panel of 1,152 operators)",
            "best": "2.6-3.7x (best of six constructions against the lower certificate, family medians)"}


@dataclass(frozen=True)
class Family:
    """One model: how ``softrank panel`` selects it, its operator label, its shape and sample."""

    label: str
    capture: tuple[str, ...]
    layers: int
    heads: int
    sample: tuple[tuple[int, int], ...]  # (width, heads sampled), narrow first
    image: bool = False
    causal: bool = True
    chunk: int = 40  # the most heads of one unit (a width's sample is cut into units of this many)
    start: int = 0  # the step of the campaign's order at which the family's first unit comes
    capture_gb: float = 2.0  # the capture's measured peak memory (docs/hf-models.md), checked before it starts


FAMILIES = {f.label: f for f in (
    Family("minilm", ("--model", "minilm"), 6, 12, tuple(TEXT_SAMPLE.items()), causal=False),
    Family("smollm2", ("--gguf", "smollm2"), 30, 9, tuple(TEXT_SAMPLE.items())),
    Family("qwen2.5-0.5b", ("--gguf", "qwen2.5-0.5b"), 24, 14, tuple(TEXT_SAMPLE.items()), capture_gb=4.0),
    Family("qwen2.5-1.5b", ("--gguf", "qwen2.5-1.5b"), 28, 12, tuple(TEXT_SAMPLE.items()), capture_gb=9.0),
    Family("gemma3-270m", ("--gguf", "gemma3-270m"), 18, 4, tuple(TEXT_SAMPLE.items()), capture_gb=3.4),
    Family("dinov2-small", ("--hf", "dinov2-small"), 12, 6, ((257, 12),), image=True, causal=False, chunk=6, start=2),
)}


def photograph() -> Path:
    """matplotlib's ``grace_hopper.jpg`` (a real photograph that ships offline)."""
    import matplotlib

    return Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"


def source(family: Family) -> Path:
    """The input a family's heads read: the held-out document, or the photograph."""
    return photograph() if family.image else ROOT / "examples" / "data" / f"{DOCUMENT}.txt"


def head_order(family: Family) -> list[tuple[int, int]]:
    """All (layer, head) pairs of ``family`` in a fixed random order (seed :data:`SEED` and the name)."""
    pairs = [(layer, head) for layer in range(family.layers) for head in range(family.heads)]
    key = int.from_bytes(hashlib.sha256(f"{SEED}/{family.label}".encode()).digest()[:8], "big")
    order = np.random.default_rng([SEED, key]).permutation(len(pairs))
    return [pairs[i] for i in order]


@dataclass(frozen=True)
class Unit:
    """One family at one width: ``heads``, the heads ``first``, ``first + 1``, ... of its order
    (duck-types ``seed_scale.Unit`` for ``run_unit``)."""

    model: str
    document: str
    width: int
    heads: tuple[tuple[int, int], ...]
    first: int = 0

    @property
    def name(self) -> str:
        stem = f"{self.model}-{self.document}-w{self.width}"
        return f"{stem}-n{len(self.heads)}" if self.first == 0 else f"{stem}-h{self.first}-{self.first + len(self.heads) - 1}"

    @property
    def layers(self) -> tuple[int, ...]:
        return tuple(sorted({layer for layer, _ in self.heads}))

    def operators(self) -> list[str]:
        return [f"{self.model}/{self.document}/w{self.width}/L{layer}H{head}" for layer, head in sorted(self.heads)]


def plan() -> list[Unit]:
    """Every unit in the campaign's order: step by step, each family's next unit (narrow widths
    first within a family; a family enters at its ``start`` step), the widest first within a step.
    So the text families' 300 width-64 heads come first (the comparison's panel), then DINOv2's
    and the wider units."""
    units = []
    for family in FAMILIES.values():
        order, mine = head_order(family), []
        for width, n in family.sample:
            mine += [Unit(family.label, source(family).stem, width, tuple(order[i:min(i + family.chunk, n)]), i)
                     for i in range(0, n, family.chunk)]
        units += [(family.start + step, unit) for step, unit in enumerate(mine)]
    return [unit for _, unit in sorted(units, key=lambda pair: (pair[0], -pair[1].width))]


def estimated_cpu_seconds(units: list[Unit]) -> float:
    """The units' bracket CPU at the driver's nominal seconds (measured: about 0.75x that at width 128)."""
    return sum(len(u.operators()) * seed_scale.nominal_cpu_seconds(u.width) for u in units)


# --- capture ------------------------------------------------------------------------------------

class CaptureError(Exception):
    """A family could not be captured now (too little memory free, or ``softrank panel`` failed)."""


class Panels(seed_scale.Panels):
    """Each family captured once (all its widths, the layers its sample needs) by ``softrank
    panel`` in a child process; ``seed_scale.Panels`` cuts it per unit."""

    def __init__(self, work: Path, log: Path, results: Path) -> None:
        super().__init__(work)
        self.log, self.results = log, results

    def capture_file(self, family: Family, width: int) -> Path:
        """The family's captured panel of ``width``'s capture group (:func:`capture_group`), made
        once (its cost added to ``RESULTS/captures.json`` under :func:`capture_name`)."""
        group = capture_group(family, width)
        name = capture_name(family, width)
        path = self.folder / "families" / f"{name}.npz"
        if path.is_file():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        from softrank_cert.util.memory import available_memory

        free = available_memory()
        if free is not None and free < family.capture_gb * 2**30:
            raise CaptureError(f"capturing {family.label} takes about {family.capture_gb:g} GB; "
                               f"{free / 2**30:.1f} GiB available now")
        layers = sorted({layer for layer, _ in head_order(family)[:max(n for _, n in group)]})
        command = [sys.executable, "-m", "softrank_cert.cli.main", "panel", *family.capture,
                   "--image" if family.image else "--text", str(source(family)), "--layers", ",".join(map(str, layers)),
                   "--out", str(path), "--quiet"]
        if not family.image:
            command += ["--widths", ",".join(str(w) for w, _ in group)]
        print(f"[stage capture] {name}: layers {','.join(map(str, layers))}", file=sys.stderr, flush=True)
        rc, _, wall, cpu = _run(command, self.log)
        if rc != 0 or not path.is_file():
            raise CaptureError(f"capturing {name} exited {rc} (see {self.log})")
        costs = captures(self.results)
        costs[name] = {"layers": layers, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
                       "command": " ".join(["softrank", *command[3:]])}
        write_atomic(self.results / "captures.json", json.dumps(costs, indent=1, sort_keys=True) + "\n")
        return path

    def _capture(self, model: str, document: str, width: int) -> dict[str, np.ndarray]:
        from softrank_cert.util.operator_files import PROVENANCE_KEY

        prefix = f"{model}/{document}/w{width}/"
        with np.load(self.capture_file(FAMILIES[model], width), allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files if key.startswith(prefix)}
            provenance = json.loads(str(data[PROVENANCE_KEY]))
        arrays[PROVENANCE_KEY] = np.array(json.dumps({n: v for n, v in provenance.items() if n.startswith(prefix)},
                                                     sort_keys=True))
        return arrays


def capture_group(family: Family, width: int) -> tuple[tuple[int, int], ...]:
    """The (width, heads sampled) pairs of ``family`` captured together with ``width``: ``width``
    alone if it is one of :data:`SEPARATE_CAPTURES`, else every width that is not."""
    alone = width in SEPARATE_CAPTURES
    return tuple((w, n) for w, n in family.sample if (w == width if alone else w not in SEPARATE_CAPTURES))


def capture_name(family: Family, width: int) -> str:
    """The name of ``width``'s capture of ``family``: the family's label, with ``-wWIDTH`` for a
    width captured apart."""
    return f"{family.label}-w{width}" if width in SEPARATE_CAPTURES else family.label


def captures(results: Path) -> dict:
    """The recorded capture costs, by family."""
    path = results / "captures.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


# --- the construction comparison: truncated SVD alone ---------------------------------------------

def svd_end(op: object, eps: str) -> tuple[object, dict]:
    """The least-rank truncated-SVD witness the kernel VERIFIES at ``eps`` (the trivial ``r = p``
    when none does), and what was found on the way: the least rank whose float64 error meets
    eps, the ranks the kernel did not verify, its verdict on the SVD one rank below."""
    from softrank_cert.kernel import parse_tolerance, verify_upper
    from softrank_cert.certio.verified import verify_upper_end
    from softrank_cert.solvers import CandidatePool, Ends, OneShot
    from softrank_cert.util.dense import Dense

    d = Dense.of(op)
    shots = OneShot(CandidatePool(d))
    errors = shots.tsvd
    value = float(parse_tolerance(eps))
    meets = [r for r in range(1, d.p) if errors[r] <= value]
    info = {"float64_rank": meets[0] if meets else None, "not_verified": []}
    for r in meets:
        end = verify_upper_end(op, eps, r, *_tsvd(shots, r), "tsvd", error=float(errors[r]))
        if end is not None:
            if r > 1:
                info["below"] = verify_upper(op, eps, r - 1, *_tsvd(shots, r - 1), method="tsvd").status.name
            return end, info
        info["not_verified"].append(r)
    return Ends(op, eps).upper, info  # the identity witness (r = p)


def _tsvd(shots: object, r: int) -> tuple:
    """The factors ``(U, W)`` of the rank-r truncated SVD witness."""
    w = shots.witness("tsvd", r)
    return w.U, w.W


def svd_certificate(name: str, op: object, provenance: dict) -> tuple[dict, dict]:
    """A certificate of ``[trivial lower, least verified SVD upper]`` at every eps, and the search's notes."""
    from softrank_cert.certio.issuing import certificate_for
    from softrank_cert.certio.verified import VerifiedBracket
    from softrank_cert.solvers import Ends

    brackets, notes = [], {}
    for eps in EPS:
        upper, notes[eps] = svd_end(op, eps)
        brackets.append(VerifiedBracket(eps, Ends(op, eps).lower, upper))
    return certificate_for(name, op, brackets, provenance), notes


def svd_path(unit: Unit, results: Path) -> Path:
    return results / "svd" / f"{unit.name}.json"


def svd_unit(unit: Unit, panel: Path, work: Path, log: Path, results: Path) -> bool:
    """The truncated-SVD end of every operator of ``unit`` at every eps, certified, re-checked by
    ``softrank-verify`` and recorded beside the unit's bracket record; False (nothing recorded)
    when a claim does not check."""
    from softrank_cert.util.files import write_json_atomic
    from softrank_cert.util.operator_files import load_operators

    out, notes_file = work / "svd" / unit.name, work / "svd" / f"{unit.name}.notes.json"
    out.mkdir(parents=True, exist_ok=True)
    notes = json.loads(notes_file.read_text(encoding="utf-8")) if notes_file.is_file() else {}
    start = time.process_time()
    for name in unit.operators():
        target = out / f"{name.replace('/', '-')}.json"
        if target.is_file() and name in notes:
            continue  # resumed: softrank-verify below checks it again
        (named,) = load_operators(panel, [name])
        certificate, notes[name] = svd_certificate(name, named.operator, named.provenance)
        write_json_atomic(target, certificate)
        write_atomic(notes_file, json.dumps(notes, sort_keys=True) + "\n")
    cpu = time.process_time() - start
    vrc, stdout, _, vcpu = _run([sys.executable, "-m", "softrank_cert.cli.verify", str(out), "--json"], log,
                                capture=True)
    report = json.loads(stdout) if stdout.strip() else {"files": [], "summary": {}}
    rows, problems = seed_scale.verified_rows(report, unit)
    if vrc != 0 or problems:
        print(f"  {unit.name}: softrank-verify of the SVD certificates exited {vrc}; {len(problems)} problems, "
              f"first: {problems[0] if problems else '-'}; not recorded", flush=True)
        return False
    bracket = {(r["operator"], r["eps"]): r for r in json.loads(seed_scale.record_path(unit, results).read_text(
        encoding="utf-8"))["rows"]}
    kept = [{"operator": r["operator"], "eps": r["eps"], "svd": r["upper"], "svd_method": r["upper_method"],
             "upper": bracket[(r["operator"], r["eps"])]["upper"], "lower": bracket[(r["operator"], r["eps"])]["lower"],
             "sha256": r["sha256"], **notes[r["operator"]][r["eps"]]} for r in rows]
    record = {"unit": unit.name, "model": unit.model, "width": unit.width, "operators": len(unit.operators()),
              "cpu_s": round(cpu, 1), "verify": {"exit_code": vrc, "cpu_s": round(vcpu, 1),
                                                  "claims": report["summary"].get("claims"),
                                                  "verified": report["summary"].get("verified")},
              **seed_scale._commit(), "rows": kept}
    write_atomic(svd_path(unit, results), json.dumps(record, indent=0, sort_keys=True) + "\n")
    print(f"  {unit.name}: SVD ends of {len(unit.operators())} operators, {cpu:.0f} CPU s, "
          f"{report['summary'].get('verified')} claims VERIFIED", flush=True)
    return True


# --- summary ------------------------------------------------------------------------------------

def load_svd(results: Path) -> list[dict]:
    folder = results / "svd"
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def comparison(svd_records: list[dict], by_width: bool = False) -> list[dict]:
    """Per family x eps (all widths together, or per width too): operators, median SVD/upper and
    SVD/lower, the median bracket upper/lower beside them, and how often the kernel rejected the
    SVD below."""
    cells: dict[tuple[str, int, str], list[dict]] = {}
    for record in svd_records:
        for row in record["rows"]:
            cells.setdefault((record["model"], record["width"] if by_width else 0, row["eps"]), []).append(row)
    out = []
    for (model, width, eps), rows in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], float(kv[0][2]))):
        out.append({"model": model, **({"width": width} if by_width else {}), "eps": eps, "operators": len(rows),
                    "median_svd_over_upper": round(_median([r["svd"] / max(r["upper"], 1) for r in rows]), 2),
                    "median_svd_over_lower": round(_median([r["svd"] / max(r["lower"], 1) for r in rows]), 2),
                    "median_upper_over_lower": round(_median([r["upper"] / max(r["lower"], 1) for r in rows]), 2),
                    "svd_is_upper_percent": round(100.0 * sum(r["svd"] == r["upper"] for r in rows) / len(rows), 1),
                    "below_rejected": sum(r.get("below") == "REJECTED" for r in rows),
                    "below_checked": sum("below" in r for r in rows),
                    "not_verified_at_float64_rank": sum(bool(r["not_verified"]) for r in rows)})
    return out


def family_ratios(rows: list[dict], key: str) -> str:
    """``min-max`` of ``key`` over the families' rows at the headline eps."""
    values = [r[key] for r in rows if r["eps"] == HEADLINE_EPS and not math.isnan(r[key])]
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"


def figure(table: list[dict], compared: list[dict], path: Path) -> bool:
    """Median upper/lower against width per family, and the SVD ratios per family, at eps 0.25."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in table if r["eps"] == HEADLINE_EPS]
    if not rows:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    for model in FAMILIES:
        mine = sorted((r["width"], r["median_ratio"]) for r in rows if r["model"] == model)
        if mine:
            left.plot(*zip(*mine), "-o", label=model)
    left.axhspan(2.6, 3.8, color="grey", alpha=0.2, label="the research: 2.6-3.8")
    left.set_xscale("log", base=2)
    ticks = sorted({r["width"] for r in rows})
    left.set_xticks(ticks, [str(w) for w in ticks])
    left.set_ylim(0.9, 4.0)
    left.set_xlabel("width (tokens; DINOv2: 256 patches + class token)")
    left.set_ylabel(f"median upper / lower, eps {HEADLINE_EPS}")
    left.legend(fontsize=7, loc="upper left")
    mine = [c for c in compared if c["eps"] == HEADLINE_EPS]
    x = np.arange(len(mine))
    for shift, key, label in ((-0.27, "median_svd_over_upper", "SVD / best witness (upper end)"),
                              (0.0, "median_svd_over_lower", "SVD / lower end"),
                              (0.27, "median_upper_over_lower", "best witness / lower end")):
        right.bar(x + shift, [c[key] for c in mine], 0.27, label=label)
    right.axhline(1.62, color="C3", linestyle="--", label="the research: SVD / alternating l1, 1.62")
    right.axhspan(2.6, 3.7, color="grey", alpha=0.2, label="the research: best / lower, 2.6-3.7")
    right.set_ylim(0, 4.0)
    right.set_xticks(x, [c["model"] for c in mine], rotation=20, fontsize=8)
    right.set_ylabel(f"median ratio of verified ranks, eps {HEADLINE_EPS}")
    right.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    from softrank_cert.util.files import replace_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, lambda temporary: fig.savefig(temporary, dpi=110, format="png"))
    plt.close(fig)
    return True


def write_summary(units: list[Unit], results: Path | None = None) -> str:
    """README.md, summary.json and rows.jsonl of ``results`` (default :data:`RESULTS`), and the figure."""
    results = results or RESULTS
    records, svd_records = load_records(results), load_svd(results)
    done = {r["unit"] for r in records} & {r["unit"] for r in svd_records}
    rows, compared = seed_scale.table(records), comparison(svd_records)
    stats = {"seed": SEED, "planned_units": len(units), "done_units": len(done),
             "planned_operators": sum(len(u.operators()) for u in units),
             "done_operators": sum(r["operators"] for r in records if r["unit"] in done),
             "claims_verified": sum((r["verify"]["verified"] or 0) for r in records + svd_records),
             "cpu_hours": round(sum(r["bracket_cpu_s"] + r["verify"]["cpu_s"] for r in records) / 3600
                                + sum(r["cpu_s"] + r["verify"]["cpu_s"] for r in svd_records) / 3600
                                + sum(c["cpu_s"] for c in captures(results).values()) / 3600, 2),
             "table": rows, "comparison": compared, "costs": seed_scale.costs(records),
             "captures": captures(results), "units": {u.name: u.name in done for u in units}}
    lines = ["# The research's table by family, and its construction comparison, certified (issue 46)", "",
             f"{stats['done_operators']:,} of {stats['planned_operators']:,} planned operators ({len(done)} of "
             f"{len(units)} units), eps {' / '.join(EPS)}, default work, `--jobs {seed_scale.JOBS}`; "
             f"{stats['claims_verified']:,} claims, every one VERIFIED by `softrank-verify` before its record was "
             f"written. CPU {stats['cpu_hours']:.2f} h in all (captures, brackets, SVD ends, verification). Plan, "
             f"sample (seed {SEED}) and method: `benchmarks/family_table.py`; text: the first w tokens of "
             f"`examples/data/{DOCUMENT}.txt`, image: `grace_hopper.jpg`.", "",
             "| family | layers x heads | heads sampled by width | the last width's heads (every width has them) |",
             "|---|---|---|---|"]
    for family in FAMILIES.values():
        last = head_order(family)[:family.sample[-1][1]]
        lines.append(f"| {family.label} | {family.layers} x {family.heads} | "
                     f"{', '.join(f'{w}: {n}' for w, n in family.sample)} | "
                     f"{' '.join(f'L{la}H{h}' for la, h in sorted(last))} |")
    lines += ["", "| unit | complete |", "|---|---|"]
    lines += [f"| `{u.name}` | {'yes' if u.name in done else 'no (not run yet)'} |" for u in units]
    lines += ["", "## Median upper/lower by family", "",
              "| family | width | eps | operators | median upper/lower | resolved | median lower | median upper |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['width']} | {r['eps']} | {r['operators']} | {r['median_ratio']:.2f} | "
              f"{r['resolved_percent']:.1f} % | {r['median_lower']:g} | {r['median_upper']:g} |" for r in rows]
    lines += ["", f"Families' range at eps {HEADLINE_EPS} (per width): "
              + "; ".join(f"w{w}: {family_ratios([r for r in rows if r['width'] == w], 'median_ratio')}"
                          for w in sorted({r['width'] for r in rows})) + f". The research: {RESEARCH['ratio']}.",
              "", "## Truncated SVD against the search's best witness and the lower end", "",
              "Per operator and eps: the least rank whose truncated SVD the kernel VERIFIES (float64 search from the "
              "least rank whose float64 error meets eps, upwards), divided by the bracket's upper end (the best "
              "witness the default search finds) and by its lower end; all widths of a family together. "
              "`below`: the kernel's verdict on the SVD one rank lower (REJECTED of checked).", "",
              "| family | eps | operators | median SVD/upper | median SVD/lower | median upper/lower | SVD = upper | "
              "below REJECTED | SVD not verified at its float64 rank |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {c['model']} | {c['eps']} | {c['operators']} | {c['median_svd_over_upper']:.2f} | "
              f"{c['median_svd_over_lower']:.2f} | {c['median_upper_over_lower']:.2f} | {c['svd_is_upper_percent']:.1f} % | "
              f"{c['below_rejected']} of {c['below_checked']} | {c['not_verified_at_float64_rank']} |" for c in compared]
    widths = [c for c in comparison(svd_records, by_width=True) if c["eps"] == HEADLINE_EPS]
    stats["comparison_by_width"] = widths
    lines += ["", f"By width at eps {HEADLINE_EPS}:", "",
              "| family | width | operators | median SVD/upper | median SVD/lower | median upper/lower |",
              "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {c['model']} | {c['width']} | {c['operators']} | {c['median_svd_over_upper']:.2f} | "
              f"{c['median_svd_over_lower']:.2f} | {c['median_upper_over_lower']:.2f} |" for c in widths]
    lines += ["", f"Families' range at eps {HEADLINE_EPS}: SVD/upper {family_ratios(compared, 'median_svd_over_upper')}, "
              f"SVD/lower {family_ratios(compared, 'median_svd_over_lower')}, best witness/lower "
              f"{family_ratios(compared, 'median_upper_over_lower')}. The research: {RESEARCH['svd']}; {RESEARCH['best']}.",
              "", "## Costs", "", "| family | layers captured | capture CPU s | capture wall s |", "|---|---|---:|---:|"]
    lines += [f"| {m} | {','.join(map(str, c['layers']))} | {c['cpu_s']:.0f} | {c['wall_s']:.0f} |"
              for m, c in sorted(stats["captures"].items())]
    lines += ["", "| family | width | operators | bracket CPU s per operator | nominal s | median solver wall s |",
              "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {c['model']} | {c['width']} | {c['operators']} | {c['cpu_s_per_operator']:.1f} | {c['nominal_s']:.1f} | "
              f"{c['median_solver_s']:.1f} |" for c in stats["costs"]]
    if figure(rows, compared, results / "family_table.png"):
        lines += ["", "![Median upper/lower by family and width; SVD ratios by family](family_table.png)"]
    write_atomic(results / "README.md", "\n".join(lines) + "\n")
    write_atomic(results / "summary.json", json.dumps(stats, indent=1) + "\n")
    jsonl = [json.dumps({"model": r["model"], "width": r["width"], **row}, sort_keys=True)
             for r in svd_records for row in r["rows"]]
    write_atomic(results / "rows.jsonl", "\n".join(jsonl) + ("\n" if jsonl else ""))
    return "\n".join(lines) + "\n"


def run(units: list[Unit], work: Path, max_hours: float, results: Path) -> int:
    """Bracket and compare every unit not yet recorded, narrow first, until ``max_hours``."""
    log = work / "campaign.log"
    panels, deadline, failed = Panels(work, log, results), time.monotonic() + 3600 * max_hours, 0
    sample = seed_scale.sample_operators(units)
    todo = [u for u in units if not svd_path(u, results).is_file()]
    deferred: set[str] = set()
    while todo:
        unit = todo.pop(0)
        if time.monotonic() > deadline:
            print(f"[stage bracket] --max-hours {max_hours:g} reached: {len(todo) + 1} units left", flush=True)
            break
        print(f"[stage bracket] {unit.name} ({len(unit.operators())} operators; {len(todo)} units after it)",
              flush=True)
        try:
            if not seed_scale.record_path(unit, results).is_file():
                if not seed_scale.run_unit(unit, panels, work, log, sample, results):
                    failed += 1
                    continue
            failed += not svd_unit(unit, panels.unit_panel(unit), work, log, results)
        except CaptureError as exc:  # once more after the other units, then given up for this run
            print(f"  {unit.name}: {exc}; {'given up' if unit.name in deferred else 'tried again last'}", flush=True)
            failed += unit.name in deferred
            todo += [] if unit.name in deferred else [unit]
            deferred.add(unit.name)
            continue
        write_summary(units, results)
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", type=Path, default=ROOT / "out" / "family-table")
    ap.add_argument("--max-hours", type=float, default=1.5, help="start no unit after this many hours (default 1.5)")
    ap.add_argument("--families", default=None, help="only these families (comma-separated labels)")
    ap.add_argument("--list", action="store_true", help="print the plan with each unit's status and stop")
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args(argv)
    units = plan()
    if args.list:
        for unit in units:
            status = "done" if svd_path(unit, RESULTS).is_file() else "to do"
            print(f"{unit.name:40s} {len(unit.operators()):4d} operators  "
                  f"~{estimated_cpu_seconds([unit]) / 60:5.1f} CPU min  {status}")
        print(f"{sum(len(u.operators()) for u in units)} operators, ~{estimated_cpu_seconds(units) / 60:.0f} CPU min "
              f"at the nominal seconds (seed {SEED})")
        return 0
    failed = 0
    if not args.summary_only:
        chosen = [u for u in units if args.families is None or u.model in args.families.split(",")]
        args.work_dir.mkdir(parents=True, exist_ok=True)
        failed = run(chosen, args.work_dir, args.max_hours, RESULTS)
    print(write_summary(units))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
