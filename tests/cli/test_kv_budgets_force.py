"""``softrank kv-budgets --force`` replaces the whole earlier run: no certificate of a policy it
does not run now stays behind for softrank-verify to check, and nothing is left half-removed."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.errors import InvalidInputError
from tests.cli.test_kv_budgets import folder, run  # noqa: F401  (the module's bracket folder fixture)


def test_force_removes_the_certificates_of_policies_not_run_again(folder, tmp_path):  # noqa: F811
    certs = tmp_path / "certs"
    shutil.copytree(folder, certs)
    assert run("kv-budgets", certs, "--quiet")[0] == 0  # streaming-llm and h2o
    assert list((certs / "kv-budgets" / "h2o").rglob("*.json"))
    code, out, err = run("kv-budgets", certs, "--force", "--policies", "streaming-llm", "--json", "--quiet")
    assert code == 0, err
    assert not (certs / "kv-budgets" / "h2o").exists()
    assert sorted(p.name for p in (certs / "kv-budgets").iterdir()) == ["figures", "streaming-llm"]
    assert not [p for p in certs.rglob(".*")]  # no hidden leftover of the removal
    assert json.loads(out)["operators"][0]["certificates"].keys() == {"streaming-llm"}
    code, out, err = run(certs / "kv-budgets", "--json", verify=True)
    assert code == 0, err
    paths = [Path(r["path"]).as_posix() for r in json.loads(out)["files"]]
    assert paths and all("/h2o/" not in path for path in paths)


def _any(path: Path) -> bool:
    return True


def _outputs(tmp_path: Path) -> Path:
    (tmp_path / "old" / "a").mkdir(parents=True)
    (tmp_path / "old" / "a" / "x.json").write_text("{}")
    (tmp_path / "report.json").write_text("{}")
    return tmp_path


def _listing(where: Path) -> list[str]:
    return sorted(str(p.relative_to(where)) for p in where.rglob("*"))


def test_remove_outputs_moves_aside_then_deletes_and_never_removes_an_input(tmp_path):
    from softrank_cert.util.removal import remove_outputs

    _outputs(tmp_path)
    (tmp_path / ".softrank-removed-left").mkdir()  # an interrupted removal's folder
    (tmp_path / "keep.json").write_text("{}")
    with pytest.raises(InvalidInputError, match="holds the certificate"):
        remove_outputs(tmp_path, ["report.json", "old"], is_output=_any,
                       inputs={"certificate": tmp_path / "old" / "a" / "x.json"})
    assert (tmp_path / "report.json").exists() and (tmp_path / "old" / "a" / "x.json").exists()
    remove_outputs(tmp_path, ["report.json", "old", "absent"], is_output=_any,
                   inputs={"certificate": tmp_path / "keep.json"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]


# --- what a forced run may remove: its own outputs only, never a key file -----------------------

@pytest.fixture(scope="module")
def studied(folder, tmp_path_factory) -> Path:  # noqa: F811
    """The bracket folder after one ``softrank kv-budgets`` run (both default policies)."""
    certs = tmp_path_factory.mktemp("studied") / "certs"
    shutil.copytree(folder, certs)
    assert run("kv-budgets", certs, "--quiet")[0] == 0
    return certs


def _copy(studied: Path, tmp_path: Path) -> Path:
    shutil.copytree(studied, tmp_path / "certs", symlinks=True)
    return tmp_path / "certs"


def _refused(certs: Path, named: Path, why: str) -> None:
    before = _listing(certs)
    code, _out, err = run("kv-budgets", certs, "--force", "--quiet")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(named) in err and why in err, err
    assert _listing(certs) == before  # nothing removed


@pytest.mark.parametrize("where", ["mykey.json", "h2o/mykey.json", "figures/mykey.json"])
def test_force_never_removes_a_key_file_in_the_kv_budgets_folder(studied, tmp_path, where):
    certs = _copy(studied, tmp_path)
    key = certs / "kv-budgets" / where
    assert run("keygen", "--out", key)[0] == 0
    _refused(certs, key, "key file")  # the key or its .pub, whichever is met first
    assert key.exists() and key.with_name(key.name + ".pub").exists()


@pytest.mark.parametrize(("where", "text"), [("notes.txt", "mine"), ("h2o/notes.json", "{}"),
                                             ("streaming-llm/w8/readme.md", "mine"),
                                             ("figures/data.csv", "1,2"), ("elsewhere/x.json", "{}")])
def test_force_refuses_a_file_that_is_not_an_output_of_kv_budgets(studied, tmp_path, where, text):
    certs = _copy(studied, tmp_path)
    stray = certs / "kv-budgets" / where
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_text(text)
    _refused(certs, stray, "not an output")


def test_force_refuses_a_symlink_inside_and_a_symlinked_kv_budgets_folder(studied, tmp_path):
    certs = _copy(studied, tmp_path)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    (certs / "kv-budgets" / "h2o" / "link.json").symlink_to(elsewhere)
    _refused(certs, certs / "kv-budgets" / "h2o" / "link.json", "not an output")
    (certs / "kv-budgets" / "h2o" / "link.json").unlink()
    (certs / "kv-budgets").rename(tmp_path / "real")
    (certs / "kv-budgets").symlink_to(tmp_path / "real")
    _refused(certs, certs / "kv-budgets", "symbolic link")
    assert list((tmp_path / "real" / "h2o").rglob("*.json"))


def test_force_removes_what_an_interrupted_write_left_in_the_kv_budgets_folder(studied, tmp_path):
    certs = _copy(studied, tmp_path)
    (certs / "kv-budgets" / "h2o" / ".L0H0.json.ab_12cd3.tmp").write_text('{"format": "softrank-cer')
    (certs / "kv-budgets" / "figures" / ".kv-budgets-tiny.png.x1y2z3w4.png").write_bytes(b"\x89PNG")
    code, _out, err = run("kv-budgets", certs, "--force", "--quiet")
    assert code == 0, err
    assert not [p for p in certs.rglob(".*")]


def test_a_bracket_certificate_under_kv_budgets_is_never_removed_whatever_the_caller_passes(tmp_path):
    """A model labelled ``kv-budgets`` puts its bracket certificates in ``kv-budgets/``: the survey
    passes only its document, key and model, yet a forced run removes none of them."""
    from softrank_cert.studies.kv_budgets.folder import certify_folder, check_outputs
    from softrank_cert.studies.kv_budgets.policies import Policy

    rng = np.random.default_rng(5)
    names = ["kv-budgets/h2o/w8/L0H0", "kv-budgets/h2o/w8/L0H1"]
    np.savez(tmp_path / "tiny.npz", **{f"{name}/{part}": 2 * rng.standard_normal((8, 2))
                                       for name in names for part in "QK"})
    code, _out, err = run("bracket", tmp_path / "tiny.npz", "--all", "--eps", "0.25,0.5", "--out",
                          tmp_path / "certs/", "--budget-seconds", "1", "--quiet")
    assert code == 0, err
    certs = tmp_path / "certs"
    assert run("kv-budgets", certs, "--policies", "h2o", "--quiet")[0] == 0
    mine = [certs / f"{name}.json" for name in names]
    inputs = {"document": tmp_path / "doc.txt"}
    check_outputs(certs, [], ["h2o"], inputs, True)
    with pytest.raises(InvalidInputError, match="holds the certificate of kv-budgets/h2o/w8/L0H0"):
        certify_folder(certs, [Policy("h2o")], None, stage=lambda *a, **k: None, force=True, inputs=inputs)
    assert all(path.exists() for path in mine)


# --- an interrupted removal: finished, its leftovers cleaned and never read ---------------------

def test_a_removal_interrupted_by_ctrl_c_is_finished_before_the_interrupt_goes_on(tmp_path, monkeypatch):
    from softrank_cert.util.removal import remove_outputs

    _outputs(tmp_path)
    real = shutil.rmtree
    calls = []

    def interrupted(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        remove_outputs(tmp_path, ["report.json", "old"], is_output=_any)
    assert list(tmp_path.iterdir()) == []


def test_leftovers_of_a_killed_removal_are_never_read_and_any_run_cleans_them(studied, folder, tmp_path):  # noqa: F811
    from softrank_cert.plumbing.certificate_files import expand_json_paths
    from softrank_cert.studies.report.folder import plan, read_manifest, unlisted_files

    certs = tmp_path / "certs"
    shutil.copytree(folder, certs)
    shutil.copytree(studied / "kv-budgets", certs / ".softrank-removed-k1ll3d" / "kv-budgets")
    assert not [p for p in expand_json_paths([str(certs)]) if ".softrank-removed-" in p]
    assert unlisted_files(certs, plan(certs, read_manifest(certs))) is None
    code, out, err = run(certs, "--json", verify=True)
    assert code == 0, err
    assert not [r for r in json.loads(out)["files"] if ".softrank-removed-" in r["path"]]
    code, _out, err = run("kv-budgets", certs, "--quiet")  # a plain run, not forced
    assert code == 0, err
    assert not (certs / ".softrank-removed-k1ll3d").exists()


# --- odd targets, failed renames, and two runs at once ------------------------------------------

def test_a_symlinked_or_mounted_target_or_one_that_is_an_input_is_refused(tmp_path, monkeypatch):
    from softrank_cert.util.removal import remove_outputs

    _outputs(tmp_path)
    with pytest.raises(InvalidInputError, match="holds the folder"):
        remove_outputs(tmp_path, ["report.json", "old"], is_output=_any, inputs={"folder": tmp_path / "old"})
    (tmp_path / "linked").symlink_to(tmp_path / "old")
    with pytest.raises(InvalidInputError, match="linked is a symbolic link"):
        remove_outputs(tmp_path, ["linked"], is_output=_any)
    monkeypatch.setattr(os.path, "ismount", lambda path: Path(path).name == "old")
    with pytest.raises(InvalidInputError, match="old is a mount point"):
        remove_outputs(tmp_path, ["report.json", "old"], is_output=_any)
    assert _listing(tmp_path) == ["linked", "old", "old/a", "old/a/x.json", "report.json"]


def test_a_rename_failing_part_way_puts_the_first_back(tmp_path, monkeypatch):
    from softrank_cert.errors import OutputWriteError
    from softrank_cert.util import removal

    _outputs(tmp_path)
    real = os.replace

    def cross_device(source, target):
        if Path(source).name == "old":
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(source, target)

    monkeypatch.setattr(removal.os, "replace", cross_device)
    with pytest.raises(OutputWriteError):
        removal.remove_outputs(tmp_path, ["report.json", "old"], is_output=_any)
    assert _listing(tmp_path) == ["old", "old/a", "old/a/x.json", "report.json"]


def test_a_file_or_symlink_named_like_a_leftover_is_left_alone(tmp_path):
    from softrank_cert.util.removal import remove_outputs

    _outputs(tmp_path / "run")
    (tmp_path / "run" / ".softrank-removed-notes").write_text("mine")
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "data.txt").write_text("mine")
    (tmp_path / "run" / ".softrank-removed-link").symlink_to(tmp_path / "precious")
    remove_outputs(tmp_path / "run", ["report.json", "old"], is_output=_any)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".softrank-removed-link", ".softrank-removed-notes"]
    assert (tmp_path / "precious" / "data.txt").read_text() == "mine"


def test_two_removals_at_once_both_succeed(tmp_path, monkeypatch):
    """Run B starts while run A is between its two renames (and deletes A's folder as a leftover)."""
    from softrank_cert.util import removal

    _outputs(tmp_path)
    real = os.replace
    done = []

    def racing(source, target):
        real(source, target)
        if not done:
            done.append(True)
            monkeypatch.setattr(removal.os, "replace", real)
            removal.remove_outputs(tmp_path, ["report.json", "old"], is_output=_any)
            monkeypatch.setattr(removal.os, "replace", racing)

    monkeypatch.setattr(removal.os, "replace", racing)
    removal.remove_outputs(tmp_path, ["report.json", "old"], is_output=_any)
    assert list(tmp_path.iterdir()) == []


def test_putting_back_never_overwrites_what_another_run_wrote_meanwhile(tmp_path, monkeypatch):
    """A removal that fails part way puts back what it moved, but not over a newer output another
    run wrote under that name in the meantime (that one is kept; the old one stays aside)."""
    from softrank_cert.errors import OutputWriteError
    from softrank_cert.util import removal

    _outputs(tmp_path)
    real = os.replace

    def newer_then_cross_device(source, target):
        if Path(source).name == "old":
            (tmp_path / "report.json").write_text("newer")
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(source, target)

    monkeypatch.setattr(removal.os, "replace", newer_then_cross_device)
    with pytest.raises(OutputWriteError):
        removal.remove_outputs(tmp_path, ["report.json", "old"], is_output=_any)
    assert (tmp_path / "report.json").read_text() == "newer"
    assert (tmp_path / "old" / "a" / "x.json").is_file()


def test_rename_entry_never_replaces_an_existing_entry(tmp_path):
    from softrank_cert.util.files import rename_entry

    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    with pytest.raises(FileExistsError):
        rename_entry(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "a").read_text() == "a" and (tmp_path / "b").read_text() == "b"
    rename_entry(tmp_path / "a", tmp_path / "c")
    assert (tmp_path / "c").read_text() == "a" and not (tmp_path / "a").exists()
