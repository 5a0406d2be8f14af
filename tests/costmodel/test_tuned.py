"""Formula fits and the ``tuned`` model (measured, formulas or both; JSON round trip)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.collectives import lp
from gradsched.costmodel import load_comm_spec
from gradsched.costmodel.formulas import best_cost, cost
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
