"""Re-checking a certificate file end to end (the engine behind ``softrank-verify``).

Numbered steps, each failing closed with an :class:`~softrank_cert.errors.InvalidInputError`
(exit 2) before the next one runs:

1. read the file (size-checked) and parse JSON strictly; 2. check the JSON Schema; 3. decode arrays
(size limits, base64, SHA-256) and the operator; 4. check the Data Integrity proof (if
present; required with ``require_signature``; its signer must be trusted when
``trusted_keys`` is given); 5. decide every claim with the trusted kernel; 6. check that
no verified lower end exceeds a verified upper end at the same or a larger tolerance
(``r_eps`` is non-increasing in eps) -- if it does, the kernel is wrong: fail loudly.

This module only orchestrates: every verdict comes from ``softrank_cert.kernel``.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass
from pathlib import Path

from .certio.certificate import Certificate, decode_certificate, read_json_file
from .certio.signing import verify_document
from .errors import (
    EXIT_INCONCLUSIVE, EXIT_REJECTED, EXIT_VERIFIED, InternalInvariantError, InvalidInputError, SignatureError,
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

        return ek.verify_lower, ek.verify_trivial_lower, ek.verify_trivial_upper, ek.verify_upper
    raise InvalidInputError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")


def check_claims(certificate: Certificate, *, max_prec: int = DEFAULT_MAX_PREC, kernel: str = "auto") -> tuple[Verdict, ...]:
    """Step 5: one kernel verdict per bracket end, in file order (lower, upper per bracket)."""
    verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper = _kernel_functions(kernel)
    op = certificate.operator
    verdicts: list[Verdict] = []
    for bracket in certificate.brackets:
        lower, upper = bracket.lower, bracket.upper
        if lower.X is None:
            verdicts.append(verify_trivial_lower(op, bracket.eps, lower.k, max_prec=max_prec))
        else:
            verdicts.append(verify_lower(op, bracket.eps, lower.k, lower.X, lower.Y, method=lower.method, max_prec=max_prec))
        if upper.U is None:
            verdicts.append(verify_trivial_upper(op, bracket.eps, upper.r, max_prec=max_prec))
        else:
            verdicts.append(verify_upper(op, bracket.eps, upper.r, upper.U, upper.W, method=upper.construction, max_prec=max_prec))
    return tuple(verdicts)


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
                            kernel: str = "auto") -> CertificateReport:
    """Steps 1-6 for one file; raises InvalidInputError (exit 2) on invalid input."""
    document = read_json_file(path)                                  # 1
    certificate = decode_certificate(document)                       # 2, 3
    signer = check_signature(document, trusted_keys=trusted_keys,    # 4
                             require_signature=require_signature)
    verdicts = check_claims(certificate, max_prec=max_prec, kernel=kernel)  # 5
    check_consistency(verdicts, certificate.operator_id)             # 6
    return CertificateReport(str(path), certificate.operator_id, signer, verdicts)
