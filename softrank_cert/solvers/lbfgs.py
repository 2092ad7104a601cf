"""Limited-memory BFGS for the smoothed objectives of both families (UNTRUSTED; any array back end).

:func:`minimise` runs L-BFGS (Nocedal & Wright, Algorithm 7.4 and 7.5: the two-loop recursion
over the last ``memory`` pairs ``s = x' - x``, ``y = g' - g``, initial Hessian scale
``s.y / y.y``) with a bracketing line search for the weak Wolfe conditions::

    f(x + t d) <= f(x) + C1 t g.d,        g(x + t d).d >= C2 g.d,

trial step 1 (``1 / ||g||`` on the first iteration and after a reset), halved after a
sufficient-decrease failure, doubled after a curvature failure until bracketed, then bisected.
The weak Wolfe conditions give ``s.y > 0``, so the inverse-Hessian estimate stays positive
definite; a pair with ``s.y`` not clearly positive is dropped, and a direction that is not
a descent direction resets the memory to steepest descent.

Why not scipy's L-BFGS-B: on the witness problems (``(m + N) r`` variables, up to ~2 x 10^5)
its bookkeeping outside the objective cost more than the objective itself -- 4.8 ms per
evaluation against 3.3 ms inside it at 512 x 512, rank 150; this loop spends 1.6 ms outside
(``benchmarks/results/solvers_lbfgs.md``).  Nothing here is trusted: the float64 error
of what it returns is measured by the caller, and the kernel verifies every witness.  The
vectors live on the back end of ``ops`` (:mod:`.backend`: numpy, or torch on any device).  Its users: the witness search's stages
(:mod:`.upper.smooth`) and the large-k key sides (:mod:`.lower.smooth_key`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .backend import NUMPY, NumpyBackend

#: Sufficient-decrease and curvature constants of the weak Wolfe conditions (scipy's defaults).
C1, C2 = 1e-3, 0.9
#: Objective evaluations one line search may take before the run stops (scipy's ``maxls``).
MAX_LINE_SEARCH = 20

Objective = Callable[[Any], "tuple[float, Any]"]


#: One curvature pair: ``s``, ``y``, ``1 / s.y``, ``s.y`` and ``y.y`` (the products the
#: recursion reuses, computed once).
Pair = tuple[Any, Any, float, float, float]


def minimise(fun: Objective, x0: Any, *, iterations: int, evaluations: int, memory: int = 5,
             ops: NumpyBackend = NUMPY) -> Any:
    """Approximately minimise ``fun`` (value and gradient) from ``x0``; the last accepted point.

    Stops after ``iterations`` accepted steps, ``evaluations`` calls of ``fun``, a line search
    of :data:`MAX_LINE_SEARCH` evaluations that found no step, or a zero gradient.  Exceptions
    raised by ``fun`` propagate (the caller's way of stopping early).  ``fun`` must not keep
    its argument: the trial points share two buffers, and the pairs dropped from the memory
    are reused; every product is the one of the plain formulas, so the iterates are too.
    ``x0`` and the vectors ``fun`` takes and returns are arrays of ``ops``'s back end."""
    x = ops.copy64(x0)
    f, g = fun(x)
    calls = 1
    pairs: list[Pair] = []
    x_new, scratch = ops.empty_like(x), ops.empty_like(x)
    spare: tuple[Any, Any] | None = None
    for _ in range(iterations):
        d = _direction(g, pairs, scratch, ops)
        slope = ops.dot(g, d)
        if not slope < 0.0:  # not a descent direction: forget the curvature pairs
            pairs.clear()
            d = _direction(g, pairs, scratch, ops)
            slope = ops.dot(g, d)
            if not slope < 0.0:
                break
        low, high, t = 0.0, np.inf, 1.0
        for _ in range(MAX_LINE_SEARCH):
            if calls >= evaluations:
                return x
            ops.scale_into(d, t, x_new)
            ops.add_into(x, x_new, x_new)  # x + t d
            f_new, g_new = fun(x_new)
            calls += 1
            if not np.isfinite(f_new) or f_new > f + C1 * t * slope:
                high = t
            elif ops.dot(g_new, d) < C2 * slope:
                low = t
            else:
                break
            t = 2.0 * t if high == np.inf else 0.5 * (low + high)
        else:
            return x
        s, y = spare if spare is not None else (ops.empty_like(x), ops.empty_like(x))
        spare = None
        ops.subtract_into(x_new, x, s)
        ops.subtract_into(g_new, g, y)
        sy, yy = ops.dot(s, y), ops.dot(y, y)
        x, x_new, f, g = x_new, x, f_new, g_new
        if sy > 1e-12 * yy:
            pairs.append((s, y, 1.0 / sy, sy, yy))
            if len(pairs) > memory:
                spare = pairs.pop(0)[:2]
        else:
            spare = (s, y)
    return x


def _direction(g: Any, pairs: list[Pair], scratch: Any, ops: NumpyBackend) -> Any:
    """``-H g`` for the L-BFGS inverse-Hessian estimate ``H`` of ``pairs`` (two-loop
    recursion); ``-g / ||g||`` without pairs.  ``scratch`` (like ``g``) holds temporaries."""
    if not pairs:
        norm = ops.norm(g)
        return -g / norm if norm > 0 else -g
    q = -g
    alphas = []
    for s, y, rho, _sy, _yy in reversed(pairs):
        a = rho * ops.dot(s, q)
        alphas.append(a)
        ops.scale_into(y, a, scratch)
        q -= scratch
    _s, _y, _rho, sy, yy = pairs[-1]
    q *= sy / yy
    for (s, y, rho, _sy, _yy), a in zip(pairs, reversed(alphas)):
        ops.scale_into(s, a - rho * ops.dot(y, q), scratch)
        q += scratch
    return q
