"""A float64 numpy forward of the GPT-2 decoder (UNTRUSTED front end; no torch).

What is computed, for input ids ``t`` (length n), attention mask all ones, dropout off::

    x_0 = E_tok[t] + E_pos[0:n]                       (learned absolute positions)
    per layer l, per head h (d = head_dim = n_embd / n_head):
        u   = LN_1(x)
        [Q | K | V] = u W_attn + b_attn               (Conv1D: W_attn is (n_embd, 3 n_embd))
        Q_h, K_h, V_h = columns of head h of Q, K, V
        A_h = softmax_rows(beta_l * Q_h K_h^T + M),    M_ij = -inf for j > i (causal)
        x   = x + concat_h(A_h V_h) W_proj + b_proj
        x   = x + act(LN_2(x) W_fc + b_fc) W_fcproj + b_fcproj
    x_final = LN_f(x)

``LN`` is LayerNorm with biased variance and ``layer_norm_epsilon``; ``act`` is the config's
``activation_function`` (``gelu_new`` = the tanh approximation by default).  Every weight is
widened exactly to float64 and every operation is float64.

``beta_l`` follows the config exactly as Hugging Face does: ``1/sqrt(d)`` when
``scale_attn_weights`` (default true; else 1), further divided by ``l + 1`` when
``scale_attn_by_inverse_layer_idx`` (default false).  :meth:`GPT2Model.beta` reports it as a
:class:`~softrank_cert.models.common.BetaInfo`: ``value=None`` (the operator default
``inv_sqrt_d``) when beta_l is exactly ``1/sqrt(d)``; the float64 beta_l when that double *is*
the real beta_l (``d`` a perfect square ``s*s`` and ``s (l+1)`` a power of two, or no
``1/sqrt(d)`` factor and ``l+1`` a power of two); otherwise the real beta_l (e.g.
``1/(8*3)``) is no float64 and ``exact=False`` with the correctly rounded double.

``reorder_and_upcast_attn`` (a float32 evaluation order of the same scores) does not change
the real scores and is ignored.  Cross-attention weights, if present, are not used.

Token convention: :class:`~softrank_cert.models.common.CausalTextMixin` (GPT-2's tokenizer
adds no special tokens: width ``w`` = the first ``w`` byte-level BPE ids of the document).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from pathlib import Path
from collections.abc import Iterable

import numpy as np

from ..errors import InvalidInputError
from .common import (INV_SQRT_D, AttentionOutput, BetaInfo, CausalTextMixin, Tensors, activation, attend, check_ids,
                     config_int, layer_depth, layer_norm, load_tokenizer, load_weights, read_config, resolve_model,
                     weight_prefix)


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


class GPT2Model(CausalTextMixin):
    """A GPT-2 checkpoint held as float64 numpy arrays, with its tokenizer (causal mask)."""

    model_type = "gpt2"
    causal = True

    def __init__(self, config: dict, weights: dict[str, np.ndarray], tokenizer=None, label: str = "gpt2"):
        if config.get("model_type", "gpt2") != "gpt2":
            raise InvalidInputError(f"model_type {config.get('model_type')!r} is not gpt2")
        self._act = activation(config, "activation_function", "gelu_new")
        self.hidden_size = config_int(config, "n_embd", "hidden_size")
        self.num_layers = config_int(config, "n_layer", "num_hidden_layers")
        self.num_heads = config_int(config, "n_head", "num_attention_heads")
        self.max_positions = config_int(config, "n_positions", "max_position_embeddings")
        if self.hidden_size % self.num_heads:
            raise InvalidInputError("n_embd is not a multiple of n_head")
        self.head_dim = self.hidden_size // self.num_heads
        self.inner = config_int(config, "n_inner") if config.get("n_inner") is not None else 4 * self.hidden_size
        self.eps = float(config.get("layer_norm_epsilon", 1e-5))
        self.scale_attn_weights = bool(config.get("scale_attn_weights", True))
        self.scale_by_layer = bool(config.get("scale_attn_by_inverse_layer_idx", False))
        self.config, self.label, self.tokenizer = config, label, tokenizer
        w = Tensors(weights, weight_prefix(weights, "wte.weight", ("", "transformer.")))
        hs = self.hidden_size
        self.wte = w.embedding("wte.weight", hs)
        self.wpe = w("wpe.weight", (self.max_positions, hs))
        self.ln_f = (w("ln_f.weight", (hs,)), w("ln_f.bias", (hs,)))
        self.layers: list[dict] = []
        for i in range(self.num_layers):
            b = f"h.{i}."
            self.layers.append({
                "ln1": (w(b + "ln_1.weight", (hs,)), w(b + "ln_1.bias", (hs,))),
                "qkv_w": w(b + "attn.c_attn.weight", (hs, 3 * hs)), "qkv_b": w(b + "attn.c_attn.bias", (3 * hs,)),
                "o_w": w(b + "attn.c_proj.weight", (hs, hs)), "o_b": w(b + "attn.c_proj.bias", (hs,)),
                "ln2": (w(b + "ln_2.weight", (hs,)), w(b + "ln_2.bias", (hs,))),
                "fc_w": w(b + "mlp.c_fc.weight", (hs, self.inner)), "fc_b": w(b + "mlp.c_fc.bias", (self.inner,)),
                "pr_w": w(b + "mlp.c_proj.weight", (self.inner, hs)), "pr_b": w(b + "mlp.c_proj.bias", (hs,)),
            })

    @staticmethod
    def _skip(name: str) -> bool:
        """Tensors never used: the old causal-mask buffers and the (tied) LM head."""
        return name.endswith((".attn.bias", ".attn.masked_bias")) or name.startswith("lm_head.")

    @classmethod
    def load(cls, model: str | Path) -> GPT2Model:
        """Load a checkpoint folder (config.json, tokenizer.json, model.safetensors or shards)."""
        label, folder = resolve_model(model, ("config.json", "tokenizer.json"))
        config = read_config(folder)
        return cls(config, load_weights(folder, cls._skip), load_tokenizer(folder), label)

    # -- beta -----------------------------------------------------------------------------
    def scaling(self, layer: int) -> float:
        """The float64 factor the forward multiplies ``Q_h K_h^T`` by (as Hugging Face computes it)."""
        value = self.head_dim ** -0.5 if self.scale_attn_weights else 1.0
        return value / float(layer + 1) if self.scale_by_layer else value

    def beta(self, layer: int) -> BetaInfo:
        """The real beta of ``layer`` (see the module docstring)."""
        div = layer + 1 if self.scale_by_layer else 1
        if self.scale_attn_weights and div == 1:
            return INV_SQRT_D
        d = self.head_dim
        if self.scale_attn_weights:
            formula = f"1/(sqrt({d})*{div})"
            root = math.isqrt(d)
            denominator = root * div if root * root == d else None
        else:
            formula = f"1/{div}"
            denominator = div
        if denominator is not None and _is_power_of_two(denominator):
            return BetaInfo(1.0 / denominator, True, formula)
        with localcontext() as ctx:
            ctx.prec = 60
            real = Decimal(1) / ((Decimal(d).sqrt() if self.scale_attn_weights else Decimal(1)) * div)
            return BetaInfo(float(real), False, formula)

    # -- forward --------------------------------------------------------------------------
    def forward(self, ids: np.ndarray, layers: Iterable[int] | None = None, probabilities: bool = False) -> AttentionOutput:
        """Run the decoder on ``ids`` (causal mask, positions 0..n-1) and record Q, K per layer.

        ``q[l]``, ``k[l]``: (heads, n, head_dim), so that head h's scores are
        ``beta_l * q[l][h] @ k[l][h].T`` with the causal mask.  ``layers=None`` records every
        layer, otherwise the run stops after the last listed one; ``probabilities=True`` also
        keeps ``A_h``; ``hidden`` is the residual stream after the last layer run (``LN_f``
        applied only when every layer ran).
        """
        ids = check_ids(ids, self.max_positions, self.wte.shape[0])
        wanted, depth = layer_depth(layers, self.num_layers)
        n, hs, hd = ids.shape[0], self.hidden_size, self.head_dim
        x = self.wte[ids] + self.wpe[:n]
        out = AttentionOutput(hidden=x, depth=depth)
        for i in range(depth):
            L = self.layers[i]
            qkv = layer_norm(x, *L["ln1"], self.eps) @ L["qkv_w"] + L["qkv_b"]  # type: ignore[call-arg]  # mypy: a *Any before a positional; (n, 3*hidden)
            q, k, v = (qkv[:, j * hs:(j + 1) * hs].reshape(n, self.num_heads, hd).transpose(1, 0, 2) for j in range(3))
            ctx = attend(out, i, q, k, v, self.scaling(i), causal=True, record=i in wanted, probabilities=probabilities)
            x = x + ctx @ L["o_w"] + L["o_b"]
            x = x + self._act(layer_norm(x, *L["ln2"], self.eps) @ L["fc_w"] + L["fc_b"]) @ L["pr_w"] + L["pr_b"]  # type: ignore[call-arg]  # mypy: a *Any before a positional
        out.hidden = layer_norm(x, *self.ln_f, self.eps) if depth == self.num_layers else x
        return out
