"""Check the replay against a published multi-GPU throughput (the paper's validation
against published single-node DDP scaling).

A spec (YAML, e.g. ``config/published-scaling.yaml``) lists published single-node results:
the system, the per-GPU batch the authors trained with, their images/s on 1 and on P GPUs,
and the inputs we predict them from -- a compute trace of the same model on the same GPU
type and a single-node NVLink-class comm sweep. For each case:

* **Batch.** The compute trace was measured at its own batch (``batch_size`` in its
  sidecar); forward and backward times are scaled *linearly* to the published per-GPU
  batch (a reconstruction: GPU kernels are usually more efficient at larger batches, so
  this tends to under-predict single-GPU throughput). The update time is kept as measured
  (the optimizer step does not depend on the batch).
* **One GPU.** No all-reduce: the iteration is forward + backward + update.
* **P GPUs.** PyTorch DDP's plan (:mod:`gradsched.planners.ddp`, 25 MB buckets) replayed
  at P ranks over the comm model: the sweep itself when it holds P ranks, else the
  ring-scaled cross-world-size model (:class:`gradsched.costmodel.scaling.ScaledModel`)
  fitted at ``comm_fit_on`` -- an extrapolation, said so in the ``comm_model`` column.
* **Overlap slowdown.** Backward compute at ``1/s`` while an all-reduce runs beside it, ``s``
  the committed value of the trace's GPU generation (``overlap="auto"``,
  :mod:`gradsched.costmodel.overlap_slowdown`; ``overlap_slowdown`` column, 1 = none).
* images/s = batch x GPUs / iteration; scaling = images/s on P / images/s on 1; each
  error = (predicted - published) / published.

:mod:`gradsched.report.scaling` formats the frame of :func:`scaling_check` (table, macros).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.costmodel.base import CommModel, load_comm_spec
from gradsched.costmodel.crossws import CrossSettings, cross_world_size
from gradsched.costmodel.overlap_slowdown import resolve
from gradsched.errors import ConfigFileError, InputError
from gradsched.experiments.grid import compare
from gradsched.io import read_yaml
from gradsched.replay.engine import ReplayOptions
from gradsched.schema_check import check_schema
from gradsched.traces.bundle import ComputeTrace

SCALING_COLUMNS = (
    "key", "system", "compute", "trace_batch", "batch_per_gpu", "comm", "comm_model", "world_size",
    "iteration_1_s", "iteration_p_s", "exposed_comm_p_s",
    "predicted_img_s_1", "published_img_s_1", "error_1_pct",
    "predicted_img_s_p", "published_img_s_p", "error_p_pct",
    "predicted_scaling", "published_scaling", "scaling_error_pct", "overlap_slowdown",
)
"""Columns of the scaling-check CSV (times in s, throughput in images/s, errors in %)."""


@dataclass(frozen=True)
class ScalingCase:
    """One published result and the inputs we predict it from (``key``: letters naming the
    case's paper macros, e.g. ``dgxone`` -> ``\\gsScalingDgxoneErrorOnePct``)."""

    key: str
    system: str
    compute: Path
    comm: Path
    world_size: int
    batch_per_gpu: int
    published_1: float
    published_p: float
    comm_fit_on: tuple[int, ...] = ()


SCHEMA = "published-scaling.schema.yaml"
"""The spec's schema (``workflow/schemas/``): every field's type and range."""


def _case(item: dict[str, Any], path: Path, index: int, base: Path) -> ScalingCase:
    """A case that matches the schema, checked for what the schema cannot state: the
    published images/s are for 1 GPU and for ``world_size`` GPUs, and the files exist."""
    at = f"cases[{index}]"
    world = item["world_size"]
    published = item["published_img_s"]
    if set(published) != {1, world}:
        raise ConfigFileError(f"expected images/s for exactly 1 and {world} GPUs (keys 1 and "
                              f"{world})", path=path, field=f"{at}.published_img_s")
    files = {}
    for key in ("compute", "comm"):
        target = base / item[key]
        if not target.is_file():
            raise ConfigFileError(f"no such file: {target}", path=path, field=f"{at}.{key}")
        files[key] = target
    return ScalingCase(
        key=item["key"], system=item["system"], compute=files["compute"], comm=files["comm"],
        world_size=world, batch_per_gpu=item["batch_per_gpu"],
        published_1=float(published[1]), published_p=float(published[world]),
        comm_fit_on=tuple(item.get("comm_fit_on") or ()),
    )


def load_spec(path: str | Path, base: str | Path = ".") -> list[ScalingCase]:
    """The cases of a spec file, checked against :data:`SCHEMA` (errors name the file and
    the field, e.g. ``cases[0].world_size``); file paths in it are relative to ``base``
    (the repository)."""
    path = Path(path)
    doc = read_yaml(path)  # missing, unreadable, not UTF-8 or not YAML: named
    check_schema(doc, SCHEMA, path)
    cases = [_case(item, path, i, Path(base)) for i, item in enumerate(doc["cases"])]
    keys = [c.key.lower() for c in cases]
    if len(set(keys)) != len(keys):
        raise ConfigFileError("two cases share a key", path=path, field="cases")
    return cases


def scale_batch(trace: ComputeTrace, batch: int) -> ComputeTrace:
    """The trace with forward and backward times scaled linearly from its own batch to
    ``batch`` (a reconstruction; the update time is kept). Refused when the sidecar does not
    state the batch."""
    own = trace.meta.get("batch_size")
    if not isinstance(own, int) or own <= 0:
        raise InputError("the sidecar states no batch_size to scale from", path=trace.path,
                         field="batch_size")
    factor = batch / own
    frame = trace.frame.assign(forward_s=trace.frame["forward_s"] * factor,
                               backward_s=trace.frame["backward_s"] * factor)
    meta = dict(trace.meta, batch_size=batch,
                notes=f"{trace.meta.get('notes', '')} RECONSTRUCTION: forward/backward "
                      f"scaled linearly from batch {own} to {batch} (x{factor:g}).".strip())
    scaled = ComputeTrace.from_frame(frame, meta)
    return ComputeTrace(frame=scaled.frame, meta=scaled.meta, path=trace.path)


def comm_model(case: ScalingCase) -> tuple[CommModel, str]:
    """The comm model at the case's world size and how it was obtained."""
    if not case.comm_fit_on:
        model = load_comm_spec(str(case.comm))
        held = model.world_sizes() or ()
        if case.world_size not in held:
            raise InputError(f"the sweep holds world sizes {list(held)}, not "
                             f"{case.world_size}: give comm_fit_on to extrapolate",
                             path=case.comm, field="world_size")
        return model, f"measured at {case.world_size} ranks"
    fits = cross_world_size([case.comm], CrossSettings(tuple(case.comm_fit_on),
                                                       algorithm="ring", method="scaled"))
    if len(fits) != 1 or fits[0].scaled is None:
        raise InputError(f"expected one all-reduce series to scale, found {len(fits)}",
                         path=case.comm)
    held = ",".join(map(str, case.comm_fit_on))
    return fits[0].scaled, (f"EXTRAPOLATED: measured at {held} ranks, ring-scaled to "
                            f"{case.world_size}")


def predict(case: ScalingCase, iterations: int = 5,
            overlap: str | float = "auto") -> dict[str, Any]:
    """One row of :data:`SCALING_COLUMNS` for ``case`` (see the module docstring);
    ``overlap``: ``auto``, ``off`` or a slowdown (``--overlap-slowdown``)."""
    original = ComputeTrace.load(case.compute)
    slowdown = resolve(original.meta, overlap).value
    trace = scale_batch(original, case.batch_per_gpu)
    model, how = comm_model(case)
    one = trace.forward_total_s + trace.backward_total_s + trace.update_total_s
    result = compare(trace, model, case.world_size, ["ddp"],
                     options=ReplayOptions(iterations=iterations,
                                           compute_slowdown=slowdown)).iloc[0]
    many = float(result["iteration_s"])
    img_1 = case.batch_per_gpu / one
    img_p = case.batch_per_gpu * case.world_size / many
    published_scaling = case.published_p / case.published_1
    return {
        "key": case.key, "system": case.system, "compute": case.compute.stem,
        "trace_batch": original.meta["batch_size"], "batch_per_gpu": case.batch_per_gpu,
        "comm": case.comm.stem, "comm_model": how, "world_size": case.world_size,
        "iteration_1_s": one, "iteration_p_s": many,
        "exposed_comm_p_s": float(result["exposed_comm_s"]),
        "predicted_img_s_1": img_1, "published_img_s_1": case.published_1,
        "error_1_pct": 100 * (img_1 / case.published_1 - 1),
        "predicted_img_s_p": img_p, "published_img_s_p": case.published_p,
        "error_p_pct": 100 * (img_p / case.published_p - 1),
        "predicted_scaling": img_p / img_1, "published_scaling": published_scaling,
        "scaling_error_pct": 100 * ((img_p / img_1) / published_scaling - 1),
        "overlap_slowdown": slowdown,
    }


def scaling_check(cases: list[ScalingCase], iterations: int = 5,
                  overlap: str | float = "auto") -> pd.DataFrame:
    """Every case's prediction against its published numbers."""
    return pd.DataFrame([predict(c, iterations, overlap) for c in cases],
                        columns=list(SCALING_COLUMNS))
