"""Registry of lower certificates (UNTRUSTED).

Each method maps ``(A, k)`` to float64 ``(X, Y)`` (k x m, N x k) proposing ``r_eps(A) >= k``
for every ``eps < 1/(||X|| ||Y|| ||(XAY)^{-1}||)``, or to None when it does not apply.
``A`` is a :class:`~.dense.Dense`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .lower_lp_alternation import lp_alternation
from .lower_pivot import pivot
from .lower_pooled import pooled
from .lower_seeded import seeded
from .lower_trivial import trivial

LowerMethod = Callable[..., tuple[np.ndarray, np.ndarray] | None]

LOWER: dict[str, LowerMethod] = {
    "trivial": trivial,
    "pivot": pivot,
    "pooled": pooled,
    "seeded": seeded,
    "lp_alternation": lp_alternation,
}
