"""What the client and the server of :mod:`gradsched.forkserver` say to each other, over one
``AF_UNIX`` stream connection per command (standard library only: the client imports it).

1. Client: one byte with its standard input, output and error attached
   (``SCM_RIGHTS``, :func:`socket.send_fds`), then a framed request: a 4-byte big-endian
   length and that many bytes of JSON ``{"argv": [...], "cwd": "...", "env": {...}}``.
2. Server (the forked child): a framed reply, ``{"pid": N}`` when it runs the command or
   ``{"refused": "why"}`` when it cannot run it as a fresh process would (the client then
   runs the command itself).
3. Client, any time after: one byte, a signal number to deliver to the child (the signals
   a job's own process receives: SIGINT, SIGTERM, SIGHUP). End of file (the client is
   gone, even by SIGKILL) is SIGTERM.
4. Child, when the command ends: a framed ``{"exit": code}``.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

SOCKET_VARIABLE = "GRADSCHED_FORKSERVER"
"""The environment variable naming the server's socket; unset: every command runs in its own
process, as without a server."""

LEDGER = "ledger.txt"
"""Beside the socket: one line per command, ``served`` or ``refused: why``."""
LOG = "server.log"
"""Beside the socket: the server's standard error."""

MAX_FRAME_BYTES = 1 << 24
"""The largest request or reply (an environment and a command line are far smaller)."""

_LENGTH = struct.Struct("!I")


class ProtocolError(OSError):
    """The other side closed the connection or sent something that is not a frame."""


def send_frame(sock: socket.socket, message: dict[str, Any]) -> None:
    """``message`` as a length-prefixed JSON frame."""
    payload = json.dumps(message, separators=(",", ":")).encode("utf-8")
    sock.sendall(_LENGTH.pack(len(payload)) + payload)


def _exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ProtocolError("connection closed")
        chunks += chunk
    return bytes(chunks)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def receive_frame(sock: socket.socket) -> dict[str, Any]:
    """One frame of :func:`send_frame`; :class:`ProtocolError` on a closed connection or a
    frame that is not a JSON object within :data:`MAX_FRAME_BYTES` (``NaN`` and
    ``Infinity``, which :func:`send_frame` never writes, and nesting deeper than Python's
    recursion allows are refused the same way).

    Frames are parsed here, not by :func:`gradsched.io.parse_json`: the client imports only
    the standard library, so that asking a server costs milliseconds; the frame's size is
    bounded above and its content checked by the side that reads it."""
    (length,) = _LENGTH.unpack(_exactly(sock, _LENGTH.size))
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"a frame of {length} bytes")
    try:
        message = json.loads(_exactly(sock, length).decode("utf-8"),
                             parse_constant=_no_constant)
    except ValueError as exc:
        raise ProtocolError(f"not a JSON frame: {exc}") from None
    except RecursionError:
        raise ProtocolError("a JSON frame nested too deeply") from None
    if not isinstance(message, dict):
        raise ProtocolError("a frame that is not a JSON object")
    return message


def frame_int(message: dict[str, Any], key: str, low: int, high: int) -> int | None:
    """``message[key]`` when it is an integer (not a boolean) in ``[low, high]``, else
    None."""
    value = message.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value
