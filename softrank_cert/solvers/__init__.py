"""UNTRUSTED float64 proposers of bracket ends for ``r_eps(A)``.

A solver bug can cost tightness, never soundness: every end is checked by the kernel
(:mod:`softrank_cert.kernel`) before it is used.  Layout:

* :mod:`.dense` -- float64 ``A`` of an operator, max-row-l1 helpers;
* upper constructions ``(A, rank) -> (U, W)``, registry :data:`UPPER`: ``upper_tsvd``,
  ``upper_l1_polish``, ``upper_alt_l1``, ``upper_skeleton``, ``upper_cluster``,
  ``upper_features`` (exact l1 regressions in :mod:`.l1`);
* lower certificates ``(A, k) -> (X, Y)``, registry :data:`LOWER`: ``lower_trivial``,
  ``lower_pivot``, ``lower_pooled``, ``lower_seeded``, ``lower_lp_alternation``;
* :mod:`.profiles` (rank -> best witness, k -> best certificate, searches: the float64
  :class:`~.profiles.UpperCandidate` / :class:`~.profiles.LowerCandidate`) and :mod:`.bracket`
  (:func:`bracket_operator`: kernel-verified ends per tolerance, :class:`~.bracket.VerifiedBracket`
  of a :class:`~.bracket.VerifiedLower` and a :class:`~.bracket.VerifiedUpper`; its
  :meth:`~.bracket.VerifiedBracket.to_certificate` is the certificate format's
  :class:`~softrank_cert.certio.certificate.Bracket`).
"""

from .bracket import VerifiedBracket, VerifiedLower, VerifiedUpper, bracket_operator
from .dense import Dense, attention_matrix, norm, threshold, witness_error
from .lower import LOWER
from .profiles import LowerCandidate, Profiles, UpperCandidate
from .upper import UPPER

__all__ = [
    "Dense", "LOWER", "LowerCandidate", "Profiles", "UPPER", "UpperCandidate", "VerifiedBracket", "VerifiedLower",
    "VerifiedUpper",
    "attention_matrix", "bracket_operator", "norm", "threshold", "witness_error",
]
