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

from .bracket import Ends, bracket_operator
from .candidates import CandidatePool, LowerCandidate, UpperCandidate
from ..util.dense import Dense, attention_matrix, norm, threshold, witness_error

__all__ = [
    "CandidatePool", "Dense", "Ends", "LowerCandidate", "UpperCandidate", "attention_matrix", "bracket_operator",
    "norm", "threshold", "witness_error",
]
