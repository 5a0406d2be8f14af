"""The checked complete events of trace documents, each raw event checked once while a
planted-fault check runs (:func:`shared_events`).

:func:`complete_events` is
:func:`gradsched.traces.importers.kineto.events.complete_events`, with the same events, header
and errors. Inside :func:`shared_events`, an event dict met again at the same position (a
planted document of :mod:`gradsched.diagnose.plant` is a copy of the real one in which only
the moved events are new dicts, ``_apply``) gives the :class:`Event` it gave before, and a
``traceEvents`` list met again (the real document, read by the clean diagnosis and by every
planting function) gives its events without a look at any of them. The planted-fault table
read 73 documents of about 1.1 M complete events this way, of which most were met before;
events are not modified by their readers, and the raw dicts are held while the block runs so
that an id stays its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gradsched.errors import InputError
from gradsched.traces.importers.kineto import events as kineto
from gradsched.traces.importers.kineto.events import Event


class _Memo:
    """Events by raw dict (id -> (dict, position, Event)) and by ``traceEvents`` list
    (id -> (list, events))."""

    def __init__(self) -> None:
        self.events: dict[int, tuple[dict[str, Any], int, Event]] = {}
        self.lists: dict[int, tuple[list[Any], list[Event]]] = {}


_ACTIVE: list[_Memo] = []


@contextmanager
def shared_events() -> Iterator[None]:
    """Within the block, :func:`complete_events` checks each raw event once (module
    docstring); after it, nothing is held."""
    _ACTIVE.append(_Memo())
    try:
        yield
    finally:
        _ACTIVE.pop()


def complete_events(doc: Any, path: str) -> tuple[list[Event], dict[str, Any]]:
    """The complete ("X") events of a trace, checked; plus the top-level header (as
    :func:`gradsched.traces.importers.kineto.events.complete_events`)."""
    if not _ACTIVE:
        return kineto.complete_events(doc, path)
    memo = _ACTIVE[-1]
    raw, header = kineto._raw_events(doc, path)
    held = memo.lists.get(id(raw))
    if held is not None and held[0] is raw:
        return list(held[1]), header
    known = memo.events
    out: list[Event] = []
    for i, ev in enumerate(raw):
        seen = known.get(id(ev))
        if seen is not None and seen[0] is ev and seen[1] == i:
            out.append(seen[2])
            continue
        if not isinstance(ev, dict):
            raise InputError("event is not an object", path=path, field=f"traceEvents[{i}]")
        if ev.get("ph") != "X":
            continue
        event = kineto._complete_event(i, ev, path)
        known[id(ev)] = (ev, i, event)
        out.append(event)
    memo.lists[id(raw)] = (raw, out)
    return list(out), header
