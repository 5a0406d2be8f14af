"""The measuring layer's two timers (:mod:`gradsched.capture.timers`): the counts of
:func:`time_calls` on a fake clock (one gloo rank in this process), and a real round trip
between two gloo ranks on loopback (:func:`gradsched.runtime.tasks.p2p_link_times`)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from gradsched.capture import timers
from gradsched.errors import ConfigError


@pytest.fixture
def one_rank(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


class _Clock:
    """A fake ``time.perf_counter`` that only the timed call moves (by ``call_s``)."""

    def __init__(self, call_s: float) -> None:
        self.now, self.call_s, self.calls = 0.0, call_s, 0

    def __call__(self) -> float:
        return self.now

    def op(self) -> None:
        self.calls += 1
        self.now += self.call_s


@pytest.mark.parametrize(("call_s", "warmup", "iters"), [
    (0.125, 3, 8),   # 2 more warm-ups fit in a quarter of 1 s; 1 s // 0.125 s = 8 timed calls
    (0.25, 2, 4),    # one more fits; 4 timed calls
    (0.5, 1, 3),     # none fits: only the checked first; min_iters = 3 wins over 1 s // 0.5 s
    (2.0**-14, 3, 30),  # max_iters wins
])
def test_time_calls_counts(one_rank, monkeypatch, call_s, warmup, iters):
    clock = _Clock(call_s)
    monkeypatch.setattr(timers.time, "perf_counter", clock)
    checked = []
    point = timers.time_calls(clock.op, timers.CallCounts(3, 3, 30, 1.0),
                              timers.agree_max("cpu"), check=lambda: checked.append(clock.calls))
    assert checked == [1]  # after the first call, once
    assert (point.warmup, len(point.times_s)) == (warmup, iters)
    assert clock.calls == warmup + iters
    assert point.times_s == pytest.approx([call_s] * iters)
    assert timers.slowest_per_call(point.times_s) == pytest.approx(point.times_s)


def test_call_counts_are_checked():
    with pytest.raises(ConfigError, match="warmup"):
        timers.CallCounts(0, 1, 1, 1.0)
    with pytest.raises(ConfigError, match="budget"):
        timers.CallCounts(1, 1, 1, 0.0)


@pytest.mark.slow
def test_round_trips_on_loopback():
    from gradsched.distributed import LaunchSpec, launch

    res = launch("gradsched.runtime.tasks:p2p_link_times",
                 {"bytes": 4096, "peers": [1, 2], "iters": 3},
                 LaunchSpec(3, op_timeout_s=60, deadline_s=120))
    times = res[0]["times_s"]
    assert sorted(times) == ["1", "2"] and all(len(v) == 3 and min(v) > 0
                                               for v in times.values())
    assert res[1]["times_s"] == {} and res[2]["times_s"] == {}
