"""Panels of real attention operators from a checkpoint and a document (UNTRUSTED front end).

:func:`build_panel` returns npz-ready arrays.  For model label ``M`` (``"minilm"`` or the
checkpoint folder's name), document stem ``D`` and each width ``w``:

* ``M/D/w<w>/tokens`` -- int64, the exactly ``w`` ids the model ran on
  (``[CLS] + first w-2 word pieces + [SEP]``, see :mod:`softrank_cert.models.bert`);
* ``M/D/w<w>/L<l>H<h>/Q``, ``.../K`` -- float64 (w x head_dim), layer ``l``, head ``h``
  (0-based), so ``A = softmax_rows(Q K^T / sqrt(head_dim))``: kind ``qk``, no ``beta`` key
  (the default ``inv_sqrt_d``), no mask (BERT is bidirectional);
* ``__provenance__`` -- a 0-d unicode array holding a JSON object mapping each operator name
  to ``{model, layer, head, width, text_sha256, text_name}``.

Other families (``config.json`` ``model_type``; :func:`load_model` dispatches):

* ``gpt2``, ``llama``, ``qwen2`` (causal): the same keys, ``tokens`` = the first ``w`` ids of
  the tokenized document (Llama: BOS first; see
  :class:`~softrank_cert.models.common.CausalTextMixin`), plus ``NAME/causal`` = 0-d bool
  ``True`` (mask ``causal``; the block is square, so ``A_ij = 0`` for ``j > i``) and, where a
  layer's beta is not ``1/sqrt(head_dim)`` (GPT-2 ``scale_attn_by_inverse_layer_idx`` or
  ``scale_attn_weights=false``), ``NAME/beta`` = 0-d float64 holding that beta *exactly*; a
  beta that no float64 equals (e.g. ``1/(8*3)``) is refused unless ``round_beta=True``, which
  writes its correctly rounded double.  Llama/Qwen2 ``K`` is the (RoPE'd) key matrix of kv
  head ``h // (H/G)``.  Provenance adds ``model_type`` (and ``kv_head`` for Llama/Qwen2,
  ``beta``/``beta_exact`` when ``NAME/beta`` is written).
* ``vit``: ``text_path`` is an image file; the only width is the token count ``n`` =
  patches + 1 (``widths`` None or ``[n]``); ``M/D/w<n>/pixel_values`` (float64 C x H x W)
  replaces ``tokens``; no mask, no beta key; provenance ``{model, model_type, layer, head,
  width, image_sha256, image_name}``.

:func:`write_panel` writes them with ``np.savez_compressed`` through the project's one atomic
writer (:func:`~softrank_cert.util.files.replace_atomically`: ``fsync``, then a rename), so a reader
never sees a half-written panel.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..errors import InvalidInputError
from ..util.files import replace_atomically
from ..util.operator_files import PROVENANCE_KEY
from .bert import BertModel
from .common import MINILM, AttentionOutput, check_width, read_config, read_text, resolve_model, selection
from .gpt2 import GPT2Model
from .llama import LlamaModel
from .vit import ViTModel

#: ``config.json`` ``model_type`` -> loader class (a missing model_type means BERT).
MODEL_FAMILIES: dict[str, type[AnyModel]] = {"bert": BertModel, "gpt2": GPT2Model, "llama": LlamaModel, "qwen2": LlamaModel,
                                               "vit": ViTModel}
AnyModel = BertModel | GPT2Model | LlamaModel | ViTModel


def load_model(model: str | Path | AnyModel) -> AnyModel:
    """A loaded model: ``"minilm"``, or a checkpoint folder dispatched on ``config.json`` ``model_type``."""
    if isinstance(model, (BertModel, GPT2Model, LlamaModel, ViTModel)):
        return model
    if isinstance(model, str) and model == MINILM:
        return BertModel.load(model)
    _, folder = resolve_model(model, ("config.json",))
    kind = read_config(folder).get("model_type", "bert")
    if kind not in MODEL_FAMILIES:
        raise InvalidInputError(f"unsupported model_type {kind!r}: expected one of {', '.join(MODEL_FAMILIES)}")
    return MODEL_FAMILIES[kind].load(model)


def _widths(widths: Iterable[int] | None, max_positions: int) -> list[int]:
    out: list[int] = []
    for w in widths or ():
        check_width(w, max_positions)
        if int(w) not in out:
            out.append(int(w))
    if not out:
        raise InvalidInputError("no widths given")
    return out


def build_panel(
    model: str | Path | AnyModel,
    text_path: str | Path,
    widths: Iterable[int] | None,
    layers: Iterable[int] | None = None,
    heads: Iterable[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    round_beta: bool = False,
) -> dict[str, np.ndarray]:
    """Q/K operators of every selected (width, layer, head) of ``model`` on ``text_path``.

    ``model`` is ``"minilm"``, a BERT / GPT-2 / Llama / Qwen2 / ViT checkpoint folder, or an
    already loaded model (:func:`load_model`); for ViT ``text_path`` is an image.
    ``progress(done, total)`` is called after each width with counts of operators.
    ``round_beta`` admits GPT-2 layers whose beta no float64 equals (see the module
    docstring).  Raises :class:`InvalidInputError` on bad input (one line).
    """
    bert = load_model(model)
    if isinstance(bert, ViTModel):
        return _vit_panel(bert, text_path, widths, layers, heads, progress)
    text, sha = read_text(text_path)
    stem = Path(text_path).stem
    widths = _widths(widths, bert.max_positions)
    layers = selection(layers, bert.num_layers, "layers")
    heads = selection(heads, bert.num_heads, "heads")
    extra = _operator_extras(bert, layers, heads, round_beta)
    pieces = bert.word_pieces(text)
    arrays: dict[str, np.ndarray] = {}
    provenance: dict[str, dict] = {}
    total, done = len(widths) * len(layers) * len(heads), 0
    for width in widths:
        ids = bert.prefix_ids(text, width, pieces)
        base = f"{bert.label}/{stem}/w{width}"
        arrays[f"{base}/tokens"] = ids
        for name, layer, head in _head_operators(arrays, base, bert.forward(ids, layers=layers), layers, heads):
            provenance[name] = {"model": bert.label, "layer": layer, "head": head, "width": width,
                                "text_sha256": sha, "text_name": Path(text_path).name}
            leaves, notes = extra[layer, head]
            for leaf, value in leaves.items():
                arrays[f"{name}/{leaf}"] = value
            provenance[name].update(notes)
        done += len(layers) * len(heads)
        if progress is not None:
            progress(done, total)
    arrays[PROVENANCE_KEY] = np.array(json.dumps(provenance, sort_keys=True))
    return arrays


def _head_operators(arrays: dict[str, np.ndarray], base: str, out: AttentionOutput, layers: list[int],
                    heads: list[int]) -> Iterator[tuple[str, int, int]]:
    """Write ``BASE/L<l>H<h>/Q`` and ``.../K`` of every selected head into ``arrays`` and yield
    ``(name, layer, head)`` after each (the caller adds its provenance and leaves)."""
    for layer in layers:
        for head in heads:
            name = f"{base}/L{layer}H{head}"
            arrays[f"{name}/Q"] = np.ascontiguousarray(out.q[layer][head], dtype=np.float64)
            arrays[f"{name}/K"] = np.ascontiguousarray(out.k[layer][head], dtype=np.float64)
            yield name, layer, head


def _operator_extras(net: AnyModel, layers: list[int], heads: list[int],
                     round_beta: bool) -> dict[tuple[int, int], tuple[dict[str, np.ndarray], dict]]:
    """Per (layer, head): the ``beta`` / ``causal`` leaves and the provenance additions."""
    out: dict[tuple[int, int], tuple[dict[str, np.ndarray], dict]] = {}
    for layer in layers:
        leaves: dict[str, np.ndarray] = {}
        notes: dict = {}
        if not isinstance(net, BertModel):
            notes["model_type"] = net.model_type
            info = net.beta(layer)
            if info.value is not None:
                if not info.exact and not round_beta:
                    raise InvalidInputError(
                        f"layer {layer} scales scores by {info.formula}, which no float64 beta equals;"
                        " choose other layers or allow round_beta")
                leaves["beta"] = np.array(info.value, dtype=np.float64)
                notes.update(beta=info.formula, beta_exact=info.exact)
            if net.causal:
                leaves["causal"] = np.array(True)
        for head in heads:
            head_notes = dict(notes)
            if isinstance(net, LlamaModel):
                head_notes["kv_head"] = net.kv_head(head)
            out[layer, head] = (leaves, head_notes)
    return out


def _vit_panel(vit: ViTModel, image_path: str | Path, widths: Iterable[int] | None, layers: Iterable[int] | None,
               heads: Iterable[int] | None, progress: Callable[[int, int], None] | None) -> dict[str, np.ndarray]:
    """The ViT panel: one width (the token count), ``pixel_values`` instead of ``tokens``."""
    n = vit.num_tokens
    chosen = [n] if widths is None else list(widths)
    if any(isinstance(w, bool) or not isinstance(w, (int, np.integer)) for w in chosen):
        raise InvalidInputError(f"width must be an integer, got {chosen!r}")
    if sorted({int(w) for w in chosen}) != [n]:
        raise InvalidInputError(f"a ViT operator has the fixed width {n} (patches + CLS), got widths {chosen}")
    layers = selection(layers, vit.num_layers, "layers")
    heads = selection(heads, vit.num_heads, "heads")
    pixels, sha = vit.load_image(image_path)
    base = f"{vit.label}/{Path(image_path).stem}/w{n}"
    arrays: dict[str, np.ndarray] = {f"{base}/pixel_values": pixels}
    provenance: dict[str, dict] = {}
    for name, layer, head in _head_operators(arrays, base, vit.forward(pixels, layers=layers), layers, heads):
        provenance[name] = {"model": vit.label, "model_type": "vit", "layer": layer, "head": head, "width": n,
                            "image_sha256": sha, "image_name": Path(image_path).name}
    if progress is not None:
        total = len(layers) * len(heads)
        progress(total, total)
    arrays[PROVENANCE_KEY] = np.array(json.dumps(provenance, sort_keys=True))
    return arrays


def provenance_names(arrays: dict[str, np.ndarray]) -> list[str]:
    """Operator names of a panel (the keys of its ``__provenance__`` object, sorted)."""
    return sorted(json.loads(str(arrays[PROVENANCE_KEY][()])))


def write_panel(path: str | Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` as a compressed ``.npz`` atomically (:func:`~softrank_cert.util.files.replace_atomically`)."""
    path = Path(path)
    if path.suffix != ".npz":
        raise InvalidInputError(f"panel file must end in .npz, got {path.name}")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidInputError(f"output folder does not exist: {folder}")

    def save(tmp: str) -> None:
        with open(tmp, "wb") as handle:  # a handle: given a name, numpy would append ".npz"
            np.savez_compressed(handle, **arrays)  # type: ignore[arg-type]  # stubs: a key could be allow_pickle

    replace_atomically(path, save, ".npz.tmp")
    return path
