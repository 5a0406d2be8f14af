"""Parent and child lifetimes tied together: no rank outlives its launcher.

Launcher side: :func:`exit_on_signals` turns SIGTERM/SIGHUP into ``SystemExit`` while
ranks run, so ``finally`` clauses stop the ranks and remove the temporary directory;
:func:`gradsched.signal_hold.signals_held` keeps a second signal from cutting that
cleanup short.

Rank side, for a launcher that dies without cleaning up (SIGKILL, OOM killer):

* Linux: ``prctl(PR_SET_PDEATHSIG, sig)`` (via ``ctypes``) makes the kernel send ``sig``
  to the rank the moment the thread that started it exits (prctl(2), "PR_SET_PDEATHSIG");
* everywhere: a daemon *watchdog* thread waits on a pipe whose write end only the launcher
  holds (end of file = the launcher is gone; the kernel closes it even on SIGKILL) and
  polls ``os.getppid()`` (it changes when the parent exits and the rank is re-parented).

Both lead to the same action: the rank's ``on_orphaned`` callback, then ``os._exit``. The
watchdog runs even while the main thread waits inside a C++ collective (gloo and torch
release the GIL there), so a rank notices within ``poll_s`` (0.5 s) of its launcher's
death. Limit: code that holds the GIL for longer than that delays both mechanisms.

For arbitrary per-rank commands, :mod:`gradsched.distributed.orphan_guard` sets the
parent-death signal and then executes the command.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
ORPHANED_EXIT = 128 + signal.SIGHUP  # a rank whose launcher died exits with this code
_EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


# ----------------------------------------------------------------------------- launcher


def raise_exit(signum: int, frame: FrameType | None) -> None:
    """Turn a terminating signal into SystemExit so ``with`` blocks and finally clauses run."""
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def exit_on_signals(signals: tuple[int, ...] = _EXIT_SIGNALS) -> Iterator[None]:
    """While inside, ``signals`` (default SIGTERM/SIGHUP) raise ``SystemExit(128 + signum)``
    in the main thread.

    Only signals whose handler is the default (which would kill the process without
    running any ``finally``) are changed; another installed handler is left as it is.
    Outside the main thread nothing changes (Python only runs handlers there).
    """
    old: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in signals:
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(sig) == signal.SIG_DFL:
                    old[sig] = signal.signal(sig, raise_exit)
    try:
        yield
    finally:
        for sig, handler in old.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, handler)


# ----------------------------------------------------------------------------- rank


def set_parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent exits (Linux
    prctl(2) ``PR_SET_PDEATHSIG``); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _parent_gone(lifeline_fd: int | None, first_ppid: int, wait_s: float) -> bool:
    """Wait up to ``wait_s`` for a sign that the parent is gone; True if it is."""
    if lifeline_fd is not None:
        try:
            ready, _, _ = select.select([lifeline_fd], [], [], wait_s)
            if ready and os.read(lifeline_fd, 1) == b"":
                return True  # end of file: the launcher's write end is closed
        except (OSError, ValueError):
            return True
    else:
        threading.Event().wait(wait_s)
    return os.getppid() != first_ppid


def watch_parent(on_orphaned: Callable[[], None], *, lifeline_fd: int | None = None,
                 poll_s: float = 0.5) -> threading.Thread:
    """Start the watchdog and the parent-death signal (SIGHUP); both call
    ``on_orphaned()`` and then ``os._exit(ORPHANED_EXIT)`` once the parent is gone.

    Call it first thing in the child, before anything slow: if the parent died before
    ``prctl`` took effect, the watchdog's first check notices (pipe at end of file).
    """
    first_ppid = os.getppid()
    once = threading.Lock()

    def orphaned() -> None:
        if once.acquire(blocking=False):  # the signal handler and the thread may race
            with contextlib.suppress(BaseException):
                on_orphaned()
            os._exit(ORPHANED_EXIT)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        orphaned()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGHUP, on_signal)
        set_parent_death_signal(signal.SIGHUP)

    def loop() -> None:
        while not _parent_gone(lifeline_fd, first_ppid, poll_s):
            pass
        orphaned()

    thread = threading.Thread(target=loop, name="gradsched-parent-watchdog", daemon=True)
    thread.start()
    return thread
