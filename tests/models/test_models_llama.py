"""Tests of the numpy Llama / Qwen2 forward (softrank_cert.models.llama) and its causal panels.

Tiny, randomly initialised Llama (grouped-query attention, with and without biases) and Qwen2
(q/k/v biases) checkpoints are built with transformers and saved as float64 safetensors, with
a small BPE tokenizer (the Llama one adds a BOS ``<s>``, the Qwen2 one nothing).

transformers evaluates RMSNorm, the rotary tables and the eager softmax in float32 even in a
float64 model.  The 1e-10 reference comparison therefore runs transformers with those three
steps patched to float64 (same formulas; see ``_float64_transformers``); one further check
against the unpatched model holds to float32 accuracy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import REFERENCE_SKIP

torch = pytest.importorskip("torch", reason=REFERENCE_SKIP)
transformers = pytest.importorskip("transformers", reason=REFERENCE_SKIP)

from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402
from transformers.models.qwen2 import modeling_qwen2  # noqa: E402

from softrank_cert.errors import InvalidInputError  # noqa: E402
from softrank_cert.models import PROVENANCE_KEY, LlamaModel, build_panel, load_model, provenance_names, write_panel  # noqa: E402
from softrank_cert.models.common import load_weights, read_config  # noqa: E402
from softrank_cert.util.operator_files import load_operators  # noqa: E402
from tests.helpers import hf_text_attentions as _hf, softmax_qk

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
APACHE = DATA / "apache2.txt"


def _tokenizer(folder: Path, bos: bool) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"])
    tok.train([str(APACHE)], trainer)
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
    tok.save(str(folder / "tokenizer.json"))
    return tok


def _build(folder: Path, family: str, seed: int, **overrides) -> tuple[object, Tokenizer]:
    folder.mkdir()
    tok = _tokenizer(folder, bos=family == "llama")
    torch.manual_seed(seed)
    args = dict(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=48, max_position_embeddings=80, rms_norm_eps=1e-6,
                bos_token_id=1, eos_token_id=2)
    args.update(overrides)
    if family == "llama":
        config, cls = transformers.LlamaConfig(**args), transformers.LlamaModel
    else:
        config, cls = transformers.Qwen2Config(**args), transformers.Qwen2Model
    config._attn_implementation = "eager"
    hf = cls(config).to(torch.float64).eval()
    with torch.no_grad():  # far from initialisation: peaked heads, non-trivial norms and biases
        for p in hf.parameters():
            p.normal_(0.0, 0.4)
    hf.save_pretrained(folder)
    assert (folder / "model.safetensors").is_file()
    return hf, tok


def _eager64(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """transformers' eager attention with the softmax kept in float64."""
    key = modeling_llama.repeat_kv(key, module.num_key_value_groups)
    value = modeling_llama.repeat_kv(value, module.num_key_value_groups)
    w = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        w = w.masked_fill(~attention_mask, -math.inf) if attention_mask.dtype == torch.bool else w + attention_mask
    w = torch.nn.functional.softmax(w, dim=-1)
    return torch.matmul(w, value).transpose(1, 2).contiguous(), w


