"""The B-Caffe importer: real files (numbers checked against them) and bad input."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from gradsched.errors import InputError
from gradsched.traces import CommTrace, ComputeTrace
from gradsched.traces.importers import bcaffe
from tests.traces.importers.test_nccl_tests import _write


def _bcaffe_dump(path: Path) -> list[list[float]]:
    rows = [[float(x) for x in re.search(r"\[(.*)\]", line).group(1).split(",")]
            for line in path.read_text().splitlines()]
    return rows[-128:]


def test_bcaffe_tmp2comm(external_dir: Path) -> None:
    path = external_dir / "bcaffe-googlenet/tmp2comm.log"
    result = bcaffe.import_bcaffe(path, bcaffe.Options(world_size=2, nodes=2))
    compute, comm = result.compute, result.comm
    assert isinstance(compute, ComputeTrace) and isinstance(comm, CommTrace)
    frame = compute.frame
    assert len(frame) == 128 and frame["layer"].max() == 63
    dump = _bcaffe_dump(path)  # the second dump (the first is all zeros)
    assert frame.loc[0, "name"] == "layer00.weight" and frame.loc[0, "numel"] == 9408
    assert frame.loc[0, "bytes"] == 4 * 9408 and frame.loc[0, "backward_s"] == 0
    assert frame.loc[1, "backward_s"] == pytest.approx(14690.2e-6)
    assert frame.loc[127, "ready_order"] == 0 and frame.loc[0, "ready_order"] == 127
    assert compute.backward_total_s == pytest.approx(sum(r[2] for r in dump[1::2]) * 1e-6)
    assert compute.forward_total_s == 0 and compute.meta["forward_measured"] is False
    assert "Dump 2 of 2 (lines 129-256)" in compute.meta["notes"]
    sizes = {int(r[1]) * 4 for r in dump}
    assert len(comm.frame) == len(sizes)
    row = comm.frame[comm.frame["bytes"] == 256].iloc[0]
    times = [r[3] * 1e-6 for r in dump if r[1] == 64]
    assert row["time_s"] == pytest.approx(statistics.median(times))
    assert row["time_min_s"] == pytest.approx(min(times))
    assert comm.meta["statistic"] == "median"


def test_bcaffe_zero_comm_rows_warned(external_dir: Path) -> None:
    result = bcaffe.import_bcaffe(external_dir / "bcaffe-googlenet/tmp8ocomm.log",
                                  bcaffe.Options(world_size=8, nodes=8))
    assert any("63 of 128 blobs have comm_us = 0" in w.message for w in result.warnings)
    assert "0 all-zero and 1 with the same size/compute_us" in result.compute.meta["notes"]


def test_bcaffe_pair_mismatch(external_dir: Path, tmp_path: Path) -> None:
    lines = (external_dir / "bcaffe-googlenet/tmpcomm.log").read_text().splitlines()
    lines[5] = lines[5].replace("20400", "20401")  # bias of layer 2 (param 5)
    path = _write(tmp_path, "\n".join(lines) + "\n", "tmpx.log")
    with pytest.raises(InputError, match="compute_us differ") as err:
        bcaffe.import_bcaffe(path, bcaffe.Options(world_size=1, nodes=1))
    assert (err.value.line, err.value.field) == (6, "compute_us")


def test_bcaffe_bad_lines(tmp_path: Path) -> None:
    good = "I0207 16:23:08.165047 35803 distributed.cpp:112] [0, 9408, 14744.1, 408]"
    bad = "I0207 16:23:08.165074 35803 distributed.cpp:112] [1, 64, -3, 139]"
    path = _write(tmp_path, good + "\n" + bad + "\n", "tmpy.log")
    with pytest.raises(InputError, match="finite number >= 0") as err:
        bcaffe.import_bcaffe(path, bcaffe.Options(world_size=1, nodes=1))
    assert (err.value.line, err.value.field) == (2, "compute_us")
    path = _write(tmp_path, good + "\nsomething else\n", "tmpz.log")
    with pytest.raises(InputError, match="not a B-Caffe") as err:
        bcaffe.import_bcaffe(path, bcaffe.Options(world_size=1, nodes=1))
    assert err.value.line == 2
    with pytest.raises(InputError, match="pass --world-size"):
        bcaffe.import_bcaffe(path, bcaffe.Options(nodes=1))
