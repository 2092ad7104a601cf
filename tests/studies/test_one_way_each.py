"""One way each (issue #49 item 4): one parser of panel names (the hardened rules), one
upper/lower ratio, used by every study that shows one."""

from __future__ import annotations

from pathlib import Path

import pytest

from softrank_cert.studies import panel_names
from softrank_cert.studies.budgets.operators import name_fields as budgets_name_fields
from softrank_cert.studies.report import summary

ROOT = Path(__file__).resolve().parents[2]


def test_one_parser_of_names_with_the_hardened_rules():
    assert budgets_name_fields is panel_names.name_fields
    assert summary.name_position is panel_names.name_position and summary.head_of is panel_names.head_of
    huge = "9" * 5000  # beyond int()'s digit limit: a name is data, it never raises
    assert panel_names.name_fields(f"m/d/w{huge}/L1H2", "stem") == ("stem", panel_names.NO_WIDTH, 1, 2)
    assert panel_names.name_fields("m/d/w\u0663/L\u0661H2", "stem") == ("stem", panel_names.NO_WIDTH, None, None)
    assert panel_names.name_fields("m/d/w0/L1H2", "stem") == ("stem", panel_names.NO_WIDTH, 1, 2)
    assert panel_names.name_fields("m/d/w64/L1H2", "stem") == ("d", 64, 1, 2)


def test_one_ratio_convention_upper_over_lower():
    ratio = summary.bracket_ratio
    assert (ratio(2, 5), ratio(0, 0), ratio(0, 3), ratio(4, 4)) == (2.5, 1.0, None, 1.0)


def test_the_audit_figure_draws_no_unbounded_ratio():
    from softrank_cert.studies.audit.plot import ratio_figure
    from softrank_cert.studies.audit.rows import RowResult

    rows = [RowResult(1, "a", "0.25", "confirmed", 0, 3, 0, 3), RowResult(2, "b", "0.25", "confirmed", 2, 4, 2, 4)]
    fig = ratio_figure(rows)
    offsets = fig.axes[0].collections[0].get_offsets()
    assert [tuple(map(float, point)) for point in offsets] == [(2.0, 2.0)]  # (0, 3) has no bounded ratio


def test_the_seed_scale_summary_is_the_reports_table_with_its_ratio(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    seed_scale = pytest.importorskip("seed_scale")
    rows = [{"operator": f"minilm/d/w16/L0H{h}", "eps": eps, "lower": lower, "upper": upper}
            for h, (lower, upper) in enumerate([(0, 2), (2, 3), (2, 2)]) for eps in seed_scale.EPS]
    records = seed_scale.report_records([{"rows": rows}])
    table = seed_scale.report_table([{"rows": rows}])
    assert table == summary.group_rows(records, list(seed_scale.EPS), group=seed_scale.model_width)
    assert table[0]["group"] == "minilm/w16" and table[0]["eps"]["0.25"]["median_ratio"] == 1.25  # (0, 2): unbounded
    flat = seed_scale.table([{"rows": rows}])
    assert [(r["model"], r["width"], r["eps"], r["median_ratio"]) for r in flat] == [
        ("minilm", 16, eps, 1.25) for eps in seed_scale.EPS]
