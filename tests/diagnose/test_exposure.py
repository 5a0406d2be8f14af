"""Exposed communication against a hand-checked case and against HTA's definition
(facebookresearch/HolisticTraceAnalysis ``hta/analyzers/communication_analysis.py``,
``get_comm_comp_overlap``, commit 0c2146a8d003629a67f225528969752e1f0656aa), written here
as that code describes it: a sweep of +1/-1 (communication) and +2/-2 (computation) status
changes over the merged intervals; overlap is the time the running status is 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsched.diagnose.exposure import (
    compute_union,
    exposed_intervals,
    exposed_length,
    overlap_ratio,
)
from gradsched.diagnose.observe import observe_document
from gradsched.traces.importers.kineto.events import complete_events, read_documents
from gradsched.traces.importers.kineto.intervals import union

REPO = Path(__file__).resolve().parents[2]
HTA_DDP = REPO / "data/external/hta/nccl_parser_config/nccl_data.json.gz"


def hta_sweep_overlap(comm: list[tuple[float, float]], comp: list[tuple[float, float]]
                      ) -> float:
    """HTA's status sweep (module docstring): time with both running."""
    status = sorted([(s, 1) for s, _ in union(comm)] + [(e, -1) for _, e in union(comm)]
                    + [(s, 2) for s, _ in union(comp)] + [(e, -2) for _, e in union(comp)])
    running, total = 0, 0.0
    for (t, change), nxt in zip(status, [*status[1:], (status[-1][0], 0)], strict=True):
        running += change
        if running == 3:
            total += nxt[0] - t
    return total


def test_hand_checked_case() -> None:
    # comm [0, 10); compute [2, 4) and [3, 5) merge to [2, 5), plus [8, 12)
    compute = compute_union([(2, 4), (3, 5), (8, 12)])
    assert compute == [(2, 5), (8, 12)]
    assert exposed_intervals((0, 10), compute) == [(0, 2), (5, 8)]
    assert exposed_length((0, 10), compute) == 5
    assert exposed_length((5, 8), compute) == 3  # wholly exposed
    assert exposed_length((2, 5), compute) == 0  # wholly hidden
    assert overlap_ratio([(0, 10)], compute) == pytest.approx(0.5)


def test_matches_hta_sweep_on_the_real_ddp_trace() -> None:
    """Rank 0 of HTA's DDP ResNet-50 trace (A100, NCCL): the per-collective exposure summed
    equals HTA's merged communication time less its overlap, over the step's collectives."""
    label, doc = read_documents(HTA_DDP)[0]
    step = observe_document(doc, label)
    events, _ = complete_events(doc, label)
    t0 = min(ev.ts for ev in events if ev.name == f"ProfilerStep#{step.step}")
    comm = [(t0 + s * 1e6, t0 + e * 1e6) for s, e in
            zip(step.frame["start_s"], step.frame["end_s"], strict=True)]
    comp = [(ev.ts, ev.end) for ev in events if ev.cat == "kernel"
            and "ncclKernel" not in ev.name and "Memcpy" not in ev.name
            and "Memset" not in ev.name]
    merged = sum(e - s for s, e in union(comm))
    hta_exposed_us = merged - hta_sweep_overlap(comm, comp)
    assert step.frame["exposed_s"].sum() * 1e6 == pytest.approx(hta_exposed_us, abs=0.01)
    assert 0 < hta_exposed_us < merged  # some of it hidden, some exposed
