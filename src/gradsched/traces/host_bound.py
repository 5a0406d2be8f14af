"""Host-bound: the project's one definition, the kineto-gpu importer's.

A GPU step is *host-bound* (the importer's ``cpu_bound``) when its GPU busy share is below
:data:`CPU_BOUND_SHARE`: the union of the step's non-NCCL GPU activity over the step's GPU
period (:mod:`gradsched.traces.importers.kineto_gpu.busy`, the one busy measure), i.e. the
GPU waited on the host for more than a fifth of the step
(:mod:`gradsched.traces.importers.kineto_gpu`, item 9: a GPU-bound step is at ~0.99, HTA's
DDP trace at 0.18).

Where the judgement is recorded (:func:`judgement`, read by
:attr:`gradsched.traces.bundle.ComputeTrace.host_bound` and so by the replay's
``compute_bound_by``):

* a trace the importer wrote: its sidecar's ``cpu_bound`` (with ``gpu_busy_share``);
* a hook capture (``gradsched capture compute``): the sidecar's ``host_bound`` record,
  the importer's verdict on a profiled step of the same configuration and process setup
  (:func:`record`, written by ``tools/h200_host_bound.py``);
* anything else (CPU traces; published per-layer profiles with no GPU timeline, such as
  PipeDream's, Sailor's and B-Caffe's): not judged (``None``).
"""

from __future__ import annotations

from typing import Any

CPU_BOUND_SHARE = 0.8
"""GPU busy share below which a step is host-bound (the importer's ``cpu_bound_share``)."""

RULE = "kineto-gpu importer: GPU busy share of the profiled step < {threshold:g}"


def is_host_bound(gpu_busy_share: float, threshold: float = CPU_BOUND_SHARE) -> bool:
    """The importer's rule (module docstring)."""
    return gpu_busy_share < threshold


def record(gpu_busy_share: float, source: str, threshold: float = CPU_BOUND_SHARE
           ) -> dict[str, Any]:
    """The sidecar record of a hook capture judged from the importer's sidecar ``source``."""
    return {"host_bound": is_host_bound(gpu_busy_share, threshold),
            "gpu_busy_share": gpu_busy_share, "threshold": threshold,
            "rule": RULE.format(threshold=threshold), "source": source}


def judgement(meta: dict[str, Any]) -> bool | None:
    """Whether the sidecar ``meta`` says host-bound; None where it was not judged."""
    flag = meta.get("cpu_bound")
    if isinstance(flag, bool):
        return flag
    rec = meta.get("host_bound")
    if isinstance(rec, dict) and isinstance(rec.get("host_bound"), bool):
        return bool(rec["host_bound"])
    return None
