"""Numbers checked where they are read (the "input gate" family): the hook-free summary of
``traces correct``, the Kineto importer's events, ranks and steps, deep JSON, byte sums,
the input size bound and its override. Each bad input: exit 2, one ``error:`` line, no
traceback, nothing written. All inputs are SYNTHETIC (made below).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gradsched.cli import main
from tests.conftest import synthetic_comm_trace, synthetic_compute_trace
from tests.robustness.refusal import refused


# ------------------------------------------------------------------ traces correct
@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SYNTHETIC compute trace with the sidecar fields of a hooked capture."""
    d = tmp_path_factory.mktemp("correct")
    trace = synthetic_compute_trace(4)
    trace.meta.update({"forward_nohooks_s": 1e-3, "backward_nohooks_s": 2e-3,
                       "capture_overhead": 0.5})
    trace.save(d / "t.csv")
    return d


@pytest.mark.parametrize("median", ["0.01", 0, [0.01, 0.02], 1e308, -1, True, None])
def test_hook_free_summary_medians_are_checked(
        median: Any, hooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = hooked / "s.json"
    summary.write_text(json.dumps({"t": {"cuda_event_medians_s": {
        "a": {"forward": median, "backward": 2e-3}}}}), encoding="utf-8")
    refused(["traces", "correct", str(hooked / "t.csv"), "-o", str(hooked / "o.csv"),
              "--hook-free-summary", str(summary)], capsys, "s.json",
             "t.cuda_event_medians_s.a.forward")
    assert not (hooked / "o.csv").exists()


def test_hook_free_summary_of_the_wrong_shape_is_refused(
        hooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = hooked / "shape.json"
    summary.write_text(json.dumps({"t": {"cuda_event_medians_s": [1, 2]}}), encoding="utf-8")
    refused(["traces", "correct", str(hooked / "t.csv"), "-o", str(hooked / "o.csv"),
              "--hook-free-summary", str(summary)], capsys, "shape.json")


# ---------------------------------------------------------------------------- kineto
def _x(name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur, "args": args}


META = {"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
        "Group size": 2, "dtype": "Float"}


def _kineto(path: Path, events: list[dict[str, Any]] | None = None,
            info: dict[str, Any] | None = None) -> Path:
    """A SYNTHETIC (hand-written) CPU-style Kineto trace of two steps."""
    events = events if events is not None else [
        _x("ProfilerStep#1", 0, 1000), _x("ProfilerStep#2", 1000, 1000),
        _x("record_param_comms", 100, 50, **META), _x("aten::mm", 10, 50)]
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {
        "backend": "gloo", "rank": 0, "world_size": 2, **(info or {})}}), encoding="utf-8")
    return path


KINETO_BAD = {
    "overlapping-steps": ([_x("ProfilerStep#1", 0, 1000), _x("ProfilerStep#2", 500, 1000)],
                          None, "overlap"),
    "negative-ts": ([_x("ProfilerStep#1", -5, 1000)], None, "traceEvents[0].ts"),
    "huge-duration": ([_x("ProfilerStep#1", 0, 1e308)], None, "traceEvents[0].dur"),
    "group-size-0": ([_x("ProfilerStep#1", 0, 1000),
                      _x("record_param_comms", 100, 50, **{**META, "Group size": 0})],
                     None, "Group size"),
    "world-size-0": (None, {"world_size": 0}, "distributedInfo.world_size"),
    "rank-7-of-2": (None, {"rank": 7}, "distributedInfo.rank"),
}


