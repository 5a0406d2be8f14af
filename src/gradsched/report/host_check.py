"""The host-check table: the host-aware and the single-stream replay against hook-free
CUDA-event iterations (``gradsched study host-check``), one row per configuration and a
last row with the median and worst |error|. Formatting only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.intermediates import read_csv_frame
from gradsched.report.formatting import fmt
from gradsched.report.latex import write_table

READ_COLUMNS = ("config", "gpu_busy_share", "kernel_ms", "host_ms", "measured_ms",
                "single_stream_ms", "host_aware_ms", "single_stream_error_pct",
                "host_aware_error_pct", "host_excess_us_per_launch")
"""The columns of the host-check CSV (:data:`gradsched.experiments.host_check.COLUMNS`)
that the table reads."""


def host_check_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Rows of the table (strings) and its column alignment."""
    rows = []
    for rec in frame.itertuples(index=False):
        rows.append({
            "configuration": rec.config, "GPU busy": fmt(rec.gpu_busy_share, 2),
            "kernels (ms)": fmt(rec.kernel_ms, 1), "host (ms)": fmt(rec.host_ms, 1),
            "measured (ms)": fmt(rec.measured_ms, 1),
            "single-stream (ms)": fmt(rec.single_stream_ms, 1),
            "single-stream error (%)": f"{rec.single_stream_error_pct:+.1f}",
            "host-aware (ms)": fmt(rec.host_aware_ms, 1),
            "host-aware error (%)": f"{rec.host_aware_error_pct:+.1f}",
            "host - measured (us/launch)": f"{rec.host_excess_us_per_launch:+.1f}",
        })
    for label, how in (("median |error|", "median"), ("worst |error|", "max")):
        single = getattr(frame["single_stream_error_pct"].abs(), how)()
        host = getattr(frame["host_aware_error_pct"].abs(), how)()
        rows.append({"configuration": label, "GPU busy": "", "kernels (ms)": "",
                     "host (ms)": "", "measured (ms)": "", "single-stream (ms)": "",
                     "single-stream error (%)": fmt(single, 1), "host-aware (ms)": "",
                     "host-aware error (%)": fmt(host, 1), "host - measured (us/launch)": ""})
    return pd.DataFrame(rows), "l" + "r" * 9


def write_host_check_table(csv: str | Path, tex: str | Path, md: str | Path,
                           title: str = "") -> pd.DataFrame:
    """The host-check table of a CSV written by ``gradsched study host-check``."""
    frame = read_csv_frame(csv, required=READ_COLUMNS)
    table, align = host_check_table(frame)
    write_table(table, tex, md, align=align, title=title)
    return table
