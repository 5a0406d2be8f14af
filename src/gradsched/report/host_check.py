"""The host-check table: the host-aware and the single-stream replay against hook-free
CUDA-event iterations (``gradsched study host-check``), one row per configuration and a
last row with the median and worst |error|. Formatting only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.intermediates import read_csv_frame
from gradsched.report.formatting import fmt
from gradsched.report.latex import NA, latex_escape, number, write_table
from gradsched.traces.host_bound import CPU_BOUND_SHARE

BUSY_THROUGHOUT = 0.95
"""GPU busy share from which a configuration's GPU counts as busy throughout (the host's
launches hidden behind its kernels, where a replay of kernel times alone should hold); below
:data:`~gradsched.traces.host_bound.CPU_BOUND_SHARE` a configuration is host-bound (the one
definition). The classes only group the rows the table prints."""


def classes(frame: pd.DataFrame) -> list[tuple[str, int, float, float, int]]:
    """Per class of GPU busy share: (label, configurations, median |error| of the
    single-stream and of the host-aware replay, how many the host-aware replay predicts
    with a larger |error|)."""
    busy = frame["gpu_busy_share"]
    groups = ((f"busy < {CPU_BOUND_SHARE:g}", busy < CPU_BOUND_SHARE),
              (f"busy {CPU_BOUND_SHARE:g}-{BUSY_THROUGHOUT:g}",
               (busy >= CPU_BOUND_SHARE) & (busy < BUSY_THROUGHOUT)),
              (f"busy >= {BUSY_THROUGHOUT:g}", busy >= BUSY_THROUGHOUT))
    out = []
    for label, mask in groups:
        single = frame.loc[mask, "single_stream_error_pct"].abs()
        host = frame.loc[mask, "host_aware_error_pct"].abs()
        out.append((label, int(mask.sum()), float(single.median()), float(host.median()),
                    int((host > single).sum())))
    return out

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
    for label, n, single, host, worse in classes(frame):  # the same, per class of busy
        rows.append({"configuration": f"median, {label} ({n})",
                     "GPU busy": "", "kernels (ms)": "", "host (ms)": "", "measured (ms)": "",
                     "single-stream (ms)": "", "single-stream error (%)": fmt(single, 1),
                     "host-aware (ms)": "", "host-aware error (%)": fmt(host, 1),
                     "host - measured (us/launch)": f"{worse} of {n} worse"})
    return pd.DataFrame(rows), "l" + "r" * 9


_CLASS_KEYS = ("HostBound", "Between", "Busy")
"""Macro stems of :func:`classes`' three classes, in its order."""

HOST_CHECK_KEYS = ("HostCheckConfigs", "HostCheckSingleMedianErr", "HostCheckHostAwareMedianErr",
                   "HostCheckSingleWorstErr", "HostCheckHostAwareWorstErr",
                   "HostCheckHostAwareWorse", "HostCheckBusyThroughout",
                   "HostCheckHostBoundShare", "HostCheckBusyWorstConfig",
                   "HostCheckBusyWorstSingleErr", "HostCheckBusyWorstHostAwareErr",
                   *(f"HostCheck{k}{q}" for k in _CLASS_KEYS
                     for q in ("Configs", "SingleMedianErr", "HostAwareMedianErr",
                               "HostAwareWorse")))
"""Every macro :func:`host_check_macros` writes (n/a without data)."""


def host_check_macros(frame: pd.DataFrame | None) -> dict[str, str]:
    """Both replays' median and worst |error| over all configurations and per class of GPU
    busy share (:func:`classes`), where the host-aware replay's |error| is the larger, the
    two thresholds, and the busy-throughout configuration the host-aware replay predicts
    worst (its name and both signed errors)."""
    out = dict.fromkeys(HOST_CHECK_KEYS, NA)
    out["HostCheckBusyThroughout"] = number(BUSY_THROUGHOUT, 2)
    out["HostCheckHostBoundShare"] = number(CPU_BOUND_SHARE, 1)
    if frame is None or not len(frame):
        return out
    single = frame["single_stream_error_pct"].abs()
    host = frame["host_aware_error_pct"].abs()
    out.update({"HostCheckConfigs": str(len(frame)),
                "HostCheckSingleMedianErr": number(float(single.median()), 1),
                "HostCheckHostAwareMedianErr": number(float(host.median()), 1),
                "HostCheckSingleWorstErr": number(float(single.max()), 1),
                "HostCheckHostAwareWorstErr": number(float(host.max()), 1),
                "HostCheckHostAwareWorse": str(int((host > single).sum()))})
    for key, (_, n, s_med, h_med, worse) in zip(_CLASS_KEYS, classes(frame), strict=True):
        out.update({f"HostCheck{key}Configs": str(n),
                    f"HostCheck{key}SingleMedianErr": number(s_med, 1),
                    f"HostCheck{key}HostAwareMedianErr": number(h_med, 1),
                    f"HostCheck{key}HostAwareWorse": str(worse)})
    busy = frame.loc[frame["gpu_busy_share"] >= BUSY_THROUGHOUT]
    if len(busy):
        worst = busy.loc[busy["host_aware_error_pct"].abs().idxmax()]
        out.update({"HostCheckBusyWorstConfig": latex_escape(str(worst["config"])),
                    "HostCheckBusyWorstSingleErr": f"{worst['single_stream_error_pct']:+.1f}",
                    "HostCheckBusyWorstHostAwareErr":
                        f"{worst['host_aware_error_pct']:+.1f}"})
    return out


def write_host_check_table(csv: str | Path, tex: str | Path, md: str | Path,
                           title: str = "") -> pd.DataFrame:
    """The host-check table of a CSV written by ``gradsched study host-check``."""
    frame = read_csv_frame(csv, required=READ_COLUMNS)
    table, align = host_check_table(frame)
    write_table(table, tex, md, align=align, title=title)
    return table
