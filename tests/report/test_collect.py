"""The report stage's collect step: case columns, extrapolated cases and their nodes, and
the pairings it refuses.

Inputs are small SYNTHETIC result tables made here (never committed as measurements)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.errors import ConfigError, InputError
from gradsched.report.collect import CASE_COLUMNS, COLLECTED_COLUMNS, Case, collect_cases

ALGS = ("syncsgd", "wfbp", "mgwfbp", "dear", "search", "best")


def synthetic_collected() -> pd.DataFrame:
    """Two networks x two world sizes; times chosen so every quantity is known by hand."""
    rows = []
    times = {"syncsgd": 1.40, "wfbp": 1.20, "mgwfbp": 1.05, "dear": 1.10, "search": 1.00,
             "best": 1.00}
    for network, scale, family, pairing in (("net-a", 1.0, "fam-a", "real"),
                                            ("net-b", 2.0, "fam-b", "what-if")):
        for world in (8, 16):
            for alg in ALGS:
                t = times[alg] * scale * (1 + world / 160)
                rows.append({"trace": "toy", "network": network, "comm_file": f"{network}-{world}",
                             "nodes": world // 8, "family": family, "pairing": pairing,
                             "algorithm": alg, "world_size": world,
                             "iteration_s": t, "compute_s": 0.9, "exposed_comm_s": t - 0.9,
                             "n_collectives": 3, "n_buckets": 3, "comm_busy_s": 0.5,
                             "lower_bound_s": 0.95 * scale,
                             "gap_to_lb_pct": 100 * (t / (0.95 * scale) - 1), "knobs": "{}"})
    return pd.DataFrame(rows, columns=list(COLLECTED_COLUMNS))


def synthetic_fits() -> pd.DataFrame:
    rows = []
    for i, (ab, pw) in enumerate([(20.0, 2.0), (30.0, 5.0), (10.0, 8.0)]):
        for model, mape in (("alpha-beta", ab), ("piecewise", pw)):
            rows.append({"trace": f"file-{i}", "collective": "all_reduce", "backend": "nccl",
                         "world_size": 8 * (i + 1), "nodes": i + 1, "model": model,
                         "n_sizes": 20, "min_bytes": 4, "max_bytes": 1 << 25,
                         "train_mape_pct": mape / 2, "heldout_mape_pct": mape,
                         "heldout_max_ape_pct": 3 * mape, "alpha_s": 1e-5,
                         "beta_s_per_byte": 1e-10, "n_segments": 1})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- collect


def test_collect_adds_case_columns(tmp_path: Path) -> None:
    comm = tmp_path / "comm.csv"
    pd.DataFrame({"collective": ["all_reduce"] * 2, "world_size": [16, 16], "nodes": [2, 2],
                  "bytes": [4, 8], "time_s": [1e-5, 2e-5]}).to_csv(comm, index=False)
    result = tmp_path / "r.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(3) \
        .to_csv(result, index=False)
    out = collect_cases([Case("toy", "net", comm, result, "gpu", "matched-gpu")])
    assert list(out.columns) == list(COLLECTED_COLUMNS)
    assert set(out["nodes"]) == {2} and set(out["network"]) == {"net"}
    assert set(out["comm_file"]) == {"comm"}
    assert set(out["family"]) == {"gpu"} and set(out["pairing"]) == {"matched-gpu"}


def test_collect_labels_an_extrapolated_case_and_its_nodes(tmp_path: Path) -> None:
    reference = tmp_path / "sweep-128.csv"  # 128 ranks on 32 nodes: 4 per node
    pd.DataFrame({"collective": ["all_reduce"] * 2, "world_size": [128, 128],
                  "nodes": [32, 32], "bytes": [4, 8], "time_s": [1e-5, 2e-5]}
                 ).to_csv(reference, index=False)
    result = tmp_path / "p512.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(2) \
        .assign(world_size=512).to_csv(result, index=False)
    out = collect_cases([Case("toy", "net", reference, result, "gpu", "matched-gpu",
                              extrapolated=True)])
    assert set(out["nodes"]) == {128} and set(out["extrapolated"]) == {True}
    assert set(out["comm_file"]) == {"extrapolated from sweep-128"}
    mixed = tmp_path / "mixed.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(12).to_csv(mixed, index=False)
    with pytest.raises(InputError, match="one world size"):
        collect_cases([Case("toy", "net", reference, mixed, extrapolated=True)])


def test_collect_refuses_an_unknown_pairing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown pairing 'same-gpu'"):
        Case("toy", "net", tmp_path / "c.csv", tmp_path / "r.csv", "gpu", "same-gpu")


def test_collect_cli_labels_cases_and_refuses_a_stray_label(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    comm = tmp_path / "comm.csv"
    pd.DataFrame({"nodes": [2]}).to_csv(comm, index=False)
    result = tmp_path / "r.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(2).to_csv(result, index=False)
    out = tmp_path / "all.csv"
    case = ["--case", "toy", "net", str(comm), str(result)]
    assert main(["report", "collect", *case, "--label", "toy", "net", "v100", "matched-gpu",
                 "-o", str(out)]) == 0
    frame = pd.read_csv(out)
    assert set(frame["family"]) == {"v100"} and set(frame["pairing"]) == {"matched-gpu"}
    assert main(["report", "collect", *case, "-o", str(out)]) == 0
    assert set(pd.read_csv(out)["pairing"]) == {"what-if"}  # unlabelled: never "real"
    assert main(["report", "collect", *case, "--label", "toy", "other", "v100", "real",
                 "-o", str(out)]) != 0
    assert "--label for a pair with no --case: toy other" in capsys.readouterr().err


def test_collect_rejects_mixed_node_counts(tmp_path: Path) -> None:
    comm = tmp_path / "comm.csv"
    pd.DataFrame({"nodes": [1, 2]}).to_csv(comm, index=False)
    result = tmp_path / "r.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(1) \
        .to_csv(result, index=False)
    with pytest.raises(ValueError, match="one node count"):
        collect_cases([Case("toy", "net", comm, result)])


# -------------------------------------------------------------------------- tables


# -------------------------------------------------------------------------- macros


# ------------------------------------------------------------------------- figures


# ------------------------------------------------------------------------- compare
