"""The order in which a measurement runs its items: every item once per round, each round in
its own seeded random order, so that neither a drift of the machine nor the item run before
it biases one item in one direction (the re-execution protocol; used by the all-reduce
re-execution and by the sharded one)."""

from __future__ import annotations

import random


def round_order(n: int, r: int, seed: int) -> list[int]:
    """Item order of round ``r``: a permutation of ``range(n)`` drawn at random from
    ``(seed, r)``, the same for every rank and every re-run with that seed."""
    return random.Random(f"reexec-order-{seed}-{r}").sample(range(n), n)


def run_order(n: int, rounds: int, seed: int) -> list[int]:
    """Item indices of ``rounds`` rounds in run order (:func:`round_order` of each)."""
    return [i for r in range(rounds) for i in round_order(n, r, seed)]


__all__ = ["round_order", "run_order"]
