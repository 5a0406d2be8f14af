"""The standard streams of a command: delivered before its outputs are committed.

A command prints its results to standard output and writes its output files. When standard
output fails (a full disk, ``> /dev/full``, a reader that closed the pipe) the command must
not have replaced its files already: :func:`deliver_stdout` flushes what was printed so far
and is called before every commit (``gradsched.io.atomic_open``'s rename,
``gradsched.staging.Staging.commit``) and once more when the command ends, so a stream that
fails turns into one :class:`StreamError` (an :class:`~gradsched.errors.InputError` naming
the stream) before anything is renamed into place.

:func:`reserve_standard_fds` gives a closed file descriptor 0, 1 or 2 ``/dev/null`` before
the command opens any file, so that no output file is ever opened as descriptor 1 or 2
(and written into by a print or a rank); :func:`guarded` wraps the streams so that a write
that fails names the stream instead of ending in an internal error.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from gradsched.errors import InputError

STDOUT = "standard output"
STDERR = "standard error"
_FD_NAMES = {0: "standard input", 1: STDOUT, 2: STDERR}


class StreamError(InputError):
    """A standard stream that cannot be written (closed, full, a closed pipe)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")


def reserve_standard_fds() -> list[str]:
    """Open ``/dev/null`` on each of the descriptors 0, 1 and 2 that is closed (so that no
    later ``open`` gets it), give Python's ``sys.stdout``/``sys.stderr`` a stream on it
    where they were None, and return the names of the streams that were closed."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            closed.append(_FD_NAMES[fd])
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False, encoding="utf-8")  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False, encoding="utf-8")  # noqa: SIM115
    return closed


def _reason(exc: OSError) -> str:
    return f"cannot write: {exc.strerror or exc}"


class GuardedStream:
    """``stream`` whose failing writes and flushes raise :class:`StreamError` naming it
    (``quiet``: are dropped instead, for standard error, where nothing could be said)."""

    def __init__(self, stream: Any, name: str, *, quiet: bool = False) -> None:
        self._stream = stream
        self._name = name
        self._quiet = quiet

    @property
    def wrapped(self) -> Any:
        """The stream written to."""
        return self._stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            if self._quiet:
                return len(text)
            silence(self._stream)
            raise StreamError(self._name, _reason(exc)) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            if self._quiet:
                return
            silence(self._stream)
            raise StreamError(self._name, _reason(exc)) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def silence(stream: Any) -> None:
    """Point ``stream``'s descriptor at ``/dev/null`` once it has failed: what is left in
    its buffer is then flushed there when Python exits, instead of a second error."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


def deliver_stdout() -> None:
    """Flush ``sys.stdout`` (everything printed so far reaches its reader); a failure
    raises :class:`StreamError` naming standard output. Called before each commit."""
    stream = sys.stdout
    if stream is None:
        return
    try:
        stream.flush()
    except StreamError:
        raise
    except OSError as exc:
        silence(stream)
        raise StreamError(STDOUT, _reason(exc)) from None
    except ValueError:  # a closed file object (a test's captured stream)
        return
