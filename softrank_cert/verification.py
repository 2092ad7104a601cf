"""Re-checking a certificate end to end (the engine behind ``softrank-verify``): the one
verification path, from the certificate's bytes to one ``(lower, upper)`` verdict pair per bracket.

The steps, numbered once here (``certio`` and the code below refer to these numbers in ``# N.``
comments).  Steps 0-6 fail closed with an :class:`~softrank_cert.errors.InvalidInputError`
(exit 2) before the next one runs:

0. **size** -- at most :data:`~softrank_cert.certio.certificate.MAX_CERTIFICATE_BYTES` bytes (a
   file is read in pieces, never past the limit: :func:`~softrank_cert.certio.certificate.read_certificate_bytes`);
1. **strict JSON** -- UTF-8; no duplicate key, NaN/Infinity, non-integer number or lone
   surrogate (:func:`~softrank_cert.certio.certificate.parse_json_strict`);
2. **schema** -- the JSON Schema of format version 1 (:func:`~softrank_cert.certio.certificate.check_schema`);
3. **operator arrays** -- declared sizes against the limits before decoding, base64 length,
   SHA-256, finiteness (:func:`~softrank_cert.certio.arrays.decode_array`, once per array);
4. **operator** -- the kernel's :class:`~softrank_cert.kernel.Operator` (kind, shapes, beta, mask);
5. **brackets** -- each eps parsed once to its exact rational (``Bracket.eps_value``), each end's
   arrays decoded as in step 3 and their shapes checked against the operator, ``k <= p``, the
   trivial witnesses' ``r`` (:func:`~softrank_cert.certio.certificate.decode_certificate`);
6. **signature** -- the Data Integrity proof (eddsa-jcs-2022), if present; required with
   ``require_signature``; its signer must be trusted when ``trusted_keys`` is given
   (:func:`check_signature`);
7. **claims** -- the trusted kernel decides every claim, lower then upper per bracket
   (:func:`check_claims`); a certificate beyond the limits of ``kernel="exact"``, or whose Arb
   check would need more memory than this process may use, raises
   :class:`~softrank_cert.errors.KernelLimitError` (exit 5: not checked, not invalid);
8. **consistency** -- no verified lower end exceeds a verified upper end at the same or a larger
   tolerance (``r_eps`` is non-increasing in eps): if one does, the kernel is wrong, and
   :class:`~softrank_cert.errors.InternalInvariantError` (exit 4) says so (:func:`check_consistency`).

Three entry points share the steps: a file (:func:`verify_certificate_file`: step 0 reads it),
its bytes (:func:`verify_certificate_bytes`) and an already parsed document
(:func:`verify_certificate_document`, which encodes the dict to bytes and goes the bytes way, so
a float or a non-JSON value in it is refused exactly as in a file).  None of them writes anything.

This module only orchestrates: every verdict comes from ``softrank_cert.kernel`` (which checks
its own inputs again: it trusts no caller).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ParamSpec, TypeVar
from collections.abc import Callable, Iterable, Iterator, Mapping

from .certio.certificate import (Bracket, Certificate, check_size, decode_certificate, parse_json_strict,
                                 read_certificate_bytes)
from .certio.signing import verify_document
from .certio.verified import trivial_needs_arithmetic
from .errors import (
    EXIT_INCONCLUSIVE, EXIT_REJECTED, EXIT_VERIFIED, CertificateFormatError, InternalInvariantError, InvalidInputError,
    KernelLimitError, SignatureError, SizeLimitError,
)
from .kernel import (
    DEFAULT_MAX_PREC, OUT_OF_MEMORY, Operator, Status, Verdict, parse_tolerance, verify_lower, verify_trivial_lower,
    verify_trivial_upper, verify_upper,
)

#: One ``(lower, upper)`` kernel verdict pair per bracket, in file order.
Pairs = tuple[tuple[Verdict, Verdict], ...]
#: A kernel check: (operator, eps, rank, arrays...) -> Verdict.
Check = Callable[..., Verdict]
#: The four checks of one kernel: verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper.
Checks = tuple[Check, Check, Check, Check]
#: One kernel call of a bracket end: (check, positional arguments, keyword options, claim text).
Claim = tuple[Check, tuple[Any, ...], dict[str, Any], str]
_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclass(frozen=True, eq=False)
class VerificationResult:
    """What re-checking one certificate established: one ``(lower, upper)`` kernel verdict
    pair per bracket, in file order (``sc.verify`` and ``softrank-verify`` return this)."""

    source: str
    operator_id: str
    signer: str | None
    pairs: Pairs = field(repr=False)
    #: The decoded certificate whose claims were checked (the same bytes, decoded once).
    certificate: Certificate | None = field(default=None, repr=False)

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """All verdicts in file order (lower, upper, lower, upper, ...)."""
        return tuple(v for pair in self.pairs for v in pair)

    @property
    def path(self) -> str:
        """The source as ``softrank-verify`` names it (the file path, ``<bytes>`` or ``<document>``)."""
        return self.source

    @property
    def ok(self) -> bool:
        """True when every claim is VERIFIED."""
        return all(v.status is Status.VERIFIED for v in self.verdicts)

    @property
    def exit_code(self) -> int:
        """The ``softrank-verify`` exit code of this certificate (0, 1 or 3)."""
        statuses = {v.status for v in self.verdicts}
        if Status.REJECTED in statuses:
            return EXIT_REJECTED
        if Status.INCONCLUSIVE in statuses:
            return EXIT_INCONCLUSIVE
        return EXIT_VERIFIED

    def __iter__(self) -> Iterator[tuple[Verdict, Verdict]]:
        return iter(self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def __repr__(self) -> str:
        def short(v: Verdict) -> str:
            return v.rank.__str__() if v.status is Status.VERIFIED else f"{v.rank}:{v.status.value}"

        body = ", ".join(f"{lo.eps}: [{short(lo)}, {short(up)}]" for lo, up in self.pairs)
        status = "all VERIFIED" if self.ok else "NOT all verified"
        signed = f"; signed by {self.signer.split('#', 1)[0]}" if self.signer else "; unsigned"
        return f"<VerificationResult {self.operator_id}: {status}; eps {body}{signed}>"


def check_signature(document: dict[str, Any], *, trusted_keys: frozenset[str] | None,
                    require_signature: bool) -> str | None:
    """Step 6: the signer's verification method, or None for an unsigned certificate."""
    if "proof" not in document:
        if require_signature or trusted_keys is not None:
            raise SignatureError("certificate is not signed (a signature is required)")
        return None
    signer = verify_document(document)
    if trusted_keys is not None and signer.split("#", 1)[0] not in trusted_keys:
        raise SignatureError(f"signer {signer.split('#', 1)[0]} is not in the trusted keys")
    return signer


