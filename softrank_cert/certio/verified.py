"""Kernel-verified ends as sealed values: the only input the certificate writer accepts.

HOL Light's abstract ``thm``: a :class:`VerifiedLower` (``r_eps >= k``) or :class:`VerifiedUpper`
(``r_eps <= r``) has no public constructor.  :func:`verify_lower_end` and :func:`verify_upper_end`
copy the arrays into private read-only buffers, run the trusted kernel (:mod:`softrank_cert.kernel`)
on those copies and return a sealed end only when its verdict is VERIFIED; the end is bound to
that :class:`~softrank_cert.kernel.Operator` object and that exact tolerance string.  The writer
(:func:`~softrank_cert.certio.issuing.certificate_for`) calls :func:`check_sealed` on every end and
refuses anything else with :class:`~softrank_cert.errors.InternalInvariantError` (exit 4).

Threat model: the seal stops accidents, not code in this process; what is trusted is a
re-check by ``softrank-verify``.  Python has no access control: any code running in this
process can forge a sealed end -- by ``object.__setattr__`` on a sealed end's fields, by
monkeypatching the kernel function this module calls (``verify_upper``), by reaching for the
private token or registry of this module, or by ``ctypes`` -- and a review did get false claims
written that way (``softrank-verify`` then rejected them).  What the seal does rule out is every
*accidental* road from a solver to the writer: a direct constructor call, a subclass, a
look-alike class of the same name and slots, an instance made by ``object.__new__`` with its
slots filled in, a copy, a pickle, an end of another operator or tolerance, and arrays changed
after sealing (numpy refuses to write them or make them writable; a replaced array is caught by
the digest).  So a solver bug cannot get an unverified end written, but a certificate is
believed only after ``softrank-verify`` (a fresh process, the trusted kernel on the file's
bytes) has checked it.  Sealed ends do not leave their process: a worker writes the unsigned
document from its own sealed ends, or the receiving process seals the claims again with the
kernel (:func:`verify_bracket`).
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass
from collections.abc import Callable
from typing import Generic, NoReturn, TypeVar, overload

import numpy as np

from ..errors import InternalInvariantError, InvalidInputError
from ..util.memory import CheckPlan
from ..kernel import (Operator, Status, Verdict, checked_float64, verify_lower, verify_trivial_lower,
                      verify_trivial_upper, verify_upper)
from .certificate import Bracket

_SEAL = object()
#: Every end this module sealed (weakly): an instance built any other way is not in it.
_ISSUED: weakref.WeakSet[VerifiedEnd] = weakref.WeakSet()

Arrays = tuple[np.ndarray, np.ndarray] | None
T = TypeVar("T")


def _frozen(name: str, value: object) -> np.ndarray:
    """A private copy of ``value`` (float64, 2-D, finite) over immutable bytes: numpy can neither
    write it nor make it writable again."""
    array = checked_float64(name, value, error=InvalidInputError)
    return np.frombuffer(np.ascontiguousarray(array, dtype="<f8").tobytes(), dtype="<f8").reshape(array.shape)


def _digest(arrays: Arrays) -> str:
    if arrays is None:
        return ""
    h = hashlib.sha256()
    for a in arrays:
        h.update(f"{list(a.shape)}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class VerifiedEnd:
    """A kernel-VERIFIED end (see the module docstring): immutable, made only by this module.

    ``rank`` and ``method`` are the claim's (``k`` / ``r`` and the format's ``method`` /
    ``construction`` in the subclasses), ``arrays`` its factors (None for a trivial end) and
    ``estimate`` the solver's float64 figure (no part of the claim)."""

    __slots__ = ("_operator", "eps", "rank", "method", "_arrays", "estimate", "verdict", "_digest", "__weakref__")
    side = ""
    _operator: Operator
    eps: str
    rank: int
    method: str
    _arrays: Arrays
    estimate: float | None
    verdict: Verdict
    _digest: str

    def __init__(self, *, seal: object, operator: Operator, eps: str, rank: int, method: str, arrays: Arrays,
                 estimate: float | None, verdict: Verdict) -> None:
        if seal is not _SEAL:
            raise TypeError("verified ends are made by softrank_cert.certio.verified only (verify_lower_end, "
                            "verify_upper_end)")
        fields = {"_operator": operator, "eps": eps, "rank": rank, "method": method, "_arrays": arrays,
                  "estimate": estimate, "verdict": verdict, "_digest": _digest(arrays)}
        for name, value in fields.items():
            object.__setattr__(self, name, value)
        _ISSUED.add(self)

    @property
    def operator(self) -> Operator:
        """The operator the kernel verified this end for."""
        return self._operator

    @property
    def arrays(self) -> Arrays:
        """The factors the kernel checked (read-only), None for a trivial end."""
        return self._arrays

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("verified ends are immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("verified ends are immutable")

    def __reduce__(self) -> NoReturn:
        raise TypeError("verified ends do not leave their process: send the claim and verify it again there")

    def __copy__(self) -> VerifiedEnd:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> VerifiedEnd:
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.verdict.claim}, eps={self.eps}, {self.method})"


