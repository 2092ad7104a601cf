"""The trusted kernel of softrank-cert: everything a verdict depends on, and nothing else.

Parts: ``operator.py`` (:class:`Operator`, the exact attention operator), ``exact_inputs.py`` (exact
parsing and conversions), ``enclosure.py`` (Arb balls containing S and A, cached privately per
operator), ``checks.py`` (the four checks), ``verdict.py`` (:class:`Verdict`, :class:`Status`,
:func:`decide`, their one constructor, and Arb's precision) and ``float64/`` (the float64 path:
environment probe, proved rounding bounds, its attempts).  Each step cites its proof in ``proofs/``.

The public interface is exactly ``__all__``; no module outside the kernel imports a submodule.
:func:`decide` is public for the second trusted kernel (``softrank_cert.exact_kernel``) only.  The
enclosure API (ball lists, exact conversions, ``working_precision``, ``require_ieee_environment``)
serves certified numbers no verdict depends on (``softrank_cert.geometry.bounds``).  Imports:
python-flint, numpy and the standard library only; never a solver, never scipy.
"""

from .checks import verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper
from .enclosure import probability_balls, score_balls
from .exact_inputs import (arb_lower_fraction, arb_upper_fraction, float64_matrix_to_arb, float_to_decimal_string,
                    fraction_to_arb, parse_tolerance)
from .float64.fpenv import require_ieee_environment
from .operator import MAX_DIM, MAX_ENTRIES, Operator, check_shape, checked_float64
from .verdict import (DEFAULT_MAX_PREC, LIMIT_MAX_PREC, OUT_OF_MEMORY, START_PREC, Status, Verdict, decide,
                      precision_schedule, working_precision)

__all__ = [  # the exact operator and its inputs; the checks and their verdicts; decide; the enclosure API
    "MAX_DIM", "MAX_ENTRIES", "Operator", "check_shape", "checked_float64", "float_to_decimal_string",
    "parse_tolerance",
    "DEFAULT_MAX_PREC", "LIMIT_MAX_PREC", "OUT_OF_MEMORY", "START_PREC", "Status", "Verdict", "precision_schedule",
    "verify_lower", "verify_trivial_lower", "verify_trivial_upper", "verify_upper", "decide",
    "arb_lower_fraction", "arb_upper_fraction", "float64_matrix_to_arb", "fraction_to_arb",
    "probability_balls", "require_ieee_environment", "score_balls", "working_precision",
]
