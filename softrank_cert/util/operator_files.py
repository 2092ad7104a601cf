"""Operators from ``.npz`` files (docs/design.md section 4).

A single-operator file holds ``Q`` and ``K`` (optional scalar ``beta``, optional boolean
``causal``), or ``S``, or ``A``: float64 arrays, or float32 / float16 / integers (|v| <= 2**53),
which are widened to float64 exactly -- the rule of ``Operator.from_qk`` and the Python API.  A panel holds many operators as ``NAME/Q``, ``NAME/K``,
``NAME/beta``, ``NAME/causal``, ``NAME/S``, ``NAME/A``; other keys (``.../tokens``,
``__provenance__``: a JSON object name -> provenance) are metadata.  Every member's header is
read and checked *before* any array is decompressed (:func:`npz_headers`: dtypes, truncation,
the file's total, zip bombs), then memory is admitted and ``__provenance__`` validated before
any operator is loaded or searched (docs/inputs.md).  A float ``beta`` becomes the exact decimal
string of that double.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError, InvalidOperatorError, SizeLimitError
from ..kernel import MAX_ENTRIES, Operator, float_to_decimal_string
from .files import check_regular_file, file_kind, unique_object_pairs

OPERATOR_LEAVES = {"Q", "K", "S", "A", "beta", "causal"}
PROVENANCE_KEY = "__provenance__"


def natural_key(name: str) -> tuple[list[str | tuple[int, str]], str]:
    """Sort key that orders digit runs by value: ``L0H2`` before ``L0H10``, ``w64`` before ``w128``.

    A run is compared as its digits without leading zeros, by their count and then as text (its
    value, without converting it: a run of any length -- beyond Python's 4,300-digit limit of
    ``int()`` -- is fine); runs of one value (``7``, ``007``) tie, and the whole ``name`` breaks
    the tie.  Any ``str`` is accepted, lone surrogates included."""
    parts: list[str | tuple[int, str]] = []
    for index, part in enumerate(re.split(r"([0-9]+)", name)):
        if index % 2:
            digits = part.lstrip("0")
            parts.append((len(digits), digits))
        else:
            parts.append(part)
    return parts, name


@dataclass(frozen=True)
class NamedOperator:
    name: str
    operator: Operator
    provenance: dict[str, Any] = field(default_factory=dict)


#: The most bytes that the arrays of one ``.npz`` file may declare in their headers, all
#: members together (the largest panel ``softrank panel`` builds): a file that declares more is
#: refused before any member is decompressed.
MAX_NPZ_BYTES = 1 << 33
#: A compressed member whose data would be more than this many times its compressed size, and
#: more than :data:`BOMB_MIN_BYTES`, is refused as a zip bomb before it is decompressed (float64
#: attention data compresses by less than 2x; deflate's limit is about 1032x).
BOMB_RATIO = 100
BOMB_MIN_BYTES = 16 << 20


def _member_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], np.dtype]:
    with archive.open(info) as handle:
        major, _minor = np.lib.format.read_magic(handle)
        read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, _fortran, dtype = read_header(handle)
        offset = handle.tell()
    key = info.filename[: -len(".npy")]
    if dtype.hasobject:
        raise InvalidInputError(f"member {key} has dtype {dtype} (Python objects): store numbers "
                                "(float64, float32, float16 or integers)")
    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if info.file_size < offset + declared:
        raise InvalidInputError(f"member {key} is truncated: its header declares {declared} bytes of data, "
                                f"the member holds {max(info.file_size - offset, 0)}")
    if declared > BOMB_MIN_BYTES and declared > BOMB_RATIO * info.compress_size:
        raise SizeLimitError(f"member {key} declares {declared} bytes compressed into {info.compress_size}: "
                             f"more than {BOMB_RATIO} times, a zip bomb? (refused before decompressing it; "
                             "store real data with np.savez)")
    return tuple(shape), dtype


def npz_headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of every member, read from the .npy headers only (the first bytes of each
    member), with the totals checked before any member's data is decompressed: no member of
    dtype object, none shorter than its header declares, at most :data:`MAX_NPZ_BYTES` of data
    declared by all members together."""
    headers = {}
    total = 0
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                shape, dtype = _member_header(archive, info)
                headers[info.filename[: -len(".npy")]] = (shape, dtype)
                total += int(np.prod(shape, dtype=object)) * dtype.itemsize
    except InvalidInputError as exc:
        raise type(exc)(f"{path}: {exc}") from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, ValueError) as exc:
        kind = file_kind(path) if isinstance(exc, zipfile.BadZipFile) else None
        if kind is not None:
            raise InvalidInputError(f"{path}: is {kind}, not a panel or operator .npz file{_TAKES.get(kind, '')}") \
                from None
        raise InvalidInputError(f"{path}: not a readable .npz file ({exc})") from None
    if total > MAX_NPZ_BYTES:
        raise SizeLimitError(f"{path}: its arrays declare {total} bytes in all, more than the limit of "
                             f"{MAX_NPZ_BYTES} bytes for one .npz file (refused before decompressing anything)")
    return headers


