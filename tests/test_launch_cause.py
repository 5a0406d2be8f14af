"""Which rank the launcher names when several fail: the one that exited first."""

import subprocess
import sys

from gradsched.distributed.launch import _ExitClock


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
