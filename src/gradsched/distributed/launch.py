"""Launch N ranks of a task as separate processes (loopback or network namespaces).

A *task* is a function ``fn(rank: int, world_size: int, payload: dict) -> JSON-able``
named ``"package.module:function"``. Each rank is a ``python -m gradsched.distributed.worker``
process (optionally behind a per-rank command prefix such as ``ip netns exec gs0``) that
initialises a ``torch.distributed`` process group with a timeout, runs the task and writes
its result atomically to a file. The launcher

* fails fast: when any rank exits non-zero, the others are terminated and a
  :class:`DistributedError` of one line names the rank, its exit status and its error
  (the line the rank left, else the last line of its output that is not a traceback's or
  a C++ stack's; with ``$GRADSCHED_TRACEBACK`` set, the end of its output follows);
* never hangs: an overall deadline bounds the run; process-group init and every
  collective have timeouts inside the ranks;
* cleans up on every exit path (including Ctrl-C, SIGTERM and SIGHUP, which raise
  ``SystemExit`` while ranks run): no rank outlives the launcher, its temporary directory
  is removed, and no partial result is returned;
* survives its own SIGKILL cleanly: every rank holds the read end of a *lifeline* pipe
  whose write end only the launcher holds, and watches it (plus ``PR_SET_PDEATHSIG`` on
  Linux, see :mod:`gradsched.distributed.lifeline`); a rank whose launcher died removes
  the temporary directory and exits within a second.

Under ``torchrun`` the worker module also runs directly (``env://`` initialisation).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradsched.admission import check_ranks
from gradsched.distributed.lifeline import exit_on_signals
from gradsched.distributed.peer_loss import PEER_LOST
from gradsched.distributed.rank_files import ERROR_LINE_CHARS, failure_path, result_path
from gradsched.errors import GradschedError, InputError
from gradsched.io import parse_json, read_text
from gradsched.names import package_task
from gradsched.signal_hold import signals_held


class DistributedError(GradschedError, RuntimeError):
    """A rank failed, timed out, or could not start."""


def collective_failed(rank: int, world: int, exc: BaseException) -> DistributedError:
    """The error a rank started by torchrun raises when a collective fails (gloo's and NCCL's
    errors, ``DistBackendError`` among them, are RuntimeErrors): most likely a peer rank or
    its node died, which the rank itself cannot tell apart from a network failure."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return DistributedError(f"rank {rank} of {world}: a collective failed, most likely a "
                            "peer rank or its node died or the network between them "
                            f"failed (check the other nodes' logs): {first[:300]}")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class LaunchSpec:
    """How to start the ranks.

    ``prefixes[r]`` is prepended to rank r's command (e.g. ``["ip", "netns", "exec",
    "gs0"]``); ``rank_env[r]`` adds environment variables (e.g. ``GLOO_SOCKET_IFNAME``).
    ``on_spawn(pid)`` is called as each rank starts (an emulated cluster records its
    ranks' pids so that only they are ever stopped).
    """

    world_size: int
    backend: str = "gloo"
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    init_timeout_s: float = 60.0
    op_timeout_s: float = 300.0
    deadline_s: float = 1800.0
    threads_per_rank: int = 1
    prefixes: Sequence[Sequence[str]] | None = None
    rank_env: Sequence[dict[str, str]] | None = None
    env: dict[str, str] = field(default_factory=dict)
    on_spawn: Callable[[int], None] | None = None

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise DistributedError("world_size must be >= 1")
        for name in ("prefixes", "rank_env"):
            value = getattr(self, name)
            if value is not None and len(value) != self.world_size:
                raise DistributedError(f"{name} must have one entry per rank")


