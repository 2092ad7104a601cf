"""GGUF files are checked before they are believed (``softrank_cert/models/gguf_check.py``).

Hostile files are tiny models written in the test with the ``gguf`` package's GGUFWriter
(``gguf_forge.py``): a tensor missing, all query weights missing, no weight tensor at all, Llama
tensors under ``qwen2`` metadata, absurd or mistyped metadata, a wrong shape, ...  Before the
check, transformers loaded most of them with freshly initialised random weights and
``softrank panel`` exited 0; now each is refused before loading, exit 2, one line naming the
file and the first problem, with none of transformers' tables on stderr.  Well-formed tiny files
of every checked architecture still load, and the layout table agrees with transformers' own
GGUF name mapping.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the GGUF path needs torch (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", minversion="4.56", reason="needs transformers >= 4.56")
gguf = pytest.importorskip("gguf", reason="needs the gguf package (pip install -e '.[gguf]')")
pytest.importorskip("accelerate", reason="transformers' GGUF loader needs accelerate (pip install -e '.[gguf]')")

from conftest import run_in_process  # noqa: E402
from softrank_cert.errors import InvalidInputError  # noqa: E402
from softrank_cert.models.gguf_check import ARCHITECTURES, check_loading_info, layout_tensors  # noqa: E402
from softrank_cert.models.gguf_file import one_parse, read_gguf  # noqa: E402
from softrank_cert.models.hf_panel import HFCheckpoint  # noqa: E402
from tests.models.gguf_forge import BLOCKS, HEAD_DIM, HEADS, KV_HEADS, WIDTH, forge, tensors  # noqa: E402
from tests.helpers import softrank_subprocess

APACHE = Path(__file__).resolve().parents[2] / "examples" / "data" / "apache2.txt"
ALL_Q = tuple(f"blk.{b}.attn_q.weight" for b in range(BLOCKS))

#: id -> (forge keywords, a fragment of the one-line refusal)
HOSTILE: dict[str, tuple[dict, str]] = {
    "one-attn_k-missing": ({"drop": ("blk.1.attn_k.weight",)}, "tensor blk.1.attn_k.weight is missing"),
    "all-attn_q-missing": ({"drop": ALL_Q}, "tensor blk.0.attn_q.weight is missing"),
    "no-weight-tensors": ({"drop": tuple(tensors("llama"))}, "tensor token_embd.weight is missing"),
    "llama-tensors-qwen2-metadata": ({"arch_name": "qwen2"}, "tensor blk.0.attn_q.bias is missing (the qwen2 layout"),
    "head_count-nine": ({"meta": {"attention.head_count": "nine"}}, "llama.attention.head_count is STRING, not an integer"),
    "head_count-zero": ({"meta": {"attention.head_count": 0}}, "llama.attention.head_count = 0 is outside 1..1024"),
    "attn_k-shape": ({"shapes": {"blk.0.attn_k.weight": (WIDTH, WIDTH)}},
                     f"blk.0.attn_k.weight has shape [{WIDTH}, {WIDTH}], the metadata implies [{WIDTH}, {KV_HEADS * HEAD_DIM}]"),
    "block-past-block_count": ({"meta": {"block_count": 1}}, "unexpected tensor blk.1.attn_norm.weight: block 1 is past block_count 1"),
    "block_count-too-large": ({"meta": {"block_count": 3}}, "tensor blk.2.attn_norm.weight is missing"),
    "rope_freqs": ({"extra": {"rope_freqs.weight": (HEAD_DIM // 2,)}}, "unexpected tensor rope_freqs.weight"),
    "bias-in-llama": ({"extra": {"blk.0.attn_q.bias": (HEADS * HEAD_DIM,)}}, "unexpected tensor blk.0.attn_q.bias"),
    "kv-heads-do-not-divide": ({"meta": {"attention.head_count_kv": 3}}, "3 key/value heads do not divide 2 query heads"),
    "embedding-not-multiple-of-heads": ({"meta": {"rope.dimension_count": None, "attention.head_count": 3}},
                                        "embedding length 16 is not a multiple of 3 heads"),
    "vocab_size-disagrees": ({"meta": {"vocab_size": 1000}}, "the vocabulary has 1000 tokens, the embedding token_embd.weight 259"),
    "ffn-missing-metadata": ({"meta": {"feed_forward_length": None}}, "metadata llama.feed_forward_length is missing"),
    "rms-eps-zero": ({"meta": {"attention.layer_norm_rms_epsilon": 0.0}}, "layer_norm_rms_epsilon = 0.0 is outside"),
    "gemma3-without-head-size": ({"arch": "gemma3", "meta": {"attention.key_length": None, "attention.value_length": None}},
                                 "gemma3.attention.key_length (the head size) is missing"),
    "gemma3-q_norm-missing": ({"arch": "gemma3", "drop": ("blk.1.attn_q_norm.weight",)}, "blk.1.attn_q_norm.weight is missing"),
    "rope-scaling-ignored": ({"arch": "qwen2", "meta": {"rope.scaling.type": "yarn"}},
                             "qwen2.rope.scaling.type = 'yarn' changes the model, but transformers' GGUF loader does not read it"),
    "not-causal": ({"meta": {"attention.causal": False}}, "llama.attention.causal = False changes the model"),
    "gemma3-local-rope-base": ({"arch": "gemma3", "meta": {"rope.freq_base_swa": 5000.0}},
                               "gemma3.rope.freq_base_swa = 5000.0 changes the model"),
    "qwen2-partial-rope": ({"arch": "qwen2", "meta": {"rope.dimension_count": 4}},
                           "qwen2.rope.dimension_count = 4 differs from the head size 8"),
    "qwen2-value_length": ({"arch": "qwen2", "meta": {"attention.value_length": 4}},
                           "qwen2.attention.value_length = 4 differs from the head size 8"),
}


def _assert_refused(stderr: str, path: Path, fragment: str) -> None:
    """One line: the command, the file, the first problem (``fragment``); no transformers table."""
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert stderr.startswith(f"softrank panel: error: --gguf {path}: ") and fragment in stderr, stderr


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_file_is_refused_before_loading_in_one_line(case, tmp_path, capfd) -> None:
    keywords, fragment = HOSTILE[case]
    path = forge(tmp_path / f"{case}.gguf", **keywords)
    out = tmp_path / "o.npz"
    code, stdout, stderr = run_in_process(capfd, "panel", "--gguf", str(path), "--text", str(APACHE),
                                          "--widths", "16", "--out", str(out))
    assert code == 2, (stdout, stderr)
    _assert_refused(stderr, path, fragment)
    assert "load model" not in stderr and not out.exists()  # refused before loading


@pytest.mark.slow
@pytest.mark.parametrize(("case", "keywords", "fragment"), [
    ("block_count-2^32-1", {"meta": {"block_count": 2**32 - 1}}, "llama.block_count = 4294967295 is outside 1..4096"),
    ("one-attn_k-missing", {"drop": ("blk.1.attn_k.weight",)}, "tensor blk.1.attn_k.weight is missing"),
])
def test_command_refuses_in_one_line_without_transformers_tables(case, keywords, fragment, tmp_path) -> None:
    path = forge(tmp_path / f"{case}.gguf", **keywords)
    run = softrank_subprocess("panel", "--gguf", str(path), "--text", str(APACHE), "--widths", "16", "--layers", "0", "--heads", "0",
               "--out", str(tmp_path / "o.npz"))
    assert run.returncode == 2, run.stderr
    _assert_refused(run.stderr, path, fragment)
    assert not (tmp_path / "o.npz").exists()


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_layout_table_is_transformers_gguf_mapping(arch) -> None:
    """Every tensor the table needs is one transformers' GGUF loader maps into the base model,
    and every one it maps is in the table: nothing loaded is unchecked, nothing checked unused."""
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map

    configs = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
               "gemma3": transformers.Gemma3TextConfig}
    config = configs[arch](hidden_size=WIDTH, num_hidden_layers=BLOCKS, num_attention_heads=HEADS,
                           num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, intermediate_size=32, vocab_size=50)
    with torch.device("meta"):
        model = transformers.AutoModel.from_config(config)
    mapping = get_gguf_hf_weights_map(model, TENSOR_PROCESSORS.get(arch, TensorProcessor)())
    assert set(mapping) == set(layout_tensors(arch, BLOCKS))
    assert set(mapping.values()) == set(model.state_dict())


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_well_formed_file_loads_its_own_weights(arch, tmp_path) -> None:
    path = forge(tmp_path / f"{arch}.gguf", arch)
    info = read_gguf(str(path))
    assert (info.layers, info.heads, info.head_dim, info.layout.kv_heads) == (BLOCKS, HEADS, HEAD_DIM, KV_HEADS)
    ckpt = HFCheckpoint(info)
    assert len(ckpt.model.layers) == BLOCKS
    file_v = next(t for t in gguf.GGUFReader(str(path)).tensors if t.name == "blk.1.attn_v.weight")
    loaded = ckpt.model.layers[1].self_attn.v_proj.weight.detach().numpy()
    assert loaded.dtype == np.float64 and np.array_equal(loaded, np.asarray(file_v.data, dtype=np.float64))
    prov = ckpt.meta
    assert prov["gguf_tensor_count"] == len(tensors(arch)) and prov["gguf_blocks"] == BLOCKS
    assert prov["gguf_tensor_types"] == {"F32": len(tensors(arch))}
    assert f"the file's {len(tensors(arch))} tensors, checked against the {arch} layout (2 blocks)" in prov["weights"]


def test_a_load_parses_the_file_once_and_builds_one_tokenizer(tmp_path, monkeypatch) -> None:
    """transformers' GGUF loader opens the file for the configuration and for the tensors, the
    block loader once more, and each parse reads all the metadata (seconds for a large
    vocabulary): one parse serves the whole load, and the tokenizer is built once."""
    info = read_gguf(str(forge(tmp_path / "m.gguf")))
    parsed: list[str] = []

    class Counting(gguf.GGUFReader):
        def __init__(self, path, *args, **kwargs) -> None:
            parsed.append(Path(path).name)
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    ckpt = HFCheckpoint(info)
    assert parsed == ["m.gguf"] and gguf.GGUFReader is Counting
    assert ckpt.tokenizer() is ckpt.tokenizer() and parsed == ["m.gguf"] * 2


def test_one_parse_parses_again_a_changed_or_other_file(tmp_path) -> None:
    path, other = forge(tmp_path / "m.gguf"), forge(tmp_path / "other.gguf")
    plain = gguf.GGUFReader
    with one_parse(path):
        first = gguf.GGUFReader(str(path))
        assert gguf.GGUFReader(path) is first and gguf.GGUFReader(str(other)) is not first
        assert gguf.GGUFReader(str(path), "c") is not first
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1000))
        assert gguf.GGUFReader(str(path)) is not first
    assert gguf.GGUFReader is plain


def test_loading_info_is_a_second_check_after_loading(tmp_path, capfd) -> None:
    """A file that passed the check and then changed (here: another file under the checked
    metadata) is refused from the loader's loading info: missing weights are never random."""
    good = read_gguf(str(forge(tmp_path / "good.gguf")))
    swapped = forge(tmp_path / "swapped.gguf", drop=("blk.1.attn_k.weight",))
    with pytest.raises(InvalidInputError, match=r"the loaded model has 1 weight missing \(no tensor of the file fills it\) "
                                                r"after loading, e\.g\. layers\.1\.self_attn\.k_proj\.weight"):
        HFCheckpoint(dataclasses.replace(good, path=swapped))
    assert "LOAD REPORT" not in capfd.readouterr().err
    check_loading_info({"missing_keys": set(), "unexpected_keys": set(), "mismatched_keys": set(), "error_msgs": []}, "x")
    with pytest.raises(InvalidInputError, match="2 weights of the wrong shape"):
        check_loading_info({"mismatched_keys": {("a", (1,), (2,)), ("b", (1,), (2,))}}, "x")


