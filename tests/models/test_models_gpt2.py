"""Tests of the numpy GPT-2 forward (softrank_cert.models.gpt2) and its causal panels.

Every test builds a tiny, randomly initialised GPT-2 with transformers (so the module is
skipped where torch / transformers do not import), saves it as float64 safetensors with a
byte-level BPE tokenizer trained on the Apache licence, and compares transformers' eager
attention probabilities with ``softmax(beta Q K^T + causal mask)`` from our Q, K.
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

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

from softrank_cert.errors import InvalidInputError  # noqa: E402
from softrank_cert.models import PROVENANCE_KEY, GPT2Model, build_panel, load_model, provenance_names, write_panel  # noqa: E402
from softrank_cert.models.common import load_weights, read_config  # noqa: E402
from softrank_cert.util.operator_files import load_operators  # noqa: E402
from tests.helpers import hf_text_attentions as _hf, softmax_qk

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
APACHE = DATA / "apache2.txt"


def _byte_bpe(folder: Path) -> Tokenizer:
    """A small byte-level BPE (GPT-2 style: no special tokens added) trained on the licences."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([str(APACHE), str(DATA / "mpl2.txt")], trainer)
    tok.save(str(folder / "tokenizer.json"))
    return tok


def _tiny_gpt2(folder: Path, seed: int, **overrides) -> tuple[object, Tokenizer]:
    folder.mkdir()
    tok = _byte_bpe(folder)
    torch.manual_seed(seed)
    args = dict(vocab_size=tok.get_vocab_size(), n_embd=32, n_layer=2, n_head=4, n_positions=96,
                layer_norm_epsilon=1e-5, activation_function="gelu_new", bos_token_id=0, eos_token_id=0)
    args.update(overrides)
    config = transformers.GPT2Config(**args)
    config._attn_implementation = "eager"
    hf = transformers.GPT2Model(config).to(torch.float64).eval()
    with torch.no_grad():  # far from initialisation: peaked heads, non-trivial LayerNorms and biases
        for p in hf.parameters():
            p.normal_(0.0, 0.35)
    hf.save_pretrained(folder)
    assert (folder / "model.safetensors").is_file()
    return hf, tok


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, object, Tokenizer]:
    folder = tmp_path_factory.mktemp("gpt2") / "tiny-gpt2"
    hf, tok = _tiny_gpt2(folder, 7)
    return folder, hf, tok


# (a) reference: transformers' eager GPT-2 in float64 ------------------------------------------
def test_reference_transformers(tiny) -> None:
    folder, hf, tok = tiny
    arrays = build_panel(folder, APACHE, [96, 17])
    assert len(provenance_names(arrays)) == 2 * 2 * 4
    pieces = tok.encode(APACHE.read_text(encoding="utf-8"), add_special_tokens=False).ids
    worst = 0.0
    for width in (96, 17):
        prefix = f"tiny-gpt2/apache2/w{width}"
        ids = arrays[f"{prefix}/tokens"]
        assert ids.dtype == np.int64 and ids.tolist() == pieces[:width]  # GPT-2 adds no special token
        attentions, _ = _hf(hf, ids)
        for layer in range(2):
            for head in range(4):
                name = f"{prefix}/L{layer}H{head}"
                assert f"{name}/beta" not in arrays  # beta = 1/sqrt(8): the default inv_sqrt_d
                assert arrays[f"{name}/causal"].shape == () and arrays[f"{name}/causal"].dtype == np.bool_
                assert bool(arrays[f"{name}/causal"])
                q, k = arrays[f"{name}/Q"], arrays[f"{name}/K"]
                assert q.dtype == k.dtype == np.float64 and q.shape == k.shape == (width, 8)
                a = softmax_qk(q, k, 1 / math.sqrt(8), causal=True)
                worst = max(worst, float(np.abs(a - attentions[layer][head]).max()))
        if width == 96:
            spread = softmax_qk(arrays[f"{prefix}/L1H2/Q"], arrays[f"{prefix}/L1H2/K"], 1 / math.sqrt(8), True).max(axis=1)
            assert spread[8:].min() < 0.9  # not all one-hot: the comparison means something
    assert worst <= 1e-10, worst
    # causal prefix property: the width-17 operators are the leading blocks of the width-96 ones
    # (up to the summation order of the BLAS)
    np.testing.assert_allclose(arrays["tiny-gpt2/apache2/w17/L1H3/Q"], arrays["tiny-gpt2/apache2/w96/L1H3/Q"][:17],
                               rtol=0, atol=1e-12)
    prov = json.loads(str(arrays[PROVENANCE_KEY][()]))
    assert prov["tiny-gpt2/apache2/w17/L1H3"]["model_type"] == "gpt2"


def test_forward_hidden_and_probabilities(tiny) -> None:
    folder, hf, _ = tiny
    model = GPT2Model.load(folder)
    ids = np.arange(5, 60, dtype=np.int64)
    out = model.forward(ids, probabilities=True)
    attentions, hidden = _hf(hf, ids)
    assert np.abs(out.hidden - hidden).max() < 1e-10
    for layer in range(2):
        assert np.abs(out.probs[layer] - attentions[layer]).max() < 1e-12
        assert (np.triu(out.probs[layer][0], k=1) == 0).all()
    part = model.forward(ids, layers=[0])
    assert part.depth == 1 and sorted(part.q) == [0]
    np.testing.assert_array_equal(part.q[0], out.q[0])


