"""Tiny GGUF files written with the ``gguf`` package's GGUFWriter, well formed or hostile.

:func:`forge` writes a complete, loadable model of architecture ``llama``, ``qwen2`` or
``gemma3`` (2 blocks, width 16, 2 query heads over 1 key/value head of dimension 8, a byte-level
GPT-2 tokenizer of 256 byte tokens, one merge and 2 specials), in the tensor layout llama.cpp
writes: every tensor the architecture's blocks need, named and shaped as in llama.cpp.  Its
keywords break it the ways a hostile or broken file does: ``drop`` (tensor names to leave out),
``extra`` (tensors to add), ``shapes`` (tensor name -> another shape), ``meta`` (metadata key
without the architecture prefix -> a replacement value, written with the type of the value:
``int`` as UINT32, ``float`` as FLOAT32, ``bool`` as BOOL, ``str`` as STRING, ``None`` to leave
the key out), ``arch_name`` (the architecture the metadata claims, default ``arch``: the tensors
stay ``arch``'s), ``merges`` (the tokenizer's BPE merges).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

WIDTH, HEADS, KV_HEADS, HEAD_DIM, FFN, BLOCKS = 16, 2, 1, 8, 32, 2
VOCAB = 259  # 256 byte tokens, one merge, <s>, </s>


def _byte_tokens() -> list[str]:
    """GPT-2's byte-level alphabet, in byte order (``bytes_to_unicode``)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def tensors(arch: str) -> dict[str, tuple[int, ...]]:
    """Tensor name -> GGUF shape (``ne0`` first, as ``GGUFReader`` reports it) of a well-formed file."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    out: dict[str, tuple[int, ...]] = {"token_embd.weight": (WIDTH, VOCAB), "output_norm.weight": (WIDTH,)}
    for b in range(BLOCKS):
        block = {"attn_norm.weight": (WIDTH,), "attn_q.weight": (WIDTH, q), "attn_k.weight": (WIDTH, kv),
                 "attn_v.weight": (WIDTH, kv), "attn_output.weight": (q, WIDTH), "ffn_norm.weight": (WIDTH,),
                 "ffn_gate.weight": (WIDTH, FFN), "ffn_up.weight": (WIDTH, FFN), "ffn_down.weight": (FFN, WIDTH)}
        if arch == "qwen2":
            block |= {"attn_q.bias": (q,), "attn_k.bias": (kv,), "attn_v.bias": (kv,)}
        if arch == "gemma3":
            block |= {"attn_q_norm.weight": (HEAD_DIM,), "attn_k_norm.weight": (HEAD_DIM,),
                      "post_attention_norm.weight": (WIDTH,), "post_ffw_norm.weight": (WIDTH,)}
        out |= {f"blk.{b}.{name}": shape for name, shape in block.items()}
    return out


def metadata(arch: str) -> dict[str, Any]:
    """Architecture metadata (keys without the ``ARCH.`` prefix) of a well-formed file."""
    meta: dict[str, Any] = {"block_count": BLOCKS, "context_length": 256, "embedding_length": WIDTH,
                            "feed_forward_length": FFN, "attention.head_count": HEADS,
                            "attention.head_count_kv": KV_HEADS, "attention.layer_norm_rms_epsilon": 1e-6,
                            "rope.freq_base": 10000.0}
    if arch == "llama":
        meta["rope.dimension_count"] = HEAD_DIM
    if arch == "gemma3":
        meta |= {"attention.key_length": HEAD_DIM, "attention.value_length": HEAD_DIM, "attention.sliding_window": 64}
    return meta


def forge(path: Path, arch: str = "llama", *, drop: tuple[str, ...] = (), extra: dict[str, tuple[int, ...]] | None = None,
          shapes: dict[str, tuple[int, ...]] | None = None, meta: dict[str, Any] | None = None,
          arch_name: str | None = None, merges: tuple[str, ...] = ("\u0120 t",)) -> Path:
    """Write the file (module docstring) to ``path`` and return ``path``."""
    import gguf

    name = arch_name or arch
    writer = gguf.GGUFWriter(str(path), name)
    writer.add_name("forged tiny model")
    writer.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    for key, value in {**metadata(arch), **(meta or {})}.items():
        full = f"{name}.{key}"
        if value is None:
            continue
        if isinstance(value, bool):
            writer.add_bool(full, value)
        elif isinstance(value, str):
            writer.add_string(full, value)
        elif isinstance(value, float):
            writer.add_float32(full, value)
        else:
            writer.add_uint32(full, int(value))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list([*_byte_tokens(), "\u0120t", "<s>", "</s>"])
    writer.add_token_types([1] * 257 + [3, 3])
    writer.add_token_merges(list(merges))
    writer.add_bos_token_id(257)
    writer.add_eos_token_id(258)
    writer.add_add_bos_token(False)
    rng = np.random.default_rng(0)
    layout = {k: v for k, v in tensors(arch).items() if k not in drop} | (extra or {}) | (shapes or {})
    for tensor, shape in layout.items():
        data = rng.standard_normal(tuple(reversed(shape))).astype(np.float32) * 0.2
        if tensor.endswith("norm.weight"):
            data = data + 1.0
        writer.add_tensor(tensor, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
