"""A GGUF file checked before it is believed (UNTRUSTED front end; the ``[gguf]`` extra).

transformers' GGUF loader builds the model from the file's metadata and then fills it with the
tensors it finds: a tensor that is missing is left with freshly initialised random weights, one
it does not expect is dropped, and a metadata value is taken as it comes.  So every GGUF file is
checked here **before** anything is loaded, from its metadata and tensor list only (the ``gguf``
package's reader, memory-mapped; no tensor data is decoded), against the layout of its
architecture in :data:`ARCHITECTURES`:

* ``general.architecture`` is one of :data:`ARCHITECTURES` (llama, qwen2, gemma3);
* each metadata value the loader reads has its type (an integer, a float, a string; never an
  array where one value belongs) and lies in a bounded range (:data:`LIMITS`): ``block_count``
  1..4096, head counts 1..1024 with the key/value heads dividing the query heads, ...; metadata
  that changes the model but that the loader does not read (RoPE scaling, a non-causal flag,
  Gemma 3's local RoPE base) has the value the loader assumes;
* the tensor list is exactly the architecture's: ``token_embd.weight``, ``output_norm.weight``
  (and optionally the LM head ``output.weight``) and, in every block ``0 .. block_count-1``,
  each tensor of the block layout -- none missing, none unexpected (a block past
  ``block_count``, a bias the architecture has no place for, Llama 3's ``rope_freqs``), each
  shape what the metadata implies (embedding length, head counts, head size, feed-forward
  length, vocabulary), each tensor of a type ``gguf.dequantize`` decodes;
* the vocabulary transformers will size the model with (``ARCH.vocab_size``, else the number
  of ``tokenizer.ggml.tokens``) is the embedding's, and the special-token ids lie inside it.

:func:`check_gguf` returns the checked :class:`GGUFLayout` or raises one-line
:class:`~softrank_cert.errors.InvalidInputError` naming the file and the first problem.  After
loading, :func:`check_loading_info` is the second check: the loading info of the block-by-block
loader (:func:`~.gguf_blocks.load_gguf_model`, in the shape of transformers'
``output_loading_info=True``) must report no missing, unexpected or mismatched weight.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInputError

#: Shape symbols: E embedding length, V vocabulary, F feed-forward length, D head size,
#: Q = query heads x D, KV = key/value heads x D.  Shapes are GGUF's (``ne0`` first).
_DECODER_BLOCK: dict[str, tuple[str, ...]] = {
    "attn_norm.weight": ("E",), "attn_q.weight": ("E", "Q"), "attn_k.weight": ("E", "KV"),
    "attn_v.weight": ("E", "KV"), "attn_output.weight": ("Q", "E"), "ffn_norm.weight": ("E",),
    "ffn_gate.weight": ("E", "F"), "ffn_up.weight": ("E", "F"), "ffn_down.weight": ("F", "E"),
}
_GLOBAL: dict[str, tuple[str, ...]] = {"token_embd.weight": ("E", "V"), "output_norm.weight": ("E",)}
#: The LM head: written only when it is not tied to the embedding; the captured base model does
#: not use it (checked, never loaded).
_OPTIONAL: dict[str, tuple[str, ...]] = {"output.weight": ("E", "V")}


#: Metadata (after ``ARCH.``) that changes what the model computes but that transformers' GGUF
#: loader does not read -> (kind, the one value it builds the model as if the file said).
_UNREAD: dict[str, tuple[str, Any]] = {"rope.scaling.type": ("str", "none"), "attention.causal": ("bool", True)}


@dataclass(frozen=True)
class Architecture:
    """The tensor layout and head-size rule of one GGUF architecture.

    ``head_size``: ``"rope.dimension_count"`` (Llama: that key when present, else E / heads, as
    transformers reads it), ``"embedding"`` (E / heads) or ``"attention.key_length"`` (required).
    ``unread``: more of :data:`_UNREAD`, for this architecture.
    """

    name: str
    block: Mapping[str, tuple[str, ...]]
    head_size: str
    unread: Mapping[str, tuple[str, Any]] = field(default_factory=dict)


#: The architectures whose GGUF files are checked and then loaded: tensor layouts as llama.cpp
#: writes them and transformers' GGUF loader maps them (tests/models/test_gguf_checks.py
#: compares each with transformers' own mapping).
ARCHITECTURES: dict[str, Architecture] = {
    "llama": Architecture("llama", _DECODER_BLOCK, "rope.dimension_count"),
    "qwen2": Architecture("qwen2", {**_DECODER_BLOCK, "attn_q.bias": ("Q",), "attn_k.bias": ("KV",),
                                    "attn_v.bias": ("KV",)}, "embedding"),
    "gemma3": Architecture("gemma3", {**_DECODER_BLOCK, "attn_q_norm.weight": ("D",), "attn_k_norm.weight": ("D",),
                                      "post_attention_norm.weight": ("E",), "post_ffw_norm.weight": ("E",)},
                           "attention.key_length", {"rope.freq_base_swa": ("float", 10000.0)}),
}

#: Metadata key (after ``ARCH.``) -> (kind, required, low, high): the values the loader reads.
LIMITS: dict[str, tuple[str, bool, float, float]] = {
    "block_count": ("int", True, 1, 4096),
    "embedding_length": ("int", True, 1, 1 << 16),
    "feed_forward_length": ("int", True, 1, 1 << 20),
    "attention.head_count": ("int", True, 1, 1024),
    "attention.head_count_kv": ("int", False, 1, 1024),
    "attention.key_length": ("int", False, 1, 1024),
    "attention.value_length": ("int", False, 1, 1024),
    "rope.dimension_count": ("int", False, 1, 1024),
    "context_length": ("int", False, 1, 1 << 24),
    "vocab_size": ("int", False, 1, 1 << 22),
    "attention.sliding_window": ("int", False, 1, 1 << 24),
    "attention.layer_norm_rms_epsilon": ("float", True, 0.0, 1.0),
    "rope.freq_base": ("float", False, 0.0, 1e12),
}
#: Largest vocabulary (embedding rows) accepted.
MAX_VOCAB = 1 << 22
_SPECIAL_IDS = ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id")
_INT_TYPES = frozenset({"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64"})
_FLOAT_TYPES = frozenset({"FLOAT32", "FLOAT64"})
#: kind -> (the GGUF value types it accepts, its name in a refusal)
_KINDS = {"int": (_INT_TYPES, "an integer"), "float": (_INT_TYPES | _FLOAT_TYPES, "a number"),
          "str": (frozenset({"STRING"}), "a string"), "bool": (frozenset({"BOOL"}), "a boolean")}
_BLOCK_NAME = re.compile(r"blk\.(\d+)\.(.+)")


@dataclass(frozen=True)
class GGUFLayout:
    """What :func:`check_gguf` established about a file: its architecture, sizes and tensors."""

    architecture: str
    blocks: int
    width: int
    heads: int
    kv_heads: int
    head_dim: int
    feed_forward: int
    vocab: int
    context_length: int | None
    sliding_window: int | None
    tensor_count: int
    tensor_types: dict[str, int] = field(default_factory=dict)
    parameters: int = 0
    lm_head: bool = False


class _Problem(Exception):
    """The first thing wrong with the file (becomes the one-line InvalidInputError)."""


def _value(reader: Any, key: str, kind: str) -> Any:
    """The single value of metadata ``key`` of ``kind`` (int, float, str), or None when absent."""
    item = reader.fields.get(key)
    if item is None:
        return None
    types = [t.name for t in item.types]
    wanted, name = _KINDS[kind]
    if len(types) != 1 or types[0] not in wanted or len(item.data) != 1:
        raise _Problem(f"metadata {key} is {'/'.join(types) or 'empty'}, not {name}")
    raw = item.parts[item.data[0]]
    if kind == "str":
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise _Problem(f"metadata {key} is not UTF-8") from None
    number = raw.tolist()[0]
    return {"int": int, "float": float, "bool": bool}[kind](number)


def _metadata(reader: Any, arch: str) -> dict[str, Any]:
    """Every :data:`LIMITS` key of ``arch`` that the file has, typed and in range."""
    out: dict[str, Any] = {}
    for key, (kind, required, low, high) in LIMITS.items():
        value = _value(reader, f"{arch}.{key}", kind)
        if value is None:
            if required:
                raise _Problem(f"metadata {arch}.{key} is missing")
            continue
        if not (math.isfinite(value) and low <= value <= high) or (kind == "float" and value == low):
            bounds = f"{low:g} < x <= {high:g}" if kind == "float" else f"{int(low)}..{int(high)}"
            raise _Problem(f"metadata {arch}.{key} = {value!r} is outside {bounds}")
        out[key] = value
    return out


def _unread(reader: Any, spec: Architecture) -> None:
    """Refuse a value of :data:`_UNREAD` (or ``spec.unread``) other than the one transformers assumes."""
    for key, (kind, assumed) in {**_UNREAD, **spec.unread}.items():
        value = _value(reader, f"{spec.name}.{key}", kind)
        if value is not None and value != assumed:
            raise _Problem(f"metadata {spec.name}.{key} = {value!r} changes the model, but transformers' GGUF loader "
                           f"does not read it (it builds the model as if {assumed!r})")


def _head_dim(spec: Architecture, meta: dict[str, Any]) -> int:
    """The head size transformers builds the model with, checked against the file's other sizes."""
    width, heads = meta["embedding_length"], meta["attention.head_count"]
    kv = meta.setdefault("attention.head_count_kv", heads)
    if kv > heads or heads % kv:
        raise _Problem(f"{kv} key/value heads do not divide {heads} query heads")
    if spec.head_size == "attention.key_length" and "attention.key_length" not in meta:
        raise _Problem(f"metadata {spec.name}.attention.key_length (the head size) is missing")
    if spec.head_size in meta:
        head_dim = int(meta[spec.head_size])
    elif width % heads:
        raise _Problem(f"embedding length {width} is not a multiple of {heads} heads")
    else:
        head_dim = width // heads
    for key in ("attention.key_length", "attention.value_length", "rope.dimension_count"):
        if meta.get(key, head_dim) != head_dim:
            raise _Problem(f"metadata {spec.name}.{key} = {meta[key]} differs from the head size {head_dim} "
                           "transformers builds the model with")
    return head_dim


