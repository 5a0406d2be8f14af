"""The one output sanitiser: text from data files never reaches a terminal raw.

A trace cell, a sidecar note, a plan's algorithm name or a file name can hold control
characters (an escape byte ``\\x1b`` starts a terminal control sequence: it can recolour,
retitle or clear the user's terminal, or hide the lines around it). Everything gradsched
prints goes through :func:`printable`: :func:`gradsched.cli.main` wraps ``sys.stdout`` and
``sys.stderr`` in a :class:`PrintableStream` for the whole command, so tables, notes,
warnings and error lines are escaped in one place, whatever module printed them.

Kept as they are: newline and tab (the layout of tables and messages). Escaped as ``\\xNN``
or ``\\uNNNN``: the other C0 controls (including carriage return and escape), DEL, the C1
controls (U+0080..U+009F) and the Unicode line separators and bidirectional overrides that
reorder what a terminal shows (U+2028/9, U+202A..E, U+2066..9).
"""

from __future__ import annotations

import re
from typing import Any

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab escaped (``\\x1b``)."""
    return _UNSAFE.sub(_escape, text)


def is_printable(text: str) -> bool:
    """Whether ``text`` holds no character that :func:`printable` would escape."""
    return _UNSAFE.search(text) is None


class PrintableStream:
    """A text stream that writes through :func:`printable` to ``stream``; every other
    attribute (``flush``, ``fileno``, ``encoding``, ``isatty``) is the wrapped stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    @property
    def wrapped(self) -> Any:
        """The stream written to."""
        return self._stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


__all__ = ["PrintableStream", "is_printable", "printable"]
