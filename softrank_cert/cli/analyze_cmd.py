"""``softrank analyze``: does interaction geometry predict certified rank?"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import closing
from fractions import Fraction
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InvalidInputError
from ..kernel import DEFAULT_MAX_PREC, parse_tolerance
from ..operators_npz import NamedOperator, load_operators, natural_key
from ..parallel import pack_operator, resolve_jobs, run_ordered
from .bracket_cmd import add_parallel_options, parse_eps_list
from .common import (
    PLOT_SUFFIXES, OutputFiles, check_distinct_outputs, check_output_file, expand_json_paths, int_list, progress_bar,
    safe_text, stdout_console,
)

EPILOG = """\
examples:
  softrank bracket panel.npz --all --eps 0.1,0.25,0.5 --out certs/ --jobs 2
  softrank analyze certs/ --operators panel.npz --out analysis.json --plot analysis.png --table analysis.md
  softrank analyze certs/ --operators a.npz b.npz --eps 0.25 --out analysis.json --plot analysis.png --jobs 2
  softrank analyze certs/ --operators panel.npz --out analysis.json --plot analysis.png --json \\
      --trusted-keys issuer.key.pub --require-signature

CERTS_DIR (e.g. the folder softrank bracket --all --out certs/ wrote) comes before
--operators, which takes one or more panels. Every certificate is re-verified by the trusted
kernel (as softrank-verify does) and must be about the panel operator of the same name, bit
for bit; only VERIFIED ends count. Operator i provably needs more rank than j at eps when
lower_i > upper_j. For each score (intrinsic =
certified upper bound of log Phi* over a rank grid; native = (d/2) log(1 + Gamma/eps^2);
baseline = width, eps, row entropy and effective rank of A fitted with the interval loss;
interaction_dim = the minimising r) the report gives the certified concordance with bootstrap
intervals over operators, held-out cross-validation by document and by layer, and the
power-of-two refactorization check (Q -> Q D, K -> K D^-1).

