"""An emulated cluster on one machine: one Linux network namespace per rank (or per node).

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

Ownership (issue 17): a cluster only ever removes what it created itself. Before it
creates anything it claims a *record file*, ``<run dir>/clusters/<prefix>.json`` (run dir
``/run/gradsched``, or ``$GRADSCHED_RUN_DIR``), created exclusively (a second cluster of the
same prefix is refused, never cleaned away). The record lists the exact namespace names,
the links inside each, the owner (pid and start time) and the processes started in the
cluster (pid and start time); each namespace's identity (its nsfs inode) is added the
moment it is created. Teardown deletes only namespaces whose inode matches the record
and kills only the recorded processes and what runs inside those namespaces. Names are
never matched by prefix: two clusters with overlapping prefixes (``a-`` and ``a-r1``)
never touch each other (their names are disjoint: ``P sw`` and ``P r<k>`` decompose
uniquely), and a namespace that exists before a cluster starts is refused, not reused.

Teardown (:meth:`EmulatedCluster.close`) runs on every exit path: leaving the ``with``
block normally or by an exception, Ctrl-C, SIGTERM/SIGHUP (turned into ``SystemExit``
while the cluster is up) and interpreter exit (``atexit``); it is idempotent. A run
killed with SIGKILL cannot clean up after itself: its record stays, and
``gradsched cluster clean RECORD`` (or ``... clean NAME...`` with exact names) removes what
that record lists once its owner is gone (:func:`clean_record`, :func:`clean_names`).

Nodes of several ranks (``ranks_per_node=R``, issue 18): the namespaces above are then
one per *node* (``P r<k>`` is node ``k``, address ``SUBNET.(k+1)``), and global ranks
``k*R .. k*R+R-1`` all run in node ``k``'s namespace. Two ranks of one node talk to the
node's own address, which Linux routes over the namespace's loopback: unshaped, like the
fast links inside a real node; traffic between nodes crosses the shaped veth pairs and the
bridge. Each rank gets ``LOCAL_WORLD_SIZE=R`` as torchrun sets it.
With ``R = 1`` (the default) this is exactly the one-namespace-per-rank cluster.

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
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from gradsched.errors import ConfigError, GradschedError

SUBNET = "10.77.0"  # rank k is SUBNET.(k+1)/24; only inside our own namespaces
RANK_IFNAME = "veth0"  # the rank's interface name, the same in every rank namespace
BRIDGE = "br0"
NETNS_DIR = Path("/run/netns")  # where `ip netns add` bind-mounts a namespace (iproute2)
RECORD_VERSION = 1
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


def _ns_inode(name: str) -> int | None:
    """The identity (nsfs inode) of the namespace mounted as ``name``, or None if absent."""
    try:
        return (NETNS_DIR / name).stat().st_ino
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    """The start time (clock ticks since boot) of ``pid``, or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _alive(proc: dict[str, Any]) -> bool:
    """Whether the recorded process ``{"pid", "start_time"}`` is still the same process."""
    pid = int(proc["pid"])
    return _start_time(pid) == proc.get("start_time") and not _is_zombie(pid)


def _signal_all(pids: Iterable[int], groups: Iterable[int], sig: int) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _kill(recorded: Sequence[dict[str, Any]], names: Sequence[str]) -> None:
    """SIGTERM, then after 3 s SIGKILL: the recorded processes that are still the same
    processes (pid and start time; their process groups when they lead one) and whatever
    runs inside ``names`` (namespaces this cluster created: only its ranks and their
    children run there)."""
    me = os.getpid()
    live = [p for p in recorded if int(p["pid"]) != me and _alive(p)]
    groups = {int(p["pid"]) for p in live if _pgid(int(p["pid"])) == int(p["pid"])}
    groups.discard(os.getpgid(0))
    pids = {int(p["pid"]) for p in live} | {pid for n in names for pid in _ns_pids(n)}
    pids.discard(me)
    _signal_all(pids, groups, signal.SIGTERM)
    end = time.monotonic() + 3.0
    while pids and time.monotonic() < end:
        pids = {pid for pid in pids if not _is_zombie(pid)}
        time.sleep(0.05)
    _signal_all(pids, groups, signal.SIGKILL)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


