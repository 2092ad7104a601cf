"""Re-checking a certificate file end to end (the engine behind ``softrank-verify``).

Numbered steps, each failing closed with an :class:`~softrank_cert.errors.InvalidInputError`
(exit 2) before the next one runs:

1. read the file (size-checked) and parse JSON strictly; 2. check the JSON Schema; 3. decode arrays
(size limits, base64, SHA-256) and the operator; 4. check the Data Integrity proof (if
present; required with ``require_signature``; its signer must be trusted when
``trusted_keys`` is given); 5. decide every claim with the trusted kernel (a certificate beyond
the limits of ``kernel="exact"``, or whose Arb check would need more memory than this process
may use, raises :class:`~softrank_cert.errors.KernelLimitError`, exit 5: not checked, not
invalid); 6. check that
no verified lower end exceeds a verified upper end at the same or a larger tolerance
(``r_eps`` is non-increasing in eps) -- if it does, the kernel is wrong: fail loudly.

Step 1 has three entry points that share steps 2-6: a file (:func:`verify_certificate_file`),
its bytes (:func:`verify_certificate_bytes`) and an already parsed document
(:func:`verify_certificate_document`, which re-encodes the dict and parses it strictly, so a
float or a non-JSON value in it is refused exactly as in a file).  None of them writes anything.

This module only orchestrates: every verdict comes from ``softrank_cert.kernel``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .certio.certificate import MAX_CERTIFICATE_BYTES, Certificate, decode_certificate, parse_json_strict, read_json_file
from .certio.signing import verify_document
from .errors import (
    EXIT_INCONCLUSIVE, EXIT_REJECTED, EXIT_VERIFIED, CertificateFormatError, InternalInvariantError, InvalidInputError,
    KernelLimitError, SignatureError, SizeLimitError,
)
from .kernel import (
    DEFAULT_MAX_PREC, Status, Verdict, parse_tolerance, verify_lower, verify_trivial_lower,
    verify_trivial_upper, verify_upper,
)


@dataclass(frozen=True)
class CertificateReport:
    """What re-checking one certificate established."""

    path: str
    operator_id: str
    signer: str | None
    verdicts: tuple[Verdict, ...]
    #: The decoded certificate whose claims were checked (the same bytes, decoded once).
    certificate: Certificate | None = field(default=None, repr=False, compare=False)

    @property
    def exit_code(self) -> int:
        statuses = {v.status for v in self.verdicts}
        if Status.REJECTED in statuses:
            return EXIT_REJECTED
        if Status.INCONCLUSIVE in statuses:
            return EXIT_INCONCLUSIVE
        return EXIT_VERIFIED


def check_signature(document: dict, *, trusted_keys: frozenset[str] | None, require_signature: bool) -> str | None:
    """Step 4: the signer's verification method, or None for an unsigned certificate."""
    if "proof" not in document:
        if require_signature or trusted_keys is not None:
            raise SignatureError("certificate is not signed (a signature is required)")
        return None
    signer = verify_document(document)
    if trusted_keys is not None and signer.split("#", 1)[0] not in trusted_keys:
        raise SignatureError(f"signer {signer.split('#', 1)[0]} is not in the trusted keys")
    return signer


#: Checkers that step 5 can use: the kernel with its float64 path first and Arb balls for what
#: that cannot decide (``auto``, the default), the Arb balls only, the float64 path only
#: (undecided -> INCONCLUSIVE), or the exact-rational second kernel.
KERNELS = ("auto", "arb", "float64", "exact")


def _kernel_functions(kernel: str):
    """(verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper) of one kernel."""
    if kernel in ("auto", "arb", "float64"):
        lower = functools.partial(verify_lower, engine=kernel)
        upper = functools.partial(verify_upper, engine=kernel)
        trivial_lower = functools.partial(verify_trivial_lower, engine=kernel)
        trivial_upper = functools.partial(verify_trivial_upper, engine=kernel)
        return lower, trivial_lower, trivial_upper, upper
    if kernel == "exact":
        from . import exact_kernel as ek  # second trusted kernel (softrank_cert/exact_kernel)

        return tuple(_within_exact_limits(check) for check in
                     (ek.verify_lower, ek.verify_trivial_lower, ek.verify_trivial_upper, ek.verify_upper))
    raise InvalidInputError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")