class _Alias(Generic[T]):
    """A read-only name of the subclasses for a part of the claim (``k`` for ``rank``, ``X`` for the
    first factor, ...); there is no slot behind it to set."""

    def __init__(self, get: Callable[[VerifiedEnd], T]) -> None:
        self._get = get

    @overload
    def __get__(self, end: None, owner: type) -> _Alias[T]: ...

    @overload
    def __get__(self, end: VerifiedEnd, owner: type) -> T: ...

    def __get__(self, end: VerifiedEnd | None, owner: type) -> T | _Alias[T]:
        return self if end is None else self._get(end)


def _rank(end: VerifiedEnd) -> int:
    return end.rank


def _method(end: VerifiedEnd) -> str:
    return end.method


def _first(end: VerifiedEnd) -> np.ndarray | None:
    return None if end.arrays is None else end.arrays[0]


def _second(end: VerifiedEnd) -> np.ndarray | None:
    return None if end.arrays is None else end.arrays[1]


class VerifiedLower(VerifiedEnd):
    """VERIFIED ``r_eps >= k`` at ``eps``: certified by ``X`` (k x m), ``Y`` (N x k), or trivial
    (``X``/``Y`` None, k <= 1); ``estimate``: the solver's float64 threshold."""

    __slots__ = ()
    side = "lower"
    k = _Alias(_rank)
    X = _Alias(_first)
    Y = _Alias(_second)


class VerifiedUpper(VerifiedEnd):
    """VERIFIED ``r_eps <= r`` at ``eps``: witnessed by ``U W^T`` (U m x r, W N x r), or trivial
    (``U``/``W`` None: ``zero``, r = 0, or ``identity``, r = p); ``estimate``: the solver's float64
    error ``||A - U W^T||``."""

    __slots__ = ()
    side = "upper"
    r = _Alias(_rank)
    construction = _Alias(_method)
    U = _Alias(_first)
    W = _Alias(_second)


def _pair(names: str, first: object, second: object) -> Arrays:
    if first is None and second is None:
        return None
    if first is None or second is None:
        raise InvalidInputError(f"{names} go together: give both or neither")
    return _frozen(names[0], first), _frozen(names[-1], second)


def trivial_needs_arithmetic(op: Operator, side: str, rank: int) -> bool:
    """Whether the kernel needs arithmetic on ``op`` to decide the trivial claim of ``side``
    ("lower": ``r_eps >= rank``, "upper": ``r_eps <= rank``; ``proofs/trivial-ends.md``): not for
    ``k = 0`` (T3), ``r = p`` (T1), nor, for softmax rows (``||A|| = 1`` exactly), ``k = 1`` (T4) and
    ``r = 0`` (T2), which are exact comparisons of eps with 1 (an invalid rank is refused before any
    arithmetic too).  Such a claim is never refused or left unchecked for memory."""
    if op.row_sums_exactly_one():
        return False
    return rank != (0 if side == "lower" else op.p)


def _within(plan: CheckPlan | None, check: Callable[..., Verdict], args: tuple[object, ...], arithmetic: bool,
            **options: object) -> Verdict:
    """``check(*args, **options)`` as ``engine="auto"`` runs it, within ``plan`` (None: no limit): the
    Arb balls only up to ``plan.cap`` bits; without any, the row-block path (for a norm claim the
    kernel's float64 norm path), then the entrywise float64 path when it fits.  A claim that needs
    no ``arithmetic`` runs as the kernel's defaults run it.  The verdicts are the kernel's (an
    INCONCLUSIVE one: not verified within the plan)."""
    if plan is None or not arithmetic:
        return check(*args, **options)
    if plan.cap is not None:
        return check(*args, **options, max_prec=plan.cap)
    if plan.float64:
        verdict = check(*args, **options, engine="rowblock")
        if verdict.status is not Status.INCONCLUSIVE:
            return verdict
    return check(*args, **options, engine="float64" if plan.float64 else "rowblock")


