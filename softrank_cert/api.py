"""The Python API of softrank-cert (a front end, like the command line, which calls it).

Everything here is re-exported at the package top level (``import softrank_cert as sc``)::

    op = sc.load_operator("panel.npz", name="minilm/apache2/w32/L0H3")   # or sc.load_panel(...)
    op = sc.Operator.from_qk(Q, K)              # from arrays: also .from_scores, .from_probabilities
    result = sc.bracket(op, ["0.1", "0.25"])    # kernel-verified [lower, upper] per tolerance
    result.save("cert.json", key="issuer.key")  # a (signed) certificate
    checked = sc.verify("cert.json")            # a VerificationResult; or bytes, or the parsed dict
    prof = sc.profile(op)                       # both certified curves, every step VERIFIED

Nothing here decides a claim: every end comes from the trusted kernel
(:mod:`softrank_cert.kernel`), and :func:`verify` re-checks certificates with it.
Tolerances are exact decimal strings (``"0.1"`` is 1/10): a float is refused, since the
float ``0.1`` is not one tenth.

One input rule for arrays, here and on the command line (``.npz`` files,
:mod:`softrank_cert.util.operator_files`): float64 is taken as is; float32, float16 and
integers of magnitude <= 2**53 are widened to float64, which is exact (each such value is a
double), so the operator is exactly the one the arrays hold; anything else (complex, object,
larger integers) is refused.  ``repr(op)`` is compact: kind, m x N, beta, mask and the hash of
:func:`operator_id`.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from .plumbing.bracketing import BracketResult
from .errors import InvalidInputError, InvalidOperatorError
from .kernel import DEFAULT_MAX_PREC, Operator
from .util.tolerances import check_budget, parse_eps
from .verification import (VerificationResult, verify_certificate_bytes, verify_certificate_document,
                           verify_certificate_file)

Progress = Callable[[str, float, float], None]

#: The former name of :class:`VerificationResult` (what :func:`verify` returns), still importable.
VerifyReport = VerificationResult

__all__ = [
    "BracketResult", "Operator", "VerificationResult", "VerifyReport", "bracket", "capture", "load_gguf",
    "load_operator", "load_panel", "operator_id", "operator_provenance", "parse_eps", "profile", "verify",
]


# --------------------------------------------------------------------------------------
# Operators
# --------------------------------------------------------------------------------------

#: Names and provenance of operators loaded from panels (front-end metadata, keyed by the
#: operator object; the kernel's Operator itself is never touched).
_NAMES: weakref.WeakKeyDictionary[Operator, tuple[str, dict[str, Any]]] = weakref.WeakKeyDictionary()


def load_operator(path: str | os.PathLike[str], name: str | None = None) -> Operator:
    """One operator of an ``.npz`` file: ``Q``/``K`` (optional ``beta``, ``causal``), ``S`` or ``A``;
    in a panel (``NAME/Q``, ...) the one called ``name`` (needed when it holds several).  Arrays
    follow the module's input rule (float32 widened exactly, as ``Operator.from_qk`` does)."""
    from .util.operator_files import choose_operator_message, load_operators, operator_names

    if name is None:
        names = operator_names(path) if Path(path).is_file() else []
        if len(names) > 1:
            raise InvalidInputError(choose_operator_message(path, names, "name=NAME, or use load_panel()"))
    (item,) = load_operators(path, None if name is None else [name])
    _NAMES[item.operator] = (item.name, dict(item.provenance))
    return item.operator


def load_panel(path: str | os.PathLike[str]) -> dict[str, Operator]:
    """Every operator of a panel ``.npz``, by name (natural order: ``L0H2`` before ``L0H10``)."""
    from .util.operator_files import load_operators

    out: dict[str, Operator] = {}
    for item in load_operators(path):
        _NAMES[item.operator] = (item.name, dict(item.provenance))
        out[item.name] = item.operator
    return out


