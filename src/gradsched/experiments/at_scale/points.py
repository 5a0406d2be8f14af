"""Published throughput points of pure FSDP training (``data/external/at-scale/points.csv``,
its README gives the sources and the columns): loaded, checked row by row, grouped.

A **point** is one published measurement: a dense decoder of stated dimensions trained with
fully sharded data parallelism on ``gpus`` GPUs, ``micro_batch`` sequences of ``seq_len``
tokens per GPU per micro-batch, ``grad_accum`` micro-batches per optimizer step, and its
published throughput per GPU or step time. A **group** is the points of one configuration
at different GPU counts (same model, sequence, micro-batch, GPU, precision, sharding,
activation checkpointing). The published step time is ``step_s`` when the source publishes it, else
``micro_batch x grad_accum x seq_len / tokens_per_s_per_gpu`` (the tokens one GPU
processes per step over its rate). Two columns say how the run's framework reduced
gradients (:data:`REDUCE_DTYPES`, :data:`GRAD_SYNCS`): in which element type, and after
every micro-batch or only the last.

Every row is checked before anything is computed: a bad value raises
:class:`~gradsched.errors.InputError` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gradsched.errors import InputError
from gradsched.gpus import GPU_PEAK_FLOPS
from gradsched.io import read_text
from gradsched.llm_shapes import LlmShape, parameter_list

COLUMNS = ("source", "group", "model", "layout", "n_layers", "d_model", "n_heads",
           "n_kv_heads", "ffn", "vocab", "positions", "params_published", "seq_len",
           "micro_batch", "grad_accum", "global_batch", "gpus", "gpu", "gpu_memory_gb",
           "interconnect", "precision", "sharding", "activation_checkpointing",
           "reduce_dtype", "grad_sync", "tokens_per_s_per_gpu",
           "step_s", "notes")
LAYOUTS = ("gpt", "llama")
PRECISIONS = ("bf16", "fp8", "fp16", "fp32")
CHECKPOINTING = ("none", "selective", "full", "not stated")
SHARDINGS = ("full_shard", "shard_grad_op")
"""``full_shard``: parameters resharded after forward and gathered again in backward
(FSDP ``FULL_SHARD``, ZeRO-3, FSDP2's default); ``shard_grad_op``: kept gathered from forward
to backward (FSDP ``SHARD_GRAD_OP``, ZeRO-2; FSDP2 ``reshard_after_forward=False``)."""
REDUCE_DTYPES = {"bf16": 2, "fp32": 4, "not stated": 2}
"""Bytes per gradient element of the reduce-scatter, by the ``reduce_dtype`` the source's
framework uses by default: ``fp32`` where its mixed-precision policy reduces in float32
(Composer's ``DEFAULT`` from v0.16.4, ``composer/trainer/mosaic_fsdp_utils.py``
``get_mixed_precision``, commit d745fcb "patch default", 2023-10-10; torchtitan's
``--training.mixed_precision_reduce`` default ``float32``, ``torchtitan/config_manager.py``
L389-392 at 9dec370; KempnerForge's ``default_mp_policy``, ``kempnerforge/distributed/
parallel.py`` L67-71 at 9f3f03a), ``bf16`` where it reduces in the parameters' dtype
(Composer ``PURE``); ``not stated`` is priced as bf16 (the trace's bytes)."""
GRAD_SYNCS = ("every_micro_batch", "last_micro_batch")
"""When gradients are reduce-scattered under gradient accumulation: ``every_micro_batch``
(Composer with FSDP1: ``ddp_sync_context`` only enters ``no_sync`` for a
``DistributedDataParallel`` model and yields at once otherwise,
``composer/trainer/dist_strategy.py`` L61-75 at v0.17.2, so FSDP reduce-scatters after
every micro-batch's backward) or ``last_micro_batch`` (FSDP2's
``set_requires_gradient_sync(False)`` on the silent micro-batches, as the sharded replay
models; KempnerForge ``kempnerforge/training/grad.py`` L36 at 9f3f03a)."""
PARAMS_RTOL = 0.005
"""Largest relative gap between the shape's parameter count and ``params_published``."""
GROUP_KEYS = ("model", "layout", "n_layers", "d_model", "n_heads", "n_kv_heads", "ffn", "vocab",
              "positions", "seq_len", "micro_batch", "gpu", "precision", "sharding",
              "activation_checkpointing", "reduce_dtype", "grad_sync")
"""What every point of a group shares (the GPU count, accumulation and batch may differ)."""


@dataclass(frozen=True)
class Point:
    """One published point (see the module docstring); ``row`` is its 1-based data row of
    the CSV ``path``."""

    source: str
    group: str
    shape: LlmShape
    seq_len: int
    micro_batch: int
    grad_accum: int
    gpus: int
    gpu: str
    precision: str
    sharding: str
    activation_checkpointing: str
    published_step_s: float
    row: int
    path: str = "<memory>"
    reduce_dtype: str = "bf16"
    grad_sync: str = "last_micro_batch"

    @property
    def tokens_per_gpu_step(self) -> int:
        """Tokens one GPU processes per optimizer step."""
        return self.micro_batch * self.grad_accum * self.seq_len


def _int(raw: dict[str, str], field: str, where: dict, low: int = 1) -> int:
    text = (raw.get(field) or "").strip()
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"expected an integer, got {text!r}", field=field, **where) from None
    if value < low:
        raise InputError(f"must be >= {low}, got {value}", field=field, **where)
    return value


def _positive(text: str, field: str, where: dict) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"expected a number, got {text!r}", field=field, **where) from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"must be a positive number, got {text!r}", field=field, **where)
    return value


