"""Timeline export: Chrome/Perfetto trace-event JSON (open in ui.perfetto.dev) and CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.io import write_csv_atomic, write_json_atomic
from gradsched.replay.engine import ReplayResult

TIMELINE_COLUMNS = ("iteration", "lane", "kind", "label", "start_s", "end_s", "bytes")


def timeline_frame(result: ReplayResult) -> pd.DataFrame:
    """One row per timeline interval, ordered by lane then start."""
    rows = [(e.iteration, e.lane, e.kind, e.label, e.start_s, e.end_s, e.nbytes)
            for e in result.events]
    frame = pd.DataFrame(rows, columns=list(TIMELINE_COLUMNS))
    return frame.sort_values(["lane", "start_s", "end_s"], kind="stable").reset_index(drop=True)


def chrome_trace(result: ReplayResult) -> dict[str, Any]:
    """Trace-event format: complete events ('X') in microseconds, one thread per lane."""
    lanes = sorted({e.lane for e in result.events}, key=lambda lane: (lane != "compute", lane))
    tid = {lane: i for i, lane in enumerate(lanes)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 0, "tid": 0, "name": "process_name",
         "args": {"name": f"gradsched replay: {result.algorithm}"}},
    ]
    events += [{"ph": "M", "pid": 0, "tid": tid[lane], "name": "thread_name",
                "args": {"name": lane}} for lane in lanes]
    for e in result.events:
        events.append({
            "ph": "X", "pid": 0, "tid": tid[e.lane], "name": e.label, "cat": e.kind,
            "ts": round(e.start_s * 1e6, 3), "dur": round((e.end_s - e.start_s) * 1e6, 3),
            "args": {"iteration": e.iteration, "kind": e.kind, "bytes": e.nbytes},
        })
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"algorithm": result.algorithm, "iteration_s": result.iteration_s}}


def write_timeline(result: ReplayResult, directory: str | Path) -> tuple[Path, Path]:
    """Write ``<algorithm>.trace.json`` and ``<algorithm>.timeline.csv`` into ``directory``."""
    directory = Path(directory)
    json_path = directory / f"{result.algorithm}.trace.json"
    csv_path = directory / f"{result.algorithm}.timeline.csv"
    write_json_atomic(json_path, chrome_trace(result))
    write_csv_atomic(csv_path, timeline_frame(result))
    return json_path, csv_path