exit codes: 0 the analysis ran; 2 invalid input (unreadable or invalid certificate, a
certificate about another operator or not in the panels, a tolerance missing from a
certificate, a causal or probabilities operator, unusable --out/--plot/--table: checked
before any work; a failed run writes nothing); 1 / 3 a certificate with a REJECTED /
INCONCLUSIVE claim (without --drop-unverified); 4 a checker bug.
"""


def add_analyze(sub: Any) -> None:
    p = sub.add_parser("analyze", help="does interaction geometry predict certified rank? (concordance, held-out, "
                                       "invariance)",
                       description="Read kernel-verified brackets from certificates, compute the intrinsic, native "
                                   "and baseline scores of every operator, and report how well each orders the "
                                   "certified ranks, whether it adds held-out information beyond a calibrated "
                                   "baseline, and what a power-of-two refactorization does to it.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("certificates", nargs="+", metavar="CERTS_DIR", help="certificate folders (*.json below) or files")
    p.add_argument("--operators", nargs="+", required=True, metavar="PANEL.npz",
                   help="the panels holding the certified operators (names must match the certificates)")
    p.add_argument("--eps", metavar="E1,E2,...", help="tolerances to analyse (default: those of every certificate)")
    p.add_argument("--out", required=True, metavar="REPORT.json", help="write the report JSON here")
    p.add_argument("--plot", required=True, metavar="FIG.png", help="score against bracket intervals (.png, .pdf, .svg)")
    p.add_argument("--table", metavar="REPORT.md", help="write the tables as Markdown")
    p.add_argument("--ranks", type=int_list, metavar="R1,R2,...",
                   help="rank grid of the intrinsic score (default 1,2,3,4,6,8,12,16,24,32,48,64 up to min(d, 64))")
    p.add_argument("--bootstrap", type=int, default=2000, metavar="B", help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=20260, help="bootstrap seed (default 20260)")
    p.add_argument("--trusted-keys", metavar="FILE", help="did:key list (or a .pub file): only these signers are accepted")
    p.add_argument("--require-signature", action="store_true", help="unsigned certificates are invalid input (exit 2)")
    p.add_argument("--drop-unverified", action="store_true",
                   help="leave out tolerances whose ends are not both VERIFIED instead of refusing the certificate")
    add_parallel_options(p)
    p.add_argument("--json", action="store_true", help="print the report JSON instead of the tables")
    p.set_defaults(run=run_analyze)


# ----------------------------------------------------------------------------- inputs

def _load_panels(paths: list[str]) -> tuple[dict[str, NamedOperator], dict[str, str]]:
    operators: dict[str, NamedOperator] = {}
    stems: dict[str, str] = {}
    where: dict[str, str] = {}
    for path in paths:
        for item in load_operators(Path(path)):
            if item.name in operators:
                raise InvalidInputError(f"operator {item.name!r} is in both {where[item.name]} and {path}")
            operators[item.name], stems[item.name], where[item.name] = item, Path(path).stem, path
    return operators, stems


def _read_certificates(paths: list[str]) -> list[tuple[str, bytes, str, list[str]]]:
    """``(path, bytes, operator id, eps strings)`` of each certificate, schema-checked (exit 2)."""
    from ..certio.certificate import MAX_CERTIFICATE_BYTES, check_schema, parse_json_strict

    out = []
    for path in paths:
        try:
            if Path(path).stat().st_size > MAX_CERTIFICATE_BYTES:
                raise InvalidInputError(f"{path}: larger than {MAX_CERTIFICATE_BYTES} bytes")
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            document = parse_json_strict(raw)
            check_schema(document)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path}: {exc}") from None
        out.append((path, raw, document["operator"]["id"], [b["eps"] for b in document["brackets"]]))
    return out


def _choose_eps(requested: str | None, certificates: list[tuple[str, bytes, str, list[str]]]) -> list[str]:
    """Requested tolerances (each in every certificate) or those common to all certificates."""
    def values(eps: list[str]) -> dict[Fraction, str]:
        return {parse_tolerance(e): e for e in eps}

    if requested is not None:
        wanted = parse_eps_list(requested)
        for path, _raw, _name, eps in certificates:
            have = values(eps)
            for e in wanted:
                if parse_tolerance(e) not in have:
                    raise InvalidInputError(f"{path}: no bracket at eps {e} (it has {', '.join(eps)})")
        # the certificates' own spelling (so that "0.250" matches "0.25")
        first = values(certificates[0][3])
        return [first[parse_tolerance(e)] for e in wanted]
    common = set(values(certificates[0][3]))
    for _path, _raw, _name, eps in certificates[1:]:
        common &= set(values(eps))
    if not common:
        raise InvalidInputError("the certificates share no tolerance: choose with --eps")
    first = values(certificates[0][3])
    return [first[v] for v in sorted(common)]


def analysis(certificates: list[str], panels: list[str], eps: str | None = None, *, ranks: list[int] | None = None,
             resamples: int = 2000, seed: int = 20260, trusted_keys: frozenset[str] | None = None,
             require_signature: bool = False, drop_unverified: bool = False, jobs: int = 1,
             scheduler: str | None = None, show_progress: bool = True, cache: Path | None = None) -> dict[str, Any]:
    """Run the analysis (see :mod:`softrank_cert.studies.analyze`) and return the report.

    ``cache`` (studies only, not a CLI option): a folder of per-operator results keyed by the
    SHA-256 of the certificate's bytes, the panel operator, the tolerances and the options, so
    that an interrupted study resumes where it stopped.
    """
    from ..certio.signing import utc_now_rfc3339
    from ..studies.analyze import analyze_task, build_report

    for path in panels:
        if not Path(path).is_file():
            raise InvalidInputError(f"{path}: no such file")
    paths = expand_json_paths(certificates)
    if not paths:
        raise InvalidInputError("no certificate files found")
    operators, stems = _load_panels(panels)
    read = _read_certificates(paths)
    seen: dict[str, str] = {}
    for path, _raw, name, _eps in read:
        if name not in operators:
            raise InvalidInputError(f"{path}: certificate operator {name!r} is not in the panels "
                                    f"({', '.join(Path(p).name for p in panels)})")
        if name in seen:
            raise InvalidInputError(f"{path} and {seen[name]} are both about {name!r}")
        seen[name] = path
    eps_list = _choose_eps(eps, read)
    read.sort(key=lambda item: natural_key(item[2]))
    options = {"trusted_keys": trusted_keys, "require_signature": require_signature,
               "drop_unverified": drop_unverified, "max_prec": DEFAULT_MAX_PREC}
    tasks = [(pack_operator(operators[name].operator), name, raw, path, eps_list, ranks, options)
             for path, raw, name, _eps in read]
    start = time.perf_counter()
    results: list[Any] = [None] * len(tasks)
    keys = [_cache_key(task) for task in tasks] if cache is not None else []
    if cache is not None:
        for i, key in enumerate(keys):
            hit = Path(cache) / f"{key}.json"
            if hit.is_file():
                results[i] = json.loads(hit.read_text(encoding="utf-8"))
    todo = [i for i, result in enumerate(results) if result is None]
    with progress_bar(show_progress) as bar:
        task = bar.add_task("analysing", total=len(todo))
        with closing(run_ordered(analyze_task, [tasks[i] for i in todo], jobs=jobs, scheduler=scheduler,
                                 done=lambda j: bar.update(task, advance=1,
                                                           description=safe_text(read[todo[j]][2])))) as out:
            for i, result in zip(todo, out):
                results[i] = result
                if cache is not None:
                    from .common import write_text_atomic

                    write_text_atomic(Path(cache) / f"{keys[i]}.json", json.dumps(result))
    report = build_report(results, stems, eps_list, resamples=resamples, seed=seed)
    report["generator"] = {"name": "softrank-cert", "version": __version__, "created": utc_now_rfc3339()}
    report["inputs"] = {"certificates": len(paths), "panels": [str(p) for p in panels],
                        "operators_without_certificate": len(set(operators) - set(seen))}
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report


def _cache_key(task: tuple) -> str:
    """SHA-256 of everything a per-operator result depends on (and of the result format's version)."""
    import hashlib

    from ..studies import analyze

    spec, name, raw, path, eps_list, ranks, options = task
    digest = hashlib.sha256()
    digest.update(analyze.RESULT_VERSION.encode())
    digest.update(raw)
    for key in sorted(spec["arrays"]):
        digest.update(key.encode() + spec["arrays"][key].astype("<f8").tobytes())
    digest.update(json.dumps([name, spec["beta"], spec["mask"], eps_list, ranks, options["drop_unverified"],
                              options["require_signature"], sorted(options["trusted_keys"] or [])]).encode())
    return digest.hexdigest()


# ----------------------------------------------------------------------------- command

def run_analyze(args: Any) -> int:
    from ..certio.signing import load_trusted_keys

    probed: set[Path] = set()
    out = check_output_file(args.out, "--out", suffixes=(".json",), probed=probed)
    plot = check_output_file(args.plot, "--plot", suffixes=PLOT_SUFFIXES, probed=probed)
    table = check_output_file(args.table, "--table", suffixes=(".md",), probed=probed) if args.table else None
    if args.eps is not None:
        parse_eps_list(args.eps)
    if args.bootstrap < 10:
        raise InvalidInputError(f"--bootstrap must be >= 10, got {args.bootstrap}")
    if args.ranks is not None and min(args.ranks) < 1:
        raise InvalidInputError("--ranks must be positive integers")
    jobs = resolve_jobs(args.jobs)
    trusted = load_trusted_keys(args.trusted_keys) if args.trusted_keys else None
    inputs = {f"panel {path}": Path(path) for path in args.operators}
    check_distinct_outputs({"--out": out, "--plot": plot, "--table": table}, inputs)
    report = analysis(args.certificates, args.operators, args.eps, ranks=args.ranks, resamples=args.bootstrap,
                      seed=args.seed, trusted_keys=trusted, require_signature=args.require_signature,
                      drop_unverified=args.drop_unverified, jobs=jobs, scheduler=args.scheduler,
                      show_progress=not args.json)
    with OutputFiles() as outputs:  # all or nothing
        outputs.stage_json(out, report)
        if table:
            outputs.stage_text(table, markdown_report(report))
        outputs.stage_figure(analysis_figure(report), plot)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        render(report)
        print("; ".join(f"{what}: {path}" for what, path in (("report", args.out), ("plot", args.plot),
                                                              ("table", args.table)) if path))
    return 0


# ----------------------------------------------------------------------------- rendering

def _ci(ci: list[float] | None) -> str:
    return "-" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _num(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.4f}"


def score_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, entry in report["scores"].items():
        per_eps = "; ".join(f"{eps}: {_num(e['concordance'])} {_ci(e['ci'])} ({e['pairs']})"
                            for eps, e in entry["by_eps"].items())
        rows.append([name, entry["certified"], _num(entry["concordance"]), _ci(entry["ci"]), str(entry["pairs"]),
                     per_eps])
    return rows


SCORE_COLUMNS = ("score", "certified", "concordance", "95% CI", "certified pairs", "by eps: concordance CI (pairs)")


def group_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key in ("family", "document", "width", "layer"):
        values = None
        for entry in report["scores"].values():
            values = list(entry.get(f"by_{key}", {}))
            break
        for value in values or []:
            cells = [key, value]
            for name in report["scores"]:
                e = report["scores"][name][f"by_{key}"][value]
                cells.append(f"{_num(e['concordance'])} {_ci(e['ci'])}")
            cells.append(str(next(iter(report["scores"].values()))[f"by_{key}"][value]["pairs"]))
            rows.append(cells)
    return rows


def heldout_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for scheme, held in report["heldout"].items():
        if "skipped" in held:
            rows.append([scheme, "-", "-", "-", "-", "-", held["skipped"]])
            continue
        base = held["models"].get("baseline", {})
        for name, d in held["added"].items():
            model = held["models"][f"baseline+{name}"]
            rows.append([f"{scheme} ({len(held['folds'])} folds)", name,
                         f"{_num(base.get('loss'), '.4f')} -> {_num(model.get('loss'), '.4f')}",
                         f"{_signed(d['loss_difference'])} {_ci(d['loss_difference_ci'])}",
                         f"{_num(base.get('concordance'))} -> {_num(model.get('concordance'))}",
                         f"{_signed(d['concordance_difference'])} {_ci(d['concordance_difference_ci'])}",
                         d["verdict"]])
    return rows


HELDOUT_COLUMNS = ("folds by", "added score", "held-out loss (baseline -> with score)", "loss difference 95% CI",
                   "held-out concordance", "concordance difference 95% CI", "reading")


def invariance_line(report: dict[str, Any]) -> str:
    inv = report["invariance"]
    return (f"Invariance ({inv['refactorization']}): of {inv['checked']} qk operators, brackets identical "
            f"{inv['brackets_identical']} (the certificates' own witnesses re-verified on the refactored operator: "
            f"same claims, same verdicts; the kernel's margin enclosures bit-identical {inv['margins_identical']}, "
            f"overlapping {inv['margins_consistent']}), C bit-identical {inv['C_identical']}, tau "
            f"{inv['tau_identical']}, kappa {inv['kappa_identical']}, intrinsic score {inv['intrinsic_identical']}; "
            f"native score moved {inv['native_moved']}"
            + (f" ({inv['not_applicable']} operators without Q, K)" if inv["not_applicable"] else "") + ".")


def render(report: dict[str, Any]) -> None:
    from rich.table import Table

    console = stdout_console()
    c = report["counts"]
    table = Table(title=f"softrank analyze: certified concordance ({c['operators']} operators, {c['rows']} brackets, "
                        f"every end VERIFIED by the trusted kernel)")
    for column in SCORE_COLUMNS:
        table.add_column(column, overflow="fold")
    for row in score_rows(report):
        table.add_row(*[safe_text(cell) for cell in row])
    console.print(table)
    held = Table(title="held-out: adding a score to the calibrated baseline (differences: with score - baseline)")
    for column in HELDOUT_COLUMNS:
        held.add_column(column, overflow="fold")
    for row in heldout_rows(report):
        held.add_row(*[safe_text(cell) for cell in row])
    console.print(held)
    print(invariance_line(report))
    print(f"bootstrap: {report['bootstrap']['resamples']} resamples over operators, seed {report['bootstrap']['seed']}; "
          f"{report['seconds']:.1f} s")


def _md(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def markdown_report(report: dict[str, Any]) -> str:
    """The report's tables as GitHub Markdown."""
    c = report["counts"]
    b = report["bootstrap"]
    names = list(report["scores"])
    lines = ["# Does interaction geometry predict certified rank?", "",
             f"{c['operators']} operators, {c['rows']} (operator, eps) brackets at eps {', '.join(report['eps'])} "
             f"({c['resolved_rows']} resolved); every bracket end VERIFIED by the trusted kernel. Operator i provably "
             "needs more rank than j at eps when lower_i > upper_j; concordance = share of such pairs a score orders "
             f"the same way (ties count half). 95% percentile bootstrap intervals over operators ({b['resamples']} "
             f"resamples, seed {b['seed']}).", "",
             "## Scores", "", _md(list(SCORE_COLUMNS)), "|" + "---|" * len(SCORE_COLUMNS)]
    lines += [_md(row) for row in score_rows(report)]
    lines += ["", "Definitions:", ""]
    lines += [f"* `{name}` ({d['certified']}): {d['meaning']}" for name, d in report["definitions"].items()]
    base = report["baseline"]
    lines += ["", f"Calibrated baseline: {', '.join(base['columns'])} (standardised), intercept {base['intercept']}, "
              f"coefficients {base['coefficients']}, in-sample interval loss {base['in_sample_loss']}.", "",
              "## By group (pairs inside one group)", "",
              _md(["group", "value", *names, "certified pairs"]), "|" + "---|" * (len(names) + 3)]
    lines += [_md(row) for row in group_rows(report)]
    lines += ["", "## Held-out information", "",
              "Group-wise cross-validation: the baseline and the baseline plus one score are fitted on the training "
              "folds with the interval loss (zero inside [log lower, log upper], the distance outside); held-out "
              "concordance counts certified pairs inside one test fold. Differences are with score - baseline "
              "(negative loss difference / positive concordance difference = the score helps), paired bootstrap.",
              "", _md(list(HELDOUT_COLUMNS)), "|" + "---|" * len(HELDOUT_COLUMNS)]
    lines += [_md(row) for row in heldout_rows(report)]
    lines += ["", "## Invariance", "", invariance_line(report), "", "## Seconds per operator", "",
              "| width | operators | median verify s | median geometry s | median invariance s | median total s | "
              "max total s |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for width, t in report["timing"].items():
        lines.append(f"| {width} | {t['operators']} | {t['median_verify_s']} | {t['median_geometry_s']} | "
                     f"{t['median_invariance_s']} | {t['median_total_s']} | {t['max_total_s']} |")
    return "\n".join(lines) + "\n"


def analysis_figure(report: dict[str, Any]) -> Any:
    """One panel per score: every (operator, eps) bracket [lower, upper] as a vertical segment at
    the operator's score (log rank axis), colour = eps; concordance and CI in the titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    names = list(report["scores"])
    cols = 2 if len(names) > 2 else max(len(names), 1)
    rows = -(-max(len(names), 1) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.3 * rows + 0.6), squeeze=False)
    axes = [list(grid.ravel())]
    for ax in axes[0][len(names):]:
        ax.set_visible(False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    eps_colour = {eps: colours[i % len(colours)] for i, eps in enumerate(report["eps"])}
    for ax, name in zip(axes[0], names):
        values = [op["scores"].get(name) for op in report["operators"]]
        finite = [v for v in values if isinstance(v, (int, float))]
        right = (max(finite) if finite else 0.0)
        span = (right - min(finite)) if finite else 1.0
        at_inf = right + 0.08 * (span or 1.0)
        n_inf = 0
        for op, value in zip(report["operators"], values):
            if value is None:
                continue
            x = at_inf if value == "inf" else float(value)
            n_inf += value == "inf"
            lo, hi = max(op["lower"], 0.5), max(op["upper"], 0.5)
            if lo == hi:  # resolved: r_eps known exactly
                ax.plot([x], [lo], marker="o", color=eps_colour[op["eps"]], alpha=0.5, markersize=2.5, linestyle="")
            else:
                ax.plot([x, x], [lo, hi], color=eps_colour[op["eps"]], alpha=0.35, linewidth=1.0)
        if n_inf:
            ax.axvline(at_inf, color="gray", linestyle=":", linewidth=0.8)
            ax.text(at_inf, 1.0, f" inf ({n_inf})", fontsize=7, color="gray", va="bottom")
        ax.set_yscale("log")
        entry = report["scores"][name]
        ci = entry["ci"]
        ax.set_title(f"{name} ({entry['certified']})\nconcordance {_num(entry['concordance'])} "
                     f"{_ci(ci)}, {entry['pairs']} pairs", fontsize=9)
        ax.set_xlabel(f"{name} score")
        ax.grid(True, alpha=0.3, which="both")
    for ax in grid[:, 0]:
        ax.set_ylabel("certified rank bracket [lower, upper]")
    handles = [Line2D([], [], color=eps_colour[eps], linewidth=2, label=f"eps {eps}") for eps in report["eps"]]
    handles.append(Line2D([], [], color="gray", marker="o", linestyle="", markersize=3, label="resolved (lower = upper)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle("softrank analyze: scores against kernel-verified rank brackets", fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    return fig
