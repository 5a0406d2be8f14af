"""A compute trace from a FLOPs model, for architectures no machine here can run: one row
per parameter tensor of the published shape (:func:`gradsched.llm_shapes.parameter_list`,
the meta-device model's parameters, listed without torch), its forward
and backward seconds priced as FLOPs over a stated fraction of the GPU's peak. Never a
measurement: the sidecar says ``capture_method: flops-model`` and ``synthetic: true``.

**FLOPs per tensor** (one micro-batch of ``b`` samples of ``s`` tokens on one rank,
``T = b s``):

* a matrix ``W`` of a linear layer: forward ``2 T |W|``, backward ``4 T |W|`` (the input's
  and the weight's gradient; Kaplan et al. 2020, Section 2.1; Narayanan et al. 2021, eq. 2).
  A routed expert sees ``T k / E`` tokens (``k`` of ``E`` experts per token, routing assumed
  balanced, as the auxiliary loss of the model's report aims for).
* the attention scores and the weighted sum of a layer: forward ``2 T s (d_qk + d_v) H / 2``
  (``H`` heads of dims ``d_qk`` and ``d_v``; causal, so half the square), priced at the
  layer's output projection; backward twice that.
* a norm's weight or a bias (elementwise): forward ``T |p|``, backward ``2 T |p|``.
* an embedding table: a lookup, no FLOPs. A head tied to the embedding (GPT) is priced at
  the final norm, where its matrix product runs, forward ``2 T V d``, backward twice that.

**Seconds** = FLOPs / (``peak_flops`` x ``mfu``). Peaks are the vendors' dense bf16
figures (:data:`gradsched.gpus.GPU_PEAK_FLOPS`); 40 % model-FLOPs utilisation is
the order reported for large dense training (Chowdhery et al. 2022, PaLM, Table 3: 46.2 %;
Narayanan et al. 2021: 52 % of peak at 1T parameters), and is a knob, not a fact about any
one job.

**Recomputation** (``checkpointing``; Korthikanti et al. 2022, Section 5): ``full`` runs
each decoder layer's forward again in its backward (the layer's forward seconds added to its
backward), ``selective`` only the attention core (the scores and weighted sum, priced at the
output projection), ``none`` nothing. The activation bytes of each mode
(:mod:`gradsched.traces.activations`) go into the sidecar: ``activation_bytes`` (stored, plus
the one layer rebuilt during its backward) is what the sharded memory budget counts
(:func:`gradsched.experiments.sharded.memory.memory_budget`).

**The optimizer step** (``update_s``): Adam as PyTorch's fused kernel runs it
(``aten/src/ATen/native/cuda/fused_adam_utils.cuh``, ``FusedAdamMathFunctor``: depth 4, it
reads the parameter, its gradient, ``exp_avg`` and ``exp_avg_sq`` and writes back the
parameter and both moments), all fp32 under FSDP2's mixed precision (the sharded parameter
stays fp32, the gradient is reduced to fp32): 16 bytes read and 12 written per parameter,
28 bytes, bound by memory bandwidth (a few FLOPs per byte): ``update_s = 28 x numel /
memory_Bps`` of the GPU (:data:`gradsched.gpus.GPUS`), the whole tensor's step; a sharded
replay divides it by the ranks (:mod:`gradsched.replay.engine`).

Rows are in forward (registration) order; gradients become ready in the reverse order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import ConfigError
from gradsched.gpus import GPU_PEAK_FLOPS, GPUS
from gradsched.limits import MAX_SECONDS
from gradsched.llm_shapes import LlmShape, llm_shape, parameter_list
from gradsched.traces.activations import CHECKPOINTING, activation_memory
from gradsched.traces.bundle import ComputeTrace

DTYPE_BYTES = {"bf16": 2, "fp32": 4}
CAPTURE_METHOD = "flops-model"
ADAM_BYTES_PER_PARAMETER = 28.0
"""Fused Adam's traffic per parameter: reads 4 fp32 tensors (16 bytes), writes 3 (12 bytes)
(module docstring)."""


@dataclass(frozen=True)
class FlopsSetting:
    """The job a trace is priced for: per-rank micro-batch, sequence, GPU and utilisation."""

    micro_batch: int = 1
    seq_len: int | None = None  # None: the shape's context length
    gpu: str = "a100"
    mfu: float = 0.4
    dtype: str = "bf16"
    checkpointing: str = "none"
    """none | selective | full (Korthikanti et al. 2022). ``traces flops`` defaults to full;
    the at-scale study prices its points' recomputation itself
    (:func:`gradsched.experiments.at_scale.predict.base_trace`)."""
    optimizer: str = "none"
    """adam | none: the fused-Adam step in ``update_s`` (module docstring). ``traces flops``
    prices it; the library default keeps the at-scale study's calibration, which fits its
    utilisation to published steps with the step's compute only."""

    def check(self, shape: LlmShape) -> None:
        if self.gpu not in GPU_PEAK_FLOPS:
            raise ConfigError(f"unknown GPU {self.gpu!r}; use one of: "
                              f"{', '.join(sorted(GPU_PEAK_FLOPS))}")
        if not 0 < self.mfu <= 1:
            raise ConfigError(f"mfu must be in (0, 1], got {self.mfu}")
        if self.optimizer not in ("adam", "none"):
            raise ConfigError(f"optimizer must be adam or none, not {self.optimizer!r}")
        if self.checkpointing not in CHECKPOINTING:
            raise ConfigError(f"checkpointing must be one of {', '.join(CHECKPOINTING)}, not "
                              f"{self.checkpointing!r}")
        if self.dtype not in DTYPE_BYTES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPE_BYTES)}, not {self.dtype!r}")
        if self.micro_batch < 1 or not 1 <= self.seq_len <= shape.max_positions:
            raise ConfigError(f"micro-batch must be >= 1 and the sequence 1..{shape.max_positions} "
                              f"tokens for {shape.name}, got {self.micro_batch} x {self.seq_len}")


