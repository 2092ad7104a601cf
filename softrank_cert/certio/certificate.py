"""Certificate documents (format version 1, docs/design.md section 3): read, validate, build.

Reading is strict and fails closed: it is steps 0-5 of the one verification step list, which is
written out once in :mod:`softrank_cert.verification` (each function below names its steps in
``# N.`` comments).  Every step raises a subclass of
:class:`~softrank_cert.errors.InvalidInputError` with a one-line reason:

0. size (:func:`read_certificate_bytes`); 1. strict JSON (:func:`parse_json_strict`);
2. schema (:func:`check_schema`); 3. operator arrays, 4. operator, 5. brackets
(:func:`decode_certificate`; arrays: :func:`~softrank_cert.certio.arrays.decode_array`).

The format module knows nothing about solvers, and nothing here decides a claim.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from ..meta import __version__
from ..errors import CertificateFormatError, SoftrankError
from ..kernel import Operator, parse_tolerance
from .arrays import decode_array, encode_array

FORMAT_NAME = "softrank-certificate"
FORMAT_VERSION = 1
#: Refuse certificate files larger than this before reading them (their ``fstat`` size).
MAX_CERTIFICATE_BYTES = 1 << 30
#: The most JSON values (objects, arrays, strings, numbers, ...) a certificate may hold, counted
#: before the schema is checked, so that schema validation (tens of microseconds per value) is
#: bounded: 1000 brackets with witness arrays hold about 31,000; the examples hold under 100.
MAX_JSON_VALUES = 50_000


@dataclass(frozen=True)
class LowerEnd:
    """Claim ``r_eps >= k``: trivial (``X``/``Y`` None) or certified by X (k x m), Y (N x k)."""

    k: int
    method: str
    X: np.ndarray | None = None
    Y: np.ndarray | None = None


@dataclass(frozen=True)
class UpperEnd:
    """Claim ``r_eps <= r``: trivial (``identity``/``zero``) or witnessed by U (m x r), W (N x r)."""

    r: int
    construction: str
    U: np.ndarray | None = None
    W: np.ndarray | None = None


@dataclass(frozen=True)
class Bracket:
    """Both claimed ends at the tolerance ``eps`` (an exact decimal string).

    ``eps_value`` is its exact rational, set by :func:`decode_certificate` (step 5 parses each
    eps once; the consistency check and the audit read it from here), None on a bracket built
    to be written."""

    eps: str
    lower: LowerEnd
    upper: UpperEnd
    eps_value: Fraction | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Certificate:
    """A decoded certificate: the exact operator and its bracket claims."""

    operator_id: str
    operator: Operator
    brackets: tuple[Bracket, ...]
    provenance: dict[str, Any] = field(default_factory=dict)
    document: dict[str, Any] = field(default_factory=dict, repr=False)


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON Schema of format version 1 (``certificates/schema/``)."""
    text = resources.files("softrank_cert.schema").joinpath("softrank-certificate-v1.schema.json").read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise CertificateFormatError(f"duplicate JSON key {key!r}")
        result[key] = value
    return result


def _no_float(text: str) -> Any:
    raise CertificateFormatError(f"JSON number {text[:30]!r} is not an integer; exact values are decimal strings or "
                                 "base64 arrays")


def _no_constant(text: str) -> Any:
    raise CertificateFormatError(f"JSON constant {text} is not allowed")


