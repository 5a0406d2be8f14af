"""The BytePS-style parameter-server (PS) architecture as a cost model.

``P`` workers, ``S`` servers. A server is either *co-located* (``S <= P``; server ``s``
runs on worker ``s``'s machine and shares its network link) or a separate machine with its
own link. Every link is full duplex: its two directions carry traffic independently.

Partitioning (BytePS, bytedance/byteps commit f5df52f, ``byteps/common/operations.cc``
L141-175 ``PartitionTensor``): a tensor of ``M`` bytes is cut into ``k = ceil(M / B)``
partitions of ``B = partition_bytes`` bytes (``BYTEPS_PARTITION_BYTES``, default
4,096,000, ``byteps/common/global.cc`` L42, L134-135), the last one holding the remainder
``r = M - (k-1) B``. Each partition is a key that lives on one server
(``EncodeDefaultKey``, ``global.cc`` L629-660: a hash of the key modulo ``S``, djb2 by
default, L160). *Reconstruction*, two placements (``placement``): ``round-robin`` (default)
sends partition ``j`` of a bucket to server ``j mod S``, which spreads a tensor's partitions
as evenly as a hash does on average, and a bucket of one partition lands on one server, as
one key does in BytePS; ``balanced`` gives every server ``M / S`` bytes of every bucket
(partitioned the same way), the aggregate of the hash over many keys, for a replay that runs
one bucket at a time and so cannot let small keys on different servers proceed together.

Bytes each link moves for one bucket of ``M`` bytes, with ``M_s`` the bytes of the
partitions on server ``s`` (``sum_s M_s = M``; ``M_s = M / S`` when the partitions divide
evenly):

* push: every worker sends its ``M`` bytes (partition ``j`` to its server); server ``s``
  receives ``P * M_s`` bytes (one copy of its partitions from each worker) and sums them;
* pull: server ``s`` sends ``P * M_s`` bytes, every worker receives ``M`` bytes.
* Separate servers: a worker link carries ``M`` bytes in ``k`` messages (out on push, in on
  pull), server ``s``'s link ``P * M_s`` bytes in ``P * k_s`` messages (in on push, out on
  pull).
* Co-located: a worker's traffic to its own machine's server does not cross the link, so
  machine ``s < S`` carries ``M - M_s`` bytes one way (its worker to the other servers)
  and ``(P - 1) M_s`` bytes the other way (the other workers to its server); a machine
  ``w >= S`` carries ``M`` bytes one way.

Time (one-way point-to-point messages from ``p2p``, the model queried with collective
``"p2p"`` at 2 ranks: :func:`p2p_raw_times`, floored at the link's sustained rate and
capped at its line rate where known: :class:`P2PLink`): a link direction that carries ``n``
messages of sizes ``m_1..m_n`` is busy for ``s + sum_i (T_p2p(m_i) - s)`` seconds, ``s``
the p2p start-up (messages in flight overlap their start-ups and share the bandwidth; for alpha-beta
``T = a + b m`` that is ``a + b * bytes``). A phase lasts as long as its busiest link
direction:

    push(M) = max over links and directions of the time above,  pull(M) = push(M)

(pull moves the same bytes in the opposite directions). A bucket's push and pull run
partition by partition (BytePS pushes and pulls each partition as its own key, so partition
j's pull overlaps partition j+1's push on full-duplex links). Its time is the larger of two
lower bounds of that pipeline:

    push_pull(M) = max( busiest direction carrying push *and* pull traffic,
                        push(M) + pull(the last partitions alone) )

Separate servers use different directions for push and pull, so the first term is
``push(M)`` and ``push_pull(M) = push(M) + pull(r)``; a co-located machine's direction
carries ``M - M_s`` (push) plus ``(P - 1) M_s`` (pull) bytes. One partition (``k = 1``):
``push(M) + pull(M)``. The collectives:

    all_reduce(M) = push_pull(M),  reduce_scatter(M) = reduce(M) = push(M),
    all_gather(M) = broadcast(M) = pull(M) = push(M),

so every planner prices a PS bucket unchanged (an ``all_reduce`` bucket is a pipelined push
and pull; an ``rs_ag`` bucket is a push in backward and a pull before the next forward, as
DeAR splits an all-reduce). Balanced partitions, alpha-beta p2p (``a + b m``) and many
partitions: ``push(M) = a + f_push b M`` and ``push_pull(M) ~ a + f_ar b M`` with

* separate servers: ``f_push = f_ar = max(1, P / S)``;
* co-located: ``f_push = max((P - 1) / S, 1 - 1 / S, [P > S])`` and
  ``f_ar = max(1 + (P - 2) / S, [P > S])``; with ``S = P`` this is ``2 (P - 1) / P``, a ring
  all-reduce's bytes per link.

Known differences (a reconstruction, not measured BytePS internals): the pipeline is
reduced to the two bounds above; the server's summation and any CPU copy cost nothing;
round-robin or balanced placement instead of the key hash; ``partition_bytes`` is used as
given (BytePS rounds it up to a multiple of local size x page size, ``global.cc`` L142); the
replay makes concurrent collectives share
one bandwidth, so the pushes and pulls of *different* buckets are not overlapped on the two
directions of a link there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from gradsched.costmodel.base import (
    CommModel,
    check_collective,
    load_comm_spec,
    model_from_dict,
    register_model,
)
from gradsched.costmodel.domain import CollectiveBasis
from gradsched.costmodel.wire import LARGE_REGION, sustained_algbw
from gradsched.errors import ConfigError, GradschedError, InputError
from gradsched.io import read_json, read_yaml
from gradsched.limits import MAX_BYTES, MAX_RANKS

DEFAULT_PARTITION_BYTES = 4_096_000
"""BytePS's default partition size (``byteps/common/global.cc`` L42)."""

