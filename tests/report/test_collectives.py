"""The collectives report formats the frames computed above it
(:mod:`gradsched.experiments.collectives`): figures and tables from the formula fits of a
SYNTHETIC sweep (formula data)."""

from __future__ import annotations

from pathlib import Path

from gradsched.costmodel.tuned import fit_formulas, fits_to_json, load_samples
from gradsched.experiments.collectives import collectives_frames
from gradsched.io import write_csv_atomic, write_json_atomic
from gradsched.report.collectives import summary_table, write_all
from tests.costmodel.test_tuned import SIZES, synthetic_trace


def test_report_writes_figures_and_tables(tmp_path: Path) -> None:
    b = synthetic_trace(tmp_path / "b.csv", params=(1e-4, 8e-9, 2e-10), network="1gbit",
                        world_sizes=(2, 4), sizes=SIZES[::2])
    fits, errors = fit_formulas(load_samples([b]))
    fit_json, err_csv = tmp_path / "fit.json", tmp_path / "err.csv"
    write_json_atomic(fit_json, fits_to_json(fits, ["b"]))
    write_csv_atomic(err_csv, errors)
    frames = collectives_frames([b], fit_json)
    written = write_all(frames, err_csv, tmp_path / "fig", tmp_path / "tab")
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    md = (tmp_path / "tab" / "collectives-summary.md").read_text()
    assert "LP/RHD bw measured" in md and "1gbit" in md


def test_summary_table_only_formats_the_rows_it_is_given() -> None:
    """The table's formula column is the rows' ``lp_rhd_bw_model``, whatever its value
    (the report evaluates no formula); sizes print in MiB."""
    import pandas as pd

    rows = pd.DataFrame([{"network": "n", "world_size": 2, "first_bytes": 1 << 20,
                          "last_bytes": 4 << 20, **{f"{a}_ms": 1.0 for a in
                                                    ("lp", "ring", "mst", "rd", "rhd",
                                                     "default")},
                          "lp_rhd_bw_measured": 1.0, "lp_rhd_bw_model": 123.456,
                          "lp_vs_smallest_p": 1.0}])
    table = summary_table(rows)
    assert table["LP/RHD bw formula"].tolist() == ["123.46"]
    assert table["sizes (MiB)"].tolist() == ["1-4"]
