"""Options of multi-process commands whose effect no other test shows, each shown here with
the part that needs root or real ranks stood in (named by ``option_effects.py``):

* ``gradsched cluster --keep-going``, ``--deadline-s`` and ``--master-port``: the ranks run
  as local processes (the emulated cluster's namespaces, which need root, replaced by a
  stand-in that runs each rank here);
* ``gradsched shard run -o`` and ``shard measure -o``: the measurement (stock FSDP2 on gloo
  ranks) replaced by made-up times, SYNTHETIC; the test is what the command writes where.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"
COMM = REPO / "traces/comm/cpu/gloo-tbf1gbit-p2.csv"


class LocalCluster:
    """The emulated cluster's interface, every rank a plain local process."""

    master_addr = "127.0.0.1"

    def __init__(self, ranks: int, rate: str | None, *, prefix: str | None = None) -> None:
        self.ranks = ranks

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def describe(self) -> str:
        return f"{self.ranks} local ranks (stand-in)"

    def prefix_for(self, rank: int) -> list[str]:
        return []

    def rank_env(self, rank: int) -> dict[str, str]:
        return {}

    def record_process(self, pid: int) -> None:
        return None


@pytest.fixture
def local_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from gradsched.distributed import cluster

    monkeypatch.setattr(cluster, "EmulatedCluster", LocalCluster)


FAIL_ONE = 'if [ "$RANK" = 1 ]; then exit 3; fi; sleep 0.5; echo finished'


@pytest.mark.usefixtures("local_cluster")
def test_cluster_keep_going_lets_the_other_ranks_finish(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert main(["cluster", "--world-size", "2", "--", "sh", "-c", FAIL_ONE]) == 3
    assert "[rank 0] finished" not in capsys.readouterr().out  # stopped at rank 1's failure
    assert main(["cluster", "--world-size", "2", "--keep-going", "--", "sh", "-c", FAIL_ONE]) == 3
    assert "[rank 0] finished" in capsys.readouterr().out


@pytest.mark.usefixtures("local_cluster")
def test_cluster_deadline_s_stops_every_rank(capsys: pytest.CaptureFixture[str]) -> None:
    start = time.monotonic()
    assert main(["cluster", "--world-size", "2", "--deadline-s", "0.5", "--", "sleep", "30"]) == 124
    assert time.monotonic() - start < 20
    assert "still running after 0.5 s" in capsys.readouterr().err


@pytest.mark.usefixtures("local_cluster")
def test_cluster_master_port_reaches_every_rank(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "--world-size", "2", "--master-port", "29871", "--", "sh", "-c",
                 'echo "port $MASTER_PORT"']) == 0
    out = capsys.readouterr().out
    assert "[rank 0] port 29871" in out and "[rank 1] port 29871" in out


@pytest.fixture(scope="module")
def fsdp2_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plans") / "fsdp2.json"
    assert main(["shard", "plan", "--compute", str(TRACE), "--comm", str(COMM), "--world-size",
                 "2", "--algorithm", "fsdp2", "-o", str(path)]) == 0
    return path


def test_shard_run_output_gets_a_row_per_timed_iteration(fsdp2_plan: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    from gradsched.plan_sharded import ShardedPlan
    from gradsched.reexec import sharded

    plan = ShardedPlan.load(fsdp2_plan)
    monkeypatch.setattr(sharded, "run_plans", lambda plans, *a, **kw: (
        [[0.25, 0.5]], [[sorted(u.tensors) for u in plan.units]]))  # SYNTHETIC times
    out = tmp_path / "times.csv"
    assert main(["shard", "run", "--model", "resnet18", "--batch-size", "4", "--world-size",
                 "2", "--plan", str(fsdp2_plan), "--output", str(out)]) == 0
    frame = pd.read_csv(out)
    assert frame["iteration_s"].tolist() == [0.25, 0.5]
    assert set(frame["algorithm"]) == {"fsdp2"}


def test_shard_measure_output_is_the_folder_of_its_tables(fsdp2_plan: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from gradsched.plan_sharded import ShardedPlan
    from gradsched.reexec import sharded

    plan = ShardedPlan.load(fsdp2_plan)
    monkeypatch.setattr(sharded, "measure", lambda *a, **kw: ([], [], [plan]))  # SYNTHETIC
    out = tmp_path / "measured"
    assert main(["shard", "measure", "--model", "resnet18", "--batch-size", "4",
                 "--world-size", "2", "--network", "tbf1gbit", "--compute", str(TRACE),
                 "--comm", str(COMM), "--algorithms", "fsdp2", "--output", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["iterations.csv", "measured.csv",
                                                     "meta.json", "plans"]
    assert json.loads((out / "meta.json").read_text(encoding="utf-8"))["kind"] == \
        "sharded-reexec"
    assert (out / "plans" / "fsdp2.json").is_file()
