"""``Plan``: the output of every planner and the input of the replay and the executor.

A plan is an ordered list of buckets. Each bucket holds member tensors (by name), the
collective that reduces them (``all_reduce``, or ``rs_ag`` = reduce-scatter during backward
plus all-gather before the next forward, as in DeAR), an optional partition into equal
chunks (ByteScheduler/P3), an optional priority (smaller = more urgent), an optional
collective algorithm, and an optional ``release_s``: the earliest launch time measured from
the start of backward (Horovod's fusion cycles release tensors only at cycle boundaries).
``update`` says whether the optimizer runs once after all communication (``global``, as
PyTorch DDP) or per layer just before that layer's next forward (``per_layer``, as
ByteScheduler and DeAR). ``channels`` (optional) is the number
of collectives that may run at once, sharing bandwidth. ``credit_bytes`` (optional) is
ByteScheduler's credit: a collective may start only while fewer bytes than this are in
flight (``bytecore.py`` L238-251 of bytedance/byteps' ByteScheduler); with a credit and no
``channels`` the credit alone limits concurrency. ``ag_issue`` says when the all-gathers
of ``rs_ag`` buckets are issued: ``eager`` (all after backward, in forward order) or
``lookahead`` (DeAR's reference code: the first group's after the reduce-scatters, then
group g+1's in the forward pre-hook of group g; see :mod:`gradsched.replay.engine`).

Sharded optimizers (version 3). A ``reduce_scatter`` bucket reduce-scatters its
gradients and gathers nothing back (each rank keeps the shard it updates: Megatron-LM's
distributed optimizer, DeepSpeed ZeRO-1/2). ``optimizer`` says who updates what:
``replicated`` (default: every rank steps every parameter), ``sharded`` (each rank steps
``1/P`` of the parameters, so the global step costs ``update_s / P``, then the
``param_sync`` collectives run back to back before the next forward) or ``bucket_owner``
(torch's ``hook_with_zero_step``: after backward, bucket k's all-reduce is waited for,
its owner rank ``k mod P`` steps it and broadcasts it; see
:mod:`gradsched.replay.engine`). ``param_sync`` is a list of :class:`ParamSync`: one
collective each (``all_gather`` or ``broadcast``) of a number of parameter bytes.

The JSON form is versioned (``format_version``); loading an unknown version fails clearly.
Version 2 added ``ag_issue`` and ``credit_bytes``; a version-1 file reads as ``eager``
with no credit. Version 3 added ``optimizer``, ``param_sync`` and ``reduce_scatter``
buckets; a plan that uses none of them is still written as version 2 (the lowest version
that holds it), so every earlier plan's JSON is unchanged.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gradsched.errors import InputError
from gradsched.io import read_json, write_json_atomic
from gradsched.limits import (
    MAX_BYTES,
    MAX_COLLECTIVES_PER_ITERATION,
    MAX_SECONDS,
    in_range,
    is_real,
    physical_memory_bytes,
)

FORMAT = "gradsched.plan"
FORMAT_VERSION = 3
READ_VERSIONS = (1, 2, 3)
BUCKET_COLLECTIVES = ("all_reduce", "rs_ag", "reduce_scatter")
PLAN_KEYS = frozenset({"format", "format_version", "algorithm", "knobs", "update", "channels",
                       "ag_issue", "credit_bytes", "info", "buckets", "optimizer",
                       "param_sync"})
"""The keys of a plan JSON (:meth:`Plan.to_dict`); any other is refused when loaded."""
BUCKET_KEYS = frozenset({"tensors", "collective", "chunks", "priority", "release_s",
                         "algorithm"})
"""The keys of one bucket (:meth:`Bucket.to_dict`)."""
BUCKET_ALGORITHMS = ("default", "lp", "ring", "mst", "rd", "rhd", "hierarchical", "ps")
"""What a bucket's ``algorithm`` may name: the library's own collective (``default``),
one of gradsched's all-reduce algorithms (:mod:`gradsched.collectives`) or a reducer of
the runtime (two-level ``hierarchical``, parameter-server ``ps``); any but ``default``
needs an ``all_reduce`` bucket. Checked when a plan is loaded, before any rank starts."""
UPDATE_MODES = ("global", "per_layer")
AG_ISSUE_MODES = ("eager", "lookahead")
OPTIMIZER_MODES = ("replicated", "sharded", "bucket_owner")
"""Who steps which parameters (module docstring, "Sharded optimizers")."""
SYNC_COLLECTIVES = ("all_gather", "broadcast")
"""What a :class:`ParamSync` may run."""

Collective = Literal["all_reduce", "rs_ag", "reduce_scatter"]
UpdateMode = Literal["global", "per_layer"]
AgIssue = Literal["eager", "lookahead"]


@dataclass(frozen=True)
class Bucket:
    """Tensors reduced together by one collective (or ``chunks`` collectives)."""

    tensors: tuple[str, ...]
    collective: Collective = "all_reduce"
    chunks: int = 1
    priority: int | None = None
    algorithm: str = "default"
    release_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tensors": list(self.tensors), "collective": self.collective,
                               "chunks": self.chunks}
        if self.priority is not None:
            out["priority"] = self.priority
        if self.release_s is not None:
            out["release_s"] = self.release_s
        if self.algorithm != "default":
            out["algorithm"] = self.algorithm
        return out


@dataclass(frozen=True)
class ParamSync:
    """One collective of the parameter synchronisation after a sharded step: ``nbytes``
    parameter bytes all-gathered (or broadcast from their owner)."""

    collective: str
    nbytes: float

    def to_dict(self) -> dict[str, Any]:
        return {"collective": self.collective, "bytes": self.nbytes}


@dataclass(frozen=True)
class Plan:
    """An ordered list of buckets plus the algorithm and knobs that produced it."""

    algorithm: str
    buckets: tuple[Bucket, ...]
    knobs: dict[str, Any] = field(default_factory=dict)
    update: UpdateMode = "global"
    channels: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    ag_issue: AgIssue = "eager"
    credit_bytes: float | None = None
    optimizer: str = "replicated"
    param_sync: tuple[ParamSync, ...] = ()

    @property
    def uses_v3(self) -> bool:
        """Whether the plan needs format version 3 (a sharded optimizer's fields)."""
        return (self.optimizer != "replicated" or bool(self.param_sync)
                or any(b.collective == "reduce_scatter" for b in self.buckets))

    def to_dict(self) -> dict[str, Any]:
        out = self._to_dict_v2()
        if self.uses_v3:
            out["format_version"] = FORMAT_VERSION
            out["optimizer"] = self.optimizer
            out["param_sync"] = [s.to_dict() for s in self.param_sync]
        return out

    def _to_dict_v2(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": 2,
            "algorithm": self.algorithm,
            "knobs": self.knobs,
            "update": self.update,
            "channels": self.channels,
            "ag_issue": self.ag_issue,
            "credit_bytes": self.credit_bytes,
            "info": self.info,
            "buckets": [b.to_dict() for b in self.buckets],
        }

    def save(self, path: str | Path) -> None:
        """Write the plan JSON atomically."""
        write_json_atomic(path, self.to_dict())

    @property
    def n_buckets(self) -> int:
        return len(self.buckets)

    @property
    def n_collectives(self) -> int:
        """Collectives launched per iteration: ``chunks`` per bucket, twice for ``rs_ag``,
        plus the parameter synchronisation (``param_sync``, or one broadcast per bucket
        with ``optimizer="bucket_owner"``)."""
        sync = len(self.buckets) if self.optimizer == "bucket_owner" else len(self.param_sync)
        return sum(b.chunks * (2 if b.collective == "rs_ag" else 1)
                   for b in self.buckets) + sync

    def check_resources(self, world_size: int | None = None, element_bytes: int = 4,
                        memory_bytes: int | None = None, source: str | None = None,
                        numel: Mapping[str, int] | None = None) -> None:
        """Refuse a plan whose resource use is out of bounds before anything runs (a plan
        with ``chunks: 1e9`` would drive the machine into the OOM killer).

        Collectives per iteration are at most :data:`MAX_COLLECTIVES_PER_ITERATION`. With
        ``world_size``, the executor's buffers on each of ``world_size`` ranks of this
        machine (:meth:`buffer_bytes`) must fit in ``memory_bytes`` (default: the installed
        memory).
        """
        where = {"path": source, "field": "buckets"}
        if self.n_collectives > MAX_COLLECTIVES_PER_ITERATION:
            raise InputError(f"plan '{self.algorithm}' launches {self.n_collectives} "
                             f"collectives per iteration (sum of chunks); at most "
                             f"{MAX_COLLECTIVES_PER_ITERATION} are supported", **where)
        if world_size is None:
            return
        total = world_size * self.buffer_bytes(world_size, element_bytes, numel)
        memory = memory_bytes if memory_bytes is not None else physical_memory_bytes()
        if memory is not None and total > memory:
            raise InputError(f"plan '{self.algorithm}' needs {total / 2**30:.3g} GiB of "
                             f"gradient buffers on {world_size} ranks (chunks x tensors x "
                             f"ranks, with the executor's padding); this machine has "
                             f"{memory / 2**30:.3g} GiB", **where)

    def buffer_bytes(self, world_size: int, element_bytes: int = 4,
                     numel: Mapping[str, int] | None = None) -> int:
        """Bytes of the executor's flat buffers on one rank, as
        :class:`gradsched.runtime.executor` lays them out (``_Bucket``): an ``all_reduce``
        bucket holds ``ceil(payload / chunks) x chunks`` elements, an ``rs_ag`` bucket
        ``ceil(payload / (chunks x P)) x P x chunks`` plus its shards (``1/P`` of that).
        ``payload`` is the members' element count (from ``numel``; without it, 0, which
        leaves the padding alone as a lower bound)."""
        total = 0
        for bucket in self.buckets:
            payload = sum(numel.get(t, 0) for t in bucket.tensors) if numel else 0
            if bucket.collective in ("rs_ag", "reduce_scatter"):  # the executor gathers both
                per_chunk = max(math.ceil(payload / (bucket.chunks * world_size)), 1)
                elements = per_chunk * (world_size + 1) * bucket.chunks
            else:
                elements = max(math.ceil(payload / bucket.chunks), 1) * bucket.chunks
            total += elements * element_bytes
        return total

    def check_covers(self, names: list[str] | tuple[str, ...]) -> None:
        """Every tensor of the trace is in exactly one bucket, and nothing else is."""
        seen: dict[str, int] = {}
        known = set(names)
        for index, bucket in enumerate(self.buckets):
            if not bucket.tensors:
                raise InputError(f"plan '{self.algorithm}': bucket {index} is empty",
                                 field="buckets")
            for name in bucket.tensors:
                if name not in known:
                    raise InputError(f"plan '{self.algorithm}': bucket {index} names tensor "
                                     f"{name!r} that the trace does not have", field="tensors")
                if name in seen:
                    raise InputError(f"plan '{self.algorithm}': tensor {name!r} is in buckets "
                                     f"{seen[name]} and {index}", field="tensors")
                seen[name] = index
        missing = [n for n in names if n not in seen]
        if missing:
            raise InputError(f"plan '{self.algorithm}': {len(missing)} tensors are in no bucket, "
                             f"first {missing[0]!r}", field="buckets")

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> Plan:
        """Parse and check the JSON form."""
        if not isinstance(data, dict):
            raise InputError(f"a plan is a JSON object, not {type(data).__name__}",
                             path=source)
        if data.get("format") != FORMAT:
            raise InputError(f"not a gradsched plan (format={data.get('format')!r})",
                             path=source, field="format")
        unknown = sorted(set(data) - PLAN_KEYS)
        if unknown:  # a misspelt key ("bukets") must not read as an empty plan
            raise InputError(f"unknown key {unknown[0]!r}; a plan has "
                             f"{', '.join(sorted(PLAN_KEYS))}", path=source, field=unknown[0])
        version = data.get("format_version")
        if version not in READ_VERSIONS:
            raise InputError(f"plan format version {version!r} is not supported (this "
                             f"gradsched reads {', '.join(map(str, READ_VERSIONS))})",
                             path=source, field="format_version")
        update = data.get("update", "global")
        if update not in UPDATE_MODES:
            raise InputError(f"update must be one of {UPDATE_MODES}", path=source, field="update")
        channels = data.get("channels")
        if channels is not None and (not isinstance(channels, int) or isinstance(channels, bool)
                                     or not 1 <= channels <= 1024):
            raise InputError("channels must be an integer in [1, 1024] or null", path=source,
                             field="channels")
        ag_issue, credit = _v2_fields(data, source, version)
        optimizer, param_sync = _v3_fields(data, source, version)
        raw_buckets = data.get("buckets", [])
        if not isinstance(raw_buckets, list):
            raise InputError("buckets must be a list", path=source, field="buckets")
        for name in ("knobs", "info"):
            if not isinstance(data.get(name, {}), dict):
                raise InputError(f"{name} must be an object", path=source, field=name)
        buckets = []
        for index, raw in enumerate(raw_buckets):
            buckets.append(_bucket_from_dict(raw, source, index))
        name = data.get("algorithm", "")
        if not isinstance(name, str):
            raise InputError("algorithm must be a string (the planner's name)", path=source,
                             field="algorithm")
        plan = cls(algorithm=name, buckets=tuple(buckets),
                   knobs=dict(data.get("knobs", {})), update=update, channels=channels,
                   info=dict(data.get("info", {})), ag_issue=ag_issue, credit_bytes=credit,
                   optimizer=optimizer, param_sync=param_sync)
        if version < 3 and plan.uses_v3:
            raise InputError("reduce_scatter buckets need plan format version 3",
                             path=source, field="buckets")
        check_optimizer(plan, source)
        plan.check_resources(source=source)
        return plan

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        data = read_json(path, missing="plan file not found")
        return cls.from_dict(data, source=str(path))


def _v2_fields(data: dict[str, Any], source: str, version: int) -> tuple[AgIssue, float | None]:
    """``ag_issue`` and ``credit_bytes`` (format version 2; absent from version 1)."""
    if version == 1:
        for name in ("ag_issue", "credit_bytes"):
            if name in data:
                raise InputError(f"{name} needs plan format version 2", path=source,
                                 field=name)
        return "eager", None
    ag_issue = data.get("ag_issue", "eager")
    if ag_issue not in AG_ISSUE_MODES:
        raise InputError(f"ag_issue must be one of {AG_ISSUE_MODES}", path=source,
                         field="ag_issue")
    credit = data.get("credit_bytes")
    if credit is not None and (not is_real(credit)
                               or not in_range(credit, 0, MAX_BYTES, low_open=True)):
        raise InputError(f"credit_bytes must be a number in (0, {MAX_BYTES}] or null",
                         path=source,
                         field="credit_bytes")
    return ag_issue, float(credit) if credit is not None else None


def _v3_fields(data: dict[str, Any], source: str,
               version: int) -> tuple[str, tuple[ParamSync, ...]]:
    """``optimizer`` and ``param_sync`` (format version 3; absent before)."""
    if version < 3:
        for name in ("optimizer", "param_sync"):
            if name in data:
                raise InputError(f"{name} needs plan format version 3", path=source,
                                 field=name)
        return "replicated", ()
    optimizer = data.get("optimizer", "replicated")
    if optimizer not in OPTIMIZER_MODES:
        raise InputError(f"optimizer must be one of {OPTIMIZER_MODES}", path=source,
                         field="optimizer")
    raw = data.get("param_sync", [])
    if not isinstance(raw, list) or len(raw) > MAX_COLLECTIVES_PER_ITERATION:
        raise InputError(f"param_sync must be a list of at most "
                         f"{MAX_COLLECTIVES_PER_ITERATION} collectives", path=source,
                         field="param_sync")
    out = []
    for index, item in enumerate(raw):
        where = f"param_sync[{index}]"
        if not isinstance(item, dict) or set(item) != {"collective", "bytes"}:
            raise InputError("a param_sync entry is an object with collective and bytes",
                             path=source, field=where)
        if item["collective"] not in SYNC_COLLECTIVES:
            raise InputError(f"collective must be one of {SYNC_COLLECTIVES}", path=source,
                             field=f"{where}.collective")
        nbytes = item["bytes"]
        if not is_real(nbytes) or not in_range(nbytes, 0, MAX_BYTES):
            raise InputError(f"bytes must be a number in [0, {MAX_BYTES}]", path=source,
                             field=f"{where}.bytes")
        out.append(ParamSync(item["collective"], float(nbytes)))
    return optimizer, tuple(out)


def check_optimizer(plan: Plan, source: str | None = None) -> None:
    """The sharded-optimizer fields agree with each other and with the update (a plan
    built in code skips :meth:`Plan.from_dict`); ``source`` (the plan file) is named in
    every refusal."""
    if plan.optimizer not in OPTIMIZER_MODES:
        raise InputError(f"plan '{plan.algorithm}': optimizer must be one of "
                         f"{OPTIMIZER_MODES}, not {plan.optimizer!r}", path=source,
                         field="optimizer")
    if plan.optimizer != "replicated" and plan.update != "global":
        raise InputError(f"plan '{plan.algorithm}': optimizer={plan.optimizer} needs "
                         "update=global", path=source, field="optimizer")
    if plan.param_sync and plan.optimizer != "sharded":
        raise InputError(f"plan '{plan.algorithm}': param_sync needs optimizer=sharded",
                         path=source, field="param_sync")
    if plan.optimizer == "bucket_owner" and any(b.collective != "all_reduce"
                                                for b in plan.buckets):
        raise InputError(f"plan '{plan.algorithm}': optimizer=bucket_owner (torch's "
                         "hook_with_zero_step) needs all_reduce buckets", path=source,
                         field="optimizer")
    for sync in plan.param_sync:
        if sync.collective not in SYNC_COLLECTIVES or not (
                math.isfinite(sync.nbytes) and 0 <= sync.nbytes <= MAX_BYTES):
            raise InputError(f"plan '{plan.algorithm}': bad param_sync entry {sync!r}",
                             path=source, field="param_sync")


def _bucket_from_dict(raw: dict[str, Any], source: str, index: int) -> Bucket:
    where = f"buckets[{index}]"
    if not isinstance(raw, dict):
        raise InputError("a bucket is a JSON object", path=source, field=where)
    unknown = sorted(set(raw) - BUCKET_KEYS)
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r}; a bucket has "
                         f"{', '.join(sorted(BUCKET_KEYS))}", path=source,
                         field=f"{where}.{unknown[0]}")
    tensors = raw.get("tensors")
    if not isinstance(tensors, list) or not all(isinstance(t, str) for t in tensors):
        raise InputError("tensors must be a list of names", path=source, field=f"{where}.tensors")
    collective = raw.get("collective", "all_reduce")
    if collective not in BUCKET_COLLECTIVES:
        raise InputError(f"collective must be one of {BUCKET_COLLECTIVES}", path=source,
                         field=f"{where}.collective")
    chunks = raw.get("chunks", 1)
    if (not isinstance(chunks, int) or isinstance(chunks, bool)
            or not 1 <= chunks <= MAX_COLLECTIVES_PER_ITERATION):
        raise InputError(f"chunks must be an integer in [1, {MAX_COLLECTIVES_PER_ITERATION}], "
                         f"got {chunks!r}", path=source, field=f"{where}.chunks")
    priority = raw.get("priority")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)
                                 or abs(priority) > 2**62):
        raise InputError("priority must be an integer (|priority| <= 2**62)", path=source,
                         field=f"{where}.priority")
    release = raw.get("release_s")
    if release is not None and (not is_real(release) or not in_range(release, 0, MAX_SECONDS)):
        raise InputError(f"release_s must be a number in [0, {MAX_SECONDS:g}] seconds",
                         path=source, field=f"{where}.release_s")
    algorithm = raw.get("algorithm", "default")
    if not isinstance(algorithm, str) or algorithm not in BUCKET_ALGORITHMS:
        raise InputError(f"unknown bucket algorithm {algorithm!r}; known: "
                         f"{', '.join(BUCKET_ALGORITHMS)}", path=source,
                         field=f"{where}.algorithm")
    if algorithm != "default" and collective != "all_reduce":
        raise InputError(f"algorithm {algorithm!r} needs an all_reduce bucket, not "
                         f"{collective!r}", path=source, field=f"{where}.algorithm")
    return Bucket(tuple(tensors), collective, chunks, priority, algorithm,
                  float(release) if release is not None else None)