def layout_tensors(architecture: str, blocks: int) -> dict[str, tuple[str, ...]]:
    """Tensor name -> symbolic shape (:data:`_DECODER_BLOCK`'s symbols) of every tensor a file of
    ``architecture`` (a key of :data:`ARCHITECTURES`) with ``blocks`` blocks must hold; the LM head
    ``output.weight`` may be there too."""
    out = dict(_GLOBAL)
    for b in range(blocks):
        out.update({f"blk.{b}.{name}": shape for name, shape in ARCHITECTURES[architecture].block.items()})
    return out


def _tensors(reader: Any, spec: Architecture, blocks: int, sizes: dict[str, int]) -> None:
    """Every needed tensor present, none unexpected, each of the shape ``sizes`` implies."""
    found = {t.name: t for t in reader.tensors}
    expected = layout_tensors(spec.name, blocks)
    for name in expected:
        if name not in found:
            raise _Problem(f"tensor {name} is missing (the {spec.name} layout needs it; "
                           "transformers would leave it with random weights)")
    for name in found:
        if name not in expected and name not in _OPTIONAL:
            match = _BLOCK_NAME.fullmatch(name)
            where = (f"block {match[1]} is past block_count {blocks}" if match and int(match[1]) >= blocks
                     else f"the {spec.name} layout has no such tensor")
            raise _Problem(f"unexpected tensor {name}: {where} (transformers would drop it)")
    for name, symbols in {**expected, **{k: v for k, v in _OPTIONAL.items() if k in found}}.items():
        shape = tuple(int(n) for n in found[name].shape)
        want = tuple(sizes[s] for s in symbols)
        if shape != want:
            raise _Problem(f"tensor {name} has shape {list(shape)}, the metadata implies {list(want)} "
                           f"({' x '.join(symbols)})")