#: Which command takes a file of each kind that is handed where a panel is expected.
_TAKES = {"a softrank certificate": ": softrank-verify checks it (softrank bracket takes the panel it was made from)",
          "a GGUF model file": ": softrank panel --gguf FILE makes a panel from it",
          "a key file": ": --key takes a private key file, --trusted-keys a .pub file"}


def _group(headers: dict[str, Any], stem: str) -> dict[str, dict[str, str]]:
    """operator name -> {leaf: npz key}."""
    groups: dict[str, dict[str, str]] = {}
    for key in headers:
        name, _, leaf = key.rpartition("/")
        if leaf in OPERATOR_LEAVES:
            groups.setdefault(name or stem, {})[leaf] = key
    return {name: leaves for name, leaves in groups.items() if {"Q", "S", "A"} & set(leaves)}


#: What a file must hold to be read as operators (the messages quote it).
EXPECTED = ("arrays Q and K (optional scalars beta, causal), or S (scores), or A (probabilities); in a panel "
            "the same under NAME/, e.g. NAME/Q and NAME/K (names are case-sensitive)")


def _check_file(path: Path) -> None:
    """An existing regular file, else one line that says what ``path`` is instead (from
    ``os.stat``: a FIFO or a device is never opened)."""
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.npz"))[:3]
        hint = f" (it holds {', '.join(inside)}{', ...' if len(inside) == 3 else ''})" if inside else ""
        raise InvalidInputError(f"{path}: is a folder, not an .npz file: give the .npz file itself{hint}")
    if not path.exists():
        raise InvalidInputError(f"{path}: no such file")
    check_regular_file(path, "operator file")


def operator_names(path: str | os.PathLike[str]) -> list[str]:
    """The names of the operators in an ``.npz`` file, in natural order (read from the array
    headers only: nothing is loaded)."""
    path = Path(path)
    _check_file(path)
    return sorted(_group(npz_headers(path), path.stem), key=natural_key)


def operator_shapes(path: str | Path) -> list[tuple[str, str, tuple[int, ...]]]:
    """``(name, kind, (m, N))`` of every operator of an ``.npz`` file, from the headers only."""
    path = Path(path)
    _check_file(path)
    headers = npz_headers(path)
    out = []
    for name, leaves in sorted(_group(headers, path.stem).items(), key=lambda item: natural_key(item[0])):
        shape: tuple[int, ...]
        if "Q" in leaves:
            kind, shape = "qk", (headers[leaves["Q"]][0][0], headers[leaves["K"]][0][0] if "K" in leaves else -1)
        else:
            kind = "scores" if "S" in leaves else "probabilities"
            shape = headers[leaves["S" if "S" in leaves else "A"]][0][:2]
        out.append((name, kind, tuple(int(v) for v in shape)))
    return out


#: How a user lists a panel's operators (quoted by the messages below).
LIST_COMMAND = "softrank list"


def choose_operator_message(path: str | os.PathLike[str], names: list[str], how: str) -> str:
    """The one line for a panel of several operators given without a choice: how many, a few
    names, how to list them all, and ``how`` to choose (e.g. ``--operator NAME``)."""
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (f"{path} holds {len(names)} operators ({shown}): choose one with {how} "
            f"(list them all: {LIST_COMMAND} {path})")


