"""UNTRUSTED float64 proposers of bracket ends for ``r_eps(A)``.

A solver bug can cost tightness, never soundness: every end is checked by the kernel
(:mod:`softrank_cert.kernel`) before it is used (:mod:`.settle`).  What runs, in order, for one
operator (:func:`.bracket.bracket_operator`, bounded by the work budget of :mod:`.work`):

1. set-up (:mod:`softrank_cert.util.dense`): float64 ``A``, its SVD; the trivial ends (``k = 1``,
   ``r = p``, ``r = 0``);
2. truncated SVD (:class:`.one_shot.OneShot`): the least rank whose truncated SVD already meets
   each tolerance (free: every rank's error comes from the SVD);
3. pivot stage (:meth:`.one_shot.OneShot.search_lower`, :mod:`.lower.pivot`): complete-pivoting
   submatrices, a gallop over k;
4. in alternating rounds (fixed shares of the work, :mod:`.work`), the smoothed witness search
   (:mod:`.upper`) and the lower-pair search (:mod:`.lower`: its families as units);
5. after every stage, each tolerance settles the best candidates of the
   :class:`~.candidates.CandidatePool` with the kernel (:mod:`.settle`, :class:`~.bracket.Ends`).

This module is the solvers' signature, as ``kernel/__init__.py`` is the kernel's: ``__all__``
is exactly what the layers above (plumbing, studies, the CLI, the API) may call, and no module
outside ``solvers/`` imports a submodule (``tests/plumbing/test_solvers_signature.py``).  The
names load on first use, so that ``import softrank_cert.solvers`` imports no solver (nor the
kernel: the device benchmark runs the searches where python-flint is absent).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bracket import Ends, bracket_operator, default_budget_seconds, search_budget, search_operator
    from .candidates import CandidatePool, LowerCandidate, UpperCandidate
    from .device import SearchDevice, check_device, check_device_memory, resolve_device
    from .one_shot import POOLED_MAX_K, OneShot, tsvd_errors
    from .settle import first_verified
    from .work import (Budget, Until, default_seconds, default_work, effective_work, one_blas_thread,
                       units_per_second)
    from ..util.dense import Dense, attention_matrix, norm, threshold, witness_error

#: Exported name -> the module that defines it (loaded on first use).
_EXPORTS = {
    # the driver: verified ends per tolerance, its search and budget
    "Ends": ".bracket", "bracket_operator": ".bracket", "default_budget_seconds": ".bracket",
    "search_budget": ".bracket", "search_operator": ".bracket",
    # candidates, the one-shot constructions that fill a pool, and settling them with the kernel
    "CandidatePool": ".candidates", "LowerCandidate": ".candidates", "UpperCandidate": ".candidates",
    "OneShot": ".one_shot", "POOLED_MAX_K": ".one_shot", "tsvd_errors": ".one_shot",
    "first_verified": ".settle",
    # work units and where the search runs
    "Budget": ".work", "Until": ".work", "default_seconds": ".work", "default_work": ".work",
    "effective_work": ".work", "one_blas_thread": ".work", "units_per_second": ".work",
    "SearchDevice": ".device", "check_device": ".device", "check_device_memory": ".device",
    "resolve_device": ".device",
    # the float64 arrays the solvers work on (softrank_cert.util.dense)
    "Dense": "..util.dense", "attention_matrix": "..util.dense", "norm": "..util.dense",
    "threshold": "..util.dense", "witness_error": "..util.dense",
}

#: The signature (the keys of :data:`_EXPORTS`).
__all__ = [
    "Budget", "CandidatePool", "Dense", "Ends", "LowerCandidate", "OneShot", "POOLED_MAX_K", "SearchDevice",
    "Until", "UpperCandidate", "attention_matrix", "bracket_operator", "check_device", "check_device_memory",
    "default_budget_seconds", "default_seconds", "default_work", "effective_work", "first_verified", "norm",
    "one_blas_thread", "resolve_device", "search_budget", "search_operator", "threshold", "tsvd_errors",
    "units_per_second", "witness_error",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)