def _vocabulary(reader: Any, arch: str, vocab: int, meta: dict[str, Any]) -> None:
    """The vocabulary transformers sizes the model with is the embedding's; special ids inside it."""
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    count = len(tokens.data) if tokens is not None and [t.name for t in tokens.types] == ["ARRAY", "STRING"] else None
    stated = meta.get("vocab_size", count)
    if stated is None:
        raise _Problem(f"neither {arch}.vocab_size nor a tokenizer.ggml.tokens list of strings says the vocabulary")
    if stated != vocab:
        raise _Problem(f"the vocabulary has {stated} tokens, the embedding token_embd.weight {vocab} rows")
    for key in _SPECIAL_IDS:
        token = _value(reader, f"tokenizer.ggml.{key}", "int")
        if token is not None and not 0 <= token < (count if count is not None else vocab):
            raise _Problem(f"metadata tokenizer.ggml.{key} = {token} is not a token of the vocabulary")


def _tensor_types(reader: Any) -> dict[str, int]:
    """Type name -> tensor count, refusing a type ``gguf.dequantize`` does not decode."""
    import gguf
    import numpy as np

    counts = Counter(t.tensor_type for t in reader.tensors)
    for qtype in counts:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        try:
            gguf.dequantize(np.zeros(size, dtype=np.uint8), qtype)  # one block of zeros: the decoder exists
        except (NotImplementedError, ValueError, TypeError):
            raise _Problem(f"tensor type {qtype.name} cannot be dequantized (gguf.dequantize)") from None
    return {q.name: n for q, n in sorted(counts.items(), key=lambda item: item[0].name)}


