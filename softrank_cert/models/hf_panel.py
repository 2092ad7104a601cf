"""Panels from any transformers checkpoint folder or GGUF file (UNTRUSTED front end; the ``[hf]``
and ``[gguf]`` extras).

A GGUF file (:func:`open_gguf`: a path or a shortcut such as ``smollm2``) is read with
transformers' GGUF tensor map, only the blocks the layers need, every quantized tensor
dequantized to float64 (:mod:`.gguf_file`, :mod:`.gguf_blocks`); its layout (:mod:`.gguf_check`),
widths and memory are checked before it is loaded (:func:`gguf_precheck`), and every parameter
of the loaded model must be filled by a tensor of the file; its operators' provenance adds
``model_file``, ``gguf_file``, ``gguf_sha256``, ``gguf_file_type``, ``gguf_tensor_types``,
``gguf_tensor_count``, ``gguf_blocks``, ``gguf_architecture`` and ``weights`` in place of
``model_folder`` and ``config_sha256``.

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

import contextlib
import functools
import hashlib
import inspect
import json
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..errors import InvalidInputError
from ..kernel import MAX_DIM
from ..util.operator_files import MAX_NPZ_BYTES, PROVENANCE_KEY
from .common import read_input_file, read_text, resolve_model
from .dinov2_onnx import SHORTCUT as DINOV2
from .dinov2_onnx import dinov2_folder
from .gguf_file import INSTALL_HINT as GGUF_INSTALL_HINT
from .gguf_blocks import load_gguf_model
from .gguf_check import check_loading_info
from .gguf_file import GGUFFile, check_memory, one_parse, read_gguf, require_gguf
from .hf_capture import AttentionRecord, capture_attention, record_notes, require_hf, select_heads

#: ``stage(name, done, total)``: stage names "load model", "tokenize", "capture w<w>".
Stage = Callable[[str, int, int], None]
#: Largest panel (bytes of Q, K / S arrays) built in memory.
MAX_PANEL_BYTES = MAX_NPZ_BYTES
PREPROCESSOR = "preprocessor_config.json"


class HFCheckpoint:
    """A checkpoint loaded with transformers (float64, CPU, eval mode) and its metadata: a
    checkpoint folder, ``"minilm"``, ``"dinov2-small"`` (:mod:`.dinov2_onnx`), or a GGUF file (:class:`~.gguf_file.GGUFFile`, loaded with
    transformers' GGUF tensor map, every tensor dequantized to float64: :mod:`.gguf_blocks`)."""

    def __init__(self, model: str | Path | GGUFFile, blocks: int | None = None) -> None:
        """``blocks``: load only a GGUF model's first blocks (:mod:`.gguf_blocks`; None: all)."""
        torch, transformers = require_hf()
        self.gguf = model if isinstance(model, GGUFFile) else None
        self.load_kwargs: dict[str, Any] = {}
        if self.gguf is not None:
            folder, self.label = self.gguf.path.parent, self.gguf.label
            self.load_kwargs = {"gguf_file": self.gguf.path.name}
            meta = {"model_file": str(self.gguf.path), **self.gguf.provenance()}
        else:
            origin: dict[str, str] = {}
            if isinstance(model, str) and model == DINOV2:
                model, origin = dinov2_folder()
            self.label, folder = resolve_model(model, ("config.json",))  # type: ignore[arg-type]  # no GGUFFile here
            config_bytes = read_input_file(folder / "config.json", "config")
            meta = {"model_folder": str(folder), "config_sha256": hashlib.sha256(config_bytes).hexdigest(), **origin}
        self.folder = folder
        self._tokenizer: Any = None
        parsed_once = one_parse(self.gguf.path) if self.gguf is not None else contextlib.nullcontext()
        with _quiet(transformers), parsed_once:
            try:
                self.config = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True,
                                                                      **self.load_kwargs)
                if self.gguf is not None:
                    self.model, info = load_gguf_model(self.gguf.path, self.config, blocks)
                    check_loading_info(info, f"--gguf {self.gguf.path}")  # the second check, after loading
                else:
                    self.model = transformers.AutoModel.from_pretrained(
                        str(folder), local_files_only=True, dtype=torch.float64, attn_implementation="eager")
            except (OSError, ValueError, KeyError, ImportError, RuntimeError, NotImplementedError) as exc:
                where = self.gguf.path if self.gguf is not None else folder
                raise InvalidInputError(f"transformers cannot load {where} offline: "
                                        f"{' '.join(str(exc).split())[:300]}") from None
        self.model.eval()
        self.model_type = str(getattr(self.config, "model_type", "unknown"))
        self.meta = {"model": self.label, **meta, "model_type": self.model_type,
                     "transformers_version": transformers.__version__, "torch_version": torch.__version__,
                     "dtype": "float64", "capture": "transformers"}
        if self.gguf is not None:
            kept = int(getattr(self.config, "num_hidden_layers", 0) or 0)
            cut = ({"gguf_blocks_loaded": f"blocks 0-{kept - 1} of {self.gguf.layers} (exact: layer l reads only "
                                          "the blocks before it)"} if kept < self.gguf.layers else {})
            self.meta.update(cut)
            self.model.softrank_provenance = {**self.gguf.provenance(), **cut}  # read by softrank_cert.capture

    @property
    def is_vision(self) -> bool:
        """True for a model that takes ``pixel_values`` and no ``input_ids`` (ViT, DeiT, ...)."""
        params = inspect.signature(self.model.forward).parameters
        return "pixel_values" in params and "input_ids" not in params

    def tokenizer(self) -> Any:
        """The checkpoint's tokenizer, built on the first call.  A GGUF file's is built from its
        metadata alone, so any failure to build it (the ``tokenizers`` library raises plain
        ``Exception``) is the file's."""
        if self._tokenizer is not None:
            return self._tokenizer
        _, transformers = require_hf()
        refused = Exception if self.gguf is not None else (OSError, ValueError, KeyError, ImportError)
        try:
            with _quiet(transformers):
                self._tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True,
                                                                             **self.load_kwargs)
                return self._tokenizer
        except refused as exc:
            where = self.gguf.path if self.gguf is not None else self.folder
            raise InvalidInputError(f"{where} has no tokenizer transformers can load offline: "
                                    f"{' '.join(str(exc).split())[:200]}") from None


