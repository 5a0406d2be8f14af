"""What ``gradsched advise`` answers at LLM scale: one row per published shape
(LLaMA-2-70B, GPT-3-175B, DeepSeek-V3; :mod:`gradsched.workloads.llm`), from the JSON of
``advise --json`` (DDP: torch's default buckets, the best uniform cap, the per-bucket caps,
the gradsched plan) and of ``advise --sharded --json`` (FSDP2's per-block default and the
optimum of grouping, resharding and prefetch under the GPU's memory).

Nothing here is a measurement: the compute is the FLOPs model of
:mod:`gradsched.traces.flops` and the communication the two-level NCCL model
(:mod:`gradsched.costmodel.nccl`) calibrated on a measured sweep, priced far beyond the
message sizes and world sizes it measured. The table says so in its last two columns: the
comm model's measured extrapolation error, the band every time in the row carries (the
advice's margin: the worst error of the model's leave-world-sizes-out validation, or
"unknown" where it was never validated), and the largest share of a candidate's
communication priced outside the measured sizes. It shows that every command answers, and
what it answers, not how fast any real job runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.errors import InputError
from gradsched.gpus import GPU_MEMORY_BYTES, GPU_PEAK_FLOPS
from gradsched.io import read_json
from gradsched.report.formatting import fmt
from gradsched.report.latex import number
from gradsched.traces.flops import FlopsSetting

GIB = 2.0**30
COLUMNS = ("model", "tensors", "world size", "DDP default [s]", "tuned DDP [s]",
           "gradsched plan [s]", "DDP advice", "FSDP2 default [s]", "FSDP2 optimum [s]",
           "FSDP2 advice", "comm model error [%]", "outside measured sizes [%]")
DDP_ADVICE = {"keep-current": "keep default", "ddp-bucket-cap-mb": "uniform cap",
              "ddp-bucket-cap-mb-list": "per-bucket caps", "gradsched-plan": "gradsched plan"}
TITLE = ("llm-scale: NOT MEASUREMENTS: compute modelled, {device}; communication "
         "extrapolated far beyond its measured sizes and world sizes")
"""The table's title (its Markdown heading and LaTeX comment), with the modelled GPU."""
SHARDED_ADVICE = {"keep-fsdp2-default": "keep default", "optimum": "optimum",
                  "none-fits": "none fits"}


def _field(data: Mapping[str, Any], dotted: str, path: str | Path) -> Any:
    value: Any = data
    for key in dotted.split("."):
        if not isinstance(value, Mapping) or key not in value:
            raise InputError(f"missing '{dotted}'", path=path, field=dotted)
        value = value[key]
    return value


def load_advice(path: str | Path) -> dict[str, Any]:
    """One ``advise --json`` or ``advise --sharded --json`` file, as a mapping."""
    data = read_json(path, missing="advice JSON not found")
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path, field="(top level)")
    return data


def ddp_cells(data: Mapping[str, Any], path: str | Path) -> list[str]:
    """Tensors, world size, the three DDP times, the plan's time and the advice."""
    best = _field(data, "ddp.best", path)
    plan = _field(data, "plan", path)
    advice = str(_field(data, "recommendation", path))
    winner = plan.get("winner") or plan.get("algorithm", "")
    memory = data.get("memory")
    if advice == "does-not-fit" and isinstance(memory, Mapping):
        advice = (f"does not fit ({fmt(float(memory['needed_bytes']) / GIB, 0)} > "
                  f"{fmt(float(memory['gpu_bytes']) / GIB, 0)} GiB)")
    return [str(_field(data, "plan.plan.info.n_tensors", path)),
            str(_field(data, "world_size", path)),
            fmt(_field(data, "ddp.current.iteration_s", path), 2),
            f"{fmt(best['iteration_s'], 2)} ({fmt(best['bucket_cap_mb'], 0)} MiB)",
            f"{fmt(plan['iteration_s'], 2)} ({winner})",
            DDP_ADVICE.get(advice, advice)]


