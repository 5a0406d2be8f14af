"""The replay's timeline exports (Chrome trace JSON and CSV)."""

from __future__ import annotations

import json

import pandas as pd

from gradsched.replay import ReplayOptions, replay
from gradsched.replay.timeline import chrome_trace, write_timeline
from tests.replay.test_engine import MODEL, hand_trace, wfbp


def test_timeline_exports(tmp_path):
    trace = hand_trace()
    res = replay(trace, wfbp(trace), MODEL, 4, ReplayOptions(iterations=3), timeline=True)
    doc = chrome_trace(res)
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert sum(e["cat"] == "all_reduce" for e in complete) == 3 * 3
    assert all(e["dur"] > 0 for e in complete)
    json_path, csv_path = write_timeline(res, tmp_path)
    assert json.loads(json_path.read_text())["otherData"]["algorithm"] == "wfbp"
    frame = pd.read_csv(csv_path)
    assert list(frame.columns) == ["iteration", "lane", "kind", "label", "start_s", "end_s",
                                   "bytes"]
    # the compute lane never overlaps itself
    comp = frame[frame["lane"] == "compute"].sort_values("start_s")
    assert (comp["start_s"].to_numpy()[1:] >= comp["end_s"].to_numpy()[:-1] - 1e-12).all()
