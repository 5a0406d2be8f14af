"""Every prediction knows where it is valid: the measured sizes and world sizes a comm model
records, the share of a replay priced outside them, the warnings, and the extrapolation
rules at both ends of a sweep that begins in the bandwidth regime.

The sweeps here are SYNTHETIC (planted curves), labelled so in their metadata."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.costmodel.base import load_comm_spec
from gradsched.costmodel.crossws import CrossSettings, cross_world_size
from gradsched.costmodel.domain import (
    BASIS_EXTRAPOLATED,
    BASIS_MEASURED,
    RangeShares,
    out_of_range_shares,
    range_bounds,
    shares_warning,
)
from gradsched.costmodel.fit import build_model, fit_file
from gradsched.costmodel.interp import InterpCurve, upper_slope
from gradsched.costmodel.wire import check_series
from gradsched.experiments import compare
from gradsched.traces.bundle import CommTrace
from tests.conftest import synthetic_compute_trace

MIB = 2**20


def nccl_like(nbytes: np.ndarray, world_size: int = 8) -> np.ndarray:
    """A SYNTHETIC NCCL-like all-reduce: 20 us start-up, a rate that ramps from about
    10 GB/s at 1 MiB to a sustained 146 GB/s (busbw-like), as public lookup tables show."""
    m = np.asarray(nbytes, dtype=float)
    rate = 146e9 * m / (m + 12 * MIB)
    return 20e-6 + m / rate


def write_sweep(path: Path, nbytes: np.ndarray, times: np.ndarray, world_size: int = 8,
                collective: str | tuple[str, ...] = "all_reduce") -> Path:
    names = (collective,) if isinstance(collective, str) else collective
    frame = pd.concat([pd.DataFrame({
        "collective": name, "backend": "nccl", "algorithm": "default",
        "world_size": world_size, "nodes": 1, "in_place": False,
        "bytes": np.asarray(nbytes, dtype=np.int64), "time_s": times}) for name in names],
        ignore_index=True)
    meta = {"kind": "comm", "source": "SYNTHETIC test sweep, not measured",
            "hardware": "none", "statistic": "median"}
    CommTrace.from_frame(frame, meta).save(path)
    return path


def sweep_from_1mib(tmp_path: Path, world_size: int = 8) -> Path:
    sizes = MIB * 2 ** np.arange(0, 9)  # 1 MiB .. 256 MiB, as public nccl-tests tables
    return write_sweep(tmp_path / f"sweep-p{world_size}.csv", sizes, nccl_like(sizes),
                       world_size)


def small_gradient_trace():
    """A SYNTHETIC trace of 200 gradients far below 1 MiB (median about 16 KiB, 3 MiB in
    all)."""
    return synthetic_compute_trace(n=200, seed=3, bytes_scale=512)


def test_shares_split_time_below_inside_and_above() -> None:
    lo, hi = range_bounds([(10.0, 100.0)], np.zeros(4, dtype=int))
    shares = out_of_range_shares(lo, hi, np.array([1.0, 10.0, 100.0, 1e3]),
                                 np.array([1.0, 2.0, 3.0, 4.0]))
    assert shares.below_pct == pytest.approx(10.0)
    assert shares.above_pct == pytest.approx(40.0)
    unknown = out_of_range_shares(*range_bounds([None, (1.0, 2.0)], np.array([0, 1])),
                                  np.array([1.0, 2.0]), np.ones(2))
    assert np.isnan(unknown.below_pct) and not unknown.material()
    assert shares_warning(RangeShares(1.0, 2.0), "x", BASIS_MEASURED) is None
    assert "extrapolat" in shares_warning(RangeShares(0.0, 0.0), "x", BASIS_EXTRAPOLATED)
    assert "50.0 %" in shares_warning(shares, "wfbp", BASIS_MEASURED)


def test_replay_reports_the_share_priced_below_a_sweep_that_starts_at_1mib(
        tmp_path: Path) -> None:
    model = load_comm_spec(sweep_from_1mib(tmp_path))
    assert model.measured_bytes("all_reduce", 8) == (MIB, 256 * MIB)
    assert model.measured_bytes("reduce_scatter", 8) == (MIB, 256 * MIB)  # derived from AR
    rows = compare(small_gradient_trace(), model, 8, ["wfbp", "syncsgd"]).set_index(
        "algorithm")
    assert rows.loc["wfbp", "comm_below_range_pct"] > 90.0  # per-tensor: all tiny
    assert rows.loc["wfbp", "comm_above_range_pct"] == 0.0
    assert rows.loc["syncsgd", "comm_below_range_pct"] == 0.0  # one 3 MiB bucket
    assert (rows["world_size_basis"] == BASIS_MEASURED).all()


def test_replay_and_advise_warn_about_the_out_of_range_share(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = sweep_from_1mib(tmp_path)
    compute = tmp_path / "c.csv"
    small_gradient_trace().save(compute)
    assert main(["replay", "--compute", str(compute), "--comm", str(sweep),
                 "--algorithms", "wfbp,syncsgd", "-o", str(tmp_path / "r.csv")]) == 0
    err = capsys.readouterr().err
    assert "wfbp:" in err and "below the smallest" in err
    assert "syncsgd:" not in err
    assert main(["plan", "--compute", str(compute), "--comm", str(sweep),
                 "--algorithm", "wfbp", "-o", str(tmp_path / "p.json")]) == 0
    assert "outside the measured message sizes" in capsys.readouterr().err
    assert main(["advise", "--compute", str(compute), "--comm", str(sweep),
                 "--current-bucket-cap-mb", "0.001", "--json", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "note: domain: DDP's current setting" in out


def test_a_fitted_model_keeps_its_domain_through_json(tmp_path: Path) -> None:
    sweep = sweep_from_1mib(tmp_path)
    for kind in ("piecewise", "alpha-beta", "interp"):
        model = build_model(kind, fit_file(sweep, [kind]))
        model.save(tmp_path / f"{kind}.json")
        again = load_comm_spec(tmp_path / f"{kind}.json")
        assert again.measured_bytes("all_reduce", 8) == (MIB, 256 * MIB), kind
        assert again.world_size_basis(8) == BASIS_MEASURED


def test_a_scaled_model_marks_unmeasured_world_sizes_extrapolated(tmp_path: Path) -> None:
    paths = [sweep_from_1mib(tmp_path, w) for w in (2, 4, 8)]
    (fit,) = cross_world_size(paths, CrossSettings((2, 4), method="scaled"))
    model = fit.scaled
    assert model.world_size_basis(4) == BASIS_MEASURED
    assert model.world_size_basis(64) == BASIS_EXTRAPOLATED
    assert model.measured_bytes("all_reduce", 64) == (MIB, 256 * MIB)


def test_points_slower_than_the_sustained_rate_are_not_a_burst_and_not_lifted(
        tmp_path: Path) -> None:
    """A sweep that begins at 1 MiB: its smallest time includes a transfer, so it is not a
    start-up. The floor may not lift the model above measured points that run slower than
    the sustained bandwidth, and fit may not call them a burst."""
    sizes = MIB * 2 ** np.arange(0, 9)
    times = nccl_like(sizes)
    model = load_comm_spec(write_sweep(tmp_path / "s.csv", sizes, times))
    np.testing.assert_allclose(model.times("all_reduce", sizes, 8), times, rtol=1e-7)
    assert check_series(sizes, times, 8).flagged_bytes == ()


def test_a_real_burst_is_still_flagged() -> None:
    """A token bucket passing 64 KiB at host speed on a 12.5 MB/s link: faster than the
    wire with no start-up at all."""
    sizes = 4.0 * 2 ** np.arange(0, 22)
    times = 1e-4 + sizes / 12.5e6
    times[(sizes >= 4096) & (sizes <= 65536)] = 3e-4
    times = np.maximum.accumulate(times)
    assert 65536.0 in check_series(sizes, times, 2).flagged_bytes


def test_the_tail_above_the_largest_size_follows_the_upper_points_not_the_last_two() -> None:
    """1 MiB steps to 1 GiB with 1 % noise: the last two points alone give a slope set by
    the noise; the fitted upper region gives the sweep's own slope."""
    rng = np.random.default_rng(7)
    sizes = MIB * np.arange(1, 1025, dtype=float)
    true_slope = 1.0 / 146e9
    times = (2e-5 + sizes * true_slope) * (1 + 0.01 * rng.standard_normal(sizes.size))
    curve, _ = InterpCurve.from_points(sizes, times)
    assert upper_slope(np.asarray(curve.bytes_), np.asarray(curve.time_s)) == pytest.approx(
        true_slope, rel=0.05)
    beyond = curve.times(np.array([4 * sizes[-1]]))[0]
    assert beyond == pytest.approx(2e-5 + 4 * sizes[-1] * true_slope, rel=0.05)


