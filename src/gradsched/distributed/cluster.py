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

Ownership: a cluster only ever removes what it created itself. Before it creates anything
it claims a record file (:mod:`gradsched.distributed.cluster_record`, created exclusively:
a second cluster of the same prefix is refused, never cleaned away) listing the exact
namespace names, their links, the owner and the processes started in the cluster; each
namespace's identity (its nsfs inode) is added the moment it is created. Teardown deletes
only namespaces whose inode matches the record and kills only the recorded processes and
what runs inside those namespaces. Names are never matched by prefix: two clusters with
overlapping prefixes (``a-`` and ``a-r1``) never touch each other (their names are
disjoint: ``P sw`` and ``P r<k>`` decompose uniquely), and a namespace that exists before a
cluster starts is refused, not reused.

Teardown (:meth:`EmulatedCluster.close`) runs on every exit path: leaving the ``with``
block normally or by an exception, Ctrl-C, SIGTERM/SIGHUP (turned into ``SystemExit``
while the cluster is up) and interpreter exit (``atexit``); it is idempotent. A run
killed with SIGKILL cannot clean up after itself: its record stays, and
``gradsched cluster clean RECORD`` (or ``... clean NAME...`` with exact names) removes what
that record lists once its owner is gone (:func:`.cluster_record.clean_record`,
:func:`.cluster_record.clean_names`).

Nodes of several ranks (``ranks_per_node=R``; hierarchical and parameter-server
experiments need them): the namespaces above are then
one per *node* (``P r<k>`` is node ``k``, address ``SUBNET.(k+1)``), and global ranks
``k*R .. k*R+R-1`` all run in node ``k``'s namespace. Two ranks of one node talk to the
node's own address, which Linux routes over the namespace's loopback: unshaped, like the
fast links inside a real node; traffic between nodes crosses the shaped veth pairs and the
bridge. Each rank gets ``LOCAL_WORLD_SIZE=R`` as torchrun sets it.
With ``R = 1`` (the default) this is exactly the one-namespace-per-rank cluster.

Needs root (``CAP_SYS_ADMIN`` and ``CAP_NET_ADMIN``) and the ``ip`` and ``tc`` tools of
iproute2.

Modules: :mod:`.shaping` (tc rates, tbf parameters), :mod:`.netns` (``ip netns`` and
:class:`ClusterError`), :mod:`.processes` (recorded processes), :mod:`.cluster_record`
(records and ``cluster clean``); this one lays the cluster out, builds and tears it down
and launches ranks in it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from gradsched.distributed.cluster_record import (
    RECORD_VERSION,
    claim_record,
    note_leftovers,
    owned_namespaces,
    record_path,
    remove_namespaces,
    write_record,
)
from gradsched.distributed.launch import LaunchSpec
from gradsched.distributed.lifeline import raise_exit
from gradsched.distributed.netns import (
    ClusterError,
    list_namespaces,
    namespace_inode,
    preflight,
    run_ip,
)
from gradsched.distributed.processes import process_start_time
from gradsched.distributed.shaping import parse_rate, rate_label, tbf_params
from gradsched.errors import ConfigError
from gradsched.signal_hold import signals_held

SUBNET = "10.77.0"  # rank k is SUBNET.(k+1)/24; only inside our own namespaces
RANK_IFNAME = "veth0"  # the rank's interface name, the same in every rank namespace
BRIDGE = "br0"
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
MAX_RANKS = 250


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
            claim_record(self.record_path, self._record)
            self._up = True  # from here on, close() must run
        atexit.register(self.close)
        self._set_signal_handlers()
        note_leftovers()
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
        # until it is done (they take effect afterwards, through our handlers).
        try:
            with signals_held():
                atexit.unregister(self.close)
                failed = remove_namespaces(self._record.get("processes", []),
                                           owned_namespaces(self._record))
                if not failed:
                    self.record_path.unlink(missing_ok=True)
        finally:
            self._restore_signal_handlers()
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
                {"pid": pid, "start_time": process_start_time(pid)})
            write_record(self.record_path, self._record)

    # -- internals -------------------------------------------------------------------------
    def _new_record(self) -> dict[str, Any]:
        me = os.getpid()
        return {"version": RECORD_VERSION, "prefix": self.layout.prefix,
                "owner": {"pid": me, "start_time": process_start_time(me), "argv": sys.argv[:8]},
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
        """``ip netns add`` ``name`` and record its identity, with termination signals
        held: a SIGTERM that arrives meanwhile takes effect once the record names the
        namespace, so teardown finds it (an exception raised while ``subprocess`` waits
        for ``ip`` to start would leave ``ip`` running on its own, creating the
        namespace after teardown had looked for it)."""
        with signals_held():
            run_ip(["ip", "netns", "add", name])
            with self._lock:
                self._record["namespaces"][name]["inode"] = namespace_inode(name)
                write_record(self.record_path, self._record)

    @staticmethod
    def _change(cmd: list[str]) -> None:
        """Run one ``ip``/``tc`` command that changes the cluster, with termination signals
        held (see :meth:`_add_namespace`): it either finishes before teardown or never
        starts."""
        with signals_held():
            run_ip(cmd)

    def _build(self) -> None:
        lay = self.layout
        sw = lay.switch
        self._add_namespace(sw)
        self._change(["ip", "-n", sw, "link", "set", "lo", "up"])
        self._change(["ip", "-n", sw, "link", "add", BRIDGE, "type", "bridge"])
        self._change(["ip", "-n", sw, "link", "set", BRIDGE, "up"])
        for node in range(lay.nodes):
            ns, port = lay.namespace(node), f"r{node}"
            self._add_namespace(ns)
            self._change(["ip", "-n", ns, "link", "set", "lo", "up"])
            self._change(["ip", "-n", sw, "link", "add", port, "type", "veth", "peer",
                          "name", RANK_IFNAME, "netns", ns])
            self._change(["ip", "-n", sw, "link", "set", port, "master", BRIDGE])
            self._change(["ip", "-n", sw, "link", "set", port, "up"])
            self._change(["ip", "-n", ns, "addr", "add", f"{lay.address(node)}/24", "dev",
                          RANK_IFNAME])
            self._change(["ip", "-n", ns, "link", "set", RANK_IFNAME, "up"])
            if self.rate_bps is not None:
                burst, latency = tbf_params(self.rate_bps)
                for where, dev in ((ns, RANK_IFNAME), (sw, port)):
                    self._change(["tc", "-n", where, "qdisc", "add", "dev", dev, "root",
                                  "tbf", "rate", f"{int(self.rate_bps)}bit", "burst",
                                  str(burst), "latency", f"{latency * 1e3:g}ms"])
        self._wait_reachable()

    def _wait_reachable(self, timeout_s: float = 10.0) -> None:
        """Wait until each rank's link is up (bridge ports leave the learning state)."""
        end = time.monotonic() + timeout_s
        sw = self.layout.switch
        while True:
            out = run_ip(["ip", "-n", sw, "-br", "link", "show", "master", BRIDGE])
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
                self._old_handlers[sig] = signal.signal(sig, raise_exit)

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, old in self._old_handlers.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old_handlers.clear()


__all__ = ["BRIDGE", "MAX_RANKS", "RANK_IFNAME", "SUBNET", "ClusterError", "ClusterLayout",
           "EmulatedCluster"]