def _within_exact_limits(check):
    """The exact kernel refuses operators and ranks beyond its limits with SizeLimitError: for a
    certificate that decoded fine that is not invalid input but a claim this checker cannot
    take, so it becomes :class:`KernelLimitError` (status "not checked", exit 5)."""
    @functools.wraps(check)
    def wrapped(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except SizeLimitError as exc:
            raise KernelLimitError(f"not checked: {exc}") from None
    return wrapped


def check_claims(certificate: Certificate, *, max_prec: int = DEFAULT_MAX_PREC, kernel: str = "auto",
                 memory_limit: int | None = None) -> tuple[Verdict, ...]:
    """Step 5: one kernel verdict per bracket end, in file order (lower, upper per bracket).

    With ``kernel`` ``auto`` or ``arb``, a claim that needs the Arb path (``auto``: one that the
    float64 path leaves undecided) is first sized with :func:`~softrank_cert.memory.arb_check_bytes`:
    the kernel is called with the highest precision of the schedule whose enclosures fit in
    ``memory_limit`` bytes (default :func:`~softrank_cert.memory.process_limit`: a safe share of
    the machine, within any address-space limit).  When even 64 bits do not fit, or the claim is
    still INCONCLUSIVE where more precision would not fit, the certificate is *not checked*:
    :class:`KernelLimitError` (exit 5) with one line, raised before the kernel allocates -- never
    a process killed or aborted by a failed allocation."""
    verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper = _kernel_functions(kernel)
    op = certificate.operator
    if kernel == "exact":  # refuse an operator beyond the exact kernel's limits before any claim
        from .exact_kernel import check_limits

        _within_exact_limits(check_limits)(op)
    decide = _MemoryGuard(certificate, max_prec, kernel, memory_limit) if kernel in ("auto", "arb") else None
    verdicts: list[Verdict] = []
    for bracket in certificate.brackets:
        lower, upper = bracket.lower, bracket.upper
        if lower.X is None:
            claim = (verify_trivial_lower, (op, bracket.eps, lower.k), {}, f"r_eps >= {lower.k}")
        else:
            claim = (verify_lower, (op, bracket.eps, lower.k, lower.X, lower.Y), {"method": lower.method},
                     f"r_eps >= {lower.k}")
        verdicts.append(decide(*claim, bracket.eps) if decide else claim[0](*claim[1], **claim[2], max_prec=max_prec))
        if upper.U is None:
            claim = (verify_trivial_upper, (op, bracket.eps, upper.r), {}, f"r_eps <= {upper.r}")
        else:
            claim = (verify_upper, (op, bracket.eps, upper.r, upper.U, upper.W), {"method": upper.construction},
                     f"r_eps <= {upper.r}")
        verdicts.append(decide(*claim, bracket.eps) if decide else claim[0](*claim[1], **claim[2], max_prec=max_prec))
    return tuple(verdicts)


class _MemoryGuard:
    """Runs each claim of one certificate as ``kernel="auto"`` / ``"arb"`` would, with the Arb
    path's precision capped by what fits in memory (see :func:`check_claims`).

    ``auto`` is the float64 path first and, for a claim it leaves INCONCLUSIVE, the Arb balls:
    exactly the kernel's own ``engine="auto"``, in two calls (``engine="float64"``, then
    ``engine="arb"``) so that the Arb call can be sized -- and refused -- in between.  The
    verdicts are the kernel's, unchanged.
    """

    def __init__(self, certificate: Certificate, max_prec: int, kernel: str, memory_limit: int | None) -> None:
        from .kernel.precision import precision_schedule
        from .memory import arb_check_bytes, process_limit

        op = certificate.operator
        self.max_prec = max_prec
        self.engine_first = kernel == "auto"
        self.schedule = precision_schedule(max_prec)
        self.limit = process_limit(None) if memory_limit is None else int(memory_limit)
        m, n = op.shape
        self.shape = (m, n)
        d = op.arrays["Q"].shape[1] if op.kind == "qk" else 0
        width = max([0] + [b.lower.k for b in certificate.brackets if b.lower.X is not None]
                    + [b.upper.r for b in certificate.brackets if b.upper.U is not None])
        # One cap for the whole certificate: its enclosures are cached on the one operator.
        self.need = [arb_check_bytes(m, n, self.schedule[: i + 1], d=d, width=width, kind=op.kind)
                     for i in range(len(self.schedule))]
        fits = [p for p, need in zip(self.schedule, self.need) if need <= self.limit]  # a prefix: need grows
        self.cap = fits[-1] if fits else None

    def _refuse(self, what: str, index: int) -> KernelLimitError:
        from .memory import format_bytes

        m, n = self.shape
        return KernelLimitError(
            f"not checked: {what}; the Arb check of this {m} x {n} operator at {self.schedule[index]} bits needs "
            f"about {format_bytes(self.need[index])} of memory, more than the {format_bytes(self.limit)} this "
            f"process may use (--max-memory; see README, Long campaigns)")

    def __call__(self, check: Any, args: tuple, options: dict[str, Any], claim: str, eps: str) -> Verdict:
        if self.engine_first:
            verdict = check(*args, **options, max_prec=self.max_prec, engine="float64")
            if verdict.status is not Status.INCONCLUSIVE:
                return verdict
            what = f"the float64 path cannot decide {claim} at eps {eps}"
        else:
            what = f"{claim} at eps {eps} needs the Arb path"
        if self.cap is None:
            raise self._refuse(what, 0)
        verdict = check(*args, **options, max_prec=self.cap, engine="arb")
        if verdict.status is Status.INCONCLUSIVE and self.cap != self.schedule[-1]:
            index = self.schedule.index(self.cap) + 1
            raise self._refuse(f"{claim} at eps {eps} is INCONCLUSIVE at {self.cap} bits", index)
        return verdict


def check_consistency(verdicts: tuple[Verdict, ...], operator_id: str) -> None:
    """Step 6: a verified ``r_eps1 >= k`` and a verified ``r_eps2 <= r`` with eps2 <= eps1 force k <= r."""
    lowers = [v for v in verdicts if v.side == "lower" and v.status is Status.VERIFIED]
    uppers = [v for v in verdicts if v.side == "upper" and v.status is Status.VERIFIED]
    for lo in lowers:
        for up in uppers:
            if parse_tolerance(up.eps) <= parse_tolerance(lo.eps) and lo.rank > up.rank:
                raise InternalInvariantError(
                    f"{operator_id}: verified r_eps >= {lo.rank} at eps {lo.eps} contradicts verified "
                    f"r_eps <= {up.rank} at eps {up.eps}: the checker is unsound, report this bug"
                )


def verify_certificate_file(path: str | Path, *, trusted_keys: frozenset[str] | None = None,
                            require_signature: bool = False, max_prec: int = DEFAULT_MAX_PREC,
                            kernel: str = "auto", memory_limit: int | None = None) -> CertificateReport:
    """Steps 1-6 for one file; raises InvalidInputError (exit 2) on invalid input and
    KernelLimitError (exit 5) when ``kernel="exact"`` cannot take the certificate, or the Arb
    path would need more than ``memory_limit`` bytes (see :func:`check_claims`)."""
    document = read_json_file(path)                                  # 1
    return _check_document(document, str(path), trusted_keys=trusted_keys, require_signature=require_signature,
                           max_prec=max_prec, kernel=kernel, memory_limit=memory_limit)


def verify_certificate_bytes(raw: bytes, *, source: str = "<bytes>", trusted_keys: frozenset[str] | None = None,
                             require_signature: bool = False, max_prec: int = DEFAULT_MAX_PREC,
                             kernel: str = "auto", memory_limit: int | None = None) -> CertificateReport:
    """Steps 1-6 for a certificate file's bytes (``source`` names it in the report)."""
    if len(raw) > MAX_CERTIFICATE_BYTES:                             # 1
        raise CertificateFormatError(f"{source}: more than {MAX_CERTIFICATE_BYTES} bytes, the certificate size limit")
    document = parse_json_strict(bytes(raw))
    return _check_document(document, source, trusted_keys=trusted_keys, require_signature=require_signature,
                           max_prec=max_prec, kernel=kernel, memory_limit=memory_limit)


def verify_certificate_document(document: Mapping[str, Any], *, source: str = "<document>",
                                trusted_keys: frozenset[str] | None = None, require_signature: bool = False,
                                max_prec: int = DEFAULT_MAX_PREC, kernel: str = "auto",
                                memory_limit: int | None = None) -> CertificateReport:
    """Steps 1-6 for a parsed certificate (e.g. ``json.load`` output).

    The document is encoded to JSON text and parsed strictly again, so it is held to the rules
    of a file: no float, NaN, non-string key or non-JSON value (a file can be checked only for
    duplicate keys before parsing; a dict has none)."""
    try:
        text = json.dumps(_plain_json(document), allow_nan=False)  # 1 (ASCII: lone surrogates stay escapes)
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


def _check_document(document: Any, source: str, *, trusted_keys: frozenset[str] | None, require_signature: bool,
                    max_prec: int, kernel: str, memory_limit: int | None = None) -> CertificateReport:
    """Steps 2-6 on a strictly parsed document."""
    certificate = decode_certificate(document)                       # 2, 3
    signer = check_signature(document, trusted_keys=trusted_keys,    # 4
                             require_signature=require_signature)
    verdicts = check_claims(certificate, max_prec=max_prec, kernel=kernel, memory_limit=memory_limit)  # 5
    check_consistency(verdicts, certificate.operator_id)             # 6
    return CertificateReport(source, certificate.operator_id, signer, verdicts, certificate)
