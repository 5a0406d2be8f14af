"""The causes of exposed communication, each a rule on the observed and predicted columns
of :mod:`gradsched.diagnose.run` with its threshold stated here.

A cause is named on a collective when the time it explains is *material*: at least
:data:`MIN_EXPLAINED_S` and at least :data:`MIN_EXPLAINED_SHARE` of the collective's
duration. Rank-level causes (serialised streams, a host-bound step) are named once per rank.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from gradsched.diagnose.rank_step import HOLD_TOL_S, RankStep

MIN_EXPLAINED_S = 50e-6
"""Fifty Kineto timestamp ticks (1 us) and about ten kernel launch latencies: shorter
explanations are within the trace's own resolution and launch jitter."""

MIN_EXPLAINED_SHARE = 0.2
"""A cause must explain a fifth of the collective's duration: less is the run-to-run spread
of one NCCL kernel's time (the DLRM ranks' identical 24 KiB all-to-alls range 0.5-7.6 ms)."""

SERIAL_MIN_CONTENDERS = 3
"""Collectives with compute pending during them, needed before judging serialisation:
with fewer, a consumer waiting on its input (an all-to-all's, the optimizer's) decides it."""

SERIAL_MAX_BESIDE_SHARE = 0.05
"""At most this share of those collectives had any pending compute kernel start beside
them: with separate streams in separate hardware queues, pending compute runs during a
collective unless every pending kernel depends on it."""

LAUNCH_START_S = 50e-6
"""A collective whose kernel started this soon after its launch call was waiting for the
host, not for the device (NCCL kernels in the public traces start 10-16 us after the
call)."""

PREFETCH_EXPOSED_SHARE = 0.9
"""A gather that did not run beside compute: at least this share of it exposed."""

HOST_BOUND_SHARE = 0.8
"""Below this share of the step's GPU span busy with compute the step is host-bound (the
Kineto GPU importer's ``cpu_bound_share``)."""

SLOW_RATIO = 1.5
"""A collective slower than the sweep: its transfer at least this many times the sweep's
time (NCCL's run-to-run spread on one size is some tens of percent; beyond half again, a
congested or mis-tuned link or the wrong algorithm)."""

CAUSES = ("serialised", "launch-late", "prefetch-missed", "nothing-to-hide",
          "slower-than-sweep", "waiting-on-rank", "host-bound")
"""Every cause the rules name, in the order they are reported."""

CAUSE_COLUMNS = ["rank", "index", "cause", "explained_s", "detail"]


def material(explained: float, duration: float) -> bool:
    """Whether ``explained`` is material for a collective of ``duration`` (s)."""
    return explained >= max(MIN_EXPLAINED_S, MIN_EXPLAINED_SHARE * duration)


def _row(rank: int, index: int, cause: str, explained: float, detail: str) -> dict[str, Any]:
    return {"rank": rank, "index": index, "cause": cause,
            "explained_s": round(max(explained, 0.0), 9), "detail": detail}


def rank_causes(step: RankStep, frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Serialised streams and a host-bound step (rank level; ``index`` -1)."""
    out = []
    if (step.contenders >= SERIAL_MIN_CONTENDERS
            and step.beside <= SERIAL_MAX_BESIDE_SHARE * step.contenders):
        gap = (frame["exposed_s"] - frame["predicted_exposed_s"]).clip(lower=0).sum()
        one = bool(frame["same_stream_as_compute"].any())
        if step.cpu:
            where = ("the collectives ran on the training thread" if one else
                     "on gloo's threads, yet the training thread waited for each")
        else:
            where = ("the collectives ran on the compute stream" if one else
                     "on their own stream, yet in one hardware queue with the compute")
        out.append(_row(step.rank, -1, "serialised", float(gap),
                        f"pending compute ran beside {step.beside} of the {step.contenders} "
                        f"collectives that had any: {where}"))
    busy = step.compute_s / step.gpu_end_s if step.gpu_end_s > 0 else 1.0
    if busy < HOST_BOUND_SHARE and not step.cpu:
        out.append(_row(step.rank, -1, "host-bound", 0.0,
                        f"compute kernels cover {busy:.0%} of the step's GPU span: the device "
                        "waits for the host, and overlap can only hide what runs"))
    return out


def collective_causes(row: Any, with_sweep: bool) -> list[dict[str, Any]]:
    """The per-collective rules (module docstring) on one row of the diagnosis frame."""
    out = []
    rank, index, dur = int(row.rank), int(row.index), float(row.duration_s)
    exposed = float(row.exposed_s)
    gap = exposed - float(row.predicted_exposed_s)
    late = min(float(row.launch_s) - float(row.ready_s), exposed)
    if float(row.start_s) - float(row.launch_s) <= LAUNCH_START_S and material(late, dur):
        out.append(_row(rank, index, "launch-late", late,
                        f"launched {float(row.launch_s) - float(row.ready_s):.6f} s after its "
                        "inputs were ready; the device started it on the launch"))
    gather = row.phase == "forward" or row.collective == "all_gather"
    gated = abs(float(row.start_s) - float(row.drained_s)) <= HOLD_TOL_S
    ahead = float(row.start_s) - float(row.launch_s)
    if (gather and gated and material(ahead, dur) and int(row.held_kernels) > 0
            and exposed >= PREFETCH_EXPOSED_SHARE * dur and material(gap, dur)):
        out.append(_row(rank, index, "prefetch-missed", gap,
                        f"issued {ahead:.6f} s ahead but started only when the compute "
                        "stream drained, and the compute waited for it"))
    if (row.phase == "backward" and float(row.hideable_s) < dur
            and material(float(row.predicted_exposed_s), dur)):
        out.append(_row(rank, index, "nothing-to-hide", float(row.predicted_exposed_s),
                        f"{float(row.hideable_s):.6f} s of compute was left after it became "
                        "ready"))
    transfer, modelled = float(row.transfer_s), float(row.modelled_s)
    if (with_sweep and row.model_source == "sweep" and transfer >= SLOW_RATIO * modelled
            and material(transfer - modelled, dur)):
        out.append(_row(rank, index, "slower-than-sweep", transfer - modelled,
                        f"transfer {transfer:.6f} s against the sweep's {modelled:.6f} s"))
    wait = float(row.wait_s) if pd.notna(row.wait_s) else 0.0
    if pd.notna(row.last_rank) and int(row.last_rank) != rank and material(min(wait, exposed),
                                                                            dur):
        out.append(_row(rank, index, "waiting-on-rank", min(wait, exposed),
                        f"waited {wait:.6f} s for rank {int(row.last_rank)}, the last to "
                        "start it"))
    return out