def _choice(raw: dict[str, str], field: str, options: Sequence[str], where: dict) -> str:
    value = (raw.get(field) or "").strip()
    if value not in options:
        raise InputError(f"expected one of {', '.join(options)}, got {value!r}", field=field,
                         **where)
    return value


def _shape(raw: dict[str, str], where: dict) -> LlmShape:
    layout = _choice(raw, "layout", LAYOUTS, where)
    dims = {f: _int(raw, f, where) for f in ("n_layers", "d_model", "n_heads", "n_kv_heads",
                                               "ffn", "vocab", "seq_len")}
    positions = _int(raw, "positions", where, low=0)
    if dims["d_model"] % dims["n_heads"] or dims["n_heads"] % dims["n_kv_heads"]:
        raise InputError(f"d_model {dims['d_model']}, n_heads {dims['n_heads']} and "
                         f"n_kv_heads {dims['n_kv_heads']} must divide each other",
                         field="n_heads", **where)
    if layout == "gpt" and positions < dims["seq_len"]:
        raise InputError(f"a gpt layout has learned positions: positions ({positions}) must be "
                         f">= seq_len ({dims['seq_len']})", field="positions", **where)
    if layout == "llama" and positions != 0:
        raise InputError("a llama layout has rotary positions: positions must be 0",
                         field="positions", **where)
    shape = LlmShape(
        name=raw["model"].strip(), kind=layout, layers=dims["n_layers"], hidden=dims["d_model"],
        ffn=dims["ffn"], heads=dims["n_heads"], kv_heads=dims["n_kv_heads"],
        vocab=dims["vocab"], max_positions=positions or dims["seq_len"],
        published_params=0.0, source=f"{where['path']} row {where['row']}")
    count = sum(n for _, n in parameter_list(shape))
    published = (raw.get("params_published") or "").strip()
    if published:
        target = _positive(published, "params_published", where)
        if abs(count - target) > PARAMS_RTOL * target:
            raise InputError(f"the {layout} shape has {count} parameters, {count / target - 1:+.2%}"
                             f" from the published {published}", field="params_published",
                             **where)
    return replace(shape, published_params=float(published or count))


