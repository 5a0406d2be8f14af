"""What gradsched writes and reads back goes through the input gate too, one family per
section: the ranks' results (the launcher's reader, the
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
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from gradsched.errors import InputError
from tests.robustness.refusal import refused


# ------------------------------------------------------------------ ranks' results
def test_a_rank_result_cut_in_half_names_the_rank_and_file(tmp_path: Path) -> None:
    from gradsched.distributed.launch import DistributedError, read_result

    whole = json.dumps({"rank": 1, "runs": [{"item": 0, "times": [0.1, 0.2]}]})
    (tmp_path / "rank1.result.json").write_text(whole[: len(whole) // 2], encoding="utf-8")
    with pytest.raises(DistributedError, match=r"rank 1 .* result is unreadable: .*"
                       r"rank1.result.json, line 1: not valid JSON"):
        read_result(tmp_path, 1)
    (tmp_path / "rank1.result.json").write_bytes(b'{"runs": "\xff"}')
    with pytest.raises(DistributedError, match=r"rank1.result.json, line 1: not UTF-8"):
        read_result(tmp_path, 1)
    (tmp_path / "rank1.result.json").write_text(whole, encoding="utf-8")
    assert read_result(tmp_path, 1) == json.loads(whole)


def _run(index: int, **over: Any) -> dict[str, Any]:
    """A SYNTHETIC record of one run, as :func:`gradsched.runtime.rounds.time_item` writes."""
    return {"round": 0, "position": index, "item": index, "times": [0.01, 0.02],
            "n_collectives": 3, "rebuilt_buckets": None, "unit_tensors": [],
            "peak_bytes": None, "load": 0.5, "started_at": "2026-01-01T00:00:00Z",
            "cpu_s": 0.05, "busy": [10.0, 10.2], "wall": [5.0, 5.1]} | over


RECORD_BAD = {
    "negative-time": ({"times": [0.01, -0.02]}, "runs[1].times[1]"),
    "nan-time": ({"times": [float("nan"), 0.02]}, "runs[1].times[0]"),
    "string-time": ({"times": ["0.01", 0.02]}, "runs[1].times[0]"),
    "times-cut-short": ({"times": [0.01]}, "runs[1].times"),
    "item-that-does-not-exist": ({"item": 7}, "runs[1].item"),
    "round-that-does-not-exist": ({"round": 3}, "runs[1].round"),
    "negative-cpu": ({"cpu_s": -1.0}, "runs[1].cpu_s"),
    "clock-backwards": ({"wall": [5.0, 4.0]}, "runs[1].wall"),
    "peak-beyond-int64": ({"peak_bytes": 2**63}, "runs[1].peak_bytes"),
    "busy-not-a-pair": ({"busy": [1.0]}, "runs[1].busy"),
}


@pytest.mark.parametrize("case", list(RECORD_BAD))
def test_timing_records_are_checked_before_any_time_is_used(case: str) -> None:
    from gradsched.runtime.records import check_records

    over, field = RECORD_BAD[case]
    good = [{"rank": r, "runs": [_run(0), _run(1)]} for r in range(2)]
    assert check_records(good, items=2, rounds=1, iters=2, workers=2) == good
    bad = [good[0], {"rank": 1, "runs": [_run(0), _run(1, **over)]}]
    with pytest.raises(InputError, match=re.escape(f"rank1.result.json, field '{field}'")):
        check_records(bad, items=2, rounds=1, iters=2, workers=2)


def test_timing_records_of_another_rank_or_order_are_refused() -> None:
    from gradsched.runtime.records import check_records

    runs = [_run(0), _run(1)]
    with pytest.raises(InputError, match=r"rank1.result.json, field 'rank'"):
        check_records([{"rank": 0, "runs": runs}, {"rank": 5, "runs": runs}], items=2,
                      rounds=1, iters=2, workers=2)
    with pytest.raises(InputError, match=r"rank1.result.json, field 'runs'.* 1 items"):
        check_records([{"rank": 0, "runs": runs}, {"rank": 1, "runs": runs[:1]}], items=2,
                      rounds=1, iters=2, workers=2)
    swapped = [_run(1, position=0), _run(0, position=1)]
    with pytest.raises(InputError, match=r"rank1.result.json, field 'runs\[0\]'.*same order"):
        check_records([{"rank": 0, "runs": runs}, {"rank": 1, "runs": swapped}], items=2,
                      rounds=1, iters=2, workers=2)


def test_capture_results_are_checked_before_they_are_used(tmp_path: Path) -> None:
    """The comm sweep's times and sizes, and a profiled iteration's trace path (a result
    never sends the importer to another file)."""
    from gradsched.capture.iteration import IterationOptions, trace_path
    from gradsched.capture.iteration import check_results as check_iteration
    from gradsched.capture.sweep_settings import SweepConfig
    from gradsched.capture.sweep_trace import check_results as check_sweep

    config = SweepConfig(world_size=2, collectives=["all_reduce"])
    item = {"collective": "all_reduce", "bytes": 1024, "warmup": 1, "times_s": [1e-4, 2e-4]}
    good = [{"rank": r, "threads": 1, "results": [dict(item)]} for r in range(2)]
    check_sweep(good, config)
    for over, field in (({"times_s": [1e-4, float("inf")]}, "results[0].times_s[1]"),
                        ({"times_s": [-1e-4]}, "results[0].times_s[0]"),
                        ({"bytes": 2**60}, "results[0].bytes"),
                        ({"collective": "broadcast"}, "results[0].collective")):
        bad = [good[0], {"rank": 1, "threads": 1, "results": [item | over]}]
        with pytest.raises(InputError, match=re.escape(f"rank1.result.json, field '{field}'")):
            check_sweep(bad, config)

    opts = IterationOptions(model="tiny-mlp", batch_size=4, world_size=1,
                            bucket_caps_mb=[25.0], iters=2)
    trace = str(trace_path(tmp_path, 25.0, 0).relative_to(tmp_path))
    caps = {"25": {"wall_s": [0.1, 0.2], "grad_bytes": 1000, "trace": trace}}
    check_iteration(tmp_path, opts, [{"rank": 0, "host": "h", "caps": caps}])
    for over, field in (({"trace": "../../etc/passwd"}, "caps.25.trace"),
                        ({"wall_s": [0.1, float("nan")]}, "caps.25.wall_s[1]"),
                        ({"grad_bytes": -1}, "caps.25.grad_bytes")):
        bad = {"25": caps["25"] | over}
        with pytest.raises(InputError, match=re.escape(f"rank0.result.json, field '{field}'")):
            check_iteration(tmp_path, opts, [{"rank": 0, "host": "h", "caps": bad}])


# ------------------------------------------------------------------ cluster records
def _record(**over: Any) -> dict[str, Any]:
    return {"version": 1, "prefix": "p-", "owner": {"pid": 4242, "start_time": "99"},
            "namespaces": {"p-sw": {"inode": None, "links": ["br0"]}},
            "processes": [{"pid": 4243, "start_time": None}]} | over


CLUSTER_BAD = {
    "pid-not-a-number": ({"owner": {"pid": "abc", "start_time": "1"}}, "owner.pid"),
    "pid-minus-one": ({"owner": {"pid": -1, "start_time": "1"}}, "owner.pid"),
    "pid-true": ({"owner": {"pid": True, "start_time": "1"}}, "owner.pid"),
    "start-time-garbage": ({"owner": {"pid": 5, "start_time": "1; rm"}}, "owner.start_time"),
    "process-pid-float": ({"processes": [{"pid": 1.5, "start_time": None}]},
                          "processes[0].pid"),
    "namespace-path": ({"namespaces": {"../../etc": {"inode": None}}}, "namespaces"),
    "inode-negative": ({"namespaces": {"p-sw": {"inode": -3}}}, "namespaces.p-sw.inode"),
}


@pytest.mark.parametrize("case", list(CLUSTER_BAD))
def test_a_cluster_record_is_checked_before_anything_is_killed_or_removed(
        case: str, tmp_path: Path) -> None:
    from gradsched.distributed import cluster_record
    from gradsched.distributed.netns import ClusterError

    over, field = CLUSTER_BAD[case]
    path = tmp_path / "p-.json"
    path.write_text(json.dumps(_record()), encoding="utf-8")
    assert cluster_record.load_record(path)["owner"]["pid"] == 4242
    path.write_text(json.dumps(_record(**over)), encoding="utf-8")
    with pytest.raises(ClusterError, match=re.escape(f"p-.json, field '{field}'")):
        cluster_record.load_record(path)
    assert path.is_file()


# -------------------------------------------------------------- a case's meta.json
CASE = Path("paper/data/reexec/cases/resnet18-b4-p2-loopback")

META_BAD = {
    "negative-time": (lambda m: m | {"wall_s": -1.0}, "field 'wall_s'"),
    "nan-load": (lambda m: m | {"load_average_before": [float("nan"), 1.0, 1.0]},
                 "field 'load_average_before[0]'"),
    "case-world-size-0": (lambda m: m | {"case": m["case"] | {"world_size": 0}},
                          "field 'case.world_size'"),
    "label-with-a-path": (lambda m: m | {"item_of": {"../../x": "plan-x"}},
                          "field 'item_of'"),
    "rebuilt-not-a-boolean": (lambda m: m | {"ddp_rebuilt_buckets": {
        "ddp-list-x": {"buckets_match_plan": "yes"}}},
        "field 'ddp_rebuilt_buckets.ddp-list-x.buckets_match_plan'"),
}


@pytest.fixture
def case_copy(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of a committed case folder; the traces its meta.json names are read from the
    repository (the working folder)."""
    monkeypatch.chdir(repo)
    folder = tmp_path / CASE.name
    shutil.copytree(repo / CASE, folder)
    return folder