def _rms64(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def _rope64(self, x, position_ids):
    dim = 2 * self.inv_freq.shape[0]
    theta = self.config.rope_parameters["rope_theta"]
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    freqs = position_ids[..., None].to(torch.float64) * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


@pytest.fixture
def _float64_transformers(monkeypatch):
    for mod, prefix in ((modeling_llama, "Llama"), (modeling_qwen2, "Qwen2")):
        monkeypatch.setattr(mod, "eager_attention_forward", _eager64)
        monkeypatch.setattr(getattr(mod, f"{prefix}RMSNorm"), "forward", _rms64)
        monkeypatch.setattr(getattr(mod, f"{prefix}RotaryEmbedding"), "forward", _rope64)


def _compare(arrays: dict, prefix: str, hf, layers: int, heads: int) -> float:
    attentions, _ = _hf(hf, arrays[f"{prefix}/tokens"])
    worst = 0.0
    for layer in range(layers):
        for head in range(heads):
            name = f"{prefix}/L{layer}H{head}"
            assert bool(arrays[f"{name}/causal"]) and f"{name}/beta" not in arrays
            a = softmax_qk(arrays[f"{name}/Q"], arrays[f"{name}/K"], causal=True)
            worst = max(worst, float(np.abs(a - attentions[layer][head]).max()))
    return worst


@pytest.fixture(scope="module")
def gqa(tmp_path_factory) -> tuple[Path, object, Tokenizer]:
    folder = tmp_path_factory.mktemp("llama") / "tiny-llama"
    hf, tok = _build(folder, "llama", 3, rope_theta=10000.0)
    return folder, hf, tok


# (a) reference comparisons ----------------------------------------------------------------------
def test_llama_gqa_reference(gqa, _float64_transformers) -> None:
    folder, hf, tok = gqa
    model = load_model(folder)
    assert isinstance(model, LlamaModel) and model.model_type == "llama"
    assert (model.num_heads, model.num_kv_heads, model.head_dim) == (4, 2, 8)
    assert [model.kv_head(h) for h in range(4)] == [0, 0, 1, 1]
    arrays = build_panel(model, APACHE, [80, 9])
    assert len(provenance_names(arrays)) == 2 * 2 * 4
    bos = tok.token_to_id("<s>")
    pieces = tok.encode(APACHE.read_text(encoding="utf-8"), add_special_tokens=False).ids
    for width in (80, 9):
        ids = arrays[f"tiny-llama/apache2/w{width}/tokens"]
        assert ids.tolist() == [bos] + pieces[: width - 1]
        assert _compare(arrays, f"tiny-llama/apache2/w{width}", hf, 2, 4) <= 1e-10
    # grouped-query attention: heads 0 and 1 share kv head 0
    np.testing.assert_array_equal(arrays["tiny-llama/apache2/w80/L1H0/K"], arrays["tiny-llama/apache2/w80/L1H1/K"])
    assert np.abs(arrays["tiny-llama/apache2/w80/L1H1/K"] - arrays["tiny-llama/apache2/w80/L1H2/K"]).max() > 0.1
    spread = softmax_qk(arrays["tiny-llama/apache2/w80/L1H3/Q"], arrays["tiny-llama/apache2/w80/L1H3/K"], causal=True).max(axis=1)
    assert spread[8:].min() < 0.9  # not all one-hot: the comparison means something
    prov = json.loads(str(arrays[PROVENANCE_KEY][()]))
    assert prov["tiny-llama/apache2/w9/L0H3"]["kv_head"] == 1 and prov["tiny-llama/apache2/w9/L0H3"]["model_type"] == "llama"
    out = model.forward(arrays["tiny-llama/apache2/w80/tokens"], probabilities=True)
    _, hidden = _hf(hf, arrays["tiny-llama/apache2/w80/tokens"])
    assert np.abs(out.hidden - hidden).max() < 1e-10


def test_llama_against_unpatched_transformers(gqa) -> None:
    """Stock transformers (float32 RMSNorm, rotary tables and softmax) agrees to float32 accuracy."""
    folder, hf, _ = gqa
    arrays = build_panel(folder, APACHE, [40], layers=[0, 1])
    worst = _compare(arrays, "tiny-llama/apache2/w40", hf, 2, 4)
    assert 1e-12 < worst < 1e-4, worst


def test_llama_biases_head_dim_and_mqa(tmp_path: Path, _float64_transformers) -> None:
    """attention_bias + mlp_bias, head_dim != hidden/heads, one kv head, rope_theta 1e6."""
    folder = tmp_path / "llama-bias"
    hf, _ = _build(folder, "llama", 5, num_key_value_heads=1, head_dim=12, attention_bias=True, mlp_bias=True,
                   rope_theta=1e6, num_hidden_layers=3)
    model = LlamaModel.load(folder)
    assert (model.head_dim, model.theta, model.layers[0]["o_b"] is not None) == (12, 1e6, True)
    arrays = build_panel(model, APACHE, [64])
    assert arrays["llama-bias/apache2/w64/L2H3/Q"].shape == (64, 12)
    assert _compare(arrays, "llama-bias/apache2/w64", hf, 3, 4) <= 1e-10


def test_qwen2_reference(tmp_path: Path, _float64_transformers) -> None:
    folder = tmp_path / "tiny-qwen2"
    hf, tok = _build(folder, "qwen2", 9, rope_theta=1e6, hidden_size=48, num_attention_heads=6, num_key_value_heads=2)
    model = load_model(folder)
    assert isinstance(model, LlamaModel) and model.model_type == "qwen2" and model.layers[0]["qkv_b"] is not None
    assert [model.kv_head(h) for h in range(6)] == [0, 0, 0, 1, 1, 1]
    arrays = build_panel(model, APACHE, [80, 33])
    pieces = tok.encode(APACHE.read_text(encoding="utf-8"), add_special_tokens=False).ids
    assert arrays["tiny-qwen2/apache2/w33/tokens"].tolist() == pieces[:33]  # no BOS
    for width in (80, 33):
        assert _compare(arrays, f"tiny-qwen2/apache2/w{width}", hf, 2, 6) <= 1e-10
    path = write_panel(tmp_path / "q.npz", arrays)
    ops = load_operators(path, ["tiny-qwen2/apache2/w33/L1H5"])
    assert ops[0].operator.mask == "causal" and ops[0].operator.beta == "inv_sqrt_d" and ops[0].operator.shape == (33, 33)


# (b) configs that are refused ---------------------------------------------------------------------
def test_bad_configs(gqa, tmp_path: Path) -> None:
    folder, _, _ = gqa
    config, weights = read_config(folder), load_weights(folder)
    no_bias = {k: v for k, v in weights.items() if not k.endswith("q_proj.bias")}
    cases = [
        ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0}}, weights, "rope type 'llama3'"),
        ({"rope_parameters": None, "rope_scaling": {"type": "linear", "factor": 2.0}}, weights, "rope_scaling 'linear'"),
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "factor": 2.0}}, weights, "factor"),
        ({"rope_parameters": None, "rope_theta": -3}, weights, "rope_theta"),
        ({"num_key_value_heads": 3}, weights, "multiple of num_key_value_heads"),
        ({"head_dim": 7}, weights, "odd"),
        ({"head_dim": 6}, weights, "shape"),
        ({"hidden_act": "swish9"}, weights, "hidden_act"),
        ({"model_type": "mistral"}, weights, "model_type 'mistral'"),
        ({"attention_bias": True}, weights, "lacks the tensor layers.0.self_attn.q_proj.bias"),
        ({"model_type": "qwen2"}, no_bias, "q_proj.bias"),
    ]
    for change, w, fragment in cases:
        with pytest.raises(InvalidInputError) as info:
            LlamaModel({**config, **change}, w)
        assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)
    # a legacy config (rope_theta at top level, rope_scaling null) is accepted
    legacy = LlamaModel({**{k: v for k, v in config.items() if k != "rope_parameters"}, "rope_theta": 5e5,
                         "rope_scaling": None}, weights)
    assert legacy.theta == 5e5
    # Qwen2 sliding-window attention caps the width where it equals causal attention
    qwen = {**config, "model_type": "qwen2", "attention_bias": True, "use_sliding_window": True, "sliding_window": 16,
            "layer_types": ["full_attention", "sliding_attention"]}
    with_bias = dict(weights)
    for i in range(2):
        for s, n in (("q", 32), ("k", 16), ("v", 16)):
            with_bias[f"layers.{i}.self_attn.{s}_proj.bias"] = np.zeros(n)
    capped = LlamaModel(qwen, with_bias)
    assert capped.max_positions == 16
    model = LlamaModel.load(folder)
    short = tmp_path / "short.txt"
    short.write_text("Only a few words here.", encoding="utf-8")
    for call, fragment in ((lambda: build_panel(model, APACHE, [81]), "outside 3..80"),
                           (lambda: build_panel(model, short, [40]), "word pieces"),
                           (lambda: build_panel(model, APACHE, [10], heads=[4]), "heads")):
        with pytest.raises(InvalidInputError) as info:
            call()
        assert fragment in str(info.value), str(info.value)
