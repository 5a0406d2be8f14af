"""An emulated cluster on one machine: one Linux network namespace per rank.

Layout (``P`` is the name prefix, ``gs<pid>-`` by default)::

    namespace P r0: lo, veth0 10.77.0.1/24 --+
    namespace P r1: lo, veth0 10.77.0.2/24 --+-- namespace P sw: bridge br0 (ports r0, r1, ...)
    ...                                      |

Every veth pair is created directly between a rank namespace and the dedicated "switch"
namespace, so nothing is added to the host's own network namespace and no traffic can
leave the machine. Each rank's link is shaped to ``rate`` in both directions with a
``tc ... tbf`` qdisc: on ``veth0`` in the rank namespace (the rank's egress) and on the
bridge port ``r<k>`` in the switch namespace (the rank's ingress), like a full-duplex
switch port of that rate.

Teardown (:meth:`EmulatedCluster.close`) kills what still runs inside the namespaces (only
processes started there by us) and deletes the namespaces, which destroys their veth
pairs, the bridge and the qdiscs. It runs on every exit path: leaving the ``with`` block
normally or by an exception, Ctrl-C, SIGTERM/SIGHUP (turned into ``SystemExit`` while the
cluster is up) and interpreter exit (``atexit``); it is idempotent. A run killed with
SIGKILL cannot clean up after itself: the next cluster removes such leftovers (namespaces
of the same prefix, and namespaces of any ``gs<pid>-`` prefix whose owner process is gone
and in which nothing runs), and ``gradsched cluster clean`` does so on demand.

Needs root (``CAP_SYS_ADMIN`` and ``CAP_NET_ADMIN``) and the ``ip`` and ``tc`` tools of
iproute2.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from gradsched.errors import ConfigError, GradschedError

SUBNET = "10.77.0"  # rank k is SUBNET.(k+1)/24; only inside our own namespaces
RANK_IFNAME = "veth0"  # the rank's interface name, the same in every rank namespace
BRIDGE = "br0"
OWNER_DIR = Path("/run/gradsched/netns")
_DEFAULT_PREFIX_RE = re.compile(r"^gs(\d+)-")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")
_RATE_UNITS = {  # tc's units, decimal: *bit are bits/s, *bps are BYTES/s
    "bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
    "bps": 8.0, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
}
MAX_RANKS = 250


class ClusterError(GradschedError, RuntimeError):
    """The emulated cluster could not be set up (or torn down)."""


# ----------------------------------------------------------------------------- rates


def parse_rate(text: str) -> float:
    """A tc rate (``100mbit``, ``1gbit``, ``10gbit``, ``125mbps``) -> bits per second.

    Units are tc's, decimal: ``kbit``/``mbit``/``gbit`` are 1e3/1e6/1e9 bits/s and
    ``kbps``/``mbps``/``gbps`` are 1e3/1e6/1e9 *bytes*/s.
    """
    match = _RATE_RE.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _RATE_UNITS:
        raise ConfigError(f"rate {text!r}: expected a number and a tc unit, e.g. 100mbit, "
                          f"1gbit, 10gbit (units: {', '.join(_RATE_UNITS)})")
    bits = float(match.group(1)) * _RATE_UNITS[unit]
    if bits < 1e5:
        raise ConfigError(f"rate {text!r} is below 100kbit; too slow to be useful")
    return bits


def rate_label(bits_per_s: float) -> str:
    """``1e9`` -> ``1gbit``, ``1e8`` -> ``100mbit`` (for file stems and messages)."""
    for unit, scale in (("tbit", 1e12), ("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bits_per_s >= scale:
            value = bits_per_s / scale
            return f"{value:g}{unit}"
    return f"{bits_per_s:g}bit"


def tbf_params(bits_per_s: float) -> tuple[int, float]:
    """(burst bytes, latency s) of the tbf qdisc for ``bits_per_s``.

    The bucket holds 2 ms of traffic (at least 64 KiB, one full GSO packet), so short
    bursts can exceed the rate by at most that much; the queue holds 50 ms.
    """
    burst = max(64 * 1024, int(bits_per_s / 8 * 0.002))
    return burst, 0.05


# ----------------------------------------------------------------------------- helpers


def _run(cmd: Sequence[str], *, check: bool = True, timeout: float = 20.0) -> str:
    """Run an iproute2 command; a failure raises :class:`ClusterError` with its stderr."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              check=False)
    except FileNotFoundError as exc:
        raise ClusterError(f"{cmd[0]!r} not found: the emulated cluster needs iproute2 "
                           "(ip, tc)") from exc
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"{' '.join(cmd)} did not finish within {timeout:g} s") from exc
    if check and proc.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)} failed (exit {proc.returncode}): "
                           f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def preflight() -> None:
    """Raise a clear :class:`ClusterError` unless we are root and ``ip netns`` works."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        raise ClusterError("the emulated cluster needs Linux network namespaces")
    if os.geteuid() != 0:
        raise ClusterError("the emulated cluster needs root (it creates network namespaces, "
                           "veth links and tc qdiscs); run it as root, e.g. with sudo")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise ClusterError(f"{tool!r} not found: the emulated cluster needs iproute2")
    _run(["ip", "netns", "list"])


def list_namespaces() -> list[str]:
    """Names of the network namespaces that ``ip netns`` knows."""
    out = _run(["ip", "netns", "list"])
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _ns_pids(name: str) -> list[int]:
    out = _run(["ip", "netns", "pids", name], check=False)
    return [int(tok) for tok in out.split() if tok.isdigit()]


def _start_time(pid: int) -> str | None:
    """The start time (clock ticks since boot) of ``pid``, or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_alive(prefix: str) -> bool:
    """Whether the process that created the namespaces of ``prefix`` still runs."""
    path = OWNER_DIR / f"{prefix}.json"
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        match = _DEFAULT_PREFIX_RE.match(prefix)
        return bool(match) and _start_time(int(match.group(1))) is not None
    return _start_time(int(owner["pid"])) == owner.get("start_time")


