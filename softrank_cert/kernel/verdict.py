"""The verdict type and its one constructor, :func:`decide` (TRUSTED).

A :class:`Verdict` is sealed in the HOL Light sense: its constructor demands the private
``_KERNEL_SEAL`` token, which only :func:`decide` (below) passes; its attributes cannot be
reassigned.  :func:`decide` owns what every verdict of every engine shares -- the precision
schedule (:func:`precision_schedule`), the attempt loop and the status mapping -- and the
engines hand it their attempt functions: the Arb balls and the float64 path (``checks.py``)
and the exact-rational second kernel (``softrank_cert.exact_kernel``), which keeps its own
arithmetic.  Soundness of the loop: ``proofs/precision-retry.md`` (Theorem P).  Front ends
read verdicts; they never make them.
"""

from __future__ import annotations

import enum
from fractions import Fraction
from typing import Callable, Iterable

from ..errors import InvalidInputError

_KERNEL_SEAL = object()

START_PREC = 64
DEFAULT_MAX_PREC = 512
LIMIT_MAX_PREC = 8192

Interval = tuple[Fraction, Fraction]
#: One attempt's (decision, margin, value, reason): True = claim proved, False = the
#: witness/certificate proved invalid, None = undecided; exact intervals (or None).
Outcome = tuple["bool | None", "Interval | None", "Interval | None", str]
#: One step of a decision: (engine, precision in bits, the attempt at that precision).
Stage = tuple[str, int, Callable[[], Outcome]]


def precision_schedule(max_prec: int) -> list[int]:
    """64, 128, 256, ... up to and including ``max_prec`` (which must lie in [64, 8192])."""
    if not isinstance(max_prec, int) or not START_PREC <= max_prec <= LIMIT_MAX_PREC:
        raise InvalidInputError(f"--max-prec must be an integer in [{START_PREC}, {LIMIT_MAX_PREC}] bits")
    steps, prec = [], START_PREC
    while prec < max_prec:
        steps.append(prec)
        prec *= 2
    steps.append(max_prec)
    return steps


class Status(enum.Enum):
    """Three-valued outcome of a check.

    VERIFIED     the claim is proved (every ball comparison decided in its favour);
    REJECTED     the witness / certificate is proved NOT to establish the claim;
    INCONCLUSIVE the balls could not decide at the highest precision allowed.
    """

    VERIFIED = "VERIFIED"
    REJECTED = "REJECTED"
    INCONCLUSIVE = "INCONCLUSIVE"


_STATUS = {True: Status.VERIFIED, False: Status.REJECTED, None: Status.INCONCLUSIVE}


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
    bounds, ``proofs/float64-bounds.md``), ``"trivial"`` (a trivial end, decided by an exact
    comparison: no arithmetic on the operator needed) or ``"rational"`` (the second,
    exact-rational kernel, ``softrank-verify --kernel exact``).
    """

    __slots__ = ("status", "side", "rank", "eps", "method", "margin", "value", "precision", "reason", "engine")

    def __init__(self, *, seal: object, status: Status, side: str, rank: int, eps: str, method: str,
                 margin: Interval | None, value: Interval | None, precision: int, reason: str, engine: str) -> None:
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


def decide(side: str, rank: int, eps: str, method: str, stages: Iterable[Stage]) -> Verdict:
    """The verdict of the first stage whose attempt decides, else INCONCLUSIVE with the last
    stage's data: the only code that builds a :class:`Verdict`.

    ``stages`` run in order (e.g. the float64 path at 53 bits, then the Arb balls at every
    precision of ``precision_schedule(max_prec)``); each attempt must be sound on its own.
    Stopping at the first decision is then sound: no stage can decide the opposite of another
    (``proofs/precision-retry.md``, Lemmas P1-P2, Theorem P).  The status is the decision's:
    True -> VERIFIED, False -> REJECTED, None -> INCONCLUSIVE.
    """
    last = None
    for engine, prec, attempt in stages:
        last = (*attempt(), prec, engine)
        if last[0] is not None:
            break
    if last is None:
        raise AssertionError("unreachable: a decision has at least one stage")
    decision, margin, value, reason, prec, engine = last
    return Verdict(seal=_KERNEL_SEAL, status=_STATUS[decision], side=side, rank=rank, eps=eps, method=method,
                   margin=margin, value=value, precision=prec, reason=reason, engine=engine)
