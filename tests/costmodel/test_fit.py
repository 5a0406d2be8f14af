"""Fitting comm models: the alpha-beta fit (relative error), ``gradsched fit``: held-out
error, the fit table, cross-world-size prediction.

Unit tests use SYNTHETIC traces; the real-data tests read the imported public logs
(traces/comm/external, or import them from the shared external folder on the fly).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.costmodel import load_comm_spec
from gradsched.costmodel.crossws import (
    CROSS_TABLE_COLUMNS,
    CrossSettings,
    cross_world_size,
    series_name,
)
from gradsched.costmodel.fit import (
    FIT_TABLE_COLUMNS,
    cross_validate,
    fit_alpha_beta,
    fit_alpha_beta_model,
    fit_file,
    fold_indices,
)
from gradsched.costmodel.formulas import cost
from gradsched.costmodel.piecewise import PiecewiseCurve
from tests.costmodel.test_base import SIZES, synthetic_comm_trace

REPO = Path(__file__).resolve().parents[2]


def _save(tmp: Path, name: str, series: dict, sizes: np.ndarray = SIZES) -> Path:
    path = tmp / f"{name}.csv"
    synthetic_comm_trace(series, sizes).save(path)
    return path


def test_folds_never_hold_out_the_end_sizes_and_reduce_with_a_note() -> None:
    sets, note = fold_indices(24, 5)
    held = np.concatenate(sets)
    assert note is None and len(sets) == 5
    assert sorted(held.tolist()) == list(range(1, 23))
    sets, note = fold_indices(6, 5)
    assert len(sets) == 4 and "4 folds instead of 5" in note
    sets, note = fold_indices(2, 5)
    assert sets == [] and "held-out error not computed" in note


def test_heldout_error_is_small_for_the_right_model_and_large_for_the_wrong_one() -> None:
    truth = PiecewiseCurve(20e-6, (8192.0, 1048576.0), (2e-9, 3e-10, 8e-11))
    t = truth.times(SIZES)
    assert cross_validate("piecewise", SIZES, t).heldout_ape.max() < 1.0
    assert cross_validate("interp", SIZES, t).heldout_ape.mean() < 5.0
    assert cross_validate("alpha-beta", SIZES, t).heldout_ape.mean() > 10.0


def test_fit_file_table_and_model(tmp_path: Path) -> None:
    pw = PiecewiseCurve(20e-6, (65536.0,), (2e-10, 8e-11))
    path = _save(tmp_path, "synthetic-a", {("all_reduce", 16, 2): pw.times(SIZES),
                                          ("all_gather", 16, 2): 0.5 * pw.times(SIZES)})
    fits = fit_file(path, ["alpha-beta", "piecewise", "interp"])
    assert len(fits) == 6
    for f in fits:
        if f.model != "alpha-beta":
            assert f.train_mape_pct < 1e-6 and f.heldout_mape_pct < 5
    rows = {(f.info["collective"], f.model): f.row() for f in fits}
    assert rows[("all_reduce", "interp")]["n_segments"] != rows[("all_reduce", "interp")][
        "n_segments"]  # NaN for interp
    assert rows[("all_reduce", "alpha-beta")]["n_segments"] == 1
    assert rows[("all_reduce", "piecewise")]["n_segments"] == 2
    assert math.isnan(rows[("all_reduce", "piecewise")]["beta_s_per_byte"])


def test_cli_fit_writes_exact_columns_deterministically(tmp_path: Path, capsys) -> None:
    pw = PiecewiseCurve(20e-6, (65536.0,), (2e-10, 8e-11))
    a = _save(tmp_path, "synthetic-a", {("all_reduce", 16, 2): pw.times(SIZES)})
    b = _save(tmp_path, "synthetic-b", {("all_reduce", 32, 4): 1.3 * pw.times(SIZES)})
    table = tmp_path / "fits.csv"
    assert main(["fit", str(a), str(b), "--model", "all", "--table", str(table)]) == 0
    first = table.read_bytes()
    frame = pd.read_csv(table)
    assert tuple(frame.columns) == FIT_TABLE_COLUMNS
    assert len(frame) == 6  # 2 files x 1 series x 3 models
    assert set(frame["trace"]) == {"synthetic-a", "synthetic-b"}
    assert main(["fit", str(a), str(b), "--model", "all", "--table", str(table)]) == 0
    assert table.read_bytes() == first
    out = capsys.readouterr().out
    assert "held-out MAPE" in out and "segments=2" in out
    model_path = tmp_path / "model.json"
    assert main(["fit", str(a), str(b), "-o", str(model_path)]) == 0
    model = load_comm_spec(str(model_path))
    assert model.kind == "piecewise"
    np.testing.assert_allclose(model.times("all_reduce", SIZES, 32), 1.3 * pw.times(SIZES),
                               rtol=1e-6)
    assert main(["fit", str(a), "--model", "all", "-o", str(model_path)]) == 2
    assert "writes one model" in capsys.readouterr().err


def test_cli_reduces_folds_for_short_series_and_warns_on_noise(tmp_path: Path, capsys) -> None:
    sizes = 2.0 ** np.arange(20, 26)  # 6 sizes, like a short sweep
    t = 1e-4 + 1e-10 * sizes
    t[3] *= 0.4  # a glitch: faster than the size below
    path = _save(tmp_path, "synthetic-short", {("all_reduce", 2, 2): t}, sizes)
    assert main(["fit", str(path), "--model", "all"]) == 0
    err = capsys.readouterr().err
    assert "4 folds instead of 5" in err
    assert "noisy series" in err


def test_cross_world_size_recovers_synthetic_ring_exactly(tmp_path: Path) -> None:
    alpha, beta = 3e-6, 6e-11
    paths = [_save(tmp_path, f"synthetic-ring-{n}",
                   {("all_reduce", 8 * n, n): cost("all_reduce", "ring", SIZES, 8 * n, alpha,
                                                   beta)})
             for n in (2, 4, 8, 16)]
    for source in ("alpha-beta", "piecewise"):
        for method in ("analytic", "scaled"):
            (res,) = cross_world_size(paths, CrossSettings(
                (16,), algorithm="ring", source=source, method=method))
            assert res.model.alpha == pytest.approx(alpha, rel=1e-6)
            assert res.model.beta == pytest.approx(beta, rel=1e-6)
            assert [r["predict_world_size"] for r in res.rows
                    if r["role"] == "predicted"] == [32, 64, 128]
            assert max(r["mape_pct"] for r in res.rows) < 1e-4
    # a wrong algorithm does not recover ring data at other world sizes
    (rd,) = cross_world_size(paths, CrossSettings((16,), algorithm="rd",
                                                  source="alpha-beta"))
    assert min(r["mape_pct"] for r in rd.rows if r["role"] == "predicted") > 1.0
    table = tmp_path / "cross.csv"
    argv = ["fit", "--cross-world-size", *map(str, paths), "--fit-on", "16,32", "--table",
            str(table), "--method", "analytic", "-o", str(tmp_path / "analytic.json")]
    assert main(argv) == 0
    frame = pd.read_csv(table)
    assert tuple(frame.columns) == CROSS_TABLE_COLUMNS
    assert frame["series"].unique().tolist() == ["synthetic-ring"]
    assert frame["fit_world_sizes"].unique().tolist() == ["16;32"]
    assert frame["mape_pct"].max() < 1e-4
    model = load_comm_spec(str(tmp_path / "analytic.json"))
    np.testing.assert_allclose(model.times("all_reduce", SIZES, 1000),
                               cost("all_reduce", "ring", SIZES, 1000, alpha, beta), rtol=1e-6)
    argv = ["fit", "--cross-world-size", *map(str, paths), "--fit-on", "16", "--method",
            "scaled", "--algorithm", "ring", "-o", str(tmp_path / "scaled.json")]
    assert main(argv) == 0
    scaled = load_comm_spec(str(tmp_path / "scaled.json"))
    assert scaled.kind == "scaled"
    np.testing.assert_allclose(scaled.times("all_reduce", SIZES, 128),
                               cost("all_reduce", "ring", SIZES, 128, alpha, beta), rtol=1e-6)
    table2 = tmp_path / "cross2.csv"
    argv = ["fit", "--cross-world-size", *map(str, paths), "--fit-on", "16", "--method",
            "both", "--algorithm", "ring,dbt", "--table", str(table2)]
    assert main(argv) == 0
    assert sorted(pd.read_csv(table2)["algorithm"].unique()) == [
        "dbt", "ring", "scaled:dbt", "scaled:ring"]


def test_cross_world_size_errors_name_the_available_sizes(tmp_path: Path, capsys) -> None:
    p = _save(tmp_path, "synthetic-x-2", {("all_reduce", 16, 2): 1e-5 + 1e-10 * SIZES})
    assert main(["fit", "--cross-world-size", str(p), "--fit-on", "64"]) == 2
    assert "it has 16" in capsys.readouterr().err
    assert main(["fit", "--cross-world-size", str(p)]) == 2
    assert "--fit-on" in capsys.readouterr().err


def test_series_name() -> None:
    assert series_name(["nccl-abci-inter-anode-2", "nccl-abci-inter-anode-16"]) == \
        "nccl-abci-inter-anode"
    assert series_name(["a-8"]) == "a"


# ----------------------------------------------------------------------------- real data


def _external() -> Path | None:
    for cand in (REPO.parent / "shared" / "data" / "external",
                 REPO / "shared" / "data" / "external"):
        if cand.is_dir():
            return cand
    return None


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory):
    """Path of an imported public log: the committed trace, else imported on the fly."""
    cache: dict[str, Path] = {}

    def get(stem: str, kind: str = "nccl-tests") -> Path:
        prefix = "nccl" if kind == "nccl-tests" else "osu"
        committed = REPO / "traces" / "comm" / "external" / f"{prefix}-{stem}.csv"
        if committed.is_file():
            return committed
        if stem in cache:
            return cache[stem]
        ext = _external()
        if ext is None:
            pytest.skip("neither traces/comm/external nor the shared external data exist")
        out = tmp_path_factory.mktemp("real") / f"{prefix}-{stem}.csv"
        if kind == "nccl-tests":
            from gradsched.traces.importers.nccl_tests import import_nccl_tests
            result = import_nccl_tests(ext / "nccl-tests" / f"{stem}.txt")
        else:
            pytest.skip(f"{committed} has not been imported")
        result.comm.save(out)
        cache[stem] = out
        return out

    return get


# Measured 2026-11-23 (5 folds, out of place): piecewise held-out MAPE 2.8 / 2.5 / 2.8 / 6.2 %
# at 2 / 4 / 8 / 16 nodes; alpha-beta 16.4 / 16.9 / 12.4 / 16.2 %. Bounds leave ~2x margin.
@pytest.mark.parametrize(("nodes", "bound"), [(2, 6.0), (4, 6.0), (8, 6.0), (16, 12.0)])
def test_real_abci_a100_piecewise_heldout_error(real_trace, nodes: int, bound: float) -> None:
    path = real_trace(f"abci-inter-anode-{nodes}")
    fits = {f.model: f for f in fit_file(path, ["piecewise", "alpha-beta"])}
    pw, ab = fits["piecewise"], fits["alpha-beta"]
    assert pw.heldout_mape_pct < bound
    assert pw.heldout_mape_pct < 0.6 * ab.heldout_mape_pct  # protocol regimes matter
    assert 2 <= pw.curve.n_segments <= 4


def test_real_short_and_noisy_files_do_not_crash(real_trace, capsys) -> None:
    gh200 = real_trace("cscs-alps-gh200-2node-allreduce")
    assert main(["fit", str(gh200), "--model", "all"]) == 0
    out = capsys.readouterr().out
    assert "8 sizes" in out


# Measured: dbt fitted at 16,32 ranks (2,4 nodes) predicts 64 / 128 ranks with MAPE
# 16.0 / 11.1 %; ring (whose latency grows with 2(P-1)) 68 / 156 %.
def test_real_abci_a100_cross_world_size(real_trace) -> None:
    paths = [real_trace(f"abci-inter-anode-{n}") for n in (2, 4, 8, 16)]
    (dbt,) = cross_world_size(paths, CrossSettings((16, 32), algorithm="dbt"))
    (ring,) = cross_world_size(paths, CrossSettings((16, 32), algorithm="ring"))
    assert [r["predict_world_size"] for r in dbt.rows if r["role"] == "predicted"] == [64, 128]
    assert max(r["mape_pct"] for r in dbt.rows) < 30
    assert min(r["mape_pct"] for r in ring.rows if r["role"] == "predicted") > max(
        r["mape_pct"] for r in dbt.rows if r["role"] == "predicted")


def test_alpha_beta_fit_recovers_known_parameters() -> None:
    alpha, beta = 12e-6, 7.5e-11
    curve = fit_alpha_beta(SIZES, alpha + beta * SIZES)
    assert curve.alpha_s == pytest.approx(alpha, rel=1e-9)
    assert curve.beta_s_per_byte == pytest.approx(beta, rel=1e-9)
    model = fit_alpha_beta_model(SIZES, alpha + beta * SIZES)
    assert model.time("all_reduce", 1e6, 8) == pytest.approx(alpha + beta * 1e6, rel=1e-9)


def test_alpha_beta_fit_minimises_relative_not_absolute_error() -> None:
    # one wild point at the largest size must not wreck the small-message latency
    t = 10e-6 + 1e-10 * SIZES
    t[-1] *= 3
    curve = fit_alpha_beta(SIZES, t)
    assert curve.alpha_s == pytest.approx(10e-6, rel=0.05)


@pytest.mark.parametrize("kind", ["interp", "piecewise", "alpha-beta"])
def test_a_fitted_model_keeps_the_backend_its_trace_measured(tmp_path: Path, kind: str) -> None:
    """Horovod's loop blocks on mpi and gloo (planners/horovod.py): the real K80 case (B-Caffe,
    MPI) must plan the same from its fitted model as from the trace itself."""
    from gradsched.planners import make_plan
    from gradsched.traces.bundle import ComputeTrace

    comm = "traces/comm/external/bcaffe-googlenet-tmp8comm.csv"
    out = tmp_path / "model.json"
    assert main(["fit", comm, "--model", kind, "-o", str(out)]) == 0
    fitted = load_comm_spec(out)
    assert fitted.meta["backend"] == "mpi"
    assert load_comm_spec(comm).meta["backend"] == "mpi"
    if kind == "interp":  # the same curves: the same plan
        trace = ComputeTrace.load("traces/compute/bcaffe/googlenet-tmp8comm.csv")
        from_trace = make_plan("horovod", trace, load_comm_spec(comm), 8, {})
        from_fit = make_plan("horovod", trace, fitted, 8, {})
        assert from_fit.knobs["backend"] == "mpi"
        assert [b.tensors for b in from_fit.buckets] == [b.tensors for b in from_trace.buckets]
