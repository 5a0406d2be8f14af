"""DDP's memory check: a full replica (parameters, gradients, Adam's state) against the
trace GPU's memory, in ``advise`` and its text (SYNTHETIC traces, labelled, not measured)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.experiments.recommend import DOES_NOT_FIT, AdviceSettings, advise
from gradsched.experiments.recommend_text import render
from gradsched.experiments.replica_memory import GIB, replica_memory
from gradsched.traces.bundle import ComputeTrace

MODEL = AlphaBetaModel(alpha=50e-6, beta=1 / 125e6)  # SYNTHETIC ~1 Gbit/s


def trace(total_bytes: float, device: str, element: int = 2, n: int = 4) -> ComputeTrace:
    """SYNTHETIC: ``n`` equal tensors of ``total_bytes`` in all, ``element`` bytes each."""
    each = int(total_bytes // n)
    frame = pd.DataFrame({"name": [f"t{i}" for i in range(n)], "layer": np.arange(n),
                          "numel": [each // element] * n, "bytes": [each] * n,
                          "forward_s": [0.01] * n, "backward_s": [0.02] * n,
                          "ready_order": np.arange(n)[::-1]})
    meta = {"kind": "compute", "model": "synthetic", "batch_size": 1, "device": device,
            "dtype": "bf16", "world_size": 1, "software": {}, "capture_method": "synthetic",
            "iterations": None, "date": "not measured",
            "source": "SYNTHETIC test trace, not measured"}
    return ComputeTrace.from_frame(frame, meta)


def test_replica_bytes_follow_zero_s_accounting():
    # 1 GiB of bf16 gradients: 2 GiB parameters + gradients, 12 B x 0.5 Gi params = 6 GiB
    mem = replica_memory(trace(GIB, "NVIDIA H100 80GB"))
    assert mem is not None
    assert mem.weights_grads_bytes == 2 * GIB and mem.optimizer_bytes == 6 * GIB
    assert mem.gpu_bytes == 80 * GIB and mem.fits
    fp32 = replica_memory(trace(GIB, "h100", element=4))
    assert fp32 is not None and fp32.optimizer_bytes == 2 * GIB  # 8 B x 0.25 Gi params
    assert replica_memory(trace(GIB, "cpu")) is None  # no GPU: no check


def test_advise_refuses_ddp_when_a_replica_cannot_fit():
    big = trace(20 * GIB, "a100 (modelled: 40% of 312 TFLOP/s bf16 dense)")  # 160 GiB > 80
    rec = advise(big, MODEL, 4, AdviceSettings("big.csv", "synthetic", iterations=2))
    assert rec.fits is False
    out = rec.to_dict()
    assert out["recommendation"] == DOES_NOT_FIT
    assert out["memory"]["needed_bytes"] == 160 * GIB and not out["memory"]["fits"]
    assert out["device"].startswith("a100")
    assert rec.notes[0].startswith("memory: a full DDP replica DOES NOT FIT")
    text = render(rec)
    assert "RECOMMENDATION: none: DDP cannot run this model on this GPU" in text
    assert "RECOMMENDATION: keep" not in text and "RECOMMENDATION: use" not in text


def test_advise_that_fits_is_unchanged():
    small = trace(GIB, "a100")
    rec = advise(small, MODEL, 4, AdviceSettings("small.csv", "synthetic", iterations=2))
    assert rec.fits is True and rec.to_dict()["recommendation"] != DOES_NOT_FIT
    unknown = advise(trace(GIB, "cpu"), MODEL, 4,
                     AdviceSettings("c.csv", "synthetic", iterations=2))
    assert unknown.fits is None and unknown.to_dict()["memory"] is None
