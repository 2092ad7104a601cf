"""UNTRUSTED float64 proposers of bracket ends for ``r_eps(A)``.

A solver bug can cost tightness, never soundness: every end is checked by the kernel
(:mod:`softrank_cert.kernel`) before it is used (:mod:`.settle`).  What runs, in order, for one
operator (:func:`.bracket.bracket_operator`, bounded by the work budget of :mod:`.work`):

1. set-up (:mod:`softrank_cert.util.dense`): float64 ``A``, its SVD; the trivial ends (``k = 1``,
   ``r = p``, ``r = 0``);
2. truncated SVD (:mod:`.upper`, :func:`.upper.smooth.tsvd_start`): the least rank whose truncated
   SVD already meets each tolerance (free: every rank's error comes from the SVD);
3. pivot stage (:mod:`.lower.pivot`): complete-pivoting submatrices, a gallop over k;
4. in alternating rounds (fixed shares of the work, :mod:`.work`), the smoothed witness search
   (:mod:`.upper`) and the lower-pair search (:mod:`.lower`);
5. after every stage, each tolerance settles the best candidates of the
   :class:`~.candidates.CandidatePool` with the kernel (:mod:`.settle`, :class:`~.bracket.Ends`).
"""


from importlib import import_module
from typing import Any

#: Exported name -> the module that defines it (loaded on first use, so that the searches'
#: modules import without the kernel: the device benchmark runs them where python-flint is absent).
_EXPORTS = {"Ends": ".bracket", "bracket_operator": ".bracket", "CandidatePool": ".candidates",
            "LowerCandidate": ".candidates", "UpperCandidate": ".candidates", "Dense": "..util.dense",
            "attention_matrix": "..util.dense", "norm": "..util.dense", "threshold": "..util.dense",
            "witness_error": "..util.dense"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)
