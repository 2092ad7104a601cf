"""A float64 numpy forward of the ViT encoder (UNTRUSTED front end; no torch).

What is computed, for pixel values ``X`` (C x H x W, H x W = the config's ``image_size``),
patch size P, dropout off, no mask::

    patches  = the (H/P)(W/P) non-overlapping P x P patches of X, row-major, each flattened
               (channel, row, column) -- the Conv2d with kernel = stride = P as one matmul
    x_0      = [cls; patches W_patch^T + b_patch] + E_pos          (n = (H/P)(W/P) + 1 tokens)
    per layer l, per head h (d = head_dim, beta = 1/sqrt(d)):
        u   = LN_before(x)
        Q_h = u W_q^T + b_q (columns of head h),  K_h = u W_k^T + b_k,  V_h likewise
        A_h = softmax_rows(Q_h K_h^T / sqrt(d))                        (no mask)
        x   = x + concat_h(A_h V_h) W_o^T + b_o
        x   = x + GELU(LN_after(x) W_1^T + b_1) W_2^T + b_2
    x_final = LN(x)

``LN`` is LayerNorm (biased variance, ``layer_norm_eps``), ``GELU`` the config's
``hidden_act`` (exact erf GELU by default), biases on q/k/v exactly when ``qkv_bias``.
Every weight is widened exactly to float64, every operation is float64, and
``beta = 1/sqrt(head_dim)`` exactly (``inv_sqrt_d``).  Both the classic tensor names
(``encoder.layer.<l>.attention.attention.query`` ...) and the transformers-5 names
(``layers.<l>.attention.q_proj`` ...) are read, with or without the ``vit.`` prefix.

Image convention (:meth:`ViTModel.load_image`), that of Hugging Face's PIL
``ViTImageProcessor``: the file is opened with Pillow and converted to RGB; if it is not
already ``image_size``, it is resized to it with PIL's bilinear filter (``resample=2``); then
``X = (pixels * rescale_factor - mean) / std`` per channel in float64, with
``rescale_factor``, ``image_mean``, ``image_std`` from ``preprocessor_config.json`` when the
checkpoint has one, else ``1/255`` and ``0.5, 0.5, 0.5`` (ViTImageProcessor's defaults).
The operator width is fixed: every ViT operator is ``n x n`` with ``n`` = :attr:`num_tokens`.
"""

from __future__ import annotations

import hashlib
import io
import math
from pathlib import Path
from collections.abc import Iterable

import numpy as np

from ..errors import InvalidInputError
from .common import (INV_SQRT_D, AttentionOutput, BetaInfo, Tensors, activation, attend, config_head_dim, config_int,
                     layer_depth, layer_norm, linear, load_weights, read_config, read_input_file, read_json_object,
                     resolve_model, weight_prefix)

PREPROCESSOR = "preprocessor_config.json"


def _pair(value: object, name: str) -> tuple[int, int]:
    """``image_size`` / ``patch_size``: an int or a [height, width] pair of positive ints."""
    pair = (value, value) if not isinstance(value, (list, tuple)) else tuple(value)
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in pair):
        raise InvalidInputError(f"config.json {name} must be a positive integer or a pair of them, got {value!r}")
    return pair  # type: ignore[return-value]


def _legacy_names(i: int) -> dict[str, str]:
    base = f"encoder.layer.{i}."
    return {"q": base + "attention.attention.query", "k": base + "attention.attention.key",
            "v": base + "attention.attention.value", "o": base + "attention.output.dense",
            "fc1": base + "intermediate.dense", "fc2": base + "output.dense",
            "ln1": base + "layernorm_before", "ln2": base + "layernorm_after"}


def _new_names(i: int) -> dict[str, str]:
    base = f"layers.{i}."
    return {"q": base + "attention.q_proj", "k": base + "attention.k_proj", "v": base + "attention.v_proj",
            "o": base + "attention.o_proj", "fc1": base + "mlp.fc1", "fc2": base + "mlp.fc2",
            "ln1": base + "layernorm_before", "ln2": base + "layernorm_after"}


