# ruff: noqa: E501  (the embedded logs keep their real column widths)
"""The nccl-tests importer: real files (numbers checked against them) and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.traces import CommTrace
from gradsched.traces.importers import nccl_tests

# A small log in the newer nccl-tests layout (root + #wrong), written for the error tests.
NEW_LAYOUT = """\
# nccl-tests version 2.18.2 nccl-headers=23007 nccl-library=23007
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  101 on  hostA device  0 [0000:04:00] NVIDIA H100
#  Rank  1 Group  0 Pid  102 on  hostA device  1 [0000:05:00] NVIDIA H100
#  Rank  2 Group  0 Pid  201 on  hostB device  0 [0000:04:00] NVIDIA H100
#  Rank  3 Group  0 Pid  202 on  hostB device  1 [0000:05:00] NVIDIA H100
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.00    0.00    0.00      0    11.00    0.00    0.00      0
          16             4     float     sum      -1    12.00    0.00    0.00      0    13.00    0.00    0.00      0
          32             8     float     sum      -1    14.00    0.00    0.00      0    15.00    0.00    0.00      0
          64            16     float     sum      -1    16.00    0.00    0.01      0    17.00    0.00    0.01      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.00
"""
FIRST_ROW = 14  # physical line of the 8-byte row above
PROV = {"source": "unit test", "hardware": "none"}


def _write(tmp_path: Path, text: str, name: str = "log.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _replace_line(text: str, number: int, new: str) -> str:
    lines = text.splitlines()
    lines[number - 1] = new
    return "\n".join(lines) + "\n"


def _nccl(path: Path, **kwargs) -> CommTrace:
    result = nccl_tests.import_nccl_tests(path, nccl_tests.Options(**{**PROV, **kwargs}))
    assert result.comm is not None
    return result.comm


# --------------------------------------------------------------------------- nccl-tests, real


def test_abci_inter_anode_2_numbers(external_dir: Path) -> None:
    result = nccl_tests.import_nccl_tests(external_dir / "nccl-tests/abci-inter-anode-2.txt")
    frame = result.comm.frame
    assert len(frame) == 48 and not result.warnings
    assert set(frame["world_size"]) == {16} and set(frame["nodes"]) == {2}
    assert set(frame["collective"]) == {"all_reduce"} and set(frame["backend"]) == {"nccl"}
    oop = frame[~frame["in_place"]].reset_index(drop=True)
    inp = frame[frame["in_place"]].reset_index(drop=True)
    assert oop.loc[0, "bytes"] == 4 and oop.loc[0, "time_s"] == pytest.approx(33.50e-6)
    assert inp.loc[0, "time_s"] == pytest.approx(32.56e-6)
    last = oop.iloc[-1]
    assert last["bytes"] == 33554432 and last["time_s"] == pytest.approx(1887.3e-6)
    assert last["algbw_Bps"] == pytest.approx(17.78e9) and last["busbw_Bps"] == pytest.approx(
        33.34e9)
    meta = result.comm.meta
    assert meta["source"].startswith("github.com/aistabci/abci2.0benchmark")
    assert "2 nodes x 8 GPUs" in meta["hardware"]
    assert meta["original_file"] == "abci-inter-anode-2.txt" and meta["statistic"] == "mean"
    assert meta["iterations"] == 100


@pytest.mark.parametrize(
    ("name", "world", "nodes", "collective", "backend", "sizes"),
    [
        ("gcp-a4xmax-2x4-gb300-allgather.txt", 8, 2, "all_gather", "nccl", 23),
        ("cscs-alps-gh200-2node-allreduce.txt", 2, 2, "all_reduce", "nccl", 8),
        ("abci-inter-vnode-32.txt", 128, 32, "all_reduce", "nccl", 24),
    ],
)
def test_nccl_real_files(external_dir: Path, name: str, world: int, nodes: int,
                         collective: str, backend: str, sizes: int) -> None:
    comm = nccl_tests.import_nccl_tests(external_dir / "nccl-tests" / name).comm
    frame = comm.frame
    assert len(frame) == 2 * sizes
    assert set(frame["world_size"]) == {world} and set(frame["nodes"]) == {nodes}
    assert set(frame["collective"]) == {collective} and set(frame["backend"]) == {backend}


def test_srun_labelled_log_needs_ranks_and_parses(external_dir: Path) -> None:
    """The AWS p5 log is published with srun's ``0: `` label on every line and no Rank
    lines: the labels are dropped, the rank count must be given."""
    path = external_dir / "nccl-tests/aws-p5-2x8-h100-allreduce.txt"
    with pytest.raises(InputError, match="pass --world-size"):
        nccl_tests.import_nccl_tests(path)
    comm = nccl_tests.import_nccl_tests(path, nccl_tests.Options(world_size=16, nodes=2)).comm
    assert len(comm.frame) == 2 * 32
    assert set(comm.frame["world_size"]) == {16} and set(comm.frame["nodes"]) == {2}
    oop = comm.frame[~comm.frame["in_place"]].reset_index(drop=True)
    assert oop.loc[0, "bytes"] == 8 and oop.loc[0, "time_s"] == pytest.approx(69.12e-6)
    assert oop.iloc[-1]["bytes"] == 17179869184
    assert oop.iloc[-1]["time_s"] == pytest.approx(66132e-6)


def test_tag_output_label_is_dropped(tmp_path: Path) -> None:
    labelled = "\n".join(f"[1,0]<stdout>:{line}" for line in NEW_LAYOUT.splitlines())
    assert len(_nccl(_write(tmp_path, labelled)).frame) == 8


def test_collective_flag_needed_when_file_is_silent(external_dir: Path, tmp_path: Path) -> None:
    text = (external_dir / "nccl-tests/aws-p5-2x8-h100-allreduce.txt").read_text()
    path = _write(tmp_path, text.replace("all_reduce_perf", "the benchmark"))
    options = nccl_tests.Options(world_size=16, nodes=2)
    with pytest.raises(InputError, match="pass --collective") as err:
        nccl_tests.import_nccl_tests(path, options)
    assert err.value.field == "collective"
    options = nccl_tests.Options(world_size=16, nodes=2, collective="all_reduce")
    comm = nccl_tests.import_nccl_tests(path, options).comm
    assert set(comm.frame["collective"]) == {"all_reduce"}


def test_vnode_32_glitch_is_a_warning(external_dir: Path) -> None:
    result = nccl_tests.import_nccl_tests(external_dir / "nccl-tests/abci-inter-vnode-32.txt")
    assert result.warnings and all(w.line == 156 for w in result.warnings)
    assert result.comm.meta["warnings"][0].startswith("line 156: ")


# --------------------------------------------------------------------- nccl-tests, malformed


def test_synthetic_log_parses(tmp_path: Path) -> None:
    comm = _nccl(_write(tmp_path, NEW_LAYOUT))
    assert len(comm.frame) == 8
    assert set(comm.frame["world_size"]) == {4} and set(comm.frame["nodes"]) == {2}


def test_truncated_last_row_is_an_error(tmp_path: Path) -> None:
    lines = NEW_LAYOUT.splitlines()[: FIRST_ROW + 3]
    lines[-1] = lines[-1][:70]  # the 64-byte row, cut in the middle
    path = _write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        _nccl(path)
    assert err.value.line == FIRST_ROW + 3 and err.value.field == "busbw"
    assert str(path) in str(err.value) and f"line {FIRST_ROW + 3}" in str(err.value)
    assert "truncated" in str(err.value)


def test_garbage_line_inside_table(tmp_path: Path) -> None:
    text = _replace_line(NEW_LAYOUT, FIRST_ROW + 1, "NCCL WARN something went wrong")
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match="unexpected text inside the table") as err:
        _nccl(path)
    assert err.value.line == FIRST_ROW + 1 and err.value.field == "size"
    assert str(path) in str(err.value)


def test_bad_number_names_line_and_field(tmp_path: Path) -> None:
    row = NEW_LAYOUT.splitlines()[FIRST_ROW].replace("12.00", "1x.00")
    path = _write(tmp_path, _replace_line(NEW_LAYOUT, FIRST_ROW + 1, row))
    with pytest.raises(InputError, match="not a number") as err:
        _nccl(path)
    assert (err.value.line, err.value.field) == (FIRST_ROW + 1, "time")


def test_negative_time_is_an_error(tmp_path: Path) -> None:
    row = NEW_LAYOUT.splitlines()[FIRST_ROW].replace("13.00", "-13.00")
    path = _write(tmp_path, _replace_line(NEW_LAYOUT, FIRST_ROW + 1, row))
    with pytest.raises(InputError, match="negative") as err:
        _nccl(path)
    assert (err.value.line, err.value.field) == (FIRST_ROW + 1, "time_ip")
    assert f"{path}, line {FIRST_ROW + 1}, field 'time_ip'" in str(err.value)


def test_wrong_count_rejects_only_that_measurement(tmp_path: Path) -> None:
    row = NEW_LAYOUT.splitlines()[FIRST_ROW - 1]
    row = row[: row.rindex("0")] + "3"  # in-place #wrong = 3
    path = _write(tmp_path, _replace_line(NEW_LAYOUT, FIRST_ROW, row))
    result = nccl_tests.import_nccl_tests(path, nccl_tests.Options(**PROV))
    assert len(result.comm.frame) == 7
    assert [(w.line, "#wrong = 3" in w.message) for w in result.warnings] == [(FIRST_ROW, True)]
    assert "in-place measurement of size 8 rejected" in result.comm.meta["warnings"][0]
    assert result.warnings[0].render().startswith(f"warning: {path} line {FIRST_ROW}: ")


def test_asterisk_error_rejected_old_layout(tmp_path: Path) -> None:
    old = """\
