"""The floating-point environment of this process (TRUSTED; numpy only, no Arb).

Both kernels convert doubles exactly (``arb(float)``, ``Fraction(float)``) and the float64 path
relies on IEEE 754 arithmetic in numpy (``proofs/float64-bounds.md``, assumption A1).  Under
flush-to-zero or denormals-are-zero (e.g. after loading a library built with ``-ffast-math``)
subnormals silently become 0, so :func:`require_ieee_environment` is called on entry to every
check of both kernels and refuses to decide anything in such a process.
"""

from __future__ import annotations

import numpy as np

from ..errors import FloatingPointEnvironmentError

#: Smallest positive normal double; nonzero inputs below it are refused (DAZ would zero them).
SMALLEST_NORMAL = 2.0**-1022


def ieee_preconditions_hold() -> bool:
    """Runtime check, in this thread, of what Lemmas F1 and F3 assume of numpy's elementwise
    arithmetic: round to nearest (ties to even), gradual underflow (no flush-to-zero, no
    denormals-are-zero) and a working ``nextafter``.  Every probe compares *normal* doubles
    only (under denormals-are-zero a comparison with a subnormal constant would compare 0 with
    0); any failure, including a subnormal constant that could not even be formed, is False.
    Checked before every decision: a library loaded later may switch the floating-point mode."""
    tiny = np.array([SMALLEST_NORMAL, 2.0**-1074])
    halved = tiny[:1] * 0.5  # 2**-1023: 0 under flush-to-zero
    lifted = np.concatenate([halved, tiny[1:]]) * 2.0**100  # 0 under denormals-are-zero
    one = np.array([1.0, 1.0, -1.0])
    nearest = one + np.array([2.0**-53, 3 * 2.0**-54, -3 * 2.0**-54])
    return bool(lifted[0] == 2.0**-923 and lifted[1] == 2.0**-974
                and nearest[0] == 1.0 and nearest[1] == 1.0 + 2.0**-52 and nearest[2] == -1.0 - 2.0**-52
                and np.nextafter(1.0, np.inf) == 1.0 + 2.0**-52
                and float(np.nextafter(0.0, np.inf)) * 2.0**1000 == 2.0**-74)


def require_ieee_environment() -> None:
    """Raise :class:`FloatingPointEnvironmentError` unless :func:`ieee_preconditions_hold`.

    Called on entry to every check of both kernels: besides the float64 bounds, the exact
    conversions of doubles (``arb(float)``, ``Fraction(float)``) read subnormals as 0 under
    denormals-are-zero, so no engine may decide anything in such a process."""
    if not ieee_preconditions_hold():
        raise FloatingPointEnvironmentError(
            "this process does not do IEEE 754 arithmetic (flush-to-zero, denormals-are-zero or a "
            "non-default rounding mode is active, e.g. a library built with -ffast-math was loaded): "
            "refusing to verify")


_EXPONENT_AND_SIGNIFICAND = np.uint64(0x7FFF_FFFF_FFFF_FFFF)
_SMALLEST_NORMAL_BITS = np.uint64(0x0010_0000_0000_0000)


def subnormal_mask(array: np.ndarray) -> np.ndarray:
    """True where an entry is a nonzero subnormal, read from the bit pattern (so that it is
    right whatever the floating-point mode)."""
    bits = np.ascontiguousarray(array, dtype=np.float64).view(np.uint64) & _EXPONENT_AND_SIGNIFICAND
    return (bits != 0) & (bits < _SMALLEST_NORMAL_BITS)


def has_subnormals(array: np.ndarray) -> bool:
    """True if a nonzero entry is below the smallest normal double (the bounds refuse those)."""
    return bool(subnormal_mask(array).any())