@contextlib.contextmanager
def _quiet(transformers: Any) -> Iterator[None]:
    """transformers' own progress bars off (the stage lines report the stages), also the GGUF
    loader's tensor bar, which ignores ``disable_progress_bar``; its log (the LOAD REPORT table
    of missing or mismatched weights, warnings) down to errors: what matters is raised as one line."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    log = transformers.utils.logging
    bars, verbosity = log.is_progress_bar_enabled(), log.get_verbosity()
    log.disable_progress_bar()
    log.set_verbosity_error()
    plain = gguf_utils.tqdm
    gguf_utils.tqdm = functools.partial(plain, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = plain
        log.set_verbosity(verbosity)
        if bars:
            log.enable_progress_bar()


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


def _panel_bytes(widths: list[int], n_layers: int, n_heads: int, d: int) -> int:
    """Bytes of the panel's operator arrays, refused above :data:`MAX_PANEL_BYTES`."""
    size = sum(8 * n_layers * n_heads * w * (2 * d + w) for w in widths)
    if size > MAX_PANEL_BYTES:
        raise InvalidInputError(f"the panel would hold about {size / 2**30:.1f} GiB of operators (limit "
                                f"{MAX_PANEL_BYTES / 2**30:.0f} GiB): choose fewer widths, layers or heads")
    return size


