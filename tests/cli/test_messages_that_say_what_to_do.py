"""Messages that must not mislead (issue 26 point 3) and the one input rule of the CLI and the
API (point 4): each mistake gets one line, exit 2, that says what is wrong and what to type."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import assert_one_line_error, run_softrank, run_verify
from tests.helpers import write_qk_panel

NAMES = [f"tiny/doc/w4/L0H{i}" for i in (1, 2, 10, 11)]


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> Path:
    return write_qk_panel(tmp_path_factory.mktemp("panel") / "panel.npz", NAMES, seed=5, rows=(4, 5))


def _error(res) -> str:
    assert_one_line_error(res, code=2)
    return res.stderr_lines[0]


@pytest.mark.slow
def test_decimal_comma_gets_a_hint(panel, tmp_path):
    """``--eps 0,25`` was "tolerance '0' must be > 0"."""
    line = _error(run_softrank("bracket", panel, "--operator", NAMES[0], "--eps", "0,25", "--out", tmp_path / "c.json"))
    assert "commas separate tolerances and the decimal point is '.'" in line and "did you mean --eps 0.25?" in line
    line = _error(run_softrank("geometry", panel, "--operator", NAMES[0], "--eps", "0,25", "--rank", "1"))
    assert "takes one tolerance" in line and "did you mean --eps 0.25?" in line
    for argv in (("budgets", panel, "--budgets", "2", "--eps", "0,25"), ("supports", "sphere", "--dim", "1", "--eps", "0,25")):
        line = _error(run_softrank(*argv))
        assert "takes one tolerance" in line and "did you mean --eps 0.25?" in line, argv
    assert not (tmp_path / "c.json").exists()


def test_tolerances_of_one_or_more_are_refused(panel, tmp_path):
    """``--eps 1,5`` was accepted silently: two tolerances where r_eps = 0 for any softmax matrix."""
    line = _error(run_softrank("bracket", panel, "--operator", NAMES[0], "--eps", "1,5", "--out", tmp_path / "c.json"))
    assert "tolerance 1, 5 is >= 1" in line and "r_eps(A) = 0" in line and "decimal point is '.'" in line
    line = _error(run_softrank("bracket", panel, "--operator", NAMES[0], "--eps", "0.25,1", "--out", tmp_path / "c.json"))
    assert "tolerance 1 is >= 1" in line


def test_a_folder_given_as_the_npz_says_it_is_a_folder(panel, tmp_path):
    line = _error(run_softrank("bracket", panel.parent, "--eps", "0.25", "--out", tmp_path / "c.json"))
    assert "is a folder, not an .npz file" in line and "panel.npz" in line  # and names the .npz inside


def test_npz_without_operator_names_its_arrays_and_what_is_expected(tmp_path):
    path = tmp_path / "lower.npz"
    np.savez(path, q=np.ones((2, 2)), k=np.ones((3, 2)))
    line = _error(run_softrank("bracket", path, "--eps", "0.25", "--out", tmp_path / "c.json"))
    assert "holds no operator: its arrays are k, q" in line
    assert "expected arrays Q and K" in line and "case-sensitive" in line


def test_missing_operator_names_some_and_how_to_list_them(panel, tmp_path):
    line = _error(run_softrank("bracket", panel, "--eps", "0.25", "--out", tmp_path / "c.json"))
    assert f"holds {len(NAMES)} operators ({NAMES[0]}, {NAMES[1]}, {NAMES[2]}, ...)" in line
    assert f"softrank list {panel}" in line and "--operator NAME" in line
    line = _error(run_softrank("geometry", panel, "--eps", "0.25", "--rank", "1"))
    assert f"softrank list {panel}" in line


def test_unknown_operator_names_the_closest(panel, tmp_path):
    line = _error(run_softrank("bracket", panel, "--operator", "tiny/doc/w4/L0H12", "--eps", "0.25",
                               "--out", tmp_path / "c.json"))
    assert "no operator named 'tiny/doc/w4/L0H12' among its 4" in line
    assert "tiny/doc/w4/L0H11" in line and "softrank list" in line


@pytest.mark.slow
def test_softrank_list_names_the_operators(panel, tmp_path):
    res = run_softrank("list", panel)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == NAMES  # natural order: L0H2 before L0H10
    details = run_softrank("list", panel, "--details").stdout.splitlines()
    assert details[0].split() == [NAMES[0], "qk", "4", "x", "5"]
    assert "is a folder" in _error(run_softrank("list", panel.parent))
    empty = tmp_path / "empty.npz"
    np.savez(empty, tokens=np.arange(3))
    assert "holds no operator" in _error(run_softrank("list", empty))


def test_unknown_option_is_named_with_the_closest(panel, tmp_path):
    """``--epss 0.25`` was "the following arguments are required: --eps"."""
    line = _error(run_softrank("bracket", panel, "--epss", "0.25", "--out", tmp_path / "c.json"))
    assert "unrecognized option --epss (did you mean --eps?)" in line
    line = _error(run_softrank("bracket", panel, "--eps", "0.25", "--out", tmp_path / "c.json", "--operater", "x"))
    assert "unrecognized option --operater (did you mean --operator?)" in line
    assert "unrecognized option --kernal (did you mean --kernel?)" in _error(run_verify("--kernal", "exact", "c.json"))


def test_abbreviations_and_negative_values_are_not_unknown_options():
    from softrank_cert.cli.main import build_parser

    bracket = build_parser()._subparsers._group_actions[0].choices["bracket"]
    assert bracket.unknown_option_message(["p.npz", "--ep", "0.25", "--out", "c.json"]) is None
    assert bracket.unknown_option_message(["p.npz", "--eps", "-0.25"]) is None
    assert bracket.unknown_option_message(["p.npz", "--", "--epss"]) is None


# --------------------------------------------------------------------------------------
# One input rule (point 4): float32 widened exactly, by the CLI and by the API
# --------------------------------------------------------------------------------------

def test_float32_npz_is_widened_exactly_like_the_api(tmp_path):
    import softrank_cert as sc
    from softrank_cert.util.operator_files import load_operators

    rng = np.random.default_rng(0)
    Q, K = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    path = tmp_path / "f32.npz"
    np.savez(path, Q=Q, K=K)
    (from_file,) = load_operators(path)
    from_arrays = sc.Operator.from_qk(Q, K)
    assert repr(from_file.operator) == repr(from_arrays)  # the same exact inputs (the hash covers every bit)
    assert from_file.operator.arrays["Q"].dtype == np.float64
    assert np.array_equal(from_file.operator.arrays["Q"], Q.astype(np.float64))
    res = run_softrank("geometry", path, "--eps", "0.5", "--rank", "1", "--json")
    assert res.returncode == 0, res.stderr
    complex_path = tmp_path / "c.npz"
    np.savez(complex_path, S=np.ones((2, 2), dtype=np.complex128))
    assert "must hold real numbers" in _error(run_softrank("geometry", complex_path, "--eps", "0.5", "--rank", "1"))


def test_operator_repr_is_compact_and_carries_the_id_hash():
    import softrank_cert as sc

    op = sc.Operator.from_qk(np.ones((8, 8)), np.arange(128.0).reshape(16, 8), causal=True)
    text = repr(op)
    assert len(text) < 100, text
    assert text.startswith("Operator(qk, 8x16, beta=inv_sqrt_d, mask=causal, sha256-")
    assert text.endswith(sc.operator_id(op).rsplit("/", 1)[1] + ")")  # the same hash as the operator id


@pytest.mark.slow
def test_a_certificate_or_a_model_given_as_the_panel_is_named(panel, tmp_path):
    """Issue 48: a certificate given to ``softrank bracket`` said only "not a readable .npz file
    (File is not a zip file)"; a certificate, a GGUF model and a key file are named, with the
    command that takes each."""
    cert = tmp_path / "cert.json"
    assert run_softrank("bracket", panel, "--operator", NAMES[0], "--eps", "0.5", "--work", "50", "--quiet",
                        "--out", cert).returncode == 0
    line = _error(run_softrank("bracket", cert, "--eps", "0.5", "--out", tmp_path / "c2.json"))
    assert f"{cert}: is a softrank certificate, not a panel or operator .npz file: softrank-verify checks it" in line
    line = _error(run_softrank("list", cert))
    assert "is a softrank certificate" in line
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(24))
    line = _error(run_softrank("bracket", gguf, "--eps", "0.5", "--out", tmp_path / "c3.json"))
    assert "is a GGUF model file, not a panel or operator .npz file: softrank panel --gguf FILE" in line
    key = Path(__file__).parents[2] / "examples" / "keys" / "demo-issuer.key"
    line = _error(run_softrank("bracket", key, "--eps", "0.5", "--out", tmp_path / "c4.json"))
    assert "is a key file, not a panel" in line
    (tmp_path / "notes.txt").write_text("hello")
    line = _error(run_softrank("bracket", tmp_path / "notes.txt", "--eps", "0.5", "--out", tmp_path / "c5.json"))
    assert "not a readable .npz file" in line
    assert not any((tmp_path / f"c{i}.json").exists() for i in (2, 3, 4, 5))
