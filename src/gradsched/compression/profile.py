"""Timing each compressor's own computation (selection, packing, scatter) per bucket size
on this machine: the measurements that
:func:`gradsched.compression.pricing.compute_cost_from_profile` fits."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch

from gradsched.compression import make_compressor
from gradsched.compression.base import LocalComm
from gradsched.errors import ConfigError

PROFILE_COLUMNS = ["method", "density", "world_size", "numel", "bytes", "compute_s",
                   "compute_s_min", "reps", "threads"]


def profile_compressors(methods: Sequence[str], densities: Sequence[float],
                        sizes: Sequence[int], world_size: int = 4, reps: int = 7,
                        threads: int = 1, seed: int = 0) -> Any:
    """Time each compressor's own computation (median of ``reps`` calls after one warm-up)
    per bucket size, in this process, with :class:`~gradsched.compression.base.LocalComm`
    standing in for ``world_size`` ranks (the collectives become copies, which are
    included: an all-gather's output is built as on ``world_size`` ranks). Dense is timed
    once (its compute is the division by P). Returns a frame of :data:`PROFILE_COLUMNS`."""
    if reps < 1:
        raise ConfigError("reps must be >= 1")
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    rows = []
    try:
        for method in methods:
            for density in ([1.0] if method == "dense" else densities):
                comp = make_compressor(method, density, momentum=0.9 if method != "dense"
                                       else 0.0, seed=seed)
                for n in sizes:
                    if method == "gtopk" and world_size & (world_size - 1):
                        continue
                    gen = torch.Generator().manual_seed(seed + n)
                    grad = torch.randn(int(n), generator=gen)
                    param = torch.randn(int(n), generator=gen)
                    state = comp.init_state(int(n))
                    comm = LocalComm(world_size, 0)
                    comp.compress_and_reduce(grad, param, state, comm, 0)  # warm-up
                    samples = []
                    for r in range(reps):
                        t0 = time.perf_counter()
                        comp.compress_and_reduce(grad, param, state, comm, r + 1)
                        samples.append(time.perf_counter() - t0)
                    rows.append({"method": method, "density": float(comp.density),
                                 "world_size": world_size, "numel": int(n), "bytes": 4 * int(n),
                                 "compute_s": statistics.median(samples),
                                 "compute_s_min": min(samples), "reps": reps,
                                 "threads": threads})
    finally:
        torch.set_num_threads(old_threads)
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)
