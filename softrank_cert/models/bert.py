"""A float64 numpy forward of the BERT encoder (UNTRUSTED front end; no torch).

What is computed, for input ids ``t`` (length n), token types all 0, attention mask all ones,
dropout off (inference)::

    x_0 = LN(E_word[t] + E_pos[0:n] + E_type[0])
    per layer l, per head h (d = head_dim, beta = 1/sqrt(d)):
        Q_h = x W_q^T + b_q  (columns of head h),   K_h = x W_k^T + b_k,   V_h likewise
        A_h = softmax_rows(beta * Q_h K_h^T)
        y   = LN(concat_h(A_h V_h) W_o^T + b_o + x)
        x'  = LN(GELU(y W_i^T + b_i) W_2^T + b_2 + y)

with ``LN`` the LayerNorm of the config (biased variance, ``layer_norm_eps``) and ``GELU`` the
exact ``x/2 (1 + erf(x/sqrt 2))`` (``hidden_act="gelu"``).  Every weight is widened exactly
to float64 and every operation is float64.  The ``Q_h``, ``K_h`` returned are exactly the
factors from which the model forms its scores (biases applied), and ``beta`` is the exact
real ``1/sqrt(d)``, i.e. the operator kind ``qk`` with ``beta="inv_sqrt_d"``.

Token convention (:meth:`BertModel.prefix_ids`): the whole document is tokenized without
special tokens, and the block of width ``w`` is ``[CLS] + first w-2 word pieces + [SEP]``,
exactly ``w`` ids.  Heads are vectorised: one matmul per layer forms Q, K, V for all heads.
"""

from __future__ import annotations

import math
from pathlib import Path
from collections.abc import Iterable

import numpy as np

from ..errors import InvalidInputError
from .common import (AttentionOutput, TextTokensMixin, activation, attend, check_width, layer_norm, load_safetensors,
                     load_tokenizer, read_config, resolve_model)


