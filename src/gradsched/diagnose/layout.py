"""The layout that ran, recognised from the collectives of one rank's step.

* **DDP buckets**: all-reduces launched during the backward, one per bucket, in the order
  the buckets filled (PyTorch DDP fills buckets in the reverse of the parameters'
  registration order, ``torch/nn/parallel/distributed.py``,
  ``_compute_bucket_assignment_by_size``); their sizes are the buckets' bytes.
* **FSDP2 units**: all-gathers (forward, and again in the backward where the unit was
  resharded) and reduce-scatters (backward), one of each per unit; the layout is called
  FSDP2 only with all-gathers in the forward and reduce-scatters in the backward (TorchRec's
  sharded embeddings reduce-scatter in the forward and all-gather in the backward)
  (``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``: ``unshard`` and
  ``post_backward``).
* **Other collectives** (all-to-all of sharded embeddings, broadcasts of buffers) are listed
  by kind.
* **Prefetch visible**: an all-gather (or a forward collective) that started before the
  compute stream drained, i.e. ran beside the compute before its consumer.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from gradsched.diagnose.rank_step import HOLD_TOL_S

FRAMEWORKS = ("ddp", "fsdp2", "deepspeed", "megatron")


def recognise(frame: pd.DataFrame) -> dict[str, Any]:
    """The layout facts of one rank's frame (module docstring)."""
    bw = frame[frame["phase"] == "backward"]
    buckets = bw[bw["collective"] == "all_reduce"]
    gathers = frame[frame["collective"] == "all_gather"]
    scatters = frame[frame["collective"] == "reduce_scatter"]
    forward = frame[frame["phase"] == "forward"]
    early = forward if gathers.empty else gathers
    prefetched = int((early["start_s"] < early["drained_s"] - HOLD_TOL_S).sum())
    fsdp = (not scatters[scatters["phase"] == "backward"].empty
            and not gathers[gathers["phase"] == "forward"].empty)
    if fsdp:
        kind = "fsdp2"
    elif not buckets.empty:
        kind = "ddp"
    else:
        kind = "unknown"
    return {
        "layout": kind,
        "buckets": len(buckets),
        "bucket_bytes": [int(b) for b in buckets["bytes"].fillna(0)],
        "units": len(scatters),
        "all_gathers": len(gathers),
        "other": {str(k): int(v) for k, v in frame[~frame["collective"].isin(
            ["all_reduce", "all_gather", "reduce_scatter"])]["collective"]
            .value_counts().sort_index().items()},
        "comm_streams": sorted(str(s) for s in frame["stream"].unique()),
        "forward_collectives": len(forward),
        "prefetched": prefetched,
    }


def layout_line(facts: dict[str, Any]) -> str:
    """One line naming the layout."""
    parts = []
    if facts["buckets"]:
        mib = ", ".join(f"{b / 2**20:.1f}" for b in facts["bucket_bytes"])
        parts.append(f"{facts['buckets']} DDP buckets in backward ({mib} MiB, in launch "
                     "order)")
    if facts["units"] and facts["layout"] == "fsdp2":
        parts.append(f"{facts['units']} FSDP units ({facts['all_gathers']} all-gathers, "
                     f"{facts['units']} reduce-scatters)")
    elif facts["units"] or facts["all_gathers"]:
        parts.append(f"{facts['all_gathers']} all_gather, {facts['units']} reduce_scatter "
                     "(not FSDP's pattern: all-gathers in forward, reduce-scatters in "
                     "backward)")
    if facts["other"]:
        parts.append(", ".join(f"{n} {k}" for k, n in facts["other"].items()))
    streams = ", ".join(facts["comm_streams"])
    return (f"layout: {'; '.join(parts) or 'no collective'}; comm stream(s) {streams}; "
            f"{facts['prefetched']} of {facts['forward_collectives']} forward collectives "
            "started before the compute stream drained (prefetch visible)")