def sharded_cells(data: Mapping[str, Any], path: str | Path) -> list[str]:
    """FSDP2's default, the optimum (or the smallest peak when none fits) and the advice."""
    sharded = _field(data, "sharded", path)
    advice = str(_field(sharded, "recommendation", path))
    default = fmt(_field(sharded, "default.replay.iteration_s", path), 2)
    if advice == "none-fits":
        peak = float(_field(sharded, "smallest_peak_bytes", path))
        cap = float(_field(sharded, "memory_cap_bytes", path))
        return [default, f"none fits ({fmt(peak / GIB, 0)} > {fmt(cap / GIB, 0)} GiB)",
                SHARDED_ADVICE[advice]]
    optimum = _field(sharded, "optimum", path)
    info = optimum["plan"].get("info", {})
    how = "exact" if info.get("exact", True) else f"gap {fmt(info.get('gap_to_bound_pct'), 1)} %"
    units = len(optimum["plan"]["units"])
    return [default, f"{fmt(optimum['replay']['iteration_s'], 2)} ({units} units, {how})",
            SHARDED_ADVICE.get(advice, advice)]


def error_band(data: Mapping[str, Any], path: str | Path) -> str:
    """The band every time of the row carries: the advice's margin where it comes from the
    comm model's measured extrapolation error (``band_known``), else ``unknown``."""
    if not data.get("band_known", True):
        return "unknown"
    return f"± {fmt(_field(data, 'margin_pct', path), 1)}"


def outside_share_pct(data: Mapping[str, Any]) -> float:
    """The largest share of a candidate's communication priced outside the measured sizes,
    read from the advice's domain notes (percent)."""
    shares = [float(note.split("domain: ", 1)[1].split(": ", 1)[1].split(" %", 1)[0])
              for note in data.get("notes", [])
              if isinstance(note, str) and note.startswith("domain: ") and " % of the " in note]
    return max(shares, default=0.0)


def llm_scale_table(names: Sequence[str], ddp: Sequence[str | Path],
                    sharded: Sequence[str | Path]) -> tuple[pd.DataFrame, str]:
    """One row per model (``names``, with its DDP and sharded advice files in order)."""
    if not len(names) == len(ddp) == len(sharded):
        raise InputError(f"{len(names)} models, {len(ddp)} DDP and {len(sharded)} sharded "
                         "advice files: one of each per model", field="--model")
    rows = []
    for name, ddp_path, sharded_path in zip(names, ddp, sharded, strict=True):
        advice = load_advice(ddp_path)
        rows.append([name, *ddp_cells(advice, ddp_path),
                     *sharded_cells(load_advice(sharded_path), sharded_path),
                     error_band(advice, ddp_path), fmt(outside_share_pct(advice), 1)])
    return pd.DataFrame(rows, columns=list(COLUMNS)), "lrrrrrlrrlrr"


def llm_scale_title(ddp: Sequence[str | Path]) -> str:
    """:data:`TITLE` with the modelled GPUs the advice files name (their ``device``)."""
    devices = sorted({str(load_advice(p).get("device") or "device not recorded") for p in ddp})
    return TITLE.format(device="; ".join(devices))


def llm_setting_macros() -> dict[str, str]:
    """The assumed setting of the table's compute, for the prose: the utilisation and GPU of
    :class:`gradsched.traces.flops.FlopsSetting`'s defaults, which the pipeline's
    ``traces flops`` rule uses (``workflow/rules/advise.smk``: no ``--gpu``/``--mfu``), its
    dense bf16 peak and its memory (:mod:`gradsched.gpus`)."""
    setting = FlopsSetting()
    return {"LlmMfuPct": number(100.0 * setting.mfu, 0),
            "LlmGpu": setting.gpu.upper(),
            "LlmGpuPeakTflops": number(GPU_PEAK_FLOPS[setting.gpu] / 1e12, 0),
            "LlmGpuMemoryGiB": number(GPU_MEMORY_BYTES[setting.gpu] / GIB, 0)}
