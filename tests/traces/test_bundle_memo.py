"""The trace loads' memo (gradsched.traces.bundle): a trace loaded again is an equal,
independent object; an edited file is validated again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gradsched.errors import InputError
from gradsched.traces.bundle import ComputeTrace, meta_path

TRACE = Path("traces/compute/pipedream/alexnet-b256.csv")


def _copy(tmp_path: Path) -> Path:
    path = tmp_path / TRACE.name
    shutil.copy(TRACE, path)
    shutil.copy(meta_path(TRACE), meta_path(path))
    return path


def test_a_trace_loaded_again_is_equal_and_its_own(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    first = ComputeTrace.load(path)
    first.frame.loc[0, "bytes"] = -1
    first.meta["model"] = "changed"
    again = ComputeTrace.load(path)
    fresh = ComputeTrace.load(TRACE)
    assert again.frame.equals(fresh.frame) and again.meta == fresh.meta
    assert again.path == str(path)


def test_an_edited_trace_is_validated_again(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    ComputeTrace.load(path)
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index("bytes")] = "-5"
    path.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    with pytest.raises(InputError):
        ComputeTrace.load(path)