def closest_operator_names(name: str, names: list[str], n: int = 3) -> list[str]:
    """At most ``n`` of ``names`` to suggest for the unknown ``name``: first those whose name ends
    in ``/name`` (``L5H2`` -> ``minilm/apache2/w32/L5H2``; natural order), then the close matches
    (difflib), then, if neither gives any, the first names in natural order."""
    import difflib

    tail = "/" + name.strip("/")
    ending = sorted((other for other in names if other.endswith(tail)), key=natural_key)
    close = difflib.get_close_matches(name, names, n=n, cutoff=0.5)
    chosen = list(dict.fromkeys([*ending, *close]))[:n]
    return chosen or sorted(names, key=natural_key)[:n]


def unknown_operator_message(path: str | Path, name: str, names: list[str], option: str = "") -> str:
    """The one line for an operator name a file does not hold: the closest names
    (:func:`closest_operator_names`) and how to list them (``option``, e.g. ``--operator``, names
    where the name came from)."""
    given = f"{option} {name}: " if option else ""
    return (f"{given}{path}: no operator named {name!r} among its {len(names)} (closest: "
            f"{', '.join(closest_operator_names(name, names))}; list them all: {LIST_COMMAND} {path})")


def load_operators(path: str | os.PathLike[str], names: list[str] | None = None) -> list[NamedOperator]:
    """Load the named operators (all when ``names`` is None, in natural name order: ``L0H2``
    before ``L0H10``; else in the order given)."""
    path = Path(path)
    _check_file(path)
    headers = npz_headers(path)
    groups = _group(headers, path.stem)
    if not groups:
        held = sorted(headers)
        listed = ", ".join(held[:8]) + (f", ... ({len(held)} arrays)" if len(held) > 8 else "")
        raise InvalidInputError(f"{path}: holds no operator: its arrays are {listed or 'none'}; expected {EXPECTED}")
    wanted = sorted(groups, key=natural_key) if names is None else names
    for name in wanted:
        if name not in groups:
            raise InvalidInputError(unknown_operator_message(path, name, list(groups)))
    for name in wanted:
        for key in groups[name].values():
            shape, dtype = headers[key]
            if int(np.prod(shape, dtype=object)) > MAX_ENTRIES:
                raise SizeLimitError(f"{path}: {key} has shape {list(shape)}, beyond the size limit")
    _admit(path, [headers[key] for name in wanted for key in groups[name].values()])
    try:
        with np.load(path, allow_pickle=False) as data:
            provenance = _provenance(path, data, headers, wanted)
            return [NamedOperator(name, _build(name, groups[name], data), provenance.get(name, {})) for name in wanted]
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, ValueError) as exc:
        raise InvalidInputError(f"{path}: a member cannot be read ({exc})") from None


def _admit(path: Path, headers: list[tuple[tuple[int, ...], np.dtype]]) -> None:
    """Memory admission before anything is loaded: the operators' arrays as stored plus their
    float64 copies must fit in :func:`~softrank_cert.util.memory.default_max_memory`."""
    from .memory import default_max_memory, format_bytes

    need = sum(int(np.prod(shape, dtype=object)) * (dtype.itemsize + 8) for shape, dtype in headers)
    limit = default_max_memory()
    if need > limit:
        raise SizeLimitError(f"{path}: the operators asked for need about {format_bytes(need)} of memory to load, "
                             f"more than the {format_bytes(limit)} this machine allows; choose fewer operators")


