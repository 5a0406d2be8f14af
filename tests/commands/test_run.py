"""``gradsched run``: plans through the executor and PyTorch DDP itself, timed on real ranks.

One real launch (2 gloo ranks on loopback, the tiny MLP, a few iterations) runs two plans
and two DDP bucket caps and profiles them; the other tests check the argument errors,
which need no launch.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")

from gradsched.cli import main
from gradsched.commands.run import summary_path
from gradsched.plan import Bucket, Plan
from gradsched.runtime.bench import ITER_COLUMNS, SUMMARY_COLUMNS, percentile

MODEL = "tiny-mlp"


def _names() -> list[str]:
    from gradsched.workloads import build_model

    return [n for n, _ in build_model(MODEL, 4).model.named_parameters()]


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("plans")
    ready = _names()[::-1]
    wfbp = Plan("wfbp", tuple(Bucket((n,)) for n in ready))
    dear = Plan("dear", (Bucket(tuple(ready[:3]), "rs_ag", chunks=2),
                         Bucket(tuple(ready[3:]), "rs_ag")), update="per_layer")
    paths = [folder / "wfbp.json", folder / "dear.json"]
    wfbp.save(paths[0])
    dear.save(paths[1])
    return paths


@pytest.fixture(scope="module")
def measured(plans, tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("run") / "measured.csv"
    prof = out.parent / "profile"
    code = main(["run", "--plan", str(plans[0]), "--plan", str(plans[1]), "--baseline", "ddp",
                 "--bucket-cap-mb", "25", "--bucket-cap-mb", "0.001", "--model", MODEL,
                 "--batch-size", "4", "--world-size", "2", "--backend", "gloo",
                 "--iters", "3", "--warmup", "1", "--timeout-s", "60", "-o", str(out),
                 "--profile", str(prof)])
    assert code == 0
    return out, prof


def test_per_iteration_rows_and_summary(measured, plans):
    out, _ = measured
    frame = pd.read_csv(out)
    assert list(frame.columns) == list(ITER_COLUMNS)
    assert len(frame) == 4 * 3
    assert set(frame["algorithm"]) == {"wfbp", "dear", "ddp-native"}
    assert set(frame["plan"]) == {str(plans[0]), str(plans[1]), "bucket_cap_mb=25",
                                  "bucket_cap_mb=0.001"}
    assert (frame["iteration_s"] > 0).all()
    assert (frame[["model", "world_size", "backend", "bandwidth"]].drop_duplicates().values
            .tolist() == [[MODEL, 2, "gloo", "loopback"]])
    summary = pd.read_csv(summary_path(out))
    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    assert len(summary) == 4
    assert (summary["p10_s"] <= summary["median_s"]).all()
    assert (summary["median_s"] <= summary["p90_s"]).all()
    for _, row in summary.iterrows():
        times = frame.loc[frame["plan"] == row["plan"], "iteration_s"].tolist()
        assert row["median_s"] == pytest.approx(sorted(times)[1], rel=1e-6)
    # the executor's collectives per iteration: wfbp one per tensor; dear 2+1 RS, 2+1 AG
    by_alg = summary.set_index("algorithm")["n_collectives"]
    assert by_alg["wfbp"] == len(_names())
    assert by_alg["dear"] == 6


def test_profile_traces_written(measured):
    _, prof = measured
    traces = sorted(p.name for p in prof.glob("*.trace.json"))
    assert len(traces) == 4 * 2  # every run, every rank
    assert any("wfbp" in t for t in traces) and any("ddp-native" in t for t in traces)


def test_nothing_to_run_is_an_error(tmp_path, capsys):
    code = main(["run", "--model", MODEL, "--batch-size", "4", "--world-size", "2",
                 "-o", str(tmp_path / "x.csv")])
    assert code == 2
    assert "nothing to run" in capsys.readouterr().err


def test_bucket_cap_needs_baseline(tmp_path, plans, capsys):
    code = main(["run", "--plan", str(plans[0]), "--bucket-cap-mb", "25", "--model", MODEL,
                 "--batch-size", "4", "--world-size", "2", "-o", str(tmp_path / "x.csv")])
    assert code == 2
    assert "--baseline ddp" in capsys.readouterr().err


def test_missing_plan_file_is_an_error(tmp_path, capsys):
    code = main(["run", "--plan", str(tmp_path / "none.json"), "--model", MODEL,
                 "--batch-size", "4", "--world-size", "2", "-o", str(tmp_path / "x.csv")])
    assert code == 2
    assert "plan file not found" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_percentile_matches_numpy():
    np = pytest.importorskip("numpy")
    values = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4]
    for q in (0, 10, 50, 90, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_torchrun_mode_needs_torchruns_environment(tmp_path, monkeypatch, capsys):
    """--torchrun outside torchrun, or with another world size than torchrun's: one line."""
    base = ["run", "--baseline", "ddp", "--model", MODEL, "--batch-size", "4",
            "--world-size", "2", "--torchrun", "-o", str(tmp_path / "m.csv")]
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    assert main(base) != 0
    assert "start this command with torchrun" in capsys.readouterr().err
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert main(base) != 0
    assert "WORLD_SIZE=3" in capsys.readouterr().err
    assert not (tmp_path / "m.csv").exists()
