"""Outputs never destroy inputs (issue 48 item 1; docs/design.md section 4).

Each command that writes refuses, with one line and exit 2 before any work, an output that is
one of its inputs (the same file by path, symlink or hard link; a certificate inside a campaign
folder too), a key file or its ``.pub`` (with or without ``--force``), and any other existing
file unless ``--force``.  A campaign folder that holds a campaign is refused without ``--resume``
or ``--force``, naming both; ``--force`` keeps the manifest's run history and marks its run.
Every reproduction of the issue is here: on the code before it, each exited 0 and replaced the
file (a panel became a certificate, a private key a certificate of mode 0644).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from conftest import WORK_MODULES, assert_one_line_error, run_softrank, run_softrank_traced
from tests.helpers import write_qk_panel

NAMES = ["m/L0H1", "m/L0H2"]


@pytest.fixture
def panel(tmp_path) -> Path:
    return write_qk_panel(tmp_path / "p.npz", NAMES, seed=3, rows=(4, 4))


@pytest.fixture
def key(tmp_path) -> Path:
    path = tmp_path / "k.key"
    assert run_softrank("keygen", "--out", path).returncode == 0
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def bracket(panel: Path, *args) -> list:
    return ["bracket", panel, "--eps", "0.25", "--work", "50", "--quiet", *args]


def test_an_output_that_is_the_panel_is_refused_before_any_work(panel, tmp_path):
    """``softrank bracket p.npz --out p.npz`` replaced the panel with a certificate (exit 0)."""
    before = snapshot(tmp_path)
    for extra in ([], ["--force"]):
        res = run_softrank_traced(*bracket(panel, "--operator", NAMES[0], "--out", panel, *extra))
        assert_one_line_error(res, 2)
        assert f"--out {panel} would overwrite the operator file" in res.stderr
        assert res.imported_any(*WORK_MODULES) == []
    assert snapshot(tmp_path) == before


def test_the_same_file_by_another_name_is_refused(panel, tmp_path):
    """A symlink to the panel, a hard link to it, and a path through ``..``: all the panel."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "alias.npz").symlink_to(panel)
    os.link(panel, tmp_path / "hard.npz")
    before = snapshot(tmp_path)
    for out in (tmp_path / "alias.npz", tmp_path / "hard.npz", tmp_path / "sub" / ".." / "p.npz"):
        res = run_softrank(*bracket(panel, "--operator", NAMES[0], "--out", out, "--force"))
        assert_one_line_error(res, 2)
        assert "would overwrite the operator file" in res.stderr, res.stderr
    assert snapshot(tmp_path) == before


def test_an_existing_output_needs_force(panel, tmp_path):
    cert = tmp_path / "c.json"
    assert run_softrank(*bracket(panel, "--operator", NAMES[0], "--out", cert)).returncode == 0
    first = cert.read_bytes()
    res = run_softrank(*bracket(panel, "--operator", NAMES[0], "--out", cert))
    assert_one_line_error(res, 2)
    assert f"--out {cert}: exists; give --force to replace it" in res.stderr
    assert cert.read_bytes() == first
    res = run_softrank(*bracket(panel, "--operator", NAMES[0], "--out", cert, "--force"))
    assert res.returncode == 0, res.stderr


@pytest.mark.slow
def test_sign_never_replaces_a_key(panel, key, tmp_path):
    """``softrank sign c.json --key k.key --out k.key`` replaced the private key with the
    certificate (exit 0, mode 0644): the key, its .pub and any other key file are refused."""
    cert = tmp_path / "c.json"
    assert run_softrank(*bracket(panel, "--operator", NAMES[0], "--out", cert)).returncode == 0
    other = tmp_path / "other.key"
    assert run_softrank("keygen", "--out", other).returncode == 0
    before = snapshot(tmp_path)
    cases = [(key, "would overwrite the --key file"), (Path(f"{key}.pub"), "would overwrite the --key's public key"),
             (other, "is a private key file; a key file is never replaced, --force or not"),
             (Path(f"{other}.pub"), "is a public key file; a key file is never replaced")]
    for out, fragment in cases:
        for extra in ([], ["--force"]):
            res = run_softrank("sign", cert, "--key", key, "--out", out, *extra)
            assert_one_line_error(res, 2)
            assert fragment in res.stderr, res.stderr
    res = run_softrank("sign", cert, "--key", key, "--out", cert)
    assert_one_line_error(res, 2)
    assert "is the certificate to sign: omit --out to sign it in place" in res.stderr
    assert snapshot(tmp_path) == before
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    res = run_softrank("sign", cert, "--key", key)  # in place: the documented way
    assert res.returncode == 0, res.stderr