def _layout(reader: Any) -> GGUFLayout:
    arch = _value(reader, "general.architecture", "str")
    if arch not in ARCHITECTURES:
        raise _Problem(f"GGUF architecture {arch!r} is not one whose files softrank-cert checks before loading "
                       f"({', '.join(ARCHITECTURES)})")
    spec = ARCHITECTURES[arch]
    meta = _metadata(reader, arch)
    _unread(reader, spec)
    head_dim = _head_dim(spec, meta)
    embedding = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
    vocab = int(embedding.shape[-1]) if embedding is not None and len(embedding.shape) == 2 else 0
    if embedding is not None and not 1 <= vocab <= MAX_VOCAB:
        raise _Problem(f"tensor token_embd.weight has shape {[int(n) for n in embedding.shape]} "
                       f"(a vocabulary of 1..{MAX_VOCAB} rows of the embedding length)")
    heads, kv = meta["attention.head_count"], meta["attention.head_count_kv"]
    sizes = {"E": meta["embedding_length"], "V": vocab, "F": meta["feed_forward_length"], "D": head_dim,
             "Q": heads * head_dim, "KV": kv * head_dim}
    _tensors(reader, spec, meta["block_count"], sizes)
    _vocabulary(reader, arch, vocab, meta)
    return GGUFLayout(architecture=arch, blocks=meta["block_count"], width=sizes["E"], heads=heads, kv_heads=kv,
                      head_dim=head_dim, feed_forward=sizes["F"], vocab=vocab,
                      context_length=meta.get("context_length"), sliding_window=meta.get("attention.sliding_window"),
                      tensor_count=len(reader.tensors), tensor_types=_tensor_types(reader),
                      parameters=sum(int(t.n_elements) for t in reader.tensors),
                      lm_head=any(t.name == "output.weight" for t in reader.tensors))


def check_gguf(reader: Any, where: str) -> GGUFLayout:
    """The checked layout of the GGUF file ``reader`` (a ``gguf.GGUFReader``) has read (module
    docstring); reads its metadata and tensor list, never its tensor data.  Raises one-line
    InvalidInputError ``"<where>: <the first problem>"`` for anything else."""
    try:
        return _layout(reader)
    except _Problem as problem:
        raise InvalidInputError(f"{where}: {problem}") from None


def check_loading_info(info: Mapping[str, Any], where: str) -> None:
    """Refuse (one line naming ``where``) a model loaded incompletely: ``info`` is
    :func:`~.gguf_blocks.load_gguf_model`'s second value (the shape of
    ``from_pretrained(..., output_loading_info=True)``'s), whose
    ``missing_keys`` (left with random weights), ``unexpected_keys``, ``mismatched_keys`` and
    ``error_msgs`` must all be empty."""
    for key, what in (("missing_keys", "missing (no tensor of the file fills it)"), ("unexpected_keys", "unexpected"),
                      ("mismatched_keys", "of the wrong shape"), ("error_msgs", "in error")):
        items = sorted(str(item[0] if isinstance(item, tuple) else item) for item in info.get(key) or ())
        if items:
            raise InvalidInputError(f"{where}: the loaded model has {len(items)} weight{'s' if len(items) > 1 else ''} "
                                    f"{what} after loading, e.g. {items[0]}")
