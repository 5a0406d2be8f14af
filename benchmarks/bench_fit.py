"""Cost-model benchmarks (run: make bench, or ``pytest benchmarks/bench_fit.py --benchmark-only``).

* fitting every shipped comm trace (``traces/comm/external/*.csv``) with every model,
  including the 5-fold held-out error (what ``gradsched fit --model all`` does);
* ``times()`` of every model kind on 10,000 message sizes (the planners' inner call).

The models timed by ``times()`` are SYNTHETIC (parameters chosen here, not measured).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gradsched.costmodel import (
    AlphaBetaModel,
    AlphaBetaSeriesModel,
    AnalyticModel,
    InterpModel,
    PiecewiseModel,
    ScaledModel,
)
from gradsched.costmodel.fit import FIT_MODELS, fit_file
from gradsched.costmodel.interp import InterpCurve
from gradsched.costmodel.piecewise import PiecewiseCurve

REPO = Path(__file__).resolve().parents[1]
TRACES = sorted((REPO / "traces" / "comm" / "external").glob("*.csv"))
SIZES = np.logspace(0, 10, 10_000)


def _fit_all(paths: list[Path]) -> int:
    return sum(len(fit_file(p, list(FIT_MODELS))) for p in paths)


def test_fit_every_shipped_comm_trace(benchmark) -> None:
    if not TRACES:
        pytest.skip("no comm traces under traces/comm/external")
    n = benchmark.pedantic(_fit_all, args=(TRACES,), rounds=1, iterations=1)
    assert n == 3 * n // 3 and n >= len(TRACES) * 3


def _synthetic_models() -> dict[str, object]:
    pw = PiecewiseCurve(30e-6, (4096.0, 1048576.0), (5e-9, 3e-10, 6e-11))
    grid = 2.0 ** np.arange(2, 31)
    interp = InterpCurve.from_points(grid, pw.times(grid))[0]
    return {
        "alpha-beta": AlphaBetaModel(1e-5, 1e-10),
        "alpha-beta-series": AlphaBetaSeriesModel({("all_reduce", 16): (1e-5, 1e-10)}),
        "piecewise": PiecewiseModel({("all_reduce", 16): pw}),
        "interp": InterpModel({("all_reduce", 16): interp}),
        "analytic-ring": AnalyticModel(2e-6, 5e-11, 0.0, "ring"),
        "analytic-dbt": AnalyticModel(2e-6, 5e-11, 0.0, "dbt"),
        "analytic-best": AnalyticModel(2e-6, 5e-11, 1e-11, "best"),
        "scaled": ScaledModel(PiecewiseModel({("all_reduce", 16): pw}),
                              AnalyticModel(2e-6, 5e-11, 0.0, "ring")),
    }


@pytest.mark.parametrize("kind", list(_synthetic_models()))
def test_times_on_10000_sizes(benchmark, kind: str) -> None:
    model = _synthetic_models()[kind]
    world = 64 if kind == "scaled" else 16
    out = benchmark(model.times, "all_reduce", SIZES, world)
    assert out.shape == SIZES.shape and np.all(np.diff(out) >= -1e-15)


if __name__ == "__main__":
    import time

    start = time.perf_counter()
    print(f"fit {len(TRACES)} traces x {len(FIT_MODELS)} models: {_fit_all(TRACES)} fits in "
          f"{time.perf_counter() - start:.2f} s")
    for name, model in _synthetic_models().items():
        world = 64 if name == "scaled" else 16
        reps = 200
        start = time.perf_counter()
        for _ in range(reps):
            model.times("all_reduce", SIZES, world)  # type: ignore[attr-defined]
        per = (time.perf_counter() - start) / reps
        print(f"times() {name:18s} 10,000 sizes: {per * 1e6:8.1f} us")
