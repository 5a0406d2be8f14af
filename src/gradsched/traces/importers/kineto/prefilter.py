"""Parsing only the events a reader needs from a Kineto trace's text: the other events are
cut from the text before ``json.loads`` (which spends most of a trace's reading time
building the dictionaries of events nobody reads: the ``cpu_op`` events and their
argument lists).

**Layout.** PyTorch's profiler writes one event per block of lines (Kineto
``libkineto/src/output_json.cpp``: each event opens with ``  {`` on its own line, its
fields indented by four or more spaces, and closes with ``  }``), events separated by
:data:`SEP`. A raw newline cannot occur inside a JSON string, so every occurrence of
:data:`SEP` in the text lies between two objects of one array.

**What is cut, and the checks.** A block between two separators is cut only if it holds
exactly one ``"cat"`` (and no ``\\u`` escape, which could spell another), of a string value
the caller does not keep; if it has Kineto's layout (starts with a field line, every inner
line indented by four spaces or more, ends where a two-space ``}`` closes it); and if its
brackets balance. The text left must parse, and its ``traceEvents`` must hold exactly one
event per block left (so every cut fell between two of its events). Any check failing,
the whole text is parsed instead (:func:`gradsched.traces.importers.kineto.events.
decode_trace_bytes`): the result is the document whose ``traceEvents`` lost only events
whose category is not kept, in their order, other keys untouched.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

SEP = "},\n  {"
"""Kineto's separator between two events of ``traceEvents`` (module docstring)."""

_CAT = '"cat": "'


def _category(block: str) -> str | None:
    """The value of the first ``"cat": "`` of ``block`` (``None``: none, or one that holds
    an escape or runs past its line: such a block is kept)."""
    start = block.find(_CAT)
    if start < 0:
        return None
    start += len(_CAT)
    cat = block[start:block.find('"', start)]
    return None if "\\" in cat or "\n" in cat else cat


def _layout_holds(cut: list[str]) -> bool:
    """The checks of the module docstring over the ``cut`` blocks, on their joined text
    (each a whole count over all of them; with one ``"cat"`` found in each block, equal
    totals mean exactly one in each)."""
    text = "{" + SEP.join(cut) + "}"
    n = len(cut)
    return (text.count('"cat"') == n and "\\u" not in text
            # inner lines indented by 4 or more: the short ones are the n closing "\n  }"
            # and the n - 1 opening "\n  {" of the separators
            and text.count("\n") - text.count("\n    ") == 2 * n - 1
            and text.count("\n  }") == n and text.count("\n  {") == n - 1
            and text.count("{") == text.count("}") and text.count("[") == text.count("]"))


def loads_kept(text: str, keep: Callable[[str], bool]) -> Any | None:
    """The trace document of ``text`` without the events whose category ``keep`` refuses,
    or ``None`` when the fast path does not apply (nothing to cut, or a check of the module
    docstring failed: parse the whole text then)."""
    blocks = text.split(SEP)
    if len(blocks) < 3:
        return None
    inner = blocks[1:-1]
    cats = [_category(b) for b in inner]
    kept_cat = {c: c is None or keep(c) for c in set(cats)}
    if all(kept_cat.values()):
        return None
    kept, cut = [blocks[0]], []
    for block, cat in zip(inner, cats, strict=True):
        (kept if kept_cat[cat] else cut).append(block)
    kept.append(blocks[-1])
    if not _layout_holds(cut):
        return None
    try:
        doc = json.loads(SEP.join(kept))
    except (ValueError, RecursionError):
        return None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list) or len(events) != len(kept):
        return None
    return doc