def test_lm_head_is_checked_and_named_in_the_provenance(tmp_path) -> None:
    info = read_gguf(str(forge(tmp_path / "head.gguf", extra={"output.weight": (WIDTH, 259)})))
    assert info.layout.lm_head and "output.weight was checked but not loaded" in info.provenance()["weights"]
    with pytest.raises(InvalidInputError, match=r"tensor output\.weight has shape \[16, 7\]"):
        read_gguf(str(forge(tmp_path / "bad-head.gguf", extra={"output.weight": (WIDTH, 7)})))


def test_bad_special_token_and_tensor_type_are_refused(tmp_path) -> None:
    path = forge(tmp_path / "good.gguf")
    data = path.read_bytes()
    key = b"tokenizer.ggml.eos_token_id"
    at = data.index(key) + len(key) + 4  # then the UINT32 value
    bad = tmp_path / "eos.gguf"
    bad.write_bytes(data[:at] + (10_000).to_bytes(4, "little") + data[at + 4:])
    with pytest.raises(InvalidInputError, match="tokenizer.ggml.eos_token_id = 10000 is not a token of the vocabulary"):
        read_gguf(str(bad))
    name = b"blk.0.attn_norm.weight"
    at = data.index(name) + len(name) + 4 + 8  # n_dims (uint32), one dimension (uint64), then the type
    assert int.from_bytes(data[at:at + 4], "little") == int(gguf.GGMLQuantizationType.F32)
    bad.write_bytes(data[:at] + int(gguf.GGMLQuantizationType.I32).to_bytes(4, "little") + data[at + 4:])
    with pytest.raises(InvalidInputError, match=r"tensor type I32 cannot be dequantized"):
        read_gguf(str(bad))


@pytest.mark.parametrize("merges", [("a b c",), ("\u0120 zz",)])
def test_broken_tokenizer_in_the_file_is_refused_in_one_line(merges, tmp_path, capfd) -> None:
    path = forge(tmp_path / "tok.gguf", merges=merges)
    code, stdout, stderr = run_in_process(capfd, "panel", "--gguf", str(path), "--text", str(APACHE),
                                          "--widths", "16", "--layers", "0", "--heads", "0",
                                          "--out", str(tmp_path / "o.npz"))
    assert code == 2 and "internal error" not in stderr and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith(f"softrank panel: error: {path} has no tokenizer"), stderr
    assert not (tmp_path / "o.npz").exists()


def test_truncated_files_are_refused_in_one_line(tmp_path) -> None:
    data = forge(tmp_path / "good.gguf").read_bytes()
    for cut in (0, 3, 4, 23, 100, 2000, 4000, len(data) // 2, len(data) - 1):
        path = tmp_path / f"cut{cut}.gguf"
        path.write_bytes(data[:cut])
        with pytest.raises(InvalidInputError, match=f"--gguf {path}"):
            read_gguf(str(path))
