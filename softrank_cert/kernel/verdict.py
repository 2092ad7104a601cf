"""The verdict type (TRUSTED).  Only the kernel constructs verdicts.

A :class:`Verdict` is sealed in the HOL Light sense: its constructor demands the private
``_KERNEL_SEAL`` token that only kernel modules pass, its attributes cannot be reassigned,
and nothing outside ``softrank_cert.kernel`` creates one.  Front ends read verdicts; they
never make them.
"""

from __future__ import annotations

import enum
from fractions import Fraction

_KERNEL_SEAL = object()


class Status(enum.Enum):
    """Three-valued outcome of a check.

    VERIFIED     the claim is proved (every ball comparison decided in its favour);
    REJECTED     the witness / certificate is proved NOT to establish the claim;
    INCONCLUSIVE the balls could not decide at the highest precision allowed.
    """

    VERIFIED = "VERIFIED"
    REJECTED = "REJECTED"
    INCONCLUSIVE = "INCONCLUSIVE"


class Verdict:
    """Outcome of one kernel check.

    ``side`` is ``"upper"`` (claim ``r_eps(A) <= rank``) or ``"lower"`` (claim
    ``r_eps(A) >= rank``).  ``margin`` is an exact rational interval ``[lo, hi]`` containing

    * upper: ``eps - ||A - U W^T||`` (verified iff provably >= 0);
    * lower: ``1 - eps ||X|| ||Y|| ||(XAY)^{-1}||`` (verified iff provably > 0);

    ``value`` an exact rational interval containing the witness error ``||A - U W^T||``
    (upper) or the certificate threshold ``1 / (||X|| ||Y|| ||(XAY)^{-1}||)`` (lower); either
    may be ``None`` when the check did not get that far (e.g. ``XAY`` not provably
    invertible) or the end is trivial.  ``precision`` is the Arb precision in bits of the
    final attempt (0 when no ball arithmetic was needed, 53 for the float64 path).
    ``engine`` names what decided: ``"arb"`` (Arb balls), ``"float64"`` (proved float64
    bounds, ``proofs/float64-bounds.md``), ``"exact"`` (no arithmetic needed) or
    ``"rational"`` (the second, exact-rational kernel).
    """

    __slots__ = ("status", "side", "rank", "eps", "method", "margin", "value", "precision", "reason", "engine")

    def __init__(
        self,
        *,
        seal: object,
        status: Status,
        side: str,
        rank: int,
        eps: str,
        method: str,
        margin: tuple[Fraction, Fraction] | None,
        value: tuple[Fraction, Fraction] | None,
        precision: int,
        reason: str,
        engine: str,
    ) -> None:
        if seal is not _KERNEL_SEAL:
            raise TypeError("verdicts are constructed by softrank_cert.kernel only")
        for name, item in (
            ("status", status), ("side", side), ("rank", rank), ("eps", eps), ("method", method),
            ("margin", margin), ("value", value), ("precision", precision), ("reason", reason),
            ("engine", engine),
        ):
            object.__setattr__(self, name, item)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("verdicts are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("verdicts are immutable")

    @property
    def claim(self) -> str:
        relation = "<=" if self.side == "upper" else ">="
        return f"r_eps {relation} {self.rank}"

    def __repr__(self) -> str:
        return f"Verdict({self.status.value}, {self.claim}, eps={self.eps}, method={self.method}, prec={self.precision})"