def launch(task: str, payload: dict[str, Any], spec: LaunchSpec) -> list[Any]:
    """Run ``task`` on ``spec.world_size`` ranks; return each rank's result, rank order.
    ``task`` is ``gradsched.<module>:<function>`` (anything else is refused). The process
    limits are checked first (:func:`gradsched.admission.check_ranks`; the commands have
    already checked the CPUs and memory, with their ``--oversubscribe``)."""
    package_task(task)
    check_ranks(f"launch of {task}", spec.world_size, spec.threads_per_rank,
                oversubscribe=True)
    port = spec.master_port or free_port(spec.master_addr if spec.prefixes is None
                                         else "127.0.0.1")
    with exit_on_signals():
        procs: list[subprocess.Popen[bytes]] = []
        workdir: Path | None = None
        fds: tuple[int, ...] = ()
        try:  # a Ctrl-C at any point below leaves no folder, descriptor or rank behind
            workdir = Path(tempfile.mkdtemp(prefix="gradsched-launch-"))
            fds = os.pipe()
            lifeline_r = fds[0]
            (workdir / "payload.json").write_text(json.dumps(payload), encoding="utf-8")
            for rank in range(spec.world_size):
                with signals_held():  # a started rank is always in procs (and recorded)
                    procs.append(_start_rank(rank, task, port, spec, workdir, lifeline_r))
                    if spec.on_spawn is not None:
                        spec.on_spawn(procs[-1].pid)
            _wait(procs, spec, workdir)
            return [read_result(workdir, rank) for rank in range(spec.world_size)]
        finally:
            if workdir is not None:
                _cleanup(procs, workdir, fds)


def _cleanup(procs: list[subprocess.Popen[bytes]], workdir: Path, fds: Sequence[int]) -> None:
    """Stop the ranks still running, close the lifeline, remove the temporary directory
    (with SIGINT/SIGTERM/SIGHUP held, so a second signal cannot cut this short)."""
    with signals_held():
        _terminate(procs)
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)


def _start_rank(rank: int, task: str, port: int, spec: LaunchSpec, workdir: Path,
                lifeline: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(spec.env)
    if spec.rank_env is not None:
        env.update(spec.rank_env[rank])
    threads = str(spec.threads_per_rank)
    env.update({"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
                "PYTHONUNBUFFERED": "1"})
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-P", "-m", "gradsched.distributed.worker",
           "--task", task, "--rank", str(rank), "--world-size", str(spec.world_size),
           "--master", f"{spec.master_addr}:{port}", "--backend", spec.backend,
           "--init-timeout-s", str(spec.init_timeout_s),
           "--op-timeout-s", str(spec.op_timeout_s),
           "--threads", threads, "--workdir", str(workdir), "--lifeline-fd", str(lifeline)]
    if spec.prefixes is not None:
        cmd = [*spec.prefixes[rank], *cmd]
    stderr = open(workdir / f"rank{rank}.stderr", "wb")  # noqa: SIM115 - closed by _terminate
    try:
        return subprocess.Popen(cmd, env=env, stdout=stderr, stderr=subprocess.STDOUT,
                                start_new_session=True, pass_fds=(lifeline,))
    finally:
        stderr.close()


def _wait(procs: list[subprocess.Popen[bytes]], spec: LaunchSpec, workdir: Path) -> None:
    deadline = time.monotonic() + spec.deadline_s
    with _ExitClock(procs) as clock:
        while True:
            clock.watch(0.05)
            codes = [p.poll() for p in procs]
            if any(c not in (None, 0) for c in codes):
                clock.watch(_SETTLE_S)  # let the peers of a failed rank exit too
                codes = [p.poll() for p in procs]
                rank = clock.first_failed(codes)
                others = [r for r, c in enumerate(codes) if c not in (None, 0) and r != rank]
                also = f" (then ranks {others} failed)" if others else ""
                raise DistributedError(
                    f"rank {rank} of {spec.world_size} {_exit_status(codes[rank])}{also}; the "
                    f"other ranks were stopped: {rank_error(workdir, rank)}"
                    + _details(workdir, rank))
            if all(c == 0 for c in codes):
                return
            if time.monotonic() > deadline:
                waiting = [r for r, c in enumerate(codes) if c is None]
                raise DistributedError(
                    f"ranks {waiting} still running after the {spec.deadline_s:g} s deadline; "
                    f"stopped them (rank {waiting[0]}'s last output: "
                    f"{rank_error(workdir, waiting[0])})" + _details(workdir, waiting[0]))


_SETTLE_S = 1.0