def capture(model: Any, inputs: Any, *, layers: Iterable[int] | None = None,
            heads: Iterable[int] | None = None) -> dict[str, Operator]:
    """The attention operators of a loaded transformers model on one input, by name ``L<l>H<h>``.

    ``model``: a transformers model in float64 (``from_pretrained(..., dtype=torch.float64)``);
    ``inputs``: a tokenizer / image-processor output for one sequence, or a tensor of input ids.
    One forward pass through transformers' AttentionInterface records, per attention layer
    ``l`` (call order) and query head ``h``, the ``Q``, ``K`` the attention receives (after RoPE;
    grouped-query keys expanded), giving ``A = softmax_rows(beta Q K^T)`` with ``beta`` the exact
    ``1/sqrt(d)`` when the model scales by ``head_dim ** -0.5`` and else the exact value of its
    float; the causal mask where the layer is causal; ``scores`` operators (the model's float64
    logits) where it soft-caps them.  Anything else (padding, narrow sliding windows, sinks,
    cross-attention) raises InvalidInputError.  Needs the ``[hf]`` extra (torch, transformers).
    A model from :func:`load_gguf` adds its GGUF file's provenance (SHA-256, quantization type).
    """
    from .models.hf_capture import capture_attention, record_notes, record_operator, select_heads, require_hf

    _, transformers = require_hf()
    records = capture_attention(model, inputs, layers)
    config = getattr(model, "config", None)
    model_type = str(getattr(config, "model_type", type(model).__name__))
    label = Path(str(getattr(config, "_name_or_path", "") or model_type)).name or model_type
    meta = {"model": label, "model_type": model_type, "transformers_version": transformers.__version__,
            "dtype": "float64", "capture": "transformers", "width": int(records[0].q.shape[1]),
            **getattr(model, "softrank_provenance", {})}
    out: dict[str, Operator] = {}
    for record in records:
        for head in select_heads(records, heads):
            name = f"L{record.layer}H{head}"
            op = record_operator(record, head)
            _NAMES[op] = (f"{label}/{name}", {**meta, **record_notes(record, head)})
            out[name] = op
    return out