def _kill_inside(names: Sequence[str]) -> None:
    """SIGTERM, then SIGKILL, the processes still inside ``names`` (ours: the ranks)."""
    pids = {pid for name in names for pid in _ns_pids(name)} - {os.getpid()}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 3.0
    while pids and time.monotonic() < end:
        pids = {pid for pid in pids if _start_time(pid) is not None and not _is_zombie(pid)}
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _delete_namespaces(names: Sequence[str]) -> list[str]:
    """Delete ``names`` (killing what runs inside first); return the ones that failed."""
    _kill_inside(names)
    failed = []
    for name in names:
        out = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True,
                             timeout=20, check=False)
        if out.returncode != 0 and name in list_namespaces():
            failed.append(f"{name}: {out.stderr.strip()}")
    return failed


def _prefix_of(name: str) -> str | None:
    match = _DEFAULT_PREFIX_RE.match(name)
    return match.group(0) if match else None


def clean_stale(prefix: str | None = None) -> list[str]:
    """Remove leftovers of crashed runs; return the namespaces removed.

    Removes every namespace of ``prefix`` (when given), and every namespace of a default
    ``gs<pid>-`` prefix whose owner process is gone and in which no process runs.
    """
    names = list_namespaces()
    doomed = [n for n in names if prefix is not None and n.startswith(prefix)]
    groups: dict[str, list[str]] = {}
    for name in names:
        pre = _prefix_of(name)
        if pre is not None and name not in doomed:
            groups.setdefault(pre, []).append(name)
    for pre, members in groups.items():
        if not _owner_alive(pre) and not any(_ns_pids(m) for m in members):
            doomed.extend(members)
    failed = _delete_namespaces(doomed) if doomed else []
    if failed:
        raise ClusterError("could not remove leftover namespaces: " + "; ".join(failed))
    for pre in {p for p in (_prefix_of(n) for n in doomed) if p} | ({prefix} if prefix else set()):
        if not any(n.startswith(pre) for n in list_namespaces()):
            (OWNER_DIR / f"{pre}.json").unlink(missing_ok=True)
    return doomed


# ----------------------------------------------------------------------------- cluster


