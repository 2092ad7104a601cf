"""Real attention operators from real checkpoints (UNTRUSTED front end; numpy + safetensors,
``tokenizers`` for text, no torch at run time).

* :class:`BertModel` -- float64 numpy forward of a BERT encoder (all-MiniLM-L6-v2 via
  ``"minilm"``, or any BERT checkpoint folder); yields per layer and head the exact ``Q``, ``K``
  of ``A = softmax_rows(Q K^T / sqrt(head_dim))`` (operator kind ``qk``, ``beta="inv_sqrt_d"``).
* :func:`build_panel` / :func:`write_panel` -- npz panels ``M/D/w<width>/L<l>H<h>/{Q,K}`` with
  ``M/D/w<width>/tokens`` and a ``__provenance__`` JSON object.

Width convention: ``[CLS] + first w-2 word pieces of the document + [SEP]`` = exactly ``w`` ids.

Further families, dispatched by :func:`load_model` on ``config.json`` ``model_type``:

* :class:`GPT2Model` (``gpt2``) -- causal, learned positions, fused Conv1D q/k/v; beta per
  layer from ``scale_attn_weights`` / ``scale_attn_by_inverse_layer_idx``;
* :class:`LlamaModel` (``llama``, ``qwen2``) -- causal, RMSNorm, default RoPE applied to Q and
  K, grouped-query attention, Qwen2's q/k/v biases;
* :class:`ViTModel` (``vit``) -- image input, CLS + patches, no mask, one fixed width.

Every model's ``forward`` returns an :class:`AttentionOutput` (``q[l]``, ``k[l]``: heads x n x d)
and its ``beta(layer)`` a :class:`BetaInfo`; causal models have ``causal = True``.  What the
loaders share (config and tensor helpers, LayerNorm, softmax, one layer's attention heads, the
text-token plumbing) is in :mod:`.common`.
"""

from .bert import BertModel
from .common import INV_SQRT_D, MINILM, AttentionOutput, BetaInfo, minilm_dir, resolve_model
from .gpt2 import GPT2Model
from .llama import LlamaModel
from .panel import MODEL_FAMILIES, PROVENANCE_KEY, build_panel, load_model, provenance_names, write_panel
from .vit import ViTModel

__all__ = [
    "AttentionOutput",
    "BertModel",
    "BetaInfo",
    "GPT2Model",
    "INV_SQRT_D",
    "LlamaModel",
    "MINILM",
    "MODEL_FAMILIES",
    "PROVENANCE_KEY",
    "ViTModel",
    "build_panel",
    "load_model",
    "minilm_dir",
    "provenance_names",
    "resolve_model",
    "write_panel",
]
