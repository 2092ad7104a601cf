"""The key-move charges: the fitted ones up to 512 x 512, scaled past it, and what key_moves charges."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from softrank_cert.solvers.lower.moves import (
    CHECK_SECONDS,
    LISTED_SECONDS,
    TOP_ROWS,
    MoveCharges,
    key_moves,
)
from softrank_cert.solvers.work import (
    CALL_UNITS,
    KEY_MOVE_EXPONENT,
    Budget,
    entries_units,
    key_move_scale,
    seconds_units,
)


@pytest.mark.parametrize(("m", "n", "scale"), [(128, 128, 1.0), (512, 512, 1.0), (256, 1024, 1.0),
                                               (1024, 1024, 4.0 ** KEY_MOVE_EXPONENT),
                                               (512, 1024, 2.0 ** KEY_MOVE_EXPONENT),
                                               (2048, 2048, 16.0 ** KEY_MOVE_EXPONENT)])
def test_the_scale_is_one_up_to_512_squared_and_a_power_of_the_size_past_it(m: int, n: int, scale: float) -> None:
    assert key_move_scale(m, n) == pytest.approx(scale, rel=1e-12)
    assert 0 < KEY_MOVE_EXPONENT < 1


@pytest.mark.parametrize(("m", "n"), [(128, 128), (512, 512)])
def test_charges_up_to_512_are_the_fitted_formula_unchanged(m: int, n: int) -> None:
    charges = MoveCharges.for_shape(m, n)
    k, keys, width = 40, n, 12
    listed = seconds_units(m, n, LISTED_SECONDS)
    screen = CALL_UNITS + entries_units(2.0 * k * k * (k + keys) + 4.0 * keys * 2 * width * TOP_ROWS * k) + listed * keys * 2 * width
    assert charges.screen_units(k, keys, 2, width) == screen
    assert charges.check_units(k) == seconds_units(m, n, CHECK_SECONDS) + entries_units(8.0 * k * k)


@pytest.mark.parametrize("k", [8, 60, 200])
def test_wide_charges_scale_all_but_the_call_overhead(k: int) -> None:
    m = n = 1024
    wide, plain = MoveCharges.for_shape(m, n), MoveCharges(seconds_units(m, n, CHECK_SECONDS), seconds_units(m, n, LISTED_SECONDS))
    scale = key_move_scale(m, n)
    assert (wide.screen_units(k, n, 2, 12) - CALL_UNITS) == pytest.approx(scale * (plain.screen_units(k, n, 2, 12) - CALL_UNITS))
    assert wide.check_units(k) == pytest.approx(scale * plain.check_units(k))
    assert wide.screen_units(k, n, 2, 12) > plain.screen_units(k, n, 2, 12)


@dataclass(frozen=True)
class _Counting(MoveCharges):
    """The charges of a shape, recording every charge key_moves asks them for."""

    log: list[float] = field(default_factory=list)

    def screen_units(self, k: int, n: int, signs: int, width: int) -> float:
        self.log.append(super().screen_units(k, n, signs, width))
        return self.log[-1]

    def check_units(self, k: int) -> float:
        self.log.append(super().check_units(k))
        return self.log[-1]


@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_key_moves_charge_exactly_the_formula(scale: float) -> None:
    rng = np.random.default_rng(3)
    k, n = 6, 60
    A = np.abs(rng.standard_normal((n, n)))
    A /= A.sum(axis=1, keepdims=True)
    C = np.abs(rng.standard_normal((k, n))) @ A
    lab, sign = rng.integers(0, k, n), rng.choice([-1.0, 1.0], n)
    charges = _Counting(2e-3 * scale, 1e-5 * scale, scale)
    budget = Budget(math.inf)
    _lab, _sign, moved = key_moves(C, lab, sign, budget.until(), charges=charges)
    assert moved and len(charges.log) > 2
    assert budget.used == pytest.approx(sum(charges.log), rel=1e-12)
