"""Publication-quality figures (issue 14 item 8): every line labelled, math-text axis labels,
eps / n / fitted slopes on the supports plot, enough plain tick labels on log axes, overlapping
audit points shown with counts, a message instead of an empty plot, and PNG / PDF / SVG by the
file name's suffix everywhere (anything else refused before any work)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from softrank_cert.studies.audit.table import RowResult  # noqa: E402
from softrank_cert.studies.audit.plot import ratio_figure  # noqa: E402
from softrank_cert.studies.budgets.plot import budgets_figure  # noqa: E402
from softrank_cert.studies.supports.plot import sweeps_figure  # noqa: E402
from softrank_cert.plumbing.plotting import figure_format, label_log_axis, log_ticks, plain_number  # noqa: E402
from tests.helpers import softrank_in_process as run, write_qk_panel

ROOT = Path(__file__).resolve().parents[2]


def sweep_doc(support="sphere", dim=2, eps="0.25", n=12) -> dict:
    points = [{"kappa": k, "eps": eps, "lower": lo, "upper": up, "p": n, "lower_method": "pivot",
               "upper_construction": "tsvd", "seconds": 0.1, "geometry": []}
              for k, lo, up in ((0.25, 1, 2), (1.0, 2, 3), (4.0, 3, 5), (16.0, 5, 8))]
    return {"support": support, "dim": dim, "eps": eps, "n": n, "exponent_theory": (dim - 1) / 2,
            "estimates": {"exponent_fit_lower": 0.41, "exponent_fit_upper": 0.47}, "points": points}


def tick_labels(axis) -> list[str]:
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]


def test_supports_figure_labels_every_line_and_shows_eps_n_and_fits():
    fig = sweeps_figure([sweep_doc(), sweep_doc(dim=3)])
    ax = fig.axes[0]
    for line in ax.get_lines():
        assert line.get_label() and not line.get_label().startswith("_"), line  # the grey p line too
    labels = [line.get_label() for line in ax.get_lines()]
    assert any("rank ceiling" in label and "12" in label for label in labels)
    assert sum("fit slope 0.41 / 0.47" in label for label in labels) == 2  # lower / upper fits, per sweep
    assert any("theory slope" in label for label in labels)
    title = ax.get_title()
    assert r"\varepsilon = 0.25" in title and "n = 12" in title
    assert "$" in ax.get_xlabel() and r"\kappa" in ax.get_xlabel() and r"r_\varepsilon" in ax.get_ylabel()
    fig.canvas.draw()
    for axis in (ax.xaxis, ax.yaxis):
        shown = tick_labels(axis)
        assert len(shown) >= 3 and not any("times 10^{0}" in text for text in shown), shown
    assert all(float(text) == int(float(text)) for text in tick_labels(ax.yaxis))  # ranks are whole numbers
    plt.close(fig)


def test_audit_figure_shows_overlapping_points_with_counts():
    rows = [RowResult(i + 1, f"op{i}", "0.25", "confirmed", 2, 4, 2, 4) for i in range(5)]
    rows += [RowResult(10, "x", "0.25", "tightened", 1, 6, 2, 4), RowResult(11, "y", "0.25", "confirmed", 3, 3, 3, 3)]
    fig = ratio_figure(rows)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert "5" in texts  # five confirmed rows at the same point: one marker, counted
    assert "1" not in texts  # single rows get no number
    confirmed = ax.collections[0]
    assert len(confirmed.get_offsets()) == 2 and max(confirmed.get_sizes()) > min(confirmed.get_sizes())
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "confirmed (6 rows)" in legend and "tightened (1 rows)" in legend
    assert "$" in ax.get_xlabel() and "$" in ax.get_ylabel()
    fig.canvas.draw()
    assert len(tick_labels(ax.xaxis)) >= 3 and len(tick_labels(ax.yaxis)) >= 3
    plt.close(fig)


def budgets_report(groups: list[dict]) -> dict:
    return {"eps": "0.25", "budgets": [8, 16], "groups": groups}


def group(document: str, width, fractions: tuple[float, float, float]) -> dict:
    entry = {cls: 1 for cls in ("feasible", "impossible", "unresolved")}
    entry.update({f"{cls}_fraction": f for cls, f in zip(("feasible", "impossible", "unresolved"), fractions)})
    return {"document": document, "width": width, "heads": 3, "median_lower": 2, "median_upper": 9,
            "budgets": {"8": entry, "16": entry}}


def test_budgets_figure_never_draws_an_empty_panel():
    empty = budgets_figure(budgets_report([]))
    texts = [t.get_text() for ax in empty.axes for t in ax.texts]
    assert any("no operator was studied" in text for text in texts)
    assert all(not ax.axison and not ax.get_lines() for ax in empty.axes)
    plt.close(empty)
    widthless = budgets_figure(budgets_report([group("plain", "-", (0.5, 0.25, 0.25)),
                                               group("doc", 64, (0.2, 0.3, 0.5)), group("doc", 128, (0.1, 0.3, 0.6))]))
    by_title = {ax.get_title().split(" ")[0]: ax for ax in widthless.axes if ax.get_title()}
    plain = by_title["plain"]
    assert plain.get_lines() and all(len(line.get_xdata()) == 1 for line in plain.get_lines())
    widthless.canvas.draw()
    assert "no $w$ in the names" in " ".join(tick_labels(plain.xaxis))
    assert tick_labels(by_title["doc"].xaxis) == ["64", "128"]
    assert "$" in by_title["doc"].get_xlabel()
    plt.close(widthless)


def test_log_ticks_are_plain_and_enough():
    assert log_ticks(1, 2.6) == [1.0, 1.2, 1.5, 2.0, 2.5]
    assert log_ticks(1, 64) == [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
    assert len(log_ticks(3, 270)) >= 4 and len(log_ticks(1e-3, 1e3)) <= 12
    assert plain_number(0.02) == "0.02" and plain_number(300) == "300" and "10^{7}" in plain_number(2e7)
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.plot([1, 2], [3, 3])
    label_log_axis(ax.yaxis, [3, 3], integers=True)  # one value: still labelled
    fig.canvas.draw()
    assert tick_labels(ax.yaxis)
    plt.close(fig)


def test_figure_format_follows_the_suffix():
    assert [figure_format(name) for name in ("a.png", "b.PDF", "c.svg", "d")] == ["png", "pdf", "svg", "png"]
    from softrank_cert.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="unsupported figure type"):
        figure_format("e.jpg")


@pytest.fixture(scope="module")
def tiny_panel(tmp_path_factory) -> Path:
    return write_qk_panel(tmp_path_factory.mktemp("panel") / "tiny.npz", ("tiny/doc/w4/L0H0", "tiny/doc/w6/L0H0"),
                          seed=5)


def _kind(path: Path) -> str:
    head = path.read_bytes()[:400]
    if head.startswith(b"\x89PNG"):
        return "png"
    if head.startswith(b"%PDF"):
        return "pdf"
    if b"<svg" in head:
        return "svg"
    return "?"


@pytest.mark.parametrize("suffix", [".pdf", ".svg", ".png"])
def test_every_plot_option_writes_the_format_its_suffix_names(tmp_path, tiny_panel, suffix):
    plots = {name: tmp_path / f"{name}{suffix}" for name in ("supports", "budgets", "profile", "audit")}
    table = tmp_path / "table.jsonl"
    table.write_text(json.dumps({"operator": "tiny/doc/w4/L0H0", "eps": "0.5", "lower": 1, "upper": 4}) + "\n")
    runs = {
        "supports": ["supports", "sphere", "--dim", "2", "--n", "6", "--kappas", "0.5,2", "--budget-seconds", "1"],
        "budgets": ["budgets", tiny_panel, "--budgets", "2", "--eps", "0.5", "--budget-seconds", "1"],
        "profile": ["profile", tiny_panel, "--operator", "tiny/doc/w4/L0H0", "--budget-seconds", "1", "--grid", "0.25,0.5"],
        "audit": ["audit", table, "--operators", tiny_panel, "--out", tmp_path / "audit.json", "--budget-seconds", "1"],
    }
    for name, argv in runs.items():
        code, _out, err = run(*argv, "--plot", plots[name])
        assert code == 0, (name, err)
        assert _kind(plots[name]) == suffix[1:], name


def test_other_plot_suffixes_are_refused_before_any_work(tmp_path, tiny_panel):
    for argv in (["supports", "sphere", "--dim", "2", "--n", "6", "--kappas", "0.5,2"],
                 ["budgets", tiny_panel, "--budgets", "2", "--eps", "0.5", "--out", tmp_path / "b.json"],
                 ["profile", tiny_panel, "--operator", "tiny/doc/w4/L0H0"]):
        code, out, err = run(*argv, "--plot", tmp_path / "figure.jpg")
        assert code == 2 and "unsupported file type ('.jpg')" in err and ".pdf" in err
        assert len(err.strip().splitlines()) == 1 and out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_plot_formats_are_documented():
    from softrank_cert.cli.main import build_parser

    reference = (ROOT / "docs" / "reference.md").read_text()
    assert "PNG, PDF or SVG" in reference
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for command in ("supports", "audit", "budgets", "profile", "analyze"):
        text = " ".join(sub.choices[command].format_help().split())
        assert "PNG, PDF or SVG" in text, command
