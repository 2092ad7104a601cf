"""The KV-budget figure, one per model (UNTRUSTED; draws verified integers from the report).

Per tolerance a panel: each head a point at (certified lower end, certified budget of a policy),
log-log, with the diagonal ``budget = lower end`` (a policy on it is optimal among all common-set
compressions).  A filled marker is a budget proved minimal for its policy, a hollow one an upper
bound on the policy's minimum.  Heads are never pooled across models: :func:`kv_figures` draws
one figure per model of the report; each document and width keeps its own marker size order
within it, and the title names them when there are several.
"""

from __future__ import annotations

from typing import Any

from ...plumbing.plotting import label_log_axis

#: Colour and marker of each policy (the same in every figure).
STYLES = {"streaming-llm": ("tab:blue", "o"), "h2o": ("tab:orange", "s"), "keep": ("tab:green", "^")}
LABELS = {"streaming-llm": "StreamingLLM (sinks + recent)", "h2o": "H2O (heavy hitters + recent)",
          "keep": "kept set given"}


def models(report: dict[str, Any]) -> list[str]:
    """The models of the report's studied heads, in order of first appearance."""
    return list(dict.fromkeys(r["model"] for r in report["operators"] if r["status"] == "done"))


def _points(report: dict[str, Any], model: str, eps: str, policy: str
            ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    filled: list[tuple[int, int]] = []
    hollow: list[tuple[int, int]] = []
    for record in report["operators"]:
        if record["model"] != model or record["status"] != "done":
            continue
        lower = {b["eps"]: b["lower"] for b in record["brackets"]}.get(eps)
        for budget in record["budgets"]:
            if budget["policy"] == policy and budget["eps"] == eps and budget["budget"] is not None and lower:
                (filled if budget["minimal"] else hollow).append((lower, budget["budget"]))
    return filled, hollow


def kv_figure(report: dict[str, Any], model: str) -> Any:
    """The matplotlib figure of ``model`` (module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tolerances = report["tolerances"]
    fig, axes = plt.subplots(1, len(tolerances), figsize=(4.4 * len(tolerances) + 0.6, 5.2), squeeze=False)
    documents = sorted({f"{r['document']} w{r['width']}" for r in report["operators"]
                        if r["model"] == model and r["status"] == "done"})
    for ax, eps in zip(axes[0], tolerances):
        values: list[float] = []
        for policy in [p["name"] for p in report["policies"]]:
            colour, marker = STYLES.get(policy, ("tab:gray", "x"))
            filled, hollow = _points(report, model, eps, policy)
            for points, face, suffix in ((filled, colour, "minimal"), (hollow, "none", "upper bound")):
                if points:
                    xs, ys = zip(*points)
                    values += [*xs, *ys]
                    ax.scatter(xs, ys, marker=marker, facecolors=face, edgecolors=colour, s=28, linewidths=1.1,
                               label=f"{LABELS.get(policy, policy)}, {suffix}")
        if values:
            low, high = min(values), max(values)
            ax.plot([low, high], [low, high], color="black", linestyle="--", linewidth=1,
                    label="budget = certified lower bound")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(low / 1.25, high * 1.25)  # the same range on both axes: the diagonal is y = x
            ax.set_ylim(low / 1.25, high * 1.25)
            ax.set_aspect("equal")
            label_log_axis(ax.xaxis, values, integers=True)
            label_log_axis(ax.yaxis, values, integers=True)
        else:
            ax.text(0.5, 0.5, "no certified budget", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(f"$\\varepsilon = {eps}$", fontsize=10)
        ax.set_xlabel("certified lower bound: slots any common-set\ncompression needs")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("slots the policy needs (kernel-verified)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        more = ax.get_legend_handles_labels()
        for handle, label in zip(*more):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), fontsize=8, frameon=False)
    fig.suptitle(f"{model}: KV budgets per head ({', '.join(documents)})", fontsize=11)
    fig.tight_layout(rect=(0, 0.12, 1, 0.95))
    return fig


def kv_figures(report: dict[str, Any]) -> dict[str, Any]:
    """One figure per model of the report (:func:`kv_figure`), by model."""
    return {model: kv_figure(report, model) for model in models(report)}


def figure_name(model: str) -> str:
    """The file name of a model's figure: ``kv-budgets-MODEL.png`` (``/`` and other characters
    outside ``[A-Za-z0-9._-]`` as ``_``)."""
    safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "_" for ch in model)
    return f"kv-budgets-{safe or 'model'}.png"


__all__ = ["LABELS", "STYLES", "figure_name", "kv_figure", "kv_figures", "models"]
