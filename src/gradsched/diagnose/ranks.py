"""Several ranks of one step: a common clock and the wait for the slowest rank.

The clock offset of a rank is the median, over the common collective sequence, of the
difference of its collectives' end times from the reference (lowest) rank's: a collective
ends at about the same moment on every rank because each rank's kernel waits for the
others. This is the method of the Kineto GPU importer's comm record
(:func:`gradsched.traces.importers.kineto_gpu.comm_record.align_ranks`), applied here to the
frames of :mod:`gradsched.diagnose.observe`.

On the common clock, a collective's ``transfer_s`` is its end less the latest start among
the ranks (the time it ran with every rank present) and a rank's ``wait_s`` is that latest
start less its own start (the time its kernel sat waiting for a later rank). With one rank,
``transfer_s`` is the kernel's duration and ``wait_s`` is unknown (NaN).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gradsched.errors import InputError


def align(frames: list[pd.DataFrame], labels: list[str]) -> pd.DataFrame:
    """The ranks' collective frames on the reference rank's clock, with ``offset_s``,
    ``transfer_s``, ``wait_s`` and ``last_rank`` (the rank that started last)."""
    if len(frames) == 1:
        out = frames[0].copy()
        out["offset_s"] = 0.0
        out["transfer_s"] = out["duration_s"]
        out["wait_s"] = np.nan
        out["last_rank"] = pd.array([pd.NA] * len(out), dtype="Int64")
        return out
    ref = frames[0]
    key = list(zip(ref["collective"], ref["bytes"], strict=True))
    aligned = []
    for frame, label in zip(frames, labels, strict=True):
        mine = list(zip(frame["collective"], frame["bytes"], strict=True))
        if mine != key:
            raise InputError(f"rank {int(frame['rank'].iloc[0])}'s collective sequence differs "
                             f"from rank {int(ref['rank'].iloc[0])}'s: the files are not one "
                             "step of one job", path=label, field="traceEvents")
        offset = float(np.median(frame["end_s"].to_numpy() - ref["end_s"].to_numpy()))
        f = frame.copy()
        f["offset_s"] = round(offset, 9)
        aligned.append(f)
    out = pd.concat(aligned, ignore_index=True)
    common_start = out["start_s"] - out["offset_s"]
    latest = common_start.groupby(out["index"]).transform("max")
    out["transfer_s"] = (out["end_s"] - out["offset_s"] - latest).clip(lower=0).round(9)
    out["wait_s"] = (latest - common_start).round(9)
    last = out.loc[common_start.groupby(out["index"]).idxmax(), ["index", "rank"]]
    out["last_rank"] = out["index"].map(dict(zip(last["index"], last["rank"],
                                                 strict=True))).astype("Int64")
    return out
