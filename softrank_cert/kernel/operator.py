"""The attention operator as exact data (TRUSTED).

An :class:`Operator` is the exact real matrix ``A`` (m queries x N keys) that docs/design.md section 1
defines from exact float64 inputs: ``qk``, ``A = softmax_rows(beta * Q K^T)`` (Q m x d, K N x d);
``scores``, ``A = softmax_rows(S)``; ``probabilities``, ``A`` itself.  ``beta`` is the exact real
``1/sqrt(d)`` (``"inv_sqrt_d"``) or an exact rational.  The causal mask sets ``A_ij = 0`` exactly
for ``j > i + (N - m)`` (the m queries are the *last* m of N positions), so it needs ``m <= N``.
Arrays are copied into immutable little-endian float64 buffers behind a read-only mapping (the
kernel keeps no state on an operator); sizes are checked against :data:`MAX_DIM` and
:data:`MAX_ENTRIES` before any Arb object is allocated.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from collections.abc import Mapping

import numpy as np

from ..errors import InvalidInputError, InvalidOperatorError, SizeLimitError
from .exact_inputs import float_to_decimal_string, parse_decimal

KINDS = ("qk", "scores", "probabilities")
MASKS = ("none", "causal")
#: Largest accepted length of any array dimension.
MAX_DIM = 16384
#: Largest accepted number of entries of any one array (2**26 doubles = 512 MiB: 8192 x 8192).
MAX_ENTRIES = 1 << 26
_REQUIRED = {"qk": ("Q", "K"), "scores": ("S",), "probabilities": ("A",)}


def check_shape(name: str, shape: tuple[int, ...]) -> None:
    """Refuse absurd shapes before anything is allocated (raises :class:`SizeLimitError`)."""
    if len(shape) != 2:
        raise InvalidOperatorError(f"array {name} must be 2-D, has shape {list(shape)}")
    for n in shape:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InvalidOperatorError(f"array {name} has invalid shape {list(shape)}")
        if n > MAX_DIM:
            raise SizeLimitError(f"array {name} dimension {n} exceeds the limit {MAX_DIM}")
    if shape[0] * shape[1] > MAX_ENTRIES:
        raise SizeLimitError(f"array {name} has {shape[0] * shape[1]} entries, limit {MAX_ENTRIES}")


def checked_float64(name: str, value: object, shape: tuple[int, int] | None = None,
                    error: type[InvalidInputError] = InvalidOperatorError) -> np.ndarray:
    """``value`` as a finite 2-D float64 array of acceptable size (and ``shape``), checked before any
    conversion (``proofs/exact-inputs.md`` E2); ``error``: InvalidInputError for witness factors."""
    array = np.asarray(value)
    if array.dtype != np.float64:
        raise error(f"array {name} must be float64, is {array.dtype}")
    if array.ndim != 2:
        raise error(f"array {name} must be 2-D, has shape {list(array.shape)}")
    check_shape(name, array.shape)
    if shape is not None and array.shape != shape:
        raise error(f"array {name} has shape {list(array.shape)}, expected {list(shape)}")
    if not np.isfinite(array).all():
        raise error(f"array {name} contains NaN or Inf")
    return array


def _frozen_copy(name: str, value: object) -> np.ndarray:
    array = checked_float64(name, value)
    # A view of immutable bytes: read-only for good (numpy cannot make it writable again).
    return np.frombuffer(np.ascontiguousarray(array, dtype="<f8").tobytes(), dtype="<f8").reshape(array.shape)


def exact_float64(name: str, value: object) -> np.ndarray:
    """``value`` as float64 where that is exact: float64, float32/16 (each a double), |integers| <= 2**53."""
    array = np.asarray(value)
    if array.dtype.kind == "f" and array.dtype.itemsize <= 8:
        return array.astype(np.float64, copy=False)
    if array.dtype.kind in "iu":
        if array.size and int(np.abs(array.astype(object)).max()) > 2 ** 53:
            raise InvalidOperatorError(f"{name} has integers beyond 2**53: they are not exact float64 values")
        return array.astype(np.float64)
    raise InvalidOperatorError(f"{name} must hold real numbers (float64, float32 or integers), got dtype {array.dtype}")


def beta_text(beta: object) -> str:
    """The exact text of a score scale: None -> ``"inv_sqrt_d"`` (1/sqrt(d)); a decimal string as is (its grammar
    is checked by :class:`Operator`); an int or a finite float at its exact binary value (0.1 is not 1/10)."""
    if beta is None:
        return "inv_sqrt_d"
    if isinstance(beta, str):
        return beta
    if isinstance(beta, (int, np.integer)) and not isinstance(beta, bool):
        return str(int(beta))
    if isinstance(beta, (float, np.float32, np.float16)) and np.isfinite(beta):  # each a double: float() exact
        return float_to_decimal_string(float(beta))
    raise InvalidOperatorError(f"beta must be None, a decimal string, an int or a finite float, got {beta!r}")


@dataclass(frozen=True, eq=False, repr=False)
class Operator:
    """Exact attention operator (module docstring); ``beta`` is ``"inv_sqrt_d"`` or a plain decimal
    string (``qk`` only), exactly :attr:`beta_exact`."""

    kind: str
    arrays: Mapping[str, np.ndarray]
    beta: str = "inv_sqrt_d"
    mask: str = "none"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidOperatorError(f"operator kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.mask not in MASKS:
            raise InvalidOperatorError(f"mask must be 'none' or 'causal', got {self.mask!r}")
        wanted = _REQUIRED[self.kind]
        if sorted(self.arrays) != sorted(wanted):
            raise InvalidOperatorError(f"a {self.kind!r} operator needs exactly the arrays {', '.join(wanted)}, "
                                       f"got {', '.join(sorted(self.arrays)) or 'none'}")
        arrays = {name: _frozen_copy(name, self.arrays[name]) for name in wanted}
        object.__setattr__(self, "arrays", MappingProxyType(arrays))
        if self.kind == "qk":
            q, k = arrays["Q"], arrays["K"]
            if q.shape[1] != k.shape[1]:
                raise InvalidOperatorError(f"Q is {q.shape[0]}x{q.shape[1]} but K is {k.shape[0]}x{k.shape[1]}: "
                                           "head dimensions differ")
            if q.shape[0] * k.shape[0] > MAX_ENTRIES:
                raise SizeLimitError(f"operator would have {q.shape[0] * k.shape[0]} entries, limit {MAX_ENTRIES}")
            if self.beta != "inv_sqrt_d":
                parse_decimal(self.beta, "beta")  # validates the grammar
        elif self.beta != "inv_sqrt_d":
            raise InvalidOperatorError(f"beta applies to 'qk' operators only, not {self.kind!r}")
        if self.mask == "causal" and self.kind == "probabilities":
            raise InvalidOperatorError("the causal mask applies to qk and scores operators; a probabilities operator "
                                       "carries its zeros in A")
        if self.kind == "probabilities" and len(bad := np.argwhere(arrays["A"] < 0)):  # A is an attention matrix
            raise InvalidOperatorError(f"A has {len(bad)} negative entr{'y' if len(bad) == 1 else 'ies'} "
                                       f"(e.g. A[{bad[0][0]}, {bad[0][1]}] = {float(arrays['A'][tuple(bad[0])])!r}): "
                                       "a probabilities operator needs A >= 0")
        m, n = self.shape
        if self.mask == "causal" and m > n:
            raise InvalidOperatorError(f"a causal operator needs m <= N (queries are the last m of N positions), "
                                       f"got {m}x{n}")

    @classmethod
    def from_qk(cls, Q: object, K: object, beta: object = None, causal: bool = False) -> Operator:
        """``A = softmax_rows(beta Q K^T)`` (Q m x d, K N x d); ``beta`` as in :func:`beta_text`;
        arrays converted by :func:`exact_float64`; ``causal`` zeroes ``A_ij`` for ``j > i + N - m``."""
        return cls("qk", {"Q": exact_float64("Q", Q), "K": exact_float64("K", K)}, beta=beta_text(beta),
                   mask="causal" if causal else "none")

    @classmethod
    def from_scores(cls, S: object, causal: bool = False) -> Operator:
        """``A = softmax_rows(S)`` (S m x N, converted by :func:`exact_float64`)."""
        return cls("scores", {"S": exact_float64("S", S)}, mask="causal" if causal else "none")

    @classmethod
    def from_probabilities(cls, A: object) -> Operator:
        """``A`` itself (m x N), exactly as given; every entry must be >= 0."""
        return cls("probabilities", {"A": exact_float64("A", A)})

    def __repr__(self) -> str:
        """Compact, never the arrays: kind, m x N, beta, mask and api.operator_id's hash of the exact inputs."""
        parts = [f"|{name}{list(a.shape)}".encode() + a.tobytes() for name, a in sorted(self.arrays.items())]
        digest = hashlib.sha256(f"{self.kind}|{self.beta}|{self.mask}".encode() + b"".join(parts)).hexdigest()[:12]
        return (f"Operator({self.kind}, {self.shape[0]}x{self.shape[1]}, beta={self.beta}, mask={self.mask}, "
                f"sha256-{digest})")

    @property
    def shape(self) -> tuple[int, int]:
        """(m, N): queries x keys."""
        if self.kind == "qk":
            return self.arrays["Q"].shape[0], self.arrays["K"].shape[0]
        return next(iter(self.arrays.values())).shape

    @property
    def p(self) -> int:
        """min(m, N): the rank of A is at most p, so r_eps(A) <= p."""
        return min(self.shape)

    @property
    def beta_exact(self) -> Fraction | None:
        """The exact rational beta, or None for the exact real ``1/sqrt(d)``."""
        return None if self.beta == "inv_sqrt_d" else parse_decimal(self.beta, "beta")

    @property
    def head_dim(self) -> int | None:
        return self.arrays["Q"].shape[1] if self.kind == "qk" else None

    def allowed(self) -> np.ndarray:
        """Boolean m x N array: True where ``A_ij`` may be nonzero (False = masked, exactly 0)."""
        m, n = self.shape
        if self.mask == "none":
            return np.ones((m, n), dtype=bool)
        return np.arange(n)[None, :] <= np.arange(m)[:, None] + (n - m)

    def row_sums_exactly_one(self) -> bool:
        """True when every row of A is a softmax row, hence sums to exactly 1 (||A|| = 1)."""
        return self.kind in ("qk", "scores")
