"""Panels from any transformers checkpoint folder (UNTRUSTED front end; the ``[hf]`` extra).

:func:`hf_panel` loads a checkpoint folder offline (``local_files_only=True``, no remote code)
with ``transformers.AutoModel`` in float64 on CPU, runs it on a document (or, for a vision
model, an image) once per width through :func:`~.hf_capture.capture_attention`, and returns the
same npz-ready arrays as :func:`~softrank_cert.models.panel.build_panel`.  For model label ``M``
(``"minilm"`` or the folder's name), input stem ``D``, width ``w``, layer ``l``, head ``h``:

* ``M/D/w<w>/tokens`` (int64 ids) or ``M/D/w<w>/pixel_values`` (float64 C x H x W);
* ``M/D/w<w>/L<l>H<h>/Q``, ``.../K`` (``qk``; ``K`` the key head ``h`` reads), plus
  ``.../beta`` (0-d float64, the model's scaling, exactly) unless the scaling is
  ``head_dim ** -0.5`` (then the operator's exact ``1/sqrt(d)``); or ``.../S`` (``scores``,
  the model's float64 soft-capped logits); ``.../causal`` = True when the layer is causal;
* ``__provenance__``: per operator ``{model, model_folder, model_type, config_sha256,
  transformers_version, torch_version, dtype, capture, layer, head, kv_head, module, scaling,
  beta | softcap, mask, width, text_sha256 + text_name | image_sha256 + image_name}``.

Text widths: the document is tokenized once with the checkpoint's own tokenizer
(``AutoTokenizer``, no special tokens); the block of width ``w`` is the tokenizer's special-token
template around the first word pieces -- exactly ``w`` ids (BERT: ``[CLS] + w-2 pieces +
[SEP]``, GPT-2 / Qwen2: ``w`` pieces, Llama: ``BOS + w-1`` pieces), the convention of the numpy
loaders.  Images: the checkpoint's ``preprocessor_config.json`` through
``AutoImageProcessor`` when the folder has one, else ``ViTImageProcessor`` defaults (RGB,
bilinear resize to ``image_size``, ``x / 255``, mean = std = 0.5 per channel); the only width is
the token count the model runs on.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..errors import InvalidInputError
from ..kernel import MAX_DIM
from ..plumbing.operators_npz import MAX_NPZ_BYTES, PROVENANCE_KEY
from .common import MINILM, minilm_dir, read_input_file, read_text
from .hf_capture import AttentionRecord, capture_attention, record_notes, require_hf, select_heads

#: ``stage(name, done, total)``: stage names "load model", "tokenize", "capture w<w>".
Stage = Callable[[str, int, int], None]
#: Largest panel (bytes of Q, K / S arrays) built in memory.
MAX_PANEL_BYTES = MAX_NPZ_BYTES
PREPROCESSOR = "preprocessor_config.json"


class HFCheckpoint:
    """A checkpoint folder loaded with transformers (float64, CPU, eval mode) and its metadata."""

    def __init__(self, model: str | Path) -> None:
        torch, transformers = require_hf()
        if isinstance(model, str) and model == MINILM:
            self.label, folder = MINILM, minilm_dir()
        else:
            folder = Path(model).expanduser()
            if not folder.is_dir():
                raise InvalidInputError(f"--hf {model}: not a checkpoint folder")
            folder = folder.resolve()
            self.label = folder.name
        if not (folder / "config.json").is_file():
            raise InvalidInputError(f"checkpoint folder {folder} lacks config.json")
        config_bytes = read_input_file(folder / "config.json", "config")
        self.folder, self.config_sha256 = folder, hashlib.sha256(config_bytes).hexdigest()
        bars = transformers.utils.logging.is_progress_bar_enabled()
        transformers.utils.logging.disable_progress_bar()  # our own progress reports the stages
        try:
            self.config = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)
            self.model = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True,
                                                                dtype=torch.float64, attn_implementation="eager")
        except (OSError, ValueError, KeyError, ImportError, RuntimeError) as exc:
            raise InvalidInputError(f"transformers cannot load {folder} offline: {' '.join(str(exc).split())[:300]}") from None
        finally:
            if bars:
                transformers.utils.logging.enable_progress_bar()
        self.model.eval()
        self.model_type = str(getattr(self.config, "model_type", "unknown"))
        self.meta = {"model": self.label, "model_folder": str(folder), "model_type": self.model_type,
                     "config_sha256": self.config_sha256, "transformers_version": transformers.__version__,
                     "torch_version": torch.__version__, "dtype": "float64", "capture": "transformers"}

    @property
    def is_vision(self) -> bool:
        """True for a model that takes ``pixel_values`` and no ``input_ids`` (ViT, DeiT, ...)."""
        params = inspect.signature(self.model.forward).parameters
        return "pixel_values" in params and "input_ids" not in params

    def tokenizer(self) -> Any:
        _, transformers = require_hf()
        try:
            return transformers.AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
        except (OSError, ValueError, KeyError, ImportError) as exc:
            raise InvalidInputError(f"{self.folder} has no tokenizer transformers can load offline: "
                                    f"{' '.join(str(exc).split())[:200]}") from None


def _template(tokenizer: Any, text: str, pieces: list[int]) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after a text (its special-token template)."""
    full = list(tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"])
    for lead in range(0, len(full) - len(pieces) + 1):
        if full[lead:lead + len(pieces)] == pieces:
            return full[:lead], full[lead + len(pieces):]
    raise InvalidInputError("the tokenizer's special-token template does not keep the text's ids together")


def text_blocks(tokenizer: Any, text: str, widths: list[int]) -> dict[int, np.ndarray]:
    """Width -> int64 ids: the special-token template around the first word pieces, ``w`` ids."""
    pieces = list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    lead, trail = _template(tokenizer, text, pieces)
    out = {}
    for w in widths:
        need = w - len(lead) - len(trail)
        if need < 1 or len(pieces) < need:
            raise InvalidInputError(f"the document has {len(pieces)} word pieces; width {w} needs {max(need, 1)}")
        out[w] = np.asarray([*lead, *pieces[:need], *trail], dtype=np.int64)
    return out


def _check_widths(widths: Iterable[int] | None, limit: int | None) -> list[int]:
    out: list[int] = []
    for w in widths or ():
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)):
            raise InvalidInputError(f"width must be an integer, got {w!r}")
        top = min(limit or MAX_DIM, MAX_DIM)
        if not 3 <= w <= top:
            raise InvalidInputError(f"width {w} is outside 3..{top}" + (" (max_position_embeddings)" if limit else ""))
        if int(w) not in out:
            out.append(int(w))
    if not out:
        raise InvalidInputError("no widths given (--widths W1,W2,...)")
    return out


