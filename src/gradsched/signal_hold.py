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

    The Python-level handlers are replaced by one that only notes the signal; when the
    block ends the old handlers come back and each noted signal is raised again
    (``signal.raise_signal``), once. Blocking the thread's mask (pthread_sigmask(3))
    would not do: the kernel hands a process-directed signal to any thread that does not
    block it (a BLAS or OpenMP thread) and CPython runs the Python-level handler in the
    main thread anyway (Python docs, "signal": handlers always run in the main thread);
    and children started inside would inherit the blocked mask through execve(2), so
    their own teardown could not stop them with SIGTERM. Outside the main thread this is
    a no-op: no signal handler ever interrupts another thread.
    """
    noted: list[int] = []
    previous = _note_signals(noted)
    try:
        yield
    finally:
        _restore_handlers(list(previous.items()))
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
    for sig in sorted(_HELD):
        with contextlib.suppress(ValueError, OSError):
            previous[sig] = signal.signal(sig, note)
    return previous


def _restore_handlers(previous: list[tuple[int, Any]]) -> None:
    """Put ``previous`` handlers back, all of them even when a signal that arrives
    meanwhile raises through one already restored (restoring one twice is harmless)."""
    done = 0
    try:
        for sig, handler in previous:
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            done += 1
    except BaseException:
        _restore_handlers(previous[done:])
        raise


__all__ = ["signals_held"]