@pytest.mark.slow
def test_keygen_never_replaces_a_file(key, tmp_path):
    before = snapshot(tmp_path)
    res = run_softrank("keygen", "--out", key)
    assert_one_line_error(res, 2)
    assert "is a private key file" in res.stderr
    (tmp_path / "notes.txt").write_text("mine")
    res = run_softrank("keygen", "--out", tmp_path / "notes.txt")
    assert_one_line_error(res, 2)
    assert "exists" in res.stderr and (tmp_path / "notes.txt").read_text() == "mine"
    (tmp_path / "new.key.pub").write_text("mine")
    res = run_softrank("keygen", "--out", tmp_path / "new.key")
    assert_one_line_error(res, 2)
    assert not (tmp_path / "new.key").exists()
    assert snapshot(tmp_path) == {**before, "notes.txt": b"mine", "new.key.pub": b"mine"}


def test_bracket_never_writes_over_its_key(panel, key, tmp_path):
    res = run_softrank(*bracket(panel, "--operator", NAMES[0], "--key", key, "--out", f"{key}.pub", "--force"))
    assert_one_line_error(res, 2)
    assert "would overwrite the --key's public key file" in res.stderr


@pytest.mark.slow
def test_a_campaign_folder_needs_resume_or_force(panel, key, tmp_path):
    """Re-running a campaign into its folder recomputed and overwrote it, even with other --eps or
    without --key (a signed campaign became an unsigned one), and reset the run history."""
    certs = tmp_path / "certs"
    res = run_softrank(*bracket(panel, "--all", "--out", f"{certs}/", "--key", key))
    assert res.returncode == 0, res.stderr
    before = snapshot(certs)
    res = run_softrank_traced("bracket", panel, "--all", "--eps", "0.25,0.5", "--out", f"{certs}/", "--quiet")
    assert_one_line_error(res, 2)
    assert "holds a campaign already" in res.stderr
    assert "--resume" in res.stderr and "--force" in res.stderr
    assert res.imported_any(*WORK_MODULES) == []
    assert snapshot(certs) == before
    res = run_softrank("bracket", panel, "--all", "--eps", "0.25,0.5", "--work", "50", "--out", f"{certs}/",
                       "--quiet", "--force")
    assert res.returncode == 0, res.stderr
    runs = json.loads((certs / "softrank-campaign.json").read_text())["runs"]
    assert len(runs) == 2 and "forced" not in runs[0] and runs[1]["forced"] is True
    res = run_softrank("bracket", panel, "--all", "--eps", "0.25,0.5", "--work", "50", "--out", f"{certs}/",
                       "--quiet", "--resume")
    assert res.returncode == 0, res.stderr
    runs = json.loads((certs / "softrank-campaign.json").read_text())["runs"]
    assert [run.get("forced") for run in runs] == [None, True, None]
    import jsonschema
    from referencing import Registry, Resource

    folder = Path(__file__).parents[2] / "certificates" / "schema"
    schemas = [json.loads(path.read_text()) for path in folder.glob("softrank-*.schema.json")]
    registry = Registry().with_resources([(doc["$id"], Resource.from_contents(doc)) for doc in schemas])
    schema = next(doc for doc in schemas if doc["$id"].endswith("softrank-campaign-v1.json"))
    jsonschema.Draft202012Validator(schema, registry=registry).validate(
        json.loads((certs / "softrank-campaign.json").read_text()))


