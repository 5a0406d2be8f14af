"""Every command that prices communication flags an extrapolated world size, a derived
collective and an out-of-range message size, once each, on stderr (``advise``: in its
notes); the advice's band at an extrapolated world size is the model's measured
extrapolation error, or unknown. Models and sweeps here are PLANTED (made-up parameters,
SYNTHETIC sweeps), labelled so."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.costmodel.formulas import AnalyticModel
from gradsched.traces.bundle import CommTrace
from tests.conftest import synthetic_compute_trace

MIB = 2**20
EXTRAPOLATED = "world size 512 was not measured"


def compute(tmp_path: Path) -> str:
    """A SYNTHETIC trace of 8 blocks (FSDP2 units), 0.1-1.5 MiB gradients."""
    trace = synthetic_compute_trace(n=8, seed=3, bytes_scale=16384)
    trace.frame["name"] = [f"blocks.{i}.weight" for i in range(8)]
    path = tmp_path / "c.csv"
    trace.save(path)
    return str(path)


def planted_ring(tmp_path: Path, extrapolation: dict | None = None) -> str:
    """A ring model 'fitted' at 16 ranks, as ``fit --cross-world-size`` writes it."""
    meta = {"fit_world_sizes": [16], "scale_by": "world_size", "fitted_from": ["planted"]}
    if extrapolation is not None:
        meta["extrapolation"] = extrapolation
    path = tmp_path / "ring.json"
    AnalyticModel(5e-6, 4e-12, 0.0, "ring", meta=meta).save(path)
    return str(path)


def planted_sweep(tmp_path: Path, collective: str = "all_reduce", lo: int = 4096,
                  world_size: int = 8) -> str:
    """A SYNTHETIC alpha-beta sweep of one collective (20 us + 1 ns per byte)."""
    sizes = lo * 2 ** np.arange(0, 12)
    frame = pd.DataFrame({"collective": collective, "backend": "nccl", "algorithm": "default",
                          "world_size": world_size, "nodes": 1, "in_place": False,
                          "bytes": sizes, "time_s": 2e-5 + sizes * 1e-9})
    path = tmp_path / f"{collective}-{lo}.csv"
    CommTrace.from_frame(frame, {"kind": "comm", "source": "SYNTHETIC planted sweep, not "
                                 "measured", "hardware": "none", "statistic": "median"}
                         ).save(path)
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    assert main(list(argv)) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.mark.parametrize("argv", [
    ("replay", "--algorithms", "wfbp,syncsgd", "-o", "{tmp}/r.csv"),
    ("plan", "--algorithm", "wfbp", "-o", "{tmp}/p.json"),
    ("shard", "plan", "--algorithm", "fsdp2", "-o", "{tmp}/s.json"),
    ("shard", "compare"),
])
def test_each_command_warns_once_about_an_extrapolated_world_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    args = [a.format(tmp=tmp_path) for a in argv]
    _, err = run(capsys, *args, "--compute", compute(tmp_path), "--comm",
                 planted_ring(tmp_path), "--world-size", "512")
    assert err.count(EXTRAPOLATED) == 1, err
    assert "fitted at world size 16" in err and "never validated" in err


def test_advise_at_an_extrapolated_world_size_prints_no_bare_default_band(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "advise", "--compute", compute(tmp_path), "--comm",
                 planted_ring(tmp_path), "--world-size", "512", "--json",
                 str(tmp_path / "a.json"))
    assert f"note: domain: {EXTRAPOLATED}" in out
    assert "band unknown" in out and "(band +" not in out and "(band -" not in out
    advice = json.loads((tmp_path / "a.json").read_text())
    assert "never validated" in advice["margin_source"] and advice["band_known"] is False
    assert advice["ddp"]["tuned_gain_band_pct"]["low"] is None


def test_advise_takes_its_band_from_the_measured_extrapolation_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ring = planted_ring(tmp_path, {"fit_world_sizes": [16], "validated_world_sizes": [32, 128],
                                   "median_ape_pct": 40.0, "max_ape_pct": 111.5})
    out, _ = run(capsys, "advise", "--compute", compute(tmp_path), "--comm", ring,
                 "--world-size", "512")
    assert "margin: 112 % (measured extrapolation error, fitted at 16 predicting 32..128" in out
    out, _ = run(capsys, "advise", "--sharded", "--compute", compute(tmp_path), "--comm", ring,
                 "--world-size", "512", "--gpu-memory", "80G")
    assert "margin 111.5 % (measured extrapolation error" in out


def test_advise_sharded_at_an_extrapolated_world_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "advise", "--sharded", "--compute", compute(tmp_path), "--comm",
                 planted_ring(tmp_path), "--world-size", "512", "--gpu-memory", "80G")
    assert f"note: domain: {EXTRAPOLATED}" in out
    assert "(band unknown)" in out and "band +" not in out


@pytest.mark.parametrize("argv, derived", [
    (("replay", "--algorithms", "dear", "-o", "{tmp}/r.csv"), "reduce_scatter from all_reduce"),
    (("plan", "--algorithm", "dear", "-o", "{tmp}/p.json"), "all_gather from all_reduce"),
    (("shard", "plan", "--algorithm", "fsdp2", "-o", "{tmp}/s.json"),
     "all_gather from all_reduce"),
    (("shard", "compare"), "reduce_scatter from all_reduce"),
])
def test_each_command_warns_about_a_collective_derived_from_all_reduce(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
        derived: str) -> None:
    args = [a.format(tmp=tmp_path) for a in argv]
    _, err = run(capsys, *args, "--compute", compute(tmp_path), "--comm",
                 planted_sweep(tmp_path), "--world-size", "8")
    assert err.count("derived collectives, not measured") == 1, err
    assert derived in err


def test_advise_sharded_notes_a_derived_collective(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "advise", "--sharded", "--compute", compute(tmp_path), "--comm",
                 planted_sweep(tmp_path), "--world-size", "8", "--gpu-memory", "80G")
    assert "note: domain: derived collectives, not measured: all_gather from all_reduce" in out


def test_shard_compare_prints_the_out_of_range_notes_of_advise_sharded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every unit is below the 64 MiB sweep: advise --sharded notes it, and shard compare
    prints the same note on stderr."""
    sweep = planted_sweep(tmp_path, "all_gather", 64 * MIB)
    trace = compute(tmp_path)
    out, _ = run(capsys, "advise", "--sharded", "--compute", trace, "--comm", sweep,
                 "--world-size", "8", "--gpu-memory", "80G")
    notes = [line.removeprefix("note: ") for line in out.splitlines()
             if line.startswith("note: domain: the FSDP2 default layout")]
    assert notes and "below the smallest" in notes[0]
    _, err = run(capsys, "shard", "compare", "--compute", trace, "--comm", sweep,
                 "--world-size", "8", "--gpu-memory", "80G")
    assert f"gradsched shard compare: warning: {notes[0]}" in err


def test_a_replay_of_all_reduce_plans_says_nothing_about_derived_collectives(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, err = run(capsys, "replay", "--algorithms", "wfbp,syncsgd", "-o", str(tmp_path / "r.csv"),
                 "--compute", compute(tmp_path), "--comm", planted_sweep(tmp_path),
                 "--world-size", "8")
    assert "derived" not in err
