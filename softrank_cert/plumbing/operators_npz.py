"""Operators from ``.npz`` files (docs/design.md section 4).

A single-operator file holds ``Q`` and ``K`` (optional scalar ``beta``, optional boolean
``causal``), or ``S``, or ``A``: float64 arrays, or float32 / float16 / integers (|v| <= 2**53),
which are widened to float64 exactly -- the rule of ``Operator.from_qk`` and the Python API.  A panel holds many operators as ``NAME/Q``, ``NAME/K``,
``NAME/beta``, ``NAME/causal``, ``NAME/S``, ``NAME/A``; other keys (``.../tokens``,
``__provenance__``: a JSON object name -> provenance) are metadata.  Array headers are read
and sizes checked *before* any array is loaded.  A float ``beta`` becomes the exact decimal
string of that double.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError, InvalidOperatorError, SizeLimitError
from ..kernel import MAX_ENTRIES, Operator, float_to_decimal_string

OPERATOR_LEAVES = {"Q", "K", "S", "A", "beta", "causal"}
PROVENANCE_KEY = "__provenance__"


def natural_key(name: str) -> tuple[list[str | int], str]:
    """Sort key that orders digit runs by value: ``L0H2`` before ``L0H10``, ``w64`` before ``w128``."""
    parts: list[str | int] = [int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", name, flags=re.ASCII))]
    return parts, name


@dataclass(frozen=True)
class NamedOperator:
    name: str
    operator: Operator
    provenance: dict[str, Any] = field(default_factory=dict)


def _headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of every member, read from the .npy headers only."""
    headers = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with archive.open(info) as handle:
                    major, _minor = np.lib.format.read_magic(handle)
                    read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                    shape, _fortran, dtype = read_header(handle)
                headers[info.filename[: -len(".npy")]] = (tuple(shape), dtype)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise InvalidInputError(f"{path}: not a readable .npz file ({exc})") from None
    return headers


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
    """An existing regular file, else one line that says what ``path`` is instead."""
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.npz"))[:3]
        hint = f" (it holds {', '.join(inside)}{', ...' if len(inside) == 3 else ''})" if inside else ""
        raise InvalidInputError(f"{path}: is a folder, not an .npz file: give the .npz file itself{hint}")
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such file")


def operator_names(path: str | Path) -> list[str]:
    """The names of the operators in an ``.npz`` file, in natural order (read from the array
    headers only: nothing is loaded)."""
    path = Path(path)
    _check_file(path)
    return sorted(_group(_headers(path), path.stem), key=natural_key)


def operator_shapes(path: str | Path) -> list[tuple[str, str, tuple[int, int]]]:
    """``(name, kind, (m, N))`` of every operator of an ``.npz`` file, from the headers only."""
    path = Path(path)
    _check_file(path)
    headers = _headers(path)
    out = []
    for name, leaves in sorted(_group(headers, path.stem).items(), key=lambda item: natural_key(item[0])):
        if "Q" in leaves:
            kind, shape = "qk", (headers[leaves["Q"]][0][0], headers[leaves["K"]][0][0] if "K" in leaves else -1)
        else:
            kind = "scores" if "S" in leaves else "probabilities"
            shape = headers[leaves["S" if "S" in leaves else "A"]][0][:2]
        out.append((name, kind, tuple(int(v) for v in shape)))
    return out


#: How a user lists a panel's operators (quoted by the messages below).
LIST_COMMAND = "softrank list"


def choose_operator_message(path: str | Path, names: list[str], how: str) -> str:
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


def load_operators(path: str | Path, names: list[str] | None = None) -> list[NamedOperator]:
    """Load the named operators (all when ``names`` is None, in natural name order: ``L0H2``
    before ``L0H10``; else in the order given)."""
    path = Path(path)
    _check_file(path)
    headers = _headers(path)
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
        for leaf, key in groups[name].items():
            shape, dtype = headers[key]
            if int(np.prod(shape, dtype=object)) > MAX_ENTRIES:
                raise SizeLimitError(f"{path}: {key} has shape {list(shape)}, beyond the size limit")
    provenance: dict[str, Any] = {}
    with np.load(path, allow_pickle=False) as data:
        if PROVENANCE_KEY in data.files:
            try:
                provenance = json.loads(str(data[PROVENANCE_KEY]))
            except ValueError:
                raise InvalidInputError(f"{path}: {PROVENANCE_KEY} is not a JSON object") from None
        return [NamedOperator(name, _build(name, groups[name], data), dict(provenance.get(name, {}))) for name in wanted]


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
