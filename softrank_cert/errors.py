"""One exception hierarchy for the whole toolkit; the CLI catches :class:`SoftrankError`.

Every error carries the process exit code the command-line contract (docs/design.md section 4)
assigns to it, and its message is a single line that says what is wrong.
"""

from __future__ import annotations

#: Exit codes of the command-line contract.
EXIT_VERIFIED = 0
EXIT_REJECTED = 1
EXIT_INVALID_INPUT = 2
EXIT_INCONCLUSIVE = 3
#: A verified lower end above a verified upper end, or any other broken invariant: a bug.
EXIT_INTERNAL = 4
#: A valid certificate beyond the limits of the chosen checker (``--kernel exact``, or an Arb
#: check larger than ``--max-memory``): not checked.
EXIT_NOT_CHECKED = 5
#: A campaign ran to its end but some operators failed (after a retry) or were refused for
#: memory: each is recorded in the campaign manifest with its one-line reason.
EXIT_SOME_FAILED = 6


class SoftrankError(Exception):
    """Base class of every error the toolkit raises on purpose."""

    exit_code: int = EXIT_INVALID_INPUT

    def __str__(self) -> str:  # one line, always
        return " ".join(super().__str__().split())


class InvalidInputError(SoftrankError):
    """The input is unreadable or malformed (exit 2)."""


class InvalidOperatorError(InvalidInputError):
    """Operator arrays, kind, beta or mask are not a valid attention operator."""


class InvalidToleranceError(InvalidInputError):
    """A tolerance is not a positive exact decimal string."""


class SizeLimitError(InvalidInputError):
    """A declared size is absurd; refused before anything is allocated."""


class CertificateFormatError(InvalidInputError):
    """A certificate is not valid JSON, fails the schema, or is internally inconsistent."""


class HashMismatchError(CertificateFormatError):
    """An array's bytes do not match its declared SHA-256."""


class SignatureError(InvalidInputError):
    """A Data Integrity proof is missing (when required), malformed, untrusted or invalid."""


class KeyFileError(InvalidInputError):
    """A key file is unreadable or malformed."""


class KernelLimitError(SoftrankError):
    """A valid certificate that the chosen checker cannot take (the exact-rational kernel checks
    at most m*N = 4096 entries, d = 1024, k = 32, r = 64): nothing was decided, nothing is wrong
    with the input, another kernel (``--kernel auto`` or ``arb``) can check it (exit 5)."""

    exit_code = EXIT_NOT_CHECKED


class FloatingPointEnvironmentError(SoftrankError):
    """This process does not do IEEE 754 arithmetic (flush-to-zero, denormals-are-zero or a
    directed rounding mode is active, e.g. after loading a library built with -ffast-math):
    exact conversion of doubles is not guaranteed, so nothing is decided (exit 4)."""

    exit_code = EXIT_INTERNAL


class InternalInvariantError(SoftrankError):
    """Something that mathematics forbids happened (e.g. verified lower > verified upper).

    This is a bug in the checker and must fail loudly (exit 4).
    """

    exit_code = EXIT_INTERNAL
