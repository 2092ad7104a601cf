"""Every campaign manifest the commands write matches ``certificates/schema/softrank-campaign-v1.schema.json``.

Each command that keeps a manifest (``bracket --out``, ``supports --out``, ``budgets``, ``audit``
and ``analyze --resume``) runs in this process on a two-operator panel; every write of its
manifest -- the first one with every operator pending, one per finished operator, the last one
-- is checked against the schema, so a key that drifts mid-run is caught as well as one in the
final file.  The schema is read from this checkout's ``certificates/schema`` by path.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource

from conftest import run_in_process

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "certificates" / "schema"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    documents = [json.loads(path.read_text()) for path in SCHEMAS.glob("softrank-*.schema.json")]
    registry = Registry().with_resources([(doc["$id"], Resource.from_contents(doc)) for doc in documents])
    schema = json.loads((SCHEMAS / "softrank-campaign-v1.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema, registry=registry)


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> Path:
    from softrank_cert.models import build_panel, write_panel

    arrays = build_panel("minilm", ROOT / "examples/data/apache2.txt", [8], layers=[0], heads=[0, 5])
    return write_panel(tmp_path_factory.mktemp("panel") / "w8.npz", arrays)


@pytest.fixture
def written(monkeypatch) -> list[dict]:
    """The manifests written while the test runs, in order (each write parsed)."""
    import softrank_cert.plumbing.campaign as campaign

    documents: list[dict] = []
    original = campaign.write_text_atomic

    def record(path, text, *args, **kwargs):
        documents.append(json.loads(text))
        return original(path, text, *args, **kwargs)

    monkeypatch.setattr(campaign, "write_text_atomic", record)
    return documents


def _commands(panel: Path, tmp: Path) -> dict[str, list[str]]:
    from softrank_cert.util.operator_files import operator_names

    table = tmp / "table.jsonl"
    table.write_text("".join(json.dumps({"operator": name, "eps": "0.25", "lower": 1, "upper": 2}) + "\n"
                             for name in operator_names(panel)))
    certs = tmp / "certs"
    return {
        "bracket": ["bracket", str(panel), "--all", "--eps", "0.25", "--out", str(certs), "--budget-seconds", "inf"],
        "budgets": ["budgets", str(panel), "--budgets", "2", "--eps", "0.25", "--budget-seconds", "inf",
                    "--out", str(tmp / "b.json"), "--resume"],
        "audit": ["audit", str(table), "--operators", str(panel), "--out", str(tmp / "a.json"),
                  "--budget-seconds", "inf", "--resume"],
        "analyze": ["analyze", str(certs), "--operators", str(panel), "--out", str(tmp / "an.json"),
                    "--plot", str(tmp / "an.png"), "--resume"],
        "supports": ["supports", "sphere", "--dim", "2", "--n", "12", "--kappas", "0.5,2",
                     "--out", str(tmp / "sup")],
    }


@pytest.mark.slow
def test_every_manifest_write_of_every_command_matches_the_schema(panel, tmp_path, capsys, written, validator):
    for command, args in _commands(panel, tmp_path).items():
        start = len(written)
        code, _, err = run_in_process(capsys, *args)
        assert code == 0, (command, err)
        mine = written[start:]
        assert len(mine) >= 3 and {doc["command"] for doc in mine} == {command}, command
        assert mine[0]["state"] == "running" and mine[-1]["state"] == "complete", command
        for document in mine:
            errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
            assert not errors, (command, errors)


def test_the_schema_catches_a_drifting_manifest(panel, tmp_path, capsys, written, validator):
    code, _, err = run_in_process(capsys, *_commands(panel, tmp_path)["bracket"])
    assert code == 0, err
    good = written[-1]
    assert validator.is_valid(good)
    entry = next(iter(good["operators"]))
    for drift in ({"state": "R-cache"}, {"extra": 1}, {"tolerances": ["0,25"]},
                  {"operators": {entry: {**good["operators"][entry], "status": "ok"}}},
                  {"summary": {"done": 2}}):
        assert not validator.is_valid({**good, **drift}), drift
    command_without_its_parameter = {k: v for k, v in good.items() if k != "panel"}
    assert not validator.is_valid(command_without_its_parameter)
