"""One entry point for capturing a panel from any model source (UNTRUSTED front end of the loaders).

``softrank panel`` and the ``panel`` stage of ``softrank survey`` take a model as ``--model``
(the numpy loaders), ``--hf`` (transformers itself) or ``--gguf`` (a GGUF file, or a shortcut of
:mod:`.packaged`); :func:`capture_panel` runs the one that was given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..util.progress import Stage


@dataclass(frozen=True)
class ModelSource:
    """Which model to run: exactly one of ``model`` (numpy loaders: ``minilm`` or a checkpoint
    folder), ``hf`` (a transformers checkpoint folder, ``minilm`` or ``dinov2-small``) and
    ``gguf`` (a GGUF file or a shortcut such as ``smollm2``)."""

    model: str | None = None
    hf: str | None = None
    gguf: str | None = None

    @property
    def label(self) -> str:
        """The source as given (for reports)."""
        return str(self.hf or self.gguf or self.model)

    @property
    def path(self) -> str | None:
        """The checkpoint folder or file named, when it is one (a shortcut is not an input file)."""
        given = self.hf or self.gguf or self.model
        return given if given is not None and Path(given).exists() else None


def check_packages(source: ModelSource) -> None:
    """Refuse (one line, exit 2, naming the install command; before any work) a ``--hf`` or
    ``--gguf`` source whose packages (torch, transformers; gguf, accelerate) do not import."""
    if source.hf is not None or source.gguf is not None:
        from .hf_capture import require_hf
        from .hf_panel import require_gguf_loader

        require_hf()
        if source.gguf is not None:
            require_gguf_loader()


def _config_counts(config: dict[str, Any]) -> tuple[int, int] | None:
    """``(layers, heads)`` of a transformers ``config.json`` (its text part when nested)."""
    part = text if isinstance(text := config.get("text_config"), dict) else config
    layers, heads = part.get("num_hidden_layers"), part.get("num_attention_heads")
    counts = (layers, heads)
    if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in counts):
        return layers, heads  # type: ignore[return-value]  # both checked int just above
    return None


def head_counts(source: ModelSource) -> tuple[int, int] | None:
    """``(layers, heads per layer)`` of ``source`` from its metadata alone (a GGUF file's header,
    a checkpoint folder's ``config.json``), before any forward pass; None when the source does not
    say it without being converted first (``--hf dinov2-small``).  Bad input is one line (exit 2)."""
    if source.gguf is not None:
        from .hf_panel import open_gguf

        gguf = open_gguf(source.gguf)
        return (gguf.layers, gguf.heads) if gguf.layers > 0 and gguf.heads > 0 else None
    given = source.hf if source.hf is not None else source.model
    from .dinov2_onnx import SHORTCUT as DINOV2

    if given is None or given == DINOV2:
        return None
    from ..util.files import loads_unique
    from .common import read_input_file, resolve_model

    _, folder = resolve_model(given, ("config.json",))
    try:
        config = loads_unique(read_input_file(folder / "config.json", "config"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None  # the capture refuses it with its own line
    return _config_counts(config) if isinstance(config, dict) else None


def capture_panel(source: ModelSource, document: str | Path, widths: Iterable[int] | None, *,
                  layers: Iterable[int] | None = None, heads: Iterable[int] | None = None, image: bool = False,
                  round_beta: bool = False, stage: Stage | None = None) -> dict[str, np.ndarray]:
    """The panel arrays of every selected (width, layer, head) of ``source`` run on ``document``
    (a UTF-8 text, or an image for a vision model: ``image``); ``stage(name, done, total)``
    reports progress.  Bad input is one :class:`~softrank_cert.errors.InvalidInputError` line."""
    in_stage = stage or (lambda name, done=0, total=0: None)
    if source.hf is not None or source.gguf is not None:
        from .hf_panel import hf_panel, open_gguf

        model: Any = open_gguf(source.gguf) if source.gguf is not None else source.hf
        return hf_panel(model, document, widths, layers=layers, heads=heads, image=image, stage=in_stage)
    from .panel import build_panel

    in_stage("forward passes")
    return build_panel(str(source.model), document, widths, layers=layers, heads=heads,
                       progress=lambda done, total: in_stage("forward passes", done, total), round_beta=round_beta)
