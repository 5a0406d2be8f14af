r"""The bucket caps that tuned PyTorch DDP in the re-execution, as macros.

The tuned baseline of each case is the fastest ``bucket_cap_mb`` measured
(:func:`gradsched.reexec.uncertainty._versus_ddp`, column ``tuned_ddp`` of the ``reexec
analyze --stats`` CSV, e.g. ``ddp-native-5``); paper/sections/reexec.tex ("The tuned
baseline") quotes the range of those caps over the communication-bound cases.
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.latex import NA

TORCH_DEFAULT_CAP_MB = 25.0
"""``bucket_cap_mb`` when DDP is given none (torch/nn/parallel/distributed.py); the item
``ddp-native-default`` runs with it."""

TUNED_CAP_KEYS = ("ReexecTunedCapMinMB", "ReexecTunedCapMaxMB")


def cap_mb(item: str) -> float:
    """``ddp-native-5`` -> 5.0, ``ddp-native-default`` -> :data:`TORCH_DEFAULT_CAP_MB`."""
    tail = item.removeprefix("ddp-native-")
    return TORCH_DEFAULT_CAP_MB if tail == "default" else float(tail)


def tuned_cap_macros(stats: pd.DataFrame | None) -> dict[str, str]:
    """Smallest and largest tuned cap (MB, as ``bucket_cap_mb`` writes it) over the cases
    of every network but loopback; n/a without the column or such cases."""
    out = dict.fromkeys(TUNED_CAP_KEYS, NA)
    if stats is None or stats.empty or "tuned_ddp" not in stats:
        return out
    cases = stats.loc[~stats["case"].astype(str).str.startswith("all")
                      & (stats["bandwidth"].astype(str) != "loopback")]
    caps = [cap_mb(str(item)) for item in cases["tuned_ddp"].dropna()]
    if caps:
        out["ReexecTunedCapMinMB"] = f"{min(caps):g}"
        out["ReexecTunedCapMaxMB"] = f"{max(caps):g}"
    return out
