"""The command-line contract beyond ``softrank-verify``'s verdicts (issue 9 items 5, 6 and 9).

* exit 4 only for real kernel alarms: every output path and plot extension is checked before any
  work (exit 2, one line), ``--out DIR/`` is a folder, an ``A`` with negative entries is refused,
  and a failed run leaves no partial report;
* tables stay readable at 80 columns (the operator column is never cut);
* small things: ``softrank-verify --version``, JSON error messages, a pasteable end-of-run hint,
  natural order of operator names, ``softrank sign`` decodes what it signs, public keys passed as
  private keys, certificates too large for ``--kernel exact`` (exit 5), one error line for a
  bad global option, file modes.

Operators are tiny (4 x 4 and smaller) so that every ``softrank bracket`` run takes well under a
second of solver time.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document, parse_json_strict
from softrank_cert.errors import (
    EXIT_INCONCLUSIVE, EXIT_INVALID_INPUT, EXIT_NOT_CHECKED, EXIT_REJECTED, CertificateFormatError, InvalidInputError,
    InvalidOperatorError, KernelLimitError,
)
from softrank_cert.kernel import Operator

from conftest import (
    CREATED, assert_one_line_error, build_document, false_witness_brackets, peaked_operator, run_softrank, run_verify,
    valid_brackets, write_certificate,
)
from tests.helpers import files_below, write_qk_panel

ROOT = Path(__file__).resolve().parents[2]
PANEL = ROOT / "examples" / "panels" / "minilm-apache2-w32.npz"
PUBLISHED = ROOT / "certificates" / "published"
DEMO_KEY = ROOT / "examples" / "keys" / "demo-issuer.key"
EXAMPLE = ROOT / "certificates" / "examples" / "random-qk.json"
NAMES = ["tiny/doc/w4/L0H10", "tiny/doc/w4/L0H2", "tiny/doc/w4/L0H1"]


@pytest.fixture(scope="module")
def tiny_panel(tmp_path_factory) -> Path:
    """Three 4 x 4 qk heads named so that plain string order differs from natural order."""
    return write_qk_panel(tmp_path_factory.mktemp("panel") / "tiny.npz", NAMES, seed=3, rows=(4, 4))


@pytest.fixture(scope="module")
def negative_a(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("neg") / "neg.npz"
    np.savez(path, A=np.array([[0.5, 0.5, 0.0], [1.25, -0.25, 0.0], [0.25, 0.25, 0.5]]))
    return path


@pytest.fixture(scope="module")
def table_rows(tmp_path_factory) -> Path:
    """Two rows of the published bracket table, their certificates copied beside it (a table
    names certificates inside its own folder only)."""
    lines = (PUBLISHED / "brackets.jsonl").read_text().splitlines()[:2]
    folder = tmp_path_factory.mktemp("table")
    for line in lines:
        certificate = json.loads(line)["certificate"]
        (folder / certificate).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PUBLISHED / certificate, folder / certificate)
    path = folder / "two.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------------------
# Item 5: output paths checked before any work, --out DIR/, A >= 0, no partial reports
# --------------------------------------------------------------------------------------

def test_bracket_out_existing_folder_or_trailing_slash_is_a_folder(tmp_path, tiny_panel):
    existing = tmp_path / "existing"
    existing.mkdir()
    res = run_softrank("bracket", tiny_panel, "--operator", NAMES[1], "--eps", "0.5", "--out", existing)
    assert res.returncode == 0, res.stderr
    assert (existing / "tiny" / "doc" / "w4" / "L0H2.json").is_file()
    res = run_softrank("bracket", tiny_panel, "--operator", NAMES[1], "--eps", "0.5", "--out", f"{tmp_path / 'new'}/")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "new" / "tiny" / "doc" / "w4" / "L0H2.json").is_file()
    assert not (tmp_path / "new").is_file()


@pytest.mark.parametrize("target", ["under-a-file", "not-a-regular-file", "json-folder-for-all"])
def test_bracket_unusable_out_is_refused_before_any_work(tmp_path, tiny_panel, target):
    """(A FIFO stands in for /dev/null: renaming a temporary file over the target would, as
    root, replace a device node with a regular file. Never test with a real device.)"""
    blocker = tmp_path / "plain.txt"
    blocker.write_text("x")
    expected = ["plain.txt"]
    args = ["--operator", NAMES[1]]
    if target == "under-a-file":
        out = blocker / "cert.json"
    elif target == "not-a-regular-file":
        out = tmp_path / "fifo"
        os.mkfifo(out)
        expected = ["fifo", "plain.txt"]
    else:
        out, args = tmp_path / "certs.json", ["--all"]
    res = run_softrank("bracket", tiny_panel, *args, "--eps", "0.5", "--out", out)
    assert_one_line_error(res, 2)
    assert "--out" in res.stderr and "internal error" not in res.stderr
    assert files_below(tmp_path) == expected
    if target == "not-a-regular-file":
        assert stat.S_ISFIFO(out.stat().st_mode) and "not a regular file" in res.stderr


def test_unwritable_out_folder_is_refused(tmp_path, tiny_panel):
    if os.geteuid() == 0:
        pytest.skip("root can write in a read-only folder")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        res = run_softrank("bracket", tiny_panel, "--operator", NAMES[1], "--eps", "0.5", "--out", locked / "c.json")
        assert_one_line_error(res, 2)
        assert "cannot write in" in res.stderr
    finally:
        locked.chmod(0o700)


def test_negative_probabilities_are_invalid_input(tmp_path, negative_a):
    from softrank_cert.util.operator_files import load_operators

    with pytest.raises(InvalidOperatorError, match=r"A >= 0"):
        load_operators(negative_a)
    res = run_softrank("bracket", negative_a, "--eps", "0.25", "--out", tmp_path / "c.json")
    assert_one_line_error(res, 2)
    assert "negative entr" in res.stderr and "A[1, 1] = -0.25" in res.stderr
    res = run_softrank("budgets", negative_a, "--budgets", "1", "--eps", "0.25")
    assert_one_line_error(res, 2)
    assert not (tmp_path / "c.json").exists()


@pytest.mark.slow
def test_audit_checks_outputs_before_work_and_writes_nothing_on_failure(tmp_path, table_rows):
    base = ["audit", table_rows, "--operators", PUBLISHED / "minilm-apache2-w32.npz"]
    (tmp_path / "existing").mkdir()
    (tmp_path / "plain.txt").write_text("x")
    cases = [
        (["--out", tmp_path / "r.json", "--plot", tmp_path / "ratios.xyz"], "unsupported file type"),
        (["--out", tmp_path / "existing"], "is a folder"),
        (["--out", f"{tmp_path / 'nofolder'}/"], "is a folder"),
        (["--out", tmp_path / "r.json", "--plot", tmp_path / "plain.txt" / "r.png"], "is not a folder"),
        (["--out", table_rows], "would overwrite"),
    ]
    for extra, fragment in cases:
        res = run_softrank(*base, *extra)
        assert_one_line_error(res, 2)
        assert fragment in res.stderr, res.stderr
    assert files_below(tmp_path) == ["existing", "plain.txt"]
    ok = run_softrank(*base, "--out", tmp_path / "ok" / "r.json", "--plot", tmp_path / "ok" / "r.svg")
    assert ok.returncode == 0, ok.stderr
    assert files_below(tmp_path / "ok") == ["r.json", "r.svg"]


def test_supports_and_budgets_check_plot_and_table_first(tmp_path):
    res = run_softrank("supports", "sphere", "--dim", "1", "--n", "8", "--kappas", "0.5,1", "--plot", tmp_path / "s.gif")
    assert_one_line_error(res, 2)
    assert "--plot" in res.stderr and "unsupported file type" in res.stderr
    (tmp_path / "plain.txt").write_text("x")
    res = run_softrank("budgets", PANEL, "--budgets", "8", "--eps", "0.5", "--out", tmp_path / "b.json",
                       "--table", tmp_path / "plain.txt" / "b.md")
    assert_one_line_error(res, 2)
    assert "--table" in res.stderr
    res = run_softrank("budgets", PANEL, "--budgets", "8", "--eps", "0.5", "--out", tmp_path / "b.json",
                       "--table", tmp_path / "b.json")
    assert_one_line_error(res, 2)
    assert "name the same file" in res.stderr
    assert files_below(tmp_path) == ["plain.txt"]


def test_sign_keygen_and_panel_check_their_outputs(tmp_path):
    (tmp_path / "existing").mkdir()
    res = run_softrank("sign", EXAMPLE, "--key", DEMO_KEY, "--out", tmp_path / "existing")
    assert_one_line_error(res, 2)
    assert "is a folder" in res.stderr
    res = run_softrank("keygen", "--out", f"{tmp_path / 'keys'}/")
    assert_one_line_error(res, 2)
    assert "is a folder" in res.stderr
    res = run_softrank("keygen", "--out", tmp_path / "private" / "issuer.key")  # a missing folder is created, 0700
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o700
    shutil.rmtree(tmp_path / "private")
    res = run_softrank("panel", "--model", "minilm", "--text", ROOT / "examples" / "data" / "apache2.txt",
                       "--widths", "8", "--out", tmp_path / "existing")
    assert_one_line_error(res, 2)
    assert files_below(tmp_path) == ["existing"]


def test_a_failed_run_leaves_no_partial_report(tmp_path, table_rows, capsys, monkeypatch):
    """The audit's plot fails *after* the pre-flight checks: neither the report nor its evidence
    nor a temporary file may remain (before: the report was written first, then the plot failed)."""
    from softrank_cert.cli.common import run_main
    from softrank_cert.cli.main import build_parser

    def broken_figure(rows):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("softrank_cert.studies.audit.plot.ratio_figure", broken_figure)  # audit_cmd imports it late
    out = tmp_path / "reports" / "r.json"
    parsed = build_parser().parse_args(["audit", str(table_rows), "--operators", str(PUBLISHED / "minilm-apache2-w32.npz"),
                                        "--out", str(out), "--plot", str(tmp_path / "reports" / "r.png")])
    with pytest.raises(SystemExit):
        run_main("softrank audit", lambda: parsed.run(parsed))
    capsys.readouterr()
    assert files_below(tmp_path) == []


def test_output_files_commit_together_or_not_at_all(tmp_path):
    from softrank_cert.util.files import OutputFiles

    with pytest.raises(RuntimeError):
        with OutputFiles() as outputs:
            outputs.stage_text(tmp_path / "a" / "b" / "one.txt", "1")
            outputs.stage_json(tmp_path / "two.json", {"x": 1})
            raise RuntimeError("later failure")
    assert files_below(tmp_path) == []
    with OutputFiles() as outputs:
        outputs.stage_text(tmp_path / "a" / "one.txt", "1")
        outputs.stage_json(tmp_path / "two.json", {"x": 1})
        assert files_below(tmp_path) != ["a", "a/one.txt", "two.json"]  # nothing in place yet
    assert files_below(tmp_path) == ["a", "a/one.txt", "two.json"]


def test_check_output_file_rules(tmp_path):
    from softrank_cert.util.files import check_output_file, check_output_folder
    from softrank_cert.plumbing.plotting import PLOT_SUFFIXES

    (tmp_path / "plain.txt").write_text("x")
    assert check_output_file(tmp_path / "new" / "deeper" / "r.json", "--out") == tmp_path / "new" / "deeper" / "r.json"
    assert not (tmp_path / "new").exists()  # checking creates nothing
    for bad, fragment in [(f"{tmp_path}/x/", "is a folder"), (tmp_path, "is a folder"),
                          (tmp_path / "plain.txt" / "r.json", "is not a folder")]:
        with pytest.raises(InvalidInputError, match=fragment):
            check_output_file(bad, "--out")
    with pytest.raises(InvalidInputError, match="unsupported file type"):
        check_output_file(tmp_path / "p.PNGX", "--plot", suffixes=PLOT_SUFFIXES)
    assert check_output_file(tmp_path / "p.SVG", "--plot", suffixes=PLOT_SUFFIXES)
    with pytest.raises(InvalidInputError, match="not a folder"):
        check_output_folder(tmp_path / "plain.txt", "--out")
    assert list(tmp_path.iterdir()) == [tmp_path / "plain.txt"]  # no probe file left


# --------------------------------------------------------------------------------------
# Item 6: tables at 80 columns
# --------------------------------------------------------------------------------------

def _at_80(res) -> list[str]:
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def run80(*args):
    import time

    from conftest import CliResult, SOFTRANK_CMD, VERIFY_CMD

    cmd = VERIFY_CMD if args[0] == "softrank-verify" else SOFTRANK_CMD
    env = dict(os.environ, COLUMNS="80")
    env.pop("SOFTRANK_DEBUG", None)
    t0 = time.perf_counter()
    proc = subprocess.run([*cmd, *map(str, args[1:])], capture_output=True, text=True, timeout=120, env=env)
    return CliResult(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0)


def test_operator_column_is_never_cut_at_80_columns(tmp_path, tiny_panel):
    res = run80("softrank", "bracket", tiny_panel, "--all", "--eps", "0.25,0.5", "--out", tmp_path / "certs")
    lines = _at_80(res)
    assert max(len(line) for line in lines[:-1]) <= 80, res.stdout
    table = "\n".join(lines[:-1])
    assert "…" not in table
    assert "operators under tiny/doc/w4/" in table
    for short in ("L0H1 ", "L0H2 ", "L0H10 "):
        assert short in table
    lines = _at_80(run80("softrank-verify", tmp_path / "certs"))
    assert max(len(line) for line in lines) <= 80 and "…" not in res.stdout, "\n".join(lines)
    assert sum("L0H10.json " in line for line in lines) == 5  # files table + 2 tolerances x (lower, upper)


def test_long_distinct_names_fold_other_columns(monkeypatch):
    """No common prefix: the names keep their full width and the other columns give way."""
    from softrank_cert.certio.certificate import decode_certificate
    from softrank_cert.cli.verify import _checked_entry, render_verify_table
    from softrank_cert.verification import VerificationResult, check_claims

    monkeypatch.setenv("COLUMNS", "80")
    op = peaked_operator()
    cert = decode_certificate(build_document(op, valid_brackets(op)))
    pairs = check_claims(cert)
    names = ["gpt2/a-rather-long-document-name/w512/L11H11", "minilm/another-document/w512/L0H0"]
    entries, margins = [], {}
    for index, n in enumerate(names):
        entry, margins[index] = _checked_entry(VerificationResult(f"{n}.json", n, None, pairs, cert), None)
        entries.append(entry)
    text = render_verify_table(entries, margins)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    for name in names:
        assert name in text  # the operator column (in the files table) is never cut
    assert "…" not in text


def test_common_name_prefix():
    from softrank_cert.cli.common import common_name_prefix

    assert common_name_prefix(["m/d/w32/L0H0", "m/d/w32/L0H1"]) == "m/d/w32/"
    assert common_name_prefix(["m/d/w32/L0H0"]) == "m/d/w32/"
    assert common_name_prefix(["m/a/w32/L0H0", "m/b/w32/L0H0"]) == "m/"
    assert common_name_prefix(["m/a", "m"]) == ""
    assert common_name_prefix(["L0H0", "L0H1"]) == "" and common_name_prefix([]) == ""


# --------------------------------------------------------------------------------------
# Item 9: small things
# --------------------------------------------------------------------------------------

def test_verify_version():
    res = run_verify("--version")
    assert res.returncode == 0 and res.stdout.startswith("softrank-cert ")


def test_json_error_message_has_no_doubled_at(tmp_path):
    with pytest.raises(CertificateFormatError) as exc:
        parse_json_strict(b'{\n "format": "softrank-cert')
    assert "at at" not in str(exc.value) and "starting at line 2 column" in str(exc.value)
    broken = tmp_path / "broken.json"
    broken.write_text(EXAMPLE.read_text()[:2000])
    res = run_verify(broken)
    assert_one_line_error(res, 2)
    assert " at at " not in res.stderr


def test_end_of_run_hint_is_pasteable(tmp_path, tiny_panel):
    out = tmp_path / "out dir" / "certs"
    res = run_softrank("bracket", tiny_panel, "--all", "--eps", "0.5", "--out", out)
    assert res.returncode == 0, res.stderr
    hint = res.stdout.strip().splitlines()[-1]
    command = hint.split("check them with: ", 1)[1]
    assert "..." not in command
    import shlex

    assert shlex.split(command) == ["softrank-verify", str(out)]
    assert run_verify(*shlex.split(command)[1:]).returncode == 0


def test_operator_names_in_natural_order(tmp_path, tiny_panel):
    from softrank_cert.plumbing.certificate_files import declared_format, expand_json_paths, is_certificate_format
    from softrank_cert.util.operator_files import load_operators, natural_key, operator_names

    natural = ["tiny/doc/w4/L0H1", "tiny/doc/w4/L0H2", "tiny/doc/w4/L0H10"]
    assert operator_names(tiny_panel) == natural
    assert [item.name for item in load_operators(tiny_panel)] == natural
    assert sorted(["w128", "w64", "w512"], key=natural_key) == ["w64", "w128", "w512"]
    res = run_softrank("bracket", tiny_panel, "--all", "--eps", "0.5", "--out", tmp_path / "c", "--json")
    assert [entry["operator"] for entry in json.loads(res.stdout)["operators"]] == natural
    paths = [p for p in expand_json_paths([str(tmp_path / "c")])
             if is_certificate_format(declared_format(Path(p).read_bytes()))]  # the manifest is no certificate
    assert [Path(p).stem for p in paths] == ["L0H1", "L0H2", "L0H10"]


def test_sign_refuses_what_is_not_a_valid_certificate(tmp_path):
    tampered = json.loads(EXAMPLE.read_text())
    data = tampered["operator"]["arrays"]["Q"]["data"]
    tampered["operator"]["arrays"]["Q"]["data"] = ("A" if data[0] != "A" else "B") + data[1:]
    (tmp_path / "tampered.json").write_text(json.dumps(tampered))
    (tmp_path / "report.json").write_text(json.dumps({"format": "softrank-audit-report", "summary": {"seconds": 0.5}}))
    (tmp_path / "list.json").write_text("[1, 2]")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for name, fragment in [("tampered.json", "refusing to sign an invalid certificate: operator.arrays.Q: SHA-256"),
                           ("report.json", "is not a softrank certificate (a 'softrank-audit-report' document)"),
                           ("list.json", "is not a softrank certificate (a JSON list)")]:
        res = run_softrank("sign", tmp_path / name, "--key", DEMO_KEY)
        assert_one_line_error(res, 2)
        assert fragment in res.stderr, res.stderr
    res = run_softrank("sign", DEMO_KEY.with_name("demo-issuer.key.pub"), "--key", DEMO_KEY, "--out", tmp_path / "x.json")
    assert_one_line_error(res, 2)
    assert "is not a softrank certificate (a key file)" in res.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_public_key_where_a_private_key_is_needed(tmp_path, tiny_panel):
    pub = DEMO_KEY.with_name("demo-issuer.key.pub")
    res = run_softrank("sign", EXAMPLE, "--key", pub, "--out", tmp_path / "x.json")
    assert_one_line_error(res, 2)
    assert "is a public key" in res.stderr
    res = run_softrank("bracket", tiny_panel, "--operator", NAMES[1], "--eps", "0.5", "--key", pub, "--out", tmp_path / "c.json")
    assert_one_line_error(res, 2)
    assert "is a public key" in res.stderr
    dids = tmp_path / "trusted.txt"
    dids.write_text(json.loads(pub.read_text())["did"] + "\n")
    res = run_softrank("sign", EXAMPLE, "--key", dids, "--out", tmp_path / "x.json")
    assert_one_line_error(res, 2)
    assert "lists did:key public keys" in res.stderr
    assert list(tmp_path.iterdir()) == [dids]


@pytest.fixture(scope="module")
def too_big_for_exact(tmp_path_factory) -> Path:
    op = Operator("scores", {"S": np.zeros((70, 70))})
    path = tmp_path_factory.mktemp("big") / "big.json"
    write_certificate(path, certificate_document("t/big", op, [Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(70, "identity"))],
                                                 created=CREATED))
    return path


def test_too_large_for_exact_kernel_is_not_invalid_input(tmp_path, too_big_for_exact):
    from softrank_cert.verification import verify_certificate_file

    with pytest.raises(KernelLimitError, match="not checked: exact kernel limit"):
        verify_certificate_file(too_big_for_exact, kernel="exact")
    assert not issubclass(KernelLimitError, InvalidInputError)
    res = run_verify(too_big_for_exact, "--kernel", "exact")
    assert_one_line_error(res, EXIT_NOT_CHECKED)
    assert "not checked" in res.stderr and "--kernel arb" in res.stderr
    res = run_verify(too_big_for_exact, "--kernel", "exact", "--json")
    report = json.loads(res.stdout)
    assert res.returncode == report["exit_code"] == EXIT_NOT_CHECKED
    assert report["files"][0]["status"] == "not-checked"
    assert run_verify(too_big_for_exact).returncode == 0
    # severity: rejected (1) and invalid (2) dominate "not checked" (5), which dominates inconclusive (3)
    op = peaked_operator()
    false = write_certificate(tmp_path / "false.json", build_document(op, false_witness_brackets(op)))
    singular = Operator("probabilities", {"A": np.full((2, 2), 0.5)})
    inconclusive = write_certificate(tmp_path / "inc.json", build_document(singular, [
        Bracket("0.001", LowerEnd(2, "selection", np.eye(2), np.eye(2)), UpperEnd(2, "identity"))]))
    assert run_verify(too_big_for_exact, false, "--kernel", "exact").returncode == EXIT_REJECTED
    assert run_verify(too_big_for_exact, inconclusive, "--kernel", "exact").returncode == EXIT_NOT_CHECKED
    assert run_verify(inconclusive, "--kernel", "exact").returncode == EXIT_INCONCLUSIVE
    (tmp_path / "junk.json").write_text("{")
    assert run_verify(too_big_for_exact, tmp_path / "junk.json", "--kernel", "exact").returncode == EXIT_INVALID_INPUT


def test_bad_global_option_is_one_error_line():
    res = run_verify(ROOT / "certificates" / "examples", "--max-prec", "10")
    assert_one_line_error(res, 2)
    assert "--max-prec" in res.stderr and "random-qk" not in res.stderr


@pytest.mark.slow
def test_file_modes(tmp_path, tiny_panel, table_rows):
    """Published files (certificates, reports, plots, signed copies) 0644; private keys 0600."""
    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    env_umask = "umask 022 && "
    (tmp_path / "k").mkdir()
    cert = tmp_path / "c.json"
    report = tmp_path / "r.json"
    for args in (["bracket", tiny_panel, "--operator", NAMES[1], "--eps", "0.5", "--out", cert],
                 ["sign", cert, "--key", DEMO_KEY, "--out", tmp_path / "signed.json"],
                 ["audit", table_rows, "--operators", PUBLISHED / "minilm-apache2-w32.npz", "--out", report,
                  "--plot", tmp_path / "r.png"],
                 ["keygen", "--out", tmp_path / "k" / "issuer.key"]):
        from conftest import SOFTRANK_CMD
        import shlex

        proc = subprocess.run(["sh", "-c", env_umask + " ".join(shlex.quote(str(a)) for a in [*SOFTRANK_CMD, *args])],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    for published in (cert, tmp_path / "signed.json", report, tmp_path / "r.png", tmp_path / "k" / "issuer.key.pub"):
        assert mode(published) == 0o644, (published, oct(mode(published)))
    assert mode(tmp_path / "k" / "issuer.key") == 0o600