# nThread 1 nGpus 1 minBytes 4 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 100 validation: 1
#   Rank  0 Pid 1 on      a0001 device  0 [0x27] A100-SXM4-40GB
#   Rank  1 Pid 2 on      a0001 device  1 [0x2a] A100-SXM4-40GB
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
           4             1   float     sum    33.50    0.00    0.00  2e+00*   32.56    0.00    0.00  4e-07
           8             2   float     sum    32.62    0.00    0.00  4e-07    32.25    0.00    0.00  5e-01
"""
    path = _write(tmp_path, old)
    result = nccl_tests.import_nccl_tests(
        path, nccl_tests.Options(collective="all_reduce", **PROV))
    assert len(result.comm.frame) == 2
    assert [w.line for w in result.warnings] == [5, 6]
    assert "asterisk" in result.warnings[0].message
    assert "exceeds tolerance" in result.warnings[1].message


def test_missing_rank_lines_needs_flags(tmp_path: Path) -> None:
    text = "\n".join(line for line in NEW_LAYOUT.splitlines() if "Rank" not in line) + "\n"
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match="pass --world-size") as err:
        _nccl(path)
    assert err.value.field == "world-size" and str(path) in str(err.value)
    comm = _nccl(path, world_size=8, nodes=2)
    assert set(comm.frame["world_size"]) == {8}


def test_flags_override_header_with_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, NEW_LAYOUT)
    result = nccl_tests.import_nccl_tests(path, nccl_tests.Options(world_size=8, **PROV))
    assert set(result.comm.frame["world_size"]) == {8}
    assert any("overrides 4" in w.message for w in result.warnings)


def test_duplicate_size_is_an_error(tmp_path: Path) -> None:
    row = NEW_LAYOUT.splitlines()[FIRST_ROW - 1]
    path = _write(tmp_path, _replace_line(NEW_LAYOUT, FIRST_ROW + 1, row))
    with pytest.raises(InputError, match="appears twice") as err:
        _nccl(path)
    assert (err.value.line, err.value.field) == (FIRST_ROW + 1, "size")


def test_no_data_rows_is_an_error(tmp_path: Path) -> None:
    lines = NEW_LAYOUT.splitlines()
    path = _write(tmp_path, "\n".join(lines[: FIRST_ROW - 1]) + "\n")
    with pytest.raises(InputError, match="no data rows") as err:
        _nccl(path)
    assert err.value.line == FIRST_ROW - 2


def test_no_column_header_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "# nothing here\n")
    with pytest.raises(InputError, match="column header"):
        _nccl(path)


def test_missing_provenance_needs_flags(tmp_path: Path) -> None:
    path = _write(tmp_path, NEW_LAYOUT)
    with pytest.raises(InputError, match="provenance") as err:
        nccl_tests.import_nccl_tests(path)
    assert err.value.field == "source"


def test_unsupported_collective(tmp_path: Path) -> None:
    path = _write(tmp_path, NEW_LAYOUT.replace("all_reduce_perf", "alltoall_perf"))
    with pytest.raises(InputError, match="not supported"):
        _nccl(path)


# ------------------------------------------------------------------------------------- CLI


def test_cli_nccl_writes_and_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   external_dir: Path) -> None:
    out = tmp_path / "x.csv"
    log = external_dir / "nccl-tests/abci-inter-vnode-32.txt"
    assert main(["import", "nccl-tests", str(log), "-o", str(out)]) == 0
    assert CommTrace.load(out).frame.shape[0] == 48
    err = capsys.readouterr().err
    assert f"warning: {log} line 156: " in err
