"""A float64 numpy forward of Llama and Qwen2 decoders (UNTRUSTED front end; no torch).

What is computed, for input ids ``t`` (length n, positions ``p = 0..n-1``), attention mask
all ones, dropout off, ``H`` query heads, ``G`` key/value heads, ``d = head_dim``::

    x_0 = E_tok[t]
    per layer l:
        u = RMS_1(x)                                   RMS(x) = x / sqrt(mean(x^2) + eps) * g
        q = u W_q^T (+ b_q),  k = u W_k^T (+ b_k),  v = u W_v^T (+ b_v)
        Q_h = rope(q[:, head h]),  K_h = rope(k[:, kv head h // (H/G)])   (grouped-query)
        A_h = softmax_rows(Q_h K_h^T / sqrt(d) + M),   M_ij = -inf for j > i (causal)
        x   = x + concat_h(A_h V_{h // (H/G)}) W_o^T (+ b_o)
        u   = RMS_2(x)
        x   = x + (silu(u W_gate^T) * (u W_up^T)) W_down^T    (+ biases if mlp_bias)
    x_final = RMS_f(x)

``rope`` is Hugging Face's (rotate-half) rotary embedding with the default rope type::

    inv_freq_i = 1 / theta^(2i/d)  (i = 0..d/2-1),   phi_p = p * [inv_freq, inv_freq]  (length d)
    rope(z)_p  = z_p * cos(phi_p) + rotate_half(z_p) * sin(phi_p),  rotate_half([a, b]) = [-b, a]

with ``theta = rope_theta`` (``rope_parameters.rope_theta`` in transformers 5 configs).  Any
other rope type (``rope_scaling`` not null: linear, dynamic, yarn, llama3, ...) is refused.
Biases: Qwen2 always has q/k/v biases (no o bias); Llama has q/k/v/o biases exactly when
``attention_bias`` and MLP biases when ``mlp_bias``.  Every weight is widened exactly to
float64 and every operation is float64; ``beta = 1/sqrt(head_dim)`` exactly (``inv_sqrt_d``),
``head_dim`` from the config or ``hidden_size / num_attention_heads``.

Hugging Face itself evaluates RMSNorm, the rotary tables and the attention softmax in float32
even in a float64 model; the values here are the float64 evaluation of the same real
formulas.  A Qwen2 config with ``use_sliding_window`` caps the width at ``sliding_window``,
where sliding-window attention equals plain causal attention.

Token convention: :class:`~softrank_cert.models.common.CausalTextMixin` (Llama tokenizers
put BOS first, so width ``w`` = BOS + first ``w-1`` pieces; Qwen2 adds nothing).
"""

from __future__ import annotations

import math
from pathlib import Path
from collections.abc import Iterable

import numpy as np
from scipy.special import expit

from ..errors import InvalidInputError
from .common import (ACTIVATIONS, INV_SQRT_D, AttentionOutput, BetaInfo, CausalTextMixin, Tensors, activation, attend,
                     check_ids, config_head_dim, config_int, layer_depth, linear, load_tokenizer, load_weights,
                     read_config, resolve_model, weight_prefix)

MODEL_TYPES = ("llama", "qwen2")
_ACT = {**ACTIVATIONS, "silu": lambda x: x * expit(x)}


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """Row-wise RMSNorm: ``x / sqrt(mean(x^2) + eps) * gain``."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * gain


def rope_theta(config: dict) -> float:
    """``rope_theta`` of a default-RoPE config; any RoPE scaling raises InvalidInputError."""
    scaling = config.get("rope_scaling")
    if scaling is not None:
        kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else scaling
        if kind != "default":
            raise InvalidInputError(f"rope_scaling {kind!r} is not supported: only rope_scaling null (default RoPE)")
    params = config.get("rope_parameters")
    if params is not None:
        if not isinstance(params, dict):
            raise InvalidInputError("config.json rope_parameters is not an object")
        kind = params.get("rope_type", params.get("type", "default"))
        extra = sorted(set(params) - {"rope_type", "type", "rope_theta"})
        if kind != "default":
            raise InvalidInputError(f"rope type {kind!r} is not supported: only default RoPE")
        if extra:
            raise InvalidInputError(f"rope_parameters {', '.join(extra)} are not supported: only default RoPE")
    theta = (params or {}).get("rope_theta", config.get("rope_theta", 10000.0))
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not math.isfinite(theta) or theta <= 1:
        raise InvalidInputError(f"config.json rope_theta must be a number > 1, got {theta!r}")
    if config.get("partial_rotary_factor", 1.0) != 1.0:
        raise InvalidInputError("partial_rotary_factor other than 1 is not supported")
    return float(theta)


def rope_tables(n: int, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """``(cos, sin)``, each (n, head_dim): ``cos(phi_p)``, ``sin(phi_p)`` for positions 0..n-1."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    freqs = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=1)
    return np.cos(emb), np.sin(emb)