def test_a_certificate_inside_the_campaign_folder_may_not_be_an_input(tmp_path):
    """The panel itself lies where an operator's certificate would go: refused, --force or not."""
    certs = tmp_path / "certs"
    (certs / "m").mkdir(parents=True)
    inside = certs / "m" / "L0H1.json"
    rng = np.random.default_rng(1)
    with open(inside, "wb") as handle:  # a panel under the name of the certificate of m/L0H1
        np.savez(handle, **{f"{name}/{leaf}": rng.standard_normal((4, 2)) for name in NAMES for leaf in "QK"})
    before = snapshot(tmp_path)
    res = run_softrank(*bracket(inside, "--all", "--out", f"{certs}/", "--force"))
    assert_one_line_error(res, 2)
    assert "would overwrite the operator file" in res.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_supports_folder_needs_resume_or_force(tmp_path):
    out = tmp_path / "ball"
    argv = ["supports", "sphere", "--dim", "2", "--n", "8", "--kappas", "0.5,2", "--work", "20", "--quiet",
            "--out", f"{out}/"]
    assert run_softrank(*argv).returncode == 0
    before = snapshot(out)
    res = run_softrank(*argv)
    assert_one_line_error(res, 2)
    assert "holds a campaign already" in res.stderr and "--resume" in res.stderr and "--force" in res.stderr
    assert snapshot(out) == before
    res = run_softrank(*argv, "--force")
    assert res.returncode == 0, res.stderr
    runs = json.loads((out / "softrank-campaign.json").read_text())["runs"]
    assert [run.get("forced") for run in runs] == [None, True]


@pytest.mark.slow
def test_report_replaces_its_page_only_with_force(panel, tmp_path):
    certs = tmp_path / "certs"
    assert run_softrank(*bracket(panel, "--all", "--out", f"{certs}/")).returncode == 0
    assert run_softrank("report", certs, "--quiet").returncode == 0
    before = snapshot(tmp_path)
    res = run_softrank("report", certs, "--quiet")
    assert_one_line_error(res, 2)
    assert "report.html: exists; give --force" in res.stderr
    assert snapshot(tmp_path) == before
    (certs / "report.html").unlink()  # the figures folder still holds the earlier figures
    res = run_softrank("report", certs, "--quiet")
    assert_one_line_error(res, 2)
    assert "report-figures: the folder holds files already; give --force" in res.stderr
    assert run_softrank("report", certs, "--quiet", "--force").returncode == 0


@pytest.mark.parametrize("command", ["profile", "panel", "analyze", "audit", "budgets"])
def test_every_writing_command_refuses_an_existing_output(command, panel, tmp_path):
    existing = tmp_path / "existing.json"
    existing.write_text("{}")
    table = tmp_path / "t.jsonl"
    table.write_text(json.dumps({"operator": NAMES[0], "eps": "0.5", "lower": 1, "upper": 4}) + "\n")
    argv = {"profile": ["profile", panel, "--operator", NAMES[0], "--eps", "0.25", "--out", existing],
            "panel": ["panel", "--model", "minilm", "--text", table, "--widths", "4", "--out", tmp_path / "x.npz"],
            "analyze": ["analyze", tmp_path / "certs", "--operators", panel, "--out", tmp_path / "a" / "r.json", "--plot",
                        existing.with_suffix(".png")],
            "audit": ["audit", table, "--operators", panel, "--out", existing],
            "budgets": ["budgets", panel, "--budgets", "1", "--eps", "0.25", "--out", existing]}[command]
    if command == "panel":
        (tmp_path / "x.npz").write_bytes(b"mine")
    if command == "analyze":
        existing.with_suffix(".png").write_bytes(b"mine")
        (tmp_path / "certs").mkdir()
    before = snapshot(tmp_path)
    res = run_softrank_traced(*argv)
    assert_one_line_error(res, 2)
    assert "exists; give --force to replace it" in res.stderr, res.stderr
    assert res.imported_any("softrank_cert.solvers", "highspy", "torch", "transformers") == []
    assert snapshot(tmp_path) == before


def test_an_output_inside_an_input_folder_is_refused(panel, tmp_path):
    """``softrank analyze certs/ ... --plot certs/old.json --force``: a file the analysis reads."""
    certs = tmp_path / "certs"
    assert run_softrank(*bracket(panel, "--all", "--out", f"{certs}/")).returncode == 0
    before = snapshot(tmp_path)
    res = run_softrank("analyze", certs, "--operators", panel, "--out", certs / "m" / "L0H1.json",
                       "--plot", tmp_path / "a.png", "--force")
    assert_one_line_error(res, 2)
    assert f"would overwrite a file of the certificates {certs};" in res.stderr
    assert snapshot(tmp_path) == before
