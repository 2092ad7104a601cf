"""The verdict type, its one constructor :func:`decide`, and Arb's precision (TRUSTED).

A :class:`Verdict` is sealed in the HOL Light sense: its constructor demands the private ``_KERNEL_SEAL`` token,
which only :func:`decide` passes.  The seal stops accidents, not code in this process (``object.__setattr__`` or a
monkeypatch forge a verdict): what is trusted is a re-check by ``softrank-verify``.  :func:`decide` owns what the
verdicts of every engine share (the attempt loop, the status mapping); the engines hand it their attempts: the Arb
balls and the float64 paths (``checks.py``) and the exact-rational second kernel (``softrank_cert.exact_kernel``),
which keeps its own arithmetic.  Soundness: ``proofs/precision-retry.md`` (Theorem P).  Precision (process-global in
python-flint, set per block by :func:`working_precision`) affects only the *width* of balls, never their correctness
(Lemma P1).
"""

from __future__ import annotations

import enum
from contextlib import contextmanager
from fractions import Fraction
from collections.abc import Callable, Iterable, Iterator

from flint import ctx

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
OUT_OF_MEMORY = "out of memory"  #: in an undecided attempt's reason: decide() names it in the verdict's (issue 48)


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


@contextmanager
def working_precision(bits: int) -> Iterator[None]:
    """Arb's working precision is ``bits`` inside the block, restored afterwards."""
    saved = ctx.prec
    ctx.prec = bits
    try:
        yield
    finally:
        ctx.prec = saved


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
    """Outcome of one kernel check: ``side`` "upper" (claim ``r_eps(A) <= rank``) or "lower"
    (claim ``r_eps(A) >= rank``).

    ``margin``: an exact rational interval containing ``eps - ||A - U W^T||`` (upper; verified iff
    provably >= 0) or ``1 - eps ||X|| ||Y|| ||(XAY)^{-1}||`` (lower; verified iff provably > 0).
    ``value``: one containing the witness error ``||A - U W^T||`` (upper) or the certificate
    threshold ``1 / (||X|| ||Y|| ||(XAY)^{-1}||)`` (lower).  Either is None when the check did not
    get that far (``XAY`` not provably invertible) or the end is trivial.  ``precision``: bits of
    the final attempt (0: no arithmetic, 53: a float64 path).  ``engine``: what decided -- "arb" (Arb
    balls), "float64" / "rowblock" (``proofs/float64-bounds.md`` / ``rowblock-bounds.md``), "trivial" (an
    exact comparison, no arithmetic on the operator) or "rational" (the exact kernel, ``--kernel exact``).
    """

    __slots__ = ("status", "side", "rank", "eps", "method", "margin", "value", "precision", "reason", "engine")
    status: Status
    side: str
    rank: int
    eps: str
    method: str
    margin: Interval | None
    value: Interval | None
    precision: int
    reason: str
    engine: str

    def __init__(self, *, seal: object, status: Status, side: str, rank: int, eps: str, method: str,
                 margin: Interval | None, value: Interval | None, precision: int, reason: str, engine: str) -> None:
        if seal is not _KERNEL_SEAL:
            raise TypeError("verdicts are constructed by softrank_cert.kernel only")
        fields = locals()
        for name in self.__slots__:
            object.__setattr__(self, name, fields[name])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("verdicts are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("verdicts are immutable")

    @property
    def claim(self) -> str:
        return f"r_eps {'<=' if self.side == 'upper' else '>='} {self.rank}"

    def __repr__(self) -> str:
        return (f"Verdict({self.status.value}, {self.claim}, eps={self.eps}, method={self.method}, "
                f"prec={self.precision})")


def decide(side: str, rank: int, eps: str, method: str, stages: Iterable[Stage]) -> Verdict:
    """The verdict of the first stage whose attempt decides (True -> VERIFIED, False ->
    REJECTED), else INCONCLUSIVE with the last stage's data: the only code that builds a
    :class:`Verdict`.  ``stages`` run in order (e.g. the float64 path at 53 bits, then the Arb
    balls at every precision of the schedule); each attempt must be sound on its own, and then
    no stage can decide the opposite of another (``proofs/precision-retry.md``, P1-P2, Theorem P).
    """
    last, notes = None, list[str]()
    for engine, prec, attempt in stages:
        last = (*attempt(), prec, engine)
        if last[0] is not None:
            break
        notes += [last[3]] if OUT_OF_MEMORY in last[3] else []
    if last is None:
        raise AssertionError("unreachable: a decision has at least one stage")
    decision, margin, value, reason, prec, engine = last
    reason = "; ".join(dict.fromkeys([reason, *notes]))  # an earlier stage out of memory is named (issue 48)
    return Verdict(seal=_KERNEL_SEAL, status=_STATUS[decision], side=side, rank=rank, eps=eps, method=method,
                   margin=margin, value=value, precision=prec, reason=reason, engine=engine)
