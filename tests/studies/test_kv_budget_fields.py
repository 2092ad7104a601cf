"""The kv-budgets report's fields of an operator name: the model is the segments before the
document, also when the width is zero-padded (``w016``)."""

from __future__ import annotations

from softrank_cert.studies.kv_budgets.study import head_fields


def test_model_and_width_of_plain_and_zero_padded_names() -> None:
    assert head_fields("smollm2/apache2/w128/L3H7") == ("smollm2", "apache2", 128, 3, 7)
    assert head_fields("smollm2/apache2/w016/L3H7") == ("smollm2", "apache2", 16, 3, 7)
    assert head_fields("org/model/doc/w064/L0H1")[0] == "org/model"
