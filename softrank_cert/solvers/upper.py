"""Registry of upper constructions (UNTRUSTED).

Each construction maps ``(A, rank)`` to float64 factors ``(U, W)`` (m x r, N x r) proposing
``r_eps(A) <= rank`` for ``eps >= ||A - U W^T||``, or to None when it does not apply (e.g.
``features`` needs the ``Q``/``K`` of a ``qk`` operator).  ``A`` is a :class:`~.dense.Dense`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np


from .upper_alt_l1 import alt_l1
from .upper_cluster import cluster
from .upper_features import features
from .upper_l1_polish import l1_polish
from .upper_skeleton import skeleton
from .upper_smooth import smooth
from .upper_tsvd import tsvd

UpperConstruction = Callable[..., tuple[np.ndarray, np.ndarray] | None]

UPPER: dict[str, UpperConstruction] = {
    "tsvd": tsvd,
    "smooth": smooth,
    "l1_polish": l1_polish,
    "alt_l1": alt_l1,
    "skeleton": skeleton,
    "cluster": cluster,
    "features": features,
}