def parse_json_strict(raw: bytes) -> Any:
    """Step 1: parse JSON refusing duplicate keys, NaN/Infinity, non-integer numbers and lone surrogates."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CertificateFormatError("file is not UTF-8 text") from None
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_float=_no_float,
                              parse_constant=_no_constant)
        if b"\\u" in raw:  # strict UTF-8 has no surrogates: only a \\u escape can make a lone one
            _refuse_lone_surrogates(document)
        return document
    except json.JSONDecodeError as exc:
        # some messages end in "at" ("Unterminated string starting at"): the position completes them
        joiner = " " if exc.msg.endswith(" at") else " at "
        raise CertificateFormatError(f"not valid JSON: {exc.msg}{joiner}line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise CertificateFormatError("JSON nesting is too deep") from None
    except ValueError as exc:  # e.g. integers with too many digits
        raise CertificateFormatError(f"not valid JSON: {exc}") from None


def _refuse_lone_surrogates(document: Any) -> None:
    """Raise :class:`CertificateFormatError` if a string or key of ``document`` is not Unicode text
    (a lone surrogate escape such as ``\\ud800``); every string is encoded once, nothing else."""
    stack = [document]
    try:
        while stack:
            value = stack.pop()
            if isinstance(value, str):
                value.encode("utf-8")
            elif isinstance(value, dict):
                stack.extend(value)
                stack.extend(value.values())
            elif isinstance(value, list):
                stack.extend(value)
    except UnicodeEncodeError:
        raise CertificateFormatError("a JSON string contains a lone surrogate escape (not Unicode text)") from None


def count_json_values(document: Any, limit: int) -> int:
    """The number of JSON values in ``document`` (itself, and every member and item below it),
    counted without recursion and at most up to ``limit + 1`` (linear in the count, stops early)."""
    count, stack = 0, [document]
    while stack and count <= limit:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count + len(stack)


def check_schema(document: Any) -> None:
    """Step 2: raise :class:`CertificateFormatError` naming the first schema violation.

    Cost: a document of more than :data:`MAX_JSON_VALUES` values is refused after counting at
    most that many (no schema validation); the schema then checks every value once."""
    if count_json_values(document, MAX_JSON_VALUES) > MAX_JSON_VALUES:
        raise CertificateFormatError(f"schema: the document holds more than {MAX_JSON_VALUES} JSON values, more than "
                                     "any certificate needs (about 31 per bracket, and a few for provenance)")
    validator = jsonschema.Draft202012Validator(schema())
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    except RecursionError:
        raise CertificateFormatError("schema: JSON nesting is too deep") from None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
        raise CertificateFormatError(f"schema: at {where}: {message}")


def read_certificate_bytes(path: str | os.PathLike[str]) -> bytes:
    """Step 0 for a file: its bytes, from a regular file of at most :data:`MAX_CERTIFICATE_BYTES`
    bytes (:func:`~softrank_cert.util.files.read_regular_file`: a FIFO, device, socket or
    folder is refused before it is opened, a larger size before a byte is read)."""
    from ..util.files import read_regular_file

    return read_regular_file(path, MAX_CERTIFICATE_BYTES, "certificate", CertificateFormatError)


def check_size(raw: bytes, source: str) -> None:
    """Step 0: at most :data:`MAX_CERTIFICATE_BYTES` bytes."""
    if len(raw) > MAX_CERTIFICATE_BYTES:
        raise CertificateFormatError(f"{source}: more than {MAX_CERTIFICATE_BYTES} bytes, the certificate size limit")


def read_json_file(path: str | Path) -> Any:
    """Steps 0-1: the file's bytes, size-checked, parsed strictly (not yet schema-checked)."""
    return parse_json_strict(read_certificate_bytes(path))


