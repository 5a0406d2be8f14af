"""Fixtures shared by the robustness tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_ranks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record (and stop) any attempt to start a rank or join a process group in this
    process, by any launcher: the timing rounds, the sweep and iteration captures, the
    sharded runs and stock-DDP items, and torch's own ``init_process_group``. A refusal
    that must come before launch leaves the returned list empty."""
    import torch.distributed as dist

    import gradsched.capture.iteration as iteration
    import gradsched.capture.sweep as sweep
    import gradsched.reexec.sharded as sharded
    import gradsched.runtime.bench as bench
    import gradsched.runtime.rounds as rounds

    started: list[str] = []

    def refuse(*_: object, **__: object) -> None:
        started.append("rank")
        raise AssertionError("a rank was started")

    for module, name in ((rounds, "launch"), (sweep, "launch"), (iteration, "launch"),
                         (iteration, "init_group"), (dist, "init_process_group"),
                         (sharded, "run_plans"), (bench, "init_group"),
                         (bench, "run_items")):
        monkeypatch.setattr(module, name, refuse)
    return started
