"""Capture real traces from PyTorch: per-tensor compute profiles (:mod:`.compute`),
profiled data-parallel iterations (:mod:`.iteration`), and (in :mod:`.sweep` /
:mod:`.cluster`) collective sweeps on loopback and on an emulated cluster.

The sub-modules import torch lazily; importing this package needs no torch.
"""

from __future__ import annotations

__all__ = ["compute", "iteration", "sweep"]
