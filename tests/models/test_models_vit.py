"""Tests of the numpy ViT forward (softrank_cert.models.vit) and its image panels.

A tiny, randomly initialised ViT (32 x 32 images, 8 x 8 patches: 17 tokens) is built with
transformers and saved as float64 safetensors; the images are small PNGs written with Pillow.
transformers' eager ViT attention evaluates its softmax in float32 even in a float64 model, so
the 1e-10 reference comparison patches that one step to float64 (same formula).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import REFERENCE_SKIP

torch = pytest.importorskip("torch", reason=REFERENCE_SKIP)
transformers = pytest.importorskip("transformers", reason=REFERENCE_SKIP)
Image = pytest.importorskip("PIL.Image")

from safetensors.numpy import load_file, save_file  # noqa: E402
from transformers.models.vit import modeling_vit  # noqa: E402

from softrank_cert.errors import InvalidInputError  # noqa: E402
from softrank_cert.models import PROVENANCE_KEY, ViTModel, build_panel, load_model, provenance_names, write_panel  # noqa: E402
from softrank_cert.util.operator_files import load_operators  # noqa: E402
from tests.helpers import softmax_qk

TOKENS = 17  # (32/8)^2 patches + CLS


def _eager64(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' eager ViT attention with the softmax kept in float64."""
    w = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        w = w + attention_mask
    w = torch.nn.functional.softmax(w, dim=-1)
    return torch.matmul(w, value).transpose(1, 2).contiguous(), w


@pytest.fixture
def _float64_transformers(monkeypatch):
    monkeypatch.setattr(modeling_vit, "eager_attention_forward", _eager64)


def _png(path: Path, seed: int, size: tuple[int, int] = (32, 32)) -> Path:
    rng = np.random.default_rng(seed)
    h, w = size
    base = np.linspace(0, 255, h * w * 3).reshape(h, w, 3)  # a smooth ramp plus noise
    Image.fromarray(np.clip(base + rng.normal(0, 40, (h, w, 3)), 0, 255).astype(np.uint8)).save(path)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, object, Path]:
    root = tmp_path_factory.mktemp("vit")
    folder = root / "tiny-vit"
    torch.manual_seed(21)
    config = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
                                    image_size=32, patch_size=8, layer_norm_eps=1e-6, hidden_act="gelu")
    config._attn_implementation = "eager"
    hf = transformers.ViTModel(config, add_pooling_layer=False).to(torch.float64).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0.0, 0.4)
    hf.save_pretrained(folder)
    return folder, hf, _png(root / "cat.png", 1)


def _hf(hf, pixels: np.ndarray):
    with torch.no_grad():
        res = hf(pixel_values=torch.from_numpy(pixels)[None], output_attentions=True)
    return [a[0].numpy() for a in res.attentions], res.last_hidden_state[0].numpy()


def _worst(arrays: dict, prefix: str, attentions: list, layers: int = 2, heads: int = 4) -> float:
    worst = 0.0
    for layer in range(layers):
        for head in range(heads):
            name = f"{prefix}/L{layer}H{head}"
            assert f"{name}/causal" not in arrays and f"{name}/beta" not in arrays
            worst = max(worst, float(np.abs(softmax_qk(arrays[f"{name}/Q"], arrays[f"{name}/K"]) - attentions[layer][head]).max()))
    return worst


# (a) reference: transformers' eager ViT in float64 --------------------------------------------
def test_reference_transformers(tiny, _float64_transformers) -> None:
    folder, hf, image = tiny
    model = load_model(folder)
    assert isinstance(model, ViTModel) and model.num_tokens == TOKENS and not model.causal
    arrays = build_panel(model, image, None)
    assert len(provenance_names(arrays)) == 2 * 4
    pixels = arrays[f"tiny-vit/cat/w{TOKENS}/pixel_values"]
    assert pixels.shape == (3, 32, 32) and pixels.dtype == np.float64
    attentions, hidden = _hf(hf, pixels)
    assert _worst(arrays, f"tiny-vit/cat/w{TOKENS}", attentions) <= 1e-10
    q = arrays[f"tiny-vit/cat/w{TOKENS}/L1H2/Q"]
    assert q.shape == (TOKENS, 8)
    assert softmax_qk(q, arrays[f"tiny-vit/cat/w{TOKENS}/L1H2/K"]).max(axis=1).min() < 0.9
    out = model.forward(pixels, probabilities=True)
    assert np.abs(out.hidden - hidden).max() < 1e-10
    assert np.abs(out.probs[1] - attentions[1]).max() < 1e-12
    prov = json.loads(str(arrays[PROVENANCE_KEY][()]))
    assert prov[f"tiny-vit/cat/w{TOKENS}/L0H3"]["image_name"] == "cat.png"
    assert prov[f"tiny-vit/cat/w{TOKENS}/L0H3"]["model_type"] == "vit"
    path = write_panel(folder.parent / "vit.npz", arrays)
    ops = load_operators(path)
    assert all(o.operator.mask == "none" and o.operator.shape == (TOKENS, TOKENS) for o in ops)


def test_against_unpatched_transformers(tiny) -> None:
    """Stock transformers (float32 softmax) agrees to float32 accuracy."""
    folder, hf, image = tiny
    arrays = build_panel(folder, image, [TOKENS])
    attentions, _ = _hf(hf, arrays[f"tiny-vit/cat/w{TOKENS}/pixel_values"])
    assert 1e-12 < _worst(arrays, f"tiny-vit/cat/w{TOKENS}", attentions) < 1e-5


