"""The LLM shapes match their published sizes; parameters come in forward order."""

from __future__ import annotations

import pytest

from gradsched.errors import ConfigError
from gradsched.llm_shapes import LLM_SHAPES, llm_shape, parameter_list
from gradsched.traces.layers import block_ranges, layer_seq
from gradsched.workloads.llm import build_meta_model

pytest.importorskip("torch")

PUBLISHED = {  # name: (parameters in the model card / paper, tensors, decoder layers)
    "llama-2-70b": (68.98e9, 723, 80),  # the model card's 68,976,648,192
    "gpt3-175b": (174.6e9, 1156, 96),  # Brown et al. 2020, Table 2.1: 175.0B (rounded)
    "deepseek-v3": (671e9, 45337, 61),  # DeepSeek-V3 report: 671B without the MTP module
}


@pytest.fixture(scope="module")
def models() -> dict[str, list[tuple[str, int]]]:
    return {name: [(n, int(p.numel())) for n, p in build_meta_model(name).named_parameters()]
            for name in LLM_SHAPES}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_sizes_match_the_published_ones(models: dict, name: str) -> None:
    params, tensors, _ = PUBLISHED[name]
    assert len(models[name]) == tensors
    assert sum(k for _, k in models[name]) == pytest.approx(params, rel=0.002)


def test_the_moe_shape_keeps_experts_as_separate_tensors(models: dict) -> None:
    experts = [n for n, _ in models["deepseek-v3"] if ".mlp.experts." in n]
    assert len(experts) == 58 * 256 * 3 and len(models["deepseek-v3"]) >= 40_000
    assert {k for n, k in models["deepseek-v3"] if n.endswith("experts.0.up_proj.weight")} \
        == {7168 * 2048}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_come_in_forward_order(models: dict, name: str) -> None:
    names = [n for n, _ in models[name]]
    assert "embed_tokens" in names[0] or "wte" in names[0]
    layer_of = [int(n.split(".")[2]) for n in names if ".layers." in n or ".h." in n]
    assert layer_of == sorted(layer_of) and layer_of[-1] == PUBLISHED[name][2] - 1
    attention = [n for n in names if ".0.self_attn." in n or ".0.attn." in n]
    assert names.index(attention[0]) < names.index(next(n for n in names if ".0.mlp." in n))


def test_unknown_shape_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown LLM shape 'llama-3'.*deepseek-v3"):
        llm_shape("llama-3")


def test_blocks_are_the_decoder_layers(models: dict) -> None:
    from gradsched.traces.flops import flops_trace

    trace = flops_trace("gpt3-175b")
    assert len(block_ranges(layer_seq(trace))) == 96


@pytest.mark.parametrize("name", sorted(LLM_SHAPES))
def test_the_torch_free_parameter_list_is_the_meta_models(models: dict, name: str) -> None:
    """What the FLOPs traces are built from without torch is exactly the model's
    ``named_parameters()``: names, order and sizes."""
    listed = parameter_list(name)
    assert listed == models[name]  # the fixture lists the meta model's named_parameters()
