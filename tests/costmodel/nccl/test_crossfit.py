"""Leave-world-sizes-out on the public ABCI series, the metadata a cross fit writes, and
the domain of the nccl model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gradsched.cli import main
from gradsched.costmodel import load_comm_spec
from gradsched.costmodel.crossws import CrossSettings, cross_world_size
from gradsched.costmodel.domain import BASIS_EXTRAPOLATED, BASIS_MEASURED
from gradsched.costmodel.nccl.crossfit import NCCLSettings

REPO = Path(__file__).resolve().parents[3]
EXT = REPO / "traces" / "comm" / "external"
A100 = [EXT / f"nccl-abci-inter-anode-{n}.csv" for n in (2, 4, 8, 16)]
V100 = [EXT / f"nccl-abci-inter-vnode-{n}.csv" for n in (2, 4, 8, 16, 32)]
EXTRAPOLATION_KEYS = {"fit_world_sizes", "validated_world_sizes", "median_ape_pct",
                      "max_ape_pct"}


def _predicted(paths: list[Path], fit_on: int, **kw) -> list[float]:
    (res,) = cross_world_size(paths, CrossSettings((fit_on,), **kw))
    return [r["mape_pct"] for r in res.rows if r["role"] == "predicted"]


# Measured (fitted on 2 nodes, default settings, this commit): A100 8.1 / 9.0 / 13.2 % at
# 4 / 8 / 16 nodes (fit residual 4.9 %), V100 8.6 / 10.4 / 11.2 / 11.0 % at 4 / 8 / 16 / 32
# nodes (fit residual 6.5 %; every V100 sweep inside one full-bisection rack, no fabric
# slowdown); ring analytic 39-235 % and 31-249 %. Before the tree's fill moved at the rate
# of a small collective's channels, the fabric slowed the wire alone (and not inside a
# full-bisection domain) and the LL / LL128 efficiencies stopped at their wire format
# instead of at 1: A100 9.8 / 11.2 / 18.5 % (residual 5.3 %), V100 12.9 / 16.5 / 17.4 /
# 12.1 % (residual 6.9 %). The bounds fail on a regression of ~1.5 points.
@pytest.mark.parametrize(("paths", "fit_on", "median_max", "worst_max"),
                         [(A100, 16, 10.5, 14.5), (V100, 8, 12.0, 12.5)])
def test_nccl_model_predicts_the_abci_node_counts(paths, fit_on, median_max,
                                                  worst_max) -> None:
    nccl = _predicted(paths, fit_on, method="nccl")
    ring = _predicted(paths, fit_on, method="analytic", algorithm="ring")
    assert len(nccl) == len(paths) - 1
    assert float(np.median(nccl)) <= median_max
    assert max(nccl) <= worst_max
    assert max(nccl) < min(ring) or float(np.median(nccl)) < 0.25 * float(np.median(ring))


@pytest.mark.xfail(strict=True, reason="the issue's target (median <= 10 %, worst <= 30 %) "
                   "is not met: 10.4 % median, 13.2 % worst over the 7 predicted node counts "
                   "(the worst is met, the median is not)")
def test_issue_target_median_10_worst_30_on_every_series() -> None:
    values = _predicted(A100, 16, method="nccl") + _predicted(V100, 8, method="nccl")
    assert float(np.median(values)) <= 10.0 and max(values) <= 30.0


def test_the_fabric_slowdown_leaves_the_fitted_scale_alone() -> None:
    # the slowdown is 1 at the fitted node count: the fit and its residual do not depend on
    # it, only the predicted node counts do (validation data, never fitted)
    with_fabric = cross_world_size(A100, CrossSettings((16,), method="nccl"))[0].rows
    without = cross_world_size(A100, CrossSettings(
        (16,), method="nccl", nccl=NCCLSettings(fabric="none")))[0].rows
    fitted = [(a["mape_pct"], b["mape_pct"]) for a, b in zip(with_fabric, without, strict=True)
              if a["role"] == "fitted"]
    assert fitted and all(a == b for a, b in fitted)
    assert any(a["mape_pct"] != b["mape_pct"] for a, b in zip(with_fabric, without,
                                                             strict=True))


def test_written_model_records_its_domain_and_extrapolation(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    assert main(["fit", "--cross-world-size", *map(str, A100), "--fit-on", "16", "-o",
                 str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["kind"] == "nccl"
    meta = data["meta"]
    assert set(meta["extrapolation"]) == EXTRAPOLATION_KEYS
    assert meta["extrapolation"]["fit_world_sizes"] == [16]
    assert meta["extrapolation"]["validated_world_sizes"] == [32, 64, 128]
    assert meta["extrapolation"]["max_ape_pct"] >= meta["extrapolation"]["median_ape_pct"] > 0
    assert meta["fit_world_sizes"] == [16] and meta["fit_nodes"] == [2]
    assert meta["domain"][0]["max_bytes"] == 2**25
    assert data["hardware"]["gpus_per_node"] == 8
    assert data["hardware"]["nccl_version"] == "2.8.4"
    model = load_comm_spec(out)
    assert model.world_size_basis(16) == BASIS_MEASURED
    assert model.world_size_basis(512) == BASIS_EXTRAPOLATED
    assert model.measured_bytes("all_reduce", 16) == (4.0, 2.0**25)
    assert model.time("all_reduce", 2**30, 1024) > model.time("all_reduce", 2**30, 16)


@pytest.mark.parametrize("method", ["analytic", "scaled"])
def test_formula_methods_record_their_extrapolation_too(tmp_path: Path, method: str) -> None:
    out = tmp_path / f"{method}.json"
    assert main(["fit", "--cross-world-size", *map(str, A100), "--fit-on", "16", "--method",
                 method, "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    metas = [data["meta"]] if method == "analytic" else [data["analytic"]["meta"],
                                                         data["base"]["meta"]]
    for meta in metas:
        assert set(meta["extrapolation"]) == EXTRAPOLATION_KEYS
        assert meta["extrapolation"]["validated_world_sizes"] == [32, 64, 128]
        assert meta["extrapolation"]["median_ape_pct"] > 30


def test_one_world_size_reports_its_residual_and_no_extrapolation(tmp_path: Path,
                                                                  capsys) -> None:
    out, table = tmp_path / "one.json", tmp_path / "one.csv"
    assert main(["fit", "--cross-world-size", str(A100[0]), "--fit-on", "16", "-o", str(out),
                 "--table", str(table)]) == 0
    captured = capsys.readouterr()
    assert "no other world size to predict" in captured.err
    assert "fitted   world_size=16" in captured.out
    ext = json.loads(out.read_text())["meta"]["extrapolation"]
    assert ext == {"fit_world_sizes": [16], "validated_world_sizes": [],
                   "median_ape_pct": None, "max_ape_pct": None}
    text = table.read_text()
    assert ",fitted," in text and ",predicted," not in text
