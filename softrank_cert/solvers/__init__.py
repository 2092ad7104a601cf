"""UNTRUSTED float64 proposers of bracket ends for ``r_eps(A)``.

A solver bug can cost tightness, never soundness: every end is checked by the kernel
(:mod:`softrank_cert.kernel`) before it is used (:mod:`.settle`).  What runs, in order, for one
operator (:func:`.bracket.bracket_operator`, bounded by the work budget of :mod:`.work`):

1. set-up (:mod:`.dense`): float64 ``A``, its SVD; the trivial ends (``k = 1``, ``r = p``, ``r = 0``);
2. truncated SVD (:func:`.upper_smooth.tsvd_start`): the least rank whose truncated SVD already
   meets each tolerance (free: every rank's error comes from the SVD);
3. pivot stage (:mod:`.lower_pivot`): complete-pivoting submatrices, a gallop over k;
4. in alternating rounds (fixed shares of the work, :mod:`.work`), the smoothed witness search (:mod:`.upper_search` driving
   :mod:`.upper_smooth`) and the lower-pair search (:mod:`.lower_search`: signed key groups
   from the starts of :mod:`.lower_starts`, the exact LP for ``X`` in :mod:`.lower_lp`, key
   moves in :mod:`.lower_moves`; general key sides from query selections in
   :mod:`.lower_general`);
5. after every stage, each tolerance settles the best candidates of the
   :class:`~.candidates.CandidatePool` with the kernel (:class:`~.bracket.Ends`).

:mod:`.lower_pooled` (query pooling) is run by the budget study's sharpening through the pool.
"""

from .bracket import Ends, VerifiedBracket, VerifiedLower, VerifiedUpper, bracket_operator
from .candidates import CandidatePool, LowerCandidate, UpperCandidate
from ..util.dense import Dense, attention_matrix, norm, threshold, witness_error

__all__ = [
    "CandidatePool", "Dense", "Ends", "LowerCandidate", "UpperCandidate", "VerifiedBracket", "VerifiedLower",
    "VerifiedUpper", "attention_matrix", "bracket_operator", "norm", "threshold", "witness_error",
]
