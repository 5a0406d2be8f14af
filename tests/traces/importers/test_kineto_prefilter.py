"""The Kineto pre-filter (gradsched.traces.importers.kineto.prefilter): the events it cuts
are only those of refused categories, on a committed trace; a text that departs from
Kineto's layout is parsed whole."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from gradsched.traces.importers.kineto.events import read_trace_json
from gradsched.traces.importers.kineto.prefilter import loads_kept

REPO = Path(__file__).resolve().parents[3]
TRACE = REPO / "data/h200/kineto-steps/alexnet-b256-cuda-fp32.pt.trace.json.gz"


def kernels(cat: str) -> bool:
    return cat.lower() == "kernel"


def event(cat: str, extra: str = '"args": {"x": [1, 2]}') -> str:
    return f'  {{\n    "ph": "X", "cat": "{cat}", "name": "n",\n    {extra}\n  }}'


def document(*events: str) -> str:
    return '{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + ",\n".join(events) + "\n  ]\n}"


def test_a_committed_trace_loses_only_refused_events() -> None:
    full = json.loads(gzip.decompress(TRACE.read_bytes()))
    fast = read_trace_json(TRACE, keep=kernels)
    assert len(fast["traceEvents"]) < len(full["traceEvents"]) / 2  # the fast path ran
    wanted = [e for e in full["traceEvents"] if kernels(str(e.get("cat", "")))]
    assert [e for e in fast["traceEvents"] if kernels(str(e.get("cat", "")))] == wanted
    rest = iter(full["traceEvents"])  # what is left is in the file's order
    assert all(any(e == f for f in rest) for e in fast["traceEvents"])
    assert {k: v for k, v in fast.items() if k != "traceEvents"} == \
        {k: v for k, v in full.items() if k != "traceEvents"}


def test_cuts_whole_events_of_refused_categories() -> None:
    text = document(event("kernel"), event("cpu_op"), event("kernel"), event("cpu_op"),
                    event("Kernel"))
    doc = loads_kept(text, kernels)
    assert doc is not None and [e["cat"] for e in doc["traceEvents"]] == \
        ["kernel", "kernel", "Kernel"]


def fast_or_none(text: str) -> object:
    """loads_kept of ``text``, checked against the whole parse where it answers."""
    doc = loads_kept(text, kernels)
    if doc is not None:
        full = json.loads(text)["traceEvents"]
        assert [e for e in doc["traceEvents"] if kernels(str(e.get("cat", "")))] == \
            [e for e in full if kernels(str(e.get("cat", "")))]
    return doc


def test_a_text_out_of_kineto_layout_is_parsed_whole() -> None:
    compact = json.dumps(json.loads(document(event("kernel"), event("cpu_op"),
                                             event("kernel"))))
    assert fast_or_none(compact) is None  # no separators: nothing cut
    # a separator inside a kept event's arguments (objects at two-space indent)
    nested = event("kernel", '"args": {"l": [{"a": 1},\n  {\n    "cat": "x"\n  }]}')
    assert fast_or_none(document(event("kernel"), nested, event("kernel"), event("cpu_op"),
                                 event("kernel"))) is None
    # ... inside a cut one: cut with it, or the whole text parsed
    nested = event("cpu_op", '"args": {"l": [{"a": 1},\n  {\n    "cat": "x"\n    }]}')
    fast_or_none(document(event("kernel"), nested, event("kernel")))
    # a second "cat" (JSON keeps the last, a kernel here): the whole text parsed
    twice = event("cpu_op", '"cat": "kernel"')
    assert fast_or_none(document(event("kernel"), twice, event("kernel"), event("cpu_op"),
                                 event("kernel"))) is None