@pytest.mark.parametrize("case", list(META_BAD))
def test_a_corrupt_meta_json_ends_collect_with_one_line(
        case: str, case_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit, needle = META_BAD[case]
    meta_file = case_copy / "meta.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    meta_file.write_text(json.dumps(edit(meta)), encoding="utf-8")
    refused(["reexec", "collect", str(case_copy), "-o", str(tmp_path / "m.csv")], capsys,
             "meta.json", needle)
    assert not (tmp_path / "m.csv").exists()


def test_a_meta_json_cut_in_half_ends_collect_with_one_line(
        case_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    meta_file = case_copy / "meta.json"
    text = meta_file.read_text(encoding="utf-8")
    meta_file.write_text(text[: len(text) // 2], encoding="utf-8")
    refused(["reexec", "collect", str(case_copy), "-o", str(tmp_path / "m.csv")], capsys,
             "meta.json, line", "not valid JSON")


@pytest.mark.parametrize("iters", [0, "3", 2.5, None])
def test_a_sharded_meta_json_gives_its_iterations_as_a_count(
        iters: Any, repo: Path, tmp_path: Path) -> None:
    from gradsched.reexec.sharded import read_iterations

    folder = tmp_path / "case"
    shutil.copytree(repo / "paper/data/sharded/resnet18-b4-p2-tbf1gbit", folder)
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    (folder / "meta.json").write_text(json.dumps(meta | {"iters": iters}), encoding="utf-8")
    with pytest.raises(InputError, match=r"meta.json, field 'iters'"):
        read_iterations(folder)


# ------------------------------------------------------------- tables read back
def test_a_table_read_back_is_bounded_like_any_input(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_intermediate`` without ``named_errors`` read the bytes itself, past the size
    bound; it keeps its OS and decoding errors, but the bound is the gate's."""
    from gradsched.intermediates import read_intermediate

    table = tmp_path / "t.csv"
    table.write_text("a,b\n" + "1,2\n" * 40, encoding="utf-8")
    assert len(read_intermediate(table)) == 40
    monkeypatch.setenv("GRADSCHED_MAX_INPUT_BYTES", "64")
    with pytest.raises(InputError, match=r"t.csv: .*beyond the bound of 64 bytes"):
        read_intermediate(table)
    monkeypatch.delenv("GRADSCHED_MAX_INPUT_BYTES")
    with pytest.raises(FileNotFoundError):  # as pandas failed on it, named by the CLI
        read_intermediate(tmp_path / "missing.csv")


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
    refused(["import", "kineto", str(trace), "-o", str(tmp_path / "out")], capsys,
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