def _point(raw: dict[str, str], where: dict) -> Point:
    for field in COLUMNS:
        if raw.get(field) is None:
            raise InputError("missing value (too few fields in the row)", field=field, **where)
    for field in ("source", "group", "model"):
        if not raw[field].strip():
            raise InputError("must not be empty", field=field, **where)
    shape = _shape(raw, where)
    n = {f: _int(raw, f, where) for f in ("seq_len", "micro_batch", "grad_accum",
                                          "global_batch", "gpus")}
    if n["global_batch"] != n["micro_batch"] * n["grad_accum"] * n["gpus"]:
        raise InputError(f"global_batch {n['global_batch']} is not micro_batch x grad_accum x "
                         f"gpus = {n['micro_batch'] * n['grad_accum'] * n['gpus']}",
                         field="global_batch", **where)
    if n["gpus"] < 2:
        raise InputError("data parallelism needs >= 2 GPUs", field="gpus", **where)
    gpu = _choice(raw, "gpu", sorted(GPU_PEAK_FLOPS), where)
    rate, step = raw["tokens_per_s_per_gpu"].strip(), raw["step_s"].strip()
    if bool(rate) == bool(step):
        raise InputError("give exactly one of tokens_per_s_per_gpu and step_s",
                         field="step_s" if step else "tokens_per_s_per_gpu", **where)
    tokens = n["micro_batch"] * n["grad_accum"] * n["seq_len"]
    step_s = (_positive(step, "step_s", where) if step
              else tokens / _positive(rate, "tokens_per_s_per_gpu", where))
    return Point(source=raw["source"].strip(), group=raw["group"].strip(), shape=shape,
                 seq_len=n["seq_len"], micro_batch=n["micro_batch"],
                 grad_accum=n["grad_accum"], gpus=n["gpus"], gpu=gpu,
                 precision=_choice(raw, "precision", PRECISIONS, where),
                 sharding=_choice(raw, "sharding", SHARDINGS, where),
                 activation_checkpointing=_choice(raw, "activation_checkpointing",
                                                  CHECKPOINTING, where),
                 published_step_s=step_s, row=where["row"], path=where["path"],
                 reduce_dtype=_choice(raw, "reduce_dtype", tuple(REDUCE_DTYPES), where),
                 grad_sync=_choice(raw, "grad_sync", GRAD_SYNCS, where))


def load_points(path: str | Path) -> list[Point]:
    """Every row of ``path``, checked (module docstring), and every group checked: its
    points share :data:`GROUP_KEYS`, have distinct GPU counts, and number two or more."""
    path = Path(path)
    if not path.is_file():
        raise InputError("points CSV not found", path=path)
    reader = csv.DictReader(io.StringIO(read_text(path)))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise InputError(f"missing column(s): {', '.join(missing)}", path=path, row=0,
                         field=missing[0])
    raws = list(reader)
    points, keys = [], {}
    for i, raw in enumerate(raws, start=1):
        where = {"path": str(path), "row": i}
        point = _point(raw, where)
        key = tuple((raw[k] or "").strip() for k in GROUP_KEYS)
        first = keys.setdefault(point.group, (key, i))
        if first[0] != key:
            index = next(j for j, (a, b) in enumerate(zip(first[0], key, strict=True)) if a != b)
            raise InputError(f"group {point.group!r} has {GROUP_KEYS[index]} "
                             f"{first[0][index]!r} at row {first[1]}", field=GROUP_KEYS[index],
                             **where)
        if any(p.group == point.group and p.gpus == point.gpus for p in points):
            raise InputError(f"group {point.group!r} has two points at {point.gpus} GPUs",
                             field="gpus", **where)
        points.append(point)
    if not points:
        raise InputError("no points", path=path, row=0)
    for name, members in grouped(points).items():
        if len(members) < 2:
            raise InputError(f"group {name!r} has one GPU count; a prediction needs two or more",
                             path=path, row=members[0].row, field="group")
    return points


def grouped(points: Sequence[Point]) -> dict[str, list[Point]]:
    """Points by group (groups in first-seen order), each sorted by GPU count."""
    out: dict[str, list[Point]] = {}
    for p in points:
        out.setdefault(p.group, []).append(p)
    return {name: sorted(members, key=lambda p: p.gpus) for name, members in out.items()}