# ----------------------------------------------------------------------------- records


def record_dir() -> Path:
    """Where cluster records live: ``$GRADSCHED_RUN_DIR/clusters`` (default ``/run/gradsched``)."""
    return Path(os.environ.get("GRADSCHED_RUN_DIR", "/run/gradsched")) / "clusters"


def record_path(prefix: str) -> Path:
    """The record file of the cluster with name prefix ``prefix``."""
    return record_dir() / f"{prefix}.json"


def load_record(path: str | Path) -> dict[str, Any]:
    """Read a record file; a missing or malformed one raises :class:`ClusterError` naming it."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ClusterError(f"{path}: no such cluster record") from exc
    except (OSError, ValueError) as exc:
        raise ClusterError(f"{path}: not a readable cluster record ({exc})") from exc
    ok = (isinstance(record, dict) and record.get("version") == RECORD_VERSION
          and isinstance(record.get("namespaces"), dict)
          and isinstance(record.get("owner"), dict) and "pid" in record["owner"])
    if not ok:
        raise ClusterError(f"{path}: not a gradsched cluster record (version "
                           f"{RECORD_VERSION} with 'owner' and 'namespaces')")
    return record


def _write_record(path: Path, record: dict[str, Any]) -> None:
    """Rewrite ``path`` atomically (temp file in the same folder, then rename)."""
    from gradsched.io import write_json_atomic

    write_json_atomic(path, record)


def _claim_record(path: Path, record: dict[str, Any]) -> None:
    """Create ``path`` holding ``record``, atomically and only if it does not exist.

    The complete file is written under a temporary name and hard-linked into place
    (``link`` fails if the name exists), so a reader never sees half a record and two
    clusters can never claim the same prefix.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.claim")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise ClusterError(_taken_message(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def owner_alive(record: dict[str, Any]) -> bool:
    """Whether the process that created the record's cluster still runs."""
    return _alive(record["owner"])


def _taken_message(path: Path) -> str:
    try:
        record = load_record(path)
    except ClusterError as exc:
        return f"the cluster prefix is taken: {exc}; remove that file by hand if it is stale"
    pid = record["owner"]["pid"]
    if owner_alive(record):
        return (f"the cluster prefix is in use by a running cluster (pid {pid}, record "
                f"{path}); choose another prefix")
    return (f"the cluster prefix is taken by leftovers of a run that was killed (pid {pid} "
            f"is gone); remove them with: gradsched cluster clean {path}")


def _owned(record: dict[str, Any], names: Iterable[str] | None = None) -> list[str]:
    """The record's namespaces (or ``names`` among them) that exist and are the ones it
    created: same nsfs inode. A namespace recorded as about to be created (no inode yet:
    the run died between ``ip netns add`` and the record update) counts only when no
    process runs inside it."""
    wanted = record["namespaces"] if names is None else names
    owned = []
    for name in wanted:
        entry = record["namespaces"].get(name)
        inode = _ns_inode(name)
        if entry is None or inode is None:
            continue
        if entry.get("inode") == inode or (entry.get("inode") is None and not _ns_pids(name)):
            owned.append(name)
    return owned


def _remove(processes: Sequence[dict[str, Any]], names: Sequence[str]) -> list[str]:
    """Kill ``processes`` (recorded ones) and what runs in ``names``, delete ``names``;
    return the failures."""
    _kill(processes, names)
    failed = []
    for name in names:
        out = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True,
                             timeout=20, check=False)
        if out.returncode != 0 and _ns_inode(name) is not None:
            failed.append(f"{name}: {out.stderr.strip()}")
    return failed


def find_records() -> list[tuple[Path, dict[str, Any] | None]]:
    """Every record file (sorted), with its content (None when unreadable)."""
    found: list[tuple[Path, dict[str, Any] | None]] = []
    for path in sorted(record_dir().glob("*.json")):
        try:
            found.append((path, load_record(path)))
        except ClusterError:
            found.append((path, None))
    return found