def launch_order(plan: Plan, bucket_numel: list[int]) -> list[tuple[int, int]]:
    """The fixed issue sequence of the all-reduce / reduce-scatter items of ``plan``.

    Items are ``(bucket, chunk)``. Without priorities: plan order, chunks in order. With
    priorities: one channel; bucket k becomes ready at time k; a chunk lasts
    ``chunk_numel / mean bucket numel``; a free channel starts the ready item with the
    smallest (priority, ready time, bucket, chunk), priority ``inf`` when unset (the key of
    the replay's one-channel priority schedule). The result depends on the plan and the
    sizes only, so it is the same on every rank.
    """
    items = [(k, c) for k, b in enumerate(plan.buckets) for c in range(b.chunks)]
    if all(b.priority is None for b in plan.buckets):
        return items
    mean = max(sum(bucket_numel) / max(len(bucket_numel), 1), 1.0)
    pending = sorted(items, reverse=True)  # pop from the end: earliest bucket first
    ready: list[tuple[float, float, int, int]] = []
    order: list[tuple[int, int]] = []
    now = 0.0
    while pending or ready:
        while pending and pending[-1][0] <= now + 1e-12:
            k, c = pending.pop()
            prio = plan.buckets[k].priority
            heapq.heappush(ready, (float(prio) if prio is not None else math.inf,
                                   float(k), k, c))
        if not ready:
            now = float(pending[-1][0])
            continue
        _, _, k, c = heapq.heappop(ready)
        order.append((k, c))
        now += bucket_numel[k] / plan.buckets[k].chunks / mean
    return order
