"""The timing protocol's per-rank records, checked where the launcher reads them back.

Each rank of :func:`gradsched.runtime.rounds.rounds_task` returns ``{"rank": r, "runs":
[...]}``, one record per run (every item once per round, in the round's order), which the
launcher reads from the rank's result file (:func:`gradsched.distributed.launch.launch`,
through the input gate) or gathers under ``torchrun``. Before any time is used,
:func:`check_records` checks every record against what was asked: the rank is the one
that wrote it, the runs are the rounds x items asked for, in the same order on every
rank, each item and round one that exists, every time a duration (finite, 0 to
:data:`~gradsched.limits.MAX_SECONDS`, :mod:`gradsched.readback`) and a worker's times as
many as the timed iterations. A record cut short or edited is an
:class:`~gradsched.errors.InputError` naming the rank's result file and the field. No
torch here: the check runs in the launcher.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gradsched.distributed.rank_files import result_name
from gradsched.errors import InputError
from gradsched.readback import count, mapping, number, rank_in, seconds, sequence, text

MAX_LOAD = 1e6
"""Largest 1-minute load average taken as read (far above any machine's)."""


def check_records(results: Sequence[Any], *, items: int, rounds: int, iters: int,
                  workers: int, servers: int = 0) -> list[Mapping[str, Any]]:
    """``results`` (one per rank: ``workers`` timing ranks, then ``servers`` parameter
    servers) when every record is one the protocol writes (module docstring)."""
    ranks = workers + servers
    if len(results) != ranks:
        raise ValueError(f"{len(results)} results for {ranks} ranks")  # the launcher's bug
    order: list[Any] = []
    for r, result in enumerate(results):
        where = result_name(r)
        record = mapping(result, where, "")
        if rank_in(record.get("rank"), ranks, where, "rank") != r:
            raise InputError(f"rank {record['rank']} wrote the result of rank {r}",
                             path=where, field="rank")
        runs = sequence(record.get("runs"), where, "runs", rounds * items)
        for k, run in enumerate(runs):
            _check_run(mapping(run, where, f"runs[{k}]"), where, f"runs[{k}]", items=items,
                       rounds=rounds, times=iters if r < workers else None)
        mine = [(run["round"], run["item"]) for run in runs]
        if r and mine != order:
            at = next(k for k, (a, b) in enumerate(zip(mine, order, strict=True)) if a != b)
            raise InputError(f"round {mine[at][0]} item {mine[at][1]} where rank 0 ran "
                             f"round {order[at][0]} item {order[at][1]} (every rank runs "
                             "the same order)", path=where, field=f"runs[{at}]")
        order = order or mine
    return list(results)


def _check_run(run: Mapping[str, Any], where: str, field: str, *, items: int, rounds: int,
               times: int | None) -> None:
    count(run.get("round"), where, f"{field}.round", high=rounds - 1)
    count(run.get("position"), where, f"{field}.position", high=items - 1)
    count(run.get("item"), where, f"{field}.item", high=items - 1)
    values = sequence(run.get("times"), where, f"{field}.times", times)
    for i, value in enumerate(values):
        seconds(value, where, f"{field}.times[{i}]")
    seconds(run.get("cpu_s"), where, f"{field}.cpu_s")
    number(run.get("load"), where, f"{field}.load", high=MAX_LOAD)
    text(run.get("started_at"), where, f"{field}.started_at")
    busy = sequence(run.get("busy"), where, f"{field}.busy", 2)
    wall = sequence(run.get("wall"), where, f"{field}.wall", 2)
    for i in range(2):
        number(busy[i], where, f"{field}.busy[{i}]", high=float(2**62), optional=True)
        number(wall[i], where, f"{field}.wall[{i}]", high=float(2**62))
    if wall[1] < wall[0]:
        raise InputError(f"the run ends ({wall[1]!r}) before it starts ({wall[0]!r})",
                         path=where, field=f"{field}.wall")
    count(run.get("peak_bytes"), where, f"{field}.peak_bytes", optional=True)
    count(run.get("n_collectives"), where, f"{field}.n_collectives", optional=True)


__all__ = ["MAX_LOAD", "check_records"]
