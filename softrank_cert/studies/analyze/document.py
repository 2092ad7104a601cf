"""The analysis document (UNTRUSTED): built from the per-operator results, and its tables.

:func:`build_document` assembles the JSON document of
:func:`~softrank_cert.studies.analyze.study.analysis` from the per-operator results (every bracket
end in them a kernel verdict re-checked in this run); the rows of the score, group and held-out
tables (the terminal tables of ``softrank analyze`` and :func:`markdown_document` share them) and
the Markdown text show what it holds.  The figure is
:func:`~softrank_cert.studies.analyze.plot.analysis_figure`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .stats import (BASELINE_FEATURES, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CI_LEVEL, L1_PENALTY,
                            baseline_matrix, bootstrap_weights, fit_interval_model, heldout, interval_loss, log_rank,
                            score_concordance)
from ...errors import InvalidInputError
from ...geometry.intrinsic import D_PERIOD


def ci_text(ci: list[float] | None) -> str:
    return "-" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def number_text(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.4f}"


def score_rows(document: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, entry in document["scores"].items():
        per_eps = "; ".join(f"{eps}: {number_text(e['concordance'])} {ci_text(e['ci'])} ({e['pairs']})"
                            for eps, e in entry["by_eps"].items())
        rows.append([name, entry["certified"], number_text(entry["concordance"]), ci_text(entry["ci"]), str(entry["pairs"]),
                     per_eps])
    return rows


SCORE_COLUMNS = ("score", "certified", "concordance", "95% CI", "certified pairs", "by eps: concordance CI (pairs)")


def group_rows(document: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key in ("family", "document", "width", "layer"):
        values = None
        for entry in document["scores"].values():
            values = list(entry.get(f"by_{key}", {}))
            break
        for value in values or []:
            cells = [key, value]
            for name in document["scores"]:
                e = document["scores"][name][f"by_{key}"][value]
                cells.append(f"{number_text(e['concordance'])} {ci_text(e['ci'])}")
            cells.append(str(next(iter(document["scores"].values()))[f"by_{key}"][value]["pairs"]))
            rows.append(cells)
    return rows


def heldout_rows(document: dict[str, Any]) -> list[list[str]]:
    rows = []
    for scheme, held in document["heldout"].items():
        if "skipped" in held:
            rows.append([scheme, "-", "-", "-", "-", "-", held["skipped"]])
            continue
        base = held["models"].get("baseline", {})
        for name, d in held["added"].items():
            model = held["models"][f"baseline+{name}"]
            rows.append([f"{scheme} ({len(held['folds'])} folds)", name,
                         f"{number_text(base.get('loss'), '.4f')} -> {number_text(model.get('loss'), '.4f')}",
                         f"{_signed(d['loss_difference'])} {ci_text(d['loss_difference_ci'])}",
                         f"{number_text(base.get('concordance'))} -> {number_text(model.get('concordance'))}",
                         f"{_signed(d['concordance_difference'])} {ci_text(d['concordance_difference_ci'])}",
                         d["verdict"]])
    return rows


HELDOUT_COLUMNS = ("folds by", "added score", "held-out loss (baseline -> with score)", "loss difference 95% CI",
                   "held-out concordance", "concordance difference 95% CI", "reading")


def invariance_line(document: dict[str, Any]) -> str:
    inv = document["invariance"]
    return (f"Invariance ({inv['refactorization']}): of {inv['checked']} qk operators, brackets identical "
            f"{inv['brackets_identical']} (the certificates' own witnesses re-verified on the refactored operator: "
            f"same claims, same verdicts; the kernel's margin enclosures bit-identical {inv['margins_identical']}, "
            f"overlapping {inv['margins_consistent']}), C bit-identical {inv['C_identical']}, tau "
            f"{inv['tau_identical']}, kappa {inv['kappa_identical']}, intrinsic score {inv['intrinsic_identical']}; "
            f"native score moved {inv['native_moved']}"
            + (f" ({inv['not_applicable']} operators without Q, K)" if inv["not_applicable"] else "") + ".")


def _md(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def markdown_document(document: dict[str, Any]) -> str:
    """The analysis document's tables as GitHub Markdown."""
    c = document["counts"]
    b = document["bootstrap"]
    names = list(document["scores"])
    lines = ["# Does interaction geometry predict certified rank?", "",
             f"{c['operators']} operators, {c['rows']} (operator, eps) brackets at eps {', '.join(document['eps'])} "
             f"({c['resolved_rows']} resolved); every bracket end VERIFIED by the trusted kernel. Operator i provably "
             "needs more rank than j at eps when lower_i > upper_j; concordance = share of such pairs a score orders "
             f"the same way (ties count half). 95% percentile bootstrap intervals over operators ({b['resamples']} "
             f"resamples, seed {b['seed']}).", "",
             "## Scores", "", _md(list(SCORE_COLUMNS)), "|" + "---|" * len(SCORE_COLUMNS)]
    lines += [_md(row) for row in score_rows(document)]
    lines += ["", "Definitions:", ""]
    lines += [f"* `{name}` ({d['certified']}): {d['meaning']}" for name, d in document["definitions"].items()]
    base = document["baseline"]
    lines += ["", f"Calibrated baseline: {', '.join(base['columns'])} (standardised), intercept {base['intercept']}, "
              f"coefficients {base['coefficients']}, in-sample interval loss {base['in_sample_loss']}.", "",
              "## By group (pairs inside one group)", "",
              _md(["group", "value", *names, "certified pairs"]), "|" + "---|" * (len(names) + 3)]
    lines += [_md(row) for row in group_rows(document)]
    lines += ["", "## Held-out information", "",
              "Group-wise cross-validation: the baseline and the baseline plus one score are fitted on the training "
              "folds with the interval loss (zero inside [log lower, log upper], the distance outside); held-out "
              "concordance counts certified pairs inside one test fold. Differences are with score - baseline "
              "(negative loss difference / positive concordance difference = the score helps), paired bootstrap.",
              "", _md(list(HELDOUT_COLUMNS)), "|" + "---|" * len(HELDOUT_COLUMNS)]
    lines += [_md(row) for row in heldout_rows(document)]
    lines += ["", "## Invariance", "", invariance_line(document), "", "## Seconds per operator", "",
              "| width | operators | median verify s | median geometry s | median invariance s | median total s | "
              "max total s |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for width, t in document["timing"].items():
        lines.append(f"| {width} | {t['operators']} | {t['median_verify_s']} | {t['median_geometry_s']} | "
                     f"{t['median_invariance_s']} | {t['median_total_s']} | {t['max_total_s']} |")
    return "\n".join(lines) + "\n"


SCORES = ("intrinsic", "native", "baseline", "interaction_dim")
#: name -> (certified side, meaning)
DEFINITIONS = {
    "intrinsic": ("upper", "min over r in the grid with certified tau(T_r) < eps of (r/2) log(1 + kappa(T_r)/(eps - "
                           "tau(T_r))^2), T_r the rank-r truncated SVD of C, certified upper bounds of tau and kappa "
                           "(a certified upper bound of the minimum); inf when no r qualifies"),
    "native": ("upper", "(d/2) log(1 + Gamma/eps^2), Gamma = beta rho_Q rho_K of the given Q, K (certified upper "
                        "bound), d the head dimension, tau = 0 (A = softmax(beta Q K^T) exactly); not invariant"),
    "baseline": ("estimate", "float64 estimate: linear in log width, log eps, mean row entropy of A and log effective "
                             "rank of A, fitted to the brackets with the interval loss (in-sample for this table)"),
    "interaction_dim": ("derived", "the r attaining the intrinsic score (the interaction dimension; inf when none "
                                   "qualifies): derived from certified upper bounds, not itself a bound"),
}



def name_groups(name: str, fallback_document: str) -> dict[str, Any]:
    """family / document / width / layer / head of a panel name (``minilm/apache2/w128/L3H7``)."""
    from ..panel_names import name_fields

    document, width, layer, head = name_fields(name, fallback_document)
    return {"family": name.split("/", 1)[0] if "/" in name else fallback_document, "document": document,
            "width": width, "layer": layer, "head": head}


def _json_value(x: Any) -> Any:
    if isinstance(x, float):
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if math.isnan(x):
            return None
        return float(f"{x:.17g}")
    return x


def build_document(results: list[dict[str, Any]], stems: dict[str, str], eps_list: list[str], *,
                   resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The analysis document from the per-operator results (see the module docstring)."""
    ops = [r for r in results if r["brackets"]]
    n = len(ops)
    if n == 0:
        raise InvalidInputError("no verified bracket to analyse")
    meta = [name_groups(r["operator"], stems.get(r["operator"], "")) for r in ops]
    rows: list[dict[str, Any]] = []
    op_index: list[int] = []
    for i, r in enumerate(ops):
        for eps in eps_list:
            if eps not in r["brackets"]:
                continue
            b = r["brackets"][eps]
            rows.append({"operator": r["operator"], "eps": eps, "lower": b["lower"], "upper": b["upper"],
                         "features": r["features"], "scores": dict(r["scores"][eps])})
            op_index.append(i)
    op_index_a = np.array(op_index)
    lo, hi = log_rank([r["lower"] for r in rows]), log_rank([r["upper"] for r in rows])
    base = baseline_matrix(rows)
    calibrated = fit_interval_model(base, lo, hi)
    base_pred = calibrated.predict(base)
    for row, value in zip(rows, base_pred):
        row["scores"]["baseline"] = float(value)
    col = {eps: e for e, eps in enumerate(eps_list)}
    LO = np.full((n, len(eps_list)), -1.0)  # missing rows: lower -1 / upper inf never pair
    UP = np.full((n, len(eps_list)), np.inf)
    for i, row in zip(op_index, rows):
        LO[i, col[row["eps"]]], UP[i, col[row["eps"]]] = row["lower"], row["upper"]
    W = bootstrap_weights(n, resamples, seed)
    groups = {key: [m[key] for m in meta] for key in ("family", "document", "width", "layer")}
    score_table: dict[str, Any] = {}
    for name in SCORES:
        S = np.full((n, len(eps_list)), np.nan)
        for i, row in zip(op_index, rows):
            value = row["scores"].get(name)
            S[i, col[row["eps"]]] = np.nan if value is None else float(value)
        if np.isnan(S).all():
            continue
        side, meaning = DEFINITIONS[name]
        score_table[name] = {"certified": side, "meaning": meaning,
                             **score_concordance(LO, UP, S, W, eps_list, groups)}
    added: list[str] = [name for name in ("intrinsic", "native", "interaction_dim") if name in score_table]
    held: dict[str, Any] = {}
    for scheme in ("document", "layer"):
        held[scheme] = heldout(rows, op_index_a, n, groups[scheme], added, W)
    inv = [r["invariance"] for r in ops if r["invariance"] is not None]
    invariance = {
        "operators": n, "checked": len(inv), "not_applicable": n - len(inv),
        "refactorization": f"Q -> Q D, K -> K D^-1, D = diag(2^e_t), e_t = (t mod {D_PERIOD}) - {D_PERIOD // 2}",
        **{key: sum(1 for item in inv if item[key]) for key in
           ("brackets_identical", "margins_identical", "margins_consistent", "C_identical", "tau_identical",
            "kappa_identical", "intrinsic_identical", "native_moved")},
    }
    operators_out = []
    for i, row in zip(op_index, rows):
        r = ops[i]
        s = r["scores"][row["eps"]]
        entry = {"operator": row["operator"], "eps": row["eps"], "lower": row["lower"], "upper": row["upper"],
                 **{k: meta[i][k] for k in ("family", "document", "width", "layer", "head")},
                 "scores": {name: _json_value(row["scores"].get(name)) for name in SCORES if name in row["scores"]},
                 "intrinsic_bound": s.get("intrinsic_bound"), "native_bound": s.get("native_bound"),
                 "lower_method": r["brackets"][row["eps"]]["lower_method"],
                 "upper_method": r["brackets"][row["eps"]]["upper_method"]}
        if r["invariance"] is not None:
            entry["native_refactored"] = _json_value(r["invariance"]["native_refactored"][row["eps"]])
        operators_out.append(entry)
    geometry = [{"operator": r["operator"], "p": r["p"], "d": r["d"], "features": r["features"],
                 "gamma_upper": r["gamma_upper"], "grid": r["grid"], "seconds": r["seconds"],
                 "dropped_eps": r["dropped"],
                 "invariance": None if r["invariance"] is None else
                 {k: v for k, v in r["invariance"].items() if k != "native_refactored"}} for r in ops]
    return {
        "format": "softrank-analysis", "version": 1, "eps": eps_list,
        "definitions": {name: {"certified": DEFINITIONS[name][0], "meaning": DEFINITIONS[name][1]} for name in SCORES},
        "grid": {"ranks": sorted({g["r"] for r in ops for g in r["grid"]}),
                 "rule": "1,2,3,4,6,8,12,16,24,32,48,64 up to min(d, 64) (qk; plus that top rank) or min(p-1, 64) "
                         "(scores); certified by the kernel per eps: the rank with the best float64 estimate of the "
                         "score and every rank within a relative 1e-6 of the best qualifying one (ranks whose "
                         "float64 tau exceeds the largest eps are never certified)"},
        "baseline": {"features": list(BASELINE_FEATURES),
                     "fit": "interval loss on [log lower, log upper] (linear program, l1 tie-breaker "
                            f"{L1_PENALTY:g}), standardised features",
                     "columns": [BASELINE_FEATURES[j] for j in calibrated.columns],
                     "intercept": round(calibrated.intercept, 6),
                     "coefficients": [round(float(c), 6) for c in calibrated.coef],
                     "in_sample_loss": round(float(interval_loss(base_pred, lo, hi).mean()), 4)},
        "bootstrap": {"resamples": resamples, "seed": seed, "unit": "operator", "level": CI_LEVEL,
                      "interval": "percentile"},
        "operators": operators_out,
        "scores": score_table,
        "heldout": held,
        "invariance": invariance,
        "geometry": geometry,
        "timing": timing(ops, meta),
        "counts": {"operators": n, "rows": len(rows),
                   "dropped_rows": sum(len(r["dropped"]) for r in results),
                   "resolved_rows": sum(1 for row in rows if row["lower"] == row["upper"])},
    }


def timing(ops: list[dict[str, Any]], meta: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds per operator (one worker each) by width: verification, geometry, invariance."""
    by_width: dict[str, list[dict[str, float]]] = {}
    for r, m in zip(ops, meta):
        by_width.setdefault(str(m["width"]), []).append(r["seconds"])
    out = {}
    for width in sorted(by_width, key=lambda w: (not w.isdigit(), int(w) if w.isdigit() else 0)):
        items = by_width[width]
        out[width] = {"operators": len(items),
                      **{f"median_{part}_s": round(float(np.median([s[part] for s in items])), 3)
                         for part in ("verify", "geometry", "invariance", "total")},
                      "mean_total_s": round(float(np.mean([s["total"] for s in items])), 3),
                      "max_total_s": round(float(np.max([s["total"] for s in items])), 3)}
    return out


# ----------------------------------------------------------------------------- the study over certificates
