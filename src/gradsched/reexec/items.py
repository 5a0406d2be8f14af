"""The names of the items a re-execution runs that its readers single out: PyTorch DDP's
default (its own item, ``ddp-native-default``; in data measured before it had one, the
25 MiB cap ``ddp-native-25``). The analysis and the report both read them from here."""

from __future__ import annotations

from typing import Any

DDP_DEFAULT = "ddp-native-default"  # DDP without bucket_cap_mb (25 MiB, 1 MiB first)
DDP_DEFAULT_BEFORE = "ddp-native-25"  # data measured before the default had its own item


def ddp_default_label(algorithms: Any) -> str:
    """The label of DDP's default in a case: its own item, or (older data) the 25 MiB cap."""
    return DDP_DEFAULT if DDP_DEFAULT in set(algorithms) else DDP_DEFAULT_BEFORE
