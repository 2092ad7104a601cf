"""A second, independent trusted kernel in exact rational arithmetic.

**This is a second trusted kernel.**  It hands its attempts to the Arb kernel's one verdict
constructor, :func:`softrank_cert.kernel.decide` (this subpackage is the only place outside
``softrank_cert.kernel`` allowed to call it), so a bug here can make
``softrank-verify --kernel exact`` accept a false claim: it is held to the same standard and
has its own written proofs (``proofs/exact-exp-enclosure.md``, ``proofs/exact-kernel.md``).

Independence: no python-flint, no Arb, no numeric code of ``softrank_cert.kernel``.  Shared
with it, through its public interface only, are the exact input layer
(:class:`~softrank_cert.kernel.Operator`, which validates and freezes the float64 arrays, and
:func:`~softrank_cert.kernel.parse_tolerance`), the environment gate
(:func:`~softrank_cert.kernel.require_ieee_environment`) and the verdict wrapper (the verdict
types, the precision schedule and :func:`~softrank_cert.kernel.decide`).  Independence is
about numbers, not about the verdict wrapper.  Arithmetic is Python integers and ``fractions.Fraction``: dyadic
intervals rounded outward to a fixed number of bits, a self-contained enclosure of ``exp``
(range reduction with a proved enclosure of ln 2, Taylor with a Lagrange remainder), and a
rigorous approximate-inverse bound for ``||(X A Y)^{-1}||``.  numpy serves as array plumbing
and as an *untrusted* proposer of the approximate inverse (any matrix R keeps the bound sound).

Limits (refused with ``SizeLimitError``, exit 2): ``m * N <= 4096``, ``d <= 1024``,
``k <= 32``, ``r <= 64``.

Interface: the same four checks, with the same signatures, as ``softrank_cert.kernel``.
"""

from ..kernel import DEFAULT_MAX_PREC, LIMIT_MAX_PREC
from .checks import (
    MAX_HEAD_DIM, MAX_K, MAX_OPERATOR_ENTRIES, MAX_R, check_limits,
    verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper,
)

__all__ = [
    "DEFAULT_MAX_PREC", "LIMIT_MAX_PREC", "MAX_HEAD_DIM", "MAX_K", "MAX_OPERATOR_ENTRIES", "MAX_R",
    "check_limits", "verify_lower", "verify_trivial_lower", "verify_trivial_upper", "verify_upper",
]
