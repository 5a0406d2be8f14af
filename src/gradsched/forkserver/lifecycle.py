"""Start and stop a :mod:`gradsched.forkserver` server for a Snakemake run (its ``onstart``,
``onsuccess`` and ``onerror`` handlers; the standard library and :mod:`gradsched.io`, which
the workflow imports anyway, so that it stays light to parse).

The server must see the environment each job's shell will have, or it refuses every command
(:func:`gradsched.forkserver.server.refusal`). Snakemake's shell jobs get the workflow's
environment plus the thread counts of the job for the linear-algebra libraries and, from
the ``tmpdir`` resource, the temporary folder (``snakemake/shell.py``, ``shell.__new__``,
Snakemake 9.27: ``OMP_NUM_THREADS`` ... ``NUMEXPR_NUM_THREADS``, then ``TMPDIR``, ``TMP``,
``TEMPDIR``, ``TEMP``): :func:`job_environment` builds that for single-threaded jobs, the
only kind the workflow's rules declare. A job that differs (more threads, another
``tmpdir``) is refused and runs in its own process, as without a server.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gradsched.errors import GradschedError, InputError
from gradsched.forkserver.protocol import LEDGER, LOG, SOCKET_VARIABLE
from gradsched.io import read_text

THREAD_VARIABLES = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
TMPDIR_VARIABLES = ("TMPDIR", "TMP", "TEMPDIR", "TEMP")
READY_TIMEOUT_S = 120.0
"""How long the server may take to import the package (a cold disk, a loaded machine)."""
STOP_TIMEOUT_S = 5.0


@dataclass
class Running:
    """A started server: its process and private folder (socket, ledger, log)."""

    process: subprocess.Popen[bytes]
    folder: Path

    @property
    def socket_path(self) -> str:
        return str(self.folder / "socket")


_running: list[Running] = []


def job_environment(socket_path: str, threads: int = 1) -> dict[str, str]:
    """The environment of a Snakemake shell job with ``threads`` threads and the default
    ``tmpdir`` resource, with :data:`SOCKET_VARIABLE` naming ``socket_path``."""
    env = dict(os.environ)
    env.update({name: str(threads) for name in THREAD_VARIABLES})
    env.update({name: tempfile.gettempdir() for name in TMPDIR_VARIABLES})
    env[SOCKET_VARIABLE] = socket_path
    return env


def start() -> str:
    """Start a server for this process's jobs and name it in this process's environment
    (jobs inherit it); one line saying what happened. A server that does not come up is
    stopped, and every command then runs in its own process."""
    if _running:
        return "gradsched forkserver: already running"
    folder = Path(tempfile.mkdtemp(prefix="gradsched-forkserver-"))
    socket_path = str(folder / "socket")
    with open(folder / LOG, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "gradsched.forkserver.server", socket_path],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            env=job_environment(socket_path), start_new_session=True)
    server = Running(process, folder)
    if not _ready(process):
        try:
            tail = read_text(folder / LOG, replace_errors=True)[-300:].strip()
        except GradschedError as exc:
            tail = str(exc)
        _end(server)
        return f"gradsched forkserver: did not start ({tail or 'no output'}); jobs run alone"
    _running.append(server)
    os.environ[SOCKET_VARIABLE] = socket_path
    return f"gradsched forkserver: serving jobs at {socket_path}"


def _ready(process: subprocess.Popen[bytes]) -> bool:
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT_S)
    return bool(readable) and process.stdout.readline().strip() == b"ready"


def stop() -> str:
    """Stop the server :func:`start` started; one line counting the commands it served and
    refused (with the first refusal's reason), or naming the ledger's line that is not one
    the server writes."""
    if not _running:
        return "gradsched forkserver: not running"
    server = _running.pop()
    os.environ.pop(SOCKET_VARIABLE, None)
    try:
        summary = ledger_summary(server.folder / LEDGER)
    except GradschedError as exc:
        summary = f"stopped; its ledger is not readable: {exc}"
    finally:
        _end(server)
    return f"gradsched forkserver: {summary}"


def ledger_summary(ledger: Path) -> str:
    """``N commands served, M refused (first: why)`` from a server's ledger (read through
    :func:`gradsched.io.read_text`; no ledger: no command came). A line other than
    ``served`` or ``refused: why`` raises :class:`~gradsched.errors.InputError` naming the
    ledger and the line."""
    lines = read_text(ledger).splitlines() if ledger.is_file() else []
    refused = []
    for number, line in enumerate(lines, 1):
        if line == "served":
            continue
        if not line.startswith("refused: ") or not line.removeprefix("refused: ").strip():
            shown = line if len(line) <= 60 else line[:60] + "..."
            raise InputError(f"{shown!r} is not a ledger line ('served' or 'refused: why')",
                             path=ledger, line=number)
        refused.append(line.removeprefix("refused: "))
    first = f" (first: {refused[0]})" if refused else ""
    return f"{len(lines) - len(refused)} commands served, {len(refused)} refused{first}"


def _end(server: Running) -> None:
    with contextlib.suppress(ProcessLookupError):
        server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    if server.process.stdout is not None:
        server.process.stdout.close()
    shutil.rmtree(server.folder, ignore_errors=True)
