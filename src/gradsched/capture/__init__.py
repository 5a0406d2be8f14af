"""Capture real traces from PyTorch: per-tensor compute profiles (:mod:`.compute`),
profiled data-parallel iterations (:mod:`.iteration`), collective sweeps on loopback
and on the emulated cluster (:mod:`.sweep`: drivers and CLI; :mod:`.sweep_settings`,
:mod:`.sweep_rank`, :mod:`.sweep_trace`), the measuring layer's two timers, of a collective
call and of a point-to-point round trip (:mod:`.timers`), and the calibration of the
machine's compute / communication interference (:mod:`.interference`).

The sub-modules import torch lazily; importing this package needs no torch.
"""

from __future__ import annotations

__all__ = ["compute", "interference", "iteration", "sweep", "timers"]
