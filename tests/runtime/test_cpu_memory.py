"""Measured peak memory of one iteration on CPU (torch.profiler's allocator events)."""

from __future__ import annotations

import torch

from gradsched.runtime.cpu_memory import iteration_peak_bytes, running_peak


def test_running_peak_follows_time_order_from_zero() -> None:
    assert running_peak([]) == 0
    assert running_peak([(3, -40), (1, 100), (2, 50), (4, 10)]) == 150
    assert running_peak([(1, -10), (2, 5)]) == 0  # a free of older storage lowers nothing


def test_peak_counts_what_the_iteration_allocates_and_not_what_existed() -> None:
    older = torch.ones(250_000)  # 1 MB that exists before the iteration

    def one() -> None:
        nonlocal older
        del older  # freeing older storage does not lower the count
        a = torch.ones(500_000)  # 2 MB
        b = torch.ones(250_000)  # 1 MB, live with a
        del a, b
        c = torch.ones(100_000)  # 0.4 MB after both are freed
        del c

    peak = iteration_peak_bytes(one)
    assert 3_000_000 <= peak < 3_100_000