#: Checkers that step 7 can use: the kernel with its row-block float64 path first, then its
#: float64 path, then Arb balls for what neither decides (``auto``, the default), the Arb balls
#: only, the float64 path only, the row-block path only (undecided -> INCONCLUSIVE), or the
#: exact-rational second kernel.
KERNELS = ("auto", "arb", "float64", "rowblock", "exact")


def _kernel_functions(kernel: str) -> Checks:
    """(verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper) of one kernel."""
    if kernel in ("auto", "arb", "float64", "rowblock"):
        lower = functools.partial(verify_lower, engine=kernel)
        upper = functools.partial(verify_upper, engine=kernel)
        trivial_lower = functools.partial(verify_trivial_lower, engine=kernel)
        trivial_upper = functools.partial(verify_trivial_upper, engine=kernel)
        return lower, trivial_lower, trivial_upper, upper
    if kernel == "exact":
        from . import exact_kernel as ek  # second trusted kernel (softrank_cert/exact_kernel)

        wrap = _within_exact_limits
        return (wrap(ek.verify_lower), wrap(ek.verify_trivial_lower), wrap(ek.verify_trivial_upper),
                wrap(ek.verify_upper))
    raise InvalidInputError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")


def _within_exact_limits(check: Callable[_P, _R]) -> Callable[_P, _R]:
    """The exact kernel refuses operators and ranks beyond its limits with SizeLimitError: for a
    certificate that decoded fine that is not invalid input but a claim this checker cannot
    take, so it becomes :class:`KernelLimitError` (status "not checked", exit 5)."""
    @functools.wraps(check)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return check(*args, **kwargs)
        except SizeLimitError as exc:
            raise KernelLimitError(f"not checked: {exc}") from None
    return wrapped