def decode_certificate(document: Any) -> Certificate:
    """Steps 2-5: schema, operator arrays, operator, brackets (each eps parsed once, each array
    decoded and validated once)."""
    check_schema(document)                                                               # 2.
    op_doc = document["operator"]
    arrays = {name: decode_array(obj, f"operator.arrays.{name}") for name, obj in op_doc["arrays"].items()}  # 3.
    operator = Operator(kind=op_doc["kind"], arrays=arrays, beta=op_doc.get("beta", "inv_sqrt_d"),  # 4.
                        mask=op_doc["mask"])
    m, n = operator.shape
    brackets = []
    for index, item in enumerate(document["brackets"]):                                  # 5.
        where = f"brackets[{index}]"
        eps_value = parse_tolerance(item["eps"])
        lower_doc, upper_doc = item["lower"], item["upper"]
        if "X" in lower_doc:
            X, Y = decode_array(lower_doc["X"], f"{where}.lower.X"), decode_array(lower_doc["Y"], f"{where}.lower.Y")
            lower = LowerEnd(lower_doc["k"], lower_doc["method"], X, Y)
            _expect_shape(X, (lower.k, m), f"{where}.lower.X")
            _expect_shape(Y, (n, lower.k), f"{where}.lower.Y")
            if lower.k > operator.p:
                raise CertificateFormatError(f"{where}.lower: k = {lower.k} exceeds p = {operator.p}")
        else:
            lower = LowerEnd(lower_doc["k"], lower_doc["method"])
        if "U" in upper_doc:
            U, W = decode_array(upper_doc["U"], f"{where}.upper.U"), decode_array(upper_doc["W"], f"{where}.upper.W")
            upper = UpperEnd(upper_doc["r"], upper_doc["construction"], U, W)
            _expect_shape(U, (m, upper.r), f"{where}.upper.U")
            _expect_shape(W, (n, upper.r), f"{where}.upper.W")
        else:
            upper = UpperEnd(upper_doc["r"], upper_doc["construction"])
            expected = operator.p if upper.construction == "identity" else 0
            if upper.r != expected:
                raise CertificateFormatError(f"{where}.upper: the {upper.construction} witness has r = {expected}, "
                                             f"not {upper.r}")
        brackets.append(Bracket(item["eps"], lower, upper, eps_value))
    return Certificate(op_doc["id"], operator, tuple(brackets), dict(op_doc.get("provenance", {})), document)


def _expect_shape(array: np.ndarray, shape: tuple[int, int], where: str) -> None:
    if array.shape != shape:
        raise CertificateFormatError(f"{where} has shape {list(array.shape)}, expected {list(shape)}")


def operator_document(operator_id: str, operator: Operator, provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``operator`` object of a certificate (arrays bit-exact, beta as an exact string)."""
    doc: dict[str, Any] = {
        "id": operator_id,
        "kind": operator.kind,
        "arrays": {name: encode_array(a) for name, a in operator.arrays.items()},
        "mask": operator.mask,
    }
    if operator.kind == "qk":
        doc["beta"] = operator.beta
    if provenance:
        doc["provenance"] = provenance
    return doc


def lower_document(end: LowerEnd) -> dict[str, Any]:
    if end.X is None or end.Y is None:
        if end.X is not None or end.Y is not None:
            raise ValueError(f"lower end k = {end.k}: X and Y go together")
        return {"k": end.k, "method": "trivial"}
    return {"k": end.k, "X": encode_array(end.X), "Y": encode_array(end.Y), "method": end.method}


def upper_document(end: UpperEnd) -> dict[str, Any]:
    if end.U is None or end.W is None:
        if end.U is not None or end.W is not None:
            raise ValueError(f"upper end r = {end.r}: U and W go together")
        return {"r": end.r, "construction": end.construction}
    return {"r": end.r, "U": encode_array(end.U), "W": encode_array(end.W), "construction": end.construction}


def certificate_document(operator_id: str, operator: Operator, brackets: list[Bracket], *, created: str,
                         provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """An unsigned certificate document (schema-checked before it is returned)."""
    document = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "operator": operator_document(operator_id, operator, provenance),
        "brackets": [{"eps": b.eps, "lower": lower_document(b.lower), "upper": upper_document(b.upper)}
                     for b in brackets],
        "generator": {"name": "softrank-cert", "version": __version__, "created": created},
    }
    try:
        check_schema(document)
    except SoftrankError as exc:
        raise CertificateFormatError(f"refusing to write an invalid certificate: {exc}") from None
    return document


__all__ = [
    "Bracket", "Certificate", "LowerEnd", "UpperEnd", "certificate_document", "check_schema", "check_size",
    "decode_certificate", "parse_json_strict", "read_certificate_bytes", "read_json_file", "schema",
]