class _ExitClock:
    """When each rank exited, to the millisecond, so the rank that failed first (the
    cause) is told from the peers that failed because it vanished (gloo aborts or raises
    within milliseconds). Uses Linux pidfds; elsewhere it falls back to polling order."""

    def __init__(self, procs: list[subprocess.Popen[bytes]]) -> None:
        self.procs = procs
        self.exited_at: dict[int, float] = {}
        self.fds: dict[int, int] = {}
        self.poller = select.poll()
        for rank, proc in enumerate(procs):
            try:
                fd = os.pidfd_open(proc.pid)
            except (AttributeError, OSError):  # not Linux >= 5.3, or already reaped
                continue
            self.fds[fd] = rank
            self.poller.register(fd, select.POLLIN)

    def __enter__(self) -> _ExitClock:
        return self

    def __exit__(self, *_: object) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def watch(self, timeout_s: float) -> None:
        """Note the ranks that exit within ``timeout_s`` (returns early once all have)."""
        end = time.monotonic() + timeout_s
        while len(self.exited_at) < len(self.procs):
            left = end - time.monotonic()
            if left <= 0:
                return
            if self.fds:
                for fd, _ in self.poller.poll(max(int(left * 1000), 1)):
                    self.exited_at.setdefault(self.fds[fd], time.monotonic())
                    self.poller.unregister(fd)
            else:
                time.sleep(min(left, 0.02))
            self._note_polled()

    def _note_polled(self) -> None:
        now = time.monotonic()
        for rank, proc in enumerate(self.procs):
            if proc.poll() is not None:
                self.exited_at.setdefault(rank, now)

    def first_failed(self, codes: Sequence[int | None]) -> int:
        """The failed rank that caused the failure: one that did not merely lose a peer
        (:data:`~gradsched.distributed.peer_loss.PEER_LOST`) if any, the first of them to
        exit; lowest rank on ties."""
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        return min(failed, key=lambda r: (codes[r] == PEER_LOST,
                                          self.exited_at.get(r, float("inf")), r))


def _terminate(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM the ranks' process groups still running, SIGKILL them after 5 s."""
    for proc in procs:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
    end = time.monotonic() + 5.0
    for proc in procs:
        try:
            proc.wait(timeout=max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def _exit_status(code: int | None) -> str:
    """``exited with code 4``; a signal's name too (``exited with code -9 (SIGKILL)``)."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"exited with code {code} ({signal.Signals(-code).name})"
    return f"exited with code {code}"


_NOT_A_MESSAGE = ("Traceback", "File \"", "frame #", "Exception raised from", "^", "~")
"""Starts of output lines that are a traceback's or a C++ stack's, not an error message."""


def rank_error(workdir: Path, rank: int) -> str:
    """One line saying why ``rank`` failed: the line it left
    (:func:`gradsched.distributed.worker.record_failure`), else the last line of its
    output that is neither a Python traceback's nor a C++ stack's frame (a rank killed by a
    signal may have printed nothing: ``no output``). Whitespace is collapsed and the line
    bounded to :data:`~gradsched.distributed.worker.ERROR_LINE_CHARS` characters."""
    try:
        text = read_text(failure_path(workdir, rank), replace_errors=True)
    except InputError:
        text = ""
        for line in reversed(_tail(workdir / f"rank{rank}.stderr").splitlines()):
            if line.strip() and not line[:1].isspace() and not line.startswith(_NOT_A_MESSAGE):
                text = line
                break
    return " ".join(text.split())[:ERROR_LINE_CHARS] or "no output"


def _details(workdir: Path, rank: int) -> str:
    """The end of ``rank``'s output, on the lines after the error's, when
    ``$GRADSCHED_TRACEBACK`` is set (the CLI's switch for tracebacks); else nothing."""
    if not os.environ.get("GRADSCHED_TRACEBACK"):
        return ""
    return f"\n--- rank {rank} output (end) ---\n" + _tail(workdir / f"rank{rank}.stderr")


def _tail(path: Path, limit: int = 3000) -> str:
    """The end of a rank's output (a log: bad bytes replaced)."""
    try:
        text = read_text(path, replace_errors=True)
    except InputError:
        return "(no output)"
    return text[-limit:] if text else "(no output)"


def read_result(workdir: Path, rank: int) -> Any:
    """Rank ``rank``'s result, read through the input gate (:func:`gradsched.io.read_text`,
    :func:`gradsched.io.parse_json`): a result cut short, not UTF-8 or beyond the input
    bound is a :class:`DistributedError` naming the rank and the file (and line)."""
    path = result_path(workdir, rank)
    if not path.is_file():
        raise DistributedError(f"rank {rank} exited 0 but wrote no result (its last output: "
                               f"{rank_error(workdir, rank)})" + _details(workdir, rank))
    try:
        return parse_json(read_text(path), path)
    except InputError as exc:
        raise DistributedError(f"rank {rank} exited 0 but its result is unreadable: "
                               f"{' '.join(str(exc).split())}") from None
