"""The diagnosis's shared event reading (gradsched.diagnose.events) gives what the Kineto
reader gives, on a SYNTHETIC document and a copy with moved events (as plant._apply makes)."""

from __future__ import annotations

import copy

import pytest

from gradsched.diagnose.events import complete_events, shared_events
from gradsched.errors import InputError
from gradsched.traces.importers.kineto import events as kineto


def _doc() -> dict:
    raw = [{"ph": "X", "name": f"k{i}", "cat": "kernel", "tid": 7, "pid": 1, "ts": 10.0 * i,
            "dur": 5.0, "args": {"correlation": i}} for i in range(6)]
    raw.insert(2, {"ph": "i", "name": "mark", "ts": 1.0})
    return {"traceEvents": raw, "deviceProperties": [{"name": "synthetic"}]}


def _moved(doc: dict, index: int, ts: float) -> dict:
    new = copy.copy(doc)
    raw = list(doc["traceEvents"])
    raw[index] = dict(raw[index], ts=ts)
    new["traceEvents"] = raw
    return new


def test_shared_reading_equals_the_reader() -> None:
    doc = _doc()
    moved = _moved(doc, 4, 99.0)
    with shared_events():
        first = complete_events(doc, "a")
        again = complete_events(doc, "a")
        planted = complete_events(moved, "a")
    assert first == kineto.complete_events(doc, "a") == again
    assert planted == kineto.complete_events(moved, "a")
    assert [e.ts for e in planted[0]] == [0.0, 10.0, 20.0, 99.0, 40.0, 50.0]
    assert first[0] is not again[0]  # a caller's list is its own


def test_shared_reading_refuses_what_the_reader_refuses() -> None:
    doc = _doc()
    bad = _moved(doc, 3, -1.0)
    with shared_events():
        complete_events(doc, "a")
        with pytest.raises(InputError, match="timestamp"):
            complete_events(bad, "a")
