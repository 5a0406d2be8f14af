"""Every model kind says whether a world size was measured and which collectives it
measured; one module words the notes. The models here are PLANTED (made-up parameters and
SYNTHETIC sweeps, labelled so), except the contradiction test, which reads the committed
ABCI A100 sweeps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.compression import make_compressor
from gradsched.compression.pricing import CompressedCommModel
from gradsched.costmodel.base import AlphaBetaModel, load_comm_spec
from gradsched.costmodel.domain import BASIS_EXTRAPOLATED, BASIS_MEASURED, BASIS_UNKNOWN
from gradsched.costmodel.domain_notes import (
    Sweep,
    contradictions,
    derived_note,
    model_notes,
    world_size_note,
)
from gradsched.costmodel.formulas import AnalyticModel
from gradsched.costmodel.interp import InterpCurve
from gradsched.costmodel.ps import PSModel, ps_from_dict
from gradsched.costmodel.topology import Topology
from gradsched.costmodel.tuned import TunedModel
from gradsched.experiments.margin import model_margin
from gradsched.traces.bundle import CommTrace

MIB = 2**20
SYNTHETIC = "SYNTHETIC planted sweep for a test, not measured"


def planted_sweep(path: Path, world_size: int, collective: str = "all_reduce") -> Path:
    """An alpha-beta all-reduce sweep (20 us + 1 ns per byte), 4 KiB to 64 MiB."""
    sizes = 4096 * 2 ** np.arange(0, 15)
    frame = pd.DataFrame({"collective": collective, "backend": "nccl", "algorithm": "default",
                          "world_size": world_size, "nodes": 1, "in_place": False,
                          "bytes": sizes, "time_s": 2e-5 + sizes * 1e-9})
    CommTrace.from_frame(frame, {"kind": "comm", "source": SYNTHETIC, "hardware": "none",
                                 "statistic": "median"}).save(path)
    return path


def fitted_analytic(extrapolation: dict | None = None, **meta) -> AnalyticModel:
    """A ring model 'fitted' at 16 ranks (planted parameters) as fit --cross-world-size
    records it."""
    base = {"fit_world_sizes": [16], "scale_by": "world_size", "fitted_from": ["planted"]}
    if extrapolation is not None:
        base["extrapolation"] = extrapolation
    return AnalyticModel(5e-6, 4e-12, 0.0, "ring", meta=base | meta)


def test_an_analytic_model_answers_from_its_recorded_fit_world_sizes() -> None:
    model = fitted_analytic()
    assert model.world_size_basis(16) == BASIS_MEASURED
    assert model.world_size_basis(512) == BASIS_EXTRAPOLATED
    assert AnalyticModel(5e-6, 4e-12).world_size_basis(512) == BASIS_UNKNOWN
    only_record = AnalyticModel(5e-6, 4e-12, meta={"extrapolation": {
        "fit_world_sizes": [8], "validated_world_sizes": [], "median_ape_pct": None,
        "max_ape_pct": None}})
    assert only_record.world_size_basis(8) == BASIS_MEASURED
    assert only_record.world_size_basis(128) == BASIS_EXTRAPOLATED
    by_nodes = fitted_analytic(scale_by="nodes", domain=[
        {"collective": "all_reduce", "world_size": 16, "nodes": 2, "min_bytes": 8.0,
         "max_bytes": 2.0**33, "sizes": 31}])
    assert by_nodes.world_size_basis(2) == BASIS_MEASURED  # P = nodes in the formula
    assert by_nodes.world_size_basis(64) == BASIS_EXTRAPOLATED


def test_composite_models_answer_from_their_parts(tmp_path: Path) -> None:
    intra = load_comm_spec(planted_sweep(tmp_path / "intra.csv", 4))
    inter = fitted_analytic()  # fitted at 16 nodes' worth of ranks
    assert Topology(16, 4, intra, inter).collective_model(
        "hierarchical").world_size_basis(64) == BASIS_MEASURED
    for kind in ("hierarchical", "flat"):
        model = Topology(128, 4, intra, inter).collective_model(kind)
        assert model.world_size_basis(512) == BASIS_EXTRAPOLATED, kind
    compressed = CompressedCommModel(fitted_analytic(), make_compressor("topk", 0.01))
    assert compressed.world_size_basis(512) == BASIS_EXTRAPOLATED
    assert compressed.world_size_basis(16) == BASIS_MEASURED
    p2p = load_comm_spec(planted_sweep(tmp_path / "p2p.csv", 2, "p2p"))
    ps = PSModel(ps_from_dict({"workers": 8, "servers": 2, "colocated": True,
                               "p2p": str(tmp_path / "p2p.csv")}, tmp_path / "ps.yaml"))
    assert ps.world_size_basis(8) == BASIS_MEASURED  # every message: a measured 2-rank p2p
    assert p2p.world_size_basis(2) == BASIS_MEASURED
    curve = InterpCurve((1.0, 1e6), (1e-5, 1e-3))
    tuned = TunedModel({"all_reduce": {8: {"ring": curve}}}, {"ring": (1e-6, 1e-9, 0.0)})
    assert tuned.world_size_basis(8) == BASIS_MEASURED
    assert tuned.world_size_basis(64) == BASIS_EXTRAPOLATED
    assert AlphaBetaModel(1e-4, 1e-9).world_size_basis(64) == BASIS_UNKNOWN


def test_derived_collectives_are_said_by_the_kinds_that_know(tmp_path: Path) -> None:
    sweep = load_comm_spec(planted_sweep(tmp_path / "ar.csv", 8))
    assert [b.status for b in sweep.collective_basis("all_reduce", 8)] == ["measured"]
    (rs,) = sweep.collective_basis("reduce_scatter", 8)
    assert (rs.status, rs.source) == ("derived", "all_reduce")
    assert "reduce_scatter from all_reduce" in derived_note(sweep, 8)
    inline = AlphaBetaModel(1e-4, 1e-9)
    assert "all_gather from all_reduce" in derived_note(inline, 2)
    assert derived_note(inline, 2, ["all_reduce"]) is None
    topo = Topology(2, 8, sweep, AlphaBetaModel(1e-5, 1e-10)).collective_model("hierarchical")
    text = derived_note(topo, 16, ["all_reduce"])
    assert "reduce_scatter from all_reduce (intra-node level at 8 ranks)" in text
    analytic = fitted_analytic(domain=[{"collective": "all_reduce", "world_size": 16,
                                        "nodes": 2, "min_bytes": 8.0, "max_bytes": 1e9}])
    assert "all_gather from all_reduce" in derived_note(analytic, 512)
    both = load_comm_spec(planted_sweep(tmp_path / "rs.csv", 8, "reduce_scatter"))
    assert both.collective_basis("reduce_scatter", 8)[0].status == "measured"


def test_the_world_size_note_carries_the_measured_extrapolation_error_or_says_none() -> None:
    assert world_size_note(fitted_analytic(), 16) is None
    unknown = world_size_note(fitted_analytic(), 512)
    assert "world size 512 was not measured" in unknown and "fitted at world size 16" in unknown
    assert "never validated" in unknown
    known = world_size_note(fitted_analytic({
        "fit_world_sizes": [16], "validated_world_sizes": [32, 64, 128],
        "median_ape_pct": 40.0, "max_ape_pct": 111.5}), 512)
    assert "111.5 % worst" in known and "never validated" not in known
    assert "beyond the largest validated world size (128)" in known
    inside = world_size_note(fitted_analytic({
        "fit_world_sizes": [16], "validated_world_sizes": [32, 64, 128],
        "median_ape_pct": 40.0, "max_ape_pct": 111.5}), 64)
    assert "beyond the largest validated" not in inside


def test_the_margin_at_an_extrapolated_world_size_is_the_measured_extrapolation_error() -> None:
    record = {"fit_world_sizes": [16], "validated_world_sizes": [32, 64, 128],
              "median_ape_pct": 40.0, "max_ape_pct": 111.5}
    margin = model_margin(fitted_analytic(record), "ring.json", ["all_reduce"], None, 512)
    assert margin.pct == 111.5 and margin.band_known
    assert "measured extrapolation error, fitted at 16 predicting 32..128" in margin.source
    never = model_margin(fitted_analytic(), "ring.json", ["all_reduce"], None, 512)
    assert not never.band_known and "never validated" in never.source
    nulls = model_margin(fitted_analytic(record | {"max_ape_pct": None}), "ring.json",
                         ["all_reduce"], None, 512)
    assert not nulls.band_known
    at_fit = model_margin(fitted_analytic(record), "ring.json", ["all_reduce"], None, 16)
    assert at_fit.band_known and at_fit.pct == 5.0  # measured there: the usual margin


def test_contradicting_sweeps_are_found_in_the_committed_abci_a100_series(repo: Path) -> None:
    """ABCI A-nodes (8 x A100 per node): 64 ranks reach 15.2 GB/s bus bandwidth at 32 MiB,
    128 ranks 26.6 GB/s."""
    sweeps = []
    for nodes in (2, 4, 8, 16):
        frame = pd.read_csv(repo / f"traces/comm/external/nccl-abci-inter-anode-{nodes}.csv")
        frame = frame[frame["in_place"] == 0]
        sweeps.append(Sweep(f"anode-{nodes}", "all_reduce", int(frame["world_size"].iloc[0]),
                            frame["bytes"].to_numpy(float), frame["time_s"].to_numpy(float)))
    (note,) = contradictions(sweeps)
    assert "world size 128 (anode-16)" in note and "world size 64 (anode-8)" in note
    assert "26.6 against 15.2 GB/s at 33554432 bytes" in note


def test_model_notes_flag_a_model_fitted_on_contradicting_sweeps(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(repo / f"traces/comm/external/nccl-abci-inter-anode-{n}.csv") for n in (8, 16)]
    out = tmp_path / "anode.json"
    assert main(["fit", *files, "--model", "interp", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "contradicting sweeps" in err and "nccl-abci-inter-anode-16.csv" in err
    assert "nccl-abci-inter-anode-8.csv" in err and "33554432 bytes" in err
    notes = model_notes(load_comm_spec(out), 64, str(out))
    assert any("contradicting sweeps" in n and "world size 64" in n for n in notes)


def test_consistent_sweeps_are_not_flagged(repo: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    """ABCI V-nodes (4 x V100 per node), 8 to 128 ranks: bus bandwidth falls with the
    world size at every common size within 10 %."""
    files = [str(repo / f"traces/comm/external/nccl-abci-inter-vnode-{n}.csv")
             for n in (2, 4, 8, 16, 32)]
    assert main(["fit", *files, "--model", "alpha-beta"]) == 0
    assert "contradicting" not in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["piecewise", "alpha-beta", "interp"])
def test_every_fitted_kind_and_its_composites_say_what_was_derived(
        tmp_path: Path, kind: str) -> None:
    from gradsched.costmodel.crossws import CrossSettings, cross_world_size
    from gradsched.costmodel.fit import build_model, fit_file

    sweep = planted_sweep(tmp_path / "ar8.csv", 8)
    model = build_model(kind, fit_file(sweep, [kind], folds=2))
    assert model.world_size_basis(8) == BASIS_MEASURED
    assert "all_gather from all_reduce" in derived_note(model, 8)
    (fit,) = cross_world_size([planted_sweep(tmp_path / "ar4.csv", 4), sweep],
                              CrossSettings((4, 8), method="scaled"))
    assert "reduce_scatter from all_reduce" in derived_note(fit.scaled, 64)
    assert fit.scaled.world_size_basis(64) == BASIS_EXTRAPOLATED
    compressed = CompressedCommModel(model, make_compressor("topk", 0.01))
    assert "all_gather from all_reduce (compressed all_reduce)" in derived_note(
        compressed, 8, ["all_reduce"])
    two = planted_sweep(tmp_path / "ar2.csv", 2)  # p2p messages priced at 2 ranks
    ps = PSModel(ps_from_dict({"workers": 8, "servers": 2, "colocated": True,
                               "p2p": str(two)}, tmp_path / "ps.yaml", 8))
    assert "p2p from all_reduce (p2p link)" in derived_note(ps, 8, ["all_reduce"])
