"""Terminating signals held across a step that must not be cut in half.

One idea, :func:`signals_held`, used wherever gradsched must finish what it started before
a Ctrl-C or SIGTERM takes effect: moving staged outputs into place, recording a network
namespace it just created, tearing an emulated cluster down, stopping ranks.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

_HELD = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1})


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP/SIGUSR1 for the duration of the block: one that arrives
    inside takes effect when the block ends, through the handler that was installed
    before it (an exception, or the default action).

    A step that must not be cut in half runs inside: a cleanup, or a command that creates
    something followed by the record of what it created. Otherwise the handler's
    exception can be raised while ``subprocess`` starts or reaps a child, which leaves
    the child running on its own.

    Two layers, because blocking alone is not enough: the thread's signal mask is blocked
    (pthread_sigmask(3); children started inside inherit it through execve(2), so a
    Ctrl-C sent to the whole process group does not cut them short either), but the
    kernel delivers a process-directed signal to any thread that does not block it (a
    BLAS or OpenMP thread) and CPython then runs the Python-level handler in the main
    thread anyway (Python docs, "signal": handlers always run in the main thread). So in
    the main thread the Python-level handlers are also replaced by one that only notes
    the signal; when the block ends the old handlers come back and each noted signal is
    raised again (``signal.raise_signal``), once.
    """
    noted: list[int] = []
    previous_handlers = _note_signals(noted)
    previous_mask = (set(signal.pthread_sigmask(signal.SIG_BLOCK, _HELD))
                     if hasattr(signal, "pthread_sigmask") else None)
    try:
        yield
    finally:
        if previous_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        _restore_handlers(previous_handlers)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)


def _note_signals(noted: list[int]) -> dict[int, Any]:
    """In the main thread, make each held signal's Python handler append it to ``noted``;
    return the handlers it replaced (nothing outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def note(signum: int, frame: FrameType | None) -> None:
        if previous.get(signum) is not signal.SIG_IGN:
            noted.append(signum)

    previous: dict[int, Any] = {}
    for sig in _HELD:
        with contextlib.suppress(ValueError, OSError):
            previous[sig] = signal.signal(sig, note)
    return previous


def _restore_handlers(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


__all__ = ["signals_held"]