P2P_COLLECTIVE = "p2p"
P2P_RANKS = 2
FIELDS = ("workers", "servers", "colocated", "partition_bytes", "placement", "p2p")
PLACEMENTS = ("round-robin", "balanced")


# ------------------------------------------------------------------ point-to-point level

def p2p_raw_times(model: CommModel, nbytes: np.ndarray) -> np.ndarray:
    """One-way time (s) of one message of ``nbytes`` between two ranks: the model's own
    (unfloored) answer for collective ``"p2p"`` at 2 ranks (an inline ``alpha-beta:`` model
    answers ``alpha + beta * m``; a p2p comm-trace its sweep). :class:`P2PLink` floors it."""
    return model.raw_times(P2P_COLLECTIVE, np.asarray(nbytes, dtype=float), P2P_RANKS)


@dataclass(frozen=True)
class P2PLink:
    """The point-to-point cost of one link: start-up ``startup_s`` (s), sustained rate
    ``rate_Bps`` (bytes/s) and ``times`` floored at ``startup + m / rate`` (the wire floor
    of :mod:`gradsched.costmodel.wire` applied to messages)."""

    model: CommModel
    startup_s: float
    rate_Bps: float

    @classmethod
    def of(cls, model: CommModel) -> P2PLink:
        """Read the start-up (smallest time at any size) and the sustained rate of the
        large messages (:func:`gradsched.costmodel.wire.sustained_algbw`, share 1), capped
        at the link's line rate where the sweep records it (a ``tc tbf`` burst let a 1 MiB
        message of the 1 Gbit/s p2p sweep through at 141 MB/s; the line is 125 MB/s)."""
        ref = model.reference_bytes(P2P_RANKS)
        grid = np.concatenate([[0.0], np.geomspace(1.0, ref, 64)])
        startup = max(float(np.min(p2p_raw_times(model, grid))), 0.0)
        large = np.geomspace(ref / LARGE_REGION, ref, 33)
        rate = sustained_algbw(large, p2p_raw_times(model, large), startup, 1.0)
        line = model.line_rate_Bps()
        if line is not None:  # one message crosses one link: never above its line rate
            rate = min(rate, float(line))
        return cls(model, startup, rate)

    def times(self, nbytes: np.ndarray) -> np.ndarray:
        """Floored one-way message times (s)."""
        m = np.asarray(nbytes, dtype=float)
        raw = p2p_raw_times(self.model, m)
        if not np.isfinite(self.rate_Bps):
            return raw
        return np.maximum(raw, self.startup_s + m / self.rate_Bps)


# ------------------------------------------------------------------------ the cluster

_MAX_MEMO_SIZES = 1_000_000
"""The most sizes :meth:`PSModel.raw_times` keeps priced per phase."""


