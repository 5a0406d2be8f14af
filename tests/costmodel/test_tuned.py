"""Formula fits, the ``tuned`` model, LP chunking and the bench/report plumbing."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.collectives import algorithms, get, get_allreduce, lp
from gradsched.collectives.common import block_bounds, fold_rank, unfold_rank
from gradsched.costmodel import load_comm_spec
from gradsched.costmodel.formulas import best_cost, cost, optimal_chunk
from gradsched.costmodel.interp import InterpCurve
from gradsched.costmodel.tuned import (
    TunedModel,
    build_tuned,
    fit_formulas,
    fits_to_json,
    load_samples,
)
from gradsched.errors import ConfigError
from gradsched.traces import CommTrace

TRUE = (5e-5, 4e-10, 2e-10)  # alpha, beta, gamma
ALGS = ("lp", "ring", "mst", "rd", "rhd")
SIZES = [4 * 4**k for k in range(12)]  # 4 B .. 16 MiB


def synthetic_trace(path: Path, world_sizes=(2, 3, 4), params=TRUE, network=None,
                    noise: float = 0.0, sizes: list[int] = SIZES) -> Path:
    """A bench-like trace whose times lie on the formulas (LP with recorded chunks)."""
    rng = np.random.default_rng(0)
    link = lp.LinkParams(*params)
    rows, chunks = [], {}
    for p in world_sizes:
        for alg in (*ALGS, "default"):
            for m in sizes:
                if alg == "lp":
                    b = 4 * lp.chunk_elements(m // 4, 4, "all_reduce", p, None, link)
                    chunks.setdefault(str(p), {})[str(m)] = b
                    t = cost("all_reduce", "lp", m, p, *params, chunk_bytes=b)
                elif alg == "default":
                    t = cost("all_reduce", "ring", m, p, *params) * 1.1
                else:
                    t = cost("all_reduce", alg, m, p, *params)
                t = float(np.asarray(t)) * (1 + noise * rng.standard_normal())
                rows.append({"collective": "all_reduce", "backend": "gloo", "algorithm": alg,
                             "world_size": p, "nodes": p if network else 1, "in_place": True,
                             "bytes": m, "time_s": t, "time_min_s": t * 0.9,
                             "time_max_s": t * 1.2})
    meta = {"kind": "comm", "source": "synthetic", "hardware": "none", "statistic": "median",
            "lp_chunk_bytes": chunks, "settings": {"cluster_rate": network}}
    CommTrace.from_frame(pd.DataFrame(rows), meta).save(path)
    return path


def test_fit_recovers_the_formula_parameters(tmp_path: Path) -> None:
    path = synthetic_trace(tmp_path / "syn.csv")
    fits, errors = fit_formulas(load_samples([path]))
    (fit,) = fits
    assert fit.network == "loopback"
    a, b, g = fit.joint
    assert a == pytest.approx(TRUE[0], rel=1e-3)
    assert b == pytest.approx(TRUE[1], rel=1e-3)
    assert g == pytest.approx(TRUE[2], rel=1e-2)
    for alg in ALGS:
        assert fit.mape_pct[alg] < 0.1
    assert set(errors["algorithm"]) == set(ALGS)  # default is not fitted
    assert errors["rel_err_pct"].abs().max() < 1.0
    doc = fits_to_json(fits, ["syn"])
    assert doc["networks"]["loopback"]["joint"]["alpha_s"] == pytest.approx(TRUE[0], rel=1e-3)


def test_fit_reports_disagreement(tmp_path: Path) -> None:
    path = synthetic_trace(tmp_path / "noisy.csv", noise=0.2)
    fits, errors = fit_formulas(load_samples([path]))
    assert 5.0 < fits[0].mape_pct["joint"] < 40.0
    assert {"per-algorithm", "joint"} == set(errors["fit"])


def test_tuned_measured_picks_the_fastest(tmp_path: Path) -> None:
    path = synthetic_trace(tmp_path / "syn.csv")
    model = build_tuned([path], source="measured")
    frame = CommTrace.load(path).frame
    for p in (2, 3, 4):
        sel = frame[frame["world_size"] == p]
        for m in (SIZES[0], SIZES[5], SIZES[-1]):
            at = sel[sel["bytes"] == m].set_index("algorithm")["time_s"]
            assert model.choose("all_reduce", m, p) == at.idxmin()
            assert model.time("all_reduce", m, p) == pytest.approx(at.min(), rel=1e-6)
    assert model.world_sizes() == (2, 3, 4)
    with pytest.raises(ConfigError, match="world size 8"):
        model.time("all_reduce", 1e6, 8)
    # Another collective is derived from all-reduce (ring factors) when not measured.
    assert model.time("all_gather", 1e6, 4) == pytest.approx(
        0.5 * model.time("all_reduce", 1e6, 4))
    # Candidates restrict the choice.
    only = build_tuned([path], source="measured", candidates=["mst", "rd"])
    assert only.choose("all_reduce", SIZES[-1], 4) in ("mst", "rd")


def test_tuned_json_round_trip_and_comm_spec(tmp_path: Path) -> None:
    path = synthetic_trace(tmp_path / "syn.csv")
    model = build_tuned([path], source="both")
    out = tmp_path / "tuned.json"
    model.save(out)
    loaded = load_comm_spec(str(out))
    assert isinstance(loaded, TunedModel)
    sizes = np.asarray([4.0, 1e3, 1e5, 1e7])
    assert np.allclose(loaded.times("all_reduce", sizes, 3), model.times("all_reduce", sizes, 3))
    assert loaded.world_sizes() is None  # formulas predict any P
    # At an unmeasured P the fitted formulas decide (matches best_cost of those formulas).
    a, b, g = TRUE
    t8 = loaded.time("all_reduce", 1e6, 8)
    assert t8 == pytest.approx(float(best_cost("all_reduce", 1e6, 8, a, b, g)[0]), rel=1e-2)
    assert loaded.choose("all_reduce", 1e6, 8) in ALGS
    assert json.loads(out.read_text())["kind"] == "tuned"


def test_tuned_needs_something() -> None:
    with pytest.raises(ConfigError):
        TunedModel()
    curve = InterpCurve.from_points(np.array([4.0, 8.0]), np.array([1e-5, 2e-5]))[0]
    model = TunedModel({"all_reduce": {2: {"ring": curve}}})
    assert model.choose("all_reduce", 6, 2) == "ring"


def test_several_networks_need_a_choice(tmp_path: Path) -> None:
    a = synthetic_trace(tmp_path / "a.csv", world_sizes=(2, 4), sizes=SIZES[::2])
    b = synthetic_trace(tmp_path / "b.csv", params=(1e-4, 8e-9, 2e-10), network="1gbit",
                        world_sizes=(2, 4), sizes=SIZES[::2])
    fits, _ = fit_formulas(load_samples([a, b]))
    assert sorted(f.network for f in fits) == ["1gbit", "loopback"]
    with pytest.raises(ConfigError, match="--network"):
        build_tuned([a, b])
    assert build_tuned([a, b], network="1gbit").meta["network"] == "1gbit"


def test_lp_chunking_follows_the_formula() -> None:
    link = lp.DEFAULT_LINK
    m = 1 << 22
    b = lp.optimal_chunk_bytes("all_reduce", m, 4, link)
    assert b == pytest.approx(float(optimal_chunk("all_reduce", "lp", np.array([m]), 4,
                                                  link.alpha_s, link.beta_s_per_byte,
                                                  link.gamma_s_per_byte)[0]))
    elems = lp.chunk_elements(m // 4, 4, "all_reduce", 4, None, link)
    assert elems == int(b // 4)
    # At least one element, at most MAX_CHUNKS chunks, never more than the vector.
    assert lp.chunk_elements(10, 4, "all_reduce", 4, chunk_bytes=1) == 1
    assert lp.chunk_elements(10**6, 4, "all_reduce", 4, chunk_bytes=4) == math.ceil(
        10**6 / lp.MAX_CHUNKS)
    assert lp.chunk_elements(5, 4, "broadcast", 3, chunk_bytes=1 << 20) == 5


def test_partition_and_folding() -> None:
    for n in (0, 1, 5, 7, 100):
        for k in (1, 2, 3, 4, 5, 8):
            bounds = block_bounds(n, k)
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(b[1] == c[0] for b, c in itertools.pairwise(bounds))
            sizes = [b - a for a, b in bounds]
            assert max(sizes) - min(sizes) <= 1
    for p in range(1, 12):
        active = [fold_rank(r, p) for r in range(p)]
        pof2 = active[0][1]
        news = sorted(n for n, _, _ in active if n >= 0)
        assert news == list(range(pof2))
        for r, (new, _, rem) in enumerate(active):
            if new >= 0:
                assert unfold_rank(new, rem) == r


def test_registry() -> None:
    assert algorithms("all_reduce") == ["default", "lp", "ring", "mst", "rd", "rhd"]
    assert callable(get_allreduce("rhd"))
    assert get("broadcast", "lp") is lp.broadcast
    with pytest.raises(ConfigError):
        get_allreduce("dbt")
    with pytest.raises(ConfigError):
        algorithms("alltoall")


def test_report_writes_figures_and_tables(tmp_path: Path) -> None:
    from gradsched.io import write_csv_atomic, write_json_atomic
    from gradsched.report.collectives import summary_rows, write_all

    b = synthetic_trace(tmp_path / "b.csv", params=(1e-4, 8e-9, 2e-10), network="1gbit",
                        world_sizes=(2, 4), sizes=SIZES[::2])
    fits, errors = fit_formulas(load_samples([b]))
    fit_json, err_csv = tmp_path / "fit.json", tmp_path / "err.csv"
    write_json_atomic(fit_json, fits_to_json(fits, ["b"]))
    write_csv_atomic(err_csv, errors)
    written = write_all([b], fit_json, err_csv, tmp_path / "fig", tmp_path / "tab")
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    rows = summary_rows(load_samples([b]), {f.network: f for f in fits})
    # On formula data the measured LP/RHD ratio equals the formula's.
    assert np.allclose(rows["lp_rhd_bw_measured"], rows["lp_rhd_bw_model"], rtol=0.05)
    md = (tmp_path / "tab" / "collectives-summary.md").read_text()
    assert "LP/RHD bw measured" in md and "1gbit" in md


def test_bench_command_end_to_end(tmp_path: Path) -> None:
    """A tiny real sweep (P=2, gloo on loopback) through the CLI, with --tuned-out."""
    from gradsched.cli import main

    out, tuned = tmp_path / "b.csv", tmp_path / "t.json"
    code = main(["bench", "collectives", "--algorithms", "default,lp,rhd", "--world-size", "2",
                 "--min-bytes", "4", "--max-bytes", "16", "--min-iters", "1", "--max-iters",
                 "2", "--target-s", "0.001", "--deadline-s", "100", "-o", str(out),
                 "--tuned-out", str(tuned)])
    assert code == 0
    trace = CommTrace.load(out)
    assert set(trace.frame["algorithm"]) == {"default", "lp", "rhd"}
    assert sorted(trace.frame["bytes"].unique()) == [4, 8, 16]
    assert trace.meta["lp_chunk_bytes"]["2"]
    model = load_comm_spec(str(tuned))
    assert model.choose("all_reduce", 16, 2) in ("default", "lp", "rhd")
