"""The pre-launch gate: what every multi-process command checks before any rank starts.

One place that every command starting ranks calls, so that a check added for one launcher
holds for all of them: ``gradsched run`` (its ``--plan`` and ``--ddp-caps-from`` plans),
``shard run`` (its plan files), ``shard measure``, ``reexec run`` (every case's plans,
before the first case starts) and ``advise
--validate`` (with ``--sharded`` too; plans made from the compute trace, which a refusal
names); under ``--torchrun``, ``run``, ``capture iteration`` and ``capture comm`` check the
environment first:

* **plans against the model** (:func:`check_plans`): a DDP-style :class:`~gradsched.plan.Plan`
  names exactly the model's trainable parameters (:mod:`gradsched.runtime.coverage`); a
  :class:`~gradsched.plan_sharded.ShardedPlan`'s units name only the model's parameters,
  each once, each unit whole modules. The model is built on PyTorch's meta device (no
  memory, no data). A plan naming ``../../../etc/shadow`` or another model's layers ends
  with one line naming the plan file, before any process exists;
* **the torchrun environment** (:func:`check_torchrun_env`): ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` (when set), ``MASTER_ADDR`` and ``MASTER_PORT`` are
  checked before ``init_process_group`` (which would answer ``RANK=abc`` with a C++ stack
  or wait for minutes on an address that does not resolve): ASCII integers in range, rank
  below the world size, a port in 1..65535, an address that resolves within a short
  timeout. A refusal is a :class:`~gradsched.errors.ConfigError` naming the variable.

The resources (CPUs, processes, memory) are the admission's (:mod:`gradsched.admission`),
asked by the same commands before a rank starts. A rank that fails after the launch ends
the command with one line too (:func:`gradsched.distributed.launch`).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gradsched.errors import ConfigError, InputError
from gradsched.limits import MAX_RANKS
from gradsched.plan import Plan
from gradsched.plan_sharded import ShardedPlan, covering_modules
from gradsched.runtime.coverage import (
    check_names_are_parameters,
    check_plan_covers_model,
    model_parameters,
)

RESOLVE_TIMEOUT_S = 2.0
"""Longest wait for ``MASTER_ADDR`` to resolve before the launch is refused."""


def check_plans(plans: Sequence[tuple[str, Plan | ShardedPlan]], *, model: str,
                batch_size: int, seq_len: int | None,
                trainable: Mapping[str, int] | None = None,
                hint: str = "", trace: tuple[str, Sequence[str]] | None = None
                ) -> dict[str, int]:
    """Refuse any plan (``(source, plan)`` pairs) that does not fit ``model``, built on the
    meta device; return the model's trainable parameters (name -> elements). ``hint`` ends
    a refusal (say, which ``--model`` to give). ``trace``: ``(source, names)`` of the
    compute trace the plans were made from, whose names must be the model's parameters too
    (a sharded plan leaves the root module's tensors unnamed: its units alone cannot tell
    a trace of another model)."""
    if trainable is None:
        trainable = model_parameters(model, batch_size, seq_len)
    names = list(trainable)
    if trace is not None:
        check_names_are_parameters(trace[1], trainable, model=model, source=trace[0],
                                   hint=hint, what="trace")
    for source, plan in plans:
        if isinstance(plan, ShardedPlan):
            check_sharded_plan_covers_model(plan, names, model=model, source=source)
        else:
            check_plan_covers_model(plan, trainable, model=model, source=source, hint=hint)
    return dict(trainable)


def check_sharded_plan_covers_model(plan: ShardedPlan, names: Sequence[str], *, model: str,
                                    source: str) -> None:
    """A sharded plan's units name only ``model``'s parameters (``names``), each in one
    unit, and each unit is whole modules (FSDP2 shards modules)."""
    known = set(names)
    for index, unit in enumerate(plan.units):
        for tensor in unit.tensors:
            if tensor not in known:
                raise InputError(
                    f"sharded plan '{plan.algorithm}': unit {index} names {tensor!r}, which "
                    f"is not a trainable parameter of model {model!r} (a plan made for "
                    "another model?)", path=source, field=f"units[{index}].tensors")
    plan.check_covers(names, source=source)
    if plan.mixed_precision is not None and plan.mixed_precision.float8_all_gather:
        raise InputError(f"sharded plan '{plan.algorithm}': a float8 all-gather needs torchao "
                         "and a GPU's float8 matmuls; the CPU FSDP2 runner cannot run it",
                         path=source, field="mixed_precision.float8_all_gather")
    for index, unit in enumerate(plan.units):
        try:
            covering_modules(unit.tensors, names)
        except InputError as exc:
            raise InputError(f"unit {index}: {exc.reason}", path=source,
                             field=f"units[{index}].tensors") from None


@dataclass(frozen=True)
class TorchrunEnv:
    """The checked torchrun environment."""

    rank: int
    world_size: int
    master_addr: str
    master_port: int


def _integer(env: Mapping[str, str], name: str, low: int, high: int) -> int:
    raw = env.get(name)
    if raw is None:
        raise ConfigError(f"--torchrun: ${name} is not set; start this command with torchrun")
    text = raw.strip()
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        raise ConfigError(f"--torchrun: ${name}={raw!r} is not an integer in {low}..{high}")
    return int(text)


def _resolves(host: str, timeout_s: float) -> str | None:
    """None when ``host`` resolves within ``timeout_s``, else the reason it did not."""
    outcome: list[str | None] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            outcome.append(None)
        except (OSError, UnicodeError) as exc:
            outcome.append(str(exc) or type(exc).__name__)

    thread = threading.Thread(target=lookup, name="resolve-master", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not outcome:
        return f"no answer within {timeout_s:g} s"
    return outcome[0]


def check_torchrun_env(env: Mapping[str, str] | None = None, *,
                       world_size: int | None = None,
                       resolve_timeout_s: float = RESOLVE_TIMEOUT_S) -> TorchrunEnv:
    """The torchrun variables of ``env`` (default: this process's), checked before the
    process group is initialised; a bad one raises :class:`ConfigError` naming it.
    ``world_size``: the command's ``--world-size``, which ``WORLD_SIZE`` must equal."""
    env = os.environ if env is None else env
    world = _integer(env, "WORLD_SIZE", 1, MAX_RANKS)
    if world_size is not None and world != world_size:
        raise ConfigError(f"--world-size {world_size} but torchrun started WORLD_SIZE={world} "
                          "ranks (nnodes x nproc-per-node)")
    rank = _integer(env, "RANK", 0, MAX_RANKS - 1)
    if rank >= world:
        raise ConfigError(f"--torchrun: $RANK={rank} is not below $WORLD_SIZE={world}")
    if "LOCAL_WORLD_SIZE" in env:
        local_world = _integer(env, "LOCAL_WORLD_SIZE", 1, world)
        if "LOCAL_RANK" in env and _integer(env, "LOCAL_RANK", 0, world - 1) >= local_world:
            raise ConfigError(f"--torchrun: $LOCAL_RANK={env['LOCAL_RANK']} is not below "
                              f"$LOCAL_WORLD_SIZE={local_world}")
    elif "LOCAL_RANK" in env:
        _integer(env, "LOCAL_RANK", 0, world - 1)
    port = _integer(env, "MASTER_PORT", 1, 65535)
    addr = env.get("MASTER_ADDR")
    if addr is None:
        raise ConfigError("--torchrun: $MASTER_ADDR is not set; start this command with "
                          "torchrun")
    if not addr.strip() or any(c.isspace() or not c.isprintable() for c in addr):
        raise ConfigError(f"--torchrun: $MASTER_ADDR={addr!r} is not a host name or address")
    reason = _resolves(addr, resolve_timeout_s)
    if reason is not None:
        raise ConfigError(f"--torchrun: $MASTER_ADDR={addr!r} does not resolve ({reason})")
    return TorchrunEnv(rank=rank, world_size=world, master_addr=addr, master_port=port)


__all__ = ["RESOLVE_TIMEOUT_S", "TorchrunEnv", "check_plans", "check_sharded_plan_covers_model",
           "check_torchrun_env"]
