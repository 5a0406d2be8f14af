"""The FLOPs-model trace: 6 x parameters x tokens, labelled synthetic, bad knobs refused."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gradsched.errors import ConfigError
from gradsched.gpus import GPU_PEAK_FLOPS
from gradsched.llm_shapes import llm_shape
from gradsched.traces import ComputeTrace
from gradsched.traces.flops import FlopsSetting, attention_flops, flops_trace

pytest.importorskip("torch")


def test_dense_model_costs_six_flops_per_parameter_and_token_plus_attention() -> None:
    setting = FlopsSetting(micro_batch=2, seq_len=1024, gpu="h100", mfu=0.5,
                           checkpointing="none")
    trace = flops_trace("llama-2-70b", setting)
    frame, shape = trace.frame, llm_shape("llama-2-70b")
    tokens = 2 * 1024
    matrices = frame.loc[~frame["name"].str.contains("norm|embed"), "numel"].sum()
    expected = 6.0 * tokens * matrices + 3.0 * shape.layers * attention_flops(shape, setting)
    norms = frame.loc[frame["name"].str.contains("norm"), "numel"].sum()
    expected += 3.0 * tokens * norms
    seconds = frame["forward_s"].sum() + frame["backward_s"].sum()
    assert seconds == pytest.approx(expected / (GPU_PEAK_FLOPS["h100"] * 0.5), rel=1e-9)
    assert np.allclose(frame["backward_s"], 2 * frame["forward_s"])


def test_routed_experts_see_top_k_of_every_expert_s_tokens() -> None:
    frame = flops_trace("deepseek-v3", FlopsSetting(seq_len=512)).frame
    by_name = frame.set_index("name")["forward_s"]
    expert = by_name["model.layers.3.mlp.experts.0.up_proj.weight"]
    shared = by_name["model.layers.3.mlp.shared_experts.up_proj.weight"]
    assert expert == pytest.approx(shared * 8 / 256, rel=1e-12)


def test_trace_is_labelled_synthetic_and_gradients_ready_in_reverse() -> None:
    trace = flops_trace("gpt3-175b")
    assert trace.meta["synthetic"] is True and trace.meta["capture_method"] == "flops-model"
    assert "not a measurement" in trace.meta["notes"].lower()
    assert trace.frame["ready_order"].tolist() == list(range(len(trace.frame)))[::-1]
    assert (trace.frame["bytes"] == 2 * trace.frame["numel"]).all()
    tied_head = trace.frame.set_index("name").loc["transformer.ln_f.weight", "forward_s"]
    assert tied_head > trace.frame["forward_s"].median()  # the head's product runs there


@pytest.mark.parametrize(("knobs", "message"), [
    ({"mfu": 0.0}, "mfu must be in"), ({"gpu": "v100"}, "unknown GPU 'v100'"),
    ({"seq_len": 5000}, "sequence 1..4096"), ({"dtype": "fp8"}, "dtype must be")])
def test_bad_settings_are_refused(knobs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        flops_trace("llama-2-70b", FlopsSetting(**knobs))


def test_cli_writes_a_valid_trace(tmp_path: Path) -> None:
    out = tmp_path / "gpt3.csv"
    proc = subprocess.run([sys.executable, "-m", "gradsched", "traces", "flops", "--model",
                           "gpt3-175b", "--seq-len", "2048", "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "synthetic" in proc.stdout and "1156 tensors" in proc.stdout
    assert len(ComputeTrace.load(out).frame) == 1156


def _layer_forward(frame, index: int) -> float:
    rows = frame["name"].str.contains(f".layers.{index}.", regex=False)
    return float(frame.loc[rows, "forward_s"].sum())


def test_full_recomputation_adds_each_layer_s_forward_to_its_backward() -> None:
    """Korthikanti et al. 2022, Section 5: full recomputation reruns the layer's forward."""
    base = FlopsSetting(seq_len=1024, gpu="h100", checkpointing="none")
    none = flops_trace("llama-3.1-8b", base).frame
    full = flops_trace("llama-3.1-8b", FlopsSetting(**{**base.__dict__,
                                                         "checkpointing": "full"})).frame
    layer = full["name"].str.contains(".layers.", regex=False)
    assert np.allclose(full.loc[layer, "backward_s"], 3 * none.loc[layer, "forward_s"])
    assert np.allclose(full.loc[~layer, "backward_s"], none.loc[~layer, "backward_s"])
    extra = full["backward_s"].sum() - none["backward_s"].sum()
    assert extra == pytest.approx(sum(_layer_forward(none, i) for i in range(32)), rel=1e-12)


def test_selective_recomputation_adds_the_attention_core_only() -> None:
    shape = llm_shape("llama-3.1-8b")
    base = FlopsSetting(seq_len=2048, gpu="h100", checkpointing="none")
    sel = FlopsSetting(**{**base.__dict__, "checkpointing": "selective"})
    extra = (flops_trace(shape, sel).frame["backward_s"].sum()
             - flops_trace(shape, base).frame["backward_s"].sum())
    core = attention_flops(shape, replace(sel, seq_len=2048)) / (GPU_PEAK_FLOPS["h100"] * 0.4)
    assert extra == pytest.approx(32 * core, rel=1e-9)


def test_the_adam_step_is_priced_at_the_gpu_s_memory_bandwidth() -> None:
    """Fused Adam reads 16 and writes 12 bytes per fp32 parameter: bandwidth-bound."""
    from gradsched.gpus import GPUS

    for gpu in ("a100", "h100", "h200"):
        trace = flops_trace("llama-3.1-8b", FlopsSetting(seq_len=1024, gpu=gpu,
                                                         optimizer="adam"))
        frame = trace.frame
        assert (frame["update_s"] > 0).all()
        assert frame["update_s"].sum() == pytest.approx(
            28.0 * frame["numel"].sum() / GPUS[gpu].memory_Bps, rel=1e-12)
        assert trace.meta["update_s"] == pytest.approx(frame["update_s"].sum())
    assert ComputeTrace.from_frame(frame, trace.meta).update_total_s > 0
    assert flops_trace("llama-3.1-8b", FlopsSetting(seq_len=1024)).meta["update_s"] == 0


def test_activation_bytes_shrink_with_recomputation_and_reach_the_sidecar() -> None:
    sizes = {mode: flops_trace("llama-3.1-8b", FlopsSetting(seq_len=4096, checkpointing=mode))
             .meta["activation_bytes"] for mode in ("none", "selective", "full")}
    assert sizes["none"] > sizes["selective"] > sizes["full"] > 0


def test_an_unknown_checkpointing_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="checkpointing must be one of"):
        flops_trace("llama-2-70b", FlopsSetting(checkpointing="some"))