def _check_size(ckpt: HFCheckpoint, widths: list[int], layers: Iterable[int] | None, heads: Iterable[int] | None) -> None:
    """Refuse a panel whose arrays would exceed :data:`MAX_PANEL_BYTES`, before any forward pass."""
    cfg = ckpt.config.get_text_config() if hasattr(ckpt.config, "get_text_config") else ckpt.config
    n_layers = len(set(layers)) if layers is not None else int(getattr(cfg, "num_hidden_layers", 1) or 1)
    n_heads = len(set(heads)) if heads is not None else int(getattr(cfg, "num_attention_heads", 1) or 1)
    hidden = int(getattr(cfg, "hidden_size", 0) or 0)
    d = int(getattr(cfg, "head_dim", 0) or (hidden // max(int(getattr(cfg, "num_attention_heads", 1) or 1), 1)) or 1)
    _panel_bytes(widths, n_layers, n_heads, d)


#: Float64 copies of one layer's heads x w x w scores a capture holds at once (the scores, the
#: masked scores and probabilities of the record, the eager attention's weights).
FORWARD_COPIES = 4


def blocks_needed(layers: Iterable[int] | None) -> int | None:
    """How many leading blocks the attention layers ``layers`` need (None: all of them)."""
    chosen = None if layers is None else {int(v) for v in layers}
    return max(chosen) + 1 if chosen and min(chosen) >= 0 else None


def gguf_precheck(gguf: GGUFFile, widths: Iterable[int] | None, layers: Iterable[int] | None,
                  heads: Iterable[int] | None) -> list[int]:
    """The widths (checked against the file's context length) after refusing, before loading,
    a panel that would not fit: the float64 model, the widest forward pass and the panel."""
    chosen = _check_widths(widths, gguf.context_length)
    blocks = blocks_needed(layers)
    n_layers = len(set(layers)) if layers is not None else gguf.layers or 1
    n_heads = len(set(heads)) if heads is not None else gguf.heads or 1
    panel = _panel_bytes(chosen, n_layers, n_heads, gguf.head_dim or 1)
    forward = FORWARD_COPIES * 8 * max(gguf.heads, 1) * max(chosen) ** 2
    what = f"blocks 0-{blocks - 1} of " if blocks is not None and blocks < gguf.layers else ""
    check_memory(gguf.load_bytes(blocks) + forward + panel, f"loading {what}{gguf.path.name} and capturing widths "
                                                            f"{','.join(map(str, chosen))}")
    return chosen


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


def hf_panel(model: str | Path | HFCheckpoint | GGUFFile, input_path: str | Path, widths: Iterable[int] | None,
             layers: Iterable[int] | None = None, heads: Iterable[int] | None = None,
             stage: Stage | None = None, image: bool | None = None) -> dict[str, np.ndarray]:
    """Operators of every selected (width, layer, head) of a transformers checkpoint.

    ``model``: ``"minilm"``, a checkpoint folder, a :class:`~.gguf_file.GGUFFile` (its widths and
    memory are checked before it is loaded: :func:`gguf_precheck`), or an :class:`HFCheckpoint`; ``input_path``: a
    UTF-8 document, or an image for a vision model (then ``widths`` is None or the token count).
    ``stage(name, done, total)`` reports progress (``done``/``total`` count operators).
    ``image=True`` (``--image``) refuses a text model, ``False`` a vision model; None takes either.
    Raises InvalidInputError (one line) on bad input or a refused attention (see :mod:`.hf_capture`).
    """
    report = stage or (lambda name, done, total: None)
    if isinstance(model, GGUFFile):
        widths = gguf_precheck(model, widths, layers, heads)
    report("load model", 0, 0)
    ckpt = model if isinstance(model, HFCheckpoint) else HFCheckpoint(model, blocks=blocks_needed(layers))
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


def open_gguf(source: str | Path) -> GGUFFile:
    """The GGUF file ``source`` names (a path or a shortcut such as ``smollm2``), its metadata read
    (:func:`~.gguf_file.read_gguf`); refused with one line when torch, transformers, gguf or
    accelerate is missing (naming the install command) or transformers' GGUF loader does not read
    its architecture (naming it)."""
    return read_gguf(source, supported=require_gguf_loader())


def require_gguf_loader() -> list[str]:
    """The architectures transformers' GGUF loader reads, or one line (exit 2) naming the install
    command when torch, transformers, gguf or accelerate is missing (no file is read)."""
    require_hf()
    require_gguf()
    try:
        import accelerate  # noqa: F401  (transformers' GGUF loader needs it)
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError as exc:
        raise InvalidInputError(f"reading GGUF files needs accelerate ({exc}): {GGUF_INSTALL_HINT}") from None
    return list(GGUF_SUPPORTED_ARCHITECTURES)


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
