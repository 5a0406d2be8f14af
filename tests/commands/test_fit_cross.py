"""``gradsched fit --cross-world-size``: the nccl method is the default; settings of the other
methods are refused; --hardware describes another machine."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.costmodel import load_comm_spec
from gradsched.costmodel.crossws import CROSS_TABLE_COLUMNS

REPO = Path(__file__).resolve().parents[2]
A100 = [str(REPO / f"traces/comm/external/nccl-abci-inter-anode-{n}.csv") for n in (2, 4)]
GLOO = [str(REPO / f"traces/comm/cpu/gloo-tbf1gbit-p{n}.csv") for n in (2, 3)]


def test_default_is_nccl_with_fitted_and_predicted_rows(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    assert main(["fit", "--cross-world-size", *A100, "--fit-on", "16", "--table",
                 str(table)]) == 0
    frame = pd.read_csv(table)
    assert tuple(frame.columns) == CROSS_TABLE_COLUMNS
    assert frame["algorithm"].unique().tolist() == ["nccl"]
    assert frame.set_index("predict_world_size")["role"].to_dict() == {
        16: "fitted", 32: "predicted"}


@pytest.mark.parametrize("extra", [["--algorithm", "ring"], ["--from", "alpha-beta"],
                                   ["--gamma", "1e-12"], ["--scale-by", "nodes"]])
def test_formula_settings_are_refused_under_nccl(extra: list[str], capsys) -> None:
    assert main(["fit", "--cross-world-size", *A100, "--fit-on", "16", *extra]) == 2
    assert "not read by --method nccl" in capsys.readouterr().err


def test_nccl_settings_are_refused_under_a_formula(capsys) -> None:
    assert main(["fit", "--cross-world-size", *A100, "--fit-on", "16", "--method",
                 "analytic", "--fabric", "none"]) == 2
    assert "--fabric is not read by --method analytic" in capsys.readouterr().err


def test_a_gloo_sweep_is_not_an_nccl_sweep(capsys) -> None:
    assert main(["fit", "--cross-world-size", *GLOO, "--fit-on", "2"]) == 2
    assert "not NCCL" in capsys.readouterr().err


def test_hardware_override_and_unknown_machine(tmp_path: Path, capsys) -> None:
    out = tmp_path / "m.json"
    base = tmp_path / "base.json"
    assert main(["fit", "--cross-world-size", *A100, "--fit-on", "16", "-o", str(base)]) == 0
    assert main(["fit", "--cross-world-size", *A100, "--fit-on", "16", "--hardware",
                 "h100-8x400g", "-o", str(out)]) == 0
    data, measured = json.loads(out.read_text()), json.loads(base.read_text())
    assert data["hardware"]["name"] == "h100-8x400g"
    assert data["meta"]["calibrated_on"]["gpus_per_node"] == 8
    # 8 x 400 Gbit/s against 4 x 200 Gbit/s: four times the inter-node bus bandwidth
    assert data["inter"]["busbw_Bps"] == pytest.approx(4 * measured["inter"]["busbw_Bps"])
    assert data["meta"]["extrapolation"] == measured["meta"]["extrapolation"]
    model = load_comm_spec(out)
    assert model.world_size_basis(16) == "extrapolated"
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--cross-world-size", *A100, "--fit-on", "16", "--hardware", "dgx-z"])
    assert exc.value.code == 2
    assert "unknown machine 'dgx-z'" in capsys.readouterr().err


def test_two_multi_node_fit_sizes_are_refused(capsys) -> None:
    assert main(["fit", "--cross-world-size", *A100, "--fit-on", "16,32"]) == 2
    assert "one multi-node sweep" in capsys.readouterr().err


def test_a_cross_fit_knows_which_collectives_it_measured(tmp_path) -> None:
    """The analytic model a cross-world-size fit writes records its fitted series, so a
    reduce-scatter priced from its all-reduce sweep is reported as derived, and the world
    size it was fitted at as measured (the domain notes of every command read these)."""
    out = tmp_path / "ring.json"
    sweep = REPO / "traces/comm/external/nccl-abci-inter-anode-2.csv"
    assert main(["fit", "--cross-world-size", str(sweep), "--fit-on", "16",
                 "--method", "analytic", "--algorithm", "ring", "-o", str(out)]) == 0
    model = load_comm_spec(str(out))
    assert [b.status for b in model.collective_basis("all_reduce", 16)] == ["measured"]
    assert all(b.status == "derived" for b in model.collective_basis("reduce_scatter", 512))
    assert model.world_size_basis(16) == "measured"
    assert model.world_size_basis(512) == "extrapolated"