def clean_record(path: str | Path) -> list[str]:
    """Remove what the record ``path`` lists (its owner must be gone); return the
    namespaces removed. Only namespaces whose identity matches the record are deleted and
    only the recorded processes and those inside them are killed; the record goes last."""
    path = Path(path)
    record = load_record(path)
    if owner_alive(record):
        raise ClusterError(f"{path}: its cluster is still running (pid "
                           f"{record['owner']['pid']}); stop that process instead")
    names = _owned(record)
    failed = _remove(record.get("processes", []), names)
    if failed:
        raise ClusterError(f"{path}: could not remove " + "; ".join(failed))
    unverified = [n for n, e in record["namespaces"].items()
                  if e.get("inode") is None and n not in names and _ns_inode(n) is not None]
    if unverified:  # keep the record: these may still be ours
        raise ClusterError(f"{path}: {', '.join(unverified)} exist, but the run died before "
                           "recording their identity and processes run inside them, so "
                           "they were not removed (inspect them with 'ip netns pids NAME')")
    path.unlink(missing_ok=True)
    return names


def clean_names(names: Sequence[str]) -> list[str]:
    """Remove exactly the namespaces ``names``, each of which must be listed in the record
    of a cluster whose owner is gone; return the ones removed (all or an error, before
    anything is touched)."""
    by_record: dict[Path, tuple[dict[str, Any], list[str]]] = {}
    records = [(p, r) for p, r in find_records() if r is not None]
    for name in names:
        hits = [(p, r) for p, r in records if name in r["namespaces"]]
        if not hits:
            raise ClusterError(f"namespace {name!r}: no gradsched cluster record in "
                               f"{record_dir()} lists it, so gradsched did not create it; "
                               "nothing was removed")
        path, record = hits[0]
        if owner_alive(record):
            raise ClusterError(f"namespace {name!r} belongs to a running cluster (pid "
                               f"{record['owner']['pid']}, record {path}); nothing was removed")
        by_record.setdefault(path, (record, []))[1].append(name)
    removed: list[str] = []
    for path, (record, wanted) in by_record.items():
        owned = _owned(record, wanted)
        failed = _remove([], owned)
        if failed:
            raise ClusterError(f"{path}: could not remove " + "; ".join(failed))
        removed.extend(owned)
        for name in wanted:
            record["namespaces"].pop(name, None)
        if record["namespaces"]:
            _write_record(path, record)
        else:
            path.unlink(missing_ok=True)
    return removed


def _note_leftovers() -> None:
    """Say on stderr (once per cluster) which records of killed runs still hold
    namespaces; they are never removed without being asked for."""
    stale = [str(p) for p, r in find_records()
             if r is not None and not owner_alive(r) and _owned(r)]
    if stale:
        print(f"cluster: note: {len(stale)} run(s) killed earlier left namespaces behind; "
              f"remove them with: gradsched cluster clean RECORD ({', '.join(stale)})",
              file=sys.stderr)


# ----------------------------------------------------------------------------- cluster


@dataclass(frozen=True)
class ClusterLayout:
    """Names and addresses of a cluster (pure data; nothing is created). Namespaces
    ``P r<k>`` are nodes; with ``ranks_per_node`` 1 each holds one rank."""

    ranks: int
    prefix: str
    ranks_per_node: int = 1

    @property
    def nodes(self) -> int:
        return self.ranks // self.ranks_per_node

    def node_of(self, rank: int) -> int:
        return rank // self.ranks_per_node

    @property
    def switch(self) -> str:
        return f"{self.prefix}sw"

    def namespace(self, node: int) -> str:
        """Namespace of node ``node`` (of rank ``node`` when ranks_per_node is 1)."""
        return f"{self.prefix}r{node}"

    def address(self, node: int) -> str:
        return f"{SUBNET}.{node + 1}"

    @property
    def namespaces(self) -> list[str]:
        return [self.switch, *(self.namespace(k) for k in range(self.nodes))]

    def links(self, name: str) -> list[str]:
        """The links this cluster creates inside namespace ``name`` (besides ``lo``)."""
        if name == self.switch:
            return [BRIDGE, *(f"r{k}" for k in range(self.nodes))]
        return [RANK_IFNAME]


