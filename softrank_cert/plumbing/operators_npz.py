"""Operators from ``.npz`` files (DESIGN.md section 4).

A single-operator file holds ``Q`` and ``K`` (optional scalar ``beta``, optional boolean
``causal``), or ``S``, or ``A``.  A panel holds many operators as ``NAME/Q``, ``NAME/K``,
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


def operator_names(path: str | Path) -> list[str]:
    path = Path(path)
    return sorted(_group(_headers(path), path.stem), key=natural_key)


def load_operators(path: str | Path, names: list[str] | None = None) -> list[NamedOperator]:
    """Load the named operators (all when ``names`` is None, in natural name order: ``L0H2``
    before ``L0H10``; else in the order given)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such file")
    headers = _headers(path)
    groups = _group(headers, path.stem)
    if not groups:
        raise InvalidInputError(f"{path}: holds no operator (expected Q and K, S, or A arrays)")
    wanted = sorted(groups, key=natural_key) if names is None else names
    for name in wanted:
        if name not in groups:
            raise InvalidInputError(f"{path}: no operator named {name!r} (it holds {len(groups)}: e.g. "
                                    f"{min(groups, key=natural_key)!r})")
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
    arrays = {leaf: data[key] for leaf, key in leaves.items() if leaf in ("Q", "K", "S", "A")}
    for leaf, array in arrays.items():
        if array.dtype != np.float64:
            raise InvalidOperatorError(f"{name}/{leaf} must be float64, is {array.dtype}")
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
        operator = Operator(kind=kind, arrays=arrays, beta=beta, mask="causal" if causal else "none")
    except InvalidOperatorError as exc:
        raise InvalidOperatorError(f"{name}: {exc}") from None
    return operator
