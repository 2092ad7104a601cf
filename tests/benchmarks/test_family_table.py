"""The family-table campaign (benchmarks/family_table.py): its seeded plan, its comparison with the
truncated SVD, and a whole unit run end to end on a tiny stand-in family (capture, brackets, SVD
ends, softrank-verify, records, summary, resume)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import family_table  # noqa: E402
import seed_scale  # noqa: E402


def test_plan_covers_the_issue_within_its_cost():
    units = family_table.plan()
    operators = [op for u in units for op in u.operators()]
    assert len(set(operators)) == len(operators) >= 300  # the comparison's panel
    assert {u.model for u in units} == {"minilm", "smollm2", "qwen2.5-0.5b", "qwen2.5-1.5b", "gemma3-270m",
                                        "dinov2-small"}
    assert {u.width for u in units if u.model == "qwen2.5-1.5b"} == {64, 128, 256, 512}
    assert [u.width for u in units[:10]] == [64] * 10  # the comparison's 300 text operators first
    assert [u.width for u in units[10:]] == [257] + [128] * 5 + [257] + [256] * 5 + [512] * 5
    first, second = (u for u in units if u.model == "minilm" and u.width == 64)
    assert (first.name, second.name) == ("minilm-py-specialnames-w64-n40", "minilm-py-specialnames-w64-h40-59")
    assert len(set(first.heads + second.heads)) == 60
    # the plan's size, which bounds its cost (operators x the driver's nominal work per width)
    per_width = {w: sum(len(u.operators()) for u in units if u.width == w) for w in (64, 128, 256, 257, 512)}
    assert per_width == {64: 300, 128: 80, 256: 20, 257: 12, 512: 10}
    assert all(family_table.source(family_table.FAMILIES[u.model]).is_file() for u in units)
    qwen = family_table.FAMILIES["qwen2.5-1.5b"]  # width 512 is captured apart, the others together
    assert family_table.capture_group(qwen, 512) == ((512, 2),)
    assert family_table.capture_group(qwen, 128) == ((64, 60), (128, 16), (256, 4))
    assert (family_table.capture_name(qwen, 512), family_table.capture_name(qwen, 64)) == ("qwen2.5-1.5b-w512",
                                                                                          "qwen2.5-1.5b")
    held_out = {u.document for u in seed_scale.plan()}
    assert family_table.DOCUMENT not in held_out


def test_the_sample_is_seeded_nested_and_per_family():
    families = list(family_table.FAMILIES.values())
    for family in families:
        order = family_table.head_order(family)
        assert order == family_table.head_order(family)
        assert sorted(order) == [(la, h) for la in range(family.layers) for h in range(family.heads)]
    units: dict[tuple[str, int], set] = {}
    for unit in family_table.plan():
        units.setdefault((unit.model, unit.width), set()).update(unit.heads)
    assert units[("smollm2", 256)] < units[("smollm2", 128)] < units[("smollm2", 64)]
    minilm, qwen = (family_table.head_order(family_table.FAMILIES[m]) for m in ("minilm", "qwen2.5-0.5b"))
    assert minilm[:10] != qwen[:10]


def _row(svd: int, upper: int, lower: int, below: str | None = "REJECTED", eps: str = "0.25") -> dict:
    row = {"operator": "x", "eps": eps, "svd": svd, "upper": upper, "lower": lower, "not_verified": []}
    return row | ({"below": below} if below else {})


def test_comparison_takes_medians_of_ratios_per_family():
    records = [{"model": "a", "rows": [_row(10, 5, 2), _row(6, 6, 3, None), _row(9, 3, 3, "INCONCLUSIVE")]},
               {"model": "b", "rows": [_row(4, 4, 4)]}]
    a, b = family_table.comparison(records)
    assert a["operators"] == 3 and a["median_svd_over_upper"] == 2.0 and a["median_svd_over_lower"] == 3.0
    assert a["median_upper_over_lower"] == 2.0 and a["svd_is_upper_percent"] == 33.3
    assert (a["below_rejected"], a["below_checked"]) == (1, 2)
    assert b["median_svd_over_lower"] == 1.0
    assert family_table.family_ratios([a, b], "median_svd_over_upper") == "1.00-2.00"
    records[0]["width"], records[1]["width"] = 64, 128
    wide = records[0] | {"width": 128, "rows": [_row(3, 3, 1)]}
    a64, a128, b128 = family_table.comparison(records + [wide], by_width=True)
    assert (a64["width"], a64["operators"], a128["median_svd_over_lower"], b128["model"]) == (64, 3, 3.0, "b")


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """One stand-in family: three MiniLM heads of layer 0, two of them sampled at width 16."""
    family = family_table.Family("minilm", ("--model", "minilm"), 1, 3, ((16, 2),), causal=False)
    monkeypatch.setattr(family_table, "FAMILIES", {"minilm": family})
    work = tmp_path / "work"
    work.mkdir()
    return family_table.plan(), work, tmp_path / "results"


@pytest.mark.slow
def test_a_unit_end_to_end_and_resumed(tiny, monkeypatch):
    units, work, results = tiny
    assert family_table.run(units, work, 1.0, results) == 0
    (unit,) = units
    record = json.loads(seed_scale.record_path(unit, results).read_text())
    assert record["verify"]["verified"] == record["verify"]["claims"] == 2 * 2 * 3
    svd = json.loads(family_table.svd_path(unit, results).read_text())
    assert svd["verify"]["exit_code"] == 0 and svd["verify"]["verified"] == svd["verify"]["claims"] == 12
    assert len(svd["rows"]) == 6 and {r["operator"] for r in svd["rows"]} == set(unit.operators())
    for row in svd["rows"]:
        assert 1 <= row["lower"] <= min(row["upper"], row["svd"]) and row["svd"] <= 16
        assert row["svd_method"] == "tsvd" and row["float64_rank"] <= row["svd"]
        assert row.get("below", "REJECTED") in {"REJECTED", "INCONCLUSIVE"}
    assert list(family_table.captures(results)) == ["minilm"]
    text = (results / "README.md").read_text()
    assert "2 of 2 planned operators (1 of 1 units)" in text and "| minilm | 16 | 0.25 | 2 |" in text
    assert "| minilm | 0.25 | 2 |" in text and (results / "family_table.png").is_file()
    assert len((results / "rows.jsonl").read_text().splitlines()) == 6
    calls = []
    monkeypatch.setattr(family_table, "_run", lambda *a, **k: calls.append(a) or (1, "", 0.0, 0.0))
    monkeypatch.setattr(seed_scale, "_run", lambda *a, **k: calls.append(a) or (1, "", 0.0, 0.0))
    assert family_table.run(units, work, 1.0, results) == 0 and calls == []  # recorded: nothing again


@pytest.mark.slow
def test_an_svd_certificate_that_does_not_check_is_not_recorded(tiny):
    units, work, results = tiny
    assert family_table.run(units, work, 1.0, results) == 0
    (unit,) = units
    family_table.svd_path(unit, results).unlink()
    cert = next((work / "svd" / unit.name).glob("*.json"))
    data = json.loads(cert.read_text())
    data["brackets"][0]["upper"]["r"] -= 1  # a rank the witness is not
    cert.write_text(json.dumps(data))
    panel = family_table.Panels(work, work / "log", results).unit_panel(unit)
    assert not family_table.svd_unit(unit, panel, work, work / "log", results)
    assert not family_table.svd_path(unit, results).exists()


def test_a_family_that_cannot_be_captured_now_is_tried_again_last_then_given_up(tmp_path, monkeypatch, capsys):
    """Too little memory for a capture: no record, the other units go on, the unit is tried once more at the end."""
    big = family_table.Family("minilm", ("--model", "minilm"), 1, 2, ((16, 1), (32, 1)), causal=False,
                              capture_gb=1e9)
    monkeypatch.setattr(family_table, "FAMILIES", {"minilm": big})
    units, work = family_table.plan(), tmp_path / "work"
    work.mkdir()
    assert family_table.run(units, work, 1.0, tmp_path / "results") == 2
    out = capsys.readouterr().out
    assert out.count("tried again last") == 2 and out.count("given up") == 2
    assert out.index("w32-n1: capturing") < out.rindex("w16-n1: capturing")  # the other unit went first
    assert not (tmp_path / "results" / "units").exists() and not list((work / "panels").rglob("*.npz"))