def _check_size(ckpt: HFCheckpoint, widths: list[int], layers: Iterable[int] | None, heads: Iterable[int] | None) -> None:
    """Refuse a panel whose arrays would exceed :data:`MAX_PANEL_BYTES`, before any forward pass."""
    cfg = ckpt.config.get_text_config() if hasattr(ckpt.config, "get_text_config") else ckpt.config
    n_layers = len(set(layers)) if layers is not None else int(getattr(cfg, "num_hidden_layers", 1) or 1)
    n_heads = len(set(heads)) if heads is not None else int(getattr(cfg, "num_attention_heads", 1) or 1)
    hidden = int(getattr(cfg, "hidden_size", 0) or 0)
    d = int(getattr(cfg, "head_dim", 0) or (hidden // max(int(getattr(cfg, "num_attention_heads", 1) or 1), 1)) or 1)
    size = sum(8 * n_layers * n_heads * w * (2 * d + w) for w in widths)
    if size > MAX_PANEL_BYTES:
        raise InvalidInputError(f"the panel would hold about {size / 2**30:.1f} GiB of operators (limit "
                                f"{MAX_PANEL_BYTES / 2**30:.0f} GiB): choose fewer widths, layers or heads")


def _add_records(arrays: dict[str, np.ndarray], provenance: dict[str, dict], base: str, records: list[AttentionRecord],
                 heads: list[int], notes: dict[str, Any]) -> None:
    """``BASE/L<l>H<h>/...`` leaves and provenance of every selected head of ``records``."""
    for record in records:
        for head in heads:
            name = f"{base}/L{record.layer}H{head}"
            if record.scores is not None:
                arrays[f"{name}/S"] = np.ascontiguousarray(record.scores[head], dtype=np.float64)
            else:
                arrays[f"{name}/Q"] = np.ascontiguousarray(record.q[head], dtype=np.float64)
                arrays[f"{name}/K"] = np.ascontiguousarray(record.k[record.kv_head(head)], dtype=np.float64)
                if not record.inv_sqrt_d:
                    arrays[f"{name}/beta"] = np.array(record.scaling, dtype=np.float64)
            if record.mask == "causal":
                arrays[f"{name}/causal"] = np.array(True)
            provenance[name] = {**notes, **record_notes(record, head)}


def hf_panel(model: str | Path | HFCheckpoint, input_path: str | Path, widths: Iterable[int] | None,
             layers: Iterable[int] | None = None, heads: Iterable[int] | None = None,
             stage: Stage | None = None, image: bool | None = None) -> dict[str, np.ndarray]:
    """Operators of every selected (width, layer, head) of a transformers checkpoint.

    ``model``: ``"minilm"``, a checkpoint folder, or an :class:`HFCheckpoint`; ``input_path``: a
    UTF-8 document, or an image for a vision model (then ``widths`` is None or the token count).
    ``stage(name, done, total)`` reports progress (``done``/``total`` count operators).
    ``image=True`` (``--image``) refuses a text model, ``False`` a vision model; None takes either.
    Raises InvalidInputError (one line) on bad input or a refused attention (see :mod:`.hf_capture`).
    """
    report = stage or (lambda name, done, total: None)
    report("load model", 0, 0)
    ckpt = model if isinstance(model, HFCheckpoint) else HFCheckpoint(model)
    if image is not None and image != ckpt.is_vision:
        raise InvalidInputError(f"{ckpt.label} ({ckpt.model_type}) takes {'images: use --image' if ckpt.is_vision else 'text: use --text'}")
    stem = Path(input_path).stem
    arrays: dict[str, np.ndarray] = {}
    provenance: dict[str, dict] = {}
    if ckpt.is_vision:
        pixels, sha = load_image(ckpt, input_path)
        records = capture_attention(ckpt.model, {"pixel_values": pixels}, layers)
        n = records[0].q.shape[1]
        if widths is not None and sorted({int(w) for w in widths}) != [n]:
            raise InvalidInputError(f"this vision model runs on {n} tokens (its fixed width), got widths {list(widths)}")
        chosen = select_heads(records, heads)
        base = f"{ckpt.label}/{stem}/w{n}"
        arrays[f"{base}/pixel_values"] = pixels[0].numpy().astype(np.float64)
        notes = {**ckpt.meta, "width": n, "image_sha256": sha, "image_name": Path(input_path).name}
        _add_records(arrays, provenance, base, records, chosen, notes)
        report(f"capture w{n}", len(provenance), len(provenance))
    else:
        text, sha = read_text(input_path)
        cfg = ckpt.config.get_text_config() if hasattr(ckpt.config, "get_text_config") else ckpt.config
        chosen_widths = _check_widths(widths, getattr(cfg, "max_position_embeddings", None))
        _check_size(ckpt, chosen_widths, layers, heads)
        report("tokenize", 0, 0)
        blocks = text_blocks(ckpt.tokenizer(), text, chosen_widths)
        done = total = 0
        for width in chosen_widths:
            report(f"capture w{width}", done, total)
            records = capture_attention(ckpt.model, {"input_ids": _torch().as_tensor(blocks[width])[None]}, layers)
            chosen = select_heads(records, heads)
            total = total or len(records) * len(chosen) * len(chosen_widths)
            base = f"{ckpt.label}/{stem}/w{width}"
            arrays[f"{base}/tokens"] = blocks[width]
            notes = {**ckpt.meta, "width": width, "text_sha256": sha, "text_name": Path(input_path).name}
            _add_records(arrays, provenance, base, records, chosen, notes)
            done += len(records) * len(chosen)
            report(f"capture w{width}", done, total)
    arrays[PROVENANCE_KEY] = np.array(json.dumps(provenance, sort_keys=True))
    return arrays


def _torch() -> Any:
    return require_hf()[0]


def load_image(ckpt: HFCheckpoint, path: str | Path) -> tuple[Any, str]:
    """``(pixel_values (1, C, H, W) float64 tensor, sha256 of the file)`` (module docstring)."""
    torch, transformers = require_hf()
    path = Path(path)
    data = read_input_file(path, "image")
    try:
        import io

        from PIL import Image
    except ImportError:
        raise InvalidInputError("reading images needs Pillow (pip install pillow)") from None
    try:
        if (ckpt.folder / PREPROCESSOR).is_file():
            processor = transformers.AutoImageProcessor.from_pretrained(str(ckpt.folder), local_files_only=True,
                                                                        use_fast=False)
        else:
            size = getattr(ckpt.config, "image_size", 224)
            height, width = (size, size) if isinstance(size, int) else tuple(size)
            processor = transformers.ViTImageProcessor(size={"height": height, "width": width})
        with Image.open(io.BytesIO(data)) as img:
            pixels = processor(images=img.convert("RGB"), return_tensors="np")["pixel_values"]
    except (OSError, ValueError, KeyError, ImportError, Image.DecompressionBombError) as exc:
        raise InvalidInputError(f"cannot prepare image {path}: {' '.join(str(exc).split())[:200]}") from None
    return torch.from_numpy(np.ascontiguousarray(pixels, dtype=np.float64)), hashlib.sha256(data).hexdigest()
