"""The default-work seed-scale campaign (benchmarks/seed_scale.py): its plan, its records and a
whole unit run end to end on a tiny panel (brackets, softrank-verify, record, store, sample)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import seed_scale  # noqa: E402


def test_plan_covers_the_issue():
    units = seed_scale.plan()
    names = [u.name for u in units]
    operators = [op for u in units for op in u.operators()]
    assert len(set(names)) == len(names)
    assert len(set(operators)) == len(operators) >= 3000
    assert {u.width for u in units} == {64, 128, 256, 512}
    assert {u.model for u in units} == {"minilm", "smollm2"}
    assert len({u.document for u in units}) >= 3
    assert all((ROOT / "examples" / "data" / f"{u.document}.txt").is_file() for u in units)
    assert [u.width for u in units] == sorted(u.width for u in units)  # whole widths first


def test_sample_is_deterministic_and_one_per_group():
    units = seed_scale.plan()
    sample = seed_scale.sample_operators(units)
    assert sample == seed_scale.sample_operators(list(reversed(units)))
    groups = {(u.model, u.document, u.width) for u in units}
    assert len(sample) == len(groups)


def _report(path: Path, verdict: str = "VERIFIED") -> dict:
    claims = [{"eps": e, "side": side, "rank": rank, "method": "m", "verdict": verdict}
              for e in seed_scale.EPS for side, rank in (("lower", 2), ("upper", 3))]
    return {"files": [{"path": str(path), "status": "checked", "exit_code": 0, "operator": "minilm/d/w16/L0H0",
                       "claims": claims}]}


def test_verified_rows_take_the_report_and_refuse_what_does_not_check(tmp_path):
    cert = tmp_path / "c.json"
    cert.write_text('{"operator": {"name": "minilm/d/w16/L0H0"}, "brackets": [], "generator": {"created": "x"}}')
    unit = seed_scale.Unit("minilm", "d", 16, (0,))
    rows, problems = seed_scale.verified_rows(_report(cert), unit)
    assert [r["operator"] for r in rows] == ["minilm/d/w16/L0H0"] * 3
    later = tmp_path / "later.json"  # the same result issued at another time: same result digest
    later.write_text('{"generator": {"created": "y"}, "brackets": [], "operator": {"name": "minilm/d/w16/L0H0"}}')
    again, _ = seed_scale.verified_rows(_report(later), unit)
    assert again[0]["result_sha256"] == rows[0]["result_sha256"] and again[0]["sha256"] != rows[0]["sha256"]
    assert problems == [f"minilm/d/w16/L0H{h}: no verified certificate" for h in range(1, 12)]
    rows, problems = seed_scale.verified_rows(_report(cert, "INCONCLUSIVE"), unit)
    assert rows == [] and problems[0] == "minilm/d/w16/L0H0: a claim is not VERIFIED"
    short = _report(cert)
    short["files"][0]["claims"] = short["files"][0]["claims"][:-1]  # no upper end at the last eps
    assert seed_scale.verified_rows(short, unit)[1][0].startswith("minilm/d/w16/L0H0: the claims are not")
    twice = _report(cert)
    twice["files"].append(dict(twice["files"][0]))
    rows, problems = seed_scale.verified_rows(twice, unit)
    assert len(rows) == 3 and problems[0] == "minilm/d/w16/L0H0: a second certificate"
    stray = _report(cert)
    stray["files"][0]["operator"] = "minilm/other/w16/L0H0"
    assert seed_scale.verified_rows(stray, unit)[1][0] == "minilm/other/w16/L0H0: not of this unit"


def _tiny_unit(tmp_path, monkeypatch, heads: int):
    """A unit of ``heads`` MiniLM heads of layer 0 at width 16, results and work folder under ``tmp_path``."""
    monkeypatch.setattr(seed_scale, "MODELS", {"minilm": (1, heads)})
    monkeypatch.setattr(seed_scale, "RESULTS", tmp_path / "results")
    work = tmp_path / "work"
    work.mkdir()
    return seed_scale.Unit("minilm", "apache2", 16, (0,)), work


def test_operators_computed_by_runs_no_ledger_holds_are_not_costed():
    """A unit whose folder was bracketed by a run the ledger missed (started by hand, or killed
    before its ledger line) names those operators, and its CPU stays out of the per-operator cost."""
    manifest = {"runs": [{"computed": 20}, {"computed": 3}, {"computed": 1}]}
    assert seed_scale.uncosted_operators(manifest, 3) == 0
    assert seed_scale.uncosted_operators(manifest, 2) == 20
    assert seed_scale.uncosted_operators(manifest, 1) == 23
    assert seed_scale.uncosted_operators({"runs": []}, 1) == 0

    def unit(name: str, cpu: float, uncosted: int) -> dict:
        return {"unit": name, "model": "m", "width": 16, "operators": 2, "bracket_cpu_s": cpu,
                "uncosted_operators": uncosted, "verify": {"cpu_s": 1.0},
                "rows": [{"solver_seconds": 1.0}] * (2 * len(seed_scale.EPS))}

    (cost,) = seed_scale.costs([unit("a", 100.0, 0), unit("b", 1.0, 2)])
    assert cost["operators"] == 4 and cost["costed_operators"] == 2 and cost["cpu_s_per_operator"] == 50.0


@pytest.mark.slow
def test_a_unit_end_to_end(tmp_path, monkeypatch):
    """Two MiniLM heads at width 16: bracketed, verified, recorded, stored by SHA-256, summarised."""
    unit, work = _tiny_unit(tmp_path, monkeypatch, 2)
    sample = {"minilm/apache2/w16/L0H1"}
    assert seed_scale.run_unit(unit, seed_scale.Panels(work), work, work / "log", sample)
    record = json.loads(seed_scale.record_path(unit).read_text())
    assert record["operators"] == 2 and record["verify"]["exit_code"] == 0
    assert record["verify"]["verified"] == record["verify"]["claims"] == 2 * 2 * len(seed_scale.EPS)
    assert len(record["rows"]) == 2 * len(seed_scale.EPS)
    assert all(1 <= r["lower"] <= r["upper"] <= 16 for r in record["rows"])
    digests = {r["sha256"] for r in record["rows"]}
    assert {p.stem for p in (work / "store").glob("*.json")} == digests
    sampled = {r["sha256"] for r in record["rows"] if r["operator"] in sample}
    assert {p.stem for p in (tmp_path / "results" / "sample").glob("*.json")} == sampled
    text = seed_scale.write_summary([unit])
    assert "2 of 2 planned operators" in text and "| minilm/w16 | 0.25 | 2 |" in text
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert summary["done_units"] == 1 and summary["claims_verified"] == 12


@pytest.mark.slow
def test_a_tampered_certificate_is_not_recorded(tmp_path, monkeypatch):
    unit, work = _tiny_unit(tmp_path, monkeypatch, 1)
    panels = seed_scale.Panels(work)
    assert seed_scale.run_unit(unit, panels, work, work / "log", set())
    record_file = seed_scale.record_path(unit)
    record_file.unlink()
    cert = work / "certs" / unit.name / "minilm" / "apache2" / "w16" / "L0H0.json"
    data = json.loads(cert.read_text())
    data["brackets"][0]["lower"]["k"] += 1  # a claim the witness does not prove
    cert.write_text(json.dumps(data))
    monkeypatch.setattr(seed_scale, "_run", _verify_only(seed_scale._run))
    assert not seed_scale.run_unit(unit, panels, work, work / "log", set())
    assert not record_file.exists()


def _verify_only(run):
    """``_run`` that skips the bracket step (so that the tampered certificate is what gets verified)."""
    def inner(command, log, capture=False):
        if "bracket" in command:
            return 0, "", 0.0, 0.0
        return run(command, log, capture)
    return inner


def _record(unit: str, model: str, width: int, ends: dict[str, tuple[int, int]]) -> dict:
    """A record of one unit whose operators (keys of ``ends``) have the same bracket at every eps."""
    rows = [{"operator": op, "eps": e, "lower": lo, "upper": up} for op, (lo, up) in ends.items() for e in seed_scale.EPS]
    return {"unit": unit, "model": model, "width": width, "rows": rows}


def test_the_typical_head_is_nearest_the_medians_and_waits_for_its_whole_width(monkeypatch):
    a = seed_scale.Unit("minilm", "d", 16, (0,))
    b = seed_scale.Unit("minilm", "e", 16, (0,))
    monkeypatch.setattr(seed_scale, "plan", lambda: [a, b])
    first = _record(a.name, "minilm", 16, {"m/d/w16/L0H0": (2, 3), "m/d/w16/L0H1": (8, 12)})
    second = _record(b.name, "minilm", 16, {"m/e/w16/L0H0": (4, 6), "m/e/w16/L0H1": (5, 6), "m/e/w16/L0H2": (30, 40)})
    assert seed_scale.typical_operators([first], (16,)) == []  # unit b not recorded yet
    # medians over the five: lower 5, upper 6; (5, 6) is exactly there
    assert seed_scale.typical_operators([first, second], (16,)) == [("minilm", 16, "m/e/w16/L0H1", b.name)]
    tie = _record(b.name, "minilm", 16, {"m/e/w16/L0H0": (5, 6), "m/e/w16/L0H1": (5, 6), "m/e/w16/L0H2": (30, 40)})
    names = ["m/e/w16/L0H0", "m/e/w16/L0H1"]
    expected = min(names, key=lambda n: seed_scale.hashlib.sha256(n.encode()).hexdigest())
    assert seed_scale.typical_operators([first, tie], (16,))[0][2] == expected
    assert seed_scale.typical_operators([first, tie], (32,)) == []


@pytest.mark.slow
def test_profiles_of_typical_heads_end_to_end(tmp_path, monkeypatch):
    """The typical head of a two-head unit profiled, its certificate verified, the summary shows
    it; a second run keeps it; a tampered certificate fails the stage."""
    unit, work = _tiny_unit(tmp_path, monkeypatch, 2)
    monkeypatch.setattr(seed_scale, "plan", lambda: [unit])
    monkeypatch.setattr(seed_scale, "PROFILE_WIDTHS", (16,))
    panels = seed_scale.Panels(work)
    assert seed_scale.run_unit(unit, panels, work, work / "log", set())
    assert seed_scale.run_profiles(panels, work / "log")
    folder = tmp_path / "results" / "profiles"
    (head,) = json.loads((folder / "index.json").read_text())["heads"]
    stem = head["stem"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["index.json", f"{stem}.png", f"{stem}.json", f"{stem}.cert.json"])
    index = json.loads((folder / "index.json").read_text())
    assert index["verify"]["exit_code"] == 0 and index["verify"]["verified"] == index["verify"]["claims"] == 6
    report = json.loads((folder / f"{stem}.json").read_text())
    assert report["operator"] == head["operator"] and report["lower"] and report["upper"]
    text = seed_scale.write_summary([unit])
    assert "## Certified profiles of typical heads" in text and f"(profiles/{stem}.png)" in text
    assert f"| `{head['operator']}` | minilm, width 16 |" in text

    real_run, commands = seed_scale._run, []

    def recording_run(command, log, capture=False):
        commands.append(command[2])
        return real_run(command, log, capture)

    monkeypatch.setattr(seed_scale, "_run", recording_run)
    (folder / "stray.png").write_bytes(b"")  # a head no longer typical
    assert seed_scale.run_profiles(panels, work / "log")
    assert commands == ["softrank_cert.cli.verify"] and not (folder / "stray.png").exists()  # kept, not recomputed
    certificate = folder / f"{stem}.cert.json"
    data = json.loads(certificate.read_text())
    data["brackets"][0]["lower"]["k"] += 1  # a claim the certificate does not prove
    certificate.write_text(json.dumps(data))
    assert not seed_scale.run_profiles(panels, work / "log")
    assert json.loads((folder / "index.json").read_text())["verify"]["exit_code"] != 0


@pytest.mark.slow
def test_a_reproduced_unit_is_compared_result_by_result(tmp_path, monkeypatch):
    """A recorded unit bracketed again gives identical results; a record that does not match is reported."""
    unit, work = _tiny_unit(tmp_path, monkeypatch, 2)
    panels = seed_scale.Panels(work)
    assert seed_scale.run_unit(unit, panels, work, work / "log", set())
    assert seed_scale.reproduce_unit(unit, panels, work, work / "log")
    check = json.loads((tmp_path / "results" / "reproduced" / f"{unit.name}.json").read_text())
    assert check["identical_results"] == 2 and check["differing"] == [] and check["problems"] == []
    assert "**2 of 2 results identical**" in seed_scale.write_summary([unit])
    path = seed_scale.record_path(unit)
    record = json.loads(path.read_text())
    record["rows"][0]["result_sha256"] = "0" * 64  # a record the computation does not reproduce
    path.write_text(json.dumps(record))
    assert not seed_scale.reproduce_unit(unit, panels, work, work / "log")
    check = json.loads((tmp_path / "results" / "reproduced" / f"{unit.name}.json").read_text())
    assert check["identical_results"] == 1 and check["differing"] == [record["rows"][0]["operator"]]


@pytest.mark.slow
def test_each_reverify_run_is_kept_beside_the_earlier_ones(tmp_path, monkeypatch):
    """``--reverify`` of a session's store is added to ``reverify.json``; an earlier file of one
    check (the first format) is kept as the first entry."""
    unit, work = _tiny_unit(tmp_path, monkeypatch, 1)
    assert seed_scale.run_unit(unit, seed_scale.Panels(work), work, work / "log", set())
    earlier = {"exit_code": 0, "wall_s": 1.0, "cpu_s": 1.0, "summary": {"claims": 6, "verified": 6},
               "recorded_certificates": 1, "in_store": 1, "checked": "2026-01-01T00:00:00Z"}
    (tmp_path / "results" / "reverify.json").write_text(json.dumps(earlier))
    assert seed_scale.reverify(work, work / "log") == 0
    checks = seed_scale.reverify_checks()
    assert checks[0] == earlier and len(checks) == 2
    assert checks[1]["exit_code"] == 0 and checks[1]["in_store"] == checks[1]["recorded_certificates"] == 1
    assert checks[1]["summary"]["verified"] == checks[1]["summary"]["claims"] == 6
    text = seed_scale.write_summary([unit])
    assert text.count("`--reverify` (") == 2


@pytest.mark.slow
def test_reverify_catches_a_store_file_swapped_for_another_operators(tmp_path, monkeypatch):
    """A valid certificate of another operator under a recorded name passes softrank-verify; the
    store's addresses (SHA-256 = name) and the records' operators catch it."""
    unit, work = _tiny_unit(tmp_path, monkeypatch, 2)
    assert seed_scale.run_unit(unit, seed_scale.Panels(work), work, work / "log", set())
    rows = json.loads(seed_scale.record_path(unit).read_text())["rows"]
    digest = {r["operator"]: r["sha256"] for r in rows}
    store = work / "store"
    assert seed_scale.reverify(work, work / "log") == 0
    first, second = (store / f"{digest[f'minilm/apache2/w16/L0H{h}']}.json" for h in (0, 1))
    first.write_bytes(second.read_bytes())
    assert seed_scale.reverify(work, work / "log") == 1
    check = seed_scale.reverify_checks()[-1]
    assert check["exit_code"] == 0  # softrank-verify alone passes it: both files are valid certificates
    assert check["problems"] == [f"{first.name}: its SHA-256 is not its name",
                                 f"{first.name}: about minilm/apache2/w16/L0H1, recorded for minilm/apache2/w16/L0H0"]
