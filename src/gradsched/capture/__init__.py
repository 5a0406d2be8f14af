"""Capture real traces from PyTorch: per-tensor compute profiles (:mod:`.compute`),
profiled data-parallel iterations (:mod:`.iteration`), and collective sweeps on loopback
and on the emulated cluster (:mod:`.sweep`: drivers and CLI; :mod:`.sweep_settings`,
:mod:`.sweep_rank`, :mod:`.sweep_trace`).

The sub-modules import torch lazily; importing this package needs no torch.
"""

from __future__ import annotations

__all__ = ["compute", "iteration", "sweep"]