def test_panel_file_reads_back_as_causal_operators(tiny, tmp_path: Path) -> None:
    folder, _, _ = tiny
    arrays = build_panel(folder, APACHE, [20], layers=[1], heads=[0, 3])
    path = write_panel(tmp_path / "p.npz", arrays)
    ops = load_operators(path)
    assert [o.name for o in ops] == ["tiny-gpt2/apache2/w20/L1H0", "tiny-gpt2/apache2/w20/L1H3"]
    for o in ops:
        assert o.operator.mask == "causal" and o.operator.beta == "inv_sqrt_d" and o.operator.shape == (20, 20)
        assert o.provenance["model_type"] == "gpt2"


# (b) beta: scale_attn_by_inverse_layer_idx / scale_attn_weights --------------------------------
def test_inverse_layer_scaling(tmp_path: Path) -> None:
    folder = tmp_path / "scaled"
    hf, _ = _tiny_gpt2(folder, 11, n_embd=64, n_layer=4, n_head=4, n_positions=40, scale_attn_by_inverse_layer_idx=True)
    model = load_model(folder)
    assert isinstance(model, GPT2Model) and model.head_dim == 16
    betas = [model.beta(layer) for layer in range(4)]  # 1/(4 (l+1)): exact for l+1 = 1, 2, 4
    assert betas[0].value is None and betas[0].exact
    assert betas[1] == (0.125, True, "1/(sqrt(16)*2)")
    assert betas[2].value == 1 / 12 and not betas[2].exact
    assert betas[3] == (0.0625, True, "1/(sqrt(16)*4)")
    with pytest.raises(InvalidInputError) as info:
        build_panel(model, APACHE, [40])
    assert "1/(sqrt(16)*3)" in str(info.value) and "\n" not in str(info.value)
    arrays = build_panel(model, APACHE, [40], layers=[0, 1, 3])
    assert "scaled/apache2/w40/L0H0/beta" not in arrays
    assert arrays["scaled/apache2/w40/L1H0/beta"].shape == () and arrays["scaled/apache2/w40/L1H0/beta"].dtype == np.float64
    rounded = build_panel(model, APACHE, [40], layers=[2], round_beta=True)
    prov = json.loads(str(rounded[PROVENANCE_KEY][()]))
    assert prov["scaled/apache2/w40/L2H1"]["beta_exact"] is False
    assert prov["scaled/apache2/w40/L2H1"]["beta"] == "1/(sqrt(16)*3)"
    arrays.update(rounded)
    attentions, _ = _hf(hf, arrays["scaled/apache2/w40/tokens"])
    worst = 0.0
    for layer in range(4):
        for head in range(4):
            name = f"scaled/apache2/w40/L{layer}H{head}"
            beta = float(arrays[f"{name}/beta"]) if f"{name}/beta" in arrays else 1 / math.sqrt(16)
            worst = max(worst, float(np.abs(softmax_qk(arrays[f"{name}/Q"], arrays[f"{name}/K"], beta, True)
                                            - attentions[layer][head]).max()))
    assert worst <= 1e-10, worst
    path = write_panel(tmp_path / "scaled.npz", {k: v for k, v in arrays.items() if "/L2H" not in k and k != PROVENANCE_KEY}
                       | {PROVENANCE_KEY: np.array("{}")})
    by_name = {o.name: o.operator for o in load_operators(path)}
    assert by_name["scaled/apache2/w40/L1H2"].beta == "0.125"
    assert by_name["scaled/apache2/w40/L3H2"].beta == "0.0625"
    assert by_name["scaled/apache2/w40/L0H2"].beta == "inv_sqrt_d"


def test_unscaled_attention_beta(tiny) -> None:
    folder, _, _ = tiny
    config, weights = read_config(folder), load_weights(folder)
    plain = GPT2Model({**config, "scale_attn_weights": False}, weights)
    assert [plain.beta(i) for i in range(2)] == [(1.0, True, "1/1")] * 2
    both = GPT2Model({**config, "scale_attn_weights": False, "scale_attn_by_inverse_layer_idx": True}, weights)
    assert both.beta(1) == (0.5, True, "1/2")
    assert both.scaling(1) == 0.5
    odd = GPT2Model({**config, "n_head": 2}, weights)  # head_dim 16, but 1/sqrt(16) is still inv_sqrt_d
    assert odd.beta(1).value is None


# (c) bad inputs ------------------------------------------------------------------------------
def test_bad_inputs(tiny, tmp_path: Path) -> None:
    folder, _, _ = tiny
    model = GPT2Model.load(folder)
    short = tmp_path / "short.txt"
    short.write_text("Only a few words here.", encoding="utf-8")
    config, weights = read_config(folder), load_weights(folder)
    cases = [
        (lambda: build_panel(model, APACHE, [97]), "outside 3..96"),
        (lambda: build_panel(model, short, [64]), "word pieces"),
        (lambda: build_panel(model, APACHE, [16], layers=[2]), "layers"),
        (lambda: model.forward(np.array([0, 10_000])), "vocabulary"),
        (lambda: model.forward(np.zeros(97, dtype=np.int64)), "1..96"),
        (lambda: GPT2Model({**config, "activation_function": "swish7"}, weights), "activation_function"),
        (lambda: GPT2Model({**config, "n_head": 5}, weights), "multiple"),
        (lambda: GPT2Model(config, {k: v for k, v in weights.items() if k != "h.1.mlp.c_fc.bias"}), "h.1.mlp.c_fc.bias"),
        (lambda: GPT2Model({**config, "n_embd": 16}, weights), "shape"),
    ]
    for call, fragment in cases:
        with pytest.raises(InvalidInputError) as info:
            call()
        assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (bare / "tokenizer.json").write_text((folder / "tokenizer.json").read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="lacks model.safetensors"):
        build_panel(bare, APACHE, [16])
    (bare / "config.json").write_text(json.dumps({**config, "model_type": "t5"}), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="unsupported model_type 't5'"):
        build_panel(bare, APACHE, [16])