@dataclass(frozen=True)
class ParameterServer:
    """``workers`` x ``servers`` (co-located or separate), ``partition_bytes`` and the
    point-to-point model of one link."""

    workers: int
    servers: int
    colocated: bool
    p2p: CommModel
    partition_bytes: int = DEFAULT_PARTITION_BYTES
    placement: str = "round-robin"

    def __post_init__(self) -> None:
        for name in ("workers", "servers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) \
                    or not 1 <= int(value) <= MAX_RANKS:
                raise ConfigError(f"parameter server: {name} must be an integer in [1, "
                                  f"{MAX_RANKS}], got {value!r}")
        if not isinstance(self.colocated, bool):
            raise ConfigError(f"parameter server: colocated must be true or false, got "
                              f"{self.colocated!r}")
        if self.colocated and self.servers > self.workers:
            raise ConfigError(f"parameter server: {self.servers} co-located servers need at "
                              f"least as many workers, got {self.workers}")
        value = self.partition_bytes
        if isinstance(value, bool) or not isinstance(value, int | np.integer) \
                or not 1 <= int(value) <= MAX_BYTES:
            raise ConfigError(f"parameter server: partition_bytes must be an integer in "
                              f"[1, {MAX_BYTES}], got {value!r}")
        if not isinstance(self.p2p, CommModel):
            raise ConfigError("parameter server: p2p is not a comm model")
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"parameter server: placement must be one of "
                              f"{', '.join(PLACEMENTS)}, got {self.placement!r}")

    def to_dict(self) -> dict[str, Any]:
        """The description format (``p2p`` as a model JSON object)."""
        return {"workers": int(self.workers), "servers": int(self.servers),
                "colocated": self.colocated, "partition_bytes": int(self.partition_bytes),
                "placement": self.placement, "p2p": self.p2p.to_dict()}

    def partitions(self, nbytes: float) -> tuple[int, float]:
        """``(k, r)``: the number of partitions of a bucket and the last one's bytes
        (``operations.cc`` L150-175: full partitions of ``partition_bytes``, then the rest)."""
        bound = float(self.partition_bytes)
        k = max(1, math.ceil(float(nbytes) / bound))
        return k, float(nbytes) - (k - 1) * bound

    def server_partitions(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Per server: full partitions it holds and whether it holds the last one
        (round-robin, partition j on server j mod S)."""
        s = np.arange(self.servers)
        full = np.maximum(0, (k - 1 - s + self.servers - 1) // self.servers)
        return full, (s == (k - 1) % self.servers).astype(np.int64)

    def place(self, nbytes: float) -> Placement:
        """Where a bucket's partitions go. ``round-robin``: the bucket is partitioned as
        one tensor and partition j goes to server j mod S (a bucket smaller than a
        partition lands on one server). ``balanced``: each server holds ``M / S`` bytes,
        partitioned the same way (the aggregate of BytePS's key hash over many keys; keeps
        a small bucket from loading one server)."""
        bound = float(self.partition_bytes)
        if self.placement == "round-robin":
            k, r = self.partitions(nbytes)
            full, last = self.server_partitions(k)
            return Placement(bound, r, k - 1, 1, full, last)
        n, r = self.partitions(float(nbytes) / self.servers)
        ones = np.ones(self.servers, dtype=np.int64)
        return Placement(bound, r, self.servers * (n - 1), self.servers, (n - 1) * ones, ones)


@dataclass(frozen=True)
class Placement:
    """A bucket's partitions: ``bound``-byte ones and last ones of ``r`` bytes; in all
    (``total_full``, ``total_last``: what each worker sends) and per server."""

    bound: float
    r: float
    total_full: int
    total_last: int
    full_s: np.ndarray
    last_s: np.ndarray

    def tail(self) -> Placement:
        """The last partitions alone (the pipeline's final pull)."""
        return Placement(self.bound, self.r, 0, self.total_last, 0 * self.full_s, self.last_s)


@dataclass(frozen=True)
class LinkLoad:
    """Messages one link direction carries in one phase: ``full`` partitions of
    ``partition_bytes`` and ``last`` partitions of the remainder."""

    full: int
    last: int

    def nbytes(self, bound: float, remainder: float) -> float:
        return self.full * bound + self.last * remainder


def push_loads(ps: ParameterServer, pl: Placement) -> list[LinkLoad]:
    """The loads of every link direction that carries push traffic (module docstring);
    a pull carries the same loads in the opposite directions."""
    p = int(ps.workers)
    sends = LinkLoad(pl.total_full, pl.total_last)  # a worker's partitions, out
    pairs = list(zip(pl.full_s.tolist(), pl.last_s.tolist(), strict=True))
    if not ps.colocated:
        return [sends] + [LinkLoad(p * f, p * x) for f, x in pairs]
    loads: list[LinkLoad] = []
    for f, x in pairs:
        loads.append(LinkLoad(pl.total_full - f, pl.total_last - x))  # to the other servers
        loads.append(LinkLoad((p - 1) * f, (p - 1) * x))  # the other workers to server s
    if p > ps.servers:
        loads.append(sends)  # a machine without a server
    return loads


def duplex_loads(ps: ParameterServer, pl: Placement) -> list[LinkLoad]:
    """Each link direction's push *and* pull traffic together. Separate machines use
    different directions for the two (worker out / server in on push, server out / worker
    in on pull), so these are the push loads; a co-located machine sends its worker's push
    and its server's pull the same way (``M - M_s + (P - 1) M_s`` bytes each direction)."""
    if not ps.colocated:
        return push_loads(ps, pl)
    p = int(ps.workers)
    pairs = zip(pl.full_s.tolist(), pl.last_s.tolist(), strict=True)
    loads = [LinkLoad(pl.total_full + (p - 2) * f, pl.total_last + (p - 2) * x)
             for f, x in pairs]
    if p > ps.servers:
        loads.append(LinkLoad(pl.total_full, pl.total_last))
    return loads


@dataclass(frozen=True)
class PhaseBytes:
    """Bytes of one push of a bucket: logical (each worker's and each server's) and per
    network link direction (what crosses a NIC; co-located local traffic does not)."""

    worker_send: np.ndarray  # per worker: the bytes it pushes (M)
    server_receive: np.ndarray  # per server: P x its partitions' bytes
    link_bytes: np.ndarray  # per loaded link direction (push_loads order)


def push_bytes(ps: ParameterServer, nbytes: float) -> PhaseBytes:
    """The bytes a push of ``nbytes`` moves (a pull moves the same, reversed)."""
    pl = ps.place(nbytes)
    return PhaseBytes(
        worker_send=np.full(int(ps.workers), pl.total_full * pl.bound + pl.total_last * pl.r),
        server_receive=ps.workers * (pl.full_s * pl.bound + pl.last_s * pl.r),
        link_bytes=np.array([load.nbytes(pl.bound, pl.r) for load in push_loads(ps, pl)]),
    )


# ---------------------------------------------------------------------- the cost model

@register_model
class PSModel(CommModel):
    """The parameter-server cost of a bucket (module docstring); answers at ``P`` only."""

    kind: ClassVar[str] = "parameter-server"
    # composite of floored p2p message times (P2PLink); the generic floor (start-up of two
    # phases + f m / b) would clip the pipelined push + pull above its own formula
    wire_floor_applies: ClassVar[bool] = False

    def __init__(self, ps: ParameterServer) -> None:
        if not isinstance(ps, ParameterServer):
            raise ConfigError(f"{self.kind}: expected a ParameterServer, got "
                              f"{type(ps).__name__}")
        self.ps = ps
        self.link = P2PLink.of(ps.p2p)

    def world_sizes(self) -> tuple[int, ...]:
        return (int(self.ps.workers),)

    def _check_world(self, world_size: int) -> None:
        if int(world_size) != self.ps.workers:
            raise ConfigError(f"{self.kind} model: world size {world_size} requested, but the "
                              f"parameter server has {self.ps.workers} workers")

    def _busy_s(self, loads: list[LinkLoad], pl: Placement) -> float:
        """The busiest of ``loads``: ``s + sum (T_p2p(m_i) - s)`` over its messages."""
        t_full, t_last = self.link.times(np.array([pl.bound, pl.r]))
        s = self.link.startup_s
        return max((s + load.full * (t_full - s) + load.last * (t_last - s)
                    for load in loads if load.full + load.last > 0), default=0.0)

    def push_s(self, nbytes: float) -> float:
        """Seconds of one push (or pull) of ``nbytes``: its busiest link direction."""
        pl = self.ps.place(nbytes)
        return self._busy_s(push_loads(self.ps, pl), pl)

    def push_pull_s(self, nbytes: float) -> float:
        """Seconds of a push and its pull, partitions pipelined (module docstring)."""
        pl = self.ps.place(nbytes)
        return max(self._busy_s(duplex_loads(self.ps, pl), pl),
                   self._busy_s(push_loads(self.ps, pl), pl)
                   + self._busy_s(push_loads(self.ps, pl.tail()), pl))

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        check_collective(collective)
        self._check_world(world_size)
        m = np.asarray(nbytes, dtype=float)
        both = collective == "all_reduce"
        phase = self.push_pull_s if both else self.push_s
        # A size is priced on its own, in Python (placement, loads, the link): kept once
        # priced, as ByteScheduler-PS's search replans the same partitions at every credit.
        memo = self.__dict__.setdefault("_phase_memo", {}).setdefault(both, {})
        if len(memo) > _MAX_MEMO_SIZES:
            memo.clear()
        out = []
        for x in m.ravel().tolist():
            t = memo.get(x)
            if t is None:
                t = memo[x] = phase(x)
            out.append(t)
        return np.array(out, dtype=float).reshape(m.shape)

    def world_size_basis(self, world_size: int) -> str:
        """The p2p link's basis at the 2 ranks each message is priced at (the cluster of
        ``P`` workers is the exact accounting of its messages, not a fit)."""
        self._check_world(world_size)
        return self.ps.p2p.world_size_basis(P2P_RANKS)

    def collective_basis(self, collective: str, world_size: int
                         ) -> tuple[CollectiveBasis, ...]:
        """Every phase is p2p messages: the link model's record for ``p2p``."""
        self._check_world(world_size)
        return tuple(b.within("p2p link")
                     for b in self.ps.p2p.collective_basis(P2P_COLLECTIVE, P2P_RANKS))

    def bottleneck_factors(self) -> tuple[float, float]:
        """``(f_push, f_all_reduce)``: bytes of the busiest link direction per byte of a
        balanced push, and of a push + pull (module docstring)."""
        p, s = int(self.ps.workers), int(self.ps.servers)
        if not self.ps.colocated:
            f = max(1.0, p / s)
            return f, f
        spare = 1.0 if p > s else 0.0
        return (max((p - 1) / s, 1.0 - 1.0 / s, spare),
                max(1.0 + (p - 2) / s, spare))

    def sustained_algbw_Bps(self, world_size: int) -> float:
        """The all-reduce rate ``b / f_all_reduce`` of balanced partitions (``b`` the p2p
        link's sustained rate). No push + pull of ``M`` bytes moves them faster (its busiest
        direction carries at least ``f_all_reduce M`` bytes), and no push faster than half
        of that (``f_all_reduce <= 2 f_push``), so the replay's lower bound stays valid;
        the rate only grows with a faster link."""
        self._check_world(world_size)
        f = self.bottleneck_factors()[1]
        if f == 0.0 or not np.isfinite(self.link.rate_Bps):
            return float("inf")
        return self.link.rate_Bps / f

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.ps.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CommModel:
        body = {k: v for k, v in data.items() if k != "kind"}
        return cls(ps_from_dict(body))

    def describe(self) -> str:
        ps = self.ps
        where = "co-located" if ps.colocated else "separate"
        return (f"parameter server: {ps.workers} workers, {ps.servers} {where} servers, "
                f"partitions of {ps.partition_bytes} bytes placed {ps.placement}; p2p: "
                f"{ps.p2p.describe()}")


# -------------------------------------------------------------------------- loading

def _int_field(data: dict[str, Any], field: str, source: Path, default: Any) -> int:
    value = data.get(field, default)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"must be an integer, got {value!r}", path=source,
                             field=field) from None
        value = int(number) if math.isfinite(number) and number.is_integer() else value
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer, got {value!r}", path=source, field=field)
    return value


def _bool_field(data: dict[str, Any], field: str, source: Path) -> bool:
    value = data.get(field, False)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes"):
        return True
    if text in ("0", "false", "no"):
        return False
    raise InputError(f"must be true/false (1/0), got {value!r}", path=source, field=field)


def _load_p2p(spec: Any, source: Path) -> CommModel:
    """The ``p2p`` field: a ``--comm`` spec string (a relative path is relative to the
    description file's folder) or a model JSON object."""
    if isinstance(spec, dict):
        return model_from_dict(spec, source=f"{source} (p2p)")
    if not isinstance(spec, str) or not spec.strip():
        raise InputError("p2p must be a --comm spec (a p2p comm-trace CSV, a model JSON, "
                         "alpha-beta:alpha=<s>,beta=<s/byte>) or a model object",
                         path=source, field="p2p")
    if not spec.startswith("alpha-beta:") and not Path(spec).is_absolute() \
            and source.suffix in (".json", ".yaml", ".yml"):
        spec = str(source.parent / spec)
    try:
        return load_comm_spec(spec)
    except GradschedError as exc:
        raise InputError(f"the p2p model: {exc}", path=source, field="p2p") from None


def ps_from_dict(data: dict[str, Any], source: str | Path = "<parameter server>",
                 world_size: int | None = None) -> ParameterServer:
    """Build a :class:`ParameterServer` from ``{workers, servers, colocated,
    partition_bytes, p2p}``; ``workers`` defaults to ``world_size``. Every problem is an
    :class:`InputError` naming ``source`` and the field."""
    source = Path(source)
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(map(repr, unknown))}; known: "
                         + ", ".join(FIELDS), path=source, field=unknown[0])
    for field in ("servers", "p2p"):
        if field not in data:
            raise InputError(f"missing field {field!r}", path=source, field=field)
    if "workers" not in data and world_size is None:
        raise InputError("missing field 'workers' (or give --world-size)", path=source,
                         field="workers")
    workers = _int_field(data, "workers", source, world_size)
    if world_size is not None and workers != world_size:
        raise InputError(f"{workers} workers, but world size {world_size} was asked for",
                         path=source, field="workers")
    servers = _int_field(data, "servers", source, None)
    partition = _int_field(data, "partition_bytes", source, DEFAULT_PARTITION_BYTES)
    colocated = _bool_field(data, "colocated", source)
    placement = data.get("placement", "round-robin")
    if placement not in PLACEMENTS:
        raise InputError(f"must be one of {', '.join(PLACEMENTS)}, got {placement!r}",
                         path=source, field="placement")
    p2p = _load_p2p(data["p2p"], source)
    try:
        return ParameterServer(workers, servers, colocated, p2p, partition, placement)
    except ConfigError as exc:
        field = next((f for f in FIELDS if f in str(exc)), None)
        if "co-located" in str(exc):
            field = "servers"
        raise InputError(str(exc), path=source, field=field) from None


