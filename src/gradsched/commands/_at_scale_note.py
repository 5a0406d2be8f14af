"""The at-scale note of the replay commands (``replay``, ``advise`` and
``--sharded``, ``shard plan|compare``): at a multi-node world size, on a GPU trace, what the
check against published step times found for the replay's own switches
(:func:`gradsched.experiments.at_scale.record.note`), on stderr."""

from __future__ import annotations

import argparse
import sys

from gradsched.traces.bundle import ComputeTrace


def print_at_scale_note(args: argparse.Namespace, trace: ComputeTrace, world: int,
                        command: str) -> None:
    """The note for ``trace`` (after ``--stragglers`` was applied) at ``world`` ranks; nothing
    for a CPU trace or within one node."""
    from gradsched.commands._overlap import overlap_applies
    from gradsched.costmodel.overlap_slowdown import is_gpu_trace
    from gradsched.experiments.at_scale.record import ONE_NODE_GPUS, load_record, note

    if world <= ONE_NODE_GPUS or not is_gpu_trace(trace.meta):
        return
    stragglers = trace.meta.get("stragglers")
    text = note(world, overlap_applies(args, trace.meta), stragglers is not None,
                load_record())
    if text is None:
        return
    if isinstance(stragglers, dict) and "auto" not in str(stragglers.get("source", "")):
        text += (f" (your straggler cv {stragglers.get('cv')} is not the measured one the "
                 "check used)")
    print(f"gradsched {command}: note: {text}", file=sys.stderr)
