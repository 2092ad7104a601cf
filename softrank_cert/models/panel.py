"""Panels of real attention operators from a checkpoint and a document (UNTRUSTED front end).

:func:`build_panel` returns npz-ready arrays.  For model label ``M`` (``"minilm"`` or the
checkpoint folder's name), document stem ``D`` and each width ``w``:

* ``M/D/w<w>/tokens`` -- int64, the exactly ``w`` ids the model ran on
  (``[CLS] + first w-2 word pieces + [SEP]``, see :mod:`softrank_cert.models.bert`);
* ``M/D/w<w>/L<l>H<h>/Q``, ``.../K`` -- float64 (w x head_dim), layer ``l``, head ``h``
  (0-based), so ``A = softmax_rows(Q K^T / sqrt(head_dim))``: kind ``qk``, no ``beta`` key
  (the default ``inv_sqrt_d``), no mask (BERT is bidirectional);
* ``__provenance__`` -- a 0-d unicode array holding a JSON object mapping each operator name
  to ``{model, layer, head, width, text_sha256, text_name}``.

:func:`write_panel` writes them with ``np.savez_compressed`` to a temporary file in the
target folder and then ``os.replace``\\ s it, so a reader never sees a half-written panel.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from ..errors import InvalidInputError
from .bert import BertModel
from .common import read_text

PROVENANCE_KEY = "__provenance__"


def _selection(values: Iterable[int] | None, limit: int, what: str) -> list[int]:
    """Sorted distinct indices in 0..limit-1 (all of them when ``values`` is None)."""
    if values is None:
        return list(range(limit))
    chosen = sorted({int(v) for v in values})
    if not chosen or chosen[0] < 0 or chosen[-1] >= limit:
        raise InvalidInputError(f"{what} must be a non-empty selection of 0..{limit - 1}")
    return chosen


def _widths(widths: Iterable[int], max_positions: int) -> list[int]:
    out: list[int] = []
    for w in widths:
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)):
            raise InvalidInputError(f"width must be an integer, got {w!r}")
        if not 3 <= w <= max_positions:
            raise InvalidInputError(f"width {w} is outside 3..{max_positions} (max_position_embeddings)")
        if int(w) not in out:
            out.append(int(w))
    if not out:
        raise InvalidInputError("no widths given")
    return out


def build_panel(
    model: str | Path | BertModel,
    text_path: str | Path,
    widths: Iterable[int],
    layers: Iterable[int] | None = None,
    heads: Iterable[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, np.ndarray]:
    """Q/K operators of every selected (width, layer, head) of ``model`` on ``text_path``.

    ``model`` is ``"minilm"``, a BERT checkpoint folder, or an already loaded
    :class:`BertModel`.  ``progress(done, total)`` is called after each width with counts of
    operators.  Raises :class:`InvalidInputError` on bad input (one line).
    """
    bert = model if isinstance(model, BertModel) else BertModel.load(model)
    text, sha = read_text(text_path)
    stem = Path(text_path).stem
    widths = _widths(widths, bert.max_positions)
    layers = _selection(layers, bert.num_layers, "layers")
    heads = _selection(heads, bert.num_heads, "heads")
    pieces = bert.word_pieces(text)
    arrays: dict[str, np.ndarray] = {}
    provenance: dict[str, dict] = {}
    total, done = len(widths) * len(layers) * len(heads), 0
    for width in widths:
        ids = bert.prefix_ids(text, width, pieces)
        base = f"{bert.label}/{stem}/w{width}"
        arrays[f"{base}/tokens"] = ids
        out = bert.forward(ids, layers=layers)
        for layer in layers:
            for head in heads:
                name = f"{base}/L{layer}H{head}"
                arrays[f"{name}/Q"] = np.ascontiguousarray(out.q[layer][head], dtype=np.float64)
                arrays[f"{name}/K"] = np.ascontiguousarray(out.k[layer][head], dtype=np.float64)
                provenance[name] = {"model": bert.label, "layer": layer, "head": head, "width": width,
                                    "text_sha256": sha, "text_name": Path(text_path).name}
        done += len(layers) * len(heads)
        if progress is not None:
            progress(done, total)
    arrays[PROVENANCE_KEY] = np.array(json.dumps(provenance, sort_keys=True))
    return arrays


def operator_names(arrays: dict[str, np.ndarray]) -> list[str]:
    """Operator names of a panel (the keys of its ``__provenance__`` object, sorted)."""
    return sorted(json.loads(str(arrays[PROVENANCE_KEY][()])))


def write_panel(path: str | Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` as a compressed ``.npz`` atomically (temporary file, then ``os.replace``)."""
    path = Path(path)
    if path.suffix != ".npz":
        raise InvalidInputError(f"panel file must end in .npz, got {path.name}")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidInputError(f"output folder does not exist: {folder}")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.stem}.", suffix=".npz.tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez_compressed(handle, **arrays)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual file mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