def load_gguf(source: str | os.PathLike[str]) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a GGUF file (a path, or a shortcut such as ``"smollm2"``): loaded
    with transformers' GGUF tensor map offline (:mod:`.models.gguf_blocks`), every quantized
    tensor dequantized to float64 (the model as distributed, not its original weights), in eval
    mode with eager attention, ready for :func:`capture`.  Needs the ``[gguf]`` extra (torch,
    transformers, gguf, accelerate); refused with one line when transformers cannot load the
    file's architecture, the file fails the check before loading
    (:mod:`softrank_cert.models.gguf_check`) or memory is short."""
    from .models.gguf_file import check_memory
    from .models.hf_panel import HFCheckpoint, open_gguf

    gguf = open_gguf(source if isinstance(source, str) else Path(source))
    check_memory(gguf.load_bytes(), f"loading {gguf.path.name}")
    ckpt = HFCheckpoint(gguf)
    return ckpt.model, ckpt.tokenizer()


def operator_id(op: Operator) -> str:
    """The id a certificate gives ``op``: its panel name when it was loaded from a file, else
    ``KIND/MxN/sha256-<12 hex digits of its exact inputs>``."""
    if op in _NAMES:
        return _NAMES[op][0]
    digest = hashlib.sha256(f"{op.kind}|{op.beta}|{op.mask}".encode())
    for name in sorted(op.arrays):
        array = op.arrays[name]
        digest.update(f"|{name}{list(array.shape)}".encode())
        digest.update(np.ascontiguousarray(array, dtype="<f8").tobytes())
    m, n = op.shape
    return f"{op.kind}/{m}x{n}/sha256-{digest.hexdigest()[:12]}"


def operator_provenance(op: Operator) -> dict[str, Any]:
    """The provenance a panel gave ``op`` (model, layer, head, ...), or {}."""
    return dict(_NAMES[op][1]) if op in _NAMES else {}


def _require_operator(op: Any) -> Operator:
    if not isinstance(op, Operator):
        raise InvalidOperatorError(f"expected a softrank_cert.Operator (load_operator, Operator.from_qk, ...), "
                                   f"got {type(op).__name__}")
    return op


# --------------------------------------------------------------------------------------
# Brackets and profiles (inputs: util.tolerances; the task: plumbing.bracketing)
# --------------------------------------------------------------------------------------

def bracket(op: Operator, eps: str | Iterable[str], *, work: float | None = None,
            budget_seconds: float | None = None, progress: Progress | None = None,
            device: str | None = None) -> BracketResult:
    """Kernel-verified brackets ``[lower, upper]`` of ``r_eps(A)`` at each tolerance.

    ``eps``: ``"0.25"``, ``"0.1,0.25"`` or a list of decimal strings.  The search is bounded by
    ``work`` units for all tolerances together (:mod:`softrank_cert.solvers.work`; default
    :func:`~softrank_cert.solvers.work.default_work`, which takes
    :func:`~softrank_cert.solvers.bracket.default_budget_seconds` on a quiet machine: 16 s at
    128 x 128, between 4 and 600 s): the same call gives the same brackets however busy the
    machine.  ``budget_seconds``: a wall-time cap (alone, the only bound; ``math.inf``: none),
    with which the ends may depend on the load.  ``progress(stage, elapsed, budget)`` after each
    search stage.  ``device``: where the untrusted search runs -- ``None``/``"numpy"`` (the
    default), ``"cpu"`` (torch on the CPU), ``"cuda"``, ``"cuda:N"`` or ``"auto"``
    (:mod:`softrank_cert.solvers.device`); the kernel decides every end on the CPU either way.
    """
    from .plumbing.bracketing import bracket_result

    op = _require_operator(op)
    eps_list = parse_eps(eps)
    check_budget(work, budget_seconds)
    return bracket_result(op, eps_list, work=work, budget_seconds=budget_seconds, progress=progress,
                          operator_id=operator_id(op), provenance=operator_provenance(op), device=device)


def profile(op: Operator, grid: str | Iterable[str] | None = None, *, work: float | None = None,
            budget_seconds: float | None = None, progress: Progress | None = None, device: str | None = None) -> Any:
    """The two certified curves of ``op`` (:class:`~softrank_cert.studies.profile.curves.Profile`).

    For each k the largest verified tolerance ``t_k`` with ``r_eps >= k`` for every eps <= t_k,
    for each r the smallest verified ``e_r`` with ``r_eps <= r`` for every eps >= e_r.  The
    searches aim at ``grid`` (default: 11 tolerances from 0.02 to 0.9) within ``work`` units
    and/or ``budget_seconds``, on ``device`` (as for :func:`bracket`).  ``.bracket(eps)`` reads certificates
    off the profile, ``.figure()`` draws it, ``.to_json()`` lists every VERIFIED step.
    """
    from .studies.profile.curves import compute_profile

    op = _require_operator(op)
    tolerances = None if grid is None else parse_eps(grid)
    check_budget(work, budget_seconds)
    return compute_profile(op, tolerances, work=work, budget_seconds=budget_seconds, progress=progress,
                           operator_id=operator_id(op), provenance=operator_provenance(op), device=device)


# --------------------------------------------------------------------------------------
# Verification (the one path of softrank_cert.verification; VerificationResult is defined there)
# --------------------------------------------------------------------------------------

def _trusted(trusted_keys: Any) -> frozenset[str] | None:
    from .certio.signing import load_trusted_keys

    if trusted_keys is None:
        return None
    if isinstance(trusted_keys, (str, os.PathLike)) and not str(trusted_keys).startswith("did:key:"):
        return load_trusted_keys(trusted_keys)
    keys = [trusted_keys] if isinstance(trusted_keys, str) else list(trusted_keys)
    for entry in keys:
        if not isinstance(entry, str) or not entry.startswith("did:key:") or "#" in entry:
            raise InvalidInputError(f"trusted key {entry!r:.100} is not a did:key DID")
    return frozenset(keys)


def _exists(path: str) -> bool:
    try:
        return Path(path).exists()
    except (OSError, ValueError):  # a name too long or with a NUL byte is no file
        return False


def verify(source: str | os.PathLike[str] | bytes | Mapping[str, Any], *, trusted_keys: Any = None,
           require_signature: bool = False, max_prec: int = DEFAULT_MAX_PREC, kernel: str = "auto",
           max_memory: int | str | None = None) -> VerificationResult:
    """Re-check a certificate end to end (schema, hashes, signature, every claim with the kernel).

    ``source``: a file path, the file's bytes, or the parsed JSON document (a dict) -- all three
    give the same verdicts, and nothing is written anywhere.  ``trusted_keys``: a keys file
    (``.pub`` or a ``did:key`` list) or an iterable of ``did:key`` strings.  ``kernel``: ``auto``,
    ``arb``, ``float64``, ``rowblock`` or ``exact`` (as ``softrank-verify --kernel``).  ``max_memory`` (bytes,
    or a size such as ``"4G"``): what the Arb path may use when the float64 path cannot decide a
    claim (default: a safe share of the machine, see :mod:`softrank_cert.util.memory`); a check that
    would not fit raises :class:`~softrank_cert.errors.KernelLimitError` (not checked).  Invalid
    input raises :class:`~softrank_cert.errors.InvalidInputError` with a one-line reason.
    """
    from .util.memory import parse_size, process_limit

    if isinstance(max_memory, str):
        max_memory = parse_size(max_memory, "max_memory")
    options: dict[str, Any] = {"trusted_keys": _trusted(trusted_keys), "require_signature": require_signature,
                               "max_prec": max_prec,
               "kernel": kernel, "memory_limit": process_limit(max_memory) if kernel in ("auto", "arb") else None}
    if isinstance(source, (bytes, bytearray, memoryview)):
        return verify_certificate_bytes(bytes(source), **options)
    if isinstance(source, Mapping):
        return verify_certificate_document(source, **options)
    if isinstance(source, (str, os.PathLike)):
        if isinstance(source, str) and source.lstrip().startswith("{") and not _exists(source):
            raise InvalidInputError("verify() reads a str as a file path; pass JSON text as bytes (text.encode())")
        return verify_certificate_file(source, **options)
    raise InvalidInputError(f"verify() takes a path, bytes or a dict, not {type(source).__name__}")

