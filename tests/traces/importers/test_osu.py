"""The OSU micro-benchmark importer: real files (numbers checked against them) and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.traces.importers import osu
from tests.traces.importers.test_nccl_tests import NEW_LAYOUT, PROV, _write


def test_osu_abci_numbers(external_dir: Path) -> None:
    comm = osu.import_osu(external_dir / "osu/abci-inter-anode-2-cpu.txt",
                          osu.Options(world_size=16, nodes=2)).comm
    frame = comm.frame
    assert len(frame) == 24 and set(frame["backend"]) == {"mpi"}
    first = frame.iloc[0]
    assert first["bytes"] == 4 and first["time_s"] == pytest.approx(3.35e-6)
    assert first["time_min_s"] == pytest.approx(3.01e-6)
    assert first["time_max_s"] == pytest.approx(3.70e-6)
    assert not frame["in_place"].any()
    assert comm.meta["software"]["version"] == "5.7"


def test_osu_requires_world_size_and_nodes(external_dir: Path) -> None:
    with pytest.raises(InputError, match="pass --world-size") as err:
        osu.import_osu(external_dir / "osu/abci-inter-anode-2-cpu.txt", osu.Options(nodes=2))
    assert err.value.field == "world-size"
    with pytest.raises(InputError, match="pass --nodes"):
        osu.import_osu(external_dir / "osu/abci-inter-anode-2-cpu.txt",
                       osu.Options(world_size=16))


def test_osu_noisy_point_warns(external_dir: Path, tmp_path: Path) -> None:
    """A latency that falls by more than 1.25x while the size grows is flagged (a real ABCI
    log with its 64 B row raised by 5 us: 9.17 us, then 4.97 us at 128 B on line 11)."""
    text = (external_dir / "osu/abci-inter-anode-2-cpu.txt").read_text()
    path = tmp_path / "noisy.txt"
    row = "64                      4.17              2.64              5.79"
    assert row in text
    path.write_text(text.replace(row, row.replace("4.17", "9.17").replace("5.79", "10.79")))
    result = osu.import_osu(path, osu.Options(world_size=16, nodes=2))
    assert [w.line for w in result.warnings] == [11]
    assert len(result.comm.meta["warnings"]) == len(result.warnings)


def test_bcaffe_osu_logs_with_node_prefix(external_dir: Path) -> None:
    path = external_dir / "bcaffe-googlenet/allreduce2.log"
    result = osu.import_osu(path, osu.Options(world_size=2, nodes=2, **PROV))
    frame = result.comm.frame
    assert len(frame) == 266 and frame["bytes"].iloc[-1] == 1048576
    assert frame["time_s"].iloc[0] == pytest.approx(31.92e-6)
    with pytest.raises(InputError, match="node count 2") as err:
        osu.import_osu(path, osu.Options(world_size=4, nodes=4, **PROV))
    assert (err.value.line, err.value.field) == (4, "size")


OSU_LOG = """\
# OSU MPI Allreduce Latency Test v5.7
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
4                       3.35              3.01              3.70        1000
8                       3.35              3.15              3.56        1000
16                      3.36              2.87              3.85        1000
"""


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "match"),
    [
        ("3.36 ", "-3.36 ", 5, "avg", "greater than zero"),
        ("16  ", "8   ", 5, "size", "does not increase"),
        ("3.85        1000", "3.85", 5, "iterations", "expected 5 fields"),
        ("3.15", "abc!", 4, "min", "not a number"),
        ("3.56", "3.00", 4, "max", "smaller than avg"),
    ],
)
def test_osu_malformed(tmp_path: Path, old: str, new: str, line: int, field: str,
                       match: str) -> None:
    path = _write(tmp_path, OSU_LOG.replace(old, new, 1))
    with pytest.raises(InputError, match=match) as err:
        osu.import_osu(path, osu.Options(world_size=2, nodes=1, **PROV))
    assert (err.value.line, err.value.field) == (line, field)
    assert str(path) in str(err.value)


def test_osu_several_runs_keeps_last(tmp_path: Path) -> None:
    path = _write(tmp_path, OSU_LOG + "\n" + OSU_LOG.replace("3.35  ", "3.50  ", 1))
    result = osu.import_osu(path, osu.Options(world_size=2, nodes=1, **PROV))
    assert result.comm.frame["time_s"].iloc[0] == pytest.approx(3.50e-6)
    assert any("2 runs" in w.message for w in result.warnings)


def test_cli_error_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, NEW_LAYOUT)
    code = main(["import", "osu", str(path), "-o", str(tmp_path / "o.csv"),
                 "--world-size", "2", "--nodes", "1"])
    assert code == 2
    assert "no OSU header" in capsys.readouterr().err