class EmulatedCluster:
    """``ranks`` network namespaces joined through a shaped bridge (a context manager).

    >>> with EmulatedCluster(3, "1gbit") as cluster:            # doctest: +SKIP
    ...     launch("pkg.mod:fn", {}, cluster.launch_spec())

    ``rate=None`` joins the namespaces without shaping (veth speed).
    """

    def __init__(self, ranks: int, rate: str | None = "1gbit", *, prefix: str | None = None,
                 install_signal_handlers: bool = True, ranks_per_node: int = 1) -> None:
        if not 1 <= ranks <= MAX_RANKS:
            raise ConfigError(f"ranks must be between 1 and {MAX_RANKS}, got {ranks}")
        if ranks_per_node < 1 or ranks % ranks_per_node:
            raise ConfigError(f"{ranks} ranks do not split into nodes of {ranks_per_node} "
                              "ranks (ranks per node must be >= 1 and divide the ranks)")
        self.rate = rate
        self.rate_bps = parse_rate(rate) if rate is not None else None
        prefix = prefix or f"gs{os.getpid()}-"
        if not _PREFIX_RE.match(prefix):
            raise ConfigError(f"namespace prefix {prefix!r}: letters, digits, '_.-' only")
        self.layout = ClusterLayout(ranks, prefix, ranks_per_node)
        self.record_path = record_path(prefix)
        self._record: dict[str, Any] = {}
        self._install_handlers = install_signal_handlers
        self._old_handlers: dict[int, Any] = {}
        self._up = False
        self._lock = threading.RLock()

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
        if self.layout.ranks_per_node > 1:
            return (f"emulated cluster {self.layout.nodes} node namespaces x "
                    f"{self.layout.ranks_per_node} ranks, {shaping} between nodes")
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
        lay = self.layout
        if lay.ranks_per_node > 1:
            return (f"emulated on one machine: {lay.nodes} nodes of {lay.ranks_per_node} "
                    f"ranks, one Linux network namespace per node (ranks of a node talk "
                    f"over its loopback, unshaped), each node joined by a veth pair (MTU "
                    f"1500) to a Linux bridge in a separate switch namespace; "
                    f"{shaping.replace('rank', 'node')}")
        return (f"emulated on one machine: {self.ranks} Linux network namespaces, one per "
                f"rank, each joined by a veth pair (MTU 1500) to a Linux bridge in a "
                f"separate switch namespace; {shaping}")

    def prefix_for(self, rank: int) -> list[str]:
        """The command prefix that runs a command inside rank ``rank``'s (node's)
        namespace."""
        return ["ip", "netns", "exec", self.layout.namespace(self.layout.node_of(rank))]

    def rank_env(self, rank: int) -> dict[str, str]:
        """Environment variables that make gloo/NCCL use the rank's shaped interface;
        with nodes of several ranks also torchrun's ``LOCAL_WORLD_SIZE`` (not
        ``LOCAL_RANK``: the worker maps it to a GPU, and every emulated node shares this
        machine's GPUs)."""
        env = {"GLOO_SOCKET_IFNAME": RANK_IFNAME, "NCCL_SOCKET_IFNAME": RANK_IFNAME,
               "TP_SOCKET_IFNAME": RANK_IFNAME}
        if self.layout.ranks_per_node > 1:
            env["LOCAL_WORLD_SIZE"] = str(self.layout.ranks_per_node)
        return env

    def launch_spec(self, **kwargs: Any) -> Any:
        """A :class:`~gradsched.distributed.LaunchSpec` whose ranks run in the namespaces
        (and are recorded as this cluster's processes when they start).

        The master port is fixed (29500): it is free in rank 0's fresh namespace.
        """
        from gradsched.distributed import LaunchSpec

        kwargs.setdefault("master_port", 29500)
        kwargs.setdefault("on_spawn", self.record_process)
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
        """Claim the record, then create the namespaces, links, bridge and qdiscs.

        Refuses (:class:`ClusterError`, nothing touched) when the prefix's record exists
        (another cluster, running or killed) or when one of its names exists already.
        """
        preflight()
        with self._lock:
            if self._up:
                return
            self._record = self._new_record()
            _claim_record(self.record_path, self._record)
            self._up = True  # from here on, close() must run
        atexit.register(self.close)
        self._set_signal_handlers()
        _note_leftovers()
        try:
            self._refuse_existing()
            self._build()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Tear down what this cluster created (idempotent; safe from any exit path)."""
        with self._lock:
            if not self._up:
                return
            self._up = False
        # A second Ctrl-C / SIGTERM must not interrupt the teardown half-way: hold them
        # until it is done (they are delivered afterwards).
        held = _hold_signals()
        try:
            failed = _remove(self._record.get("processes", []), _owned(self._record))
            if not failed:
                self.record_path.unlink(missing_ok=True)
        finally:
            self._restore_signal_handlers()
            atexit.unregister(self.close)
            _release_signals(held)
        if failed:
            raise ClusterError("teardown left namespaces behind: " + "; ".join(failed)
                               + f"; retry with: gradsched cluster clean {self.record_path}")

    def record_process(self, pid: int) -> None:
        """Record ``pid`` (started by us inside the cluster) so teardown, or ``cluster
        clean`` after a SIGKILL, stops it and nothing else."""
        with self._lock:
            if not self._up:
                return
            self._record.setdefault("processes", []).append(
                {"pid": pid, "start_time": _start_time(pid)})
            _write_record(self.record_path, self._record)

    # -- internals -------------------------------------------------------------------------
    def _new_record(self) -> dict[str, Any]:
        me = os.getpid()
        return {"version": RECORD_VERSION, "prefix": self.layout.prefix,
                "owner": {"pid": me, "start_time": _start_time(me), "argv": sys.argv[:8]},
                "namespaces": {name: {"inode": None, "links": self.layout.links(name)}
                               for name in self.layout.namespaces},
                "processes": []}

    def _refuse_existing(self) -> None:
        existing = sorted(set(self.layout.namespaces) & set(list_namespaces()))
        if existing:
            # Not ours: forget them before close() runs, so they are never touched.
            for name in existing:
                self._record["namespaces"].pop(name)
            raise ClusterError(f"namespace(s) {', '.join(existing)} exist already and were "
                               "not created by this cluster; choose another prefix (remove "
                               "leftovers of a killed run with 'gradsched cluster clean "
                               "RECORD')")

    def _add_namespace(self, name: str) -> None:
        """``ip netns add`` ``name`` and record its identity right away."""
        _run(["ip", "netns", "add", name])
        with self._lock:
            self._record["namespaces"][name]["inode"] = _ns_inode(name)
            _write_record(self.record_path, self._record)

    def _build(self) -> None:
        lay = self.layout
        sw = lay.switch
        self._add_namespace(sw)
        _run(["ip", "-n", sw, "link", "set", "lo", "up"])
        _run(["ip", "-n", sw, "link", "add", BRIDGE, "type", "bridge"])
        _run(["ip", "-n", sw, "link", "set", BRIDGE, "up"])
        for node in range(lay.nodes):
            ns, port = lay.namespace(node), f"r{node}"
            self._add_namespace(ns)
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run(["ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name",
                  RANK_IFNAME, "netns", ns])
            _run(["ip", "-n", sw, "link", "set", port, "master", BRIDGE])
            _run(["ip", "-n", sw, "link", "set", port, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{lay.address(node)}/24", "dev", RANK_IFNAME])
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
            if len(states) == self.layout.nodes and all(s in ("UP", "UNKNOWN") for s in states):
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
