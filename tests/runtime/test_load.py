"""Machine-load accounting of the timing protocol: foreign cores, /proc/stat, a busy
loop seen as foreign load."""

from __future__ import annotations

import pytest

from gradsched.errors import InputError
from gradsched.runtime import load


def test_foreign_cores_subtracts_the_ranks_own_cpu(tmp_path):
    start = load.CpuSample(100.0, 0.0, 10.0)
    end = load.CpuSample(104.0, 0.0, 12.0)  # 4 busy CPU-seconds in 2 s
    assert load.foreign_cores(start, end, ranks_cpu_s=3.5) == pytest.approx(0.25)
    assert load.foreign_cores(start, end, ranks_cpu_s=5.0) == 0.0  # never negative
    assert load.foreign_cores(load.CpuSample(None, 0, 0), end, 1.0) is None


def test_machine_busy_reads_proc_stat_format(tmp_path):
    stat = tmp_path / "stat"
    hz = __import__("os").sysconf("SC_CLK_TCK")
    stat.write_text(f"cpu  {hz} 0 {hz} 5000 7 0 0 0 0 0\ncpu0 1 2 3\n")
    assert load.machine_busy_s(stat) == pytest.approx(2.0)
    assert load.machine_busy_s(tmp_path / "missing") is None  # not Linux: no sample
    stat.write_text("garbage\n")  # there, but not /proc/stat: named, never a silent None
    with pytest.raises(InputError, match="stat, line 1: the first line is not"):
        load.machine_busy_s(stat)


def test_a_busy_loop_is_seen_as_foreign_load():
    import subprocess
    import sys

    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = load.busy_cores(1.0)
    finally:
        hog.kill()
        hog.wait()
    assert busy is not None and busy > 0.5
