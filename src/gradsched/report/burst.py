r"""The token bucket's burst in a committed sweep, as macros.

``tc tbf`` lets a burst through at the host's speed, so a small collective on a shaped link
can report more bus bandwidth than the link carries (paper/sections/replay.tex, "What the
replay leaves out"). The prose quotes the sweep row with the highest bus bandwidth: its
collective, size and ``busbw_Bps`` (nccl-tests' factors, column dictionary in
traces/README.md), and the link's line rate from the sweep's sidecar (``line_rate_Bps``).
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.latex import NA, number
from gradsched.traces.bundle import CommTrace

BURST_KEYS = ("BurstBusbwMBps", "BurstCollective", "BurstSize", "BurstLinkMBps")

_SIZE_UNITS = ((2 ** 30, "GiB"), (2 ** 20, "MiB"), (2 ** 10, "KiB"))


def size_text(nbytes: int) -> str:
    r"""``32768`` -> ``32\,KiB`` (the largest binary unit that divides the size), else B."""
    for scale, unit in _SIZE_UNITS:
        if nbytes >= scale and nbytes % scale == 0:
            return rf"{nbytes // scale}\,{unit}"
    return rf"{nbytes}\,B"


def peak_busbw_row(frame: pd.DataFrame) -> pd.Series:
    """The row with the highest ``busbw_Bps`` (ties: the first in the file's order)."""
    return frame.loc[frame["busbw_Bps"].astype(float).idxmax()]


def burst_macros(sweep: CommTrace | None) -> dict[str, str]:
    """``BurstBusbwMBps`` (MB/s, one decimal), ``BurstCollective`` (``all-gather``),
    ``BurstSize`` (``32\\,KiB``) of :func:`peak_busbw_row`, and ``BurstLinkMBps``: the
    sidecar's ``line_rate_Bps`` in MB/s (one decimal)."""
    out = dict.fromkeys(BURST_KEYS, NA)
    if sweep is None or sweep.frame.empty or "busbw_Bps" not in sweep.frame:
        return out
    row = peak_busbw_row(sweep.frame)
    out["BurstBusbwMBps"] = number(float(row["busbw_Bps"]) / 1e6, 1)
    out["BurstCollective"] = str(row["collective"]).replace("_", "-")
    out["BurstSize"] = size_text(int(row["bytes"]))
    rate = sweep.meta.get("line_rate_Bps")
    if rate is not None:
        out["BurstLinkMBps"] = number(float(rate) / 1e6, 1)
    return out
