"""Supports (untrusted geometry): queries and keys on a finite grid, the sphere S^{d-1} or the
ball B^d, scaled to a radius product kappa, and the theorem's growth exponent of each.

docs/design.md section 1, "Supports": as ``kappa/eps^2`` grows, ranks should grow like
``(kappa/eps^2)^e`` with ``e = r/2`` (grid in r dimensions), ``(d-1)/2`` (sphere S^{d-1}),
``d/2`` (ball B^d), until they reach ``p``.  The sweeps that bracket these operators and fit
the exponents are a study: :mod:`softrank_cert.studies.supports`.

Operators: ``Q = kappa * P``, ``K = P`` (``qk``, ``beta = 1``) for a point set ``P`` with
``max_i ||P_i||_2 = 1`` (up to rounding), so the native radius product is ``kappa``.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator

import numpy as np

from ..errors import InvalidInputError
from ..kernel import Operator

SUPPORTS = ("grid", "sphere", "ball")
_GOLDEN = math.pi * (3.0 - math.sqrt(5.0))
#: Largest point count of a support operator in a sweep: 512, or 1024 in one dimension (where
#: the ranks stay small); checked before any array is allocated.
MAX_POINTS, MAX_POINTS_1D = 512, 1024
#: Bounds on a sweep: at most this many points, x = 1 + kappa/eps^2 at most this large.
MAX_SWEEP_POINTS, MAX_X = 32, 1e6
#: A row whose largest probability exceeds this is reported as collapsed (nearly one-hot).
COLLAPSED_ROW = 0.9


def max_points(dim: int) -> int:
    """The largest ``--n`` a sweep accepts in ``dim`` dimensions."""
    return MAX_POINTS_1D if dim == 1 else MAX_POINTS


def check_sweep_size(dim: int, n: int) -> None:
    """Refuse (exit 2) a point count outside ``[2, max_points(dim)]`` before anything is built."""
    if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 64:
        raise InvalidInputError(f"--dim must be an integer in [1, 64], got {dim!r}")
    limit = max_points(dim)
    if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= limit:
        raise InvalidInputError(f"--n must be an integer in [2, {limit}] for d = {dim} "
                                f"({MAX_POINTS_1D} for d = 1, {MAX_POINTS} otherwise), got {n!r}")


def theory_exponent(support: str, dim: int) -> float:
    """The theorem's exponent: r/2 (grid), (d-1)/2 (sphere S^{d-1}), d/2 (ball B^d)."""
    return {"grid": dim / 2, "sphere": (dim - 1) / 2, "ball": dim / 2}[support]


def _fibonacci_sphere(n: int) -> np.ndarray:
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    rho = np.sqrt(np.maximum(0.0, 1 - z * z))
    t = _GOLDEN * np.arange(n)
    return np.stack([rho * np.cos(t), rho * np.sin(t), z], axis=1)


def support_points(support: str, dim: int, n: int, seed: int = 0) -> np.ndarray:
    """About ``n`` deterministic points of the support in R^dim, max 2-norm 1.

    grid: the ``k^dim`` grid ``{-1, ..., 1}^dim`` with ``k = floor(n^(1/dim))`` (so ``n`` is
    rounded down to ``k^dim``); sphere: ``{-1, +1}`` (dim 1, alternating), equally spaced on the
    circle (dim 2), Fibonacci points (dim 3), normalised Gaussians (dim > 3); ball: equally spaced
    on ``[-1, 1]`` (dim 1), a sunflower disc (dim 2), uniform random in B^dim (dim > 2).
    """
    if support not in SUPPORTS:
        raise InvalidInputError(f"support must be one of {', '.join(SUPPORTS)}, got {support!r}")
    if not isinstance(dim, int) or dim < 1 or dim > 64:
        raise InvalidInputError(f"--dim must be an integer in [1, 64], got {dim!r}")
    if not isinstance(n, int) or n < 2 or n > 4096:
        raise InvalidInputError(f"--n must be an integer in [2, 4096], got {n!r}")
    rng = np.random.default_rng(seed)
    if support == "grid":
        k = max(2, int(math.floor(n ** (1.0 / dim) + 1e-9)))
        axis = np.linspace(-1.0, 1.0, k)
        P = np.stack(np.meshgrid(*([axis] * dim), indexing="ij"), axis=-1).reshape(-1, dim)
    elif support == "sphere":
        if dim == 1:
            P = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)[:, None]
        elif dim == 2:
            t: np.ndarray = 2 * np.pi * np.arange(n) / n
            P = np.stack([np.cos(t), np.sin(t)], axis=1)
        elif dim == 3:
            P = _fibonacci_sphere(n)
        else:
            P = rng.standard_normal((n, dim))
    else:
        if dim == 1:
            P = np.linspace(-1.0, 1.0, n)[:, None]
        elif dim == 2:
            i = np.arange(n) + 0.5
            rad, t = np.sqrt(i / n), _GOLDEN * np.arange(n)
            P = np.stack([rad * np.cos(t), rad * np.sin(t)], axis=1)
        else:
            G = rng.standard_normal((n, dim))
            G /= np.linalg.norm(G, axis=1, keepdims=True)
            P = G * rng.random((n, 1)) ** (1.0 / dim)
    norms = np.linalg.norm(P, axis=1)
    if support == "sphere":
        P = P / norms[:, None]
    else:
        P = P / norms.max()
    return np.ascontiguousarray(P, dtype=np.float64)


def support_operator(support: str, dim: int, n: int, kappa: float, seed: int = 0) -> Operator:
    """``qk`` operator with ``Q = kappa P``, ``K = P``, ``beta = 1`` (radius product kappa)."""
    if not (isinstance(kappa, (int, float)) and math.isfinite(kappa) and kappa > 0):
        raise InvalidInputError(f"kappa must be a positive finite number, got {kappa!r}")
    P = support_points(support, dim, n, seed)
    return Operator("qk", {"Q": float(kappa) * P, "K": P.copy()}, beta="1")


def row_spread(op: Operator) -> dict[str, float]:
    """How far the softmax rows are from one-hot (float64 estimates, not certified).

    ``max_row_entry``: ``max_ij A_ij`` (1 = some row is one-hot); ``min_effective_support``:
    ``min_i 1 / sum_j A_ij^2`` (the participation ratio: about how many keys the least spread
    row really uses; 1 = one-hot, N = uniform); ``collapsed_rows``: the share of rows whose
    largest entry exceeds :data:`COLLAPSED_ROW`.
    """
    from ..util.dense import attention_matrix

    A = attention_matrix(op)
    top = A.max(axis=1)
    return {"max_row_entry": float(top.max()), "min_effective_support": float((1.0 / (A * A).sum(axis=1)).min()),
            "collapsed_rows": float((top > COLLAPSED_ROW).mean())}


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send file-descriptor-level stdout to stderr (solver banners must not spoil --json output)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        os.dup2(sys.stderr.fileno(), fd)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)