class ViTModel:
    """A ViT checkpoint held as float64 numpy arrays, with its image normalisation."""

    model_type = "vit"
    causal = False

    def __init__(self, config: dict, weights: dict[str, np.ndarray], preprocessor: dict | None = None, label: str = "vit"):
        if config.get("model_type", "vit") != "vit":
            raise InvalidInputError(f"model_type {config.get('model_type')!r} is not vit")
        self._act = activation(config, "hidden_act", "gelu")
        self.hidden_size = config_int(config, "hidden_size")
        self.num_layers = config_int(config, "num_hidden_layers")
        self.num_heads = config_int(config, "num_attention_heads")
        self.intermediate = config_int(config, "intermediate_size")
        self.num_channels = config_int(config, "num_channels") if "num_channels" in config else 3
        self.head_dim = config_head_dim(config, self.hidden_size, self.num_heads,
                                        "hidden_size is not a multiple of num_attention_heads")
        self.image_size = _pair(config.get("image_size", 224), "image_size")
        self.patch_size = _pair(config.get("patch_size", 16), "patch_size")
        (ih, iw), (ph, pw) = self.image_size, self.patch_size
        if ih % ph or iw % pw:
            raise InvalidInputError(f"image_size {ih}x{iw} is not a multiple of patch_size {ph}x{pw}")
        self.grid = (ih // ph, iw // pw)
        self.num_tokens = self.grid[0] * self.grid[1] + 1
        self.max_positions = self.num_tokens
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        qkv_bias = bool(config.get("qkv_bias", True))
        self.config, self.label = config, label
        self._preprocessing(preprocessor or {})
        p = weight_prefix(weights, "embeddings.cls_token", ("", "vit."))
        w = Tensors(weights, p)
        hs, nh, mi = self.hidden_size, self.num_heads * self.head_dim, self.intermediate
        self.cls = w("embeddings.cls_token", (1, 1, hs)).reshape(hs)
        self.pos = w("embeddings.position_embeddings", (1, self.num_tokens, hs)).reshape(self.num_tokens, hs)
        conv = w("embeddings.patch_embeddings.projection.weight", (hs, self.num_channels, ph, pw))
        self.patch_w = np.ascontiguousarray(conv.reshape(hs, -1).T)  # (C*P*P, hidden), (channel, row, col) order
        self.patch_b = w("embeddings.patch_embeddings.projection.bias", (hs,))
        self.ln_f = (w("layernorm.weight", (hs,)), w("layernorm.bias", (hs,)))
        legacy = p + "encoder.layer.0.attention.attention.query.weight" in weights
        self.layers: list[dict] = []
        for i in range(self.num_layers):
            n = _legacy_names(i) if legacy else _new_names(i)
            qkv_b = [w(n[s] + ".bias", (nh,), qkv_bias) for s in "qkv"]
            self.layers.append({
                "ln1": (w(n["ln1"] + ".weight", (hs,)), w(n["ln1"] + ".bias", (hs,))),
                "qkv_w": np.ascontiguousarray(np.concatenate([w(n[s] + ".weight", (nh, hs)) for s in "qkv"]).T),
                "qkv_b": np.concatenate(qkv_b) if qkv_bias else None,  # type: ignore[arg-type]  # qkv_bias: all present
                "o_w": np.ascontiguousarray(w(n["o"] + ".weight", (hs, nh)).T), "o_b": w(n["o"] + ".bias", (hs,)),
                "ln2": (w(n["ln2"] + ".weight", (hs,)), w(n["ln2"] + ".bias", (hs,))),
                "fc1_w": np.ascontiguousarray(w(n["fc1"] + ".weight", (mi, hs)).T), "fc1_b": w(n["fc1"] + ".bias", (mi,)),
                "fc2_w": np.ascontiguousarray(w(n["fc2"] + ".weight", (hs, mi)).T), "fc2_b": w(n["fc2"] + ".bias", (hs,)),
            })

    def _preprocessing(self, pre: dict) -> None:
        """Rescale factor, per-channel mean and std (ViTImageProcessor defaults when absent)."""
        c = self.num_channels
        self.rescale_factor = float(pre.get("rescale_factor", 1.0 / 255.0)) if pre.get("do_rescale", True) else 1.0
        if pre.get("do_normalize", True):
            mean, std = pre.get("image_mean", [0.5] * c), pre.get("image_std", [0.5] * c)
        else:
            mean, std = [0.0] * c, [1.0] * c
        try:
            self.mean = np.broadcast_to(np.asarray(mean, dtype=np.float64), (c,)).copy()
            self.std = np.broadcast_to(np.asarray(std, dtype=np.float64), (c,)).copy()
        except (TypeError, ValueError):
            raise InvalidInputError(f"{PREPROCESSOR} image_mean / image_std do not fit {c} channels") from None
        if not (np.isfinite(self.mean).all() and np.isfinite(self.std).all() and (self.std > 0).all()):
            raise InvalidInputError(f"{PREPROCESSOR} image_mean / image_std must be finite with std > 0")

    @classmethod
    def load(cls, model: str | Path) -> ViTModel:
        """Load a checkpoint folder (config.json, model.safetensors or shards, optional preprocessor_config.json)."""
        label, folder = resolve_model(model, ("config.json",))
        config = read_config(folder)
        pre = read_json_object(folder / PREPROCESSOR) if (folder / PREPROCESSOR).is_file() else None
        skip = lambda name: name.startswith(("classifier.", "pooler.", "vit.pooler."))  # noqa: E731
        return cls(config, load_weights(folder, skip), pre, label)

    def beta(self, layer: int) -> BetaInfo:
        """Every layer's beta is exactly ``1/sqrt(head_dim)`` (``inv_sqrt_d``)."""
        return INV_SQRT_D

    # -- images ---------------------------------------------------------------------------
    def pixel_values(self, pixels: np.ndarray) -> np.ndarray:
        """float64 (C, H, W) ``(pixels * rescale_factor - mean) / std`` of an (H, W, C) array."""
        pixels = np.asarray(pixels)
        if pixels.ndim != 3 or pixels.shape[2] != self.num_channels or pixels.dtype.kind not in "uif":
            raise InvalidInputError(f"need an (H, W, {self.num_channels}) numeric image array, got {pixels.dtype} {list(pixels.shape)}")
        x = (pixels.astype(np.float64) * self.rescale_factor - self.mean) / self.std
        return np.ascontiguousarray(x.transpose(2, 0, 1))

    def load_image(self, path: str | Path) -> tuple[np.ndarray, str]:
        """``(pixel values (C, H, W) float64, sha256 of the file)`` of an image file (see module docstring)."""
        path = Path(path)
        data = read_input_file(path, "image")
        try:
            from PIL import Image
        except ImportError:
            raise InvalidInputError("reading images needs Pillow (pip install pillow)") from None
        if self.num_channels != 3:
            raise InvalidInputError(f"this ViT takes {self.num_channels} channels; image files are read as RGB")
        try:
            with Image.open(io.BytesIO(data)) as opened:
                img = opened.convert("RGB")
                height, width = self.image_size
                if img.size != (width, height):
                    img = img.resize((width, height), resample=Image.Resampling.BILINEAR)
                pixels = np.asarray(img, dtype=np.uint8)
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise InvalidInputError(f"cannot read image file {path}: {exc}") from None
        return self.pixel_values(pixels), hashlib.sha256(data).hexdigest()

    # -- forward --------------------------------------------------------------------------
    def embed(self, pixel_values: np.ndarray) -> np.ndarray:
        """``x_0`` (num_tokens, hidden): CLS token and patch embeddings plus position embeddings."""
        x = np.asarray(pixel_values)
        c, (h, w), (ph, pw) = self.num_channels, self.image_size, self.patch_size
        if x.shape != (c, h, w) or x.dtype != np.float64:
            raise InvalidInputError(f"pixel values must be float64 of shape {[c, h, w]}, got {x.dtype} {list(x.shape)}")
        if not np.isfinite(x).all():
            raise InvalidInputError("pixel values contain NaN or Inf")
        gh, gw = self.grid
        patches = x.reshape(c, gh, ph, gw, pw).transpose(1, 3, 0, 2, 4).reshape(gh * gw, c * ph * pw)
        tokens = np.concatenate([self.cls[None, :], patches @ self.patch_w + self.patch_b])
        return tokens + self.pos

    def forward(self, pixel_values: np.ndarray, layers: Iterable[int] | None = None,
                probabilities: bool = False) -> AttentionOutput:
        """Run the encoder on ``pixel_values`` (C, H, W) and record Q, K per layer.

        ``q[l]``, ``k[l]``: (heads, num_tokens, head_dim), token 0 = CLS, then the patches
        row-major; head h's probabilities are ``softmax_rows(q[l][h] @ k[l][h].T / sqrt(d))``.
        ``layers`` and ``probabilities`` as in :meth:`BertModel.forward`; ``hidden`` gets the
        final LayerNorm only when every layer ran.
        """
        x = self.embed(pixel_values)
        wanted, depth = layer_depth(layers, self.num_layers)
        n, hd, H = self.num_tokens, self.head_dim, self.num_heads
        out = AttentionOutput(hidden=x, depth=depth)
        scale = 1.0 / math.sqrt(hd)
        for i in range(depth):
            L = self.layers[i]
            qkv = linear(layer_norm(x, *L["ln1"], self.eps), L["qkv_w"], L["qkv_b"])  # type: ignore[call-arg]  # mypy: a *Any before a positional
            q, k, v = (qkv[:, j * H * hd:(j + 1) * H * hd].reshape(n, H, hd).transpose(1, 0, 2) for j in range(3))
            ctx = attend(out, i, q, k, v, scale, causal=False, record=i in wanted, probabilities=probabilities)
            x = x + ctx @ L["o_w"] + L["o_b"]
            x = x + self._act(layer_norm(x, *L["ln2"], self.eps) @ L["fc1_w"] + L["fc1_b"]) @ L["fc2_w"] + L["fc2_b"]  # type: ignore[call-arg]  # mypy: a *Any before a positional
        out.hidden = layer_norm(x, *self.ln_f, self.eps) if depth == self.num_layers else x
        return out
