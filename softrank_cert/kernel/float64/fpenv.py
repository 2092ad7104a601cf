"""The floating-point environment of this process (TRUSTED; numpy only, no Arb).

Both kernels convert doubles exactly (``arb(float)``, ``Fraction(float)``) and the float64 path
relies on IEEE 754 arithmetic in numpy (``proofs/float64-bounds.md``, assumption A1).  Under
flush-to-zero or denormals-are-zero (e.g. after loading a library built with ``-ffast-math``)
subnormals silently become 0, so :func:`require_ieee_environment` is the entry gate of every
check of both kernels -- one probe per claim -- and refuses to decide anything in such a
process; the public entry points that convert doubles outside a check (the enclosure API,
``float_to_decimal_string``, the geometry bounds) call it too.
"""

from __future__ import annotations

import struct

import numpy as np

from ...errors import FloatingPointEnvironmentError


def pow2(exponent: int) -> float:
    """The double ``2**exponent`` (-1074 <= exponent <= 1023) built from its bit pattern.

    Not ``2.0 ** exponent``: Python folds that at compile time with the C library's ``pow``
    in whatever floating-point mode the compiling process had, and a ``.pyc`` written under
    flush-to-zero or a directed rounding mode would keep a wrong constant for good."""
    if not -1074 <= exponent <= 1023:
        raise ValueError(f"2**{exponent} is not a finite nonzero double")
    bits = (exponent + 1023) << 52 if exponent >= -1022 else 1 << (exponent + 1074)
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


#: Smallest positive normal double; nonzero inputs below it are refused (DAZ would zero them).
SMALLEST_NORMAL = pow2(-1022)


def ieee_preconditions_hold() -> bool:
    """Runtime check, in this thread, of what Lemmas F1 and F3 assume of numpy's elementwise
    arithmetic: round to nearest (ties to even), gradual underflow (no flush-to-zero, no
    denormals-are-zero) and a working ``nextafter``.  Every probe compares *normal* doubles
    only (under denormals-are-zero a comparison with a subnormal constant would compare 0 with
    0); any failure, including a subnormal constant that could not even be formed, is False.
    Checked at the entry of every claim: a library loaded later may switch the floating-point mode."""
    with np.errstate(all="ignore"):  # the probes underflow on purpose; np.seterr must not interfere
        tiny = np.array([SMALLEST_NORMAL, pow2(-1074)])
        halved = tiny[:1] * 0.5  # 2**-1023: 0 under flush-to-zero
        lifted = np.concatenate([halved, tiny[1:]]) * pow2(100)  # 0 under denormals-are-zero
        one = np.array([1.0, 1.0, -1.0])
        nearest = one + np.array([pow2(-53), 3 * pow2(-54), -3 * pow2(-54)])
        one_up = 1.0 + pow2(-52)  # 3 * 2**-54 and 1 + 2**-52 are exact in every rounding mode
        return bool(lifted[0] == pow2(-923) and lifted[1] == pow2(-974)
                    and nearest[0] == 1.0 and nearest[1] == one_up and nearest[2] == -one_up
                    and np.nextafter(1.0, np.inf) == one_up
                    and float(np.nextafter(0.0, np.inf)) * pow2(1000) == pow2(-74))


def require_ieee_environment() -> None:
    """Raise :class:`FloatingPointEnvironmentError` unless :func:`ieee_preconditions_hold`.

    The entry gate of every check of both kernels (once per claim): besides the float64 bounds,
    the exact conversions of doubles (``arb(float)``, ``Fraction(float)``) read subnormals as 0
    under denormals-are-zero, so no engine may decide anything in such a process."""
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