def check_claims(certificate: Certificate, *, max_prec: int = DEFAULT_MAX_PREC, kernel: str = "auto",
                 memory_limit: int | None = None) -> Pairs:
    """Step 7: one ``(lower, upper)`` kernel verdict pair per bracket, in file order.

    With ``kernel`` ``auto`` or ``arb``, a claim that needs the Arb path (``auto``: one that the
    float64 path leaves undecided) is first sized with :func:`~softrank_cert.util.memory.arb_check_bytes`:
    the kernel is called with the highest precision of the schedule whose enclosures fit in
    ``memory_limit`` bytes (default :func:`~softrank_cert.util.memory.process_limit`: a safe share of
    the machine, within any address-space limit; a :class:`~softrank_cert.util.memory.NamedLimit`
    is named so in a refusal, a plain one as ``--max-memory``).  When even 64 bits do not fit, or the claim is
    still INCONCLUSIVE where more precision would not fit, the certificate is *not checked*:
    :class:`KernelLimitError` (exit 5) with one line, raised before the kernel allocates -- never
    a process killed or aborted by a failed allocation."""
    checks = _kernel_functions(kernel)
    op = certificate.operator
    if kernel == "exact":  # refuse an operator beyond the exact kernel's limits before any claim
        from .exact_kernel import check_limits

        _within_exact_limits(check_limits)(op)
    run: Callable[[Check, tuple[Any, ...], dict[str, Any], str, str], Verdict]
    if kernel in ("auto", "arb"):
        run = _MemoryGuard(certificate, max_prec, kernel, memory_limit)
    else:
        def run(check: Check, args: tuple[Any, ...], options: dict[str, Any], claim: str, eps: str) -> Verdict:
            return check(*args, **options, max_prec=max_prec)

    def check_one(check: Check, args: tuple[Any, ...], options: dict[str, Any], claim: str, eps: str) -> Verdict:
        if _needs_no_arithmetic(check, args, checks):  # nothing to size: never refused for memory
            return check(*args, **options, max_prec=max_prec)
        return run(check, args, options, claim, eps)

    return tuple((check_one(*lower, bracket.eps), check_one(*upper, bracket.eps))
                 for bracket in certificate.brackets for lower, upper in [_claims(op, bracket, checks)])


def _needs_no_arithmetic(check: Check, args: tuple[Any, ...], checks: Checks) -> bool:
    """A trivial claim the kernel decides without arithmetic
    (:func:`~softrank_cert.certio.verified.trivial_needs_arithmetic`)."""
    _lower, trivial_lower, trivial_upper, _upper = checks
    if check is not trivial_lower and check is not trivial_upper:
        return False
    op, _eps, rank = args
    return not trivial_needs_arithmetic(op, "lower" if check is trivial_lower else "upper", rank)


def _claims(op: Operator, bracket: Bracket, checks: Checks) -> tuple[Claim, Claim]:
    """The kernel calls of one bracket's two ends, ``(check, args, options, claim)``: a trivial
    end (no arrays) or one with its certificate / witness, lower then upper."""
    verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper = checks
    eps, lo, up = bracket.eps, bracket.lower, bracket.upper
    lower: tuple[Check, tuple[Any, ...], dict[str, Any]]
    upper: tuple[Check, tuple[Any, ...], dict[str, Any]]
    lower = ((verify_trivial_lower, (op, eps, lo.k), {}) if lo.X is None
             else (verify_lower, (op, eps, lo.k, lo.X, lo.Y), {"method": lo.method}))
    upper = ((verify_trivial_upper, (op, eps, up.r), {}) if up.U is None
             else (verify_upper, (op, eps, up.r, up.U, up.W), {"method": up.construction}))
    return (*lower, f"r_eps >= {lo.k}"), (*upper, f"r_eps <= {up.r}")


