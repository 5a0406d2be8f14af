"""What a collective sweep measures: the message sizes (geometric, rounded to each
collective's quantum), the collectives, nccl-tests' bus-bandwidth factors, the settings
(:class:`SweepConfig`) and the time bounds derived from them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from gradsched.admission import check_memory, check_points, check_ranks
from gradsched.distributed.shaping import parse_rate
from gradsched.errors import ConfigError, GradschedError
from gradsched.limits import MAX_SECONDS
from gradsched.traces.columns import COLLECTIVES

DEFAULT_COLLECTIVES: tuple[str, ...] = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")
ELEMENT_BYTES = 4  # fp32
IN_PLACE_ONLY: frozenset[str] = frozenset({"all_reduce", "broadcast", "reduce"})
P2P = "p2p"
"""Ping-pong between rank 0 and rank 1 (see the module docstring)."""
SPLIT: frozenset[str] = frozenset({"all_gather", "reduce_scatter"})
BUFFERS_PER_RANK = 3
"""Message-sized buffers one rank holds at once (a collective's input, output and the
checked warm-up's expected values)."""


class SweepError(GradschedError, RuntimeError):
    """A sweep could not be run or produced no usable measurement."""


def geometric_sizes(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """``min_bytes, min_bytes*factor, ...`` up to and including ``max_bytes`` (rounded).

    Sizes that round to one already listed are skipped in one step, and more than
    :data:`~gradsched.admission.MAX_SWEEP_POINTS` sizes are refused before any is formed:
    a factor just above 1 (``1.0000001``) once took hours to enumerate."""
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ConfigError(f"need 1 <= min-bytes <= max-bytes, got {min_bytes} and {max_bytes}")
    if not (math.isfinite(factor) and factor > 1):
        raise ConfigError(f"factor must be a finite number > 1, got {factor:g}")
    steps = math.log(max_bytes / min_bytes) / math.log(factor) if max_bytes > min_bytes else 0
    check_points("the size sweep", int(min(steps + 1, max_bytes - min_bytes + 1)),
                 proceed="raise --factor or narrow --min-bytes/--max-bytes")
    sizes: list[int] = []
    value = float(min_bytes)
    while value <= max_bytes * (1 + 1e-12):
        size = round(value)
        if not sizes or size > sizes[-1]:
            sizes.append(size)
            value *= factor
        else:  # jump to the first term that rounds above the last size
            k = math.ceil(math.log((sizes[-1] + 0.5) / min_bytes) / math.log(factor))
            value = max(min_bytes * factor ** k, value * factor)
    return sizes


def size_quantum(collective: str, world_size: int) -> int:
    """The multiple that ``bytes`` must be for ``collective``: one fp32, or one per rank."""
    return ELEMENT_BYTES * (world_size if collective in SPLIT else 1)


def round_sizes(collective: str, sizes: Sequence[int], world_size: int
                ) -> tuple[list[int], list[str]]:
    """Round ``sizes`` up to the collective's quantum; return (unique sizes, notes)."""
    quantum = size_quantum(collective, world_size)
    out: list[int] = []
    changed: list[str] = []
    for size in sizes:
        rounded = -(-size // quantum) * quantum
        if rounded != size:
            changed.append(f"{size}->{rounded}")
        if not out or rounded > out[-1]:
            out.append(rounded)
    notes = []
    if changed:
        notes.append(f"{collective}: sizes rounded up to multiples of {quantum} bytes "
                     f"(fp32 x {quantum // ELEMENT_BYTES}): " + ", ".join(changed)
                     + (" (duplicates after rounding dropped)" if len(out) < len(sizes) else ""))
    return out, notes


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``collective`` on ``world_size`` ranks (1 for a
    point-to-point message: its bytes cross one link once)."""
    n = world_size
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in SPLIT:
        return (n - 1) / n
    if collective in ("broadcast", "reduce", P2P):
        return 1.0
    raise ConfigError(f"unknown collective {collective!r}")


def parse_collectives(text: str) -> list[str]:
    """``all_reduce,all_gather`` (or ``all``) -> validated, de-duplicated list."""
    names = list(DEFAULT_COLLECTIVES) if text.strip() == "all" else [
        part.strip() for part in text.split(",") if part.strip()]
    bad = [n for n in names if n not in COLLECTIVES]
    if bad or not names:
        raise ConfigError(f"collectives {text!r}: choose from {', '.join(COLLECTIVES)} "
                          "(comma-separated) or all")
    return list(dict.fromkeys(names))


@dataclass
class SweepConfig:
    """What to measure and how."""

    world_size: int
    backend: str = "gloo"
    collectives: list[str] = field(default_factory=lambda: list(DEFAULT_COLLECTIVES))
    min_bytes: int = 4
    max_bytes: int = 1 << 20
    factor: float = 2.0
    iters: int = 50
    warmup: int = 3
    min_iters: int = 3
    time_budget_s: float = 1.0
    in_place: bool = False
    threads_per_rank: int = 1
    cluster_rate: str | None = None
    cluster_prefix: str | None = None
    init_timeout_s: float = 60.0
    op_timeout_s: float | None = None
    deadline_s: float | None = None
    note: str | None = None
    oversubscribe: bool = False

    def validate(self) -> None:
        """Raise :class:`ConfigError` on an impossible setting."""
        if self.world_size < 1:
            raise ConfigError("world size must be >= 1")
        if self.backend not in ("gloo", "nccl"):
            raise ConfigError(f"backend {self.backend!r}: gloo or nccl")
        if self.iters < 1 or self.warmup < 1 or self.min_iters < 1:
            raise ConfigError("iters, warmup and min-iters must be >= 1 (the first warm-up "
                              "operation also checks the result)")
        if not 0 < self.time_budget_s <= MAX_SECONDS:  # NaN fails too
            raise ConfigError(f"time-budget-s must be in (0, {MAX_SECONDS:g}] s")
        for name in ("init_timeout_s", "op_timeout_s", "deadline_s"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= MAX_SECONDS:
                raise ConfigError(f"{name.replace('_', '-')} must be in (0, {MAX_SECONDS:g}] s")
        if self.threads_per_rank < 1:
            raise ConfigError("threads per rank must be >= 1")
        sizes = geometric_sizes(self.min_bytes, self.max_bytes, self.factor)
        names = parse_collectives(",".join(self.collectives))
        check_points("the collective sweep", len(sizes) * len(names),
                     proceed="raise --factor, narrow the sizes or measure fewer collectives")
        if P2P in self.collectives and self.world_size != 2:
            raise ConfigError(f"p2p is a ping-pong between two ranks: use --world-size 2 "
                              f"(got {self.world_size})")

    def admit(self, local_ranks: int | None = None) -> None:
        """Refuse, before any rank starts, more local ranks (default: the world size) than
        this machine runs (:func:`~gradsched.admission.check_ranks`) or buffers beyond its
        memory: about :data:`BUFFERS_PER_RANK` times the largest message on every rank
        (gloo; with nccl the buffers are in device memory and only the ranks are checked)."""
        ranks = self.world_size if local_ranks is None else local_ranks
        check_ranks("capture comm", ranks, self.threads_per_rank,
                    oversubscribe=self.oversubscribe)
        if self.backend == "nccl":  # the buffers are in device memory
            return
        sizes, _ = self.plan()
        biggest = max(max(v) for v in sizes.values())
        check_memory("capture comm", BUFFERS_PER_RANK * biggest, ranks,
                     detail=f"{BUFFERS_PER_RANK} x the largest message, {biggest} bytes, per "
                     "rank", proceed="lower --max-bytes or --world-size")

    def plan(self) -> tuple[dict[str, list[int]], list[str]]:
        """Sizes per collective (rounded to each one's quantum) and the rounding notes."""
        base = geometric_sizes(self.min_bytes, self.max_bytes, self.factor)
        sizes: dict[str, list[int]] = {}
        notes: list[str] = []
        for coll in self.collectives:
            sizes[coll], more = round_sizes(coll, base, self.world_size)
            notes += more
        return sizes, notes


def _floor_bandwidth(config: SweepConfig) -> float:
    """A pessimistic bandwidth (bytes/s) to bound timeouts: half the shaped rate, else 20 MB/s."""
    if config.cluster_rate is not None:
        return parse_rate(config.cluster_rate) / 8 / 2
    return 20e6


def _pessimistic_op_s(config: SweepConfig, nbytes: int) -> float:
    return 2.0 * nbytes / _floor_bandwidth(config) + 1e-3


def timeouts(config: SweepConfig, sizes: dict[str, list[int]]) -> tuple[float, float]:
    """(per-collective timeout, whole-run deadline) in seconds, generous but finite."""
    biggest = max(max(v) for v in sizes.values())
    op = config.op_timeout_s or max(60.0, 5 * _pessimistic_op_s(config, biggest))
    if config.deadline_s is not None:
        return op, config.deadline_s
    total = config.init_timeout_s + 30.0
    for values in sizes.values():
        for nbytes in values:
            total += config.time_budget_s * 1.5 + 0.5
            total += (config.min_iters + 2) * _pessimistic_op_s(config, nbytes)
    return op, total


__all__ = ["DEFAULT_COLLECTIVES", "ELEMENT_BYTES", "IN_PLACE_ONLY", "P2P", "SPLIT",
           "SweepConfig", "SweepError", "bus_factor", "geometric_sizes", "parse_collectives",
           "round_sizes", "size_quantum", "timeouts"]
