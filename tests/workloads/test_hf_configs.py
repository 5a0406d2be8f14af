"""Decoders from their Hugging Face ``config.json``: the committed public configurations
count the parameters their model cards publish (within 0.5 %), the same as transformers'
own classes built on the meta device; a user's config.json goes through the same route."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gradsched.errors import ConfigError
from gradsched.llm_shapes import (
    HF_CONFIG_DIR,
    LLM_SHAPES,
    hf_config_shape,
    parameter_list,
    shape_from_config,
)

CARDS = json.loads((HF_CONFIG_DIR / "cards.json").read_text())
ASKED = ("llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mixtral-8x7b", "qwen2.5-72b",
         "gpt-neox-20b")
"""The configurations the project must build (with DeepSeek-V3 and GPT-3 beside them)."""

WITHIN_CARD = (*ASKED, "deepseek-v3", "gpt3-175b")
"""Llama 2 70B is left out: its paper's "70B" is a rounded name, 1.46 % over the
68,976,648,192 parameters of its configuration (``tests/workloads/test_llm.py``)."""


def _count(name: str) -> int:
    return sum(n for _, n in parameter_list(name))


def test_every_committed_config_is_a_shape_with_its_card() -> None:
    assert set(ASKED) <= set(LLM_SHAPES)
    assert set(CARDS) == {p.parent.name for p in HF_CONFIG_DIR.glob("*/config.json")}
    for name, card in CARDS.items():
        assert card["licence"] and card["card"] and card["train_seq_len"] > 0, name


@pytest.mark.parametrize("name", WITHIN_CARD)
def test_parameter_counts_match_the_model_cards(name: str) -> None:
    assert _count(name) == pytest.approx(CARDS[name]["published_params"], rel=0.005)


def test_transformers_builds_the_same_counts_on_the_meta_device() -> None:
    """``AutoModelForCausalLM.from_config`` of each configuration, on the meta device (no
    memory, no weights): the counts of the torch-free parameter lists are exact."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    for name in CARDS:
        config = json.loads((HF_CONFIG_DIR / name / "config.json").read_text())
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(
                transformers.AutoConfig.for_model(**config))
        assert sum(p.numel() for p in model.parameters()) == _count(name), name


def test_moe_and_bias_layouts_follow_the_config() -> None:
    mixtral, qwen = LLM_SHAPES["mixtral-8x7b"], LLM_SHAPES["qwen2.5-72b"]
    assert (mixtral.moe.routed_experts, mixtral.moe.top_k, mixtral.moe.expert_ffn) \
        == (8, 2, 14336)
    names = dict(parameter_list(qwen))
    assert names["model.layers.0.self_attn.k_proj.bias"] == 8 * 128
    assert "model.layers.0.self_attn.o_proj.bias" not in names
    experts = [n for n, _ in parameter_list(mixtral) if ".block_sparse_moe.experts." in n]
    assert len(experts) == 32 * 8 * 3


def _tiny_llama(tmp_path: Path, **changes: object) -> Path:
    config = json.loads((HF_CONFIG_DIR / "llama-3.1-8b" / "config.json").read_text())
    config.update({"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                   "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
                   "max_position_embeddings": 512, **changes})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_a_user_config_is_read_by_path(tmp_path: Path) -> None:
    shape = hf_config_shape(str(_tiny_llama(tmp_path)))
    assert (shape.layers, shape.hidden, shape.kv_heads, shape.default_seq_len) == (2, 256, 2, 512)
    assert hf_config_shape(str(tmp_path)) == shape  # a folder holding config.json


@pytest.mark.parametrize(("changes", "message"), [
    ({"model_type": "t5"}, "model_type 't5' is not supported"),
    ({"num_key_value_heads": 3}, "not a multiple of num_key_value_heads 3"),
    ({"hidden_size": "big"}, "hidden_size must be a non-negative integer")])
def test_bad_configs_are_refused_by_field(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        hf_config_shape(str(_tiny_llama(tmp_path, **changes)))
    with pytest.raises(ConfigError, match="has no num_hidden_layers"):
        shape_from_config({"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2,
                           "max_position_embeddings": 16},
                          "x")


def test_cli_builds_a_trace_from_a_config(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    proc = subprocess.run([sys.executable, "-m", "gradsched", "traces", "flops", "--hf-config",
                           str(_tiny_llama(tmp_path)), "--checkpointing", "selective",
                           "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "selective recomputation" in proc.stdout and out.exists()
    bad = subprocess.run([sys.executable, "-m", "gradsched", "traces", "flops", "--hf-config",
                          str(tmp_path / "missing.json"), "-o", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "neither a committed configuration" in bad.stderr


@pytest.mark.parametrize("name", sorted(CARDS))
def test_every_committed_config_builds_a_flops_trace(name: str) -> None:
    from gradsched.traces.flops import FlopsSetting, flops_trace

    trace = flops_trace(name, FlopsSetting(seq_len=1024, gpu="h100", optimizer="adam",
                                           checkpointing="selective"))
    assert trace.meta["parameters"] == _count(name)
    assert trace.meta["update_s"] > 0 and trace.meta["activation_bytes"] > 0
    assert trace.meta["published_parameters"] == CARDS[name]["published_params"]
