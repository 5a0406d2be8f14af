"""The published-scaling check (study scaling-check / report scaling-table): batch scaling,
throughput arithmetic, the comm model at P (measured or extrapolated), bad specs.

The traces made here are SYNTHETIC (labelled in their sidecars); the last test runs the
committed spec on the shipped traces."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.experiments import scaling
from tests.conftest import synthetic_compute_trace


def _files(tmp_path: Path, batch: int = 32) -> tuple[Path, Path]:
    trace = synthetic_compute_trace(6, seed=3)
    trace.meta["batch_size"] = batch
    compute = tmp_path / "toy.csv"
    trace.save(compute)
    sizes = np.geomspace(1024, 1 << 26, 12).astype(int)
    comm = tmp_path / "toy-comm-8.csv"
    pd.DataFrame({"collective": "all_reduce", "backend": "nccl", "algorithm": "default",
                  "world_size": 8, "nodes": 1, "in_place": 0, "bytes": sizes,
                  "time_s": 5e-6 + sizes * 1e-11}).to_csv(comm, index=False)
    comm.with_suffix(".meta.json").write_text(
        '{"kind": "comm", "source": "SYNTHETIC test fixture, not measured", '
        '"hardware": "none", "software": {}, "capture_method": "synthetic", '
        '"date": "2026-11-23", "statistic": "mean"}')
    return compute, comm


def _spec(tmp_path: Path, **override: object) -> Path:
    case = {"key": "toy", "system": "toy", "compute": "toy.csv", "comm": "toy-comm-8.csv",
            "world_size": 8, "batch_per_gpu": 128,
            "published_img_s": {1: 100.0, 8: 760.0}} | override
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"cases": [case]}))
    return path


def test_batch_scaling_is_linear_in_forward_and_backward_only() -> None:
    trace = synthetic_compute_trace(5)
    trace.meta["batch_size"] = 32
    trace = type(trace)(frame=trace.frame.assign(update_s=0.002), meta=trace.meta)
    scaled = scaling.scale_batch(trace, 128)
    assert scaled.meta["batch_size"] == 128 and "RECONSTRUCTION" in scaled.meta["notes"]
    assert math.isclose(scaled.forward_total_s, 4 * trace.forward_total_s)
    assert math.isclose(scaled.backward_total_s, 4 * trace.backward_total_s)
    assert math.isclose(scaled.update_total_s, trace.update_total_s)


def test_prediction_arithmetic_on_a_synthetic_case(tmp_path: Path) -> None:
    compute, _ = _files(tmp_path)
    row = scaling.predict(scaling.load_spec(_spec(tmp_path), tmp_path)[0])
    trace = scaling.ComputeTrace.load(compute)
    one = 4 * (trace.forward_total_s + trace.backward_total_s)  # batch 32 -> 128
    assert math.isclose(row["iteration_1_s"], one)
    assert math.isclose(row["predicted_img_s_1"], 128 / one)
    assert row["iteration_p_s"] >= one  # all-reduce can only add time
    assert math.isclose(row["predicted_img_s_p"], 8 * 128 / row["iteration_p_s"])
    assert math.isclose(row["error_1_pct"], 100 * (128 / one / 100.0 - 1))
    assert math.isclose(row["published_scaling"], 7.6)
    assert math.isclose(row["predicted_scaling"],
                        row["predicted_img_s_p"] / row["predicted_img_s_1"])
    assert row["comm_model"] == "measured at 8 ranks"


def test_a_sweep_without_the_world_size_needs_comm_fit_on(tmp_path: Path) -> None:
    _files(tmp_path)
    spec = _spec(tmp_path, world_size=16, published_img_s={1: 100.0, 16: 1500.0})
    case = scaling.load_spec(spec, tmp_path)[0]
    with pytest.raises(InputError, match="give comm_fit_on"):
        scaling.predict(case)
    spec = _spec(tmp_path, world_size=16, published_img_s={1: 100.0, 16: 1500.0},
                 comm_fit_on=[8])
    row = scaling.predict(scaling.load_spec(spec, tmp_path)[0])
    assert row["comm_model"].startswith("EXTRAPOLATED: measured at 8 ranks")


@pytest.mark.parametrize(("override", "message"), [
    ({"batch_per_gpu": 0}, r"field 'cases\[0\].batch_per_gpu': 0 is less than the minimum"),
    ({"batch_per_gpu": float("nan")}, r"field 'cases\[0\].batch_per_gpu': nan is not of type"),
    ({"batch_per_gpu": 8.0}, r"field 'cases\[0\].batch_per_gpu': 8.0 is not of type"),
    ({"world_size": 1, "published_img_s": {1: 1.0}},
     r"field 'cases\[0\].world_size': 1 is less than the minimum of 2"),
    ({"published_img_s": {1: 100.0, 4: 300.0}}, "keys 1 and 8"),
    ({"published_img_s": {1: -1.0, 8: 300.0}},
     r"field 'cases\[0\].published_img_s\[1\]': -1.0 is less than or equal to the minimum"),
    ({"compute": "missing.csv"}, r"field 'cases\[0\].compute': no such file"),
    ({"comm_fit_on": 4}, r"field 'cases\[0\].comm_fit_on': 4 is not of type 'array'"),
    ({"key": "v100"}, r"field 'cases\[0\].key': 'v100' does not match"),
])
def test_bad_specs_are_refused_with_file_case_and_field(tmp_path: Path, override: dict,
                                                        message: str) -> None:
    _files(tmp_path)
    with pytest.raises(InputError, match=message) as err:
        scaling.load_spec(_spec(tmp_path, **override), tmp_path)
    assert "spec.yaml" in str(err.value) and err.value.field.startswith("cases[0]")


def test_a_spec_without_cases_or_a_field_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("cases: []\n")
    with pytest.raises(InputError, match=r"field 'cases': .* should be non-empty"):
        scaling.load_spec(path, tmp_path)
    path.write_text("cases:\n  - {key: x, system: x}\n")
    with pytest.raises(InputError, match=r"field 'cases\[0\].compute': missing"):
        scaling.load_spec(path, tmp_path)
    path.write_text("")
    with pytest.raises(InputError, match="None is not of type 'object'"):
        scaling.load_spec(path, tmp_path)


def test_a_trace_without_a_batch_size_cannot_be_scaled() -> None:
    trace = synthetic_compute_trace(3)
    trace.meta["batch_size"] = None
    with pytest.raises(InputError, match="no batch_size"):
        scaling.scale_batch(trace, 64)


def test_cli_writes_csv_and_a_table_per_system(tmp_path: Path) -> None:
    _files(tmp_path)
    spec = _spec(tmp_path)
    text = spec.read_text().replace("toy.csv", str(tmp_path / "toy.csv")).replace(
        "toy-comm-8.csv", str(tmp_path / "toy-comm-8.csv"))
    spec.write_text(text)
    out = tmp_path / "s.csv"
    assert main(["study", "scaling-check", "--spec", str(spec), "-o", str(out)]) == 0
    assert list(pd.read_csv(out).columns) == list(scaling.SCALING_COLUMNS)
    tex, md = tmp_path / "s.tex", tmp_path / "s.md"
    assert main(["report", "scaling-table", "--input", str(out), "--tex", str(tex),
                 "--md", str(md)]) == 0
    gen = tmp_path / "m.tex"
    assert main(["report", "scaling-macros", "--input", str(out), "-o", str(gen)]) == 0
    assert r"\newcommand{\gsScalingToyPublishedOne}{100}" in gen.read_text()
    lines = md.read_text().splitlines()
    assert lines[0] == "| quantity | toy |"
    assert any(line.startswith("| 1 GPU: published [img/s] | 100 |") for line in lines)


def test_committed_spec_on_the_shipped_traces(repo: Path) -> None:
    cases = scaling.load_spec(repo / "config" / "published-scaling.yaml", repo)
    frame = scaling.scaling_check(cases)
    assert len(frame) == 2
    assert frame["comm_model"].iloc[0].startswith("EXTRAPOLATED")  # V100: 4-rank sweep
    assert frame["comm_model"].iloc[1] == "measured at 8 ranks"  # A100: 8-rank sweep
    assert ((frame["predicted_scaling"] > 1) & (frame["predicted_scaling"] <= 8)).all()
    assert list(frame["published_img_s_p"]) == [2855.0, 7248.0]
