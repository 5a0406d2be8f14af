"""The same layout replayed on the same compute: predicted exposure per collective.

**Comm model.** With ``--comm``, a model the project loads
(:func:`gradsched.costmodel.base.load_comm_spec`: a sweep CSV, a fitted model JSON or
``alpha-beta:...``) prices each collective at its bytes and world size; the domain notes of
:mod:`gradsched.costmodel.domain_notes` say where that is outside what the sweep measured.
A collective the model does not price (``all_to_all``, say) is priced by the trace-fitted
model below and says so. Without ``--comm``, the **trace-fitted** model: per collective
kind, ``t(M) = alpha + M / B`` with ``alpha`` the shortest transfer of that kind in the
trace and ``B`` the highest ``M / (transfer - alpha)`` among them (the lower envelope of the
trace's own transfers, :mod:`gradsched.diagnose.ranks`). It is fitted and used on the same
trace (in-sample): it says what this trace's fastest collectives show the link can do, not
what a sweep measured.

**Replay.** Each comm stream the trace used is one first-come-first-served channel: a
collective becomes eligible at its observed ``ready_s`` and runs for its modelled time after
the previous one on its stream
(:func:`gradsched.replay.list_schedule.fifo_one_channel`, the replay's one-channel list
schedule). The compute stays where the trace has it: the predicted exposure is the part of
the predicted interval that no compute kernel of the trace covers
(:func:`gradsched.diagnose.exposure.exposed_length`). This is the exposure the layout
allows on this compute when every collective is issued as soon as it is ready, runs on its
own stream and takes the modelled time; a late launch, a serialised stream, a missing
prefetch or a slow peer is what makes the observed exposure larger.

**Band.** The replay again with every modelled time scaled by the lowest and the highest
ratio of observed transfer to modelled time among the trace's collectives (the spread of
the model against this very trace); a predicted gain is quoted with both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gradsched.costmodel.base import CommModel
from gradsched.diagnose.exposure import exposed_length
from gradsched.errors import GradschedError
from gradsched.replay.list_schedule import fifo_one_channel

MIN_FIT_BYTES = 1
"""Transfers of fewer bytes do not enter the bandwidth of the trace-fitted model."""


@dataclass(frozen=True)
class TraceFit:
    """``alpha`` (s) and ``B`` (bytes/s) per collective kind, fitted on the trace."""

    params: dict[str, tuple[float, float]]

    def time(self, collective: str, nbytes: float) -> float:
        alpha, bw = self.params[collective]
        return alpha + (nbytes / bw if bw > 0 else 0.0)


def fit_trace(frame: pd.DataFrame) -> TraceFit:
    """The trace-fitted model (module docstring) from the aligned frame's transfers."""
    params: dict[str, tuple[float, float]] = {}
    for kind, group in frame.groupby("collective", sort=True):
        t = group["transfer_s"].to_numpy(dtype=float)
        m = group["bytes"].fillna(0).to_numpy(dtype=float)
        alpha = float(np.min(t)) if t.size else 0.0
        usable = (m >= MIN_FIT_BYTES) & (t > alpha)
        bw = float(np.max(m[usable] / (t[usable] - alpha))) if usable.any() else 0.0
        params[str(kind)] = (alpha, bw)
    return TraceFit(params)


def modelled_times(frame: pd.DataFrame, model: CommModel | None, fit: TraceFit,
                   world_size: int) -> tuple[np.ndarray, list[str]]:
    """Each row's modelled time and its source (``sweep`` or ``trace-fit``)."""
    times, sources = [], []
    for row in frame.itertuples(index=False):
        nbytes = float(row.bytes) if pd.notna(row.bytes) else 0.0
        p = int(row.world_size) if pd.notna(row.world_size) else world_size
        if model is not None:
            try:
                times.append(float(model.time(str(row.collective), nbytes, p)))
                sources.append("sweep")
                continue
            except GradschedError:
                pass
        times.append(fit.time(str(row.collective), nbytes))
        sources.append("trace-fit")
    return np.asarray(times, dtype=float), sources


def replay_rank(frame: pd.DataFrame, modelled: np.ndarray,
                compute: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Predicted (start, exposed) per row of one rank's frame (module docstring); times in
    seconds from the rank's step start, ``compute`` in the same clock."""
    start = np.zeros(len(frame))
    for _, idx in frame.groupby("stream", sort=True).groups.items():
        pos = np.asarray([frame.index.get_loc(i) for i in idx])
        s, _ = fifo_one_channel(frame["ready_s"].to_numpy(dtype=float)[pos], modelled[pos])
        start[pos] = s
    exposed = np.array([exposed_length((s, s + d), compute)
                        for s, d in zip(start, modelled, strict=True)])
    return start, exposed
