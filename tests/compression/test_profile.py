"""Profiling the compressors' compute cost, its linear fit, and ``gradsched compress profile``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.compression.pricing import (
    compute_cost_from_profile,
)
from gradsched.compression.profile import profile_compressors


def test_profile_and_fit() -> None:
    frame = profile_compressors(["dense", "topk"], [1 / 64], [1 << 10, 1 << 14], world_size=2,
                                reps=2)
    assert list(frame["method"]) == ["dense", "dense", "topk", "topk"]
    assert (frame["compute_s"] > 0).all()
    cost = compute_cost_from_profile(frame, "topk", 1 / 64)
    assert cost.intercept_s >= 0 and cost.s_per_element >= 0
    synthetic = pd.DataFrame({"method": "topk", "density": 1 / 64, "world_size": 4,
                              "numel": [1e3, 1e4, 1e5], "compute_s": [1e-5 + 2e-9 * x
                                                                       for x in (1e3, 1e4, 1e5)]})
    fit = compute_cost_from_profile(synthetic, "topk", 1 / 64)
    assert fit.intercept_s == pytest.approx(1e-5, rel=1e-6)
    assert fit.s_per_element == pytest.approx(2e-9, rel=1e-6)


def test_profile_cli(tmp_path: Path) -> None:
    from gradsched.cli import main

    out = tmp_path / "profile.csv"
    assert main(["compress", "profile", "--methods", "dense,importance", "--densities",
                 "1/16", "--sizes", "1K,4K", "--reps", "1", "--world-size", "2",
                 "-o", str(out)]) == 0
    frame = pd.read_csv(out)
    assert len(frame) == 4 and (frame["compute_s"] > 0).all()
    assert (tmp_path / "profile.meta.json").is_file()