def test_patch_embedding_matches_conv(tiny) -> None:
    folder, hf, image = tiny
    model = ViTModel.load(folder)
    pixels, _ = model.load_image(image)
    with torch.no_grad():
        conv = hf.embeddings.patch_embeddings(torch.from_numpy(pixels)[None])[0].numpy()
    assert np.abs(model.embed(pixels)[1:] - model.pos[1:] - conv).max() < 1e-12


def test_transformers5_names_and_prefix(tiny, tmp_path: Path, _float64_transformers) -> None:
    """Tensors named as transformers 5 holds them (layers.<l>.attention.q_proj ...) under ``vit.``."""
    folder, hf, image = tiny
    renames = [("encoder.layer.", "layers."), ("attention.attention.query", "attention.q_proj"),
               ("attention.attention.key", "attention.k_proj"), ("attention.attention.value", "attention.v_proj"),
               ("attention.output.dense", "attention.o_proj"), ("intermediate.dense", "mlp.fc1"), ("output.dense", "mlp.fc2")]
    tensors = {}
    for name, t in load_file(str(folder / "model.safetensors")).items():
        for old, new in renames:
            name = name.replace(old, new)
        tensors["vit." + name] = t.astype(np.float32) if name.startswith("layernorm") else t
    tensors["classifier.weight"] = np.zeros((5, 32))
    other = tmp_path / "renamed"
    other.mkdir()
    save_file(tensors, str(other / "model.safetensors"))
    (other / "config.json").write_text((folder / "config.json").read_text(encoding="utf-8"), encoding="utf-8")
    a, b = build_panel(folder, image, [TOKENS]), build_panel(other, image, [TOKENS])
    for layer in range(2):
        np.testing.assert_array_equal(a[f"tiny-vit/cat/w{TOKENS}/L{layer}H1/Q"], b[f"renamed/cat/w{TOKENS}/L{layer}H1/Q"])
        np.testing.assert_array_equal(a[f"tiny-vit/cat/w{TOKENS}/L{layer}H1/K"], b[f"renamed/cat/w{TOKENS}/L{layer}H1/K"])


# (b) image preprocessing ----------------------------------------------------------------------
def test_preprocessing_matches_vit_image_processor(tiny, tmp_path: Path) -> None:
    folder, _, _ = tiny
    model = ViTModel.load(folder)
    processor = transformers.ViTImageProcessorPil(size={"height": 32, "width": 32})
    for size in ((32, 32), (45, 37)):  # exact size, and a bilinear resize
        path = _png(tmp_path / f"img{size[0]}.png", size[0], size)
        ours, sha = model.load_image(path)
        with Image.open(path) as img:
            ref = processor(img, return_tensors="np")["pixel_values"][0]
        assert ours.shape == ref.shape == (3, 32, 32) and len(sha) == 64
        assert np.abs(ours - ref).max() < 1e-6  # transformers rescales in float32
    exact = model.load_image(tmp_path / "img32.png")[0]
    with Image.open(tmp_path / "img32.png") as img:
        raw = np.asarray(img.convert("RGB"), dtype=np.float64)
    np.testing.assert_array_equal(exact, ((raw * (1 / 255) - 0.5) / 0.5).transpose(2, 0, 1))


def test_preprocessor_config(tiny, tmp_path: Path) -> None:
    folder, _, image = tiny
    other = tmp_path / "imagenet-norm"
    other.mkdir()
    for name in ("config.json", "model.safetensors"):
        (other / name).write_bytes((folder / name).read_bytes())
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    (other / "preprocessor_config.json").write_text(json.dumps({"image_mean": mean, "image_std": std}), encoding="utf-8")
    model = ViTModel.load(other)
    ours, _ = model.load_image(image)
    with Image.open(image) as img:
        raw = np.asarray(img.convert("RGB"), dtype=np.float64)
    expected = (raw * (1 / 255) - np.array(mean)) / np.array(std)
    assert np.abs(ours - expected.transpose(2, 0, 1)).max() < 1e-14


# (c) bad inputs -------------------------------------------------------------------------------
def test_bad_inputs(tiny, tmp_path: Path) -> None:
    folder, _, image = tiny
    model = ViTModel.load(folder)
    not_image = tmp_path / "notes.png"
    not_image.write_text("plain text", encoding="utf-8")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    weights = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    cases = [
        (lambda: build_panel(model, image, [64]), f"fixed width {TOKENS}"),
        (lambda: build_panel(model, image, [TOKENS, 20]), f"fixed width {TOKENS}"),
        (lambda: build_panel(model, image, ["17"]), "integer"),
        (lambda: build_panel(model, tmp_path / "none.png", None), "not found"),
        (lambda: build_panel(model, not_image, None), "cannot read image"),
        (lambda: build_panel(model, image, None, layers=[2]), "layers"),
        (lambda: model.forward(np.zeros((3, 31, 32))), "shape"),
        (lambda: ViTModel({**config, "patch_size": 5}, weights), "multiple of patch_size"),
        (lambda: ViTModel({**config, "image_size": 64}, weights), "shape"),
        (lambda: ViTModel({**config, "hidden_act": "gelu9"}, weights), "hidden_act"),
        (lambda: ViTModel(config, weights, {"image_std": [0.5, 0.0, 0.5]}), "std > 0"),
    ]
    for call, fragment in cases:
        with pytest.raises(InvalidInputError) as info:
            call()
        assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)
