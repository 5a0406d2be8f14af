"""The pipeline trusts no intermediate (``docs/errors.md``, "Intermediates"): a replay CSV,
a collected table, a fit table or a re-execution's measurements that were edited to an
impossible value, cut short or left with an empty cell stop the report with the file, the
row and the field named; every real intermediate passes unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gradsched.errors import InputError
from gradsched.intermediates import (
    FITS,
    MEASURED,
    REPLAY,
    SPECS,
    applicable,
    read_intermediate,
)
from gradsched.reexec.analysis import load as load_measured
from gradsched.report.collect import Case, collect_cases, read_csv_or_empty, read_result
from gradsched.report.tables import build_table

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
BASE_RESULTS = Path(os.environ.get("GRADSCHED_BASE_RESULTS", "/tmp/base-results"))
LOOP2 = REPO / "traces/comm/cpu/gloo-loopback-p2.csv"
MEASURED_CSV = REPO / "paper/data/reexec/measured.csv"

HEADER = ("algorithm,world_size,iteration_s,compute_s,exposed_comm_s,n_collectives,n_buckets,"
          "comm_busy_s,lower_bound_s,gap_to_lb_pct,knobs,comm_below_range_pct,"
          "comm_above_range_pct,world_size_basis,compute_bound_by,compute_spread\n")
DOMAIN = ",0,0,measured,unknown,\n"
ROWS = [
    "syncsgd,2,0.72289721,0.672535,0.0503622096,1,1,0.0503622096,0.672551135,7.48583591,{}"
    + DOMAIN,
    "wfbp,2,0.672587941,0.672535,5.29408969e-05,16,16,0.0525540254,0.672551135,"
    "0.00547254692,{}" + DOMAIN,
    'ddp,2,0.672947215,0.672535,0.000412215111,6,6,0.0509772311,0.672551135,0.0588921599,'
    '"{""bucket_cap_mb"": null}"' + DOMAIN,
]
GOOD = HEADER + "".join(ROWS)


def _write(tmp_path: Path, text: str, name: str = "result.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _edit(row: int, field: str, value: str) -> str:
    """GOOD with data row ``row`` (1-based) field ``field`` set to ``value``."""
    names = HEADER.strip().split(",")
    frame = pd.read_csv(pd.io.common.StringIO(GOOD), dtype=str, keep_default_na=False)
    assert field in names
    frame.loc[row - 1, field] = value
    return frame.to_csv(index=False)


def _refused(path: Path, *needles: str) -> str:
    with pytest.raises(InputError) as info:
        read_result(path)
    text = str(info.value)
    assert str(path) in text
    for needle in needles:
        assert needle in text, text
    return text


# ------------------------------------------------------------------ refused
def test_a_good_replay_result_is_read_as_pandas_reads_it(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    pd.testing.assert_frame_equal(read_result(path),
                                  pd.read_csv(path, keep_default_na=False, na_values=[""]))


def test_an_iteration_below_its_compute_time_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, _edit(2, "iteration_s", "0.5"))
    _refused(path, "row 2", "field 'iteration_s'", "compute_s")


def test_an_iteration_below_its_lower_bound_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, _edit(1, "lower_bound_s", "0.9"))
    _refused(path, "row 1", "field 'iteration_s'", "lower_bound_s")


def test_a_truncated_last_row_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD[:-25])  # cut mid-row: no final newline
    _refused(path, "truncated")


def test_a_row_cut_at_a_field_boundary_is_refused(tmp_path: Path) -> None:
    last = ROWS[-1]
    cut = last[: last.index(",0.0509772311")] + "\n"
    path = _write(tmp_path, HEADER + ROWS[0] + ROWS[1] + cut)
    _refused(path, "row 3", "fields")


@pytest.mark.parametrize("field", ["iteration_s", "compute_s", "lower_bound_s", "world_size",
                                   "algorithm", "knobs"])
def test_a_missing_cell_is_refused(tmp_path: Path, field: str) -> None:
    path = _write(tmp_path, _edit(3, field, ""))
    _refused(path, "row 3", f"field '{field}'", "missing")


@pytest.mark.parametrize("field, value, needle", [
    ("compute_s", "-0.1", "below 0"),
    ("exposed_comm_s", "nan", "not a number"),
    ("comm_busy_s", "inf", "not finite"),
    ("iteration_s", "fast", "not a number"),
    ("world_size", "2.5", "not an integer"),
    ("n_buckets", "-1", "below 0"),
])
def test_impossible_cells_are_refused(tmp_path: Path, field: str, value: str,
                                      needle: str) -> None:
    path = _write(tmp_path, _edit(1, field, value))
    _refused(path, "row 1", f"field '{field}'", needle)


def test_a_missing_column_is_refused(tmp_path: Path) -> None:
    frame = pd.read_csv(pd.io.common.StringIO(GOOD)).drop(columns="lower_bound_s")
    path = _write(tmp_path, frame.to_csv(index=False))
    _refused(path, "missing column", "lower_bound_s")


def test_report_collect_refuses_an_edited_replay_csv(tmp_path: Path) -> None:
    """End to end: ``gradsched report collect`` exits 2 naming file, row and field, and
    writes nothing."""
    path = _write(tmp_path, _edit(2, "iteration_s", "0.001"))
    out = tmp_path / "collected.csv"
    done = subprocess.run(
        [sys.executable, "-m", "gradsched", "report", "collect", "--case", "t", "n",
         str(LOOP2), str(path), "-o", str(out)],
        env=dict(os.environ, PYTHONPATH=str(SRC)), capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 2, done.stderr
    assert "result.csv, row 2, field 'iteration_s'" in done.stderr
    assert not out.exists()


def test_an_edited_collected_table_stops_the_tables(tmp_path: Path) -> None:
    collected = collect_cases([Case("t", "n", LOOP2, _write(tmp_path, GOOD))])
    collected.loc[0, "compute_s"] = 9.0
    path = tmp_path / "replay.csv"
    collected.to_csv(path, index=False)
    with pytest.raises(InputError, match=r"replay.csv, row 1, field 'iteration_s'"):
        build_table("replay", [path], tmp_path / "t.tex", tmp_path / "t.md")
    with pytest.raises(InputError, match="row 1"):
        read_csv_or_empty(path)


def test_an_edited_fit_table_is_refused(tmp_path: Path) -> None:
    text = ("trace,collective,backend,world_size,nodes,model,n_sizes,min_bytes,max_bytes,"
            "train_mape_pct,heldout_mape_pct,heldout_max_ape_pct,alpha_s,beta_s_per_byte,"
            "n_segments\n"
            "x,all_reduce,mpi,2,2,alpha-beta,52,256,8388608,25.0,26.1,89.6,0.00015,2.2e-09,1\n"
            "x,all_reduce,mpi,2,2,interp,52,8388608,256,27.2,43.2,167.0,,,\n")
    path = _write(tmp_path, text, "fits.csv")
    with pytest.raises(InputError, match=r"fits.csv, row 2, field 'max_bytes'"):
        read_intermediate(path, (FITS,))


def test_edited_measurements_are_refused(tmp_path: Path) -> None:
    frame = pd.read_csv(MEASURED_CSV)
    frame.loc[4, "measured_s"] = frame.loc[4, "measured_p90_s"] * 2  # above its p90
    path = tmp_path / "measured.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(InputError, match=r"measured.csv, row 5, field 'measured_p90_s'"):
        load_measured(path)
    path.write_text(MEASURED_CSV.read_text(encoding="utf-8")[:-10], encoding="utf-8")
    with pytest.raises(InputError, match="truncated"):
        load_measured(path)


# ------------------------------------------------------------------ accepted
def _real_csvs(root: Path) -> list[Path]:
    return sorted(root.rglob("*.csv"))


def test_the_committed_measurements_pass_unchanged() -> None:
    frame = load_measured(MEASURED_CSV)
    assert applicable(frame) == [MEASURED]
    pd.testing.assert_frame_equal(frame, pd.read_csv(MEASURED_CSV))


@pytest.mark.skipif(not BASE_RESULTS.is_dir(), reason="no full pipeline output at "
                    f"{BASE_RESULTS} (set GRADSCHED_BASE_RESULTS)")
def test_every_real_intermediate_passes_unchanged(tmp_path: Path) -> None:
    """A full pipeline's ``results/`` tree (copied, never modified): every CSV passes the
    readers and is read exactly as ``pandas.read_csv`` reads it, so the tables and figures
    made from it are byte-identical."""
    tree = tmp_path / "results"
    shutil.copytree(BASE_RESULTS, tree)
    seen: dict[str, int] = {}
    for path in _real_csvs(tree):
        comment = "#" if "/fit/files/" in str(path) else None
        frame = read_intermediate(path, keep_default_na=False, na_values=[""],
                                  comment=comment)
        pd.testing.assert_frame_equal(
            frame, pd.read_csv(path, keep_default_na=False, na_values=[""], comment=comment))
        for spec in applicable(frame):
            seen[spec.what] = seen.get(spec.what, 0) + 1
    replay = [p for p in _real_csvs(tree / "replay") if "/replay/main/" in str(p)]
    assert replay and all(not read_result(p).empty for p in replay)
    assert {REPLAY.what, FITS.what} <= set(seen)
    assert set(seen) <= {s.what for s in SPECS}
