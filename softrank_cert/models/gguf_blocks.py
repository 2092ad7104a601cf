"""GGUF models loaded block by block, only the blocks a capture needs (UNTRUSTED front end).

:func:`load_gguf_model` builds the transformers model of a GGUF file's configuration with its
first ``blocks`` decoder blocks (all of them when ``blocks`` is None) and fills it one tensor at
a time with the file's tensors, named and processed exactly as transformers' own GGUF loader
does (``get_gguf_hf_weights_map`` and the architecture's ``TensorProcessor``; every quantized
tensor decoded with ``gguf.dequantize``).  Tensors of the blocks after the first ``blocks`` are
never decoded.

Why this is the same model.  Layer ``l``'s query and key depend only on the embeddings and
blocks ``0..l`` (each block reads the output of the one before it), so a model cut after block
``l`` computes them exactly as the whole model does; the capture stops after the last wanted
layer anyway.  ``gguf.dequantize`` returns float32, so every weight is exactly a float32 value:
a ``Linear`` weight is kept as that float32 tensor and widened to float64 (exactly) each time
the forward pass reads it (a ``torch.nn.utils.parametrize`` parametrization), every other
parameter is stored in float64.  The forward pass therefore runs on the same float64 weights as
``from_pretrained(..., dtype=torch.float64)``, in about half its memory and without its second
copy of every tensor while loading
(:data:`~.gguf_file.LOAD_BYTES_PER_PARAMETER`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from .hf_capture import require_hf

#: The LM head's tensor, which the captured base model (``AutoModel``) has no parameter for.
LM_HEAD = "output.weight"
#: Rows of a quantized tensor decoded at once.
DECODE_ROWS = 4096

def truncate_config(config: Any, blocks: int | None) -> Any:
    """``config`` cut to its first ``blocks`` hidden layers (per-layer lists cut with it)."""
    total = int(getattr(config, "num_hidden_layers", 0) or 0)
    if blocks is None or not 0 < blocks < total:
        return config
    config.num_hidden_layers = blocks
    for name in ("layer_types", "sliding_window_pattern_list"):
        value = getattr(config, name, None)
        if isinstance(value, list) and len(value) == total:
            setattr(config, name, value[:blocks])
    return config


def _block_of(name: str) -> int | None:
    """The block index of a GGUF tensor ``blk.<i>.<...>``, None for any other tensor."""
    head, _, rest = name.partition(".")
    index = rest.partition(".")[0]
    return int(index) if head == "blk" and index.isdigit() else None


def _decode(gguf: Any, tensor: Any) -> Any:
    """``gguf.dequantize`` of a tensor, :data:`DECODE_ROWS` rows at a time (the decoder's
    temporaries are several times the size of what it decodes)."""
    data = tensor.data
    if data.ndim < 2 or data.shape[0] <= DECODE_ROWS:
        return gguf.dequantize(data, tensor.tensor_type)
    first = gguf.dequantize(data[:DECODE_ROWS], tensor.tensor_type)
    out = np.empty((data.shape[0], *first.shape[1:]), dtype=first.dtype)
    out[:DECODE_ROWS] = first
    for start in range(DECODE_ROWS, data.shape[0], DECODE_ROWS):
        out[start:start + DECODE_ROWS] = gguf.dequantize(data[start:start + DECODE_ROWS], tensor.tensor_type)
    return out


def _widen(torch: Any) -> Any:
    """A parametrization returning its float32 weight as float64 (exact)."""

    class Widen(torch.nn.Module):
        def forward(self, weight: Any) -> Any:
            return weight.to(torch.float64)

    return Widen()


def _put(torch: Any, model: Any, name: str, values: Any) -> None:
    """Set parameter ``name`` of ``model`` to the float32 array ``values`` (module docstring)."""
    from torch.nn.utils import parametrize

    owner_name, _, attr = name.rpartition(".")
    owner = model.get_submodule(owner_name)
    old = owner._parameters.get(attr)
    values = np.asarray(values, dtype=np.float32)
    # a copy only where ``values`` is read-only (a view of the memory-mapped file)
    tensor = torch.from_numpy(values) if values.flags.writeable else torch.tensor(values)
    if old is None or tuple(old.shape) != tuple(tensor.shape):
        shape = None if old is None else list(old.shape)
        raise InvalidInputError(f"the GGUF tensor for {name} has shape {list(tensor.shape)}, the model expects {shape}")
    if attr == "weight" and isinstance(owner, torch.nn.Linear):
        owner._parameters[attr] = torch.nn.Parameter(tensor, requires_grad=False)
        parametrize.register_parametrization(owner, attr, _widen(torch), unsafe=True)
    else:
        owner._parameters[attr] = torch.nn.Parameter(tensor.to(torch.float64), requires_grad=False)


def load_gguf_model(path: Path, config: Any, blocks: int | None) -> tuple[Any, dict[str, list[str]]]:
    """The transformers base model (``AutoModel``) of the GGUF file ``path`` with the
    configuration ``config`` cut to its first ``blocks`` blocks (module docstring), in eval mode
    with eager attention, and its loading info for :func:`~.gguf_check.check_loading_info`:
    ``missing_keys`` (parameters no tensor of the file filled) and ``unexpected_keys`` (tensors
    of the loaded blocks, or outside the blocks, that fill no parameter; the LM head
    ``output.weight`` of a base model excepted).  Raises InvalidInputError when a tensor's shape
    is not its parameter's."""
    torch, transformers = require_hf()
    import gguf
    from accelerate import init_empty_weights
    from transformers import modeling_gguf_pytorch_utils as loader

    truncate_config(config, blocks)
    parsed = loader.load_gguf_checkpoint(str(path), return_tensors=False)
    parsed["tensors"] = {}
    with init_empty_weights(include_buffers=False):
        model = transformers.AutoModel.from_config(config, dtype=torch.float64, attn_implementation="eager")
    reader = gguf.GGUFReader(str(path))
    architecture = loader.read_field(reader, "general.architecture")[0]
    processor = loader.TENSOR_PROCESSORS.get(architecture, loader.TensorProcessor)(config=parsed["config"])
    names = loader.get_gguf_hf_weights_map(model, processor)
    kept = int(config.num_hidden_layers)
    unexpected = []
    for tensor in reader.tensors:
        block = _block_of(str(tensor.name))
        if block is not None and block >= kept:
            continue
        result = processor.process(weights=_decode(gguf, tensor), name=str(tensor.name),
                                   tensor_key_mapping=names, parsed_parameters=parsed)
        if result.name in names:
            _put(torch, model, names[result.name], result.weights)
        elif str(tensor.name) != LM_HEAD:
            unexpected.append(str(tensor.name))
    missing = [name for name, param in model.named_parameters() if param.is_meta]
    return model.eval(), {"missing_keys": missing, "unexpected_keys": unexpected}
