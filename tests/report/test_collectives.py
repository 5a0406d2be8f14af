"""The collectives report: figures and tables from the formula fits; on formula data the
measured LP/RHD ratio equals the formula's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gradsched.costmodel.tuned import (
    fit_formulas,
    fits_to_json,
    load_samples,
)
from tests.costmodel.test_tuned import SIZES, synthetic_trace


def test_report_writes_figures_and_tables(tmp_path: Path) -> None:
    from gradsched.io import write_csv_atomic, write_json_atomic
    from gradsched.report.collectives import summary_rows, write_all

    b = synthetic_trace(tmp_path / "b.csv", params=(1e-4, 8e-9, 2e-10), network="1gbit",
                        world_sizes=(2, 4), sizes=SIZES[::2])
    fits, errors = fit_formulas(load_samples([b]))
    fit_json, err_csv = tmp_path / "fit.json", tmp_path / "err.csv"
    write_json_atomic(fit_json, fits_to_json(fits, ["b"]))
    write_csv_atomic(err_csv, errors)
    written = write_all([b], fit_json, err_csv, tmp_path / "fig", tmp_path / "tab")
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    rows = summary_rows(load_samples([b]), {f.network: f for f in fits})
    # On formula data the measured LP/RHD ratio equals the formula's.
    assert np.allclose(rows["lp_rhd_bw_measured"], rows["lp_rhd_bw_model"], rtol=0.05)
    md = (tmp_path / "tab" / "collectives-summary.md").read_text()
    assert "LP/RHD bw measured" in md and "1gbit" in md
