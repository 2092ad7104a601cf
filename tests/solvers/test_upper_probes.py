"""When the witness search gives up a probe (softrank_cert.solvers.upper.search): the abort
rules on wide operators, with the continuation scripted so that each stage's error is known."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import pytest

from softrank_cert.kernel import Operator
from softrank_cert.solvers.upper import search as upper_search
from softrank_cert.solvers.upper.search import UpperSearch
from softrank_cert.util.dense import Dense

EPS = 0.25


def scripted(monkeypatch: pytest.MonkeyPatch, wide: bool, ratios: list[float]) -> tuple[UpperSearch, list[int]]:
    """An UpperSearch on a 24 x 24 operator (counted as wide or not) whose continuation stage s
    ends at error ``EPS * ratios[s]``; the list records the rank of every stage run."""
    monkeypatch.setattr(upper_search, "WIDE_FROM", 24 * 24 if wide else 24 * 24 + 1)
    rng = np.random.default_rng(0)
    d = Dense.of(Operator("qk", {"Q": 2.0 * rng.standard_normal((24, 8)), "K": rng.standard_normal((24, 8))}))
    ranks: list[int] = []

    def run_stages(d: Dense, st: Any, *, target: float, **_: Any) -> bool:
        ranks.append(st.rank)
        st.best_error = target * ratios[min(st.stage, len(ratios) - 1)]
        st.stage += 1
        return bool(st.best_error <= target * (1 - 1e-9))

    monkeypatch.setattr(upper_search, "run_stages", run_stages)
    search = UpperSearch(d, [EPS], lambda w: None, lambda eps: 12, lambda eps: 1, work=1e9)
    return search, ranks


def drain(gen: Generator[None, None, Any]) -> Any:
    """Run a search generator to its end (no stop point: it never yields)."""
    try:
        while True:
            next(gen)
    except StopIteration as done:
        return done.value


def test_a_wide_probe_with_one_stage_left_is_abandoned_above_the_last_stage_factor(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two-stage probes: after the first stage at 1.15 eps (below ABORT's 1.2, above
    LAST_STAGE_ABORT) the second stage is not run; at 1.05 eps it is."""
    assert upper_search.LAST_STAGE_ABORT < 1.15 < upper_search.ABORT[0]
    search, stages = scripted(monkeypatch, True, [1.15, 0.99])
    assert drain(search._probe(8, EPS, iterations=60, max_stage=search.stages)) is False
    assert stages == [8]
    search, stages = scripted(monkeypatch, True, [1.05, 0.99])
    assert drain(search._probe(8, EPS, iterations=60, max_stage=search.stages)) is True
    assert stages == [8, 8]


def test_narrow_probes_keep_the_abort_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five-stage probes (narrow operators) go on after 1.15 eps at stage 1, as before."""
    search, stages = scripted(monkeypatch, False, [1.15, 1.05, 1.01, 1.003, 0.99])
    assert drain(search._probe(8, EPS, iterations=60, max_stage=search.stages)) is True
    assert stages == [8] * 5


def test_a_fresh_rank_squeezed_on_a_wide_operator_is_abandoned_by_the_abort_rule(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The squeeze's single step below the best rank, at a rank no probe has started, stops
    after the first stage at 1.25 eps (it ran all its stages without the abort rule); on a
    narrow operator it still runs them all."""
    search, stages = scripted(monkeypatch, True, [1.25, 1.1, 1.05, 1.03, 1.02])
    drain(search._squeeze(0, EPS, search.stages + upper_search.SQUEEZE_EXTRA_STAGES, lambda: False))
    assert stages == [11]
    search, stages = scripted(monkeypatch, False, [1.25, 1.1, 1.05, 1.03, 1.02])
    drain(search._squeeze(0, EPS, search.stages + upper_search.SQUEEZE_EXTRA_STAGES, lambda: False))
    assert stages == [11] * (search.stages + upper_search.SQUEEZE_EXTRA_STAGES)
