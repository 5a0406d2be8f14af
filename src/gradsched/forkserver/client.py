"""The client side of :mod:`gradsched.forkserver`: hand this command to a warm server, or
say that it could not (standard library only, so that asking costs milliseconds).

:func:`run_through_server` returns the command's exit status when a server ran it, and
``None`` when it did not start it (no server named, none listening, another user's, a
refusal, a timeout before the start): the caller then runs the command in its own process,
exactly as without a server. A command is never run twice: the server's child starts only
on the client's go byte, sent after the child said it will run the command
(:mod:`.protocol`). Once started, SIGINT, SIGTERM and SIGHUP sent to this process are passed
to the child, and this process ends with the child's exit status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from types import FrameType

from gradsched.forkserver.protocol import (
    SOCKET_VARIABLE,
    ProtocolError,
    frame_int,
    receive_frame,
    send_frame,
)

CONNECT_TIMEOUT_S = 2.0
"""How long to wait for the server to accept and answer before running the command here."""
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PID_MAX = 1 << 22
"""The largest process id Linux hands out (``PID_MAX_LIMIT``, ``include/linux/threads.h``)."""


def run_through_server(argv: list[str]) -> int | None:
    """``gradsched argv`` run by the server named in :data:`SOCKET_VARIABLE`; its exit status,
    or ``None`` when the server did not start it."""
    path = os.environ.get(SOCKET_VARIABLE)
    if not path:
        return None
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None
    with sock:
        if not _started(sock, path, argv):
            return None
        return _wait_for_exit(sock)


def _started(sock: socket.socket, path: str, argv: list[str]) -> bool:
    """Whether the server's child agreed to run the command and was told to go."""
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect(path)
        socket.send_fds(sock, [b"\0"], [0, 1, 2])
        send_frame(sock, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)})
        if frame_int(receive_frame(sock), "pid", 1, PID_MAX) is None:
            return False
        sock.sendall(b"\0")  # go
    except (OSError, ValueError):
        return False
    return True


def _wait_for_exit(sock: socket.socket) -> int:
    """Forward signals to the child until it reports its exit status."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            sock.sendall(bytes([signum]))

    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, forward)
    sock.settimeout(None)
    try:
        status = frame_int(receive_frame(sock), "exit", -(2**31), 2**31 - 1)
    except ProtocolError:
        status = None
    if status is None:
        print("gradsched: the command's process ended without an exit status (it was killed)",
              file=sys.stderr)
        return 1
    return status
