"""The server side of :mod:`gradsched.forkserver`: import the command line once, then fork
one child per command.

A child runs the command only when it would run exactly as in a fresh
``python -P -m gradsched`` started by the caller: the same user (``SO_PEERCRED``), the same
environment, byte for byte (the libraries read some of it when they load: thread counts,
locale, matplotlib's configuration), and the same working folder (matplotlib reads a
``matplotlibrc`` there when it loads). Otherwise it refuses, and the client runs the command
itself. A child that runs it takes the caller's standard streams, restores the signal
handlers of a fresh interpreter, and calls :func:`gradsched.cli.main`; the caller's signals
arrive through the connection, and the connection's end (the caller killed) is SIGTERM,
then, :data:`ORPHAN_GRACE_S` later, the end of the child.

The server ends when its parent does (``PR_SET_PDEATHSIG`` and a poll of ``getppid``), or on
SIGTERM, and then removes its private folder (socket, ledger, log). It keeps no state
between commands: every command's process starts from the same imported state. Each child
appends one line to the ledger beside the socket (``served`` or ``refused: why``) for
:func:`gradsched.forkserver.lifecycle.stop`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from gradsched import cli
from gradsched.distributed.lifeline import raise_exit, set_parent_death_signal
from gradsched.forkserver.protocol import (
    LEDGER,
    LOG,
    ProtocolError,
    receive_frame,
    send_frame,
)

PRELOADED = ("scipy.optimize", "scipy.interpolate", "scipy.stats", "matplotlib",
             "matplotlib.pyplot")
"""Libraries the commands import on their paths (beyond every command module), loaded once."""
ORPHAN_GRACE_S = 10.0
"""How long a child whose caller is gone has to clean up after SIGTERM."""
SHELL_VARIABLES = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})
"""Variables the shell sets for every command it starts (bash(1), "Shell Variables"), which no
library reads as it loads: not compared (the working folder is, on its own)."""
POLL_S = 0.5
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid (socket(7), SO_PEERCRED)


def preload() -> None:
    """Every command module (the full parser) and :data:`PRELOADED`."""
    cli.build_parser()
    for name in PRELOADED:
        with contextlib.suppress(ImportError):  # a command that needs it says so itself
            importlib.import_module(name)


Command = Callable[[list[str]], "int | None"]


def serve(path: str, command: Command = cli.main) -> None:
    """Listen on ``path`` and fork a child per connection, which runs ``command`` on the
    request's arguments, until the parent ends."""
    parent = os.getppid()
    set_parent_death_signal(signal.SIGTERM)
    preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    listener.settimeout(POLL_S)
    expected = Expected(dict(os.environ), os.getcwd(), Path(path).parent / LEDGER, command)
    signal.signal(signal.SIGTERM, raise_exit)
    try:
        print("ready", flush=True)
        while os.getppid() == parent:
            _reap()
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            if os.fork() == 0:
                _child(conn, listener, expected)
            conn.close()
    finally:
        listener.close()
        _remove_folder(Path(path))


def _remove_folder(socket_path: Path) -> None:
    """The socket and the server's folder: :data:`LEDGER` and :data:`LOG` beside the socket,
    nothing else (a folder holding anything more is left as it is)."""
    for path in (socket_path, socket_path.parent / LEDGER, socket_path.parent / LOG):
        with contextlib.suppress(OSError):
            path.unlink()
    with contextlib.suppress(OSError):
        socket_path.parent.rmdir()


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


@dataclass(frozen=True)
class Expected:
    """What a request must match to run here, and where children note what they did."""

    env: dict[str, str]
    cwd: str
    ledger: Path
    command: Command


def _child(conn: socket.socket, listener: socket.socket, expected: Expected) -> NoReturn:
    code = 1
    try:
        listener.close()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        code = _run_one(conn, expected)
    except BaseException:  # a child never returns into the server's loop
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _run_one(conn: socket.socket, expected: Expected) -> int:
    conn.settimeout(POLL_S * 20)
    _, fds, _, _ = socket.recv_fds(conn, 1, 3)
    request = receive_frame(conn)
    reason = refusal(request, _peer_uid(conn), len(fds), expected)
    _note(expected.ledger, f"refused: {reason}" if reason else "served")
    if reason:
        send_frame(conn, {"refused": reason})
        return 0
    send_frame(conn, {"pid": os.getpid()})
    if conn.recv(1) != b"\0":
        return 0  # the caller gave up before the go
    conn.settimeout(None)
    _take_streams(fds)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["gradsched", *request["argv"]]
    threading.Thread(target=_watch, args=(conn,), daemon=True).start()
    code = _exit_status(expected.command, request["argv"])
    send_frame(conn, {"exit": code})
    return code


def refusal(request: dict[str, Any], peer_uid: int, n_fds: int,
            expected: Expected) -> str | None:
    """Why a request cannot run as a fresh process would (``None``: it can)."""
    argv = request.get("argv")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return "the command line is not a list of strings"
    if n_fds != 3:
        return "the standard streams did not arrive"
    if peer_uid != os.getuid():
        return f"another user (uid {peer_uid})"
    theirs = request.get("env")
    if not isinstance(theirs, dict):
        return "no environment"
    names = sorted(k for k in {*expected.env, *theirs} - SHELL_VARIABLES
                   if expected.env.get(k) != theirs.get(k))
    if names:
        return f"another environment ({', '.join(names[:5])})"
    if request.get("cwd") != expected.cwd:
        return "another working folder"
    return None


def _peer_uid(conn: socket.socket) -> int:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return _UCRED.unpack(raw)[1]


def _note(ledger: Path, line: str) -> None:
    """One line (under ``PIPE_BUF``: appended whole however many children write)."""
    with contextlib.suppress(OSError), open(ledger, "a", encoding="utf-8") as fh:
        fh.write(" ".join(line.split())[:200] + "\n")


def _take_streams(fds: list[int]) -> None:
    """The caller's standard input, output and error as this process's, line-buffered on a
    terminal as a fresh interpreter's would be."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(line_buffering=stream is sys.stderr or os.isatty(1))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)


def _watch(conn: socket.socket) -> None:
    """Deliver the caller's signals; on its end, SIGTERM and, after the grace, the end."""
    while True:
        try:
            data = conn.recv(1)
        except OSError:
            data = b""
        if not data:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(ORPHAN_GRACE_S)
            os._exit(128 + signal.SIGTERM)
        with contextlib.suppress(ValueError, OSError):
            os.kill(os.getpid(), signal.Signals(data[0]))


def _exit_status(command: Command, argv: list[str]) -> int:
    try:
        return int(command(argv) or 0)
    except SystemExit as exc:  # as the interpreter ends on it (sys.exit(3), sys.exit("why"))
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1


def main() -> None:
    """``python -P -m gradsched.forkserver.server SOCKET``."""
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -P -m gradsched.forkserver.server SOCKET")
    with contextlib.suppress(KeyboardInterrupt, ProtocolError, SystemExit):
        serve(sys.argv[1])


if __name__ == "__main__":
    main()