@dataclass(frozen=True)
class ClusterLayout:
    """Names and addresses of a cluster (pure data; nothing is created)."""

    ranks: int
    prefix: str

    @property
    def switch(self) -> str:
        return f"{self.prefix}sw"

    def namespace(self, rank: int) -> str:
        return f"{self.prefix}r{rank}"

    def address(self, rank: int) -> str:
        return f"{SUBNET}.{rank + 1}"

    @property
    def namespaces(self) -> list[str]:
        return [self.switch, *(self.namespace(r) for r in range(self.ranks))]


class EmulatedCluster:
    """``ranks`` network namespaces joined through a shaped bridge (a context manager).

    >>> with EmulatedCluster(3, "1gbit") as cluster:            # doctest: +SKIP
    ...     launch("pkg.mod:fn", {}, cluster.launch_spec())

    ``rate=None`` joins the namespaces without shaping (veth speed).
    """

    def __init__(self, ranks: int, rate: str | None = "1gbit", *, prefix: str | None = None,
                 install_signal_handlers: bool = True) -> None:
        if not 1 <= ranks <= MAX_RANKS:
            raise ConfigError(f"ranks must be between 1 and {MAX_RANKS}, got {ranks}")
        self.rate = rate
        self.rate_bps = parse_rate(rate) if rate is not None else None
        prefix = prefix or f"gs{os.getpid()}-"
        if not _PREFIX_RE.match(prefix):
            raise ConfigError(f"namespace prefix {prefix!r}: letters, digits, '_.-' only")
        self.layout = ClusterLayout(ranks, prefix)
        self._install_handlers = install_signal_handlers
        self._old_handlers: dict[int, Any] = {}
        self._up = False
        self._lock = threading.Lock()

    # -- description ---------------------------------------------------------------
    @property
    def ranks(self) -> int:
        return self.layout.ranks

    @property
    def master_addr(self) -> str:
        return self.layout.address(0)

    def describe(self) -> str:
        """One line for metadata: ``emulated cluster 3 namespaces, tbf 1gbit``."""
        shaping = f"tbf {self.rate}" if self.rate is not None else "unshaped veth"
        return f"emulated cluster {self.ranks} namespaces, {shaping}"

    def interconnect(self) -> str:
        """What the links are, for trace metadata."""
        if self.rate_bps is None:
            shaping = "unshaped"
        else:
            burst, latency = tbf_params(self.rate_bps)
            shaping = (f"each rank's link shaped to {rate_label(self.rate_bps)} "
                       f"({self.rate_bps / 8:.4g} bytes/s) in both directions with tc tbf "
                       f"(burst {burst} bytes, latency {latency * 1e3:g} ms)")
        return (f"emulated on one machine: {self.ranks} Linux network namespaces, one per "
                f"rank, each joined by a veth pair (MTU 1500) to a Linux bridge in a "
                f"separate switch namespace; {shaping}")

    def prefix_for(self, rank: int) -> list[str]:
        """The command prefix that runs a command inside rank ``rank``'s namespace."""
        return ["ip", "netns", "exec", self.layout.namespace(rank)]

    def rank_env(self, rank: int) -> dict[str, str]:
        """Environment variables that make gloo/NCCL use the rank's shaped interface."""
        return {"GLOO_SOCKET_IFNAME": RANK_IFNAME, "NCCL_SOCKET_IFNAME": RANK_IFNAME,
                "TP_SOCKET_IFNAME": RANK_IFNAME}

    def launch_spec(self, **kwargs: Any) -> Any:
        """A :class:`~gradsched.distributed.LaunchSpec` whose ranks run in the namespaces.

        The master port is fixed (29500): it is free in rank 0's fresh namespace.
        """
        from gradsched.distributed import LaunchSpec

        kwargs.setdefault("master_port", 29500)
        return LaunchSpec(self.ranks, master_addr=self.master_addr,
                          prefixes=[self.prefix_for(r) for r in range(self.ranks)],
                          rank_env=[self.rank_env(r) for r in range(self.ranks)], **kwargs)

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> EmulatedCluster:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def open(self) -> None:
        """Create the namespaces, links, bridge and qdiscs (cleaning leftovers first)."""
        preflight()
        with self._lock:
            if self._up:
                return
            clean_stale(self.layout.prefix)
            self._up = True  # from here on, close() must run
        atexit.register(self.close)
        self._set_signal_handlers()
        try:
            self._write_owner()
            self._build()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Tear everything down (idempotent; safe to call from any exit path)."""
        with self._lock:
            if not self._up:
                return
            self._up = False
        # A second Ctrl-C / SIGTERM must not interrupt the teardown half-way: hold them
        # until it is done (they are delivered afterwards).
        held = _hold_signals()
        try:
            names = [n for n in list_namespaces() if n.startswith(self.layout.prefix)]
            failed = _delete_namespaces(names)
            (OWNER_DIR / f"{self.layout.prefix}.json").unlink(missing_ok=True)
        finally:
            self._restore_signal_handlers()
            atexit.unregister(self.close)
            _release_signals(held)
        if failed:
            raise ClusterError("teardown left namespaces behind: " + "; ".join(failed))

    # -- internals -------------------------------------------------------------------------
    def _write_owner(self) -> None:
        OWNER_DIR.mkdir(parents=True, exist_ok=True)
        owner = {"pid": os.getpid(), "start_time": _start_time(os.getpid()),
                 "namespaces": self.layout.namespaces}
        tmp = OWNER_DIR / f".{self.layout.prefix}.json.tmp"
        tmp.write_text(json.dumps(owner), encoding="utf-8")
        tmp.replace(OWNER_DIR / f"{self.layout.prefix}.json")

    def _build(self) -> None:
        lay = self.layout
        sw = lay.switch
        _run(["ip", "netns", "add", sw])
        _run(["ip", "-n", sw, "link", "set", "lo", "up"])
        _run(["ip", "-n", sw, "link", "add", BRIDGE, "type", "bridge"])
        _run(["ip", "-n", sw, "link", "set", BRIDGE, "up"])
        for rank in range(lay.ranks):
            ns, port = lay.namespace(rank), f"r{rank}"
            _run(["ip", "netns", "add", ns])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run(["ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name",
                  RANK_IFNAME, "netns", ns])
            _run(["ip", "-n", sw, "link", "set", port, "master", BRIDGE])
            _run(["ip", "-n", sw, "link", "set", port, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{lay.address(rank)}/24", "dev", RANK_IFNAME])
            _run(["ip", "-n", ns, "link", "set", RANK_IFNAME, "up"])
            if self.rate_bps is not None:
                burst, latency = tbf_params(self.rate_bps)
                for where, dev in ((ns, RANK_IFNAME), (sw, port)):
                    _run(["tc", "-n", where, "qdisc", "add", "dev", dev, "root", "tbf",
                          "rate", f"{int(self.rate_bps)}bit", "burst", str(burst),
                          "latency", f"{latency * 1e3:g}ms"])
        self._wait_reachable()

    def _wait_reachable(self, timeout_s: float = 10.0) -> None:
        """Wait until each rank's link is up (bridge ports leave the learning state)."""
        end = time.monotonic() + timeout_s
        sw = self.layout.switch
        while True:
            out = _run(["ip", "-n", sw, "-br", "link", "show", "master", BRIDGE])
            states = [line.split()[1] for line in out.splitlines() if line.strip()]
            if len(states) == self.ranks and all(s in ("UP", "UNKNOWN") for s in states):
                return
            if time.monotonic() > end:
                raise ClusterError(f"bridge ports not up after {timeout_s:g} s: {states}")
            time.sleep(0.05)

    def _set_signal_handlers(self) -> None:
        if not self._install_handlers or threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError, OSError):
                self._old_handlers[sig] = signal.signal(sig, _raise_exit)

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, old in self._old_handlers.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old_handlers.clear()


_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _hold_signals() -> set[int] | None:
    """Block SIGINT/SIGTERM/SIGHUP in this thread; return the previous mask (or None)."""
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, _HELD))


def _release_signals(previous: set[int] | None) -> None:
    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    """Turn SIGTERM/SIGHUP into SystemExit so ``with`` blocks and finally clauses run."""
    raise SystemExit(128 + signum)
