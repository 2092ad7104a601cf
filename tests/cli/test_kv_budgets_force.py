"""``softrank kv-budgets --force`` replaces the whole earlier run: no certificate of a policy it
does not run now stays behind for softrank-verify to check, and nothing is left half-removed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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


def test_remove_outputs_moves_aside_then_deletes_and_never_removes_an_input(tmp_path):
    from softrank_cert.util.files import remove_outputs

    (tmp_path / "old" / "a").mkdir(parents=True)
    (tmp_path / "old" / "a" / "x.json").write_text("{}")
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / ".softrank-removed-left").mkdir()  # an interrupted removal's folder
    (tmp_path / "keep.json").write_text("{}")
    with pytest.raises(InvalidInputError, match="holds the certificate"):
        remove_outputs(tmp_path, ["report.json", "old"], inputs={"certificate": tmp_path / "old" / "a" / "x.json"})
    assert (tmp_path / "report.json").exists() and (tmp_path / "old" / "a" / "x.json").exists()
    remove_outputs(tmp_path, ["report.json", "old", "absent"], inputs={"certificate": tmp_path / "keep.json"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]
