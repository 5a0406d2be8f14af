"""What the at-scale check found, kept beside the code so that every replay at a multi-node
world size can say it (``gradsched study at-scale``, the paper's section "At scale").

The study predicts published FSDP step times at several GPU counts from each group's
smallest count (:mod:`.study`), once per combination of the replay's switches (a *variant*:
the NCCL comm models with the overlap slowdown and the stragglers on or off). Its summaries
are condensed by ``gradsched report at-scale-variants --record`` into :data:`RECORD_PATH`
(committed; ``tests/experiments/test_at_scale_record.py`` checks it against the expected
outputs of ``make reproduce``, the variants table and the record under ``paper/expected/``,
and against the pipeline's own record where one was built). A replay of a GPU trace at more
ranks than one 8-GPU node holds (``replay``, ``advise``, ``advise --sharded``,
``shard plan|compare``) prints :func:`note`: the check's errors for the
replay's own switches, the share of the published growth of the step they explained, and the
switches that explained most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gradsched.errors import InputError
from gradsched.io import read_json

RECORD_PATH = Path(__file__).with_name("record.json")

SWITCH_VARIANTS = {(False, False): "nccl", (True, False): "nccl-overlap",
                   (False, True): "nccl-stragglers", (True, True): "nccl-overlap-stragglers"}
"""(overlap slowdown on, stragglers on) -> the study's variant run with exactly those switches
(the NCCL comm models, no per-unit synchronisation waits)."""

RECORD_KEYS = ("sources", "comm_models", "overlap_slowdown", "stragglers", "predicted_points",
               "predicted_gpus_min", "predicted_gpus_max", "median_abs_error_pct",
               "worst_abs_error_pct", "perfect_median_abs_error_pct", "optimistic_points",
               "growth_explained_median_pct", "growth_explained_pooled_pct")
"""The summary keys a variant's record keeps."""

ONE_NODE_GPUS = 8
"""World sizes up to this fit in one node of the checked machines (8 GPUs each): the note is
about the growth of the step across nodes."""


def build_record(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The record of the study's variant summaries (those with a variant name of
    :data:`SWITCH_VARIANTS`; every one of them must be there)."""
    variants: dict[str, dict[str, Any]] = {}
    for s in summaries:
        name = str(s.get("variant", ""))
        if name not in SWITCH_VARIANTS.values():
            continue
        missing = [k for k in RECORD_KEYS if k not in s]
        if missing:
            raise InputError(f"the summary of variant {name!r} has no '{missing[0]}'",
                             field=missing[0])
        variants[name] = {k: s[k] for k in RECORD_KEYS}
    absent = [v for v in SWITCH_VARIANTS.values() if v not in variants]
    if absent:
        raise InputError(f"no summary of variant {absent[0]!r} (the record needs "
                         f"{', '.join(SWITCH_VARIANTS.values())})", field="variant")
    return {"what": "gradsched study at-scale, one entry per combination of the replay's "
                    "switches (paper section At scale)",
            "variants": {v: variants[v] for v in SWITCH_VARIANTS.values()}}


def load_record(path: Path = RECORD_PATH) -> dict[str, dict[str, Any]]:
    """The variants of the committed record, checked."""
    data = read_json(path, missing="at-scale record not found")
    variants = data.get("variants") if isinstance(data, dict) else None
    if not isinstance(variants, dict):
        raise InputError("expected an object 'variants'", path=path, field="variants")
    for name in SWITCH_VARIANTS.values():
        entry = variants.get(name)
        if not isinstance(entry, dict):
            raise InputError(f"no variant {name!r}", path=path, field="variants")
        missing = [k for k in RECORD_KEYS if k not in entry]
        if missing:
            raise InputError(f"variant {name!r} has no '{missing[0]}'", path=path,
                             field=f"variants.{name}.{missing[0]}")
    return variants


def _switches(overlap_on: bool, stragglers_on: bool) -> str:
    return (f"overlap slowdown {'on' if overlap_on else 'off'}, stragglers "
            f"{'on' if stragglers_on else 'off'}")


def note(world: int, overlap_on: bool, stragglers_on: bool,
         variants: Mapping[str, Mapping[str, Any]]) -> str | None:
    """One line for a replay of a GPU trace at ``world`` ranks with these switches; ``None``
    within one node (:data:`ONE_NODE_GPUS`)."""
    if world <= ONE_NODE_GPUS:
        return None
    mine = variants[SWITCH_VARIANTS[(overlap_on, stragglers_on)]]
    best_key = max(SWITCH_VARIANTS, key=lambda k: (
        float(variants[SWITCH_VARIANTS[k]]["growth_explained_median_pct"]), k))
    best = variants[SWITCH_VARIANTS[best_key]]
    lo, hi = int(mine["predicted_gpus_min"]), int(mine["predicted_gpus_max"])
    text = (f"at scale: with this replay's switches ({_switches(overlap_on, stragglers_on)}), "
            f"{mine['predicted_points']} published FSDP step times at {lo}-{hi} GPUs were "
            f"predicted with a median |error| of {float(mine['median_abs_error_pct']):.1f} % "
            f"(perfect scaling: {float(mine['perfect_median_abs_error_pct']):.1f} %), worst "
            f"{float(mine['worst_abs_error_pct']):.1f} %, faster than published at "
            f"{mine['optimistic_points']} of {mine['predicted_points']}, explaining a median "
            f"{float(mine['growth_explained_median_pct']):.1f} % of the published growth of "
            "the step with the GPU count: a real step at this scale is likely slower than "
            "predicted here")
    if world > hi:
        text += f"; {world} ranks is beyond the largest GPU count checked ({hi})"
    if best_key != (overlap_on, stragglers_on):
        flags = " ".join(
            f"--{name} {'auto' if want else 'off'}"
            for name, want, have in (("overlap-slowdown", best_key[0], overlap_on),
                                     ("stragglers", best_key[1], stragglers_on))
            if want != have)
        text += (f"; {flags} explained the most ({float(best['growth_explained_median_pct']):.1f}"
                 f" %, median |error| {float(best['median_abs_error_pct']):.1f} %)")
    sources = str(mine["sources"]).replace("; ", ", ")
    comm = str(mine["comm_models"]).replace("; ", ", ")
    text += (f" (the check: {sources}; compute calibrated at each group's smallest count; "
             f"comm models {comm}; paper, section At scale)")
    return text


__all__ = ["ONE_NODE_GPUS", "RECORD_KEYS", "RECORD_PATH", "SWITCH_VARIANTS", "build_record",
           "load_record", "note"]
