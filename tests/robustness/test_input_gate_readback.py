"""What gradsched writes and reads back goes through the input gate too, one family per
section: the forkserver's ledger and frames, the ranks' results (the launcher's reader, the
timing protocol's records, the captures' results), the emulated cluster's records, a
measured case's ``meta.json``, the tables read back, and the kernel's pseudo-files
(``/proc``, cgroups). A file cut short, a line of garbage, a NaN or a negative time ends
with one error naming the file and the field (a command prints it as one ``error:`` line,
exit 2): never a traceback, never a value taken silently.

Each module is imported inside its test, so that each test fails on its own. All inputs are
SYNTHETIC (made below) or copies of committed files, corrupted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.errors import InputError


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == 2, f"exit {code}: {err}"
    last = err.strip().splitlines()[-1]
    assert "error:" in last, err
    for needle in needles:
        assert needle in last, last
    return last


# ------------------------------------------------------- /proc and cgroup files
def test_proc_stat_fields_must_be_numbers(tmp_path: Path) -> None:
    from gradsched.runtime import load

    stat = tmp_path / "stat"
    stat.write_text("cpu  100 x7 100 5000 7 0 0 0 0 0\n", encoding="ascii")
    with pytest.raises(InputError, match=r"stat, field 'cpu nice': 'x7' is not a number"):
        load.machine_busy_s(stat)
    stat.write_text("cpu  100 -1 100 5000\n", encoding="ascii")
    with pytest.raises(InputError, match=r"field 'cpu nice'"):
        load.machine_busy_s(stat)


def test_a_garbage_meminfo_ends_a_command_with_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``import kineto`` bounds its input by the available memory (``/proc/meminfo``): a
    value that is not a number was taken as "no bound" silently."""
    from gradsched import admission

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable:  12x4 kB\n", encoding="ascii")
    monkeypatch.setattr(admission, "PROC_MEMINFO", meminfo)
    trace = tmp_path / "k.json"
    trace.write_text(json.dumps({"traceEvents": []}), encoding="utf-8")
    _refused(["import", "kineto", str(trace), "-o", str(tmp_path / "out")], capsys,
             "meminfo, field 'MemAvailable'", "'12x4' is not a number")
    meminfo.write_text("MemAvailable:  2048 kB\n", encoding="ascii")
    assert admission.mem_available(meminfo) == 2048 * 1024
    assert admission.mem_available(tmp_path / "absent") is None  # not Linux: no bound


@pytest.mark.parametrize("content,needle", [
    ("12x\n", "field 'pids.max': '12x' is not a number"),
    ("-5\n", "field 'pids.max': '-5' is not a number"),
    ("99999999999999999999\n", "is not a number"),
])
def test_cgroup_values_must_be_numbers(content: str, needle: str, tmp_path: Path) -> None:
    from gradsched.procfs import read_pseudo_int

    limit = tmp_path / "pids.max"
    limit.write_text(content, encoding="ascii")
    with pytest.raises(InputError, match=needle):
        read_pseudo_int(limit, unlimited="max")
    limit.write_text("max\n", encoding="ascii")
    assert read_pseudo_int(limit, unlimited="max") is None
    assert read_pseudo_int(tmp_path / "absent") is None  # controller not mounted: no bound


def test_a_process_status_line_is_parsed_strictly(tmp_path: Path) -> None:
    from gradsched.procfs import process_stat

    (tmp_path / "7").mkdir()
    fields = ["S"] + ["0"] * 18 + ["12345"] + ["0"] * 5
    (tmp_path / "7" / "stat").write_bytes(b"7 (a) b\xff)) " + " ".join(fields).encode())
    assert process_stat(7, tmp_path) == ("S", 12345)
    fields[19] = "12x"
    (tmp_path / "7" / "stat").write_text("7 (a) " + " ".join(fields), encoding="ascii")
    with pytest.raises(InputError, match=r"7/stat, field 'starttime'"):
        process_stat(7, tmp_path)
    (tmp_path / "7" / "stat").write_text("7 (a) S 1 2", encoding="ascii")  # cut short
    with pytest.raises(InputError, match="not a process status line"):
        process_stat(7, tmp_path)
    assert process_stat(8, tmp_path) is None  # no such process