def forward_flops(name: str, numel: int, shape: LlmShape, setting: FlopsSetting) -> float:
    """Forward FLOPs of the operation that uses parameter ``name`` (module docstring)."""
    tokens = float(setting.micro_batch * setting.seq_len)
    leaf = name.rsplit(".", 2)
    module, kind = leaf[-2], leaf[-1]
    if module in ("embed_tokens", "wte", "wpe"):
        return 0.0
    flops = tokens * numel if (kind == "bias" or "norm" in module or module.startswith("ln")) \
        else 2.0 * tokens * numel * expert_share(name, shape)
    if module == "ln_f" and kind == "weight":  # the tied head runs right after the final norm
        flops += 2.0 * tokens * shape.vocab * shape.hidden
    if is_attention_output(name):
        flops += attention_flops(shape, setting)
    return flops


def is_attention_output(name: str) -> bool:
    """Whether ``name`` is an attention block's output projection weight (where the scores
    and weighted sum are priced)."""
    module, kind = name.rsplit(".", 2)[-2:]
    return kind == "weight" and ".mlp." not in name and (
        module in ("o_proj", "c_proj") or (module == "dense" and ".attention." in name))


def recompute_flops(name: str, numel: int, shape: LlmShape, setting: FlopsSetting) -> float:
    """The forward FLOPs run again in the backward (module docstring): the whole decoder
    layer's (``full``), its attention core (``selective``), none (``none``)."""
    in_layer = any(f".{block}." in name for block in ("layers", "h"))
    if setting.checkpointing == "full" and in_layer:
        return forward_flops(name, numel, shape, setting)
    if setting.checkpointing == "selective" and is_attention_output(name):
        return attention_flops(shape, setting)
    return 0.0


def expert_share(name: str, shape: LlmShape) -> float:
    """The share of the tokens a routed expert's matrices see (balanced routing)."""
    if shape.moe is None or ".experts." not in name:
        return 1.0
    return shape.moe.top_k / shape.moe.routed_experts


def attention_flops(shape: LlmShape, setting: FlopsSetting) -> float:
    """Scores and weighted sum of one layer, causal (module docstring)."""
    tokens = float(setting.micro_batch * setting.seq_len)
    if shape.latent is not None:
        qk = shape.latent.nope_head_dim + shape.latent.rope_head_dim
        v = shape.latent.v_head_dim
    else:
        qk = v = shape.head_dim
    return 2.0 * tokens * setting.seq_len * (qk + v) * shape.heads / 2.0