def verify_lower_end(op: Operator, eps: str, k: int, X: object, Y: object, method: str, *,
                     threshold: float | None = None, plan: CheckPlan | None = None) -> VerifiedLower | None:
    """The sealed end ``r_eps >= k`` at ``eps`` when the kernel VERIFIES it, else None.

    ``X``/``Y`` None: the trivial end (k = 0 or 1, ``method`` "trivial"); else the kernel checks the
    certificate ``(X, Y)`` on private read-only copies, which the end then holds.  ``plan``: the
    memory the kernel's fallback paths may use (:func:`~softrank_cert.util.memory.task_check_plan`;
    None: the kernel's defaults)."""
    arrays = _pair("X and Y", X, Y)
    if arrays is None:
        if method != "trivial":
            raise InvalidInputError(f"a lower end without X and Y is the trivial one, not {method!r}")
        verdict = _within(plan, verify_trivial_lower, (op, eps, k), trivial_needs_arithmetic(op, "lower", k))
    else:
        verdict = _within(plan, verify_lower, (op, eps, k, *arrays), True, method=method)
    if verdict.status is not Status.VERIFIED:
        return None
    return VerifiedLower(seal=_SEAL, operator=op, eps=eps, rank=k, method=method, arrays=arrays, estimate=threshold,
                         verdict=verdict)


def verify_upper_end(op: Operator, eps: str, r: int, U: object, W: object, construction: str, *,
                     error: float | None = None, plan: CheckPlan | None = None) -> VerifiedUpper | None:
    """The sealed end ``r_eps <= r`` at ``eps`` when the kernel VERIFIES it, else None.

    ``U``/``W`` None: a trivial witness (``construction`` "zero" with r = 0, "identity" with
    r = p); else the kernel checks ``U W^T`` on private read-only copies, which the end then holds.
    ``plan``: as for :func:`verify_lower_end`."""
    arrays = _pair("U and W", U, W)
    if arrays is None:
        verdict = _within(plan, verify_trivial_upper, (op, eps, r), trivial_needs_arithmetic(op, "upper", r))
        if construction != verdict.method:
            raise InvalidInputError(f"the trivial upper end r = {r} is the {verdict.method!r} witness, "
                                    f"not {construction!r}")
    else:
        verdict = _within(plan, verify_upper, (op, eps, r, *arrays), True, method=construction)
    if verdict.status is not Status.VERIFIED:
        return None
    return VerifiedUpper(seal=_SEAL, operator=op, eps=eps, rank=r, method=construction, arrays=arrays,
                         estimate=error, verdict=verdict)


@dataclass(frozen=True, eq=False)
class VerifiedBracket:
    """Both sealed ends at one tolerance ``eps`` (an exact decimal string): what a certificate's
    bracket is written from (:func:`~softrank_cert.certio.issuing.certificate_for` checks both)."""

    eps: str
    lower: VerifiedLower
    upper: VerifiedUpper

    @property
    def resolved(self) -> bool:
        return self.lower.k == self.upper.r


def verify_bracket(op: Operator, bracket: Bracket) -> VerifiedBracket | None:
    """The claims of a plain (e.g. decoded) :class:`~.certificate.Bracket`, each verified again by
    the kernel and sealed; None when either is not VERIFIED."""
    lower, upper = bracket.lower, bracket.upper
    sealed_lower = verify_lower_end(op, bracket.eps, lower.k, lower.X, lower.Y, lower.method)
    sealed_upper = verify_upper_end(op, bracket.eps, upper.r, upper.U, upper.W, upper.construction)
    if sealed_lower is None or sealed_upper is None:
        return None
    return VerifiedBracket(bracket.eps, sealed_lower, sealed_upper)


def _refuse(side: str, eps: str, why: str) -> NoReturn:
    raise InternalInvariantError(f"refusing to write the {side} end at eps {eps}: {why}")


def check_sealed(end: object, kind: type[VerifiedEnd], op: Operator, eps: str) -> None:
    """Refuse (:class:`InternalInvariantError`, exit 4) anything but an end sealed by this module,
    of exactly ``kind``, for the operator object ``op`` and the tolerance string ``eps``, whose
    VERIFIED verdict is about this side, rank and tolerance, and whose arrays are the ones sealed."""
    side = kind.side
    if type(end) is not kind or end not in _ISSUED:
        _refuse(side, eps, f"{type(end).__name__} is not a {kind.__name__} sealed by the kernel's verdict")
    assert isinstance(end, VerifiedEnd)  # for the type checker: the line above ensured it
    if end._operator is not op:
        _refuse(side, eps, f"it was verified for another operator ({end._operator!r})")
    if end.eps != eps:
        _refuse(side, eps, f"it was verified at eps {end.eps}")
    verdict = end.verdict
    if (type(verdict) is not Verdict or verdict.status is not Status.VERIFIED or verdict.side != side
            or verdict.rank != end.rank or verdict.eps != eps):
        _refuse(side, eps, f"its verdict ({verdict!r}) is not a VERIFIED {side} claim of rank {end.rank}")
    if _digest(end.arrays) != end._digest:
        _refuse(side, eps, "its arrays changed after the kernel verified them")


__all__ = ["VerifiedBracket", "VerifiedEnd", "VerifiedLower", "VerifiedUpper", "check_sealed",
           "trivial_needs_arithmetic", "verify_bracket", "verify_lower_end", "verify_upper_end"]
