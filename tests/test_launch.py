"""The multi-process launcher: results, a dead peer ends the run quickly and clearly."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("torch")

from gradsched.distributed import DistributedError, LaunchSpec, launch


def test_three_ranks_allreduce():
    results = launch("gradsched.distributed.tasks:allreduce_ranks", {}, LaunchSpec(3))
    assert [r["rank"] for r in results] == [0, 1, 2]
    assert all(r["sum"] == 3.0 for r in results)


def test_dead_peer_is_reported_within_bounded_time():
    start = time.monotonic()
    with pytest.raises(DistributedError, match="rank 1 of 2 exited with code 17"):
        launch("gradsched.distributed.tasks:die_on_rank", {"victim": 1},
               LaunchSpec(2, op_timeout_s=20, deadline_s=60))
    assert time.monotonic() - start < 45


def test_peer_that_never_arrives_fails_clearly():
    # rank 1 runs `sleep` instead of the worker: rank 0's process-group init times out.
    start = time.monotonic()
    spec = LaunchSpec(2, init_timeout_s=3, deadline_s=60,
                      prefixes=[[], ["sh", "-c", "sleep 30", "--"]])
    with pytest.raises(DistributedError, match=r"(?s)rank 0 of 2 .*could not join"):
        launch("gradsched.distributed.tasks:allreduce_ranks", {}, spec)
    assert time.monotonic() - start < 30


def test_bad_task_name_is_reported():
    with pytest.raises(DistributedError, match="rank 0 of 1"):
        launch("gradsched.distributed.tasks:no_such_task", {}, LaunchSpec(1, deadline_s=60))


def test_failed_run_leaves_no_temp_dir_and_reports_its_ranks(tmp_path, monkeypatch):
    """The launcher's temporary directory goes on a failure too; on_spawn sees each rank."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spawned: list[int] = []
    with pytest.raises(DistributedError, match=r"(?s)rank [01] of 2 .*no_such_task"):
        launch("gradsched.distributed.tasks:no_such_task", {},
               LaunchSpec(2, deadline_s=60, on_spawn=spawned.append))
    assert len(spawned) == 2 and len(set(spawned)) == 2
    assert list(tmp_path.iterdir()) == []