class _MemoryGuard:
    """Runs each claim of one certificate as ``kernel="auto"`` / ``"arb"`` would, with the Arb
    path's precision capped by what fits in memory (see :func:`check_claims`).

    ``auto`` is the row-block float64 path, then the float64 path, then the Arb balls.  When
    some Arb precision fits, that is one kernel call, ``engine="auto"`` at the capped precision
    (its verdict's reason names a float64 path that ran out of memory).  When none fits, the two
    float64 paths run alone (``engine="rowblock"``, then ``engine="float64"``) and a claim both
    leave INCONCLUSIVE is refused before Arb allocates anything.  The verdicts are the kernel's,
    unchanged.
    """

    def __init__(self, certificate: Certificate, max_prec: int, kernel: str, memory_limit: int | None) -> None:
        from .kernel import precision_schedule
        from .util.memory import NamedLimit, check_plan, process_limit

        op = certificate.operator
        self.max_prec = max_prec
        self.kernel = kernel
        self.schedule = precision_schedule(max_prec)
        self.limit = process_limit(None) if memory_limit is None else int(memory_limit)
        self.limit_name = memory_limit.name if isinstance(memory_limit, NamedLimit) else "--max-memory"
        m, n = op.shape
        self.shape = (m, n)
        d = op.arrays["Q"].shape[1] if op.kind == "qk" else 0
        width = max([0] + [b.lower.k for b in certificate.brackets if b.lower.X is not None]
                    + [b.upper.r for b in certificate.brackets if b.upper.U is not None])
        # One cap for the whole certificate: its enclosures are cached on the one operator.  The
        # entrywise float64 path needs ~20 m x N temporaries: never started beyond the limit.
        plan = check_plan(m, n, self.limit, self.schedule, d=d, width=width, kind=op.kind)
        self.need, self.cap, self.float64_too_big = plan.need, plan.cap, not plan.float64

    def _refuse(self, what: str, index: int) -> KernelLimitError:
        from .util.memory import format_bytes

        m, n = self.shape
        return KernelLimitError(
            f"not checked: {what}; the Arb check of this {m} x {n} operator at {self.schedule[index]} bits needs "
            f"about {format_bytes(self.need[index])} of memory, more than the {format_bytes(self.limit)} this "
            f"process may use ({self.limit_name}; see docs/campaigns.md)")

    def __call__(self, check: Check, args: tuple[Any, ...], options: dict[str, Any], claim: str, eps: str) -> Verdict:
        from .util.memory import float64_check_bytes, format_bytes

        if self.cap is None:
            if self.kernel == "arb":
                raise self._refuse(f"{claim} at eps {eps} needs the Arb path", 0)
            reasons = []
            for engine in ("rowblock", "float64")[: 1 if self.float64_too_big else 2]:
                verdict = check(*args, **options, max_prec=self.max_prec, engine=engine)
                if verdict.status is not Status.INCONCLUSIVE:
                    return verdict
                reasons.append(verdict.reason)
            if self.float64_too_big:
                reasons.append(f"float64 path: not run ({OUT_OF_MEMORY}: it needs about "
                               f"{format_bytes(float64_check_bytes(*self.shape))})")
            memory = "; ".join(r for r in reasons if OUT_OF_MEMORY in r)
            cause = f" ({memory})" if memory else ""
            raise self._refuse(f"the float64 paths cannot decide {claim} at eps {eps}{cause}", 0)
        verdict = check(*args, **options, max_prec=self.cap, engine=self.kernel)
        if verdict.status is Status.INCONCLUSIVE and self.cap != self.schedule[-1]:
            index = self.schedule.index(self.cap) + 1
            raise self._refuse(f"{claim} at eps {eps} is INCONCLUSIVE at {self.cap} bits", index)
        return verdict


def check_consistency(verdicts: Iterable[Verdict], operator_id: str,
                      eps_values: Mapping[str, Fraction] | None = None) -> None:
    """Step 8: a verified ``r_eps1 >= k`` and a verified ``r_eps2 <= r`` with eps2 <= eps1 force k <= r
    (``proofs/bracket-consistency.md``, Theorem B); a violation is a kernel bug (exit 4).

    ``eps_values``: the exact rationals of the eps strings, as step 5 parsed them (any eps
    missing there is parsed here, once)."""
    values = dict(eps_values or {})

    def value(eps: str) -> Fraction:
        if eps not in values:
            values[eps] = parse_tolerance(eps)
        return values[eps]

    verdicts = tuple(verdicts)
    lowers = [v for v in verdicts if v.side == "lower" and v.status is Status.VERIFIED]
    uppers = [v for v in verdicts if v.side == "upper" and v.status is Status.VERIFIED]
    for lo in lowers:
        for up in uppers:
            if value(up.eps) <= value(lo.eps) and lo.rank > up.rank:
                raise InternalInvariantError(
                    f"{operator_id}: verified r_eps >= {lo.rank} at eps {lo.eps} contradicts verified "
                    f"r_eps <= {up.rank} at eps {up.eps}: the checker is unsound, report this bug"
                )


