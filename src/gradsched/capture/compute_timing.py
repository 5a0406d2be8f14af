"""Timing of one model's training iterations for a compute capture (the clocks and what
is timed: see :mod:`gradsched.capture.compute`): clocks (wall, thread CPU time, CUDA
events), hooked and plain iterations, and single-tensor optimizer steps."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradsched.capture.compute_layout import Layout
from gradsched.errors import ConfigError
from gradsched.workloads import ModelSpec


# ----------------------------------------------------------------------------- clocks
class CpuClock:
    """Nanosecond timestamps from ``perf_counter_ns`` (wall) or ``thread_time_ns`` (the
    calling thread's CPU time); nothing to resolve."""

    def __init__(self, cpu_time: bool = False) -> None:
        self.kind = "cpu-thread-time" if cpu_time else "cpu-wall"
        self.mark: Callable[[], int] = time.thread_time_ns if cpu_time \
            else time.perf_counter_ns

    def finish(self) -> None:
        return None

    @staticmethod
    def seconds(a: Any, b: Any) -> float:
        return (b - a) * 1e-9


class CudaClock:
    """CUDA events recorded on the current stream; resolved after one synchronize."""

    kind = "cuda"

    def __init__(self, device: str) -> None:
        import torch

        self._torch = torch
        self._device = torch.device(device)

    def mark(self) -> Any:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def finish(self) -> None:
        self._torch.cuda.synchronize(self._device)

    @staticmethod
    def seconds(a: Any, b: Any) -> float:
        return float(a.elapsed_time(b)) * 1e-3


# ----------------------------------------------------------------------------- iterations
@dataclass
class Sample:
    """One hooked iteration, in seconds."""

    forward_rows: np.ndarray
    order: tuple[int, ...]
    ready_s: np.ndarray  # per row, from backward start
    forward_s: float
    backward_s: float
    step_s: float
    iteration_s: float
    tail_s: float
    hook_calls: int
    wall_s: float


@dataclass
class Plain:
    forward_s: float
    backward_s: float
    step_s: float
    iteration_s: float
    wall_s: float


class Runner:
    """Runs hooked and plain iterations of one model."""

    def __init__(self, spec: ModelSpec, layout: Layout, optimizer: Any, clock: Any,
                 batch: Any) -> None:
        self.spec = spec
        self.layout = layout
        self.opt = optimizer
        self.clock = clock
        self.batch = batch
        self._fwd: list[tuple[int, Any]] = []
        self._bwd: list[tuple[int, Any]] = []
        self._handles: list[Any] = []

    def _install(self) -> None:
        mark = self.clock.mark
        fwd = self._fwd
        bwd = self._bwd
        for mod in self.layout.boundary_modules:
            row = self.layout.target_row[id(mod)]

            def post(_m: Any, _i: Any, _o: Any, row: int = row) -> None:
                fwd.append((row, mark()))

            self._handles.append(mod.register_forward_hook(post))
        for row, p in enumerate(self.layout.params):

            def ready(_p: Any, row: int = row) -> None:
                bwd.append((row, mark()))

            self._handles.append(p.register_post_accumulate_grad_hook(ready))

    def _remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _iteration(self) -> tuple[list[Any], float]:
        """One training iteration with clock marks before zero_grad, forward, backward,
        the step and after it; returns the marks and the wall time."""
        mark = self.clock.mark
        w0 = time.perf_counter()
        marks = [mark()]
        self.opt.zero_grad(set_to_none=True)
        marks.append(mark())
        loss = self.spec.loss(self.spec.model, self.batch)
        marks.append(mark())
        loss.backward()
        marks.append(mark())
        self.opt.step()
        marks.append(mark())
        self.clock.finish()
        return marks, time.perf_counter() - w0

    def plain(self) -> Plain:
        """An iteration without hooks."""
        seconds = self.clock.seconds
        (t0, t1, t2, t3, t4), wall = self._iteration()
        return Plain(seconds(t1, t2), seconds(t2, t3), seconds(t3, t4), seconds(t0, t4),
                      wall)

    def hooked(self) -> Sample:
        """An iteration with the timing hooks installed."""
        n = len(self.layout.params)
        self._fwd.clear()
        self._bwd.clear()
        self._install()
        seconds = self.clock.seconds
        try:
            (t0, t1, t2, t3, t4), wall = self._iteration()
        finally:
            self._remove()
        forward_rows = np.zeros(n)
        prev = t1
        last_row = None
        for row, tok in self._fwd:
            forward_rows[row] += seconds(prev, tok)
            prev, last_row = tok, row
        if last_row is None:
            last_row = self.layout.target_row[id(self.layout.last_module)]
        forward_rows[last_row] += seconds(prev, t2)  # the loss and anything after
        ready = np.full(n, np.nan)
        order: list[int] = []
        last_tok = t2
        for row, tok in self._bwd:
            if np.isnan(ready[row]):
                order.append(row)
            ready[row] = seconds(t2, tok)  # a re-fired hook: the last firing counts
            last_tok = tok
        if len(order) != n:
            lost = [self.layout.names[i] for i in range(n) if np.isnan(ready[i])]
            raise ConfigError(f"gradients of {lost[:5]} did not become ready in a measured "
                              "iteration (the model's parameter use changes between "
                              "iterations)")
        return Sample(forward_rows=forward_rows, order=tuple(order), ready_s=ready,
                       forward_s=seconds(t1, t2), backward_s=seconds(t2, t3),
                       step_s=seconds(t3, t4), iteration_s=seconds(t0, t4),
                       tail_s=seconds(last_tok, t3), hook_calls=len(self._fwd) + len(self._bwd),
                       wall_s=wall)


def update_times(layout: Layout, clock: Any, reps: int, lr: float,
                  momentum: float) -> np.ndarray:
    """Median single-tensor SGD-momentum step time of each parameter."""
    import torch

    opts = [torch.optim.SGD([p], lr=lr, momentum=momentum, foreach=False)
            for p in layout.params]
    for o in opts:  # first step creates the momentum buffer: not timed
        o.step()
    clock.finish()
    times = np.zeros((reps, len(opts)))
    for r in range(reps):
        marks = [clock.mark()]
        for o in opts:
            o.step()
            marks.append(clock.mark())
        clock.finish()
        times[r] = [clock.seconds(a, b) for a, b in itertools.pairwise(marks)]
    return np.median(times, axis=0)


__all__ = ["CpuClock", "CudaClock", "Plain", "Runner", "Sample", "update_times"]