def apply_rope(z: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """``z * cos + rotate_half(z) * sin`` for z (..., n, head_dim)."""
    half = z.shape[-1] // 2
    rotated = np.concatenate([-z[..., half:], z[..., :half]], axis=-1)
    return z * cos + rotated * sin


class LlamaModel(CausalTextMixin):
    """A Llama or Qwen2 checkpoint held as float64 numpy arrays, with its tokenizer (causal mask)."""

    causal = True

    def __init__(self, config: dict, weights: dict[str, np.ndarray], tokenizer=None, label: str = "llama"):
        self.model_type = config.get("model_type")
        if self.model_type not in MODEL_TYPES:
            raise InvalidInputError(f"model_type {self.model_type!r} is not one of {', '.join(MODEL_TYPES)}")
        self._act = activation(config, "hidden_act", "silu", _ACT)
        self.hidden_size = config_int(config, "hidden_size")
        self.num_layers = config_int(config, "num_hidden_layers")
        self.num_heads = config_int(config, "num_attention_heads")
        self.num_kv_heads = config_int(config, "num_key_value_heads", "num_attention_heads")
        self.max_positions = config_int(config, "max_position_embeddings")
        self.intermediate = config_int(config, "intermediate_size")
        if self.num_heads % self.num_kv_heads:
            raise InvalidInputError("num_attention_heads is not a multiple of num_key_value_heads")
        self.head_dim = config_head_dim(config, self.hidden_size, self.num_heads,
                                        "hidden_size is not a multiple of num_attention_heads and config has no head_dim")
        if self.head_dim % 2:
            raise InvalidInputError(f"head_dim {self.head_dim} is odd: rotary embeddings need an even head_dim")
        self.theta = rope_theta(config)
        self.eps = float(config.get("rms_norm_eps", 1e-6))
        if self.model_type == "qwen2" and config.get("use_sliding_window"):
            window = config_int(config, "sliding_window")
            layer_types = config.get("layer_types") or []
            if not layer_types or "sliding_attention" in layer_types:
                self.max_positions = min(self.max_positions, window)
        self.group = self.num_heads // self.num_kv_heads
        self.config, self.label, self.tokenizer = config, label, tokenizer
        qkv_bias = self.model_type == "qwen2" or bool(config.get("attention_bias", False))
        o_bias = self.model_type == "llama" and bool(config.get("attention_bias", False))
        mlp_bias = self.model_type == "llama" and bool(config.get("mlp_bias", False))
        w = Tensors(weights, weight_prefix(weights, "embed_tokens.weight", ("", "model.")), refuse_unused=True)
        hs, nq, nkv, mi = self.hidden_size, self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim, self.intermediate
        self.embed = w.embedding("embed_tokens.weight", hs)
        self.norm = w("norm.weight", (hs,))
        self.layers: list[dict] = []
        for i in range(self.num_layers):
            a, m = f"layers.{i}.self_attn.", f"layers.{i}.mlp."
            qw, kw, vw = w(a + "q_proj.weight", (nq, hs)), w(a + "k_proj.weight", (nkv, hs)), w(a + "v_proj.weight", (nkv, hs))
            gate_b, up_b = w(m + "gate_proj.bias", (mi,), mlp_bias), w(m + "up_proj.bias", (mi,), mlp_bias)
            qb, kb, vb = w(a + "q_proj.bias", (nq,), qkv_bias), w(a + "k_proj.bias", (nkv,), qkv_bias), w(a + "v_proj.bias", (nkv,), qkv_bias)
            self.layers.append({
                "in": w(f"layers.{i}.input_layernorm.weight", (hs,)),
                "post": w(f"layers.{i}.post_attention_layernorm.weight", (hs,)),
                # Q, K, V in one (hidden x (nq + 2 nkv)) matrix: one matmul per layer.
                "qkv_w": np.ascontiguousarray(np.concatenate([qw, kw, vw]).T),
                "qkv_b": np.concatenate([qb, kb, vb]) if qkv_bias else None,
                "o_w": np.ascontiguousarray(w(a + "o_proj.weight", (hs, nq)).T), "o_b": w(a + "o_proj.bias", (hs,), o_bias),
                "gu_w": np.ascontiguousarray(np.concatenate([w(m + "gate_proj.weight", (mi, hs)), w(m + "up_proj.weight", (mi, hs))]).T),
                "gu_b": np.concatenate([gate_b, up_b]) if mlp_bias else None,
                "d_w": np.ascontiguousarray(w(m + "down_proj.weight", (hs, mi)).T), "d_b": w(m + "down_proj.bias", (hs,), mlp_bias),
            })

    @classmethod
    def load(cls, model: str | Path) -> LlamaModel:
        """Load a checkpoint folder (config.json, tokenizer.json, model.safetensors or shards)."""
        label, folder = resolve_model(model, ("config.json", "tokenizer.json"))
        config = read_config(folder)
        return cls(config, load_weights(folder, lambda name: name.startswith("lm_head.")), load_tokenizer(folder), label)

    def kv_head(self, head: int) -> int:
        """The key/value head that query head ``head`` reads: ``head // (H / G)``."""
        return head // self.group

    def beta(self, layer: int) -> BetaInfo:
        """Every layer's beta is exactly ``1/sqrt(head_dim)`` (``inv_sqrt_d``)."""
        return INV_SQRT_D

    def forward(self, ids: np.ndarray, layers: Iterable[int] | None = None, probabilities: bool = False) -> AttentionOutput:
        """Run the decoder on ``ids`` (causal mask, positions 0..n-1) and record Q, K per layer.

        ``q[l]``, ``k[l]``: (num_attention_heads, n, head_dim) *after* the rotary embedding;
        ``k[l][h]`` is the key matrix of kv head :meth:`kv_head` ``(h)``, repeated per query
        head, so head h's scores are ``q[l][h] @ k[l][h].T / sqrt(head_dim)`` with the causal
        mask.  ``layers``, ``probabilities`` and ``hidden`` as in :meth:`GPT2Model.forward`
        (``hidden`` gets the final RMSNorm only when every layer ran).
        """
        ids = check_ids(ids, self.max_positions, self.embed.shape[0])
        wanted, depth = layer_depth(layers, self.num_layers)
        n, hd, H, G = ids.shape[0], self.head_dim, self.num_heads, self.num_kv_heads
        cos, sin = rope_tables(n, hd, self.theta)
        x = self.embed[ids]
        out = AttentionOutput(hidden=x, depth=depth)
        scale = 1.0 / math.sqrt(hd)
        for i in range(depth):
            L = self.layers[i]
            qkv = linear(rms_norm(x, L["in"], self.eps), L["qkv_w"], L["qkv_b"])
            q = qkv[:, :H * hd].reshape(n, H, hd).transpose(1, 0, 2)
            k = qkv[:, H * hd:(H + G) * hd].reshape(n, G, hd).transpose(1, 0, 2)
            v = qkv[:, (H + G) * hd:].reshape(n, G, hd).transpose(1, 0, 2)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            k, v = np.repeat(k, self.group, axis=0), np.repeat(v, self.group, axis=0)  # kv head h // group
            ctx = attend(out, i, q, k, v, scale, causal=True, record=i in wanted, probabilities=probabilities)
            x = x + ctx @ L["o_w"]
            if L["o_b"] is not None:  # after the residual sum, as Hugging Face adds it (not x + linear(...))
                x = x + L["o_b"]
            gu = linear(rms_norm(x, L["post"], self.eps), L["gu_w"], L["gu_b"])
            x = x + (self._act(gu[:, :self.intermediate]) * gu[:, self.intermediate:]) @ L["d_w"]
            if L["d_b"] is not None:
                x = x + L["d_b"]
        out.hidden = rms_norm(x, self.norm, self.eps) if depth == self.num_layers else x
        return out