def _provenance(path: Path, data: Any, headers: dict[str, Any], wanted: list[str]) -> dict[str, dict[str, Any]]:
    """``__provenance__`` checked before any search: a JSON object (no duplicate keys, no
    non-integer numbers -- a certificate keeps measurements as strings) whose value for each
    wanted operator, when present, is a JSON object; else one line, exit 2."""
    if PROVENANCE_KEY not in headers:
        return {}
    shape, dtype = headers[PROVENANCE_KEY]
    if shape != () or dtype.kind != "U":
        raise InvalidInputError(f"{path}: {PROVENANCE_KEY} must be a string scalar holding a JSON object, "
                                f"not an array of dtype {dtype} and shape {list(shape)}")
    try:
        document = json.loads(str(data[PROVENANCE_KEY][()]), object_pairs_hook=unique_object_pairs, parse_float=_no_float,
                              parse_constant=_no_float)
    except (ValueError, RecursionError) as exc:
        raise InvalidInputError(f"{path}: {PROVENANCE_KEY} is not a JSON object of provenance ({exc})") from None
    if not isinstance(document, dict):
        raise InvalidInputError(f"{path}: {PROVENANCE_KEY} must be a JSON object (operator name -> object), "
                                f"not a JSON {type(document).__name__}")
    for name in wanted:
        if not isinstance(document.get(name, {}), dict):
            raise InvalidInputError(f"{path}: {PROVENANCE_KEY} of {name!r} must be a JSON object, "
                                    f"not a JSON {type(document[name]).__name__}")
    return {name: dict(document[name]) for name in wanted if name in document}


def _no_float(text: str) -> Any:
    raise ValueError(f"the number {text[:30]} is not an integer: write measurements as strings")


def _build(name: str, leaves: dict[str, str], data: Any) -> Operator:
    """The operator ``name`` through the API's constructors (``Operator.from_qk``, ``.from_scores``,
    ``.from_probabilities``), so that files and arrays follow ONE input rule: float64 as is,
    float32 / float16 and integers of magnitude <= 2**53 widened to float64 (exactly: each such
    value is a double), anything else refused."""
    arrays = {leaf: data[key] for leaf, key in leaves.items() if leaf in ("Q", "K", "S", "A")}
    kind = "qk" if "Q" in arrays or "K" in arrays else ("scores" if "S" in arrays else "probabilities")
    beta = "inv_sqrt_d"
    if "beta" in leaves:
        value = data[leaves["beta"]]
        if value.shape != () or value.dtype.kind != "f" or not np.isfinite(value):
            raise InvalidOperatorError(f"{name}/beta must be a finite float scalar")
        if value.dtype.itemsize > 8:  # the API's rule (beta_text): a long double is not a double, never rounded
            raise InvalidOperatorError(f"{name}/beta is a {value.dtype} scalar: a double would round it; store it as "
                                       "float64 (or as a decimal string with the API)")
        beta = float_to_decimal_string(float(value))
    causal = False
    if "causal" in leaves:
        value = data[leaves["causal"]]
        if value.shape != () or value.dtype != np.bool_:
            raise InvalidOperatorError(f"{name}/causal must be a boolean scalar")
        causal = bool(value)
    try:
        if kind == "qk":
            if set(arrays) != {"Q", "K"}:
                raise InvalidOperatorError(f"a 'qk' operator needs both Q and K, got {', '.join(sorted(arrays))}")
            return Operator.from_qk(arrays["Q"], arrays["K"], beta=beta, causal=causal)
        if causal and kind == "probabilities":
            raise InvalidOperatorError("the causal mask applies to qk and scores operators; a probabilities "
                                       "operator carries its zeros in A")
        if kind == "scores":
            return Operator.from_scores(arrays["S"], causal=causal)
        if arrays["A"].dtype.kind in "fiu":  # the detailed message first (other dtypes: refused below)
            check_probabilities(name, arrays["A"])
        return Operator.from_probabilities(arrays["A"])
    except InvalidOperatorError as exc:
        raise InvalidOperatorError(f"{name}: {exc}") from None


def check_probabilities(name: str, A: np.ndarray) -> None:
    """A probabilities operator is an attention matrix: every entry ``A_ij >= 0``.

    (The kernel's checks are sound for any real matrix, but the solvers and the theory assume
    probabilities; an ``A`` with a negative entry is an input mistake, refused with exit 2.)
    """
    negative = np.argwhere(A < 0)
    if len(negative):
        i, j = (int(v) for v in negative[0])
        raise InvalidOperatorError(f"{name}/A has {len(negative)} negative entr{'y' if len(negative) == 1 else 'ies'} "
                                   f"(e.g. A[{i}, {j}] = {float(A[i, j])!r}): a probabilities operator needs A >= 0")
