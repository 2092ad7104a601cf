"""One exception hierarchy for the whole toolkit; the CLI catches :class:`SoftrankError`.

Every error carries the process exit code the command-line contract (docs/design.md section 4)
assigns to it, and its message is a single line that says what is wrong.
"""

from __future__ import annotations

import os
from pathlib import Path

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


class OutputWriteError(InvalidInputError):
    """An output file could not be written (a full disk, an unwritable folder): one line, exit 2;
    nothing partial is left (the temporary file is removed, the target keeps its old content)."""

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(f"cannot write {path}: {exc.strerror or exc}")
        self.errno = exc.errno


class WorkerError(SoftrankError):
    """A task failed in a worker; the message is one line and the exit code is the task's."""

    def __init__(self, message: str, exit_code: int = EXIT_INTERNAL) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class CertificateRefusedError(SoftrankError):
    """A certificate whose claims do not all verify (exit code of ``softrank-verify``: 1 / 3)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class WireError(ValueError):
    """A worker's answer that is not what a task's result must be (``plumbing/wire.py``; the
    reason in one line).  Never reaches a user: the task is reported failed with it."""


class HeadRefusedError(Exception):
    """A head of a bracket folder whose certificate cannot be used for its KV budgets
    (``studies/kv_budgets/heads.py``; the reason in one line).  Never reaches a user as an error:
    the head is listed as failed with it."""


#: The most characters of an unexpected exception's own message that :func:`describe` keeps.
DESCRIBE_CHARS = 300


def describe(exc: BaseException, where: str = "") -> str:
    """The one line that stands for ``exc``: a :class:`SoftrankError` its own message, a
    ``MemoryError`` "out of memory for this input", anything else -- a bug -- ``internal
    error{where}: TYPE: message`` (the message on one line, at most :data:`DESCRIBE_CHARS`
    characters; ``where`` e.g. " in a worker")."""
    if isinstance(exc, SoftrankError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "out of memory for this input"
    text = " ".join(str(exc).split())[:DESCRIBE_CHARS]
    return f"internal error{where}: {type(exc).__name__}: {text}"


def debugging() -> bool:
    """Whether ``SOFTRANK_DEBUG`` is set: then an unexpected exception in this process is
    re-raised with its traceback instead of being turned into one line."""
    return bool(os.environ.get("SOFTRANK_DEBUG"))
