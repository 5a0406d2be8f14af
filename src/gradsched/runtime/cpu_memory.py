"""Measured peak memory of one training iteration on CPU: PyTorch's CPU allocator, seen
through ``torch.profiler`` with ``profile_memory=True``.

While the profiler records memory, c10's CPU allocator reports every allocation (its size)
and every free of an allocation it made during the recording
(``c10/core/CPUAllocator.cpp``, ``ProfiledCPUMemoryReporter``), as ``[memory]`` events with
signed byte counts. :func:`iteration_peak_bytes` runs one iteration under the profiler and
returns the largest running sum of those events in time order, starting from 0: **the peak
of the CPU tensor storage allocated during the iteration and live at once** (unsharded
parameters gathered by FSDP2, unsharded and sharded gradients, activations, collective
buffers, optimizer temporaries). Storage that existed before the iteration (the parameter
shards, the optimizer's momentum, the batches) is not counted, and freeing it does not
lower the sum; memory outside PyTorch's allocator (gloo's own buffers, the Python heap) is
not seen. The iteration is an extra one, after the timed ones, so the profiler does not
touch the timings.
"""

from __future__ import annotations

from collections.abc import Callable


def iteration_peak_bytes(one: Callable[[], None]) -> int:
    """Run ``one()`` under the profiler; the peak of its allocations (module docstring)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        one()
    events = [(e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
              if e.name() == "[memory]"]
    return running_peak(events)


def running_peak(events: list[tuple[int, int]]) -> int:
    """The largest running sum of signed byte counts in time order (a free and an
    allocation at the same instant: in the order recorded), from 0."""
    level = best = 0
    for _, delta in sorted(events, key=lambda e: e[0]):
        level += delta
        best = max(best, level)
    return best
