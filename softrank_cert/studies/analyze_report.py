"""The tables and the figure of the analysis report (UNTRUSTED; formats the report of
:func:`~softrank_cert.studies.analyze.analysis`).

Rows of the score, group and held-out tables (the terminal tables of ``softrank analyze`` and
:func:`markdown_report` share them), the Markdown report and :func:`analysis_figure`.  They
show what the report holds; every bracket end in it is a kernel verdict.
"""

from __future__ import annotations

from typing import Any


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

    from ..plumbing.plotting import label_log_axis

    names = list(report["scores"])
    cols = 2 if len(names) > 2 else max(len(names), 1)
    rows = -(-max(len(names), 1) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.3 * rows + 0.6), squeeze=False)
    axes = [list(grid.ravel())]
    for ax in axes[0][len(names):]:
        ax.set_visible(False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    eps_colour = {eps: colours[i % len(colours)] for i, eps in enumerate(report["eps"])}

    ranks = [max(v, 0.5) for op in report["operators"] for v in (op["lower"], op["upper"])]
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
        label_log_axis(ax.yaxis, ranks, integers=True)
        entry = report["scores"][name]
        ci = entry["ci"]
        ax.set_title(f"{name} ({entry['certified']})\nconcordance {_num(entry['concordance'])} "
                     f"{_ci(ci)}, {entry['pairs']} pairs", fontsize=9)
        ax.set_xlabel(f"{name} score" + (" (inf: right of the dotted line)" if n_inf else ""))
        ax.grid(True, alpha=0.3, which="both")
    for ax in grid[:, 0]:
        ax.set_ylabel(r"certified bracket of $r_\varepsilon(A)$: lower to upper")
    handles = [Line2D([], [], color=eps_colour[eps], linewidth=2, label=f"$\\varepsilon = {eps}$") for eps in report["eps"]]
    handles.append(Line2D([], [], color="gray", marker="o", linestyle="", markersize=3, label="resolved (lower = upper)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle("softrank analyze: scores against kernel-verified rank brackets", fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    return fig