def parse_inline(text: str) -> dict[str, Any]:
    """``servers=S,colocated=0|1[,workers=P][,partition_bytes=B][,placement=round-robin|
    balanced],p2p=<comm spec>``; ``p2p``
    comes last and takes the rest of the text (an alpha-beta spec holds commas)."""
    head, sep, p2p = text.partition("p2p=")
    data: dict[str, Any] = {"p2p": p2p} if sep else {}
    for part in filter(None, (x.strip() for x in head.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise InputError(f"expected key=value, got {part!r}", path="--ps", field=part)
        data[key.strip()] = value.strip()
    return data


def load_ps(spec: str | Path, world_size: int | None = None) -> ParameterServer:
    """A PS description: a JSON/YAML file (``.json``, ``.yaml``, ``.yml``) or the inline
    form of :func:`parse_inline`."""
    text = str(spec)
    path = Path(text)
    if path.suffix not in (".json", ".yaml", ".yml"):
        if "=" not in text:  # meant as a file: say so, not "expected key=value"
            what = ("a folder" if path.is_dir() else "a file without .json/.yaml/.yml"
                    if path.exists() else "neither a file nor an inline spec")
            raise InputError(f"{what}: --ps takes a parameter-server .json/.yaml/.yml "
                             "file or servers=S,colocated=0|1,p2p=<comm spec>", path=path)
        return ps_from_dict(parse_inline(text), "--ps", world_size)
    if path.suffix == ".json":
        data = read_json(path, missing="parameter-server file not found")
    else:
        data = _read_yaml(path)
    return ps_from_dict(data, path, world_size)


def _read_yaml(path: Path) -> dict[str, Any]:
    data = read_yaml(path, missing="parameter-server file not found")
    if not isinstance(data, dict):
        raise InputError("expected a mapping with servers, colocated, p2p", path=path)
    return data


def require_ps_model(model: CommModel, planner: str) -> PSModel:
    """The PS planners plan for a parameter server only: refuse any other model."""
    if not isinstance(model, PSModel):
        raise ConfigError(f"planner {planner!r} plans for a parameter server: give the comm "
                          f"model as --ps (costmodel/ps.py), not a {model.kind!r} model")
    return model