@pytest.mark.parametrize("case", list(KINETO_BAD))
def test_kineto_import_refuses_impossible_traces(case: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    events, info, needle = KINETO_BAD[case]
    trace = _kineto(tmp_path / "k.json", events, info)
    refused(["import", "kineto", str(trace), "-o", str(tmp_path / "out")], capsys,
             "k.json", needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.json"]


def test_kineto_import_refuses_a_file_given_twice(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    trace = _kineto(tmp_path / "k.json")
    refused(["import", "kineto", str(trace), str(tmp_path / "." / "k.json"), "-o",
              str(tmp_path / "out")], capsys, "given twice")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.json"]


def test_kineto_import_refuses_a_missing_step(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    trace = _kineto(tmp_path / "k.json")
    refused(["import", "kineto", str(trace), "--step", "99", "-o", str(tmp_path / "out")],
             capsys, "ProfilerStep#99", "1, 2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.json"]
    assert main(["import", "kineto", str(trace), "--step", "2", "-o",
                 str(tmp_path / "out")]) == 0
    rows = (tmp_path / "out.iterations.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 2 and ",2," in rows[1]


def test_deeply_nested_args_are_one_line_not_a_recursion_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    text = json.dumps({"traceEvents": [_x("ProfilerStep#1", 0, 10, x="DEEP")]})
    (tmp_path / "deep.json").write_text(text.replace('"DEEP"', deep), encoding="utf-8")
    refused(["import", "kineto", str(tmp_path / "deep.json"), "-o", str(tmp_path / "out")],
             capsys, "deep.json", "nested too deeply")


# ------------------------------------------------------------------- byte sums, sizes
def test_inventory_byte_sum_cannot_wrap_int64(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    trace = synthetic_compute_trace(4)
    trace.save(tmp_path / "c.csv")
    lines = (tmp_path / "c.csv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    rows = []
    for i in range(16_400):  # 16 400 x 2^50 bytes > 2^63: numpy's int64 sum wraps
        cells = lines[1].split(",")
        cells[header.index("name")] = f"l{i}.weight"
        cells[header.index("layer")] = str(i)
        cells[header.index("numel")] = str(2**48)
        cells[header.index("bytes")] = str(2**50)
        cells[header.index("ready_order")] = str(16_399 - i)
        rows.append(",".join(cells))
    (tmp_path / "big.csv").write_text("\n".join([lines[0], *rows]) + "\n", encoding="utf-8")
    (tmp_path / "big.meta.json").write_text(
        (tmp_path / "c.meta.json").read_text(encoding="utf-8"), encoding="utf-8")
    refused(["traces", "inventory", str(tmp_path / "big.csv"), "-o", str(tmp_path / "i.csv")],
             capsys, "big.csv", "2**62")
    assert not (tmp_path / "i.csv").exists()


@pytest.mark.parametrize("value", ["0", "", "1e9", "-1", "1_000"])
def test_input_bound_override_is_checked_by_every_command(
        value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    synthetic_compute_trace(4).save(tmp_path / "c.csv")
    monkeypatch.setenv("GRADSCHED_MAX_INPUT_BYTES", value)
    refused(["traces", "validate", str(tmp_path / "c.csv")], capsys,
             "GRADSCHED_MAX_INPUT_BYTES")


@pytest.mark.parametrize("argv", [
    ["traces", "validate", "{d}/c.csv"],
    ["replay", "--compute", "{d}/c.csv", "--comm", "{d}/m.csv", "-o", "{d}/o.csv"],
    ["fit", "{d}/m.csv", "-o", "{d}/f.json"],
    ["replay", "--compute", "{d}/c.csv", "--comm", "{d}/m.csv", "--interference",
     "{d}/i.json", "-o", "{d}/o.csv"],
])
def test_one_reader_enforces_the_input_bound(argv: list[str], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Every input -- CSVs, sidecars, JSON -- through the one reader (io.read_bytes): a file
    above $GRADSCHED_MAX_INPUT_BYTES is refused before it is read."""
    synthetic_compute_trace(4).save(tmp_path / "c.csv")
    synthetic_comm_trace([2**k for k in range(2, 24, 2)]).save(tmp_path / "m.csv")
    (tmp_path / "i.json").write_text(json.dumps({"compute_slowdown": 1.0, "comm_slowdown": 1.0,
                                                 "pad": "x" * 5000}), encoding="utf-8")
    monkeypatch.setenv("GRADSCHED_MAX_INPUT_BYTES", "200")
    refused([a.replace("{d}", str(tmp_path)) for a in argv], capsys,
             "GRADSCHED_MAX_INPUT_BYTES")
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "f.json").exists()


def test_an_input_beyond_two_gib_is_refused_unread(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    synthetic_compute_trace(4).save(tmp_path / "c.csv")
    with (tmp_path / "c.csv").open("ab") as handle:  # a hole: no disk, no memory
        handle.truncate((2 << 30) + 1)
    refused(["traces", "validate", str(tmp_path / "c.csv")], capsys, "c.csv", "bound")