class BertModel(TextTokensMixin):
    """A BERT encoder checkpoint held as float64 numpy arrays, with its tokenizer."""

    def __init__(self, config: dict, weights: dict[str, np.ndarray], tokenizer=None, label: str = "bert"):
        if config.get("model_type", "bert") != "bert":
            raise InvalidInputError(f"unsupported model_type {config.get('model_type')!r}: only BERT checkpoints are read")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise InvalidInputError("only absolute position embeddings are supported")
        self._act = activation(config, "hidden_act", "gelu")
        try:
            self.hidden_size = int(config["hidden_size"])
            self.num_layers = int(config["num_hidden_layers"])
            self.num_heads = int(config["num_attention_heads"])
            self.max_positions = int(config["max_position_embeddings"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"config.json lacks a valid {exc}") from None
        if self.hidden_size % self.num_heads:
            raise InvalidInputError("hidden_size is not a multiple of num_attention_heads")
        self.head_dim = self.hidden_size // self.num_heads
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.config, self.label, self.tokenizer = config, label, tokenizer
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        w = lambda name: self._weight(weights, prefix + name)  # noqa: E731
        self.word, self.pos, self.type0 = w("embeddings.word_embeddings.weight"), w("embeddings.position_embeddings.weight"), w("embeddings.token_type_embeddings.weight")[0]
        self.emb_ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers: list[dict] = []
        for i in range(self.num_layers):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            self.layers.append({
                # Q, K, V of all heads in one (hidden x 3*hidden) matrix: one matmul per layer.
                "qkv_w": np.ascontiguousarray(np.concatenate([w(att + s + ".weight") for s in ("query", "key", "value")]).T),
                "qkv_b": np.concatenate([w(att + s + ".bias") for s in ("query", "key", "value")]),
                "o_w": np.ascontiguousarray(w(p + "attention.output.dense.weight").T), "o_b": w(p + "attention.output.dense.bias"),
                "ln1": (w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias")),
                "i_w": np.ascontiguousarray(w(p + "intermediate.dense.weight").T), "i_b": w(p + "intermediate.dense.bias"),
                "f_w": np.ascontiguousarray(w(p + "output.dense.weight").T), "f_b": w(p + "output.dense.bias"),
                "ln2": (w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias")),
            })

    @staticmethod
    def _weight(weights: dict[str, np.ndarray], name: str) -> np.ndarray:
        if name in weights:
            return weights[name]
        legacy = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        if legacy in weights:
            return weights[legacy]
        raise InvalidInputError(f"checkpoint lacks the tensor {name}")

    @classmethod
    def load(cls, model: str | Path) -> BertModel:
        """Load ``"minilm"`` or a checkpoint folder (config.json, model.safetensors, tokenizer.json)."""
        label, folder = resolve_model(model)
        config = read_config(folder)
        return cls(config, load_safetensors(folder / "model.safetensors"), load_tokenizer(folder), label)

    # -- tokens ---------------------------------------------------------------------------
    def _special(self, token: str) -> int:
        ident = None if self.tokenizer is None else self.tokenizer.token_to_id(token)
        if ident is None:
            raise InvalidInputError(f"the tokenizer has no {token} token")
        return int(ident)

    def prefix_ids(self, text: str, width: int, pieces: list[int] | None = None) -> np.ndarray:
        """int64 ids ``[CLS] + first width-2 word pieces of text + [SEP]``: exactly ``width`` ids."""
        check_width(width, self.max_positions)
        pieces = self.word_pieces(text) if pieces is None else pieces
        if len(pieces) < width - 2:
            raise InvalidInputError(f"the document has {len(pieces)} word pieces; width {width} needs {width - 2}")
        ids = [self._special("[CLS]"), *pieces[: width - 2], self._special("[SEP]")]
        return np.asarray(ids, dtype=np.int64)

    # -- forward --------------------------------------------------------------------------
    def forward(self, ids: np.ndarray, layers: Iterable[int] | None = None, probabilities: bool = False) -> AttentionOutput:
        """Run the encoder on ``ids`` (token types 0, mask all ones) and record Q, K per layer.

        ``layers=None`` records every layer; otherwise only those listed are recorded and the
        run stops after the last of them.  ``probabilities=True`` also keeps ``A_h``.
        """
        ids = np.asarray(ids, dtype=np.int64)
        n = ids.shape[0]
        if ids.ndim != 1 or not 1 <= n <= self.max_positions:
            raise InvalidInputError(f"need 1..{self.max_positions} ids in one sequence, got shape {list(ids.shape)}")
        if ids.min() < 0 or ids.max() >= self.word.shape[0]:
            raise InvalidInputError("token id outside the vocabulary")
        wanted = set(range(self.num_layers)) if layers is None else set(layers)
        if not wanted <= set(range(self.num_layers)):
            raise InvalidInputError(f"layers must lie in 0..{self.num_layers - 1}")
        depth = max(wanted) + 1 if wanted else 0
        x = layer_norm(self.word[ids] + self.pos[:n] + self.type0, *self.emb_ln, self.eps)
        out = AttentionOutput(hidden=x, depth=depth)
        hs, hd, beta = self.hidden_size, self.head_dim, 1.0 / math.sqrt(self.head_dim)
        for i in range(depth):
            L = self.layers[i]
            qkv = x @ L["qkv_w"] + L["qkv_b"]  # (n, 3*hidden)
            q, k, v = (qkv[:, j * hs:(j + 1) * hs].reshape(n, self.num_heads, hd).transpose(1, 0, 2) for j in range(3))
            ctx = attend(out, i, q, k, v, beta, causal=False, record=i in wanted, probabilities=probabilities)
            y = layer_norm(ctx @ L["o_w"] + L["o_b"] + x, *L["ln1"], self.eps)  # type: ignore[call-arg]  # mypy: a *Any before a positional
            x = layer_norm(self._act(y @ L["i_w"] + L["i_b"]) @ L["f_w"] + L["f_b"] + y, *L["ln2"], self.eps)  # type: ignore[call-arg]  # mypy: a *Any before a positional
        out.hidden = x
        return out

    def sentence_embedding(self, text: str, normalize: bool = True) -> np.ndarray:
        """Mean-pooled last hidden state of ``[CLS] text [SEP]`` (sentence-transformers pooling),
        L2-normalised when ``normalize`` (all-MiniLM-L6-v2's Normalize module)."""
        pieces = self.word_pieces(text)
        ids = self.prefix_ids(text, len(pieces) + 2, pieces)
        emb = self.forward(ids).hidden.mean(axis=0)
        return emb / np.linalg.norm(emb) if normalize else emb