def test_a_sharded_plan_below_its_sweep_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sizes = 64 * MIB * 2 ** np.arange(0, 5)  # every unit of the 3 MiB model is smaller
    sweep = write_sweep(tmp_path / "ag.csv", sizes, nccl_like(sizes) / 2, 8, "all_gather")
    compute = tmp_path / "c.csv"
    small_gradient_trace().save(compute)
    assert main(["shard", "plan", "--compute", str(compute), "--comm", str(sweep),
                 "--world-size", "8", "--algorithm", "fsdp2", "-o",
                 str(tmp_path / "p.json")]) == 0
    assert "below the smallest" in capsys.readouterr().err


def test_sharded_advice_notes_a_layout_priced_below_its_sweep(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sizes = 64 * MIB * 2 ** np.arange(0, 5)
    sweep = write_sweep(tmp_path / "sweep.csv", sizes, nccl_like(sizes) / 2, 8,
                        ("all_gather", "reduce_scatter"))
    compute = tmp_path / "c.csv"
    trace = synthetic_compute_trace(n=8, seed=3, bytes_scale=512)
    trace.frame["name"] = [f"blocks.{i}.weight" for i in range(8)]  # 8 FSDP2 blocks
    trace.save(compute)
    assert main(["advise", "--sharded", "--compute", str(compute), "--comm", str(sweep),
                 "--world-size", "8"]) == 0
    assert "note: domain: the FSDP2 default layout" in capsys.readouterr().out
