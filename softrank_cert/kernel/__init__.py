"""The trusted kernel of softrank-cert: everything a verdict depends on, and nothing else.

Interface (sealed: only these names are public):

* :class:`Operator` -- the exact attention operator (``operator.py``);
* :func:`parse_tolerance` -- exact rational of a decimal tolerance string (``exact.py``);
* :func:`verify_upper`, :func:`verify_lower`, :func:`verify_trivial_upper`,
  :func:`verify_trivial_lower` -- the checks (``checks.py``);
* :class:`Verdict`, :class:`Status` -- their results, constructible only here (``verdict.py``).

Two arithmetic paths decide the checks: proved float64 bounds (``float64_bounds.py``,
``fast.py``; ``proofs/float64-bounds.md``) first, then Arb balls (``enclosure.py``) for any
claim the float64 bounds cannot decide; ``engine="arb"`` / ``"float64"`` select one of them.

Imports: python-flint, numpy (array plumbing) and the standard library only; never a
solver, never scipy.  Each step cites its written proof in ``proofs/``.
"""

from .checks import verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper
from .exact import float_to_decimal_string, parse_tolerance
from .operator import MAX_DIM, MAX_ENTRIES, Operator, check_shape
from .precision import DEFAULT_MAX_PREC, LIMIT_MAX_PREC
from .verdict import Status, Verdict

__all__ = [
    "DEFAULT_MAX_PREC", "LIMIT_MAX_PREC", "MAX_DIM", "MAX_ENTRIES", "Operator", "Status", "Verdict",
    "check_shape", "float_to_decimal_string", "parse_tolerance", "verify_lower",
    "verify_trivial_lower", "verify_trivial_upper", "verify_upper",
]
