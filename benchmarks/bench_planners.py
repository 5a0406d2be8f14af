"""Planner benchmarks on SYNTHETIC traces (never measurements).

* the exact DP (``oasr`` / ``contiguous_optimum``) on a 10,000-tensor model,
  with the alpha-beta model and a non-linear synthetic model (target: < 2 s);
* every planner with its defaults on a 1,000-tensor model.

Run with pytest-benchmark::

    .venv/bin/pytest benchmarks/bench_planners.py --benchmark-only

or as a script for a plain table: ``.venv/bin/python benchmarks/bench_planners.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.costmodel.base import CommModel
from gradsched.experiments import make_plan
from gradsched.planners import ALGORITHMS_ALL
from gradsched.traces import ComputeTrace

WORLD_SIZE = 16
META = {
    "kind": "compute", "model": "bench", "batch_size": 1, "device": "none", "dtype": "fp32",
    "world_size": 1, "software": {}, "capture_method": "synthetic", "iterations": None,
    "date": "2026-11-23", "source": "SYNTHETIC benchmark trace, not measured",
}


class KneeModel(CommModel):
    """SYNTHETIC non-linear model: a protocol switch at 64 KiB plus a sqrt term."""

    kind: ClassVar[str] = "synthetic-knee"

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        m = np.asarray(nbytes, dtype=float)
        return np.where(m < 65536, 2e-5 + 2e-9 * m, 6e-5 + 1e-9 * m) + 1e-8 * np.sqrt(m)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KneeModel:
        return cls()


def bench_trace(n: int, seed: int = 0, per_layer: int = 2) -> ComputeTrace:
    """A SYNTHETIC n-tensor trace, ``per_layer`` tensors per layer (weight + bias-like),
    log-uniform sizes from 1 KiB to 16 MiB, ~150 ms of backward in total."""
    rng = np.random.default_rng(seed)
    numel = np.exp(rng.uniform(np.log(256), np.log(4 << 20), size=n)).astype(np.int64)
    backward = rng.uniform(0.2, 1.8, size=n) * 0.15 / n
    frame = pd.DataFrame({
        "name": [f"l{i // per_layer}.p{i % per_layer}" for i in range(n)],
        "layer": np.arange(n) // per_layer,
        "numel": numel,
        "bytes": numel * 4,
        "forward_s": backward / 2,
        "backward_s": backward,
        "ready_order": np.arange(n)[::-1],
    })
    return ComputeTrace.from_frame(frame, META | {"model": f"bench-{n}"})


MODELS: dict[str, CommModel] = {
    "alpha-beta": AlphaBetaModel(5e-5, 1 / 10e9),  # 50 us, 10 GB/s
    "knee": KneeModel(),
}


@pytest.fixture(scope="module")
def trace_10k() -> ComputeTrace:
    return bench_trace(10_000)


@pytest.fixture(scope="module")
def trace_1k() -> ComputeTrace:
    return bench_trace(1_000)


@pytest.mark.parametrize("model_name", sorted(MODELS))
@pytest.mark.parametrize("planner", ["oasr", "contiguous_optimum"])
def test_dp_10k(benchmark: Any, trace_10k: ComputeTrace, planner: str,
                model_name: str) -> None:
    knobs = {}
    plan = benchmark.pedantic(make_plan, args=(planner, trace_10k, MODELS[model_name],
                                               WORLD_SIZE, knobs), rounds=2, iterations=1)
    plan.check_covers(trace_10k.names)
    assert benchmark.stats.stats.mean < 2.0


@pytest.mark.parametrize("planner", ALGORITHMS_ALL)
def test_planner_1k(benchmark: Any, trace_1k: ComputeTrace, planner: str) -> None:
    plan = benchmark.pedantic(make_plan, args=(planner, trace_1k, MODELS["alpha-beta"],
                                               WORLD_SIZE), rounds=1, iterations=1)
    plan.check_covers(trace_1k.names)


def main() -> int:
    """Print one line per benchmark (seconds, best of the rounds)."""
    from gradsched.replay import replay

    def timed(fn: Any, rounds: int) -> tuple[float, Any]:
        best, out = float("inf"), None
        for _ in range(rounds):
            t0 = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t0)
        return best, out

    big, small = bench_trace(10_000), bench_trace(1_000)
    print(f"# planners, synthetic traces, world size {WORLD_SIZE}")
    for model_name, model in MODELS.items():
        for planner in ("oasr", "contiguous_optimum"):
            knobs = {}
            sec, plan = timed(lambda p=planner, m=model, k=knobs:
                              make_plan(p, big, m, WORLD_SIZE, k), 2)
            print(f"dp 10000 tensors  {planner:13s} {model_name:10s} {sec:7.3f} s  "
                  f"{plan.n_buckets} buckets")
    model = MODELS["alpha-beta"]
    for planner in ALGORITHMS_ALL:
        sec, plan = timed(lambda p=planner: make_plan(p, small, model, WORLD_SIZE), 1)
        it = replay(small, plan, model, WORLD_SIZE).iteration_s
        print(f"1000 tensors      {planner:13s} {sec:7.3f} s  {plan.n_buckets:5d} buckets  "
              f"replay iteration {it * 1e3:8.3f} ms")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
