"""The numpy L-BFGS loop of the smoothed witness search (solvers/lbfgs.py)."""

from __future__ import annotations

import numpy as np
import pytest

from softrank_cert.solvers.lbfgs import MAX_LINE_SEARCH, minimise


class Counted:
    """An objective that counts its calls."""

    def __init__(self, fun) -> None:
        self.fun, self.calls = fun, 0

    def __call__(self, x: np.ndarray):
        self.calls += 1
        return self.fun(x)


def quadratic(n: int = 50, condition: float = 1e4, seed: int = 0):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    H = q @ np.diag(np.geomspace(1.0, condition, n)) @ q.T
    b = rng.standard_normal(n)
    return (lambda x: (0.5 * x @ H @ x - b @ x, H @ x - b)), np.linalg.solve(H, b)


def rosenbrock(x: np.ndarray):
    a, b = x[:-1], x[1:]
    f = float(np.sum(100.0 * (b - a * a) ** 2 + (1 - a) ** 2))
    g = np.zeros_like(x)
    g[:-1] = -400.0 * a * (b - a * a) - 2.0 * (1 - a)
    g[1:] += 200.0 * (b - a * a)
    return f, g


def test_reaches_the_minimum_of_an_ill_conditioned_quadratic() -> None:
    fun, solution = quadratic()
    x = minimise(fun, np.zeros(50), iterations=2000, evaluations=5000)
    # f is known to ~1e-16 relative, so x to about sqrt(1e-16 * condition) relative
    assert np.linalg.norm(x - solution) <= 1e-5 * np.linalg.norm(solution)


def test_reaches_the_rosenbrock_minimum() -> None:
    x = minimise(rosenbrock, np.array([-1.2, 1.0, -1.2, 1.0]), iterations=500, evaluations=2000)
    assert np.allclose(x, 1.0, atol=1e-6)


@pytest.mark.parametrize("iterations, evaluations", [(5, 1000), (1000, 17)])
def test_stops_at_its_iteration_and_evaluation_limits(iterations: int, evaluations: int) -> None:
    fun = Counted(rosenbrock)
    minimise(fun, np.array([-1.2, 1.0]), iterations=iterations, evaluations=evaluations)
    assert fun.calls <= min(evaluations, 1 + iterations * MAX_LINE_SEARCH)
    if evaluations == 17:
        assert fun.calls == 17


def test_never_returns_a_point_worse_than_the_start() -> None:
    fun = Counted(rosenbrock)
    x0 = np.array([-1.2, 1.0, 0.3])
    for iterations in (1, 2, 3, 10):
        assert rosenbrock(minimise(fun, x0, iterations=iterations, evaluations=100))[0] <= rosenbrock(x0)[0]


def test_a_zero_gradient_ends_at_once() -> None:
    fun = Counted(lambda x: (float(x @ x), 2.0 * x))
    x = minimise(fun, np.zeros(3), iterations=100, evaluations=100)
    assert fun.calls == 1 and not x.any()


def test_non_finite_values_are_stepped_back_from() -> None:
    """A value that is inf beyond a wall counts as a failed step (the step is halved)."""
    def walled(x: np.ndarray):
        if x[0] > 2.0:
            return float("inf"), np.zeros_like(x)
        return float((x[0] - 1.5) ** 2 + x[1] ** 2), np.array([2 * (x[0] - 1.5), 2 * x[1]])

    x = minimise(walled, np.array([-30.0, 4.0]), iterations=200, evaluations=2000)
    assert np.allclose(x, [1.5, 0.0], atol=1e-6)


def test_an_exception_of_the_objective_propagates() -> None:
    class Stop(Exception):
        pass

    def fun(x: np.ndarray):
        if fun.calls == 3:
            raise Stop
        fun.calls += 1
        return rosenbrock(x)

    fun.calls = 0
    with pytest.raises(Stop):
        minimise(fun, np.array([-1.2, 1.0]), iterations=100, evaluations=100)