def verify_certificate_file(path: str | os.PathLike[str], *, trusted_keys: frozenset[str] | None = None,
                            require_signature: bool = False, max_prec: int = DEFAULT_MAX_PREC,
                            kernel: str = "auto", memory_limit: int | None = None) -> VerificationResult:
    """Steps 0-8 for one file; raises InvalidInputError (exit 2) on invalid input and
    KernelLimitError (exit 5) when ``kernel="exact"`` cannot take the certificate, or the Arb
    path would need more than ``memory_limit`` bytes (see :func:`check_claims`)."""
    raw = read_certificate_bytes(path)                                   # 0.
    return _verify(raw, str(path), trusted_keys=trusted_keys, require_signature=require_signature,
                   max_prec=max_prec, kernel=kernel, memory_limit=memory_limit)


def verify_certificate_bytes(raw: bytes, *, source: str = "<bytes>", trusted_keys: frozenset[str] | None = None,
                             require_signature: bool = False, max_prec: int = DEFAULT_MAX_PREC,
                             kernel: str = "auto", memory_limit: int | None = None) -> VerificationResult:
    """Steps 0-8 for a certificate file's bytes (``source`` names it in the report)."""
    check_size(raw, source)                                              # 0.
    return _verify(bytes(raw), source, trusted_keys=trusted_keys, require_signature=require_signature,
                   max_prec=max_prec, kernel=kernel, memory_limit=memory_limit)


def verify_certificate_document(document: Mapping[str, Any], *, source: str = "<document>",
                                trusted_keys: frozenset[str] | None = None, require_signature: bool = False,
                                max_prec: int = DEFAULT_MAX_PREC, kernel: str = "auto",
                                memory_limit: int | None = None) -> VerificationResult:
    """Steps 0-8 for a parsed certificate (e.g. ``json.load`` output).

    The document is encoded to JSON text and verified as those bytes, so it is held to the rules
    of a file: no float, NaN, non-string key or non-JSON value (a file can be checked only for
    duplicate keys before parsing; a dict has none)."""
    try:
        text = json.dumps(_plain_json(document), allow_nan=False)  # ASCII: lone surrogates stay escapes
    except RecursionError:
        raise CertificateFormatError("JSON nesting is too deep") from None
    except (TypeError, ValueError) as exc:  # NaN / Infinity, a mapping json cannot encode
        raise CertificateFormatError(f"not valid JSON: {exc}") from None
    return verify_certificate_bytes(text.encode("ascii"), source=source, trusted_keys=trusted_keys,
                                    require_signature=require_signature, max_prec=max_prec, kernel=kernel,
                                    memory_limit=memory_limit)


def _plain_json(value: Any, depth: int = 0) -> Any:
    """``value`` if it is JSON data (dict with str keys, list, str, int, float, bool, None)."""
    if depth > 200:
        raise CertificateFormatError("JSON nesting is too deep")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CertificateFormatError(f"certificate document has a non-string key {key!r:.60}")
            _plain_json(item, depth + 1)
        return dict(value) if depth == 0 else value
    if isinstance(value, (list, tuple)):
        for item in value:
            _plain_json(item, depth + 1)
        return value
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise CertificateFormatError(f"certificate document holds a {type(value).__name__}, which is not JSON data")


def _verify(raw: bytes, source: str, *, trusted_keys: frozenset[str] | None, require_signature: bool,
            max_prec: int, kernel: str, memory_limit: int | None) -> VerificationResult:
    """Steps 1-8 on size-checked bytes."""
    document = parse_json_strict(raw)                                    # 1.
    certificate = decode_certificate(document)                           # 2.-5.
    signer = check_signature(document, trusted_keys=trusted_keys,        # 6.
                             require_signature=require_signature)
    pairs = check_claims(certificate, max_prec=max_prec, kernel=kernel, memory_limit=memory_limit)  # 7.
    check_consistency((v for pair in pairs for v in pair), certificate.operator_id,  # 8.
                      {b.eps: b.eps_value for b in certificate.brackets if b.eps_value is not None})
    return VerificationResult(source, certificate.operator_id, signer, pairs, certificate)