def flops_trace(name: str | LlmShape, setting: FlopsSetting | None = None) -> ComputeTrace:
    """The compute trace of LLM shape ``name`` (a key of
    :data:`gradsched.llm_shapes.LLM_SHAPES`, or an :class:`LlmShape` built from a
    published table's dimensions) under ``setting`` (module docstring)."""
    shape = name if isinstance(name, LlmShape) else llm_shape(name)
    setting = setting or FlopsSetting()
    if setting.seq_len is None:
        setting = replace(setting, seq_len=shape.default_seq_len)
    setting.check(shape)
    params = parameter_list(shape)
    rate = GPU_PEAK_FLOPS[setting.gpu] * setting.mfu
    fwd = np.asarray([forward_flops(n, k, shape, setting) for n, k in params]) / rate
    again = np.asarray([recompute_flops(n, k, shape, setting) for n, k in params]) / rate
    check_step_time(shape, setting, 3.0 * float(fwd.sum()) + float(again.sum()))
    owners = [n.rsplit(".", 1)[0] for n, _ in params]
    layer = pd.Series(owners).ne(pd.Series(owners).shift()).cumsum().to_numpy() - 1
    numel = np.asarray([k for _, k in params], dtype=np.int64)
    frame = pd.DataFrame({
        "name": [n for n, _ in params], "layer": layer, "numel": numel,
        "bytes": numel * DTYPE_BYTES[setting.dtype], "forward_s": fwd,
        "backward_s": 2.0 * fwd + again,
        "update_s": (ADAM_BYTES_PER_PARAMETER * numel / GPUS[setting.gpu].memory_Bps
                     if setting.optimizer == "adam" else np.zeros(len(params))),
        "ready_order": np.arange(len(params))[::-1]})
    meta = trace_meta(shape, setting, len(params), int(numel.sum()), float(fwd.sum()))
    meta["forward_backward_s"] = float(3.0 * fwd.sum() + again.sum())
    meta["recompute_s"] = float(again.sum())
    meta["update_s"] = float(frame["update_s"].sum())
    meta.update(activation_meta(shape, setting))
    return ComputeTrace.from_frame(frame, meta)


def activation_meta(shape: LlmShape, setting: FlopsSetting) -> dict[str, Any]:
    """The sidecar's activation fields (:mod:`gradsched.traces.activations`)."""
    act = activation_memory(shape, setting.micro_batch, setting.seq_len,
                            DTYPE_BYTES[setting.dtype], setting.checkpointing)
    return {"checkpointing": setting.checkpointing,
            "activation_bytes": act.peak_bytes,
            "activation_stored_bytes": act.stored_bytes,
            "activation_recompute_peak_bytes": act.recompute_peak_bytes,
            "activation_source": "modelled: Korthikanti et al. 2022, Section 4 "
                                 "(gradsched.traces.activations)"}


def check_step_time(shape: LlmShape, setting: FlopsSetting, step_s: float) -> None:
    """Refuse settings whose micro-batch (forward and backward, 3x the forward FLOPs) is
    priced beyond :data:`~gradsched.limits.MAX_SECONDS`, naming the options that set it
    (``gradsched traces flops``), not a derived cell of the trace."""
    if not math.isfinite(step_s) or step_s > MAX_SECONDS:
        raise ConfigError(
            f"--micro-batch {setting.micro_batch} x --seq-len {setting.seq_len} tokens of "
            f"{shape.name} at --mfu {setting.mfu:g} of --gpu {setting.gpu}'s peak: one "
            f"micro-batch's forward and backward would take {step_s:.3g} s, beyond the "
            f"physical range (at most {MAX_SECONDS:g} s); lower --micro-batch or --seq-len, "
            "or raise --mfu")


def trace_meta(shape: LlmShape, setting: FlopsSetting, tensors: int, params: int,
               forward_s: float) -> dict[str, Any]:
    """The sidecar: what was modelled, from which published shape, with which knobs."""
    return {
        "kind": "compute", "model": shape.name, "batch_size": setting.micro_batch,
        "device": f"{setting.gpu} (modelled: {setting.mfu:.0%} of "
                  f"{GPU_PEAK_FLOPS[setting.gpu] / 1e12:g} TFLOP/s bf16 dense)",
        "dtype": setting.dtype, "world_size": 1, "software": {},
        "capture_method": CAPTURE_METHOD, "iterations": None, "date": "not measured",
        "source": f"synthetic: FLOPs model (gradsched.traces.flops) of the published shape "
                  f"({shape.source})",
        "synthetic": True, "seq_len": setting.seq_len, "mfu": setting.mfu,
        "peak_flops": GPU_PEAK_FLOPS[setting.gpu], "tensors": tensors, "parameters": params,
        "published_parameters": shape.published_params,
        "forward_backward_s": 3.0 * forward_s,
        "notes": "Not a measurement: forward 2 x tokens x parameters FLOPs per matrix, "
                 "backward twice that plus the recomputed forward, at the stated utilisation "
                 "of the GPU's peak; Adam's step at the GPU's memory bandwidth. "
                 "Compare plans with it, not absolute times.",
    }
