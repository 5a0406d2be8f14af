"""The multi-process launcher: results, a dead peer ends the run quickly and clearly; which
rank the launcher names when several fail (the one that exited first)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time

import pytest

from gradsched.distributed import DistributedError, LaunchSpec, launch
from gradsched.distributed.launch import _ExitClock

# the launched ranks run torch tasks; the exit clock tests below need no torch
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="could not import 'torch'")


@needs_torch
def test_three_ranks_allreduce():
    results = launch("gradsched.distributed.tasks:allreduce_ranks", {}, LaunchSpec(3))
    assert [r["rank"] for r in results] == [0, 1, 2]
    assert all(r["sum"] == 3.0 for r in results)


@needs_torch
def test_a_rank_exits_once_its_result_is_written_even_with_a_thread_left_running():
    """Without the worker's immediate exit, interpreter shutdown waits for the task's
    non-daemon thread (600 s) and the launcher's deadline fails the run."""
    results = launch("gradsched.distributed.tasks:leave_thread_running", {},
                     LaunchSpec(2, op_timeout_s=20, deadline_s=30))
    assert [r["rank"] for r in results] == [0, 1]


@needs_torch
def test_dead_peer_is_reported_within_bounded_time():
    start = time.monotonic()
    with pytest.raises(DistributedError, match="rank 1 of 2 exited with code 17"):
        launch("gradsched.distributed.tasks:die_on_rank", {"victim": 1},
               LaunchSpec(2, op_timeout_s=20, deadline_s=60))
    assert time.monotonic() - start < 45


@needs_torch
def test_peer_that_never_arrives_fails_clearly():
    # rank 1 runs `sleep` instead of the worker: rank 0's process-group init times out.
    start = time.monotonic()
    spec = LaunchSpec(2, init_timeout_s=3, deadline_s=60,
                      prefixes=[[], ["sh", "-c", "sleep 30", "--"]])
    with pytest.raises(DistributedError, match=r"(?s)rank 0 of 2 .*could not join"):
        launch("gradsched.distributed.tasks:allreduce_ranks", {}, spec)
    assert time.monotonic() - start < 30


@needs_torch
def test_bad_task_name_is_reported():
    with pytest.raises(DistributedError, match="rank 0 of 1"):
        launch("gradsched.distributed.tasks:no_such_task", {}, LaunchSpec(1, deadline_s=60))


@needs_torch
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


# ------------------------------------------------------- which rank failed first (no torch)


def _spawn(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_first_exit_is_named_even_when_a_later_one_has_a_lower_rank():
    # rank 1 fails at once; rank 0 fails 0.3 s later (as a peer that lost its connection)
    procs = [_spawn("import time, os; time.sleep(0.3); os._exit(4)"),
             _spawn("import os; os._exit(17)")]
    with _ExitClock(procs) as clock:
        clock.watch(5.0)
        codes = [p.wait() for p in procs]
        assert codes == [4, 17]
        assert clock.first_failed(codes) == 1


def test_lowest_rank_on_ties_and_running_ranks_ignored():
    procs = [_spawn("import time; time.sleep(30)"), _spawn("import os; os._exit(3)")]
    try:
        with _ExitClock(procs) as clock:
            clock.watch(1.0)
            codes = [p.poll() for p in procs]
            assert clock.first_failed([None, codes[1]]) == 1
            clock.exited_at = {0: 1.0, 1: 1.0}
            assert clock.first_failed([5, 5]) == 0
    finally:
        procs[0].kill()
        procs[0].wait()


def test_a_rank_that_lost_a_peer_is_not_blamed_even_if_it_exited_first():
    """The dying rank's exit can be seen after its peer's (the kernel tears down a large
    process's threads and memory first): the exit code, not the clock, decides."""
    from gradsched.distributed.peer_loss import PEER_LOST

    procs = [_spawn(f"import os; os._exit({PEER_LOST})"),
             _spawn("import time, os; time.sleep(0.3); os._exit(17)")]
    with _ExitClock(procs) as clock:
        clock.watch(5.0)
        codes = [p.wait() for p in procs]
        assert clock.exited_at[0] < clock.exited_at[1]
        assert clock.first_failed(codes) == 1
        # when every failed rank lost a peer (a network failure), the first to exit
        assert clock.first_failed([PEER_LOST, PEER_LOST]) == 0


def test_a_failed_collective_is_told_from_a_task_error():
    from gradsched.distributed.peer_loss import lost_a_peer

    gloo = RuntimeError("[third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error "
                        "[127.0.0.1]:9383: Connection reset by peer. This is typically ...")
    try:
        try:
            raise gloo
        except RuntimeError as exc:
            raise ValueError("rank 1: all-reduce of bucket 0 failed") from exc
    except ValueError as wrapped:
        assert lost_a_peer(wrapped)
    assert lost_a_peer(RuntimeError("Timed out waiting 20000ms for recv operation"))
    assert not lost_a_peer(ValueError("learning rate must be positive"))
    assert not lost_a_peer(KeyError("fc1.weight"))
